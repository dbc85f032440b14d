//! Model calls: an OpenAI-compatible client (chat and plain completions), the response cache, and
//! the token accounting the build summary shows.
//!
//! Every request is an action: its key is the provider's API kind, the model, every sampling
//! parameter, the rendered messages and the sample index (never the base URL or the key). A
//! response is stored once it is complete; a failure (transient or not) is never stored, so the
//! next build asks again. Transient failures (429, 5xx, timeouts, dropped connections) are
//! retried with exponential backoff and jitter, honouring `Retry-After`.

pub mod prompts;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};
use std::time::Duration;

use serde::{Deserialize, Serialize};

use crate::cache::{self, Cache};
use crate::config::{Api, ProviderConfig};
use crate::hash::Hash;

pub const LLM: cache::Kind = cache::Kind {
    name: "llm",
    version: 1,
};

#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct Message {
    pub role: String,
    pub content: String,
}

impl Message {
    pub fn system(text: impl Into<String>) -> Self {
        Message {
            role: "system".into(),
            content: text.into(),
        }
    }
    pub fn user(text: impl Into<String>) -> Self {
        Message {
            role: "user".into(),
            content: text.into(),
        }
    }
}

/// One request, as keyed.
#[derive(Clone, Debug, Serialize)]
pub struct Request {
    pub api: Api,
    pub model: String,
    pub temperature: f64,
    pub max_tokens: u32,
    pub messages: Vec<Message>,
    /// Which sample this is, for several answers to the same messages.
    pub sample: u32,
}

impl Request {
    /// A system message and one prompt, the first sample.
    pub fn new(
        api: Api,
        model: Option<&str>,
        (temperature, max_tokens): (f64, u32),
        system: &str,
        prompt: String,
    ) -> Request {
        Request {
            api,
            model: model.unwrap_or_default().to_owned(),
            temperature,
            max_tokens,
            messages: vec![Message::system(system), Message::user(prompt)],
            sample: 0,
        }
    }

    /// The one prompt of the completions API: the messages, one after the other.
    pub fn prompt_text(&self) -> String {
        self.messages
            .iter()
            .map(|m| m.content.as_str())
            .collect::<Vec<_>>()
            .join("\n\n")
    }

    pub fn key(&self) -> Hash {
        Hash::of_key(&("llm-request-v1", self))
    }
}

