//! The OpenAI-compatible HTTP client (chat and plain completions) over `reqwest` and `tokio`:
//! one client and one concurrency limit per provider; transient failures (429, 5xx, timeouts,
//! dropped connections) are retried with exponential backoff and jitter, honouring
//! `Retry-After`.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex, OnceLock};
use std::time::Duration;

use super::{Failure, ModelClient, Request, Response};
use crate::config::{Api, ProviderConfig};

/// Asks OpenAI-compatible servers. The runtime and the client start on the first request.
#[derive(Default)]
pub struct HttpClient {
    inner: OnceLock<Result<(tokio::runtime::Runtime, reqwest::Client), String>>,
    limits: Mutex<BTreeMap<String, Arc<tokio::sync::Semaphore>>>,
}

impl HttpClient {
    pub fn new() -> HttpClient {
        HttpClient::default()
    }

    fn inner(&self) -> Result<&(tokio::runtime::Runtime, reqwest::Client), Failure> {
        self.inner
            .get_or_init(|| {
                let runtime = tokio::runtime::Builder::new_multi_thread()
                    .worker_threads(2)
                    .enable_all()
                    .build()
                    .map_err(|e| format!("cannot start the HTTP runtime: {e}"))?;
                let http = reqwest::Client::builder()
                    .build()
                    .map_err(|e| format!("cannot build the HTTP client: {e}"))?;
                Ok((runtime, http))
            })
            .as_ref()
            .map_err(|e| Failure {
                message: e.clone(),
                transient: true,
            })
    }
}

impl ModelClient for HttpClient {
    fn complete(&self, provider: &ProviderConfig, request: &Request) -> Result<Response, Failure> {
        let (runtime, http) = self.inner()?;
        let limit = self
            .limits
            .lock()
            .unwrap()
            .entry(provider.name.clone())
            .or_insert_with(|| {
                Arc::new(tokio::sync::Semaphore::new(
                    provider.max_concurrency as usize,
                ))
            })
            .clone();
        runtime.block_on(async {
            let _permit = limit
                .acquire()
                .await
                .expect("the semaphore is never closed");
            ask_with_retries(http, provider, request).await
        })
    }
}

async fn ask_with_retries(
    http: &reqwest::Client,
    provider: &ProviderConfig,
    request: &Request,
) -> Result<Response, Failure> {
    let mut attempt = 0u32;
    loop {
        match ask_once(http, provider, request).await {
            Ok(r) => return Ok(r),
            Err((failure, retry_after)) => {
                if !failure.transient || attempt >= provider.max_retries {
                    let tries = attempt + 1;
                    return Err(Failure {
                        message: if failure.transient {
                            format!("{} (after {tries} attempts)", failure.message)
                        } else {
                            failure.message
                        },
                        transient: failure.transient,
                    });
                }
                tokio::time::sleep(backoff(attempt, retry_after)).await;
                attempt += 1;
            }
        }
    }
}

async fn ask_once(
    http: &reqwest::Client,
    provider: &ProviderConfig,
    request: &Request,
) -> Result<Response, (Failure, Option<Duration>)> {
    let (url, body) = match provider.api {
        Api::Chat => (
            format!("{}/chat/completions", provider.base_url),
            serde_json::json!({
                "model": request.model,
                "messages": request.messages,
                "temperature": request.temperature,
                "max_tokens": request.max_tokens,
                "seed": request.sample,
            }),
        ),
        Api::Completions => (
            format!("{}/completions", provider.base_url),
            serde_json::json!({
                "model": request.model,
                "prompt": request.prompt_text(),
                "temperature": request.temperature,
                "max_tokens": request.max_tokens,
                "seed": request.sample,
            }),
        ),
    };
    let transient = |message: String| {
        (
            Failure {
                message,
                transient: true,
            },
            None,
        )
    };
    let mut http = http
        .post(&url)
        .timeout(Duration::from_secs(provider.timeout_seconds))
        .json(&body);
    if let Some(key) = &provider.api_key {
        http = http.bearer_auth(key);
    }
    let response = http.send().await.map_err(|e| {
        transient(format!(
            "provider `{}`: {}",
            provider.name,
            describe_http_error(&e)
        ))
    })?;
    let status = response.status();
    let retry_after = response
        .headers()
        .get(reqwest::header::RETRY_AFTER)
        .and_then(|v| v.to_str().ok())
        .and_then(|v| v.trim().parse::<f64>().ok())
        .map(|s| Duration::from_secs_f64(s.clamp(0.0, 300.0)));
    let text = response.text().await.map_err(|e| {
        transient(format!(
            "provider `{}`: the answer was cut off: {}",
            provider.name,
            describe_http_error(&e)
        ))
    })?;
    if status.as_u16() == 429 || status.is_server_error() || status.as_u16() == 408 {
        return Err((
            Failure {
                message: format!(
                    "provider `{}` answered {status}: {}",
                    provider.name,
                    snippet(&text)
                ),
                transient: true,
            },
            retry_after,
        ));
    }
    if !status.is_success() {
        return Err((
            Failure {
                message: format!(
                    "provider `{}` refused the request ({status}): {}",
                    provider.name,
                    snippet(&text)
                ),
                transient: false,
            },
            None,
        ));
    }
    parse_answer(provider.api, &text).map_err(|message| {
        (
            Failure {
                message: format!("provider `{}`: {message}", provider.name),
                transient: false,
            },
            None,
        )
    })
}

/// The wait before retry `attempt` (0-based): the server's `Retry-After` when it gave one, else
/// 0.5 s doubling up to 30 s; with up to 25% jitter either way.
fn backoff(attempt: u32, retry_after: Option<Duration>) -> Duration {
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

fn describe_http_error(e: &reqwest::Error) -> String {
    if e.is_timeout() {
        "timed out".into()
    } else if e.is_connect() {
        format!("cannot connect ({e})")
    } else {
        e.to_string()
    }
}

fn snippet(text: &str) -> String {
    let t: String = text.chars().take(300).collect();
    t.replace('\n', " ")
}

fn parse_answer(api: Api, body: &str) -> Result<Response, String> {
    let v: serde_json::Value =
        serde_json::from_str(body).map_err(|e| format!("the answer is not JSON ({e})"))?;
    let choice = &v["choices"][0];
    let text = match api {
        Api::Chat => choice["message"]["content"].as_str(),
        Api::Completions => choice["text"].as_str(),
    }
    .ok_or_else(|| format!("the answer has no text: {}", snippet(body)))?;
    let usage = &v["usage"];
    Ok(Response {
        text: text.to_owned(),
        prompt_tokens: usage["prompt_tokens"].as_u64().unwrap_or(0),
        completion_tokens: usage["completion_tokens"].as_u64().unwrap_or(0),
    })
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
}
