//! `r2e status` (what a build would run, and why) and `r2e explain ID` (the inputs behind one
//! function's results, whether each is cached, and its harness's verdict from the last build).
//! Both read; neither writes an output.

use crate::stages::Stage;
use r2e_core::records::OutputFile;
use serde::Serialize;
use std::collections::BTreeMap;

use crate::db::{self, ItemId, SourceFile};
use crate::engine::{self, BuildOptions};
use crate::session::Session;
use r2e_core::cache::ActionKey;
use r2e_core::config::{Config, Strategy};
use r2e_core::error::{Error, Result};
use r2e_core::keys::ParseKey;
use r2e_core::records::{
    FailureClass, Filter, Generator, HarnessRecord, read_jsonl, read_manifest,
};
use r2e_python::resolve::Item;

/// What `r2e status` reports.
#[derive(Clone, Debug, Serialize)]
pub struct Status {
    pub up_to_date: bool,
    /// Why a build would run.
    pub reasons: Vec<String>,
    pub files: usize,
    pub parse: ParseStatus,
    /// Files to extract, candidates to slice and contexts to render (the pipeline's own
    /// dataset).
    pub analysis: crate::engine::memo::AnalysisPlan,
    /// The stages whose settings changed since the last build, each with the fields of its
    /// actions' keys that did (`explorer.budget`: 1500 -> 99): the actions whose keys hold
    /// them run again (`validate`'s `policy` is in no key: its runs are judged again).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub settings_changed: Vec<SettingsChange>,
    /// The stages of which the last build recorded no settings (it was built by an r2e that
    /// recorded them otherwise, or the stage's variant is new): status cannot say which
    /// changed.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub settings_unrecorded: Vec<String>,
    /// From `--until env` on: each repository's environment, whether a build would install it,
    /// and what changed since the last build's (`envs.jsonl`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub env: Vec<crate::stages::environment::EnvPlan>,
    /// Why the environments could not be planned (an interpreter that does not run, say).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub env_unknown: Option<String>,
    /// With `[evaluate] enabled = true` and a built dataset: what `evaluate` would ask, per
    /// model, over the instances of the last build.
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub evaluate: Vec<crate::evaluate::ModelPlan>,
}

/// One stage whose settings changed: the fields, `name: before -> now` each.
#[derive(Clone, Debug, Serialize)]
pub struct SettingsChange {
    pub stage: String,
    pub changed: Vec<String>,
}

/// The stages whose settings differ between the last build's and now, in stage order, and
/// the stages of which the last build recorded none (a state of an older layout, a new
/// variant). Each stage's settings are its actions' keys' (`stages::keyed::of_pipeline`); the
/// fields that changed come from a diff of the two values, field by field.
fn settings_changes(
    before: &BTreeMap<String, serde_json::Value>,
    now: &BTreeMap<String, serde_json::Value>,
) -> (Vec<SettingsChange>, Vec<String>) {
    let order = ["extract", "slice", "generate", "validate", "refine"];
    let rank = |s: &str| {
        let bare = s.rsplit(": ").next().unwrap_or(s);
        (
            order.iter().position(|o| *o == bare).unwrap_or(order.len()),
            s.to_owned(),
        )
    };
    let mut stages: Vec<&String> = now.keys().collect();
    stages.sort_by_key(|s| rank(s));
    let mut changes = Vec::new();
    let mut unrecorded = Vec::new();
    for stage in stages {
        let Some(b) = before.get(stage) else {
            unrecorded.push(stage.clone());
            continue;
        };
        let changed = crate::stages::keyed::changes(b, &now[stage]);
        if !changed.is_empty() {
            changes.push(SettingsChange {
                stage: stage.clone(),
                changed,
            });
        }
    }
    (changes, unrecorded)
}

#[derive(Clone, Debug, Serialize)]
pub struct ParseStatus {
    pub would_run: usize,
    pub cached: usize,
    /// The first files that would be parsed (`REPO:path`).
    pub files: Vec<String>,
}

