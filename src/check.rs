//! `r2e check ID --candidate FILE`: runs an instance's harness on a candidate implementation.
//!
//! The candidate's `def` (or, for a method, its `def` or its whole class, at the user's choice)
//! replaces the original in a scratch copy of the module; the reference keeps the original; the
//! harness runs in the sandbox. The candidate file may carry its own imports: they are placed
//! just before the replaced definition.

use std::path::Path;

use ruff_python_ast::Stmt;
use ruff_text_size::Ranged;
use serde_json::{Value, json};

use crate::config::Config;
use crate::db;
use crate::engine::Session;
use crate::error::{Error, Result};
use crate::python::extract::LineIndex;
use crate::sandbox::{Exit, Sandbox};
use crate::stages::harness::{self, Target};

/// What `check` found.
pub struct Report {
    pub passed: bool,
    pub json: Value,
}

fn read_jsonl(path: &Path) -> Option<Vec<Value>> {
    let text = std::fs::read_to_string(path).ok()?;
    Some(
        text.lines()
            .filter_map(|l| serde_json::from_str(l).ok())
            .collect(),
    )
}

/// Checks a candidate for one instance.
pub fn check(cfg: &Config, id: &str, candidate: &Path) -> Result<Report> {
    let dataset_path = cfg.output.join("dataset.jsonl");
    let instances = read_jsonl(&dataset_path).ok_or_else(|| {
        Error::input(format!(
            "no dataset at `{}`: run `r2e build` first",
            dataset_path.display()
        ))
    })?;
    let instance = instances.iter().find(|i| i["id"] == id).ok_or_else(|| {
        Error::input(format!(
            "`{id}` is not an instance of the dataset at `{}`",
            dataset_path.display()
        ))
    })?;
    let candidate_text = match std::fs::read_to_string(candidate) {
        Ok(t) => t,
        Err(e) => {
            return Err(Error::input(format!(
                "cannot read the candidate `{}`: {e}",
                candidate.display()
            )));
        }
    };
    let repo_name = instance["repo"].as_str().unwrap_or_default();
    let path = instance["path"].as_str().unwrap_or_default();
    let qualname = instance["qualname"].as_str().unwrap_or_default();
    let harness_text = instance["harness"].as_str().unwrap_or_default();

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
    let envs = read_jsonl(&cfg.output.join("envs.jsonl")).unwrap_or_default();
    let env_key = envs
        .iter()
        .find(|e| e["repo"] == repo_name)
        .and_then(|e| e["env_key"].as_str())
        .unwrap_or_default();
    let python = s
        .cache
        .root()
        .join("envs-v1")
        .join(env_key)
        .join("venv")
        .join("bin")
        .join("python");
    if env_key.is_empty() || !python.exists() {
        return Err(Error::Unrunnable(format!(
            "the environment of repo `{repo_name}` is not built: run `r2e build`"
        )));
    }

    let candidate_module = match splice(
        &source,
        &summary,
        row.def as usize,
        &candidate_text,
        qualname,
    ) {
        Ok(text) => text,
        Err(message) => {
            return Ok(Report {
                passed: false,
                json: json!({"id": id, "passed": false, "error": message, "tests": 0, "failed": []}),
            });
        }
    };
    let root = s.checkouts[ix].materialize(&s.cache)?;
    let module = db::module_index(dbase, *repo)
        .module_name(file.ix(dbase))
        .to_owned();
    let target = Target {
        import_root: crate::stages::assemble::import_root(&root, path, &module),
        extra_roots: crate::stages::assemble::extra_roots(&root),
        module,
        qualname: qualname.to_owned(),
        kind: if qualname.contains('.') {
            "method"
        } else {
            "function"
        },
        source_file: root.join(path),
        start_line: layout.start_line,
        end_line: layout.end_line,
        call_sites: Vec::new(),
    };
    let sandbox = crate::sandbox::local::LocalSandbox::new();
    let (outcome, answer) = harness::run_harness(
        &sandbox as &dyn Sandbox,
        &s.cache,
        &python,
        &target,
        harness_text,
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
        return Ok(Report {
            passed: false,
            json: json!({"id": id, "passed": false, "error": why, "tests": 0, "failed": []}),
        });
    };
    if answer["status"] != "ok" {
        let message = answer["error"]
            .as_str()
            .unwrap_or("the harness could not run")
            .to_owned();
        return Ok(Report {
            passed: false,
            json: json!({"id": id, "passed": false, "error": format!("the candidate does not import: {message}"), "tests": 0, "failed": []}),
        });
    }
    let tests = answer["tests"].as_array().cloned().unwrap_or_default();
    let failed: Vec<Value> = tests
        .iter()
        .filter(|t| t["outcome"] != "pass")
        .map(|t| json!({"name": t["name"], "outcome": t["outcome"], "message": t["message"]}))
        .collect();
    let passed = failed.is_empty() && !tests.is_empty();
    Ok(Report {
        passed,
        json: json!({"id": id, "passed": passed, "error": null, "tests": tests.len(), "failed": failed}),
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
    let v = &r.json;
    if r.passed {
        return format!(
            "PASS {}: all {} tests pass\n",
            v["id"].as_str().unwrap_or_default(),
            v["tests"]
        );
    }
    let mut out = format!("FAIL {}", v["id"].as_str().unwrap_or_default());
    if let Some(e) = v["error"].as_str() {
        out.push_str(&format!(": {e}\n"));
        return out;
    }
    let failed = v["failed"].as_array().cloned().unwrap_or_default();
    out.push_str(&format!(
        ": {} of {} tests fail\n",
        failed.len(),
        v["tests"]
    ));
    for f in failed {
        out.push_str(&format!(
            "- {} ({}):\n",
            f["name"].as_str().unwrap_or_default(),
            f["outcome"].as_str().unwrap_or_default()
        ));
        for line in f["message"].as_str().unwrap_or_default().lines() {
            out.push_str(&format!("    {line}\n"));
        }
    }
    out
}

/// The instances added, removed and changed between two manifests.
pub fn diff_manifests(old: &Path, new: &Path) -> Result<Value> {
    let load = |p: &Path| -> Result<Value> {
        let bytes = std::fs::read(p)
            .map_err(|e| Error::input(format!("cannot read manifest `{}`: {e}", p.display())))?;
        let v: Value = serde_json::from_slice(&bytes)
            .map_err(|e| Error::input(format!("`{}` is not a manifest: {e}", p.display())))?;
        if v["format"] != "r2e-dataset-1" {
            return Err(Error::input(format!(
                "`{}` is not an r2e manifest (no `format: r2e-dataset-1`)",
                p.display()
            )));
        }
        Ok(v)
    };
    let (a, b) = (load(old)?, load(new)?);
    let index = |v: &Value| -> std::collections::BTreeMap<String, String> {
        v["instances"]
            .as_array()
            .into_iter()
            .flatten()
            .filter_map(|i| Some((i["id"].as_str()?.to_owned(), i["hash"].as_str()?.to_owned())))
            .collect()
    };
    let (ia, ib) = (index(&a), index(&b));
    let added: Vec<&String> = ib.keys().filter(|k| !ia.contains_key(*k)).collect();
    let removed: Vec<&String> = ia.keys().filter(|k| !ib.contains_key(*k)).collect();
    let changed: Vec<&String> = ib
        .iter()
        .filter(|(k, h)| ia.get(*k).is_some_and(|old| old != *h))
        .map(|(k, _)| k)
        .collect();
    Ok(json!({
        "old_version": a["version"], "new_version": b["version"],
        "added": added, "removed": removed, "changed": changed,
        "unchanged": ib.len() - added.len() - changed.len(),
    }))
}

pub fn diff_text(v: &Value) -> String {
    let mut out = format!(
        "{} -> {}\n",
        v["old_version"]
            .as_str()
            .unwrap_or("?")
            .get(..16)
            .unwrap_or("?"),
        v["new_version"]
            .as_str()
            .unwrap_or("?")
            .get(..16)
            .unwrap_or("?")
    );
    for (what, sign) in [("added", "+"), ("removed", "-"), ("changed", "~")] {
        for id in v[what].as_array().into_iter().flatten() {
            out.push_str(&format!("{sign} {}\n", id.as_str().unwrap_or_default()));
        }
    }
    out.push_str(&format!(
        "{} added, {} removed, {} changed, {} unchanged\n",
        v["added"].as_array().map_or(0, Vec::len),
        v["removed"].as_array().map_or(0, Vec::len),
        v["changed"].as_array().map_or(0, Vec::len),
        v["unchanged"]
    ));
    out
}
