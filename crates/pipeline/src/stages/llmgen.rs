//! `generator = "llm"`: a model writes the harness from the function's context, r2e brings it to
//! the harness shape, validates it exactly as a built-in harness, and repairs it for up to
//! `repair_rounds` rounds (fix-error for a failing harness, improve-coverage for a valid one under
//! the selection threshold). Every round is its own cached request and its own cached validation;
//! the valid harness with the best coverage wins, else the last one.

use r2e_core::records::ModelUse;
use r2e_core::records::Spent;
use serde_json::json;

use super::keyed;
use super::validate::{self, Validation};
use r2e_core::config::{GenerateConfig, ProviderConfig};
use r2e_core::error::Result;
use r2e_core::keys::CodeKey;
use r2e_core::model::{Request, RequestSettings};
use r2e_core::records::FailureClass;
use r2e_exec::jobs::{Exec, Runtime};
use r2e_exec::llm::Llm;
use r2e_exec::llm::prompts::Templates;
use r2e_exec::target::Target;

/// Everything the model-driven generator needs, shared by every function of a build.
pub struct LlmGenerator<'a> {
    pub llm: &'a Llm,
    pub templates: &'a Templates,
    pub provider: &'a ProviderConfig,
    pub settings: &'a GenerateConfig,
    /// The requests' settings (`stages::keyed::harness_request`).
    pub request: RequestSettings,
    pub min_coverage: f64,
    /// How harnesses are validated and candidates judged (`[validate]`).
    pub validate: r2e_core::config::ValidateConfig,
}

/// What the generator made of one function.
pub struct LlmOutcome {
    /// The winning harness (the best valid one, else the last one written), if any.
    pub harness: Option<String>,
    pub validation: Validation,
    /// Whether any request or validation ran now (rather than coming from the cache).
    pub fresh: bool,
    /// A model request failed, or a validation hit the sandbox's wall clock (neither is
    /// cached): the function is retried by the next build.
    pub request_failed: bool,
    /// The requests this function needed and their tokens (cached or not).
    pub spent: Spent,
}

/// The first lines of every model-written harness: the function under test (`local`) and the
/// reference (`reference_<local>`), as the built-in generator writes them.
pub fn header(target: &Target) -> (String, String) {
    let parts: Vec<&str> = target.qualname.split('.').collect();
    let (bound, local) = if target.kind.is_method() && parts.len() > 1 {
        let class = parts[..parts.len() - 1].join(".");
        (class, parts[parts.len() - 2].to_owned())
    } else {
        (target.qualname.clone(), parts[parts.len() - 1].to_owned())
    };
    let text = format!(
        "import unittest\n\nimport r2e_equiv\n\ncandidate, reference = r2e_equiv.harness_modules()\n{local} = candidate.{bound}\nreference_{local} = reference.{bound}\n"
    );
    (text, local)
}

/// Brings model code to the harness shape: the header first (unless the code starts with it),
/// and no import of the function under test from its own module (which would test the reference
/// against itself). Returns the harness, or why it cannot be one.
pub fn shape(code: &str, target: &Target) -> std::result::Result<String, String> {
    let (head, local) = header(target);
    let module = &target.module;
    let mut kept = Vec::new();
    for line in code.lines() {
        let t = line.trim_start();
        let imports_target = t.starts_with(&format!("from {module} import "))
            || t == format!("import {module}")
            || t.starts_with(&format!("import {module} as "));
        if imports_target && line.len() == t.len() {
            continue;
        }
        kept.push(line);
    }
    // The header's own lines, when the model repeated them, are not written twice.
    let body = kept
        .into_iter()
        .filter(|l| l.trim().is_empty() || !head.lines().any(|h| h == l.trim()))
        .collect::<Vec<_>>()
        .join("\n");
    if !body.contains("unittest.TestCase") && !body.contains("TestCase)") {
        return Err("the code defines no unittest.TestCase".into());
    }
    if !calls_name(&body, &local) {
        return Err(format!(
            "the harness never uses `{local}`, the implementation under test"
        ));
    }
    let harness = format!("{head}\n{}\n", body.trim_matches('\n'));
    let harness = match r2e_python::extract::summarize(&harness) {
        Ok(_) => harness,
        Err(e) => complete_tests(&harness)
            .ok_or_else(|| format!("the harness is not valid Python: {e}"))?,
    };
    if let Some(line) = reference_outside_checks(&harness, &local) {
        return Err(format!(
            "line {line} uses `reference_{local}` outside `r2e_equiv.check_function`/`check_method`: a candidate is checked in a process of its own, against the reference's recorded calls, so compare the two sides only through those calls"
        ));
    }
    Ok(harness)
}