/// Whether the file's parse outcome is stored: in an entry of its own or in a pack its
/// repository's pack list names (`packs`; registered by [`open`]).
fn parse_cached(s: &Session, f: SourceFile) -> bool {
    let content = f.hash(&s.db);
    s.cache
        .contains(ParseKey::BUCKET, ParseKey::new(content).hash())
        || crate::db::Db::env(&s.db).packs.contains(&s.cache, content)
}

/// A session whose database can read the parse packs the repositories' pack lists name.
fn open(cfg: &Config) -> Result<Session> {
    let s = Session::open(cfg)?;
    for rc in &s.cfg.repos {
        engine::memo::register_packs(&s.db, &s.cache, rc);
    }
    Ok(s)
}

/// What a full build would run.
pub fn status(cfg: &Config, until: Stage) -> Result<Status> {
    let session = open(cfg)?;
    let output = std::path::absolute(&cfg.output).map_err(|e| Error::env(e.to_string()))?;
    let fp = engine::fingerprint(
        cfg,
        &BuildOptions { until, jobs: None },
        &session.checkouts,
        &session.templates,
    );
    let state = engine::last_build(&output);
    let mut reasons = Vec::new();
    match &state {
        None => reasons.push(format!("no previous build in `{}`", output.display())),
        Some(last) => {
            if last.settings != engine::settings_hash(cfg) {
                reasons.push(if cfg.variants.is_empty() {
                    "the `[extract]` or `[context]` settings changed".to_string()
                } else {
                    "the `[extract]` or `[context]` settings of a variant changed".to_string()
                });
            }
            for c in &session.checkouts {
                match last.repos.iter().find(|(n, _)| n == &c.name) {
                    None => reasons.push(format!("repo `{}` is new", c.name)),
                    Some((_, id)) if id != &c.tree => reasons.push(format!(
                        "repo `{}` changed: {} -> {}",
                        c.name,
                        short(id),
                        short(&c.tree)
                    )),
                    _ => {}
                }
            }
        }
    }
    let files = session.all_files();
    let to_parse: Vec<String> = files
        .iter()
        .filter(|&&f| !parse_cached(&session, f))
        .map(|&f| {
            format!(
                "{}:{}",
                f.repo(&session.db).name(&session.db),
                f.path(&session.db)
            )
        })
        .collect();
    let mut up_to_date = state.as_ref().is_some_and(|s| s.fingerprint == fp) && reasons.is_empty();
    // Status runs no repository code: nothing it starts needs isolation.
    let services = r2e_exec::services::Services::for_config(cfg, true);
    let (settings_changed, settings_unrecorded) = state
        .as_ref()
        .map(|last| {
            settings_changes(
                &last.keyed_settings(),
                &crate::stages::keyed::of_pipeline(
                    cfg,
                    services.sandbox.as_ref(),
                    &session.templates,
                ),
            )
        })
        .unwrap_or_default();
    let evaluate = evaluate_plans(cfg, &session, &services)?;
    let (env, env_unknown) = if until >= Stage::Env {
        match env_plans(cfg, &session, &services, up_to_date) {
            Ok(plans) => (plans, None),
            // What status cannot find out (no such interpreter) is said, not an error: the
            // build would say it too.
            Err(e) => (Vec::new(), Some(e.to_string())),
        }
    } else {
        (Vec::new(), None)
    };
    if let Some(e) = env.iter().find(|e| e.would_build) {
        up_to_date = false;
        reasons.push(format!(
            "the environment of repo `{}` would be installed",
            e.repo
        ));
    }
    if let Some(e) = env
        .iter()
        .find(|e| e.project.as_ref().is_some_and(|p| p.would_build))
    {
        up_to_date = false;
        reasons.push(format!("the project of repo `{}` would be built", e.repo));
    }
    // What the analysis stages would run, found as the build finds it (the changed files
    // parsed and extracted, the persisted analysis read; nothing stored).
    let analysis = if up_to_date {
        engine::memo::AnalysisPlan::default()
    } else {
        let repos: Vec<_> = session.repos.iter().copied().zip(&cfg.repos).collect();
        engine::memo::plan(
            &session.db,
            &session.cache,
            &repos,
            session.settings,
            cfg.select.dedup,
        )
    };
    Ok(Status {
        env_unknown,
        evaluate,
        settings_changed,
        settings_unrecorded,
        env,
        up_to_date,
        reasons,
        files: files.len(),
        parse: ParseStatus {
            would_run: to_parse.len(),
            cached: files.len() - to_parse.len(),
            files: to_parse.into_iter().take(50).collect(),
        },
        analysis,
    })
}

