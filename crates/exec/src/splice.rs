//! Splicing a candidate into its module: the candidate's `def` (or, for a method, its `def` or
//! its whole class) replaces the original's in the module's text, and the candidate's own
//! imports go just before it. What every candidate check runs (`stages::checkpath`).

use ruff_python_ast::Stmt;
use ruff_text_size::Ranged;

use r2e_python::extract::LineIndex;

/// The module's text with the definition at `def` replaced by the candidate's, and the
/// candidate's imports placed before it.
pub fn splice(
    source: &str,
    summary: &r2e_python::summary::ModuleSummary,
    def: usize,
    candidate: &str,
    qualname: &str,
) -> std::result::Result<String, String> {
    let parsed = ruff_python_parser::parse_module(candidate).map_err(|e| {
        let (line, col) = LineIndex::new(candidate).line_col(candidate, e.location.start());
        format!(
            "the candidate does not compile: syntax error at {line}:{col}: {}",
            e.error
        )
    })?;
    let body = &parsed.syntax().body;
    let mut imports = String::new();
    for stmt in body {
        if matches!(stmt, Stmt::Import(_) | Stmt::ImportFrom(_)) {
            imports.push_str(&candidate[stmt.range()]);
            imports.push('\n');
        }
    }
    let (class, name) = match qualname.split_once('.') {
        Some((c, n)) => (Some(c), n),
        None => (None, qualname),
    };
    let iface = &summary.interface.defs[def];
    let layout = &summary.layout.defs[def];
    let strings = r2e_python::string_ranges(parsed.tokens().iter());
    let full = |stmt: &Stmt, indent: &str| -> String {
        // From the start of the line of its first decorator.
        let start = match stmt {
            Stmt::FunctionDef(f) => f.decorator_list.first().map_or(stmt.start(), |d| d.start()),
            Stmt::ClassDef(c) => c.decorator_list.first().map_or(stmt.start(), |d| d.start()),
            _ => stmt.start(),
        };
        let line_start = candidate[..start.to_usize()]
            .rfind('\n')
            .map_or(0, |i| i + 1);
        move_block(
            candidate,
            line_start,
            stmt.end().to_usize(),
            &strings,
            indent,
        )
    };
    // A whole class, for a method, when the candidate gives one.
    if let Some(class_name) = class
        && let Some(stmt) = body
            .iter()
            .find(|s| matches!(s, Stmt::ClassDef(c) if c.name.id.as_str() == class_name))
    {
        let class_ix = iface.class.expect("methods have a class") as usize;
        let chunk = summary.layout.defs[class_ix].chunk;
        return Ok(format!(
            "{}{imports}{}\n{}",
            &source[..chunk.start as usize],
            full(stmt, ""),
            &source[chunk.end as usize..]
        ));
    }
    let chunk = layout.chunk;
    let original = &source[chunk.start as usize..chunk.end as usize];
    let indent: String = original
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect();
    let find_def = |stmts: &[Stmt]| -> Option<String> {
        stmts
            .iter()
            .find(|s| matches!(s, Stmt::FunctionDef(f) if f.name.id.as_str() == name))
            .map(|s| full(s, &indent))
    };
    let indented = find_def(body)
        .or_else(|| {
            body.iter().find_map(|s| match s {
                Stmt::ClassDef(c) => find_def(&c.body),
                _ => None,
            })
        })
        .ok_or_else(|| format!("the candidate defines no `{name}`"))?;
    match class {
        None => Ok(format!(
            "{}{imports}{indented}{}",
            &source[..chunk.start as usize],
            &source[chunk.end as usize..]
        )),
        Some(_) => {
            // Imports go before the enclosing class, at module level.
            let class_ix = iface.class.expect("methods have a class") as usize;
            let class_start = summary.layout.defs[class_ix].chunk.start as usize;
            Ok(format!(
                "{}{imports}{}{indented}{}",
                &source[..class_start],
                &source[class_start..chunk.start as usize],
                &source[chunk.end as usize..]
            ))
        }
    }
}