/// The first line where `reference_<local>` is read other than as an argument of an
/// `r2e_equiv.check_*` call. A candidate runs without the reference: only those calls record
/// what the reference did, and any other use would compare the candidate with itself.
fn reference_outside_checks(harness: &str, local: &str) -> Option<u32> {
    use ruff_python_ast::visitor::{self, Visitor};
    use ruff_python_ast::{Expr, ExprContext};
    use ruff_text_size::{Ranged, TextSize};

    struct Uses {
        name: String,
        found: Option<TextSize>,
    }
    impl<'a> Visitor<'a> for Uses {
        fn visit_expr(&mut self, expr: &'a Expr) {
            match expr {
                Expr::Call(call)
                    if matches!(&*call.func, Expr::Attribute(a)
                        if a.attr.as_str().starts_with("check_")
                            && matches!(&*a.value, Expr::Name(n) if n.id.as_str() == "r2e_equiv")) =>
                {
                    for arg in &call.arguments.args {
                        if !matches!(arg, Expr::Name(n) if n.id.as_str() == self.name) {
                            self.visit_expr(arg);
                        }
                    }
                    for kw in &call.arguments.keywords {
                        self.visit_expr(&kw.value);
                    }
                }
                Expr::Name(n) if n.id.as_str() == self.name && n.ctx == ExprContext::Load => {
                    self.found.get_or_insert(n.start());
                }
                _ => visitor::walk_expr(self, expr),
            }
        }
    }
    let parsed = ruff_python_parser::parse_module(harness).ok()?;
    let mut uses = Uses {
        name: format!("reference_{local}"),
        found: None,
    };
    uses.visit_body(&parsed.syntax().body);
    let at = uses.found?;
    let index = r2e_python::extract::LineIndex::new(harness);
    Some(index.line_col(harness, at).0)
}

/// An answer cut off at the token limit ends inside a test: the harness up to the last test
/// method after which it still parses, when that leaves at least one test.
fn complete_tests(harness: &str) -> Option<String> {
    let lines: Vec<&str> = harness.lines().collect();
    (1..lines.len()).rev().find_map(|cut| {
        if !lines[cut].trim_start().starts_with("def test") {
            return None;
        }
        let kept = format!("{}\n", lines[..cut].join("\n"));
        (kept.contains("def test") && r2e_python::extract::summarize(&kept).is_ok()).then_some(kept)
    })
}

/// Whether `name` is used as a name (not as part of `reference_name` or `x.name`) in `code`.
fn calls_name(code: &str, name: &str) -> bool {
    code.match_indices(name).any(|(i, _)| {
        let before = code[..i].chars().next_back();
        let after = code[i + name.len()..].chars().next();
        let ident = |c: Option<char>| c.is_some_and(|c| c.is_alphanumeric() || c == '_');
        !ident(before) && before != Some('.') && !ident(after)
    })
}