/// The env stage planned for every repository (nothing installed), against the environments
/// of the last build (`envs.jsonl` of its output).
fn env_plans(
    cfg: &Config,
    session: &Session,
    services: &r2e_exec::services::Services,
    unchanged: bool,
) -> Result<Vec<crate::stages::environment::EnvPlan>> {
    // The last build's environments: in its output, or with variants in each variant's (all
    // hold the same copy).
    let (_, first) = cfg.builds()[0];
    let last: Vec<r2e_core::records::EnvLine> =
        read_jsonl(&crate::engine::outputs::resolve(&first.output).join(OutputFile::Envs.name()))?
            .unwrap_or_default();
    // Nothing changed since the last build: its imports are the repository's (no file is
    // parsed to find them again).
    let repos: Vec<_> = session
        .checkouts
        .iter()
        .zip(&session.repos)
        .map(|(c, &repo)| {
            let known = last.iter().find(|l| l.repo == c.name).filter(|_| unchanged);
            let imports = match known {
                Some(l) => db::ExternalImports {
                    required: l.inferred.clone(),
                    skipped: l.skipped_imports.clone(),
                },
                None => db::external_imports(&session.db, repo).as_ref().clone(),
            };
            (c.clone(), imports)
        })
        .collect();
    crate::stages::environment::plan(
        cfg,
        &session.cache,
        services.sandbox.as_ref(),
        &repos,
        &last,
    )
}

/// What `evaluate` would ask per model (and variant), over the instances each dataset's last
/// build holds; nothing before a first build.
fn evaluate_plans(
    cfg: &Config,
    session: &Session,
    services: &r2e_exec::services::Services,
) -> Result<Vec<crate::evaluate::ModelPlan>> {
    let mut out = Vec::new();
    for (name, c) in cfg.builds() {
        if !c.evaluate.enabled {
            continue;
        }
        let dir = crate::engine::outputs::resolve(&c.output);
        let Some(instances) = r2e_core::records::read_jsonl::<r2e_core::records::Instance>(
            &dir.join(OutputFile::Dataset.name()),
        )?
        else {
            continue;
        };
        let envs: Vec<r2e_core::records::EnvLine> =
            r2e_core::records::read_jsonl(&dir.join(OutputFile::Envs.name()))?.unwrap_or_default();
        let bench = crate::bench::Bench::of(session, c, services, instances, &envs)?;
        let llm = r2e_exec::llm::Llm::new(services.models.clone());
        let templates = session.templates.get(c)?;
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(1)
            .build()
            .map_err(Error::internal)?;
        let tasks: Vec<r2e_core::records::BugfixTask> = if c.bugfix.is_some() && c.evaluate.bugfix {
            r2e_core::records::read_jsonl(&dir.join(OutputFile::Bugfix.name()))?.unwrap_or_default()
        } else {
            Vec::new()
        };
        let evaluator = crate::evaluate::Evaluator::new(
            c,
            &bench,
            &llm,
            &templates,
            &session.cache,
            &pool,
            &tasks,
        );
        for mut plan in evaluator.estimate()? {
            if let Some(name) = name {
                plan.model = format!("{name}: {}", plan.model);
            }
            out.push(plan);
        }
    }
    Ok(out)
}

fn short(id: &str) -> &str {
    &id[..id.len().min(17)]
}

