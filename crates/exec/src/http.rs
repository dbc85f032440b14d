//! The small HTTP layer r2e's clients share: the model clients (`llm::http`), `r2e curate`'s
//! GitHub client (`r2e_pipeline::curate::github`) and the package index's (`pypi`). One tokio
//! runtime and one `reqwest` client, started on the first request; the retry policy
//! (exponential backoff with jitter, the server's `Retry-After` honoured); `Retry-After`
//! parsing; readable transport errors; and a blocking GET (its body as text, or as bytes), safe
//! to call from a thread that runs another runtime.
//!
//! Secrets: a header named `authorization` is marked sensitive (its value is hidden from
//! `Debug`), and no message here holds a request's headers.

use std::future::Future;
use std::sync::OnceLock;
use std::time::Duration;

/// How long a connection may take to open, whatever the request's own timeout.
const CONNECT_TIMEOUT: Duration = Duration::from_secs(15);

/// The runtime and the client, made once.
#[derive(Default)]
pub struct Http {
    inner: OnceLock<Result<(tokio::runtime::Runtime, reqwest::Client), String>>,
}

/// An answer read whole: the status, the headers (names in lower case, in order) and the body
/// (text, or bytes from [`Http::get_bytes`]).
#[derive(Clone, Debug)]
pub struct Reply<B = String> {
    pub status: u16,
    pub headers: Vec<(String, String)>,
    pub body: B,
}

impl<B> Reply<B> {
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
    /// Nothing started yet (so it may be a `static`).
    pub const fn new() -> Http {
        Http {
            inner: OnceLock::new(),
        }
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
                    .connect_timeout(CONNECT_TIMEOUT)
                    .user_agent(concat!("r2e/", env!("CARGO_PKG_VERSION")))
                    .build()
                    .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
                Ok((runtime, http))
            })
            .as_ref()
            .map_err(String::clone)
    }

    /// A GET with `headers`, its body read whole as text, waiting at most `timeout`. An `Err`
    /// is a transport failure (no answer, or one cut off), described without the request's
    /// headers.
    pub fn get(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        timeout: Duration,
    ) -> Result<Reply, String> {
        self.fetch(url, headers, timeout, reqwest::Response::text)
    }

    /// [`Http::get`] with the body as bytes (an archive), read as it arrives and given up past
    /// `limit` bytes (whatever the answer says of its length): a server that sends more is an
    /// error, and no more than `limit` bytes are ever held.
    pub fn get_bytes(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        timeout: Duration,
        limit: usize,
    ) -> Result<Reply<Vec<u8>>, String> {
        let reply = self.fetch(url, headers, timeout, move |mut response| async move {
            let mut body = Vec::new();
            while let Some(chunk) = response.chunk().await? {
                if body.len() + chunk.len() > limit {
                    return Ok(None);
                }
                body.extend_from_slice(&chunk);
            }
            Ok(Some(body))
        })?;
        match reply.body {
            Some(body) => Ok(Reply {
                status: reply.status,
                headers: reply.headers,
                body,
            }),
            None => Err(format!(
                "the answer is larger than {limit} bytes, the most taken; nothing of it is kept"
            )),
        }
    }

    /// A GET whose body `read` reads, on the shared runtime. On a thread that runs a runtime
    /// (where blocking on another one panics) it waits on a thread of its own.
    fn fetch<B, F, R>(
        &self,
        url: &str,
        headers: &[(&str, &str)],
        timeout: Duration,
        read: R,
    ) -> Result<Reply<B>, String>
    where
        B: Send,
        F: Future<Output = reqwest::Result<B>> + Send,
        R: FnOnce(reqwest::Response) -> F + Send,
    {
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
        let work = async {
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
            let body = read(response)
                .await
                .map_err(|e| format!("the answer was cut off: {}", describe_error(&e)))?;
            Ok(Reply {
                status,
                headers,
                body,
            })
        };
        if tokio::runtime::Handle::try_current().is_err() {
            return runtime.block_on(work);
        }
        std::thread::scope(|scope| {
            scope
                .spawn(|| runtime.block_on(work))
                .join()
                .unwrap_or_else(|_| Err("the HTTP thread panicked".into()))
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

    /// A loopback server that answers one request with `body` (bytes that are not UTF-8) and
    /// hands back the request it read.
    fn answer_once(body: &'static [u8]) -> (String, std::thread::JoinHandle<String>) {
        use std::io::{Read, Write};
        let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
        let url = format!("http://{}/f.bin", listener.local_addr().unwrap());
        let server = std::thread::spawn(move || {
            let (mut conn, _) = listener.accept().unwrap();
            let mut request = Vec::new();
            let mut buf = [0u8; 1024];
            while !request.ends_with(b"\r\n\r\n") {
                let n = conn.read(&mut buf).unwrap();
                assert!(n > 0, "the request ended early");
                request.extend_from_slice(&buf[..n]);
            }
            let head = format!(
                "HTTP/1.1 200 OK\r\ncontent-type: application/octet-stream\r\ncontent-length: {}\r\nconnection: close\r\n\r\n",
                body.len()
            );
            conn.write_all(head.as_bytes()).unwrap();
            conn.write_all(body).unwrap();
            String::from_utf8(request).unwrap().to_ascii_lowercase()
        });
        (url, server)
    }

    #[test]
    fn bytes_arrive_whole_even_from_inside_another_runtime() {
        const BODY: &[u8] = &[0x1f, 0x8b, 0xff, 0x00, 0xfe];
        let (url, server) = answer_once(BODY);
        let http = Http::new();
        let caller = tokio::runtime::Builder::new_current_thread()
            .build()
            .unwrap();
        // Blocking on the shared runtime from this thread would panic: it runs `caller`.
        let reply = caller
            .block_on(async {
                http.get_bytes(&url, &[("accept", "*/*")], Duration::from_secs(30), 1 << 20)
            })
            .unwrap();
        assert_eq!(reply.status, 200);
        assert_eq!(reply.body, BODY);
        assert_eq!(
            reply.header("content-type"),
            Some("application/octet-stream")
        );
        assert!(server.join().unwrap().contains("\r\naccept: */*\r\n"));
    }

    #[test]
    fn bytes_past_the_limit_are_an_error_not_a_body() {
        let body = vec![7u8; 4096];
        let (url, server) = answer_once(Box::leak(body.into_boxed_slice()));
        let http = Http::new();
        let err = http
            .get_bytes(&url, &[], Duration::from_secs(30), 1000)
            .expect_err("over the limit");
        assert!(err.contains("larger than 1000 bytes"), "{err}");
        let _ = server.join();
    }

    #[test]
    fn retry_after_is_read_in_seconds_and_capped() {
        assert_eq!(retry_after(" 1 "), Some(Duration::from_secs(1)));
        assert_eq!(retry_after("0.5"), Some(Duration::from_millis(500)));
        assert_eq!(retry_after("100000"), Some(Duration::from_secs(300)));
        assert_eq!(retry_after("soon"), None);
    }
}
