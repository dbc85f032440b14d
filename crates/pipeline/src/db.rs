//! The salsa database: inputs (repositories, source files by content hash, stage settings) and
//! the pure derived queries over them (parse, interfaces, module index, dependencies, extraction,
//! slices, contexts).
//!
//! Salsa gives in-process incrementality and early cutoff: `file_interface` drops positions and
//! text, so a comment edit changes a file's summary but not its interface, and nothing that reads
//! only interfaces re-runs. Across processes, `parse_file` reads through the on-disk action cache,
//! keyed by the file's content hash.

use std::collections::{HashMap, HashSet};
use std::sync::atomic::{AtomicU64, Ordering};
use std::sync::{Arc, Mutex};

use crate::filter::local_filters;
use r2e_core::cache::Cache;
use r2e_core::config::{ContextConfig, ExtractConfig, Strategy};
use r2e_core::hash::Hash;
use r2e_core::keys::ParseKey;
use r2e_core::records::{Filter, FunctionKind};
use r2e_python::extract::summarize;
use r2e_python::resolve::{self, Deps, FileIx, Item, ModuleIndex, World};
use r2e_python::summary::{Chunk, DefKind, ModuleInterface, ModuleSummary};
use r2e_python::{decode, tokens};

/// Reads a file's bytes by repository-relative path, checked against the content hash the
/// checkout listed it under: bytes that changed since are refused ([`ReadError::Changed`]).
pub trait SourceReader: Send + Sync {
    fn read(&self, path: &str, hash: Hash) -> Result<Vec<u8>, ReadError>;
}

/// Why a source file could not be read.
#[derive(Clone, Debug, PartialEq, Eq, thiserror::Error)]
pub enum ReadError {
    /// The file's bytes are not those the checkout hashed: it changed during the build. Never
    /// cached; the next build reads it again.
    #[error("`{0}` changed while the build read it; the next build reads it again")]
    Changed(String),
    /// The file could not be read (may pass).
    #[error("{0}")]
    Io(String),
}

/// Counts of work done in this process, by stage.
#[derive(Default)]
pub struct Counters {
    pub parsed: AtomicU64,
    pub parse_cached: AtomicU64,
    pub parse_failed: AtomicU64,
    pub extracted: AtomicU64,
    pub sliced: AtomicU64,
    /// Contexts rendered (`context_of` executions): apart from slices, since an edit that
    /// keeps every reference re-renders contexts without recomputing any slice.
    pub contexts: AtomicU64,
    /// A file changed while the build read it, or could not be read: the build's outputs are
    /// not final, and the next build must not be taken for up to date.
    pub transient: std::sync::atomic::AtomicBool,
    /// Salsa query executions by query name (from `WillExecute` events).
    pub executions: Mutex<HashMap<String, u64>>,
}

impl Counters {
    pub fn executions_of(&self, query: &str) -> u64 {
        self.executions
            .lock()
            .unwrap()
            .get(query)
            .copied()
            .unwrap_or(0)
    }
    pub fn reset_executions(&self) {
        self.executions.lock().unwrap().clear();
    }
}

/// What the queries may use besides their inputs: the action cache, file readers, counters.
#[derive(Default)]
pub struct Env {
    pub cache: Option<Arc<Cache>>,
    pub readers: Mutex<Vec<Arc<dyn SourceReader>>>,
    pub counters: Counters,
    /// Parse outcomes stored many to an entry (`packs`).
    pub packs: crate::packs::Packs,
    tokens: Mutex<rustc_hash::FxHashMap<(Hash, u32, u32), u32>>,
}

#[salsa::db]
pub trait Db: salsa::Database {
    fn env(&self) -> &Env;
}

#[salsa::db]
#[derive(Clone)]
pub struct Database {
    storage: salsa::Storage<Self>,
    env: Arc<Env>,
}

impl Database {
    /// A database; with `track_executions`, salsa's `WillExecute` events are counted by query
    /// name (tests use this; builds leave it off, as events cost time on every query).
    pub fn new(cache: Option<Arc<Cache>>, track_executions: bool) -> Self {
        let env = Arc::new(Env {
            cache,
            ..Env::default()
        });
        let events = env.clone();
        let callback: Option<Box<dyn Fn(salsa::Event) + Send + Sync>> = if track_executions {
            Some(Box::new(move |event: salsa::Event| {
                if let salsa::EventKind::WillExecute { database_key } = event.kind {
                    let name = format!("{database_key:?}");
                    let name = name.split('(').next().unwrap_or_default().to_owned();
                    *events
                        .counters
                        .executions
                        .lock()
                        .unwrap()
                        .entry(name)
                        .or_default() += 1;
                }
            }))
        } else {
            None
        };
        Database {
            storage: salsa::Storage::new(callback),
            env,
        }
    }

