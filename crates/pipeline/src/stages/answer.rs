//! Taking a candidate out of a model's answer: the `def` of the right name in a code block (for
//! a method, the `def` alone or within its class), with the block's imports. An answer without
//! one holds no code (`no_code`), a failed sample, not an error.
//!
//! In `evaluate` the extraction is an action of its own ([`extract`], `keys::AnswerKey`): keyed
//! by the answer's text, the target's qualname and the extractor's version, so the same answer
//! is taken apart once, whichever model, sample or round it came from.

use ruff_python_ast::Stmt;
use ruff_text_size::Ranged;

use r2e_core::cache::Cache;
use r2e_core::hash::Hash;
use r2e_core::keys::{AnswerKey, EXTRACTOR};

/// The candidate in `answer` for `qualname` ([`candidate`]), from the action cache or taken out
/// now and stored; returns whether it was taken out now.
pub fn extract(cache: &Cache, answer: &str, qualname: &str) -> (Option<String>, bool) {
    let key = AnswerKey {
        extractor: EXTRACTOR,
        answer: Hash::of_bytes(answer.as_bytes()),
        qualname,
    };
    if let Some(hit) = cache.get_action::<_, Option<String>>(&key) {
        return (hit, false);
    }
    let found = candidate(answer, qualname);
    if let Err(e) = cache.put_action(&key, &found) {
        eprintln!("warning: cannot store a candidate extraction: {e}");
    }
    (found, true)
}

/// The candidate in `answer` for the function `qualname`: its imports and its `def`, dedented.
pub fn candidate(answer: &str, qualname: &str) -> Option<String> {
    let (class, name) = match qualname.rsplit_once('.') {
        Some((c, n)) => (Some(c), n),
        None => (None, qualname),
    };
    let mut blocks = code_blocks(answer);
    if blocks.is_empty() {
        blocks.push(answer.to_owned());
    }
    let found = blocks.iter().find_map(|b| {
        find_def(b, class, name).or_else(|| find_def(&cut_after(b, name)?, class, name))
    });
    // Code that defines the function but does not parse is still a candidate: it fails to
    // compile (`unrunnable`, with the syntax error), which is not the same as no code.
    found.or_else(|| {
        let needle = format!("def {name}(");
        blocks.into_iter().find(|b| {
            b.lines().any(|l| {
                l.trim_start().starts_with(&needle) || l.contains(&format!("async {needle}"))
            })
        })
    })
}

/// The fenced blocks of an answer that hold Python (```python, ```py or a bare fence), in
/// order; an unclosed last block runs to the end.
pub fn code_blocks(answer: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut open: Option<(bool, String)> = None;
    for line in answer.split_inclusive('\n') {
        let fence = line.trim_start().starts_with("```");
        match (&mut open, fence) {
            (None, true) => {
                let lang = line.trim_start()[3..].trim().to_ascii_lowercase();
                let python = matches!(lang.as_str(), "" | "python" | "py" | "python3");
                open = Some((python, String::new()));
            }
            (Some(_), true) => {
                let (python, text) = open.take().expect("open");
                if python {
                    out.push(text);
                }
            }
            (Some((_, text)), false) => text.push_str(line),
            (None, false) => {}
        }
    }
    if let Some((true, text)) = open {
        out.push(text);
    }
    out
}

/// `text` up to the end of the last `def name` in it: cut at the first line after that `def`
/// that is indented no deeper than it (what a base model writes after the function is often
/// not Python).
fn cut_after(text: &str, name: &str) -> Option<String> {
    let needle = format!("def {name}(");
    let mut offset = 0;
    let mut def_at: Option<(usize, usize)> = None;
    let lines: Vec<&str> = text.split_inclusive('\n').collect();
    let mut starts = Vec::with_capacity(lines.len());
    for (i, line) in lines.iter().enumerate() {
        starts.push(offset);
        let t = line.trim_start();
        if t.starts_with(&needle) || t.starts_with(&format!("async {needle}")) {
            def_at = Some((i, line.len() - t.len()));
        }
        offset += line.len();
    }
    let (at, indent) = def_at?;
    for (i, line) in lines.iter().enumerate().skip(at + 1) {
        let t = line.trim_start();
        // Blank lines, comments and a signature's closing bracket stay.
        if t.is_empty() || t.starts_with('#') || t.starts_with(')') || t.starts_with(']') {
            continue;
        }
        if line.len() - t.len() <= indent {
            return Some(text[..starts[i]].to_owned());
        }
    }
    None
}

