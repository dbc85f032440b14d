//! Python analysis: decoding, parsing, per-module summaries, module resolution, dependency slices
//! and token counts.
//!
//! Architecture invariant: this module is pure. It knows nothing about salsa, the cache, the
//! file system or the configuration file; text goes in and plain data comes out.

pub mod decode;
pub mod docstring;
pub mod extract;
pub mod mutate;
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

/// Removes the common leading white space of the non-blank lines (as `textwrap.dedent` does for
/// uniformly indented code); the result ends with a newline.
pub fn dedent(text: &str) -> String {
    let margin = text
        .lines()
        .filter(|l| !l.trim().is_empty())
        .map(|l| l.len() - l.trim_start().len())
        .min()
        .unwrap_or(0);
    let mut out: String = text
        .lines()
        .map(|l| {
            if l.len() >= margin {
                &l[margin..]
            } else {
                l.trim_start()
            }
        })
        .collect::<Vec<_>>()
        .join("\n");
    out.push('\n');
    out
}

#[cfg(test)]
mod tests {
    use super::*;

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
}