impl LlmGenerator<'_> {
    fn request(&self, prompt: String) -> Request {
        self.request.request(
            "You write Python unit tests. Answer with one ```python code block.",
            prompt,
        )
    }

    /// Generates, validates and repairs the harness of one function.
    pub fn run(
        &self,
        exec: &Exec,
        runtime: &Runtime,
        target: &Target,
        code: &CodeKey,
        context: &str,
    ) -> Result<LlmOutcome> {
        let (head, local) = header(target);
        let method = target.qualname.rsplit('.').next().unwrap_or_default();
        let base = json!({
            "qualname": target.qualname,
            "module": target.module,
            "kind": target.kind.as_str(),
            "method": method,
            "local": local,
            "header": head.trim_end(),
            "context": context,
            "min_tests": 3,
        });
        let first = keyed::first_prompt(self.settings.mode);
        let mut fresh = false;
        let mut best: Option<(String, Validation)> = None;
        let mut last: Option<(Option<String>, Validation)> = None;
        let mut prompt = self.templates.render(first, &base)?;
        let mut stage = ModelUse::Generate;
        let mut spent = Spent::default();
        let mut transient = false;
        let mut asked: Vec<r2e_core::hash::Hash> = Vec::new();
        for round in 0..=self.settings.repair_rounds {
            let mut request = self.request(prompt);
            // With sampling, a prompt asked again gets a new sample, not the cached answer.
            if self.request.temperature > 0.0 {
                while asked.contains(&request.key()) {
                    request.sample += 1;
                }
            }
            asked.push(request.key());
            let answer = match self.llm.ask(exec.cache, stage, self.provider, &request) {
                Ok((r, now)) => {
                    fresh |= now;
                    spent.add(&r.spent());
                    r.text
                }
                Err(failure) => {
                    // A prompt too long for the model's context is final (and stored); any
                    // other failure is asked again by the next build.
                    let too_long = failure.prompt_too_long();
                    return Ok(LlmOutcome {
                        harness: best.as_ref().map(|b| b.0.clone()),
                        validation: best.map(|b| b.1).unwrap_or_else(|| {
                            if too_long {
                                Validation::failed(FailureClass::PromptTooLong, failure.message)
                            } else {
                                Validation::failed(
                                    FailureClass::Other,
                                    format!("model request failed: {}", failure.message),
                                )
                            }
                        }),
                        fresh: fresh || !failure.cached,
                        request_failed: !too_long,
                        spent,
                    });
                }
            };
            let shaped = r2e_exec::llm::code_block(&answer)
                .ok_or_else(|| "the answer holds no Python code".to_owned())
                .and_then(|c| shape(&c, target));
            let (harness, validation) = match shaped {
                Ok(h) => {
                    let checked =
                        validate::validate(exec, runtime, target, code, &h, &self.validate)?;
                    fresh |= checked.fresh;
                    transient |= checked.transient;
                    (Some(h), checked.validation)
                }
                Err(why) => (None, Validation::failed(FailureClass::Other, why)),
            };
            if let (Some(h), true) = (&harness, validation.valid) {
                let better = best
                    .as_ref()
                    .is_none_or(|(_, b)| validation.coverage() > b.coverage());
                if better {
                    best = Some((h.clone(), validation.clone()));
                }
            }
            let done = validation.valid && validation.coverage() >= self.min_coverage;
            last = Some((harness.clone(), validation.clone()));
            if done || round == self.settings.repair_rounds {
                break;
            }
            // The next round: repair what this one wrote.
            stage = ModelUse::Repair;
            let mut vars = base.clone();
            vars["harness"] = json!(harness.clone().unwrap_or_else(|| answer.clone()));
            prompt = if validation.valid {
                vars["coverage_percent"] = json!((validation.coverage() * 100.0).round() as u32);
                vars["marked_source"] = json!(marked_source(target, &validation));
                self.templates.render(keyed::IMPROVE_COVERAGE, &vars)?
            } else {
                vars["failure_class"] = json!(
                    validation
                        .failure_class
                        .map(FailureClass::name)
                        .unwrap_or_default()
                );
                vars["failure_message"] =
                    json!(validation.failure_message.clone().unwrap_or_default());
                self.templates.render(keyed::FIX_ERROR, &vars)?
            };
        }
        let (harness, validation) = match best {
            Some((h, v)) => (Some(h), v),
            None => last.expect("at least one round ran"),
        };
        Ok(LlmOutcome {
            harness,
            validation,
            fresh,
            request_failed: transient,
            spent,
        })
    }
}

