//! A package index's simple API, as far as `[[repo]] pypi` needs it: the files of one project
//! with the hashes the index publishes (PEP 691's JSON, else PEP 503's HTML with `#sha256=`
//! fragments), and the download of one of them. Every request goes through [`get`], a GET on
//! the shared HTTP layer (`crate::http`).

use std::time::Duration;

use r2e_core::error::{Error, Result};
use reqwest::Url;

use crate::http::{Http, Reply};

/// PEP 691's JSON first, PEP 503's HTML when the index has no JSON.
const ACCEPT: &str = "application/vnd.pypi.simple.v1+json, text/html;q=0.1";

/// One file of a project as the index lists it.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct IndexFile {
    pub filename: String,
    /// Absolute (resolved against the project's page).
    pub url: String,
    /// The sha256 the index publishes for it, lowercase, when it publishes one.
    pub sha256: Option<String>,
}

/// The index's client: the shared runtime and client, started on the first request.
static HTTP: Http = Http::new();
/// The most one request (a page or a download) may take.
const TIMEOUT: Duration = Duration::from_secs(300);

/// The most bytes an index page may have.
const MAX_PAGE: usize = 64 << 20;
/// The most bytes a source release may have (far more than any sdist needs; held in memory).
pub const MAX_ARCHIVE: usize = 1 << 30;

/// One GET of `url` with `accept`, its body as bytes, at most `limit` of them. An error is a
/// failure to get the answer (the network, a timeout, one larger than `limit`): environmental,
/// never a result.
fn get(url: &str, accept: &str, limit: usize) -> Result<Reply<Vec<u8>>> {
    HTTP.get_bytes(url, &[("accept", accept)], TIMEOUT, limit)
        .map_err(|e| Error::env(format!("GET {url}: {e}")))
}

/// The error of an answer that is not a success: environmental when it may pass later (408,
/// 429, 5xx: rate limits, server errors), else bad input.
fn refused(url: &str, status: u16) -> Error {
    let message = format!("GET {url}: the index answered {status}");
    if status == 408 || status == 429 || status >= 500 {
        Error::env(message)
    } else {
        Error::input(message)
    }
}

/// The files the index at `index_url` (ending in `/`) lists for the project whose PEP 503
/// name is `normalized`. A project the index does not know is bad input; an index that does
/// not answer is environmental.
pub fn project_files(index_url: &str, normalized: &str) -> Result<Vec<IndexFile>> {
    let page = format!("{index_url}{normalized}/");
    let answer = get(&page, ACCEPT, MAX_PAGE)?;
    match answer.status {
        200..=299 => {}
        404 => {
            return Err(Error::input(format!(
                "the index `{index_url}` has no project `{normalized}` ({page} answered 404)"
            )));
        }
        s => return Err(refused(&page, s)),
    }
    let base = Url::parse(&page).map_err(|e| Error::input(format!("`{page}`: {e}")))?;
    let text = String::from_utf8_lossy(&answer.body);
    if answer
        .header("content-type")
        .unwrap_or_default()
        .contains("application/vnd.pypi.simple.v1+json")
    {
        parse_json(&base, &text)
    } else {
        Ok(parse_html(&base, &text))
    }
}

/// Downloads a file the index listed. A status that may pass is environmental.
pub fn download(file: &IndexFile) -> Result<Vec<u8>> {
    let answer = get(&file.url, "*/*", MAX_ARCHIVE)?;
    match answer.status {
        200..=299 => Ok(answer.body),
        s => Err(refused(&file.url, s)),
    }
}

/// PEP 691: `{"files": [{"filename", "url", "hashes": {"sha256": ...}}, ...]}`.
fn parse_json(base: &Url, text: &str) -> Result<Vec<IndexFile>> {
    let doc: serde_json::Value = serde_json::from_str(text)
        .map_err(|e| Error::env(format!("{base}: not the simple API's JSON: {e}")))?;
    let files = doc["files"]
        .as_array()
        .ok_or_else(|| Error::env(format!("{base}: the JSON lists no `files`")))?;
    let mut out = Vec::new();
    for f in files {
        let (Some(filename), Some(url)) = (f["filename"].as_str(), f["url"].as_str()) else {
            continue;
        };
        let Ok(url) = base.join(url) else {
            continue;
        };
        out.push(IndexFile {
            filename: filename.to_owned(),
            url: url.to_string(),
            sha256: f["hashes"]["sha256"].as_str().map(str::to_ascii_lowercase),
        });
    }
    Ok(out)
}