    /// Registers a reader for a repository; returns its index for [`Repo::new`].
    pub fn add_reader(&self, reader: Arc<dyn SourceReader>) -> u32 {
        let mut readers = self.env.readers.lock().unwrap();
        readers.push(reader);
        readers.len() as u32 - 1
    }

    pub fn env_arc(&self) -> Arc<Env> {
        self.env.clone()
    }
}

#[salsa::db]
impl salsa::Database for Database {}

#[salsa::db]
impl Db for Database {
    fn env(&self) -> &Env {
        &self.env
    }
}

/// A repository: its name, its reader and its files.
#[salsa::input(debug)]
pub struct Repo {
    #[returns(ref)]
    pub name: String,
    #[returns(copy)]
    pub reader: u32,
    #[returns(ref)]
    pub files: Vec<SourceFile>,
}

/// One source file: where it is and the hash of its content.
#[salsa::input(debug)]
pub struct SourceFile {
    #[returns(copy)]
    pub repo: Repo,
    #[returns(copy)]
    pub ix: u32,
    #[returns(ref)]
    pub path: String,
    #[returns(copy)]
    pub hash: Hash,
    /// Whether its functions may be candidates (the repository's scope).
    #[returns(copy)]
    pub in_scope: bool,
}

/// The settings of the analysis stages.
#[salsa::input(debug)]
pub struct Settings {
    #[returns(ref)]
    pub extract: ExtractConfig,
    #[returns(ref)]
    pub context: ContextConfig,
}

/// An item (definition or global) of a repository.
#[salsa::interned(debug)]
pub struct ItemId<'db> {
    #[returns(copy)]
    pub repo: Repo,
    #[returns(copy)]
    pub item: Item,
}

/// A parse outcome: a summary, or why the file could not be decoded or parsed.
pub type Parsed = Result<Arc<ModuleSummary>, String>;

/// A file's bytes, checked against its content hash. A failure marks the build transient.
fn read_source(db: &dyn Db, file: SourceFile) -> Result<Vec<u8>, String> {
    let reader = db.env().readers.lock().unwrap()[file.repo(db).reader(db) as usize].clone();
    reader.read(file.path(db), file.hash(db)).map_err(|e| {
        db.env().counters.transient.store(true, Ordering::Relaxed);
        e.to_string()
    })
}

#[salsa::tracked(returns(ref))]
pub fn source_text(db: &dyn Db, file: SourceFile) -> Result<Arc<str>, String> {
    let bytes = read_source(db, file)?;
    decode::decode_source(&bytes).map(Arc::from)
}

/// Stage `parse`: the file's summary, from the action cache or by parsing.
#[salsa::tracked(returns(ref))]
pub fn parse_file(db: &dyn Db, file: SourceFile) -> Parsed {
    let env = db.env();
    let key = ParseKey::new(file.hash(db));
    if let Some(cache) = &env.cache
        && let Some(stored) = cache
            .get_action::<_, Result<ModuleSummary, String>>(&key)
            .or_else(|| env.packs.find(cache, file.hash(db)))
    {
        env.counters.parse_cached.fetch_add(1, Ordering::Relaxed);
        if stored.is_err() {
            env.counters.parse_failed.fetch_add(1, Ordering::Relaxed);
        }
        return stored.map(Arc::new);
    }
    env.counters.parsed.fetch_add(1, Ordering::Relaxed);
    let bytes = match read_source(db, file) {
        Ok(b) => b,
        // A file that changed, or an I/O failure, may pass: report it, never cache it.
        Err(e) => {
            env.counters.parse_failed.fetch_add(1, Ordering::Relaxed);
            return Err(e);
        }
    };
    let outcome =
        decode::decode_source(&bytes).and_then(|text| summarize(&text).map_err(|e| e.to_string()));
    if outcome.is_err() {
        env.counters.parse_failed.fetch_add(1, Ordering::Relaxed);
    }
    if let Some(cache) = &env.cache
        && !env.packs.collect(file.hash(db), &outcome)
        && let Err(e) = cache.put_action(&key, &outcome)
    {
        eprintln!("warning: cannot store a parse result: {e}");
    }
    outcome.map(Arc::new)
}

