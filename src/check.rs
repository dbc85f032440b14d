//! `r2e check ID --candidate FILE`: runs an instance's harness on a candidate implementation.
//!
//! The candidate's `def` (or, for a method, its `def` or its whole class, at the user's choice)
//! replaces the original in a scratch copy of the module; the reference keeps the original; the
//! harness runs in the sandbox. The candidate file may carry its own imports: they are placed
//! just before the replaced definition.

use std::path::Path;

use ruff_python_ast::Stmt;
use ruff_text_size::Ranged;
use serde::{Deserialize, Serialize};

use crate::config::Config;
use crate::db;
use crate::engine::Session;
use crate::error::{Error, Result};
use crate::python::extract::LineIndex;
use crate::records::{EnvLine, Instance, read_built, read_jsonl};
use crate::sandbox::Exit;
use crate::services::Services;
use crate::stages::candidate::Target;
use crate::stages::jobs::Exec;
use crate::stages::validate::run_harness;

/// A failing test of a check.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct FailedTest {
    pub name: String,
    pub outcome: String,
    pub message: Option<String>,
}

/// What `check` found, as `--json` prints it.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Report {
    pub id: String,
    pub passed: bool,
    /// Why no test ran (the candidate does not compile or import, or the harness crashed).
    pub error: Option<String>,
    pub tests: usize,
    pub failed: Vec<FailedTest>,
}

impl Report {
    fn error(id: &str, message: String) -> Report {
        Report {
            id: id.to_owned(),
            passed: false,
            error: Some(message),
            tests: 0,
            failed: Vec::new(),
        }
    }
}

/// Checks a candidate for one instance, with the services the configuration names.
pub fn check(cfg: &Config, id: &str, candidate: &Path) -> Result<Report> {
    check_with(cfg, id, candidate, &Services::for_config(cfg, false))
}

/// Checks a candidate for one instance.
pub fn check_with(cfg: &Config, id: &str, candidate: &Path, services: &Services) -> Result<Report> {
    // One generation of the output, whatever a build commits meanwhile.
    let output = crate::engine::outputs::resolve(&cfg.output);
    let dataset_path = output.join("dataset.jsonl");
    let instances: Vec<Instance> = read_built(&dataset_path)?;
    let instance = instances.iter().find(|i| i.id == id).ok_or_else(|| {
        Error::input(format!(
            "`{id}` is not an instance of the dataset at `{}`",
            dataset_path.display()
        ))
    })?;
    let candidate_text = std::fs::read_to_string(candidate).map_err(|e| {
        Error::input(format!(
            "cannot read the candidate `{}`: {e}",
            candidate.display()
        ))
    })?;
    let (repo_name, path, qualname) = (&instance.repo, &instance.path, &instance.qualname);

    let s = Session::open(cfg)?;
    let dbase = &s.db;
    let (ix, repo) = s
        .repos
        .iter()
        .enumerate()
        .find(|(_, r)| r.name(dbase) == repo_name)
        .ok_or_else(|| Error::input(format!("the pipeline has no repo `{repo_name}` any more")))?;
    let file = *repo
        .files(dbase)
        .iter()
        .find(|f| f.path(dbase) == path)
        .ok_or_else(|| Error::input(format!("repo `{repo_name}` has no file `{path}` any more")))?;
    let summary = db::parse_file(dbase, file)
        .clone()
        .map_err(|e| Error::input(format!("`{path}` no longer parses: {e}")))?;
    let source = db::source_text(dbase, file).clone().map_err(Error::env)?;
    let rows = db::file_functions(dbase, file, s.settings);
    let row = rows
        .iter()
        .find(|r| r.id == id)
        .ok_or_else(|| Error::input(format!("`{id}` is no longer in `{path}`")))?;
    let layout = &summary.layout.defs[row.def as usize];

    // The environment this instance was validated in.
    let root = s.checkouts[ix].materialize(&s.cache)?;
    let envs: Vec<EnvLine> = read_jsonl(&output.join("envs.jsonl"))?.unwrap_or_default();
    let runtime = envs
        .iter()
        .find(|e| &e.repo == repo_name)
        .and_then(|e| crate::stages::env::runtime_of(&s.cache, e, &root))
        .ok_or_else(|| {
            Error::Unrunnable(format!(
                "the environment of repo `{repo_name}` is not built: run `r2e build`"
            ))
        })?;

    let candidate_module = match splice(
        &source,
        &summary,
        row.def as usize,
        &candidate_text,
        qualname,
    ) {
        Ok(text) => text,
        Err(message) => return Ok(Report::error(id, message)),
    };
    let module = db::module_index(dbase, *repo)
        .module_name(file.ix(dbase))
        .to_owned();
    let target = Target::new(
        &root,
        path,
        module,
        qualname,
        (layout.start_line, layout.end_line),
    );
    let exec = Exec {
        cache: &s.cache,
        sandbox: services.sandbox.as_ref(),
        settings: &cfg.sandbox,
    };
    let (outcome, answer, _) = run_harness(
        &exec,
        &runtime,
        &target,
        &instance.harness,
        Some(&candidate_module),
    )
    .map_err(|e| Error::Unrunnable(e.to_string()))?;
    let Some(answer) = answer else {
        let why = match outcome.exit {
            Exit::Timeout => "the candidate ran past the time limit".to_string(),
            ref other => format!(
                "the harness crashed ({other:?}): {}",
                String::from_utf8_lossy(&outcome.stderr)
                    .lines()
                    .last()
                    .unwrap_or_default()
            ),
        };
        return Ok(Report::error(id, why));
    };
    if answer.status != "ok" {
        let message = answer
            .error
            .unwrap_or_else(|| "the harness could not run".to_owned());
        return Ok(Report::error(
            id,
            format!("the candidate does not import: {message}"),
        ));
    }
    let failed: Vec<FailedTest> = answer
        .tests
        .iter()
        .filter(|t| t.outcome != "pass")
        .map(|t| FailedTest {
            name: t.name.clone(),
            outcome: t.outcome.clone(),
            message: t.message.clone(),
        })
        .collect();
    Ok(Report {
        id: id.to_owned(),
        passed: failed.is_empty() && !answer.tests.is_empty(),
        error: None,
        tests: answer.tests.len(),
        failed,
    })
}

