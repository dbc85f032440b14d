//! `r2e status` (what a build would run, and why) and `r2e explain ID` (the inputs behind one
//! function's results, and whether each is cached). Both read; neither writes an output.

use serde_json::{Value, json};

use crate::config::Config;
use crate::db::{self, ItemId};
use crate::engine::{self, BuildOptions, Session, Stage};
use crate::error::{Error, Result};
use crate::python::resolve::Item;

/// What a full build would run.
pub fn status(cfg: &Config, until: Stage) -> Result<Value> {
    let session = Session::open(cfg)?;
    let output = std::path::absolute(&cfg.output).map_err(|e| Error::env(e.to_string()))?;
    let fp = engine::fingerprint(cfg, &BuildOptions { until, jobs: None }, &session.checkouts);
    let state = engine::read_state_public(&output);
    let mut reasons = Vec::new();
    match &state {
        None => reasons.push(format!("no previous build in `{}`", output.display())),
        Some((old_fp, repos, settings)) => {
            if *settings != engine::settings_hash(cfg) {
                reasons.push(if cfg.variants.is_empty() {
                    "the `[extract]` or `[context]` settings changed".to_string()
                } else {
                    "the `[extract]` or `[context]` settings of a variant changed".to_string()
                });
            }
            for c in &session.checkouts {
                match repos.iter().find(|(n, _)| n == &c.name) {
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
            if *old_fp == fp && reasons.is_empty() {
                // Same inputs: only a missing or edited output would make a build run.
            }
        }
    }
    let files = session.all_files();
    let mut to_parse = Vec::new();
    for &f in &files {
        if !session
            .cache
            .contains(crate::cache::PARSE, db::parse_key(f.hash(&session.db)))
        {
            to_parse.push(format!(
                "{}:{}",
                f.repo(&session.db).name(&session.db),
                f.path(&session.db)
            ));
        }
    }
    let up_to_date = state.as_ref().is_some_and(|(old, _, _)| *old == fp) && reasons.is_empty();
    Ok(json!({
        "up_to_date": up_to_date,
        "reasons": reasons,
        "files": files.len(),
        "parse": {"would_run": to_parse.len(), "cached": files.len() - to_parse.len(), "files": to_parse.iter().take(50).collect::<Vec<_>>()},
        "extract": {"would_run": if up_to_date { 0 } else { files.len() }},
        "slice": {"would_run": if up_to_date { "none" } else { "every candidate (slices are recomputed in memory)" }},
    }))
}

fn short(id: &str) -> &str {
    &id[..id.len().min(17)]
}

pub fn status_text(v: &Value) -> String {
    if v["up_to_date"].as_bool() == Some(true) {
        return "up to date: a build would run nothing\n".into();
    }
    let mut out = String::from("a build would run:\n");
    for r in v["reasons"].as_array().into_iter().flatten() {
        out.push_str(&format!("  because {}\n", r.as_str().unwrap_or_default()));
    }
    out.push_str(&format!(
        "  parse: {} of {} files ({} cached)\n",
        v["parse"]["would_run"], v["files"], v["parse"]["cached"]
    ));
    for f in v["parse"]["files"].as_array().into_iter().flatten() {
        out.push_str(&format!("    {}\n", f.as_str().unwrap_or_default()));
    }
    out.push_str(&format!(
        "  extract: {} files\n  slice: {}\n",
        v["extract"]["would_run"],
        v["slice"]["would_run"].as_str().unwrap_or_default()
    ));
    out
}

/// The inputs behind one function's results.
pub fn explain(cfg: &Config, id: &str) -> Result<Value> {
    let mut parts = id.splitn(3, ':');
    let (Some(repo_name), Some(path), Some(_)) = (parts.next(), parts.next(), parts.next()) else {
        return Err(Error::input(format!(
            "`{id}` is not a function id; ids look like `REPO:path/to/file.py:Class.method`"
        )));
    };
    let s = Session::open(cfg)?;
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
    let cached_before = |f: db::SourceFile| {
        s.cache
            .contains(crate::cache::PARSE, db::parse_key(f.hash(db)))
    };
    let file_cached = cached_before(file);
    let rows = db::file_functions(db, file, s.settings);
    let Some(row) = rows.iter().find(|r| r.id == id) else {
        let known: Vec<&str> = rows.iter().map(|r| r.id.as_str()).take(20).collect();
        return Err(Error::input(format!(
            "no function `{id}`; that file has: {}",
            known.join(", ")
        )));
    };
    let checkout = s
        .checkouts
        .iter()
        .find(|c| c.name == repo_name)
        .expect("every repo has a checkout");
    let mut out = json!({
        "id": id,
        "repo": {"name": repo_name, "identity": checkout.identity, "rev": checkout.rev},
        "file": {"path": path, "content_hash": file.hash(db).to_hex(), "parse_cached": file_cached},
        "settings": {"hash": engine::settings_hash(cfg).to_hex(), "strategy": cfg.context.strategy, "max_tokens": cfg.context.max_tokens},
        "excluded_by": row.excluded_by,
    });
    if row.excluded_by.is_none() {
        let item = ItemId::new(db, repo, Item::Def(file.ix(db), row.def));
        let files = repo.files(db);
        let slice = db::slice_of(db, item);
        let mut deps = Vec::new();
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
            deps.push(json!({"item": name, "distance": dist, "file": sf.path(db), "content_hash": sf.hash(db).to_hex(), "parse_cached": cached_before(sf)}));
        }
        let ctx = db::context_of(db, item, s.settings);
        out["slice"] = json!({"items": deps, "unresolved": slice.unresolved});
        out["context"] = json!({"tokens": ctx.tokens, "truncated": ctx.truncated, "text": db::render(db, repo, ctx)});
    }
    Ok(out)
}

pub fn explain_text(v: &Value) -> String {
    let mut out = format!("{}\n", v["id"].as_str().unwrap_or_default());
    out.push_str(&format!(
        "  repo {} at {}\n",
        v["repo"]["name"].as_str().unwrap_or_default(),
        v["repo"]["identity"].as_str().unwrap_or_default()
    ));
    out.push_str(&format!(
        "  file {} (content {}, parse {})\n",
        v["file"]["path"].as_str().unwrap_or_default(),
        short(v["file"]["content_hash"].as_str().unwrap_or_default()),
        if v["file"]["parse_cached"] == true {
            "cached"
        } else {
            "not cached"
        }
    ));
    out.push_str(&format!(
        "  settings {}\n",
        short(v["settings"]["hash"].as_str().unwrap_or_default())
    ));
    match v["excluded_by"].as_str() {
        Some(f) => out.push_str(&format!("  excluded by filter `{f}`\n")),
        None => {
            out.push_str("  candidate; its slice:\n");
            for d in v["slice"]["items"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "    [{}] {} ({}, parse {})\n",
                    d["distance"],
                    d["item"].as_str().unwrap_or_default(),
                    short(d["content_hash"].as_str().unwrap_or_default()),
                    if d["parse_cached"] == true {
                        "cached"
                    } else {
                        "not cached"
                    }
                ));
            }
            for u in v["slice"]["unresolved"].as_array().into_iter().flatten() {
                out.push_str(&format!(
                    "    unresolved: {}\n",
                    u.as_str().unwrap_or_default()
                ));
            }
            out.push_str(&format!(
                "  context: {} tokens{}\n",
                v["context"]["tokens"],
                if v["context"]["truncated"] == true {
                    " (truncated)"
                } else {
                    ""
                }
            ));
        }
    }
    out
}