/// A file's interface: names and references only, so that edits to comments, formatting or
/// positions stop here.
#[salsa::tracked(returns(ref))]
pub fn file_interface(db: &dyn Db, file: SourceFile) -> Arc<ModuleInterface> {
    match parse_file(db, file) {
        Ok(s) => Arc::new(s.interface.clone()),
        Err(_) => Arc::new(ModuleInterface::default()),
    }
}

/// The module names of a repository's files (depends on paths only).
#[salsa::tracked(returns(ref))]
pub fn module_index(db: &dyn Db, repo: Repo) -> Arc<ModuleIndex> {
    let paths: Vec<&str> = repo.files(db).iter().map(|f| f.path(db).as_str()).collect();
    Arc::new(ModuleIndex::build(&paths))
}

struct DbWorld<'a> {
    db: &'a dyn Db,
    files: &'a [SourceFile],
    index: &'a ModuleIndex,
}

impl World for DbWorld<'_> {
    fn index(&self) -> &ModuleIndex {
        self.index
    }
    fn interface(&self, file: FileIx) -> Arc<ModuleInterface> {
        file_interface(self.db, self.files[file as usize]).clone()
    }
}

/// The direct dependencies of an item.
#[salsa::tracked(returns(ref))]
pub fn item_deps<'db>(db: &'db dyn Db, item: ItemId<'db>) -> Arc<Deps> {
    let repo = item.repo(db);
    let world = DbWorld {
        db,
        files: repo.files(db),
        index: module_index(db, repo),
    };
    Arc::new(resolve::direct_deps(&world, item.item(db)))
}

/// The ids of a file's definitions: `REPO:path:qualname`, later duplicates `#2`, `#3`, ...
#[salsa::tracked(returns(ref))]
pub fn def_ids(db: &dyn Db, file: SourceFile) -> Arc<Vec<String>> {
    let iface = file_interface(db, file);
    let prefix = format!("{}:{}:", file.repo(db).name(db), file.path(db));
    Arc::new(
        r2e_python::summary::numbered_places(iface.defs.iter().map(|d| d.qualname.as_str()))
            .into_iter()
            .map(|place| format!("{prefix}{place}"))
            .collect(),
    )
}

/// One extracted function, as `functions.jsonl` lists it (without its slice).
#[derive(Clone, Debug, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct FunctionRow {
    pub def: u32,
    pub id: String,
    pub qualname: String,
    pub kind: FunctionKind,
    pub start_line: u32,
    pub end_line: u32,
    pub docstring: Option<String>,
    pub excluded_by: Option<Filter>,
    /// The definition's code hash (its tokens, without comments or formatting: the summary's
    /// `code_hash`), which `[select] dedup` compares.
    pub code: Hash,
}

/// Stage `extract`: a file's in-scope functions with the filters' verdicts.
#[salsa::tracked(returns(ref))]
pub fn file_functions(db: &dyn Db, file: SourceFile, settings: Settings) -> Arc<Vec<FunctionRow>> {
    db.env().counters.extracted.fetch_add(1, Ordering::Relaxed);
    let Ok(summary) = parse_file(db, file) else {
        return Arc::new(Vec::new());
    };
    let cfg = settings.extract(db);
    let ids = def_ids(db, file);
    let repo = file.repo(db);
    let in_scope = file.in_scope(db);
    let importable = is_module(db, file);
    let mut rows = Vec::new();
    for (i, (def, layout)) in summary
        .interface
        .defs
        .iter()
        .zip(&summary.layout.defs)
        .enumerate()
    {
        if !layout.in_scope || def.kind == DefKind::Class {
            continue;
        }
        let code = || match source_text(db, file) {
            Ok(text) => text.get(layout.chunk.start as usize..layout.chunk.end as usize),
            Err(_) => None,
        };
        let mut excluded_by = if !in_scope {
            Some(Filter::Scope)
        } else if cfg.not_module && !importable {
            Some(Filter::NotModule)
        } else if cfg.platform && summary.layout.other_platform.is_some() {
            Some(Filter::Platform)
        } else {
            local_filters(cfg, &def.qualname, layout, code)
        };
        if excluded_by.is_none() && cfg.connectivity {
            let item = ItemId::new(db, repo, Item::Def(file.ix(db), i as u32));
            if item_deps(db, item).explicit.is_empty() {
                excluded_by = Some(Filter::Connectivity);
            }
        }
        rows.push(FunctionRow {
            def: i as u32,
            id: ids[i].clone(),
            qualname: def.qualname.clone(),
            kind: if def.kind == DefKind::Method {
                FunctionKind::Method
            } else {
                FunctionKind::Function
            },
            start_line: layout.start_line,
            end_line: layout.end_line,
            docstring: layout.docstring.clone(),
            excluded_by,
            code: Hash(layout.code_hash),
        });
    }
    Arc::new(rows)
}

