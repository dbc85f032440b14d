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
    let full = |stmt: &Stmt| -> String {
        // From the start of the line of its first decorator.
        let start = match stmt {
            Stmt::FunctionDef(f) => f.decorator_list.first().map_or(stmt.start(), |d| d.start()),
            Stmt::ClassDef(c) => c.decorator_list.first().map_or(stmt.start(), |d| d.start()),
            _ => stmt.start(),
        };
        let line_start = candidate[..start.to_usize()]
            .rfind('\n')
            .map_or(0, |i| i + 1);
        crate::python::dedent(&candidate[line_start..stmt.end().to_usize()])
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
            full(stmt),
            &source[chunk.end as usize..]
        ));
    }
    let find_def = |stmts: &[Stmt]| -> Option<String> {
        stmts
            .iter()
            .find(|s| matches!(s, Stmt::FunctionDef(f) if f.name.id.as_str() == name))
            .map(full)
    };
    let text = find_def(body)
        .or_else(|| {
            body.iter().find_map(|s| match s {
                Stmt::ClassDef(c) => find_def(&c.body),
                _ => None,
            })
        })
        .ok_or_else(|| format!("the candidate defines no `{name}`"))?;
    let chunk = layout.chunk;
    let original = &source[chunk.start as usize..chunk.end as usize];
    let indent: String = original
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect();
    let indented: String = text
        .lines()
        .map(|l| {
            if l.trim().is_empty() {
                "\n".to_string()
            } else {
                format!("{indent}{l}\n")
            }
        })
        .collect();
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
