//! Model calls: requests and answers, the [`ModelClient`] seam (an OpenAI-compatible HTTP
//! client, or a script in tests), the response cache, and the token accounting the build
//! summary shows.
//!
//! Every request is an action (`keys::LlmKey`): its key is the provider's API kind, the model,
//! every sampling parameter, the rendered messages and the sample index (never the base URL or
//! the key). A response is stored once it is complete. A server's refusal of a prompt longer
//! than the model's context window is the request's outcome too, stored beside the answers
//! (`keys::RefusalKey`); any other failure (transient or not) is never stored, so the next
//! build asks again.

pub mod fake;
pub mod http;
pub mod prompts;

use std::collections::BTreeMap;
use std::sync::{Arc, Mutex};

use serde::{Deserialize, Serialize};

use r2e_core::cache::Cache;
use r2e_core::config::{Api, ProviderConfig};
use r2e_core::keys::{LlmKey, RefusalKey};
use r2e_core::model::Request;
use r2e_core::records::{ModelUse, Spent, Usage};

/// A complete answer.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct Response {
    pub text: String,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
}

impl Response {
    /// What this answer cost: one request and its tokens.
    pub fn spent(&self) -> Spent {
        Spent {
            requests: 1,
            prompt_tokens: self.prompt_tokens,
            completion_tokens: self.completion_tokens,
        }
    }
}

/// Why there is no answer.
#[derive(Clone, Debug)]
pub struct Failure {
    pub message: String,
    pub kind: FailureKind,
    /// Whether it came from the response cache (a stored refusal) rather than from the server.
    pub cached: bool,
}

/// What kind of failure a request had, which decides whether it is retried and stored.
#[derive(Clone, Copy, Debug, PartialEq, Eq)]
pub enum FailureKind {
    /// It may pass (rate limits, server errors, timeouts, dropped connections): retried with
    /// backoff, never stored; the next build asks again.
    Transient,
    /// The server refused the request (a bad model name or key, a 400 of another kind, an
    /// answer without text): an error of the build, never stored.
    Refused,
    /// The server refused the prompt as longer than the model's context window (a 400 saying
    /// so): a property of the request and the model, not of the moment. Stored under
    /// `keys::RefusalKey` like an answer, so no later build asks it again; `evaluate` records
    /// the sample as failed (`FailureClass::PromptTooLong`).
    PromptTooLong,
}

impl Failure {
    /// A failure the client saw now.
    pub fn new(kind: FailureKind, message: impl Into<String>) -> Failure {
        Failure {
            message: message.into(),
            kind,
            cached: false,
        }
    }

    /// Worth retrying (in this build, with backoff, and in the next one).
    pub fn transient(&self) -> bool {
        self.kind == FailureKind::Transient
    }

    /// A prompt longer than the model's context window: final, stored, never asked again.
    pub fn prompt_too_long(&self) -> bool {
        self.kind == FailureKind::PromptTooLong
    }
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.write_str(&self.message)
    }
}

/// Where answers come from: an OpenAI-compatible server ([`http::HttpClient`]), or a script
/// ([`fake::ScriptedModel`]) in tests. Blocking; called from the build's worker threads.
pub trait ModelClient: Send + Sync {
    /// One answer to `request` from `provider`, with retries as the client sees fit. A failure
    /// says whether it may pass.
    fn complete(&self, provider: &ProviderConfig, request: &Request) -> Result<Response, Failure>;
}

/// The model requests of one build: the response cache in front of a [`ModelClient`], and the
/// usage counters.
pub struct Llm {
    client: Arc<dyn ModelClient>,
    usage: Mutex<BTreeMap<(String, String), Usage>>,
}

impl Llm {
    pub fn new(client: Arc<dyn ModelClient>) -> Llm {
        Llm {
            client,
            usage: Mutex::default(),
        }
    }

    /// Usage so far, by (stage, model).
    pub fn usage(&self) -> BTreeMap<(String, String), Usage> {
        self.usage.lock().unwrap().clone()
    }

    fn count(&self, stage: ModelUse, model: &str, f: impl FnOnce(&mut Usage)) {
        let mut usage = self.usage.lock().unwrap();
        f(usage
            .entry((stage.as_str().to_owned(), model.to_owned()))
            .or_default());
    }

    /// Whether the outcome of `request` is stored: an answer, or a refusal of its prompt as too
    /// long. Such a request is not asked again.
    pub fn is_cached(cache: &Cache, request: &Request) -> bool {
        use r2e_core::cache::ActionKey;
        cache.contains(LlmKey::BUCKET, request.key())
            || cache.contains(RefusalKey::BUCKET, RefusalKey { request }.hash())
    }

    /// The answer to `request`: from the cache, or asked (blocking the calling thread). Returns
    /// whether it was asked now. A refusal of the prompt as longer than the model's context
    /// window is stored and comes back as a failure ([`FailureKind::PromptTooLong`], `cached`
    /// when it came from the cache); every other failure is never stored.
    pub fn ask(
        &self,
        cache: &Cache,
        stage: ModelUse,
        provider: &ProviderConfig,
        request: &Request,
    ) -> Result<(Response, bool), Failure> {
        let key = LlmKey { request };
        if let Some(hit) = cache.get_action::<_, Response>(&key) {
            self.count(stage, &request.model, |u| u.cached += 1);
            return Ok((continued(request, hit), false));
        }
        let refusal = RefusalKey { request };
        if let Some(message) = cache.get_action::<_, String>(&refusal) {
            self.count(stage, &request.model, |u| u.cached += 1);
            return Err(Failure {
                message,
                kind: FailureKind::PromptTooLong,
                cached: true,
            });
        }
        match self.client.complete(provider, request) {
            Ok(response) => {
                self.count(stage, &request.model, |u| {
                    u.executed += 1;
                    u.prompt_tokens += response.prompt_tokens;
                    u.completion_tokens += response.completion_tokens;
                });
                // Create-only: when another host (or process) stored an answer to this request
                // first, that answer is the one used, so that every host agrees on it.
                let response = match cache.put_action_first(&key, response.clone()) {
                    Ok(stored) => stored,
                    Err(e) => {
                        eprintln!("warning: cannot store a model response: {e}");
                        response
                    }
                };
                Ok((continued(request, response), true))
            }
            Err(failure) if failure.prompt_too_long() => {
                // Answered, if not with text: executed, and stored like an answer.
                self.count(stage, &request.model, |u| u.executed += 1);
                if let Err(e) = cache.put_action(&refusal, &failure.message) {
                    eprintln!("warning: cannot store a model's refusal: {e}");
                }
                Err(failure)
            }
            Err(failure) => {
                self.count(stage, &request.model, |u| u.failed += 1);
                Err(failure)
            }
        }
    }
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
        && r2e_python::extract::summarize(trimmed).is_ok()
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
}