pub fn status_text(v: &Status) -> String {
    let mut out = String::new();
    for p in &v.evaluate {
        out.push_str(&format!(
            "evaluate, {}: {} requests, {} cached, {} to ask (about {} prompt tokens){}\n",
            p.model,
            p.requests,
            p.cached,
            p.would_ask,
            p.prompt_tokens,
            if p.repair_requests_at_most > 0 {
                format!("; repairs may ask up to {} more", p.repair_requests_at_most)
            } else {
                String::new()
            }
        ));
    }
    if let Some(why) = &v.env_unknown {
        out.push_str(&format!("env: cannot say ({why})\n"));
    }
    for e in &v.env {
        let what = if e.would_build {
            "would be installed"
        } else {
            "is in the cache"
        };
        out.push_str(&format!("env, repo `{}`: {what}", e.repo));
        if !e.changed.is_empty() {
            out.push_str(&format!(" (changed: {})", e.changed.join("; ")));
        }
        out.push('\n');
        if let Some(p) = &e.project {
            let what = if p.would_build {
                "would be built"
            } else {
                "is in the cache"
            };
            out.push_str(&format!("project, repo `{}`: {what}", e.repo));
            if let Some(why) = &p.changed {
                out.push_str(&format!(" ({why})"));
            }
            out.push('\n');
        }
    }
    if v.up_to_date {
        out.push_str("up to date: a build would run nothing\n");
        return out;
    }
    out.push_str("a build would run:\n");
    for r in &v.reasons {
        out.push_str(&format!("  because {r}\n"));
    }
    for c in &v.settings_changed {
        out.push_str(&format!(
            "  {}: its settings changed: {}\n",
            c.stage,
            c.changed.join("; ")
        ));
    }
    for stage in &v.settings_unrecorded {
        out.push_str(&format!(
            "  {stage}: the last build recorded no settings of it\n"
        ));
    }
    out.push_str(&format!(
        "  parse: {} of {} files ({} cached)\n",
        v.parse.would_run, v.files, v.parse.cached
    ));
    for f in &v.parse.files {
        out.push_str(&format!("    {f}\n"));
    }
    let a = &v.analysis;
    out.push_str(&format!(
        "  extract: {} files\n  slice: {} candidates\n  context: {} candidates\n",
        a.extract, a.slice, a.context
    ));
    out
}

/// What `r2e explain ID` reports.
#[derive(Clone, Debug, Serialize)]
pub struct Explain {
    pub id: String,
    pub repo: RepoInfo,
    pub file: FileInfo,
    pub settings: SettingsInfo,
    pub excluded_by: Option<Filter>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub slice: Option<SliceInfo>,
    #[serde(skip_serializing_if = "Option::is_none")]
    pub context: Option<ContextInfo>,
    /// The verdict of its harness's validation in each dataset the build wrote (one, or one per
    /// variant); empty for a function that is not a candidate or before `generate`.
    pub harness: Vec<HarnessInfo>,
}

/// A candidate's harness and its validation, as the dataset's `harnesses.jsonl` records them.
#[derive(Clone, Debug, Serialize)]
pub struct HarnessInfo {
    /// The variant whose dataset this is (pipelines with `[[variant]]` tables).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    /// `valid`, the failure class of an invalid harness, or `not validated`.
    pub verdict: String,
    pub valid: Option<bool>,
    pub failure_class: Option<FailureClass>,
    pub failure_message: Option<String>,
    pub generator: Generator,
    pub tests: Option<u32>,
    pub branch_coverage: Option<f64>,
    pub line_coverage: Option<f64>,
    /// Whether the dataset holds it as a benchmark instance.
    pub instance: bool,
}

