//! Where a message points: `file:line:col` of a span of the pipeline's text, and the spans of
//! keys checked after parsing (which carry no span of their own).

use std::ops::Range;
use std::path::Path;

use crate::error::Error;

/// The text of a pipeline and its file: where errors point.
pub(super) struct Source<'a> {
    pub(super) text: &'a str,
    pub(super) file: &'a Path,
}

impl Source<'_> {
    /// Bad input at `span` (the start of the file when unknown), as `file:line:col: msg`.
    pub(super) fn at(&self, span: Option<Range<usize>>, msg: &str) -> Error {
        Error::input(format!("{}: {msg}", self.place(span)))
    }

    /// `file:line:col` of `span` (the start of the file when unknown).
    pub(super) fn place(&self, span: Option<Range<usize>>) -> String {
        let (line, col) = span.map_or((1, 1), |s| line_col(self.text, s.start));
        format!("{}:{line}:{col}", self.file.display())
    }
}

/// 1-based line and column (in characters) of byte `offset`.
pub fn line_col(text: &str, offset: usize) -> (usize, usize) {
    let offset = offset.min(text.len());
    let before = &text[..offset];
    let line = before.matches('\n').count() + 1;
    let col = before.rsplit('\n').next().map_or(0, |l| l.chars().count()) + 1;
    (line, col)
}

/// The span of the first `key =` in the text, for values checked after parsing.
pub(super) fn find_key(text: &str, key: &str) -> Option<Range<usize>> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with(key) && trimmed[key.len()..].trim_start().starts_with('=') {
            let start = offset + (line.len() - trimmed.len());
            return Some(start..start + key.len());
        }
        offset += line.len();
    }
    None
}

/// The span of the first `key` written as `key = `, `a.b.key = ` or `key.x = `.
pub(super) fn find_dotted_key(text: &str, key: &str) -> Option<Range<usize>> {
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let mut rest = line.trim_start();
        loop {
            if let Some(after) = rest.strip_prefix(key)
                && (after.trim_start().starts_with('=') || after.starts_with('.'))
            {
                let start = offset + (line.len() - rest.len());
                return Some(start..start + key.len());
            }
            match rest.split_once('.') {
                Some((head, tail))
                    if !head.is_empty()
                        && head
                            .chars()
                            .all(|c| c.is_ascii_alphanumeric() || c == '_' || c == '-') =>
                {
                    rest = tail;
                }
                _ => break,
            }
        }
        offset += line.len();
    }
    None
}

/// The span of `key =` inside the `[section]` table (or as `section.key =`), else anywhere.
pub(super) fn find_section_key(text: &str, section: &str, key: &str) -> Option<Range<usize>> {
    // `key@N`: its N-th occurrence (0-based), as in the N-th table of an array of tables.
    let (key, mut skip) = match key.split_once('@') {
        Some((k, n)) => (k, n.parse::<usize>().unwrap_or(0)),
        None => (key, 0),
    };
    let (header, array_header) = (format!("[{section}]"), format!("[[{section}]]"));
    let mut offset = 0;
    let mut inside = false;
    for line in text.split_inclusive('\n') {
        let trimmed = line.trim_start();
        if trimmed.starts_with('[') {
            let t = trimmed.trim_end();
            inside = t.starts_with(&header) || t.starts_with(&array_header);
        } else if inside || trimmed.starts_with(&format!("{section}.")) {
            let rest = trimmed
                .strip_prefix(&format!("{section}."))
                .unwrap_or(trimmed);
            if rest.starts_with(key) && rest[key.len()..].trim_start().starts_with('=') {
                if skip == 0 {
                    let start = offset + (line.len() - rest.len());
                    return Some(start..start + key.len());
                }
                skip -= 1;
            }
        }
        offset += line.len();
    }
    find_key(text, key)
}