/// `[select] dedup`: excludes as `duplicate` each candidate of `rows` (in the pipeline's order:
/// repository, file, definition) whose qualified name, code and slice an earlier candidate has;
/// the first copy stays. The slice (`slice_code`: the code of every definition and global the
/// function reaches) is compared only among candidates of the same name and code, so only
/// possible copies are sliced: two copies of `add_small` reading different `LIMIT`s are two
/// candidates. Run on the extraction's rows after they are read or computed, never stored in
/// them: which copy is first depends on the other repositories.
pub fn mark_duplicates<'a>(
    db: &dyn Db,
    rows: impl IntoIterator<Item = (SourceFile, &'a mut FunctionRow)>,
) -> u64 {
    let mut owned: Vec<(SourceFile, &'a mut FunctionRow)> = rows
        .into_iter()
        .filter(|(_, r)| r.excluded_by.is_none())
        .collect();
    let mut same_code: HashMap<(&str, Hash), u32> = HashMap::new();
    for (_, row) in &owned {
        *same_code
            .entry((row.qualname.as_str(), row.code))
            .or_default() += 1;
    }
    let mut seen: HashSet<(&str, Hash, Arc<Vec<Hash>>)> = HashSet::new();
    let mut dups = Vec::new();
    for (i, (file, row)) in owned.iter().enumerate() {
        if same_code[&(row.qualname.as_str(), row.code)] < 2 {
            continue;
        }
        let item = ItemId::new(db, file.repo(db), Item::Def(file.ix(db), row.def));
        let slice = slice_code(db, item).clone();
        if !seen.insert((row.qualname.as_str(), row.code, slice)) {
            dups.push(i);
        }
    }
    let marked = dups.len() as u64;
    for i in dups {
        owned[i].1.excluded_by = Some(Filter::Duplicate);
    }
    marked
}

/// Whether a file's path is a module name under one of its repository's import roots
/// (`ModuleIndex::module_name`, the name every run imports it by): filter `not_module`.
pub fn is_module(db: &dyn Db, file: SourceFile) -> bool {
    !module_index(db, file.repo(db))
        .module_name(file.ix(db))
        .is_empty()
}

/// A candidate's dependency slice.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SliceSet {
    /// Items with their BFS distance from the function.
    pub items: Vec<(Item, u32)>,
    /// Names bound to nothing in the repository, over the whole slice.
    pub unresolved: Vec<String>,
}

impl SliceSet {
    /// Whether every item of the slice is in the file `own` (the paper's in-file functions).
    pub fn in_file(&self, own: u32) -> bool {
        in_file(&self.items, own)
    }
}

/// Whether every item of a slice is in the file `own` (the paper's in-file functions).
pub fn in_file(slice: &[(Item, u32)], own: u32) -> bool {
    slice
        .iter()
        .all(|&(it, _)| matches!(it, Item::Def(f, _) | Item::Global(f, _) if f == own))
}

/// Stage `slice`: the transitive closure of an item's dependencies. Reads interfaces only, so
/// comments and formatting never re-run it.
#[salsa::tracked(returns(ref))]
pub fn slice_of<'db>(db: &'db dyn Db, item: ItemId<'db>) -> Arc<SliceSet> {
    db.env().counters.sliced.fetch_add(1, Ordering::Relaxed);
    let repo = item.repo(db);
    let mut seen = vec![item_deps(db, item).clone()];
    let items = resolve::closure(item.item(db), |i| {
        let deps = item_deps(db, ItemId::new(db, repo, i)).clone();
        seen.push(deps.clone());
        deps
    });
    let mut unresolved: Vec<String> = seen
        .iter()
        .flat_map(|d| d.unresolved.iter())
        .collect::<HashSet<&String>>()
        .into_iter()
        .cloned()
        .collect();
    unresolved.sort_unstable();
    Arc::new(SliceSet { items, unresolved })
}

/// The code hashes of an item's slice, sorted: each definition's token hash, each global's text
/// hash. Part of the code key of every action about the item.
#[salsa::tracked(returns(ref))]
pub fn slice_code<'db>(db: &'db dyn Db, item: ItemId<'db>) -> Arc<Vec<Hash>> {
    let files = item.repo(db).files(db);
    let mut out = Vec::new();
    for &(it, _) in &slice_of(db, item).items {
        match it {
            Item::Def(f, d) => {
                if let Ok(s) = parse_file(db, files[f as usize]) {
                    out.push(Hash(s.layout.defs[d as usize].code_hash));
                }
            }
            Item::Global(f, g) => {
                let sf = files[f as usize];
                if let (Ok(s), Ok(text)) = (parse_file(db, sf), source_text(db, sf)) {
                    let c = s.layout.globals[g as usize];
                    out.push(Hash::of_bytes(
                        text.get(c.start as usize..c.end as usize)
                            .unwrap_or_default()
                            .as_bytes(),
                    ));
                }
            }
        }
    }
    out.sort_unstable();
    Arc::new(out)
}

