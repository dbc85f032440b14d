//! Stage `statement` (with `[bugfix] statement = "model"`): a model rewrites each bug-fix task's
//! report (`bugfix::report`: the failing calls, what they did, what was expected) as an issue
//! in the project's voice. The model sees the report, the repository's name, the public
//! function's name and its docstring: never the code, the broken file, the patch or the hidden
//! tests. Its answer is checked for what the report never gives away (the broken file's path,
//! the function the bug is in when that is not the public one, a hidden test's name, a changed
//! line, code); an answer that gives any of it is not used, and the task keeps its report and
//! says why (`StatementSource::refused`). Requests are model requests like every other
//! (`keys::LlmKey`, cached by their rendered messages), so changing the model or the template
//! asks again and nothing else runs.

use serde_json::json;

use r2e_core::cache::Cache;
use r2e_core::config::ProviderConfig;
use r2e_core::error::Result;
use r2e_core::model::RequestSettings;
use r2e_core::records::{BugfixTask, Instance, ModelUse, Spent, StatementBy, StatementSource};
use r2e_exec::llm::Llm;
use r2e_exec::llm::prompts::Templates;

use super::bugfix::TESTS_DIR;

/// Everything the statements need, shared by every task of a build.
pub struct Writer<'a> {
    pub llm: &'a Llm,
    pub templates: &'a Templates,
    pub provider: &'a ProviderConfig,
    /// The requests' settings (`stages::keyed::statement_request`).
    pub request: RequestSettings,
}

/// What one task's request gave.
pub struct Written {
    pub spent: Spent,
    /// Whether the request ran now (rather than coming from the cache).
    pub fresh: bool,
    /// Whether the request failed (never cached): the next build asks again.
    pub failed_request: bool,
}

/// The longest statement accepted, in characters.
const MAX_CHARS: usize = 8000;
/// A changed line of the gold patch at least this long (trimmed) may not be quoted.
const QUOTED_LINE: usize = 12;

impl Writer<'_> {
    /// Asks for `task`'s statement (its `problem_statement` is the report) and sets the task's
    /// statement and `statement_source` from the answer.
    pub fn run(&self, cache: &Cache, task: &mut BugfixTask, inst: &Instance) -> Result<Written> {
        let vars = json!({
            "repo": task.repo,
            "qualname": inst.qualname,
            "report": task.problem_statement,
            "docstring": inst.docstring.as_deref().unwrap_or_default().trim(),
        });
        let prompt = self.templates.render(super::keyed::ISSUE, &vars)?;
        let request = self.request.request(
            "You write GitHub issues for Python projects, as their users do. Answer with the issue only.",
            prompt,
        );
        let model = Some(self.request.model.clone());
        let mut written = Written {
            spent: Spent::default(),
            fresh: true,
            failed_request: false,
        };
        let refused = match self
            .llm
            .ask(cache, ModelUse::Statement, self.provider, &request)
        {
            Ok((response, fresh)) => {
                written.spent.add(&response.spent());
                written.fresh = fresh;
                match issue_of(&response.text, task, inst) {
                    Ok(text) => {
                        task.problem_statement = text;
                        task.statement_source = StatementSource {
                            by: StatementBy::Model,
                            model,
                            refused: None,
                        };
                        return Ok(written);
                    }
                    Err(why) => why,
                }
            }
            Err(failure) => {
                written.fresh = !failure.cached;
                written.failed_request = !failure.prompt_too_long();
                format!("the request failed: {}", failure.message)
            }
        };
        task.statement_source = StatementSource {
            by: StatementBy::Report,
            model,
            refused: Some(refused),
        };
        Ok(written)
    }
}

/// The issue in a model's answer: the answer without a fence around it, if it is one. Refused
/// (with why) when it is empty or too long, or gives away what the report never does.
pub fn issue_of(
    answer: &str,
    task: &BugfixTask,
    inst: &Instance,
) -> std::result::Result<String, String> {
    let mut text = answer.trim();
    if let Some(inner) = text
        .strip_prefix("```")
        .and_then(|t| t.split_once('\n'))
        .and_then(|(_, body)| body.trim_end().strip_suffix("```"))
    {
        text = inner.trim();
    }
    if text.is_empty() {
        return Err("the answer is empty".into());
    }
    if text.chars().count() > MAX_CHARS {
        return Err(format!("the answer is longer than {MAX_CHARS} characters"));
    }
    // What the report itself says is no secret (the task's statement is still the report).
    if let Some(secret) = secrets(task, inst)
        .into_iter()
        .find(|s| text.contains(s.as_str()) && !task.problem_statement.contains(s.as_str()))
    {
        return Err(format!("the answer gives away `{secret}`"));
    }
    if text
        .lines()
        .any(|l| l.trim_start().starts_with("def ") || l.trim_start().starts_with("class "))
    {
        return Err("the answer holds code".into());
    }
    Ok(text.to_owned())
}

