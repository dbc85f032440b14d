//! `[serve]`: what `r2e serve` shows an agent, and its limits per request.

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

use crate::records::Feedback;

/// `[serve]`: what `r2e serve` shows an agent, and its limits per request. Shared by every
/// variant; read by `serve` only (no build stage reads it).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct ServeConfig {
    /// How much of a test run an agent sees.
    pub feedback: Feedback,
    /// The fraction of each instance's tests kept for the reward: never run by `test`, never
    /// shown, counted by `submit`. Which tests is fixed per instance (a hash of its id and the
    /// test's name).
    pub holdout: f64,
    /// The longest `exec` an agent may ask for, in seconds (its `timeout_s` is capped to it).
    pub max_exec_seconds: u64,
    /// The largest file an agent may read or write through the API, in bytes.
    pub max_file_bytes: u64,
    /// The most output of an `exec` returned per stream, in bytes (the rest is cut, and said).
    pub max_output_bytes: u64,
    /// The most bytes a session may add to its workspace beyond the repository's copy it
    /// starts with (files it writes, and what its commands write): a write past it is refused
    /// with 413, and the session goes on.
    pub workspace_limit: u64,
    /// The most files and folders a session may add to its workspace beyond the copy.
    pub workspace_files: u64,
    /// The most bytes one command may add to the workspace (and the largest file it may
    /// write); a command past it is stopped, what it added is taken back, and it is refused
    /// with 413.
    pub command_write_limit: u64,
}

impl Default for ServeConfig {
    fn default() -> Self {
        ServeConfig {
            feedback: Feedback::Full,
            holdout: 0.0,
            max_exec_seconds: 120,
            max_file_bytes: 1 << 20,
            max_output_bytes: 64 << 10,
            workspace_limit: 64 << 20,
            workspace_files: 10_000,
            command_write_limit: 32 << 20,
        }
    }
}