/// The repository files whose module-level code runs when `file` is imported: the file, the
/// `__init__` files of its packages, and, transitively, the files they import at module level
/// (with their packages' `__init__` files), in index order.
#[salsa::tracked(returns(ref))]
pub fn import_closure(db: &dyn Db, file: SourceFile) -> Arc<Vec<FileIx>> {
    let repo = file.repo(db);
    let files = repo.files(db);
    let index = module_index(db, repo);
    let world = DbWorld { db, files, index };
    let packages = |f: FileIx| -> Vec<FileIx> {
        let name = index.module_name(f);
        let mut out = Vec::new();
        let mut prefix = name;
        while let Some((head, _)) = prefix.rsplit_once('.') {
            out.extend(index.lookup(head));
            prefix = head;
        }
        out
    };
    let mut seen: HashSet<FileIx> = HashSet::new();
    let mut todo = vec![file.ix(db)];
    while let Some(f) = todo.pop() {
        if !seen.insert(f) {
            continue;
        }
        todo.extend(packages(f));
        todo.extend(imported_files(&world, f));
        for star in &world.interface(f).star_imports {
            todo.extend(index.absolute(f, star).and_then(|m| index.lookup(&m)));
        }
    }
    let mut out: Vec<FileIx> = seen.into_iter().collect();
    out.sort_unstable();
    Arc::new(out)
}

/// The key of the code that runs when `file` is imported: for each file of its import closure,
/// its path and its module-level code hash (every token outside function bodies). A function
/// that module-level code only calls (not through a global the function reads, which its own
/// slice holds) is not in it: a known limit.
#[salsa::tracked(returns(ref))]
pub fn import_key(db: &dyn Db, file: SourceFile) -> Hash {
    let files = file.repo(db).files(db);
    let mut h = blake3::Hasher::new();
    for &f in import_closure(db, file).iter() {
        let sf = files[f as usize];
        h.update(sf.path(db).as_bytes());
        h.update(&[0]);
        match parse_file(db, sf) {
            Ok(summary) => h.update(&summary.layout.import_hash),
            Err(e) => h.update(e.as_bytes()),
        };
    }
    Hash(*h.finalize().as_bytes())
}

/// A context: the chunks to render, in order, and their token count.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Context {
    /// (file, chunk) in rendering order; a chunk with `start == end == u32::MAX` is a file
    /// header line.
    pub parts: Vec<(FileIx, Chunk)>,
    pub tokens: u32,
    /// Whether definitions were dropped to fit `max_tokens`.
    pub truncated: bool,
}

const HEADER: Chunk = Chunk {
    start: u32::MAX,
    end: u32::MAX,
};

/// The header line that opens each file's part of a context.
pub fn file_header(path: &str) -> String {
    format!("# file: {path}\n")
}

fn chunk_tokens(db: &dyn Db, file: SourceFile, chunk: Chunk) -> u32 {
    if chunk == HEADER {
        return tokens::count(&file_header(file.path(db)));
    }
    let key = (file.hash(db), chunk.start, chunk.end);
    if let Some(&n) = db.env().tokens.lock().unwrap().get(&key) {
        return n;
    }
    let n = match source_text(db, file) {
        Ok(text) => tokens::count(
            text.get(chunk.start as usize..chunk.end as usize)
                .unwrap_or_default(),
        ),
        Err(_) => 0,
    };
    db.env().tokens.lock().unwrap().insert(key, n);
    n
}

/// The chunks that show one item: a class's header and attributes; a method's class header and
/// its own lines; a function's or global's lines.
fn item_chunks(summary: &ModuleSummary, item: Item) -> Vec<Chunk> {
    match item {
        Item::Def(_, ix) => {
            let layout = &summary.layout.defs[ix as usize];
            let def = &summary.interface.defs[ix as usize];
            match def.kind {
                DefKind::Class => std::iter::once(layout.header)
                    .chain(layout.attrs.iter().copied())
                    .collect(),
                DefKind::Method => {
                    let class = def.class.expect("methods have a class") as usize;
                    vec![summary.layout.defs[class].header, layout.chunk]
                }
                DefKind::Function => vec![layout.chunk],
            }
        }
        Item::Global(_, ix) => vec![summary.layout.globals[ix as usize]],
    }
}

