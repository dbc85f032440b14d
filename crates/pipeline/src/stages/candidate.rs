//! What one candidate function's actions need, gathered once from the database: where its code
//! is and how to import it (the [`Target`]), its code key, its context, its environment.

use r2e_exec::target::Target;
use std::sync::Arc;

use super::checkout::Checkout;
use super::environment::{Env, Envs};
use crate::db::{self, Database, FunctionRow, ItemId, Repo, Settings, SourceFile};
use r2e_core::cache::Cache;
use r2e_core::config::Config;
use r2e_core::error::{Error, Result};
use r2e_core::hash::Hash;
use r2e_core::keys::CodeKey;
use r2e_core::records::CallSiteArgs;
use r2e_core::records::EnvOutcome;
use r2e_python::resolve::Item;

/// Everything one candidate needs, gathered from the database.
pub struct Candidate {
    pub id: String,
    pub repo: String,
    pub commit: String,
    pub path: String,
    pub qualname: String,
    pub docstring: Option<String>,
    pub context: String,
    pub target: Target,
    pub code: CodeKey,
    pub env: Option<Arc<Env>>,
    /// Whether the function's slice stays within its own file.
    pub in_file: bool,
    /// The context around the function, for its problem statement.
    pub problem: Problem,
    /// Its slice's size, and its own length in tokens.
    pub deps: u32,
    /// The functions and methods of its own module it depends on directly (its slice at
    /// distance 1), by their index in the module's definitions: where a depth-1 bug-fix task's
    /// bug may be.
    pub callees: Vec<usize>,
    /// The project's own tests (pytest node ids) that called it when the capture ran them;
    /// `None` when they did not run under pytest (no test files, no pytest, or no capture).
    pub project_tests: Option<Vec<String>>,
    pub tokens: u32,
    /// Its module's text and summary, and its definition's index there: what candidates and
    /// mutants are spliced into.
    pub source: Arc<str>,
    pub summary: Arc<r2e_python::summary::ModuleSummary>,
    pub def: usize,
    /// When its body was first introduced and last changed (RFC 3339), when the repository has
    /// history.
    pub created_at: Option<String>,
    pub changed_at: Option<String>,
}

/// A problem statement in parts: the context before the function and after it, and the
/// function's own text, whose body a spec replaces.
#[derive(Clone, Debug)]
pub struct Problem {
    pub before: String,
    pub definition: String,
    pub after: String,
}

impl Problem {
    /// The statement: the context with the function's body replaced by `spec`.
    pub fn render(&self, spec: Option<&str>) -> String {
        format!(
            "{}{}{}",
            self.before,
            r2e_python::signature_stub(&self.definition, spec),
            self.after
        )
    }

    /// The function's own text, dedented: the reference answer.
    pub fn reference(&self) -> String {
        r2e_python::dedent(&self.definition, &r2e_python::strings_in(&self.definition))
    }
}

impl Candidate {
    /// The candidate's environment, or why it cannot run (an `import_env` failure).
    pub fn usable_env(&self) -> std::result::Result<Arc<Env>, String> {
        let env = self
            .env
            .as_ref()
            .filter(|env| env.record.outcome != EnvOutcome::Failed)
            .ok_or_else(|| {
                format!(
                    "no usable environment for repo `{}` (see envs.jsonl)",
                    self.repo
                )
            })?;
        if self.target.module.is_empty() {
            return Err(format!(
                "`{}` is not importable: its path is not a module name",
                self.path
            ));
        }
        Ok(env.clone())
    }
}

/// What the harness stages read from the build.
pub struct Inputs<'a> {
    pub cfg: &'a Config,
    pub cache: &'a Cache,
    pub checkouts: &'a [Arc<Checkout>],
    pub repos: &'a [Repo],
    pub settings: Settings,
    pub envs: &'a Envs,
    /// Each repository's function dates, in `repos` order (`stages::dating`).
    pub dates: &'a [Option<Arc<r2e_core::dates::Dates>>],
}

/// Gathers one candidate from the database (`db` is this thread's handle).
pub fn prepare(
    inputs: &Inputs,
    db: &Database,
    file: SourceFile,
    row: &FunctionRow,
) -> Result<Candidate> {
    let repo = file.repo(db);
    let ix = inputs
        .repos
        .iter()
        .position(|r| *r == repo)
        .expect("the file's repo is in the session");
    let checkout = &inputs.checkouts[ix];
    let root = checkout.materialize(inputs.cache)?;
    let module = db::module_index(db, repo)
        .module_name(file.ix(db))
        .to_owned();
    let path = file.path(db).clone();
    let summary = db::parse_file(db, file).clone().map_err(Error::Internal)?;
    let item = ItemId::new(db, repo, Item::Def(file.ix(db), row.def));
    let layout = &summary.layout.defs[row.def as usize];
    let env = inputs.envs.get(&checkout.name).cloned();
    let kind = row.kind;
    let code = CodeKey {
        module: module.clone(),
        qualname: row.qualname.clone(),
        kind,
        code: Hash(layout.code_hash),
        slice: db::slice_code(db, item).to_vec(),
        import_time: *db::import_key(db, file),
        env_lock: env
            .as_ref()
            .map(|e| e.record.lock_hash.clone())
            .unwrap_or_default(),
        project: env.as_ref().map(|e| e.project_key()).unwrap_or_default(),
    };
    let ctx = db::context_of(db, item, inputs.settings);
    let source = db::source_text(db, file).clone().map_err(Error::env)?;
    let definition = source
        .get(layout.chunk.start as usize..layout.chunk.end as usize)
        .unwrap_or_default()
        .to_owned();
    let (before, after) = db::render_around(db, repo, ctx, file.ix(db), layout.chunk);
    let slice = db::slice_of(db, item);
    let mut target = Target::new(
        &root,
        &path,
        module,
        &row.qualname,
        (layout.start_line, layout.end_line),
    )
    .hiding(&checkout.masked);
    let (created_at, changed_at) = inputs
        .dates
        .get(ix)
        .and_then(|d| d.as_deref())
        .map_or((None, None), |d| d.texts(&row.id, &checkout.name));
    target.kind = kind;
    target.call_sites = db::call_sites_for(db, file, &row.qualname, kind.is_method())
        .into_iter()
        .map(|site| CallSiteArgs {
            args: site.args,
            kwargs: site.kwargs,
            receiver: None,
            then: Vec::new(),
        })
        .collect();
    Ok(Candidate {
        id: row.id.clone(),
        repo: checkout.name.clone(),
        commit: checkout.identity.clone(),
        qualname: row.qualname.clone(),
        docstring: row.docstring.clone(),
        context: db::render(db, repo, ctx),
        target,
        path,
        code,
        env,
        in_file: slice.in_file(file.ix(db)),
        deps: slice.items.len() as u32,
        callees: slice
            .items
            .iter()
            .filter_map(|&(item, distance)| match item {
                r2e_python::resolve::Item::Def(f, d)
                    if distance == 1
                        && f == file.ix(db)
                        && d != row.def
                        && summary
                            .interface
                            .defs
                            .get(d as usize)
                            .is_some_and(|def| def.kind != r2e_python::summary::DefKind::Class) =>
                {
                    Some(d as usize)
                }
                _ => None,
            })
            .collect(),
        project_tests: None,
        tokens: r2e_python::tokens::count(&definition),
        problem: Problem {
            before,
            definition,
            after,
        },
        source,
        summary: summary.clone(),
        def: row.def as usize,
        created_at,
        changed_at,
    })
}