/// The function's source with `# NOT RUN` and `# PARTIAL` marks from its validation (whose
/// lines are relative to the `def` line).
fn marked_source(target: &Target, v: &Validation) -> String {
    let Ok(text) = std::fs::read_to_string(&target.source_file) else {
        return String::new();
    };
    text.lines()
        .enumerate()
        .map(|(i, l)| (i as u32 + 1, l))
        .filter(|(n, _)| (target.start_line..=target.end_line).contains(n))
        .map(|(n, l)| {
            let n = n - target.start_line;
            if v.missing_lines.contains(&n) {
                format!("{l}  # NOT RUN")
            } else if v.partial_lines.contains(&n) {
                format!("{l}  # PARTIAL")
            } else {
                l.to_owned()
            }
        })
        .collect::<Vec<_>>()
        .join("\n")
}

#[cfg(test)]
mod tests {
    use super::*;
    use r2e_exec::py::{AnswerStatus, TestOutcome};

    fn target() -> Target {
        Target {
            root: "/r".into(),
            import_root: "/r".into(),
            extra_roots: Vec::new(),
            module: "pkg.ops".into(),
            qualname: "add".into(),
            kind: r2e_core::records::FunctionKind::Function,
            source_file: "/r/pkg/ops.py".into(),
            start_line: 1,
            end_line: 3,
            call_sites: Vec::new(),
            hide: Vec::new(),
        }
    }

    #[test]
    fn shaping_keeps_one_header_and_drops_imports_of_the_target() {
        let code = "import unittest\nimport r2e_equiv\nfrom pkg.ops import add\n\nclass T(unittest.TestCase):\n    def test_0(self):\n        r2e_equiv.check_function(self, add, reference_add, (1, 2), {})\n";
        let h = shape(code, &target()).unwrap();
        let (head, _) = header(&target());
        assert!(h.starts_with(&head));
        assert_eq!(h.matches("import unittest").count(), 1);
        assert!(!h.contains("from pkg.ops import"));
    }

    #[test]
    fn an_answer_cut_at_the_token_limit_keeps_its_complete_tests() {
        let test = |i: u32| {
            format!(
                "    def test_{i}(self):\n        r2e_equiv.check_function(self, add, reference_add, ({i}, 2), {{}})\n\n"
            )
        };
        let code = format!(
            "class T(unittest.TestCase):\n{}{}    def test_2(self):\n        args = (\n            3,\n",
            test(0),
            test(1)
        );
        let h = shape(&code, &target()).unwrap();
        assert!(h.contains("def test_1") && !h.contains("def test_2"), "{h}");
        // Nothing complete to keep: still an error.
        let cut = "class T(unittest.TestCase):\n    def test_0(self):\n        add(1, (\n";
        assert!(
            shape(cut, &target())
                .unwrap_err()
                .contains("not valid Python")
        );
    }

    #[test]
    fn shaping_rejects_comparisons_outside_the_check_calls() {
        // Both sides are the candidate in its own process: a direct comparison would compare
        // it with itself.
        let direct = "class T(unittest.TestCase):\n    def test_0(self):\n        self.assertEqual(add(1, 2), reference_add(1, 2))\n";
        let err = shape(direct, &target()).unwrap_err();
        assert!(
            err.contains("line 11 uses `reference_add` outside"),
            "{err}"
        );
        let aliased = "class T(unittest.TestCase):\n    def test_0(self):\n        ref = reference_add\n        r2e_equiv.check_function(self, add, ref, (1, 2), {})\n";
        assert!(shape(aliased, &target()).is_err());
        // Through the check calls, over several lines, or against a literal: fine.
        let through = "class T(unittest.TestCase):\n    def test_0(self):\n        r2e_equiv.check_function(\n            self,\n            add,\n            reference_add,\n            (1, 2),\n            {},\n        )\n    def test_1(self):\n        self.assertEqual(add(2, 2), 4)\n";
        assert!(shape(through, &target()).is_ok());
    }

    #[test]
    fn shaping_rejects_harnesses_that_never_use_the_function() {
        let code = "import unittest\n\nclass T(unittest.TestCase):\n    def test_0(self):\n        self.assertEqual(reference_add(1, 2), 3)\n";
        assert!(
            shape(code, &target())
                .unwrap_err()
                .contains("never uses `add`")
        );
        assert!(
            shape("x = add(1)\n", &target())
                .unwrap_err()
                .contains("TestCase")
        );
    }