/// The harness records of `id` in every dataset the pipeline's last build wrote.
fn harness_info(cfg: &Config, id: &str) -> Result<Vec<HarnessInfo>> {
    let mut out = Vec::new();
    for (variant, c) in cfg.builds() {
        let dir = engine::outputs::resolve(&c.output);
        let Some(records) = read_jsonl::<HarnessRecord>(&dir.join(OutputFile::Harnesses.name()))?
        else {
            continue;
        };
        let Some(h) = records.into_iter().find(|h| h.id == id) else {
            continue;
        };
        let instance = read_manifest(&dir.join(OutputFile::Manifest.name()))
            .is_ok_and(|m| m.instances.iter().any(|i| i.id == id));
        out.push(HarnessInfo {
            variant: variant.map(str::to_owned),
            verdict: match (h.valid, h.failure_class) {
                (Some(true), _) => "valid".to_owned(),
                (Some(false), Some(class)) => class.name().to_owned(),
                (Some(false), None) => "invalid".to_owned(),
                (None, _) => "not validated".to_owned(),
            },
            valid: h.valid,
            failure_class: h.failure_class,
            failure_message: h.failure_message,
            generator: h.generator,
            tests: h.tests,
            branch_coverage: h.branch_coverage,
            line_coverage: h.line_coverage,
            instance,
        });
    }
    Ok(out)
}

