//! Stage `refine`: a model rewrites a selected instance's docstring into a specification, from
//! the original docstring, the function's context, its harness, the argument and return types
//! observed while validating, and a few input/output examples captured then. The answer must be
//! one plain-text docstring; anything else is recorded as malformed and the instance keeps its
//! original docstring.

use r2e_core::records::ModelUse;
use r2e_core::records::Spent;
use serde_json::json;

use crate::stages::validate::Validation;
use r2e_core::cache::Cache;
use r2e_core::config::{ProviderConfig, RefineConfig};
use r2e_core::error::Result;
use r2e_core::model::RequestSettings;
use r2e_exec::llm::Llm;
use r2e_exec::llm::prompts::Templates;

/// Everything the refinement needs, shared by every instance of a build.
pub struct Refiner<'a> {
    pub llm: &'a Llm,
    pub templates: &'a Templates,
    pub provider: &'a ProviderConfig,
    pub settings: &'a RefineConfig,
    /// The requests' settings (`stages::keyed::spec_request`).
    pub request: RequestSettings,
}

/// What one instance's refinement gave.
pub struct Refined {
    /// The new docstring, when the answer was one.
    pub spec: std::result::Result<String, RefineFailure>,
    pub spent: Spent,
    /// Whether the request ran now (rather than coming from the cache).
    pub fresh: bool,
}

/// Why an instance keeps its original docstring.
#[derive(Clone, Debug, PartialEq)]
pub enum RefineFailure {
    /// The request failed (never cached): the next build asks again.
    Request(String),
    /// The server refused the prompt as longer than the model's context window (stored: no
    /// later build asks again).
    PromptTooLong(String),
    /// The model answered, but not with a docstring.
    Malformed(String),
}

/// The function an instance is about.
pub struct Subject<'a> {
    pub qualname: &'a str,
    pub module: &'a str,
    pub kind: &'a str,
    pub docstring: &'a str,
    pub context: &'a str,
    pub harness: &'a str,
}

impl Refiner<'_> {
    pub fn run(&self, cache: &Cache, subject: &Subject, v: &Validation) -> Result<Refined> {
        let examples: Vec<String> = v
            .examples
            .iter()
            .take(self.settings.max_examples as usize)
            .map(|(call, outcome)| format!("{call} -> {outcome}"))
            .collect();
        let arg_types: Vec<String> = v
            .arg_types
            .iter()
            .map(|(name, types)| format!("{name}: {}", types.join(" | ")))
            .collect();
        let vars = json!({
            "qualname": subject.qualname,
            "module": subject.module,
            "kind": subject.kind,
            "docstring": subject.docstring,
            "context": subject.context,
            "harness": subject.harness,
            "examples": examples.join("\n"),
            "arg_types": arg_types.join("\n"),
            "return_types": v.return_types.join(" | "),
        });
        let prompt = self.templates.render(super::keyed::SPECGEN, &vars)?;
        let request = self.request.request(
            "You write precise Python docstrings. Answer with the docstring only.",
            prompt,
        );
        let mut spent = Spent::default();
        Ok(
            match self
                .llm
                .ask(cache, ModelUse::Refine, self.provider, &request)
            {
                Ok((response, fresh)) => {
                    spent.add(&response.spent());
                    Refined {
                        spec: docstring_of(&response.text).map_err(RefineFailure::Malformed),
                        spent,
                        fresh,
                    }
                }
                Err(failure) if failure.prompt_too_long() => Refined {
                    fresh: !failure.cached,
                    spec: Err(RefineFailure::PromptTooLong(failure.message)),
                    spent,
                },
                Err(failure) => Refined {
                    spec: Err(RefineFailure::Request(failure.message)),
                    spent,
                    fresh: true,
                },
            },
        )
    }
}

/// The longest docstring accepted, in characters.
const MAX_SPEC_CHARS: usize = 8000;

/// The docstring in a model's answer: the first fenced block (of any language but Python), else
/// the whole answer; surrounding triple quotes are dropped. Code, an empty answer, an unclosed
/// fence or text that could not sit inside a docstring is malformed.
pub fn docstring_of(answer: &str) -> std::result::Result<String, String> {
    let text = match answer.find("```") {
        Some(start) => {
            let after = &answer[start + 3..];
            let (lang, body) = after.split_once('\n').unwrap_or((after, ""));
            let lang = lang.trim().to_ascii_lowercase();
            if matches!(lang.as_str(), "python" | "py" | "python3") {
                return Err("the answer is code, not a docstring".into());
            }
            let Some(end) = body.find("```") else {
                return Err("the answer's code block is not closed".into());
            };
            &body[..end]
        }
        None => answer,
    };
    let mut text = text.trim();
    for quote in ["\"\"\"", "'''"] {
        if let Some(inner) = text.strip_prefix(quote).and_then(|t| t.strip_suffix(quote)) {
            text = inner.trim();
        }
    }
    if text.is_empty() {
        return Err("the answer is empty".into());
    }
    if text.contains("\"\"\"") {
        return Err("the answer holds `\"\"\"`, which cannot sit inside a docstring".into());
    }
    if text.chars().count() > MAX_SPEC_CHARS {
        return Err(format!(
            "the answer is longer than {MAX_SPEC_CHARS} characters"
        ));
    }
    if text
        .lines()
        .any(|l| l.starts_with("def ") || l.starts_with("class "))
    {
        return Err("the answer is code, not a docstring".into());
    }
    Ok(text.to_owned())
}

#[cfg(test)]
mod tests {
    use super::docstring_of;

    #[test]
    fn docstrings_are_taken_from_fences_or_plain_answers() {
        assert_eq!(
            docstring_of("Here:\n```text\nAdd a and b.\n\nReturns an int.\n```\n").unwrap(),
            "Add a and b.\n\nReturns an int."
        );
        assert_eq!(
            docstring_of("\"\"\"Add a and b.\"\"\"").unwrap(),
            "Add a and b."
        );
        assert_eq!(docstring_of("  Add a and b.  ").unwrap(), "Add a and b.");
    }

    #[test]
    fn malformed_answers_are_refused_with_a_reason() {
        assert!(
            docstring_of("```python\ndef f(): pass\n```")
                .unwrap_err()
                .contains("code")
        );
        assert!(
            docstring_of("```text\nunclosed")
                .unwrap_err()
                .contains("not closed")
        );
        assert!(docstring_of("   ").unwrap_err().contains("empty"));
        assert!(docstring_of("a \"\"\" b").unwrap_err().contains("\"\"\""));
        assert!(
            docstring_of("def f(x):\n    return x")
                .unwrap_err()
                .contains("code")
        );
        assert!(
            docstring_of(&"x".repeat(9000))
                .unwrap_err()
                .contains("longer")
        );
    }
}
