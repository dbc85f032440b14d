//! Source decoding as CPython does it: UTF-8 by default (a BOM allowed), or the encoding named by a
//! PEP 263 coding line in the first two lines.

/// Decodes the bytes of a `.py` file into text, or says why it cannot be decoded.
pub fn decode_source(bytes: &[u8]) -> Result<String, String> {
    let (bom, body) = match bytes.strip_prefix(b"\xef\xbb\xbf") {
        Some(rest) => (true, rest),
        None => (false, bytes),
    };
    let encoding = coding_cookie(body);
    let normal = encoding.as_deref().map(normal_name);
    match normal.as_deref() {
        None | Some("utf-8") => {
            std::str::from_utf8(body)
                .map(str::to_owned)
                .map_err(|e| match &encoding {
                    None => format!(
                        "not valid UTF-8 at byte {} and no PEP 263 coding line",
                        e.valid_up_to() + usize::from(bom) * 3
                    ),
                    Some(name) => format!("not valid `{name}` at byte {}", e.valid_up_to()),
                })
        }
        Some(_) if bom => {
            Err("a UTF-8 byte-order mark together with a non-UTF-8 coding line".into())
        }
        Some("iso-8859-1") => Ok(body.iter().map(|&b| b as char).collect()),
        Some(name) => {
            let enc = encoding_rs::Encoding::for_label(name.as_bytes()).ok_or_else(|| {
                format!(
                    "unknown encoding `{}` in its coding line",
                    encoding.as_deref().unwrap_or_default()
                )
            })?;
            enc.decode_without_bom_handling_and_without_replacement(body)
                .map(|text| text.into_owned())
                .ok_or_else(|| format!("not valid `{name}` text"))
        }
    }
}

/// The encoding named by a PEP 263 coding line, if any.
fn coding_cookie(bytes: &[u8]) -> Option<String> {
    cookie_range(bytes).map(|r| String::from_utf8_lossy(&bytes[r]).into_owned())
}

/// Where the encoding name of the PEP 263 coding line is, in the bytes, if there is one.
fn cookie_range(bytes: &[u8]) -> Option<std::ops::Range<usize>> {
    let first_end = bytes
        .iter()
        .position(|&b| b == b'\n')
        .unwrap_or(bytes.len());
    let first = &bytes[..first_end];
    if let Some(r) = cookie_in_line(first) {
        return Some(r);
    }
    // CPython reads line 2 only when line 1 is blank or a comment.
    let trimmed: Vec<u8> = first
        .iter()
        .copied()
        .skip_while(|b| matches!(b, b' ' | b'\t' | b'\x0c' | b'\r'))
        .collect();
    if first_end < bytes.len() && (trimmed.is_empty() || trimmed[0] == b'#') {
        let start = first_end + 1;
        let end = bytes[start..]
            .iter()
            .position(|&b| b == b'\n')
            .map_or(bytes.len(), |p| start + p);
        return cookie_in_line(&bytes[start..end]).map(|r| start + r.start..start + r.end);
    }
    None
}

/// Matches `^[ \t\f]*#.*?coding[:=][ \t]*([-\w.]+)` on one line: the name's range.
fn cookie_in_line(line: &[u8]) -> Option<std::ops::Range<usize>> {
    let start = line
        .iter()
        .position(|b| !matches!(b, b' ' | b'\t' | b'\x0c'))?;
    if line[start] != b'#' {
        return None;
    }
    let mut i = start;
    while i + 7 <= line.len() {
        if &line[i..i + 6] == b"coding" && matches!(line[i + 6], b':' | b'=') {
            let mut j = i + 7;
            while j < line.len() && matches!(line[j], b' ' | b'\t') {
                j += 1;
            }
            let end = line[j..]
                .iter()
                .position(|&b| !(b.is_ascii_alphanumeric() || matches!(b, b'-' | b'_' | b'.')))
                .map_or(line.len(), |p| j + p);
            if end > j {
                return Some(j..end);
            }
        }
        i += 1;
    }
    None
}

/// Decoded source as it is written back to a file in UTF-8 (a candidate module, the original
/// checked as a candidate): a coding line that names another encoding (`latin-1`) is made to
/// name `utf-8`, on the same line, so that Python reads the file as it is written.
pub fn as_utf8_text(text: &str) -> std::borrow::Cow<'_, str> {
    match cookie_range(text.as_bytes()) {
        Some(r) if normal_name(&text[r.clone()]) != "utf-8" => {
            let mut out = String::with_capacity(text.len());
            out.push_str(&text[..r.start]);
            out.push_str("utf-8");
            out.push_str(&text[r.end..]);
            std::borrow::Cow::Owned(out)
        }
        _ => std::borrow::Cow::Borrowed(text),
    }
}

/// CPython's `get_normal_name`: folds the spellings of UTF-8 and Latin-1.
fn normal_name(name: &str) -> String {
    let lower = name.to_ascii_lowercase().replace('_', "-");
    let is = |base: &str| lower == base || lower.starts_with(&format!("{base}-"));
    if is("utf-8") {
        "utf-8".into()
    } else if is("latin-1") || is("iso-8859-1") || is("iso-latin-1") {
        "iso-8859-1".into()
    } else {
        name.into()
    }
}

#[cfg(test)]
mod tests {
    use super::{as_utf8_text, decode_source};

    #[test]
    fn text_written_back_in_utf8_names_utf8() {
        let source = b"# -*- coding: latin-1 -*-\ns = '\xe9'\n";
        let text = decode_source(source).unwrap();
        let written = as_utf8_text(&text);
        assert_eq!(written, "# -*- coding: utf-8 -*-\ns = '\u{e9}'\n");
        // What is written decodes to the same text, and keeps its lines.
        assert_eq!(decode_source(written.as_bytes()).unwrap(), written);
        let second = "#!/usr/bin/env python\n# vim: set fileencoding=iso-8859-15 :\nx = 1\n";
        assert_eq!(
            as_utf8_text(second),
            "#!/usr/bin/env python\n# vim: set fileencoding=utf-8 :\nx = 1\n"
        );
        for unchanged in ["# coding: utf-8\nx = 1\n", "x = 1\n# coding: latin-1\n", ""] {
            assert!(matches!(
                as_utf8_text(unchanged),
                std::borrow::Cow::Borrowed(_)
            ));
        }
    }

    #[test]
    fn utf8_with_and_without_bom() {
        assert_eq!(decode_source(b"x = 1\n").unwrap(), "x = 1\n");
        assert_eq!(decode_source(b"\xef\xbb\xbfx = 1\n").unwrap(), "x = 1\n");
    }

    #[test]
    fn latin1_needs_a_coding_line() {
        let err = decode_source(b"s = '\xe9'\n").unwrap_err();
        assert!(err.contains("not valid UTF-8"), "{err}");
        let text = decode_source(b"# -*- coding: latin-1 -*-\ns = '\xe9'\n").unwrap();
        assert!(text.contains('\u{e9}'));
        let text = decode_source(
            b"#!/usr/bin/env python\n# vim: set fileencoding=iso-8859-15 :\ns = '\xa4'\n",
        )
        .unwrap();
        assert!(text.contains('\u{20ac}'), "{text}");
    }

    #[test]
    fn second_line_cookie_ignored_after_code() {
        assert!(decode_source(b"x = 1\n# coding: latin-1\ns = '\xe9'\n").is_err());
    }

    #[test]
    fn unknown_encoding_is_reported() {
        let err = decode_source(b"# coding: klingon\n").unwrap_err();
        assert!(err.contains("klingon"), "{err}");
    }
}
