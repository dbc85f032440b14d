//! Python analysis: decoding, parsing, per-module summaries, module resolution, dependency slices,
//! token counts, and the re-indenting of definitions (aware of multi-line string literals).
//!
//! Architecture invariant: this module is pure. It knows nothing about salsa, the cache, the
//! file system or the configuration file; text goes in and plain data comes out.

pub mod decode;
pub mod docstring;
pub mod extract;
pub mod guard;
pub mod mutate;
pub mod platform;
pub mod resolve;
pub mod summary;
pub mod tokens;

/// Where the header of the definition in `text` ends: just after the `:` that closes the
/// `def` line (decorators, parameters, annotations and defaults may span lines, and hold
/// strings, brackets and comments). `None` when `text` holds no `def` header.
pub fn def_header_end(text: &str) -> Option<usize> {
    let bytes = text.as_bytes();
    let mut i = 0;
    let mut depth = 0i32;
    let mut seen_def = false;
    while i < bytes.len() {
        let b = bytes[i];
        match b {
            b'#' => {
                while i < bytes.len() && bytes[i] != b'\n' {
                    i += 1;
                }
                continue;
            }
            b'\'' | b'"' => {
                let triple = bytes[i..].starts_with(&[b, b, b]);
                let quote: &[u8] = if triple {
                    &bytes[i..i + 3]
                } else {
                    &bytes[i..i + 1]
                };
                i += quote.len();
                while i < bytes.len() && !bytes[i..].starts_with(quote) {
                    i += if bytes[i] == b'\\' { 2 } else { 1 };
                }
                i += quote.len();
                continue;
            }
            b'(' | b'[' | b'{' => depth += 1,
            b')' | b']' | b'}' => depth -= 1,
            b':' if depth == 0 && seen_def => return Some(i + 1),
            b'd' if depth == 0
                && !seen_def
                && text[i..].starts_with("def")
                && (i == 0 || !is_ident(bytes[i - 1]))
                && bytes.get(i + 3).is_some_and(|c| !is_ident(*c)) =>
            {
                seen_def = true;
            }
            _ => {}
        }
        i += 1;
    }
    None
}

fn is_ident(b: u8) -> bool {
    b.is_ascii_alphanumeric() || b == b'_'
}

/// The definition `def_text` (decorators, signature, body) as a problem statement shows it: its
/// header, and `spec` as its docstring in place of the body, indented as the body was.
pub fn signature_stub(def_text: &str, spec: Option<&str>) -> String {
    let Some(end) = def_header_end(def_text) else {
        return def_text.to_owned();
    };
    let header = &def_text[..end];
    let def_line = header
        .lines()
        .find(|l| {
            let t = l.trim_start();
            t.starts_with("def ") || t.starts_with("async def ")
        })
        .unwrap_or(header);
    let indent = format!(
        "{}    ",
        &def_line[..def_line.len() - def_line.trim_start().len()]
    );
    let spec = spec
        .unwrap_or_default()
        .replace('\\', "\\\\")
        .replace("\"\"\"", "\\\"\\\"\\\"");
    let mut out = format!("{header}\n{indent}\"\"\"");
    for (n, line) in spec.trim().lines().enumerate() {
        if n > 0 {
            out.push('\n');
            if !line.trim().is_empty() {
                out.push_str(&indent);
            }
        }
        out.push_str(line);
    }
    if spec.trim().lines().count() > 1 {
        out.push('\n');
        out.push_str(&indent);
    }
    if out.ends_with('"') {
        out.pop();
        out.push_str("\\\"");
    }
    out.push_str("\"\"\"\n");
    out
}