/// A complete answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub text: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// Why there is no answer. Never cached.
#[derive(Clone, Debug)]
pub struct Failure {
    pub message: String,
    /// Worth retrying in a later build (rate limits, server errors, timeouts, connections).
    pub transient: bool,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Requests executed, cached and failed, and tokens, for one (stage, model).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Usage {
    pub executed: u64,
    pub cached: u64,
    pub failed: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

/// What one function's requests cost, cached or not: the requests its result needs, and their
/// tokens. Recorded per function, so that a dataset's cost can be read from its files.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Spent {
    pub requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Spent {
    pub fn add(&mut self, r: &Response) {
        self.requests += 1;
        self.prompt_tokens += r.prompt_tokens;
        self.completion_tokens += r.completion_tokens;
    }
}

impl Usage {
    pub fn add(&mut self, other: &Usage) {
        self.executed += other.executed;
        self.cached += other.cached;
        self.failed += other.failed;
        self.prompt_tokens += other.prompt_tokens;
        self.completion_tokens += other.completion_tokens;
    }
}

/// The model client of one build: one HTTP client, one concurrency limit per provider, and the
/// usage counters.
pub struct Llm {
    runtime: tokio::runtime::Runtime,
    http: reqwest::Client,
    limits: Mutex<BTreeMap<String, Arc<tokio::sync::Semaphore>>>,
    usage: Mutex<BTreeMap<(String, String), Usage>>,
}

impl Llm {
    pub fn new() -> crate::error::Result<Llm> {
        let runtime = tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .map_err(|e| crate::error::Error::env(format!("cannot start the HTTP runtime: {e}")))?;
        let http = reqwest::Client::builder()
            .build()
            .map_err(|e| crate::error::Error::env(format!("cannot build the HTTP client: {e}")))?;
        Ok(Llm {
            runtime,
            http,
            limits: Mutex::default(),
            usage: Mutex::default(),
        })
    }

    /// Usage so far, by (stage, model).
    pub fn usage(&self) -> BTreeMap<(String, String), Usage> {
        self.usage.lock().unwrap().clone()
    }

    fn count(&self, stage: &str, model: &str, f: impl FnOnce(&mut Usage)) {
        let mut usage = self.usage.lock().unwrap();
        f(usage
            .entry((stage.to_owned(), model.to_owned()))
            .or_default());
    }

    /// The answer to `request`: from the cache, or asked (blocking the calling thread). Returns
    /// whether it was asked now.
    pub fn ask(
        &self,
        cache: &Cache,
        stage: &str,
        provider: &ProviderConfig,
        request: &Request,
    ) -> Result<(Response, bool), Failure> {
        let key = request.key();
        if let Some(hit) = cache.get::<Response>(LLM, key) {
            self.count(stage, &request.model, |u| u.cached += 1);
            return Ok((continued(request, hit), false));
        }
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
        let answer = self.runtime.block_on(async {
            let _permit = limit
                .acquire()
                .await
                .expect("the semaphore is never closed");
            self.ask_with_retries(provider, request).await
        });
        match answer {
            Ok(response) => {
                self.count(stage, &request.model, |u| {
                    u.executed += 1;
                    u.prompt_tokens += response.prompt_tokens;
                    u.completion_tokens += response.completion_tokens;
                });
                if let Err(e) = cache.put(LLM, key, &response) {
                    eprintln!("warning: cannot store a model response: {e}");
                }
                Ok((continued(request, response), true))
            }
            Err(failure) => {
                self.count(stage, &request.model, |u| u.failed += 1);
                Err(failure)
            }
        }
    }

    async fn ask_with_retries(
        &self,
        provider: &ProviderConfig,
        request: &Request,
    ) -> Result<Response, Failure> {
        let mut attempt = 0u32;
        loop {
            match self.ask_once(provider, request).await {
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
        &self,
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
        let mut http = self
            .http
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

/// A base model (the completions API) continues its prompt: when the prompt ends inside an open
/// code fence (as a prompt for a base model should, with the code's first lines written), the
/// answer is that block's start followed by the continuation, so that it reads like a chat
/// model's answer. The cached response stays the raw text.
fn continued(request: &Request, mut response: Response) -> Response {
    if request.api != Api::Completions {
        return response;
    }
    // Fences are lines that start with ``` (a mention of one inside a sentence or indented code
    // is not one), in the prompt exactly as sent.
    let prompt = request.prompt_text();
    let mut offset = 0;
    let mut fences = Vec::new();
    for line in prompt.split_inclusive('\n') {
        if line.starts_with("```") {
            fences.push(offset);
        }
        offset += line.len();
    }
    if fences.len() % 2 == 1 {
        let open = *fences.last().expect("an odd count is not zero");
        response.text = format!("{}{}", &prompt[open..], response.text);
    }
    response
}

/// The code of an answer: the first fenced block (```python or bare ```), else the whole text
/// when it parses as Python; `None` when the answer holds no code.
pub fn code_block(answer: &str) -> Option<String> {
    let mut rest = answer;
    while let Some(start) = rest.find("```") {
        let after = &rest[start + 3..];
        let line_end = after.find('\n')?;
        let lang = after[..line_end].trim().to_ascii_lowercase();
        let body = &after[line_end + 1..];
        let end = body.find("```").unwrap_or(body.len());
        if lang.is_empty() || lang == "python" || lang == "py" || lang == "python3" {
            return Some(body[..end].to_owned());
        }
        rest = &body[end.min(body.len())..];
        if rest.starts_with("```") {
            rest = &rest[3..];
        }
    }
    let trimmed = answer.trim();
    (!trimmed.is_empty()
        && crate::python::extract::summarize(trimmed).is_ok()
        && looks_like_code(trimmed))
    .then(|| trimmed.to_owned())
}

/// Prose can parse as Python (a single name, say); code has a statement keyword or a call.
fn looks_like_code(text: &str) -> bool {
    text.lines().any(|l| {
        let l = l.trim_start();
        ["import ", "from ", "def ", "class ", "assert"]
            .iter()
            .any(|k| l.starts_with(k))
    })
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_base_model_continues_the_open_block_of_its_prompt() {
        let answer = |api, prompt: &str| {
            let request = Request::new(
                api,
                Some("m"),
                (0.0, 10),
                "Answer with one ```python block.",
                prompt.to_owned(),
            );
            let raw = Response {
                text: "    return 1\n```\nmore".into(),
                prompt_tokens: 1,
                completion_tokens: 1,
            };
            continued(&request, raw).text
        };
        // The system message mentions ``` inside a sentence: not a fence.
        let open = "Write it.\n```python\ndef f():\n";
        assert_eq!(
            answer(Api::Completions, open),
            "```python\ndef f():\n    return 1\n```\nmore"
        );
        assert_eq!(
            code_block(&answer(Api::Completions, open)).unwrap(),
            "def f():\n    return 1\n"
        );
        // Chat answers and prompts without an open block are taken as they are.
        assert_eq!(answer(Api::Chat, open), "    return 1\n```\nmore");
        assert_eq!(
            answer(Api::Completions, "```python\nx\n```\nWrite it."),
            "    return 1\n```\nmore"
        );
    }

    #[test]
    fn code_blocks() {
        assert_eq!(
            code_block("Here:\n```python\nx = 1\n```\nthanks").as_deref(),
            Some("x = 1\n")
        );
        assert_eq!(
            code_block("```text\nno\n```\n```\nimport os\n```").as_deref(),
            Some("import os\n")
        );
        assert_eq!(
            code_block("import os\nprint(os)").as_deref(),
            Some("import os\nprint(os)")
        );
        assert_eq!(code_block("I cannot help with that."), None);
        assert_eq!(code_block("Sure"), None);
    }

    #[test]
    fn backoff_grows_and_honours_retry_after() {
        assert!(backoff(0, None) >= Duration::from_millis(500));
        assert!(backoff(3, None) >= Duration::from_secs(4));
        let b = backoff(0, Some(Duration::from_secs(2)));
        assert!(b >= Duration::from_secs(2) && b <= Duration::from_millis(2500));
    }
}
