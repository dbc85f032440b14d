//! What a model is asked, as its action key (`keys::LlmKey`) holds it: the messages and the
//! sampling parameters of one request. The clients that send it live in the execution layer.

use serde::{Deserialize, Serialize};

use crate::config::Api;

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

/// The settings part of a [`Request`]: every field but the messages and the sample (the API
/// kind, the model and the sampling). A model-driven stage makes its requests from it
/// ([`RequestSettings::request`]); the build records it for `r2e status` to compare field by
/// field, so that the two cannot drift.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct RequestSettings {
    pub api: Api,
    /// The model's name (empty when none is configured).
    pub model: String,
    pub temperature: f64,
    pub max_tokens: u32,
}

impl RequestSettings {
    /// A request of a system message and one prompt, the first sample.
    pub fn request(&self, system: &str, prompt: String) -> Request {
        Request::new(
            self.api,
            Some(&self.model),
            (self.temperature, self.max_tokens),
            system,
            prompt,
        )
    }
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
}
