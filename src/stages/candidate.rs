//! What one candidate function's actions need, gathered once from the database: where its code
//! is and how to import it (the [`Target`]), its code key, its context, its environment.

use std::path::{Path, PathBuf};
use std::sync::Arc;

use super::checkout::Checkout;
use super::env::{Env, Envs};
use crate::cache::Cache;
use crate::config::Config;
use crate::db::{self, Database, FunctionRow, ItemId, Repo, Settings, SourceFile};
use crate::error::{Error, Result};
use crate::hash::Hash;
use crate::keys::CodeKey;
use crate::py::CallSiteArgs;
use crate::python::resolve::Item;
use crate::records::{EnvOutcome, FunctionKind};

/// Where a function is and how to import it.
#[derive(Clone, Debug)]
pub struct Target {
    /// The repository's checkout.
    pub root: PathBuf,
    /// The folder put first on `sys.path` (the package root of the module).
    pub import_root: PathBuf,
    /// The repository's other import roots (its root, and `src/` when there is one), put last
    /// on `sys.path`.
    pub extra_roots: Vec<PathBuf>,
    pub module: String,
    pub qualname: String,
    pub kind: FunctionKind,
    /// The module's file, absolute, and the function's lines in it.
    pub source_file: PathBuf,
    pub start_line: u32,
    pub end_line: u32,
    /// Literal arguments at the function's call sites in the repository.
    pub call_sites: Vec<CallSiteArgs>,
    /// What a candidate's process must not see besides the module's file (other copies of the
    /// code in the repository).
    pub hide: Vec<PathBuf>,
}

impl Target {
    /// Where a function of a repository checked out at `root` is.
    pub fn new(root: &Path, path: &str, module: String, qualname: &str, lines: (u32, u32)) -> Self {
        Target {
            root: root.to_path_buf(),
            import_root: import_root(root, path, &module),
            extra_roots: extra_roots(root),
            module,
            qualname: qualname.to_owned(),
            kind: kind_of(qualname),
            source_file: root.join(path),
            start_line: lines.0,
            end_line: lines.1,
            call_sites: Vec::new(),
            hide: Vec::new(),
        }
    }

    /// The same target in a checkout at `to` (the repository's folder in an environment
    /// image) instead of at `root`.
    pub fn relocated(mut self, to: &Path) -> Self {
        let from = self.root.clone();
        let move_path = |p: &Path| match p.strip_prefix(&from) {
            Ok(rel) => to.join(rel),
            Err(_) => p.to_path_buf(),
        };
        self.import_root = move_path(&self.import_root);
        self.extra_roots = self.extra_roots.iter().map(|p| move_path(p)).collect();
        self.source_file = move_path(&self.source_file);
        self.hide = self.hide.iter().map(|p| move_path(p)).collect();
        self.root = to.to_path_buf();
        self
    }

    /// The target with the folders of a checkout that its candidates must not see.
    pub fn hiding(mut self, checkout: &Checkout) -> Self {
        self.hide = checkout.masked.iter().map(|m| self.root.join(m)).collect();
        self
    }
}

/// R2E's scope holds module-level functions and the methods of module-level classes: a dotted
/// qualified name is a method.
pub fn kind_of(qualname: &str) -> FunctionKind {
    if qualname.contains('.') {
        FunctionKind::Method
    } else {
        FunctionKind::Function
    }
}

/// The folder to put on `sys.path` so that `module` imports from `path` (relative to `root`).
pub fn import_root(root: &Path, path: &str, module: &str) -> PathBuf {
    let stem = path.strip_suffix(".py").unwrap_or(path);
    let mut parts: Vec<&str> = stem.split('/').collect();
    if parts.last() == Some(&"__init__") {
        parts.pop();
    }
    let depth = module.split('.').count();
    let keep = parts.len().saturating_sub(depth);
    parts[..keep]
        .iter()
        .fold(root.to_path_buf(), |p, s| p.join(s))
}

/// A repository's import roots other than a module's own: its root, and `src/` when present.
pub fn extra_roots(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    if root.join("src").is_dir() {
        out.push(root.join("src"));
    }
    out
}

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
    pub tokens: u32,
    /// Its module's text and summary, and its definition's index there: what candidates and
    /// mutants are spliced into.
    pub source: Arc<str>,
    pub summary: Arc<crate::python::summary::ModuleSummary>,
    pub def: usize,
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
            crate::python::signature_stub(&self.definition, spec),
            self.after
        )
    }

    /// The function's own text, dedented: the reference answer.
    pub fn reference(&self) -> String {
        crate::python::dedent(
            &self.definition,
            &crate::python::strings_in(&self.definition),
        )
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
    .hiding(checkout);
    target.kind = kind;
    target.call_sites = db::call_sites_for(db, file, &row.qualname, kind.is_method())
        .into_iter()
        .map(|site| CallSiteArgs {
            args: site.args,
            kwargs: site.kwargs,
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
        tokens: crate::python::tokens::count(&definition),
        problem: Problem {
            before,
            definition,
            after,
        },
        source,
        summary: summary.clone(),
        def: row.def as usize,
    })
}