/// The `def name` at the top of `text`, or in its class `class`, with the top-level imports.
fn find_def(text: &str, class: Option<&str>, name: &str) -> Option<String> {
    let parsed = ruff_python_parser::parse_module(text).ok()?;
    let body = &parsed.syntax().body;
    let strings = r2e_python::string_ranges(parsed.tokens().iter());
    let full = |stmt: &Stmt, decorators: Option<ruff_text_size::TextSize>| -> String {
        let start = decorators.unwrap_or(stmt.start()).to_usize();
        let line_start = text[..start].rfind('\n').map_or(0, |i| i + 1);
        let end = stmt.end().to_usize();
        let within = r2e_python::strings_within(&strings, line_start, end);
        r2e_python::dedent(&text[line_start..end], &within)
    };
    let def_in = |stmts: &[Stmt]| -> Option<String> {
        stmts.iter().find_map(|s| match s {
            Stmt::FunctionDef(f) if f.name.id.as_str() == name => {
                Some(full(s, f.decorator_list.first().map(|d| d.start())))
            }
            _ => None,
        })
    };
    let found = def_in(body).or_else(|| {
        let class = class?;
        body.iter().find_map(|s| match s {
            Stmt::ClassDef(c) if c.name.id.as_str() == class => def_in(&c.body),
            _ => None,
        })
    })?;
    let imports: String = body
        .iter()
        .filter(|s| matches!(s, Stmt::Import(_) | Stmt::ImportFrom(_)))
        .map(|s| format!("{}\n", &text[s.range()]))
        .collect();
    Some(format!("{imports}{found}"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn the_def_of_the_right_name_is_taken_with_its_imports() {
        let answer = "Here:\n```python\nimport re\n\ndef helper():\n    pass\n\n@cache\ndef slug(s):\n    return re.sub('a', 'b', s)\n```\nDone.";
        assert_eq!(
            candidate(answer, "slug").unwrap(),
            "import re\n@cache\ndef slug(s):\n    return re.sub('a', 'b', s)\n"
        );
        assert_eq!(candidate(answer, "other"), None);
        // Code that does not parse, but defines the function, is a candidate that won't compile.
        let broken = "```python\ndef slug(s):\n    return s +\n```";
        assert_eq!(
            candidate(broken, "slug").unwrap(),
            "def slug(s):\n    return s +\n"
        );
        assert_eq!(candidate("I cannot do that.", "slug"), None);
        // A method: the def alone, or within its class.
        let method = "```python\nclass T:\n    x = 1\n    def m(self, a):\n        return a\n```";
        assert_eq!(
            candidate(method, "T.m").unwrap(),
            "def m(self, a):\n    return a\n"
        );
        assert_eq!(
            candidate("```\ndef m(self):\n    return 2\n```", "T.m").unwrap(),
            "def m(self):\n    return 2\n"
        );
    }

    #[test]
    fn a_method_taken_out_of_its_class_keeps_its_strings_value() {
        // Lines of the string at column 0 and deeper than the def: the def is dedented, the
        // string's lines stay as written.
        let answer = "```python\nclass T:\n    def m(self):\n        s = '''a\nb\n            c'''\n        return s\n```";
        let out = candidate(answer, "T.m").unwrap();
        assert_eq!(
            out,
            "def m(self):\n    s = '''a\nb\n            c'''\n    return s\n"
        );
        assert!(ruff_python_parser::parse_module(&out).is_ok(), "{out}");
    }

    #[test]
    fn an_extraction_is_stored_by_answer_text_and_qualname_only() {
        let dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(dir.path()).unwrap();
        let answer = "```python\nclass T:\n    def m(self):\n        return 1\n\ndef f():\n    return 2\n```";
        let f = Some("def f():\n    return 2\n".to_owned());
        // Taken out once; the same text again (another model's, another round's) is a hit.
        assert_eq!(extract(&cache, answer, "f"), (f.clone(), true));
        assert_eq!(extract(&cache, answer, "f"), (f, false));
        // Another target in the same text, another text: taken out anew.
        let m = Some("def m(self):\n    return 1\n".to_owned());
        assert_eq!(extract(&cache, answer, "T.m"), (m.clone(), true));
        assert_eq!(extract(&cache, answer, "T.m"), (m, false));
        assert_eq!(extract(&cache, "No code.", "f"), (None, true));
        assert_eq!(extract(&cache, "No code.", "f"), (None, false));
        // Three entries, in the `answer` bucket.
        let listed = cache.store().list(r2e_core::cache::Bucket::Answer).unwrap();
        assert_eq!(listed.items.len(), 3);
    }

    #[test]
    fn a_base_models_continuation_is_cut_after_the_function() {
        // The prompt's open block, its continuation, then prose that is not Python.
        let answer = "```python\ndef other():\n    pass\n\ndef f(a):\n    \"\"\"Doc.\"\"\"\n    return a + 1\n\nThis function adds one.\n";
        assert_eq!(
            candidate(answer, "f").unwrap(),
            "def f(a):\n    \"\"\"Doc.\"\"\"\n    return a + 1\n"
        );
        let blocks = code_blocks("a\n```py\nx = 1\n```\n```text\nno\n```\n```\ny = 2\n");
        assert_eq!(blocks, vec!["x = 1\n".to_owned(), "y = 2\n".to_owned()]);
    }
}