/// The byte ranges of the string literals among `tokens` (f- and t-strings whole, from their
/// start to their end token): where a line break is part of a value.
pub fn string_ranges<'t>(
    tokens: impl IntoIterator<Item = &'t ruff_python_ast::token::Token>,
) -> Vec<(usize, usize)> {
    use ruff_python_ast::token::TokenKind;
    use ruff_text_size::Ranged;
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

/// The string literal ranges of `text` on its own ([`string_ranges`] of its tokens). An
/// indented definition will do: the parser recovers from the indentation and keeps lexing.
pub fn strings_in(text: &str) -> Vec<(usize, usize)> {
    let parsed =
        ruff_python_parser::parse_unchecked_source(text, ruff_python_ast::PySourceType::Python);
    string_ranges(parsed.tokens().iter())
}

/// The ranges of `strings` that meet `text[start..end]`, relative to `start`: the string
/// literals of a block cut out of a larger text.
pub fn strings_within(strings: &[(usize, usize)], start: usize, end: usize) -> Vec<(usize, usize)> {
    strings
        .iter()
        .filter(|&&(a, b)| a < end && b > start)
        .map(|&(a, b)| (a.saturating_sub(start), b - start))
        .collect()
}

/// `text` with an empty line after each line of `lines` (1-based, inclusive) but the last: the
/// same code with its lines moved apart, so that each line and the distance between any two
/// differ. A line break inside a string literal (`strings`: byte ranges in `text`) or after a
/// `\` continuation is kept as it is, so that no value and no statement changes: only line
/// numbers do. Validation checks the original in this form, to drop harnesses of code whose
/// behaviour depends on where its lines are (pyparsing's `_trim_arity` counts its own lines).
pub fn spread_lines(text: &str, strings: &[(usize, usize)], lines: (u32, u32)) -> String {
    let mut out = String::with_capacity(text.len() + (lines.1.saturating_sub(lines.0) as usize));
    let mut offset = 0;
    for (i, line) in text.split_inclusive('\n').enumerate() {
        out.push_str(line);
        offset += line.len();
        let number = i as u32 + 1;
        let break_at = offset - 1;
        let body = line.trim_end_matches(['\n', '\r']);
        if number >= lines.0
            && number < lines.1
            && line.ends_with('\n')
            && !body.ends_with('\\')
            && !strings.iter().any(|&(a, b)| a <= break_at && break_at < b)
        {
            out.push_str(if line.ends_with("\r\n") { "\r\n" } else { "\n" });
        }
    }
    out
}

/// Removes the common leading white space of `text`'s lines, as `textwrap.dedent` does for
/// uniformly indented code, but for the lines that start inside a string literal (`strings`:
/// byte ranges in `text`, from [`string_ranges`] or [`strings_in`]): their text, leading white
/// space included, is the string's value, so they are kept exactly as written and do not count
/// for the margin. Blank lines outside strings become empty; every line ends with a newline.
pub fn dedent(text: &str, strings: &[(usize, usize)]) -> String {
    reindent(text, strings, "")
}

/// `text` moved to the indentation `indent` (a `def` moved into or out of a class): [`dedent`],
/// with `indent` put before every non-blank line that does not start inside a string literal.
pub fn reindent(text: &str, strings: &[(usize, usize)], indent: &str) -> String {
    let mut lines = Vec::new();
    let mut offset = 0;
    for line in text.split_inclusive('\n') {
        let inside = strings.iter().any(|&(a, b)| a < offset && offset < b);
        let body = line.strip_suffix('\n').unwrap_or(line);
        lines.push((body.strip_suffix('\r').unwrap_or(body), inside));
        offset += line.len();
    }
    let margin = lines
        .iter()
        .filter(|(l, inside)| !inside && !l.trim().is_empty())
        .map(|(l, _)| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut out = String::with_capacity(text.len() + lines.len() * indent.len());
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

    #[test]
    fn spreading_lines_moves_them_apart_but_keeps_strings_and_continuations() {
        let text = "x = 1\ndef f(a):\n    s = \"\"\"a\nb\"\"\" + \\\n        f'{a}'\n    return s\r\ny = 2\n";
        let spread = spread_lines(text, &strings_in(text), (2, 6));
        assert_eq!(
            spread,
            "x = 1\ndef f(a):\n\n    s = \"\"\"a\nb\"\"\" + \\\n        f'{a}'\n\n    return s\r\ny = 2\n"
        );
        // Only line numbers change: the module means the same.
        let parsed = |t: &str| {
            ruff_python_parser::parse_module(t)
                .unwrap()
                .into_syntax()
                .body
                .len()
        };
        assert_eq!(parsed(&spread), parsed(text));
        assert_eq!(spread_lines(text, &strings_in(text), (1, 1)), text);
    }

    #[test]
    fn a_stub_keeps_the_header_and_puts_the_spec_in_place_of_the_body() {
        let def = "@cache\ndef f(a: str = \"x:)\", # (:\n      b=(1, 2)) -> dict[str, int]:\n    '''Old.'''\n    return {a: b}\n";
        let end = def_header_end(def).unwrap();
        assert!(
            def[..end].ends_with("-> dict[str, int]:"),
            "{}",
            &def[..end]
        );
        let stub = signature_stub(def, Some("Maps `a` to \"b\"\n\nwith \\ and \"\"\"."));
        assert!(stub.starts_with("@cache\ndef f(a: str"), "{stub}");
        assert!(!stub.contains("return"), "{stub}");
        assert!(
            stub.contains("    \"\"\"Maps `a` to \"b\"\n\n    with \\\\ and \\\"\\\"\\\"."),
            "{stub}"
        );
        let method = "    def m(self):\n        return 1\n";
        assert_eq!(
            signature_stub(method, Some("Says \"hi\"")),
            "    def m(self):\n        \"\"\"Says \"hi\\\"\"\"\"\n"
        );
        assert_eq!(def_header_end("x = 1\n"), None);
    }

    /// `dedent` with the string ranges of `text` on its own.
    fn dedented(text: &str) -> String {
        dedent(text, &strings_in(text))
    }

    #[test]
    fn dedent_keeps_the_lines_of_multi_line_strings_as_written() {
        // A method whose string's continuation lines are at column 0: they do not count for the
        // margin, so the method is dedented (and then parses), the string's value unchanged.
        let method = "    def m(self):\n        text = '''a\nb\n  c'''\n        return text\n";
        let out = dedented(method);
        assert_eq!(
            out,
            "def m(self):\n    text = '''a\nb\n  c'''\n    return text\n"
        );
        assert!(ruff_python_parser::parse_module(&out).is_ok(), "{out}");
        // Lines deeper than the def keep every space: the value is not cut by the margin.
        let deeper = "    def m(self):\n        return \"\"\"x\n            y\n\n  \n\"\"\"\n";
        assert_eq!(
            dedented(deeper),
            "def m(self):\n    return \"\"\"x\n            y\n\n  \n\"\"\"\n"
        );
        // f-strings whole, and a line that opens a string is code, dedented as such.
        let f = "    def m(self):\n        s = f'''{self!r}\n    {1 +\n1}'''\n        t = \\\n            '''\n  k'''\n        return s\n";
        assert_eq!(
            dedented(f),
            "def m(self):\n    s = f'''{self!r}\n    {1 +\n1}'''\n    t = \\\n        '''\n  k'''\n    return s\n"
        );
        // Without strings it is textwrap's dedent; blank lines become empty.
        assert_eq!(
            dedented("  if x:\n      y()\n    \n  z()\n"),
            "if x:\n    y()\n\nz()\n"
        );
        // Moved to another indentation: the same lines kept.
        assert_eq!(
            reindent(method, &strings_in(method), "\t"),
            "\tdef m(self):\n\t    text = '''a\nb\n  c'''\n\t    return text\n"
        );
    }
}