/// Stage `slice` (contexts): the context of an item under the configured strategy, cut to
/// `max_tokens` by dropping the farthest definitions (or files) first.
#[salsa::tracked(returns(ref))]
pub fn context_of<'db>(db: &'db dyn Db, item: ItemId<'db>, settings: Settings) -> Arc<Context> {
    Arc::new(plan_context(
        db,
        item.repo(db),
        item.item(db),
        settings.context(db),
        || slice_of(db, item).items.clone(),
    ))
}

/// The context of `item` under `cfg`, its slice's items (with their distances) given by
/// `slice` (asked for only by the sliced strategy): what [`context_of`] computes, and what the
/// persisted analysis (`engine::memo`) re-renders from a slice it derived from stored edges.
pub fn plan_context(
    db: &dyn Db,
    repo: Repo,
    own: Item,
    cfg: &ContextConfig,
    slice: impl FnOnce() -> Vec<(Item, u32)>,
) -> Context {
    db.env().counters.contexts.fetch_add(1, Ordering::Relaxed);
    let files = repo.files(db);
    let (own_file, _) = item_file(own);
    let mut plan = Plan {
        db,
        files,
        budget: cfg.max_tokens,
        used: 0,
        parts: HashSet::new(),
        order: Vec::new(),
    };
    let mut truncated = false;
    match cfg.strategy {
        Strategy::Naive | Strategy::Sliced => {
            let mut wanted = vec![(own, 0u32)];
            if cfg.strategy == Strategy::Sliced {
                wanted.extend(slice());
            }
            for (n, (it, dist)) in wanted.into_iter().enumerate() {
                if !plan.add_item(it, dist, n == 0) {
                    truncated = true;
                    break;
                }
            }
        }
        Strategy::Full => {
            let mut imported = vec![own_file];
            let index = module_index(db, repo);
            let world = DbWorld { db, files, index };
            for f in imported_files(&world, own_file) {
                if !imported.contains(&f) {
                    imported.push(f);
                }
            }
            for (n, f) in imported.into_iter().enumerate() {
                if !plan.add_file(f, n as u32, n == 0) {
                    truncated = true;
                    break;
                }
            }
        }
    }
    let tokens = plan.used;
    Context {
        parts: plan.finish(own_file),
        tokens,
        truncated,
    }
}

/// The hash of the text a context shows of an item (its chunks, see [`item_chunks`]): a
/// comment inside a definition changes it, one outside every definition does not.
pub fn item_text_hash(db: &dyn Db, file: SourceFile, item: Item) -> Hash {
    let mut h = blake3::Hasher::new();
    match (parse_file(db, file), source_text(db, file)) {
        (Ok(summary), Ok(text)) => {
            for c in item_chunks(summary, item) {
                let part = text
                    .get(c.start as usize..c.end as usize)
                    .unwrap_or_default();
                h.update(&(part.len() as u64).to_le_bytes());
                h.update(part.as_bytes());
            }
        }
        _ => {
            h.update(b"unreadable");
        }
    }
    Hash(*h.finalize().as_bytes())
}

fn item_file(item: Item) -> (FileIx, u32) {
    match item {
        Item::Def(f, i) | Item::Global(f, i) => (f, i),
    }
}

/// The repository files a module imports at module level.
fn imported_files(world: &dyn World, file: FileIx) -> Vec<FileIx> {
    let iface = world.interface(file);
    let index = world.index();
    let mut out = Vec::new();
    for binding in &iface.imports {
        let module = match &binding.target {
            r2e_python::summary::ImportTarget::Module(m) => Some(m.clone()),
            r2e_python::summary::ImportTarget::From(from, name) => {
                index.absolute(file, from).map(|abs| {
                    let sub = format!("{abs}.{name}");
                    if index.lookup(&sub).is_some() {
                        sub
                    } else {
                        abs
                    }
                })
            }
        };
        if let Some(f) = module.and_then(|m| index.lookup(&m))
            && f != file
            && !out.contains(&f)
        {
            out.push(f);
        }
    }
    out
}

/// A context being assembled within a token budget.
struct Plan<'a> {
    db: &'a dyn Db,
    files: &'a [SourceFile],
    budget: u32,
    used: u32,
    parts: HashSet<(FileIx, Chunk)>,
    /// (file, distance of the nearest item, chunk)
    order: Vec<(FileIx, u32, Chunk)>,
}

