//! The small HTTP layer r2e's clients share: the model clients (`llm::http`) and `r2e curate`'s
//! GitHub client (`r2e_build::curate::github`). One tokio runtime and one `reqwest` client,
//! started on the first request; the retry policy (exponential backoff with jitter, the
//! server's `Retry-After` honoured); `Retry-After` parsing; readable transport errors; and a
//! blocking GET for callers that hold no runtime of their own.
//!
//! Secrets: a header named `authorization` is marked sensitive (its value is hidden from
//! `Debug`), and no message here holds a request's headers.

use std::sync::OnceLock;
use std::time::Duration;

/// The runtime and the client, made once.
#[derive(Default)]
pub struct Http {
    inner: OnceLock<Result<(tokio::runtime::Runtime, reqwest::Client), String>>,
}

/// An answer read whole: the status, the headers (names in lower case, in order) and the body.
#[derive(Clone, Debug)]
pub struct Reply {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: String,
}

impl Reply {
    /// The first value of header `name` (lower case).
    pub fn header(&self, name: &str) -> Option<&str> {
        self.headers
            .iter()
            .find(|(k, _)| k == name)
            .map(|(_, v)| v.as_str())
    }

    /// The `Retry-After` header, as a wait.
    pub fn retry_after(&self) -> Option<Duration> {
        self.header("retry-after").and_then(retry_after)
    }
}

impl Http {
    pub fn new() -> Http {
        Http::default()
    }

    /// The runtime (two worker threads) and the client, started on first use.
    pub fn inner(&self) -> Result<&(tokio::runtime::Runtime, reqwest::Client), String> {
        self.inner
            .get_or_init(|| {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
                let http = reqwest::Client::builder()
                    .user_agent(concat!("r2e/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
                Ok((runtime, http))
            })
            .as_ref()
            .map_err(String::clone)
    }

    /// A GET with `headers`, read whole, waiting at most `timeout`. An `Err` is a transport
    /// failure (no answer, or one cut off), described without the request's headers.
    pub fn get(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        timeout: Duration,
    ) -> Result<Reply, String> {
        let (runtime, http) = self.inner()?;
        let mut map = reqwest::header::HeaderMap::new();
        for (name, value) in headers {
            let name = reqwest::header::HeaderName::from_bytes(name.as_bytes())
                .map_err(|e| format!("header `{name}`: {e}"))?;
            let mut value = reqwest::header::HeaderValue::from_str(value)
                .map_err(|_| format!("header `{name}`: a value that is not header text"))?;
            if name == reqwest::header::AUTHORIZATION {
                value.set_sensitive(true);
            }
            map.insert(name, value);
        }
        runtime.block_on(async {
            let response = http
                .get(url)
                .headers(map)
                .timeout(timeout)
                .send()
                .await
                .map_err(|e| describe_error(&e))?;
            let status = response.status().as_u16();
            let headers = response
                .headers()
                .iter()
                .filter_map(|(k, v)| Some((k.as_str().to_owned(), v.to_str().ok()?.to_owned())))
                .collect();
            let body = response
                .text()
                .await
                .map_err(|e| format!("the answer was cut off: {}", describe_error(&e)))?;
            Ok(Reply {
                status,
                headers,
                body,
            })
        })
    }
}

/// The wait a `Retry-After` value asks for: seconds (fractions allowed), at most 300.
pub fn retry_after(value: &str) -> Option<Duration> {
    value
        .trim()
        .parse::<f64>()
        .ok()
        .filter(|s| s.is_finite())
        .map(|s| Duration::from_secs_f64(s.clamp(0.0, 300.0)))
}

/// The wait before retry `attempt` (0-based): the server's `Retry-After` when it gave one, else
/// 0.5 s doubling up to 30 s; with up to 25% jitter either way.
pub fn backoff(attempt: u32, retry_after: Option<Duration>) -> Duration {
    let base = retry_after
        .unwrap_or_else(|| Duration::from_millis(500u64.saturating_mul(1 << attempt.min(6))))
        .min(Duration::from_secs(300));
    let nanos = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.subsec_nanos())
        .unwrap_or_default();
    let jitter = (nanos % 1000) as f64 / 1000.0 * 0.25;
    base.mul_f64(1.0 + jitter)
}

/// A transport error, readable.
pub fn describe_error(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        format!("cannot connect ({e})")
    } else {
        e.to_string()
    }
}

/// The start of an answer's body, on one line, for a message.
pub fn snippet(text: &str) -> String {
    let t: String = text.chars().take(300).collect();
    t.replace('\n', " ")
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn backoff_grows_and_honours_retry_after() {
        assert!(backoff(0, None) >= Duration::from_millis(500));
        assert!(backoff(3, None) >= Duration::from_secs(4));
        let b = backoff(0, Some(Duration::from_secs(2)));
        assert!(b >= Duration::from_secs(2) && b <= Duration::from_millis(2500));
    }

    #[test]
    fn retry_after_is_read_in_seconds_and_capped() {
        assert_eq!(retry_after(" 1 "), Some(Duration::from_secs(1)));
        assert_eq!(retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(retry_after("100000"), Some(Duration::from_secs(300)));
        assert_eq!(retry_after("soon"), None);
    }
}
