//! The OpenAI-compatible HTTP client (chat and plain completions) over `reqwest` and `tokio`:
//! one client and one concurrency limit per provider; transient failures (429, 5xx, timeouts,
//! dropped connections) are retried with exponential backoff and jitter, honouring
//! `Retry-After` (the policy and the client are `crate::http`'s, shared with the GitHub
//! client). A 400 that says the prompt exceeds the model's context window is told apart
//! from other refusals ([`FailureKind::PromptTooLong`]): it is final, never retried.

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use super::{Failure, FailureKind, ModelClient, Response};
use crate::http::{Http, backoff, describe_error as describe_http_error, snippet};

use r2e_core::config::{Api, ProviderConfig};
use r2e_core::model::Request;

/// Asks OpenAI-compatible servers. The runtime and the client start on the first request.
#[derive(Default)]
pub struct HttpClient {
    http: Http,
    limits: Mutex<BTreeMap<String, Arc<tokio::sync::Semaphore>>>,
}

impl HttpClient {
    pub fn new() -> HttpClient {
        HttpClient::default()
    }

    fn inner(&self) -> Result<&(tokio::runtime::Runtime, reqwest::Client), Failure> {
        self.http
            .inner()
            .map_err(|e| Failure::new(FailureKind::Transient, e))
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
                if !failure.transient() || attempt >= provider.max_retries {
                    let tries = attempt + 1;
                    return Err(if failure.transient() {
                        Failure::new(
                            failure.kind,
                            format!("{} (after {tries} attempts)", failure.message),
                        )
                    } else {
                        failure
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
    let transient = |message: String| (Failure::new(FailureKind::Transient, message), None);
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
        .and_then(crate::http::retry_after);
    let text = response.text().await.map_err(|e| {
        transient(format!(
            "provider `{}`: the answer was cut off: {}",
            provider.name,
            describe_http_error(&e)
        ))
    })?;
    if status.as_u16() == 429 || status.is_server_error() || status.as_u16() == 408 {
        return Err((
            Failure::new(
                FailureKind::Transient,
                format!(
                    "provider `{}` answered {status}: {}",
                    provider.name,
                    snippet(&text)
                ),
            ),
            retry_after,
        ));
    }
    if status.as_u16() == 400 && exceeds_context(&text) {
        return Err((
            Failure::new(
                FailureKind::PromptTooLong,
                format!(
                    "provider `{}` refused the prompt as longer than the model's context window ({status}): {}",
                    provider.name,
                    snippet(&text)
                ),
            ),
            None,
        ));
    }
    if !status.is_success() {
        return Err((
            Failure::new(
                FailureKind::Refused,
                format!(
                    "provider `{}` refused the request ({status}): {}",
                    provider.name,
                    snippet(&text)
                ),
            ),
            None,
        ));
    }
    parse_answer(provider.api, &text).map_err(|message| {
        (
            Failure::new(
                FailureKind::Refused,
                format!("provider `{}`: {message}", provider.name),
            ),
            None,
        )
    })
}

/// Whether an error body says the prompt exceeds the model's context window: OpenAI's
/// `context_length_exceeded` code (vLLM's and llama-cpp-python's servers answer the same way),
/// llama.cpp's `exceed_context_size_error` type, or a message that names the context (window,
/// length, size, `n_ctx`) and says the request exceeds it (llama-cpp-python's own "Requested
/// tokens (5211) exceed context window of 4096", vLLM's "maximum context length is 4096
/// tokens"). The body's `error` object is read when it is JSON, else its text.
pub fn exceeds_context(body: &str) -> bool {
    let parsed: Option<serde_json::Value> = serde_json::from_str(body).ok();
    let mut texts: Vec<String> = Vec::new();
    match &parsed {
        Some(v) => {
            let error = &v["error"];
            for field in [
                &error["code"],
                &error["type"],
                &error["message"],
                error,
                &v["message"],
                &v["detail"],
            ] {
                if let Some(t) = field.as_str() {
                    texts.push(t.to_ascii_lowercase());
                }
            }
        }
        None => texts.push(body.to_ascii_lowercase()),
    }
    texts.iter().any(|t| {
        let context = ["context window", "context length", "context size", "n_ctx"]
            .iter()
            .any(|c| t.contains(c));
        let exceeds = [
            "exceed",
            "maximum",
            "too long",
            "greater than",
            "longer than",
        ]
        .iter()
        .any(|c| t.contains(c));
        t.contains("context_length_exceeded")
            || t.contains("exceed_context_size")
            || (context && exceeds)
    })
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
    fn context_window_refusals_are_told_from_other_400s() {
        // OpenAI (and the servers that copy it: vLLM, llama-cpp-python's server).
        assert!(exceeds_context(
            r#"{"error": {"message": "This model's maximum context length is 4096 tokens. However, you requested 5211 tokens.", "type": "invalid_request_error", "param": "messages", "code": "context_length_exceeded"}}"#
        ));
        // llama-cpp-python's own message, in an error object and as a bare detail.
        assert!(exceeds_context(
            r#"{"error": {"message": "Requested tokens (5211) exceed context window of 4096", "code": null}}"#
        ));
        assert!(exceeds_context(
            r#"{"detail": "Requested tokens (5211) exceed context window of 4096"}"#
        ));
        // llama.cpp's server, and a plain-text body naming n_ctx.
        assert!(exceeds_context(
            r#"{"error": {"code": 400, "message": "the request exceeds the available context size, try increasing it", "type": "exceed_context_size_error"}}"#
        ));
        assert!(exceeds_context("prompt is longer than n_ctx (4096)"));
        // Other 400s are not.
        for other in [
            r#"{"error": {"message": "The model `gpt-5` does not exist", "code": "model_not_found"}}"#,
            r#"{"error": {"message": "Invalid value for 'temperature': must be at most 2.", "code": null}}"#,
            r#"{"error": "busy"}"#,
            "Bad Request",
            r#"{"error": {"message": "max_tokens is too large: 9000. The context is fine."}}"#,
        ] {
            assert!(!exceeds_context(other), "{other}");
        }
    }
}
