//! A model that answers from a script (a closure over the request), for tests of the
//! model-driven stages that need no server. It records every request it was asked.

use std::sync::Mutex;

use super::{Failure, ModelClient, Response};

use r2e_core::config::ProviderConfig;
use r2e_core::model::Request;

type Script = dyn Fn(&Request) -> Result<String, Failure> + Send + Sync;

/// Answers each request with its script's text (one prompt and one completion token each).
pub struct ScriptedModel {
    script: Box<Script>,
    asked: Mutex<Vec<Request>>,
}

impl ScriptedModel {
    pub fn new(
        script: impl Fn(&Request) -> Result<String, Failure> + Send + Sync + 'static,
    ) -> ScriptedModel {
        ScriptedModel {
            script: Box::new(script),
            asked: Mutex::default(),
        }
    }

    /// The requests asked so far, in order.
    pub fn asked(&self) -> Vec<Request> {
        self.asked.lock().unwrap().clone()
    }
}

impl ModelClient for ScriptedModel {
    fn complete(&self, _: &ProviderConfig, request: &Request) -> Result<Response, Failure> {
        self.asked.lock().unwrap().push(request.clone());
        (self.script)(request).map(|text| Response {
            text,
            prompt_tokens: 1,
            completion_tokens: 1,
        })
    }
}