#[derive(Clone, Debug, Serialize)]
pub struct RepoInfo {
    pub name: String,
    pub identity: String,
    pub rev: Option<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct FileInfo {
    pub path: String,
    pub content_hash: String,
    pub parse_cached: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct SettingsInfo {
    pub hash: String,
    pub strategy: Strategy,
    pub max_tokens: u32,
}

#[derive(Clone, Debug, Serialize)]
pub struct SliceInfo {
    pub items: Vec<SliceItem>,
    pub unresolved: Vec<String>,
}

#[derive(Clone, Debug, Serialize)]
pub struct SliceItem {
    pub item: String,
    pub distance: u32,
    pub file: String,
    pub content_hash: String,
    pub parse_cached: bool,
}

#[derive(Clone, Debug, Serialize)]
pub struct ContextInfo {
    pub tokens: u32,
    pub truncated: bool,
    pub text: String,
}

/// The inputs behind one function's results.
pub fn explain(cfg: &Config, id: &str) -> Result<Explain> {
    let mut parts = id.splitn(3, ':');
    let (Some(repo_name), Some(path), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(Error::input(format!(
            "`{id}` is not a function id; ids look like `REPO:path/to/file.py:Class.method`"
        )));
    };
    let s = open(cfg)?;
    let db = &s.db;
    let Some(&repo) = s.repos.iter().find(|r| r.name(db) == repo_name) else {
        return Err(Error::input(format!(
            "no repo is named `{repo_name}` in `{}`",
            cfg.file.display()
        )));
    };
    let Some(&file) = repo.files(db).iter().find(|f| f.path(db) == path) else {
        return Err(Error::input(format!(
            "repo `{repo_name}` has no file `{path}`"
        )));
    };
    let file_cached = parse_cached(&s, file);
    let rows = db::file_functions(db, file, s.settings);
    let Some(row) = rows.iter().find(|r| r.id == id) else {
        let known: Vec<&str> = rows.iter().map(|r| r.id.as_str()).take(20).collect();
        return Err(Error::input(format!(
            "no function `{id}`; that file has: {}",
            known.join(", ")
        )));
    };
    let mut row = row.clone();
    if row.excluded_by.is_none() && cfg.select.dedup {
        // A copy of an earlier candidate, as the build decides it: over the candidates before
        // it in the pipeline's order.
        let mut before: Vec<(db::SourceFile, db::FunctionRow)> = Vec::new();
        'files: for &f in &s.all_files() {
            for r in db::file_functions(db, f, s.settings).iter() {
                if r.id == id {
                    break 'files;
                }
                before.push((f, r.clone()));
            }
        }
        before.push((file, row.clone()));
        db::mark_duplicates(db, before.iter_mut().map(|(f, r)| (*f, r)));
        row.excluded_by = before.last().and_then(|(_, r)| r.excluded_by);
    }
    let row = &row;
    let checkout = s
        .checkouts
        .iter()
        .find(|c| c.name == repo_name)
        .expect("every repo has a checkout");
    let mut out = Explain {
        id: id.to_owned(),
        repo: RepoInfo {
            name: repo_name.to_owned(),
            identity: checkout.identity.clone(),
            rev: checkout.rev.clone(),
        },
        file: FileInfo {
            path: path.to_owned(),
            content_hash: file.hash(db).to_hex(),
            parse_cached: file_cached,
        },
        settings: SettingsInfo {
            hash: engine::settings_hash(cfg).to_hex(),
            strategy: cfg.context.strategy,
            max_tokens: cfg.context.max_tokens,
        },
        excluded_by: row.excluded_by,
        slice: None,
        context: None,
        harness: Vec::new(),
    };
    if row.excluded_by.is_none() {
        let item = ItemId::new(db, repo, Item::Def(file.ix(db), row.def));
        let files = repo.files(db);
        let slice = db::slice_of(db, item);
        let mut items = Vec::new();
        for &(it, dist) in &slice.items {
            let (f, name) = match it {
                Item::Def(f, ix) => (f, db::def_ids(db, files[f as usize])[ix as usize].clone()),
                Item::Global(f, ix) => {
                    let name = &db::file_interface(db, files[f as usize]).globals[ix as usize].name;
                    let module = db::module_index(db, repo).module_name(f);
                    (
                        f,
                        if module.is_empty() {
                            name.clone()
                        } else {
                            format!("{module}.{name}")
                        },
                    )
                }
            };
            let sf = files[f as usize];
            items.push(SliceItem {
                item: name,
                distance: dist,
                file: sf.path(db).clone(),
                content_hash: sf.hash(db).to_hex(),
                parse_cached: parse_cached(&s, sf),
            });
        }
        let ctx = db::context_of(db, item, s.settings);
        out.slice = Some(SliceInfo {
            items,
            unresolved: slice.unresolved.clone(),
        });
        out.context = Some(ContextInfo {
            tokens: ctx.tokens,
            truncated: ctx.truncated,
            text: db::render(db, repo, ctx),
        });
        out.harness = harness_info(cfg, id)?;
    }
    Ok(out)
}

pub fn explain_text(v: &Explain) -> String {
    let mut out = format!("{}\n", v.id);
    out.push_str(&format!("  repo {} at {}\n", v.repo.name, v.repo.identity));
    let cached = |c: bool| if c { "cached" } else { "not cached" };
    out.push_str(&format!(
        "  file {} (content {}, parse {})\n",
        v.file.path,
        short(&v.file.content_hash),
        cached(v.file.parse_cached)
    ));
    out.push_str(&format!("  settings {}\n", short(&v.settings.hash)));
    match (v.excluded_by, &v.slice, &v.context) {
        (Some(f), _, _) => out.push_str(&format!("  excluded by filter `{}`\n", f.name())),
        (None, Some(slice), Some(context)) => {
            out.push_str("  candidate; its slice:\n");
            for d in &slice.items {
                out.push_str(&format!(
                    "    [{}] {} ({}, parse {})\n",
                    d.distance,
                    d.item,
                    short(&d.content_hash),
                    cached(d.parse_cached)
                ));
            }
            for u in &slice.unresolved {
                out.push_str(&format!("    unresolved: {u}\n"));
            }
            out.push_str(&format!(
                "  context: {} tokens{}\n",
                context.tokens,
                if context.truncated {
                    " (truncated)"
                } else {
                    ""
                }
            ));
            if v.harness.is_empty() {
                out.push_str("  harness: none recorded (`r2e build` writes it at `generate`)\n");
            }
            for h in &v.harness {
                out.push_str(&harness_text(h));
            }
        }
        _ => {}
    }
    out
}

/// A harness's verdict for people: `harness: valid` or `harness: invalid (class)`, its numbers,
/// and an invalid one's failure class and message.
fn harness_text(h: &HarnessInfo) -> String {
    let of = h
        .variant
        .as_ref()
        .map_or_else(String::new, |v| format!(" (variant {v})"));
    let mut out = match h.valid {
        Some(true) => format!("  harness{of}: valid"),
        Some(false) => format!("  harness{of}: invalid ({})", h.verdict),
        None => format!("  harness{of}: not validated"),
    };
    out.push_str(&format!(", generator {}", generator_name(h.generator)));
    if let Some(t) = h.tests {
        out.push_str(&format!(", {t} tests"));
    }
    if let Some(c) = h.branch_coverage {
        out.push_str(&format!(", branch coverage {:.1}%", c * 100.0));
    } else if let Some(c) = h.line_coverage {
        out.push_str(&format!(", line coverage {:.1}%", c * 100.0));
    }
    out.push_str(if h.instance {
        "; an instance of the dataset\n"
    } else {
        "; not an instance of the dataset\n"
    });
    if let Some(class) = h.failure_class {
        out.push_str(&format!("    failure class: {}\n", class.name()));
    }
    if let Some(m) = &h.failure_message {
        out.push_str("    message:\n");
        for line in m.lines() {
            out.push_str(&format!("      {line}\n"));
        }
    }
    out
}

fn generator_name(g: Generator) -> &'static str {
    match g {
        Generator::Builtin => "builtin",
        Generator::Llm => "llm",
        Generator::Hybrid => "hybrid",
    }
}