/// `text[start..end]` (whole lines) moved to the indentation `indent`: `python::reindent`
/// (dedent, then indent), with the candidate's string literals (`strings`, byte ranges in
/// `text`) shifted to the block, so that the lines that start inside one keep their text, the
/// string's value.
fn move_block(
    text: &str,
    start: usize,
    end: usize,
    strings: &[(usize, usize)],
    indent: &str,
) -> String {
    let within = r2e_python::strings_within(strings, start, end);
    r2e_python::reindent(&text[start..end], &within, indent)
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spliced(source: &str, qualname: &str, candidate: &str) -> String {
        let summary = r2e_python::extract::summarize(source).unwrap();
        let def = summary
            .interface
            .defs
            .iter()
            .position(|d| d.qualname == qualname)
            .unwrap();
        splice(source, &summary, def, candidate, qualname).unwrap()
    }

    #[test]
    fn a_methods_multi_line_strings_keep_their_value() {
        let source =
            "class C:\n    def f(self):\n        return 1\n\n    def g(self):\n        return 2\n";
        // A def alone, at column 0: its lines move to the class's indentation, but the string's
        // second line is part of the value and stays as written.
        let out = spliced(
            source,
            "C.f",
            "def f(self):\n    text = '''a\nb\n  c'''\n    return text\n",
        );
        assert_eq!(
            out,
            "class C:\n    def f(self):\n        text = '''a\nb\n  c'''\n        return text\n\n    def g(self):\n        return 2\n"
        );
        // An f-string's lines too.
        let out = spliced(
            source,
            "C.f",
            "def f(self):\n    return f\"\"\"x\n{self!r}\n\"\"\"\n",
        );
        assert!(
            out.contains("    def f(self):\n        return f\"\"\"x\n{self!r}\n\"\"\"\n"),
            "{out}"
        );
    }

    #[test]
    fn a_function_moves_whole_and_a_class_in_place() {
        let source = "def f():\n    return 1\n\nclass C:\n    def m(self):\n        return 0\n";
        let out = spliced(
            source,
            "f",
            "import os\n\ndef f():\n    s = \"\"\"\n  k\"\"\"\n    return s\n",
        );
        assert_eq!(
            out,
            "import os\ndef f():\n    s = \"\"\"\n  k\"\"\"\n    return s\n\nclass C:\n    def m(self):\n        return 0\n"
        );
        let out = spliced(
            source,
            "C.m",
            "class C:\n    def m(self):\n        return '''1\n2'''\n",
        );
        assert!(
            out.ends_with("class C:\n    def m(self):\n        return '''1\n2'''\n\n"),
            "{out:?}"
        );
    }

    #[test]
    fn move_block_is_dedent_then_indent_and_keeps_string_lines() {
        // A method in its class, its string's lines at column 0 and deeper than the def.
        let text =
            "class C:\n    def f(self):\n        s = '''a\nb\n            c'''\n        return s\n";
        let strings = r2e_python::strings_in(text);
        let start = text.find("    def").unwrap();
        let out = move_block(text, start, text.len() - 1, &strings, "");
        assert_eq!(
            out,
            "def f(self):\n    s = '''a\nb\n            c'''\n    return s\n"
        );
        // The same as `python::dedent` of the block on its own, and it parses.
        assert_eq!(
            out,
            r2e_python::dedent(&text[start..], &r2e_python::strings_in(&text[start..]))
        );
        assert!(ruff_python_parser::parse_module(&out).is_ok(), "{out}");
        // Deeper: the code moves, the string's lines stay.
        assert_eq!(
            move_block(text, start, text.len() - 1, &strings, "        "),
            "        def f(self):\n            s = '''a\nb\n            c'''\n            return s\n"
        );
        // Spliced from an answer whose def is alone at column 0, into the class.
        let source = "class C:\n    def f(self):\n        return 1\n";
        assert_eq!(
            spliced(source, "C.f", &out),
            "class C:\n    def f(self):\n        s = '''a\nb\n            c'''\n        return s\n"
        );
    }
}