/// PEP 503: anchors whose text is the file name and whose `href` may end in `#sha256=HEX`.
fn parse_html(base: &Url, text: &str) -> Vec<IndexFile> {
    let mut out = Vec::new();
    let lower = text.to_ascii_lowercase();
    let mut at = 0;
    while let Some(start) = lower[at..].find("<a ").map(|i| at + i) {
        let Some(open_end) = lower[start..].find('>').map(|i| start + i) else {
            break;
        };
        let Some(close) = lower[open_end..].find("</a>").map(|i| open_end + i) else {
            break;
        };
        at = close + 4;
        let tag = &text[start..open_end];
        let Some(href) = attribute(tag, "href") else {
            continue;
        };
        let href = unescape(&href);
        let filename = unescape(text[open_end + 1..close].trim());
        let (link, fragment) = match href.split_once('#') {
            Some((l, f)) => (l.to_owned(), Some(f.to_owned())),
            None => (href.clone(), None),
        };
        let sha256 = fragment.and_then(|f| f.strip_prefix("sha256=").map(str::to_ascii_lowercase));
        let Ok(url) = base.join(&link) else {
            continue;
        };
        out.push(IndexFile {
            filename,
            url: url.to_string(),
            sha256,
        });
    }
    out
}

/// The value of attribute `name` in an opening tag (quoted with `"` or `'`).
fn attribute(tag: &str, name: &str) -> Option<String> {
    let lower = tag.to_ascii_lowercase();
    let mut from = 0;
    while let Some(i) = lower[from..].find(name).map(|i| from + i) {
        from = i + name.len();
        let before_ok = i > 0 && lower.as_bytes()[i - 1].is_ascii_whitespace();
        let rest = tag[from..].trim_start();
        if !before_ok || !rest.starts_with('=') {
            continue;
        }
        let rest = rest[1..].trim_start();
        let quote = rest.chars().next()?;
        if quote == '"' || quote == '\'' {
            let end = rest[1..].find(quote)?;
            return Some(rest[1..1 + end].to_owned());
        }
        let end = rest
            .find(|c: char| c.is_ascii_whitespace())
            .unwrap_or(rest.len());
        return Some(rest[..end].to_owned());
    }
    None
}

/// The few entities an index page's names and links hold.
fn unescape(s: &str) -> String {
    s.replace("&amp;", "&")
        .replace("&lt;", "<")
        .replace("&gt;", ">")
        .replace("&quot;", "\"")
        .replace("&#39;", "'")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn both_kinds_of_page_give_files_with_their_hashes() {
        let base = Url::parse("https://index.test/simple/isodate/").unwrap();
        let json = r#"{"meta": {"api-version": "1.1"}, "name": "isodate", "files": [
            {"filename": "isodate-0.6.1.tar.gz", "url": "../../files/isodate-0.6.1.tar.gz",
             "hashes": {"sha256": "ABCD"}, "upload-time": "2021-12-13T20:28:31Z"},
            {"filename": "isodate-0.6.1-py3-none-any.whl", "url": "https://cdn.test/w.whl", "hashes": {}}]}"#;
        let files = parse_json(&base, json).unwrap();
        assert_eq!(
            files,
            vec![
                IndexFile {
                    filename: "isodate-0.6.1.tar.gz".into(),
                    url: "https://index.test/files/isodate-0.6.1.tar.gz".into(),
                    sha256: Some("abcd".into()),
                },
                IndexFile {
                    filename: "isodate-0.6.1-py3-none-any.whl".into(),
                    url: "https://cdn.test/w.whl".into(),
                    sha256: None,
                },
            ]
        );
        let html = "<html><body>\n<A HREF='/files/isodate-0.6.1.tar.gz#sha256=EF01' data-requires-python=\"&gt;=3\">isodate-0.6.1.tar.gz</A><br/>\n\
                    <a data-x=\"1\" href=\"isodate-0.6.0.zip\">isodate-0.6.0.zip</a>\n</body></html>";
        let files = parse_html(&base, html);
        assert_eq!(
            files,
            vec![
                IndexFile {
                    filename: "isodate-0.6.1.tar.gz".into(),
                    url: "https://index.test/files/isodate-0.6.1.tar.gz".into(),
                    sha256: Some("ef01".into()),
                },
                IndexFile {
                    filename: "isodate-0.6.0.zip".into(),
                    url: "https://index.test/simple/isodate/isodate-0.6.0.zip".into(),
                    sha256: None,
                },
            ]
        );
    }
}
