//! A build's in-process state: the checkouts, the salsa database and its inputs ([`Session`]),
//! shared by the engine and by the [`Bench`](crate::bench::Bench) that front doors check through;
//! and the progress bars long work shows on stderr.

use std::sync::Arc;

use indicatif::{ProgressBar, ProgressDrawTarget, ProgressStyle};

use crate::db::{Database, ReadError, Repo, Settings, SourceFile, SourceReader};
use crate::stages::checkout::{self, Checkout};
use r2e_core::cache::Cache;
use r2e_core::cache::remote::Remote;
use r2e_core::config::Config;
use r2e_core::error::Result;
use r2e_core::hash::Hash;
use r2e_exec::llm::prompts::TemplateSets;

struct CheckoutReader(Arc<Checkout>);

impl SourceReader for CheckoutReader {
    fn read(&self, path: &str, hash: Hash) -> std::result::Result<Vec<u8>, ReadError> {
        self.0.read_verified(path, hash)
    }
}

/// A progress bar on stderr.
pub fn progress(len: u64, what: &str) -> ProgressBar {
    let bar = ProgressBar::with_draw_target(Some(len), ProgressDrawTarget::stderr());
    bar.set_style(
        ProgressStyle::with_template("{prefix:>9} [{bar:30}] {pos}/{len} {msg}")
            .expect("a valid template")
            .progress_chars("=> "),
    );
    bar.set_prefix(what.to_owned());
    bar
}

/// The in-process state of a build: checkouts, the database and its inputs.
pub struct Session {
    pub cfg: Config,
    pub cache: Arc<Cache>,
    pub checkouts: Vec<Arc<Checkout>>,
    pub db: Database,
    pub repos: Vec<Repo>,
    pub settings: Settings,
    /// The prompt templates, each set read once for the whole build.
    pub templates: TemplateSets,
}

impl Session {
    /// Checks out every repository and sets up the database inputs.
    pub fn open(cfg: &Config) -> Result<Session> {
        Self::open_with(cfg, false)
    }

    /// Like [`Session::open`]; `track_executions` counts salsa query executions (for tests).
    pub fn open_with(cfg: &Config, track_executions: bool) -> Result<Session> {
        Self::open_full(cfg, track_executions, None)
    }

    /// Like [`Session::open`], with the store shared between hosts under the local cache.
    pub fn open_remote(cfg: &Config, remote: Option<Remote>) -> Result<Session> {
        Self::open_full(cfg, false, remote)
    }

    fn open_full(cfg: &Config, track_executions: bool, remote: Option<Remote>) -> Result<Session> {
        let mut cache = Cache::open(&cfg.cache)?;
        if let Some(remote) = remote {
            cache.set_remote(remote);
        }
        let cache = Arc::new(cache);
        let mut checkouts = Vec::new();
        for repo in &cfg.repos {
            checkouts.push(Arc::new(checkout::checkout(repo, &cache)?));
        }
        let db = Database::new(Some(cache.clone()), track_executions);
        let mut repos = Vec::new();
        for c in &checkouts {
            let reader = db.add_reader(Arc::new(CheckoutReader(c.clone())));
            let repo = Repo::new(&db, c.name.clone(), reader, Vec::new());
            repos.push(repo);
        }
        let mut db = db;
        for ((c, &repo), rc) in checkouts.iter().zip(&repos).zip(&cfg.repos) {
            let scope = rc.scope.matcher();
            let files: Vec<SourceFile> = c
                .files
                .iter()
                .enumerate()
                .map(|(i, f)| {
                    let in_scope = scope.contains(&f.path);
                    SourceFile::new(&db, repo, i as u32, f.path.clone(), f.hash, in_scope)
                })
                .collect();
            use salsa::Setter;
            repo.set_files(&mut db).to(files);
        }
        let settings = Settings::new(&db, cfg.extract.clone(), cfg.context.clone());
        Ok(Session {
            cfg: cfg.clone(),
            cache,
            checkouts,
            db,
            repos,
            settings,
            templates: TemplateSets::default(),
        })
    }

    pub fn all_files(&self) -> Vec<SourceFile> {
        self.repos
            .iter()
            .flat_map(|r| r.files(&self.db).iter().copied())
            .collect()
    }
}
