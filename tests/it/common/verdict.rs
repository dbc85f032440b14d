//! `r2e check --json` verdicts compared by what they say: whether a check ran now or came from
//! the cache (`cached`) is no part of its verdict.

use serde_json::Value;

/// A verdict split into what it says (without `cached`) and its `cached` field (null when it
/// has none).
pub fn split_cached(verdict: &Value) -> (Value, Value) {
    let mut said = verdict.clone();
    let cached = said
        .as_object_mut()
        .expect("a verdict is a JSON object")
        .remove("cached")
        .unwrap_or(Value::Null);
    (said, cached)
}

/// Asserts that two verdicts say the same, whether each ran or came from the cache.
#[track_caller]
pub fn assert_same_verdict(a: &Value, b: &Value, what: &str) {
    assert_eq!(split_cached(a).0, split_cached(b).0, "{what}");
}