/// What a statement may not say: the broken file (its path and its name), the function the bug
/// is in when the report names another, the hidden tests (their folder and names), and the
/// changed lines of the gold patch.
fn secrets(task: &BugfixTask, inst: &Instance) -> Vec<String> {
    let mut out = vec![TESTS_DIR.to_owned(), "r2e_equiv".to_owned()];
    let public = inst.qualname.rsplit('.').next().unwrap_or(&inst.qualname);
    for loc in &task.locations {
        out.push(loc.file.clone());
        if let Some(name) = loc.file.rsplit('/').next() {
            out.push(name.to_owned());
        }
        let name = loc.function.rsplit('.').next().unwrap_or(&loc.function);
        if name != public {
            out.push(name.to_owned());
        }
    }
    for test in task.fail_to_pass.iter().chain(&task.pass_to_pass) {
        if let Some(name) = test.rsplit("::").next() {
            out.push(name.to_owned());
        }
    }
    for line in task.patch.lines() {
        if line.starts_with("+++") || line.starts_with("---") {
            continue;
        }
        if let Some(changed) = line.strip_prefix('+').or_else(|| line.strip_prefix('-')) {
            let changed = changed.trim();
            if changed.chars().count() >= QUOTED_LINE {
                out.push(changed.to_owned());
            }
        }
    }
    out.sort();
    out.dedup();
    out
}

#[cfg(test)]
mod tests {
    use super::*;

    fn task(depth: u32, function: &str) -> (BugfixTask, Instance) {
        let instance: Instance = serde_json::from_value(serde_json::json!({
            "id": "r:shop/prices.py:discounted", "repo": "r", "commit": "c",
            "path": "shop/prices.py", "qualname": "discounted", "docstring": "Doc.",
            "spec": "Doc.", "spec_source": "docstring", "context": "", "harness": "",
            "tests": 3, "branch_coverage": null, "line_coverage": null, "harness_hash": "",
            "env_lock": "", "expected": []
        }))
        .unwrap();
        let task: BugfixTask = serde_json::from_value(serde_json::json!({
            "instance_id": "r:shop/prices.py:discounted:bug-0", "repo": "r",
            "base_commit": "c", "created_at": null,
            "problem_statement": "`discounted` does not behave as it should.\n\n`discounted([100], 10, 0)` returns [100], but I expected it to return [90].\n",
            "patch": "--- a/shop/prices.py\n+++ b/shop/prices.py\n@@ -1,2 +1,2 @@\n def _round(cents):\n-    return (cents + 49) // 100\n+    return (cents + 50) // 100\n",
            "test_patch": "", "FAIL_TO_PASS": ["r2e_tests/test_shop.py::TestEquivalence::test_case_3"],
            "PASS_TO_PASS": [], "version": "", "environment_setup_commit": "c",
            "instance": "r:shop/prices.py:discounted", "bug_patch": "", "origin": "mutant",
            "depth": depth,
            "locations": [{"file": "shop/prices.py", "function": function, "lines": [2, 2]}],
            "mutant_kind": null, "mutant": null, "history_commit": null,
            "project_tests_fail": null, "caught_by_project_tests": null, "env_lock": "",
            "stability": {"runs": 3, "tests": []}
        }))
        .unwrap();
        (task, instance)
    }

    #[test]
    fn an_issue_that_gives_nothing_away_is_the_statement() {
        let (t, i) = task(0, "discounted");
        let answer = "```\nDiscount is off by one\n\nCalling `discounted([100], 10, 0)` gives [100]; I expected [90].\n```";
        assert_eq!(
            issue_of(answer, &t, &i).unwrap(),
            "Discount is off by one\n\nCalling `discounted([100], 10, 0)` gives [100]; I expected [90]."
        );
    }

    #[test]
    fn an_issue_that_gives_the_bug_away_is_refused_with_why() {
        let (t, i) = task(1, "_round");
        for (answer, secret) in [
            ("Look at shop/prices.py.", "prices.py"),
            ("prices.py is wrong", "prices.py"),
            ("`_round` rounds wrongly", "_round"),
            ("test_case_3 fails", "test_case_3"),
            (
                "It does return (cents + 49) // 100",
                "return (cents + 49) // 100",
            ),
            ("Try:\ndef discounted(p):\n    pass", "code"),
        ] {
            let why = issue_of(answer, &t, &i).unwrap_err();
            assert!(why.contains(secret), "{answer}: {why}");
        }
        assert!(issue_of("  ", &t, &i).unwrap_err().contains("empty"));
        // At depth 0 the function the bug is in is the public one the report names.
        let (t, i) = task(0, "discounted");
        assert!(issue_of("`discounted` is off", &t, &i).is_ok());
    }
}