    #[test]
    fn a_repair_round_driven_by_a_scripted_model_fixes_the_harness() {
        use r2e_core::cache::Cache;
        use r2e_exec::llm::fake::ScriptedModel;
        use r2e_exec::py::{CoverageCounts, RunAnswer, TestResult};
        use std::sync::Arc;

        let dir = tempfile::tempdir().unwrap();
        std::fs::create_dir(dir.path().join("repo")).unwrap();
        let cfg = r2e_core::config::parse(
            "[[repo]]\npath = \"repo\"\n\n[generate]\ngenerator = \"llm\"\nprovider = \"m\"\nmodel = \"x\"\n\n[providers.m]\nbase_url = \"http://127.0.0.1:9/v1\"\n",
            &dir.path().join("pipeline.toml"),
        )
        .unwrap();
        let templates = Templates::load(&cfg).unwrap();
        let good = "class T(unittest.TestCase):\n    def test_0(self):\n        r2e_equiv.check_function(self, add, reference_add, (1, 2), {})\n";
        let broken = format!("{good}\nbroken_helper()\n");
        // The model writes a broken harness first and fixes it when told the failure.
        let model = Arc::new(ScriptedModel::new(move |req| {
            let prompt = &req.messages.last().unwrap().content;
            Ok(if prompt.contains("NameError") {
                format!("```python\n{good}```")
            } else {
                format!("```python\n{broken}```")
            })
        }));
        let llm = Llm::new(model.clone());
        // The runner cannot import a harness that calls `broken_helper`; any other passes.
        let sandbox = r2e_exec::runs::fake::warm_worker(|harness, mode, n| {
            let pass = |name: &str| TestResult {
                name: name.into(),
                outcome: TestOutcome::Pass,
                message: None,
                returned_normally: true,
                records: Vec::new(),
            };
            if harness.contains("broken_helper") {
                RunAnswer {
                    status: AnswerStatus::Error,
                    error: Some(
                        "harness import failed: NameError: name 'broken_helper' is not defined"
                            .into(),
                    ),
                    ..RunAnswer::default()
                }
            } else {
                RunAnswer {
                    status: AnswerStatus::Ok,
                    tests: vec![pass("t0"), pass("t1"), pass("t2")],
                    coverage: (mode == "record" && n == 0).then(|| CoverageCounts {
                        lines_total: 2,
                        lines_covered: 2,
                        ..CoverageCounts::default()
                    }),
                    ..RunAnswer::default()
                }
            }
        });
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = Cache::open(cache_dir.path()).unwrap();
        let exec = Exec {
            cache: &cache,
            sandbox: &sandbox,
            settings: &cfg.sandbox,
            warm: None,
        };
        let generator = LlmGenerator {
            llm: &llm,
            templates: &templates,
            provider: cfg.generate_provider().unwrap(),
            settings: &cfg.generate,
            request: keyed::harness_request(cfg.generate_provider().unwrap().api, &cfg.generate),
            min_coverage: 0.8,
            validate: Default::default(),
        };
        let code = CodeKey {
            module: "pkg.ops".into(),
            qualname: "add".into(),
            kind: r2e_core::records::FunctionKind::Function,
            code: r2e_core::hash::Hash::of_bytes(b"add"),
            slice: Vec::new(),
            import_time: r2e_core::hash::Hash::of_bytes(b""),
            env_lock: String::new(),
            project: String::new(),
        };
        let out = generator
            .run(
                &exec,
                &r2e_exec::jobs::Runtime::for_tests(),
                &target(),
                &code,
                "def add(a, b): ...",
            )
            .unwrap();
        assert!(out.validation.valid, "{:?}", out.validation);
        assert!(out.harness.unwrap().contains("reference_add, (1, 2)"));
        assert_eq!(out.spent.requests, 2);
        let asked = model.asked();
        assert_eq!(asked.len(), 2);
        let repair = &asked[1].messages.last().unwrap().content;
        assert!(repair.contains("fails when it checks the original code against itself"));
        assert!(
            repair.contains("broken_helper"),
            "the repair prompt shows the failure"
        );
        // Two validations of three workers each (the first record, the later records, the
        // original as a candidate), all answered by the fake: no process started.
        assert_eq!(sandbox.jobs().len(), 6);
    }
}