/// `r2e status --plan N`: the pipeline's repositories on `shards` shards by estimated cost
/// (`engine::shard_plan`): their candidates now, found as a build finds them, and the timings
/// measured beside the output (the last build's and its shards').
pub fn shard_plan(cfg: &Config, shards: u32) -> Result<engine::shard_plan::ShardPlan> {
    if shards == 0 {
        return Err(Error::input("`--plan 0`: a build has at least one shard"));
    }
    let session = open(cfg)?;
    let repos: Vec<_> = session.repos.iter().copied().zip(&cfg.repos).collect();
    let analysis = engine::memo::plan(
        &session.db,
        &session.cache,
        &repos,
        session.settings,
        cfg.select.dedup,
    );
    let candidates: Vec<(String, u64)> = cfg
        .repos
        .iter()
        .map(|rc| {
            (
                rc.name.clone(),
                analysis.candidates.get(&rc.name).copied().unwrap_or(0),
            )
        })
        .collect();
    let output = std::path::absolute(&cfg.output).map_err(|e| Error::env(e.to_string()))?;
    // What was measured: the last build's timings (every dataset) and the shards'.
    let mut timings: Vec<_> = engine::outputs::read_timings(&output)
        .into_iter()
        .flat_map(|t| t.datasets.into_iter().flat_map(|d| d.repos))
        .collect();
    timings.extend(
        engine::cluster::shard_summaries(&output)
            .into_iter()
            .flat_map(|s| s.time),
    );
    Ok(engine::shard_plan::ShardPlan::balance(
        engine::shard_plan::estimate(&candidates, &timings),
        shards,
    ))
}

#[cfg(test)]
mod tests {
    use super::*;
    use serde_json::json;

    /// Stages in build order, each with its changed fields; a stage the last build recorded no
    /// settings of (a state of the previous layout, a new variant) is said to have none.
    #[test]
    fn settings_changes_by_stage() {
        let now = BTreeMap::from([
            ("extract".to_owned(), json!({"connectivity": false})),
            ("generate".to_owned(), json!({"explorer": {"budget": 99}})),
            ("v: generate".to_owned(), json!({"explorer": {"budget": 1}})),
            ("validate".to_owned(), json!({"runs": 2})),
        ]);
        let before = BTreeMap::from([
            ("extract".to_owned(), json!({"connectivity": true})),
            ("generate".to_owned(), json!({"explorer": {"budget": 1500}})),
            ("validate".to_owned(), json!({"runs": 2})),
        ]);
        let (changes, unrecorded) = settings_changes(&before, &now);
        let named: Vec<(&str, &[String])> = changes
            .iter()
            .map(|c| (c.stage.as_str(), c.changed.as_slice()))
            .collect();
        assert_eq!(
            named,
            [
                ("extract", &["`connectivity`: true -> false".to_owned()][..]),
                (
                    "generate",
                    &["`explorer.budget`: 1500 -> 99".to_owned()][..]
                ),
            ]
        );
        assert_eq!(unrecorded, ["v: generate"]);
        let (changes, unrecorded) = settings_changes(&BTreeMap::new(), &now);
        assert!(changes.is_empty());
        assert_eq!(unrecorded.len(), now.len());
    }
}