/// The module's text with the definition at `def` replaced by the candidate's, and the
/// candidate's imports placed before it.
fn splice(
    source: &str,
    summary: &crate::python::summary::ModuleSummary,
    def: usize,
    candidate: &str,
    qualname: &str,
) -> std::result::Result<String, String> {
    let parsed = ruff_python_parser::parse_module(candidate).map_err(|e| {
        let (line, col) = LineIndex::new(candidate).line_col(candidate, e.location.start());
        format!(
            "the candidate does not compile: syntax error at {line}:{col}: {}",
            e.error
        )
    })?;
    let body = &parsed.syntax().body;
    let mut imports = String::new();
    for stmt in body {
        if matches!(stmt, Stmt::Import(_) | Stmt::ImportFrom(_)) {
            imports.push_str(&candidate[stmt.range()]);
            imports.push('\n');
        }
    }
    let (class, name) = match qualname.split_once('.') {
        Some((c, n)) => (Some(c), n),
        None => (None, qualname),
    };
    let iface = &summary.interface.defs[def];
    let layout = &summary.layout.defs[def];
    let full = |stmt: &Stmt| -> String {
        // From the start of the line of its first decorator.
        let start = match stmt {
            Stmt::FunctionDef(f) => f.decorator_list.first().map_or(stmt.start(), |d| d.start()),
            Stmt::ClassDef(c) => c.decorator_list.first().map_or(stmt.start(), |d| d.start()),
            _ => stmt.start(),
        };
        let line_start = candidate[..start.to_usize()]
            .rfind('\n')
            .map_or(0, |i| i + 1);
        crate::python::dedent(&candidate[line_start..stmt.end().to_usize()])
    };
    // A whole class, for a method, when the candidate gives one.
    if let Some(class_name) = class
        && let Some(stmt) = body
            .iter()
            .find(|s| matches!(s, Stmt::ClassDef(c) if c.name.id.as_str() == class_name))
    {
        let class_ix = iface.class.expect("methods have a class") as usize;
        let chunk = summary.layout.defs[class_ix].chunk;
        return Ok(format!(
            "{}{imports}{}\n{}",
            &source[..chunk.start as usize],
            full(stmt),
            &source[chunk.end as usize..]
        ));
    }
    let find_def = |stmts: &[Stmt]| -> Option<String> {
        stmts
            .iter()
            .find(|s| matches!(s, Stmt::FunctionDef(f) if f.name.id.as_str() == name))
            .map(full)
    };
    let text = find_def(body)
        .or_else(|| {
            body.iter().find_map(|s| match s {
                Stmt::ClassDef(c) => find_def(&c.body),
                _ => None,
            })
        })
        .ok_or_else(|| format!("the candidate defines no `{name}`"))?;
    let chunk = layout.chunk;
    let original = &source[chunk.start as usize..chunk.end as usize];
    let indent: String = original
        .chars()
        .take_while(|c| *c == ' ' || *c == '\t')
        .collect();
    let indented: String = text
        .lines()
        .map(|l| {
            if l.trim().is_empty() {
                "\n".to_string()
            } else {
                format!("{indent}{l}\n")
            }
        })
        .collect();
    match class {
        None => Ok(format!(
            "{}{imports}{indented}{}",
            &source[..chunk.start as usize],
            &source[chunk.end as usize..]
        )),
        Some(_) => {
            // Imports go before the enclosing class, at module level.
            let class_ix = iface.class.expect("methods have a class") as usize;
            let class_start = summary.layout.defs[class_ix].chunk.start as usize;
            Ok(format!(
                "{}{imports}{}{indented}{}",
                &source[..class_start],
                &source[class_start..chunk.start as usize],
                &source[chunk.end as usize..]
            ))
        }
    }
}

/// Text for people: what failed.
pub fn report_text(r: &Report) -> String {
    if r.passed {
        return format!("PASS {}: all {} tests pass\n", r.id, r.tests);
    }
    let mut out = format!("FAIL {}", r.id);
    if let Some(e) = &r.error {
        out.push_str(&format!(": {e}\n"));
        return out;
    }
    out.push_str(&format!(": {} of {} tests fail\n", r.failed.len(), r.tests));
    for f in &r.failed {
        out.push_str(&format!("- {} ({}):\n", f.name, f.outcome));
        for line in f.message.as_deref().unwrap_or_default().lines() {
            out.push_str(&format!("    {line}\n"));
        }
    }
    out
}
