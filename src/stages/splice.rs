//! Splicing a candidate into its module: the candidate's `def` (or, for a method, its `def` or
//! its whole class) replaces the original's in the module's text, and the candidate's own
//! imports go just before it. What every candidate check runs (`stages::checkpath`).

use ruff_python_ast::Stmt;
use ruff_text_size::Ranged;

use crate::python::extract::LineIndex;

/// The module's text with the definition at `def` replaced by the candidate's, and the
/// candidate's imports placed before it.
pub fn splice(
    source: &str,
    summary: &crate::python::summary::ModuleSummary,
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
    let protected = string_interiors(parsed.tokens().iter());
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
            &protected,
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

/// The byte ranges of the candidate's string literals (f- and t-strings whole), where a line
/// break is part of a value: the lines that start inside them are never re-indented.
fn string_interiors<'t>(
    tokens: impl Iterator<Item = &'t ruff_python_ast::token::Token>,
) -> Vec<(usize, usize)> {
    use ruff_python_ast::token::TokenKind;
    let mut out = Vec::new();
    let mut open: Vec<usize> = Vec::new();
    for token in tokens {
        let (start, end) = (token.start().to_usize(), token.end().to_usize());
        match token.kind() {
            TokenKind::String => out.push((start, end)),
            TokenKind::FStringStart | TokenKind::TStringStart => open.push(start),
            TokenKind::FStringEnd | TokenKind::TStringEnd => {
                if let Some(s) = open.pop() {
                    out.push((s, end));
                }
            }
            _ => {}
        }
    }
    out
}

/// `text[start..end]` (whole lines) moved to the indentation `indent`: its common margin
/// removed and `indent` put in its place, on every line but those that start inside a string
/// literal (`protected`), which are kept as written, since their text is the string's value.
fn move_block(
    text: &str,
    start: usize,
    end: usize,
    protected: &[(usize, usize)],
    indent: &str,
) -> String {
    let mut lines = Vec::new();
    let mut offset = start;
    for line in text[start..end].split('\n') {
        let inside = protected.iter().any(|&(a, b)| a < offset && offset < b);
        lines.push((line.trim_end_matches('\r'), inside));
        offset += line.len() + 1;
    }
    let margin = lines
        .iter()
        .filter(|(l, inside)| !inside && !l.trim().is_empty())
        .map(|(l, _)| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut out = String::new();
    for (line, inside) in lines {
        if inside {
            out.push_str(line);
        } else if !line.trim().is_empty() {
            out.push_str(indent);
            out.push_str(line.get(margin..).unwrap_or_else(|| line.trim_start()));
        }
        out.push('\n');
    }
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn spliced(source: &str, qualname: &str, candidate: &str) -> String {
        let summary = crate::python::extract::summarize(source).unwrap();
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
}