impl Plan<'_> {
    /// Adds the chunks an item needs; `force` adds them even over budget. Returns whether it fit.
    fn add_item(&mut self, item: Item, dist: u32, force: bool) -> bool {
        let (file, _) = item_file(item);
        let Ok(summary) = parse_file(self.db, self.files[file as usize]) else {
            return true;
        };
        let mut chunks = vec![HEADER];
        chunks.extend(item_chunks(summary, item));
        self.add(file, dist, chunks, force)
    }

    fn add_file(&mut self, file: FileIx, dist: u32, force: bool) -> bool {
        let Ok(summary) = parse_file(self.db, self.files[file as usize]) else {
            return true;
        };
        self.add(
            file,
            dist,
            vec![
                HEADER,
                Chunk {
                    start: 0,
                    end: summary.layout.bytes,
                },
            ],
            force,
        )
    }

    fn add(&mut self, file: FileIx, dist: u32, chunks: Vec<Chunk>, force: bool) -> bool {
        let new: Vec<Chunk> = chunks
            .into_iter()
            .filter(|c| !self.parts.contains(&(file, *c)))
            .collect();
        let cost: u32 = new
            .iter()
            .map(|&c| chunk_tokens(self.db, self.files[file as usize], c))
            .sum();
        if !force && self.used + cost > self.budget {
            return false;
        }
        self.used += cost;
        for c in new {
            self.parts.insert((file, c));
            self.order.push((file, dist, c));
        }
        true
    }

    /// Files farthest first, the function's own file last; chunks in source order within a file.
    fn finish(self, own: FileIx) -> Vec<(FileIx, Chunk)> {
        let mut far: HashMap<FileIx, u32> = HashMap::new();
        for &(f, d, _) in &self.order {
            let e = far.entry(f).or_insert(0);
            *e = (*e).max(d);
        }
        let mut parts: Vec<(FileIx, Chunk)> = self.order.iter().map(|&(f, _, c)| (f, c)).collect();
        parts.sort_by_key(|&(f, c)| {
            let header_first = if c == HEADER { 0 } else { 1 };
            (
                f == own,
                std::cmp::Reverse(far[&f]),
                f,
                header_first,
                c.start,
                c.end,
            )
        });
        parts
    }
}

/// Renders a context's text.
pub fn render(db: &dyn Db, repo: Repo, ctx: &Context) -> String {
    let files = repo.files(db);
    let mut out = String::new();
    for &(f, c) in &ctx.parts {
        let file = files[f as usize];
        if c == HEADER {
            out.push_str(&file_header(file.path(db)));
        } else if let Ok(text) = source_text(db, file) {
            out.push_str(
                text.get(c.start as usize..c.end as usize)
                    .unwrap_or_default(),
            );
        }
    }
    out
}

/// A context rendered around one definition (`def`, a chunk of file `own`): the text before
/// it and the text after it, so that something else can stand in its place. When the context
/// does not hold it, the whole context comes before.
pub fn render_around(
    db: &dyn Db,
    repo: Repo,
    ctx: &Context,
    own: FileIx,
    def: Chunk,
) -> (String, String) {
    let files = repo.files(db);
    let (mut before, mut after) = (String::new(), String::new());
    let mut found = false;
    for &(f, c) in &ctx.parts {
        let file = files[f as usize];
        let out = if found { &mut after } else { &mut before };
        if c == HEADER {
            out.push_str(&file_header(file.path(db)));
            continue;
        }
        let Ok(text) = source_text(db, file) else {
            continue;
        };
        let piece = |a: u32, b: u32| text.get(a as usize..b as usize).unwrap_or_default();
        if !found && f == own && c.start <= def.start && def.end <= c.end {
            before.push_str(piece(c.start, def.start));
            after.push_str(piece(def.end, c.end));
            found = true;
        } else {
            out.push_str(piece(c.start, c.end));
        }
    }
    (before, after)
}

/// The third-party modules a repository's code imports: those it needs, and those it runs
/// without here (each with the first file importing it and why).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Default)]
pub struct ExternalImports {
    /// Top-level names, sorted.
    pub required: Vec<String>,
    /// Modules imported only under a guard (`python::guard`), sorted by name: never one of
    /// `required`.
    pub skipped: Vec<r2e_core::records::SkippedImport>,
}

/// Top-level names of the modules a repository's in-scope code imports that are not its own
/// (absolute imports whose first component no file of the repository provides): the imports of
/// the files in scope and of every file their import runs. A module imported only where the
/// code runs without it (inside a `try` that catches its `ImportError`, for another platform,
/// for type checkers) is skipped, with the first place and reason; one imported anywhere
/// without a guard is required. The `env` stage drops the standard library's and installs the
/// required ones when no declaration names them.
#[salsa::tracked(returns(ref))]
pub fn external_imports(db: &dyn Db, repo: Repo) -> Arc<ExternalImports> {
    use r2e_python::summary::{ImportBinding, ImportGuard, ImportTarget};
    let index = module_index(db, repo);
    let mut required = std::collections::BTreeSet::new();
    let mut guarded: std::collections::BTreeMap<String, (String, ImportGuard)> = Default::default();
    let mut consider = |target: &ImportTarget, guard: Option<&ImportGuard>, path: &str| {
        let module = match target {
            ImportTarget::Module(m) => m.as_str(),
            ImportTarget::From(from, _) if from.level == 0 => from.module.as_str(),
            ImportTarget::From(..) => return,
        };
        let root = module.split('.').next().unwrap_or_default();
        if root.is_empty() || index.lookup(root).is_some() || index.is_package_prefix(root) {
            return;
        }
        match guard {
            None => {
                required.insert(root.to_owned());
            }
            Some(g) => {
                guarded
                    .entry(root.to_owned())
                    .or_insert_with(|| (path.to_owned(), g.clone()));
            }
        }
    };
    // The files in scope, and every file their import runs.
    let files = repo.files(db);
    let mut needed: std::collections::BTreeSet<FileIx> = std::collections::BTreeSet::new();
    for &file in files.iter().filter(|f| f.in_scope(db)) {
        needed.extend(import_closure(db, file).iter().copied());
    }
    for ix in needed {
        let file = files[ix as usize];
        let path = file.path(db);
        let iface = file_interface(db, file);
        let mut binding = |b: &ImportBinding| consider(&b.target, b.guard.as_ref(), path);
        iface.imports.iter().for_each(&mut binding);
        if file.in_scope(db) {
            for def in &iface.defs {
                def.refs.local_imports.iter().for_each(&mut binding);
            }
        }
        for star in &iface.star_imports {
            consider(&ImportTarget::From(star.clone(), String::new()), None, path);
        }
    }
    let skipped = guarded
        .into_iter()
        .filter(|(module, _)| !required.contains(module))
        .map(|(module, (path, guard))| r2e_core::records::SkippedImport {
            module,
            path,
            reason: guard.reason(),
        })
        .collect();
    Arc::new(ExternalImports {
        required: required.into_iter().collect(),
        skipped,
    })
}

/// Every call site of a repository that passes a literal argument, by called name, in file
/// order. Read by the `generate` stage for the explorer's inputs.
#[salsa::tracked(returns(ref))]
pub fn call_index(
    db: &dyn Db,
    repo: Repo,
) -> Arc<HashMap<String, Vec<(u32, r2e_python::summary::CallSite)>>> {
    let mut out: HashMap<String, Vec<_>> = HashMap::new();
    for (i, &file) in repo.files(db).iter().enumerate() {
        if let Ok(summary) = parse_file(db, file) {
            for call in &summary.layout.calls {
                out.entry(call.callee.clone())
                    .or_default()
                    .push((i as u32, call.clone()));
            }
        }
    }
    Arc::new(out)
}

/// At most this many call sites are handed to the explorer per function.
pub const MAX_CALL_SITES: usize = 24;

/// The call sites that may call the function or method `qualname` of `file`: calls of its name,
/// the likeliest first (for a function, `name(...)` in its own module, then elsewhere, then
/// `x.name(...)`; for a method, `x.name(...)` first), without repeats. Name-based: a call of
/// another function of the same name costs the explorer a few executions, no more.
pub fn call_sites_for(
    db: &dyn Db,
    file: SourceFile,
    qualname: &str,
    method: bool,
) -> Vec<r2e_python::summary::CallSite> {
    let repo = file.repo(db);
    let name = qualname.rsplit('.').next().unwrap_or(qualname);
    let own = file.ix(db);
    let Some(sites) = call_index(db, repo).get(name) else {
        return Vec::new();
    };
    let rank = |(f, site): &(u32, r2e_python::summary::CallSite)| {
        let style = if site.attribute != method { 1 } else { 0 };
        (style, usize::from(*f != own))
    };
    let mut ranked: Vec<_> = sites.iter().collect();
    ranked.sort_by_key(|s| rank(s));
    let mut seen = std::collections::HashSet::new();
    ranked
        .into_iter()
        .map(|(_, s)| s)
        .filter(|s| seen.insert((&s.args, &s.kwargs)))
        .take(MAX_CALL_SITES)
        .cloned()
        .collect()
}
