//! The analysis stages' results, persisted across processes with verifying traces (the design
//! of Shake in "Build Systems à la Carte"). Within one process salsa memoizes `parse`,
//! `extract`, `slice` and `context`; every `r2e build` is a new process, so what they computed
//! is stored too, with the inputs it read, and the next build reuses each part whose inputs
//! still hash the same:
//!
//! - **parse** ([`FilesMemo`]): per file, its path, content hash and outcome (its interface's
//!   hash, or why it could not be parsed). A file whose content hash is unchanged is not parsed
//!   or read from the action cache.
//! - The repository's **interface fingerprint**: its name, every file's path in order and
//!   interface hash. It is all that name resolution, so every slice, reads. A comment, a
//!   body edit that names nothing new or a moved line leaves it as it was.
//! - **extract** ([`DatasetMemo::files`]): per file, its functions and the filters' verdicts,
//!   traced by its content hash and scope (and by the interface fingerprint when the
//!   connectivity filter, which resolves names, is on).
//! - **slice** ([`SliceMemo`]): the dependency graph of the candidates (items and their direct
//!   dependencies, the edges from which every slice is derived), traced by the interface
//!   fingerprint and the set of candidates; with each item's text hash
//!   ([`db::item_text_hash`]) and each candidate's slice record (`functions.jsonl`'s `slice`).
//! - **context**: a candidate's context is rendered again only when an item it shows changed
//!   text: a changed item's candidates are found by walking the stored edges backwards from it.
//!
//! Each part lives in one self-verifying entry per repository (`Bucket::Analysis`,
//! `keys::AnalysisKey`), replaced by each build that changes it; an entry that does not verify
//! is a miss, and a miss recomputes everything of that repository in salsa.

use std::sync::Arc;
use std::sync::atomic::Ordering;

use indicatif::ProgressBar;
use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use crate::db::{self, Database, Db, FunctionRow, Repo};
use r2e_core::cache::Cache;
use r2e_core::config::{ContextConfig, ExtractConfig, RepoConfig, RepoSource, Strategy};
use r2e_core::hash::Hash;
use r2e_core::keys::{ANALYSIS_FORMAT, AnalysisKey, PARSER, SUMMARY_FORMAT};
use r2e_core::records::SliceRecord;
use r2e_python::resolve::Item;
use r2e_python::summary::ModuleInterface;

fn key<'a>(
    rc: &'a RepoConfig,
    part: &'static str,
    settings: Option<(&'a ExtractConfig, &'a ContextConfig)>,
) -> AnalysisKey<'a> {
    AnalysisKey {
        format: ANALYSIS_FORMAT,
        analyzer: super::build_identity(),
        parser: PARSER,
        summary_format: SUMMARY_FORMAT,
        repo: &rc.name,
        source: match &rc.source {
            RepoSource::Path(p) => format!("path:{}", p.display()),
            RepoSource::Git { url, .. } => format!("git:{url}"),
            // As a git repo's URL without its revision: another version reuses what still
            // hashes the same.
            RepoSource::Pypi(r) => format!("pypi:{}{}", r.index_url, r.normalized()),
        },
        part,
        extract: settings.map(|s| s.0),
        context: settings.map(|s| s.1),
    }
}

/// The hash of a module's interface (what resolution reads of it).
pub fn interface_hash(iface: &ModuleInterface) -> Hash {
    Hash::of_bytes(&postcard::to_stdvec(iface).expect("interfaces serialize"))
}

/// What the parse stage learned of one file.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct ParsedFile {
    pub path: String,
    pub content: Hash,
    /// Its interface's hash, or why it could not be decoded or parsed.
    pub outcome: Result<Hash, String>,
}

/// The parse stage's outcomes for a repository's files.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct FilesMemo {
    pub files: Vec<ParsedFile>,
}

/// The parse packs (`packs`, key hashes) that hold the summaries of a repository's files
/// parsed by earlier builds, newest first, at most [`KEPT_PACKS`]. Stored apart from the
/// memo, under a key without the analyzer: a parse outcome depends on the parser and the
/// summary format only (as `ParseKey`), so another build of r2e still reads them, and a build
/// whose memo is not stored (a transient failure) still names the pack it wrote.
#[derive(Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct PackList {
    pub packs: Vec<Hash>,
}

/// How many parse packs a repository keeps naming. A pack dropped from the list is only a
/// miss: the files it held that have not changed since are parsed again when their
/// summaries are needed.
const KEPT_PACKS: usize = 16;

/// Where a repository's [`PackList`] is found.
fn packs_key(rc: &RepoConfig) -> AnalysisKey<'_> {
    AnalysisKey {
        analyzer: String::new(),
        ..key(rc, "packs", None)
    }
}

/// A repository's parse stage in this build.
pub struct RepoParse {
    /// Per file, in the repository's order: its interface's hash, or why it failed.
    pub outcomes: Vec<Result<Hash, String>>,
    /// How many outcomes came from the memo (neither parsed nor read from the action cache).
    pub reused: u64,
    /// The interface fingerprint: the repository's name, its files' paths in order and their
    /// interface hashes (a file that failed counts as an empty interface, as resolution sees it).
    pub interfaces: Hash,
}

/// Makes the parse packs that the repository's [`PackList`] names readable by `db` (a build's parse
/// stage does it in [`parse_repo`]).
pub fn register_packs(db: &Database, cache: &Cache, rc: &RepoConfig) {
    if let Some(list) = cache.get_action::<_, PackList>(&packs_key(rc)) {
        db.env().packs.register(&list.packs);
    }
}

/// The parse stage of one repository: a file whose path and content hash the memo holds takes
/// its outcome from there; the others are parsed (or read from the action cache). With `store`,
/// the memo is replaced when it changed and nothing transient happened.
pub fn parse_repo(
    db: &Database,
    cache: &Arc<Cache>,
    rc: &RepoConfig,
    repo: Repo,
    bar: &ProgressBar,
    store: bool,
) -> RepoParse {
    let key = key(rc, "files", None);
    let memo: FilesMemo = cache.get_action(&key).unwrap_or_default();
    let known: FxHashMap<(&str, Hash), &Result<Hash, String>> = memo
        .files
        .iter()
        .map(|f| ((f.path.as_str(), f.content), &f.outcome))
        .collect();
    let files = repo.files(db);
    let packs = &db.env().packs;
    let list: PackList = cache.get_action(&packs_key(rc)).unwrap_or_default();
    packs.register(&list.packs);
    if store {
        // The repository's packs are this output's, read or not (`r2e gc` keeps them).
        for &k in &list.packs {
            cache.note_entry_use(r2e_core::cache::Bucket::ParsePack, k);
        }
    }
    let to_parse = files
        .iter()
        .filter(|&&f| !known.contains_key(&(f.path(db).as_str(), f.hash(db))))
        .count();
    // Many files to parse (a cold build): their outcomes go into one entry, not one each.
    let pack = store && to_parse >= crate::packs::PACK_MIN;
    if pack {
        packs.start();
    }
    let found: Vec<(Result<Hash, String>, bool)> = files
        .par_iter()
        .map_with(db.clone(), |db, &f| {
            let out = match known.get(&(f.path(db).as_str(), f.hash(db))) {
                Some(&outcome) => (outcome.clone(), true),
                None => (
                    match db::parse_file(db, f) {
                        Ok(summary) => Ok(interface_hash(&summary.interface)),
                        Err(e) => Err(e.clone()),
                    },
                    false,
                ),
            };
            bar.inc(1);
            out
        })
        .collect();
    if pack && let Some(new) = packs.finish(cache) {
        let mut names = vec![new];
        names.extend(list.packs.iter().filter(|&&k| k != new));
        names.truncate(KEPT_PACKS);
        if let Err(e) = cache.put_action(&packs_key(rc), &PackList { packs: names }) {
            eprintln!(
                "warning: cannot store the parse packs of `{}`: {e}",
                rc.name
            );
        }
    }
    let empty = interface_hash(&ModuleInterface::default());
    let mut h = blake3::Hasher::new();
    h.update(repo.name(db).as_bytes());
    h.update(&[0]);
    for (f, (outcome, _)) in files.iter().zip(&found) {
        h.update(f.path(db).as_bytes());
        h.update(&[0]);
        h.update(&outcome.as_ref().unwrap_or(&empty).0);
    }
    let fresh = FilesMemo {
        files: files
            .iter()
            .zip(&found)
            .map(|(&f, (outcome, _))| ParsedFile {
                path: f.path(db).clone(),
                content: f.hash(db),
                outcome: outcome.clone(),
            })
            .collect(),
    };
    // A file that could not be read may be readable next time: nothing is stored then.
    if store
        && fresh != memo
        && !db.env().counters.transient.load(Ordering::Relaxed)
        && let Err(e) = cache.put_action(&key, &fresh)
    {
        eprintln!("warning: cannot store the analysis of `{}`: {e}", rc.name);
    }
    RepoParse {
        reused: found.iter().filter(|(_, r)| *r).count() as u64,
        outcomes: found.into_iter().map(|(o, _)| o).collect(),
        interfaces: Hash(*h.finalize().as_bytes()),
    }
}

/// A file's functions as the extraction found them, with what it read.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct ExtractedFile {
    pub path: String,
    pub content: Hash,
    pub in_scope: bool,
    /// Whether its path was a module name (`db::is_module`), which depends on the repository's
    /// other paths (its packages' `__init__.py` files).
    pub module: bool,
    pub rows: Vec<FunctionRow>,
}

/// The files' rows a memo may give, by path (`DatasetMemo::stored_rows`).
#[derive(Default)]
pub struct StoredRows<'m>(FxHashMap<&'m str, &'m ExtractedFile>);

impl<'m> StoredRows<'m> {
    /// The functions of `f` as the memo recorded them, when its content, scope and whether its
    /// path is a module name are the ones recorded.
    pub fn rows(&self, db: &dyn Db, f: db::SourceFile) -> Option<&'m [FunctionRow]> {
        let m = self.0.get(f.path(db).as_str())?;
        (m.content == f.hash(db)
            && m.in_scope == f.in_scope(db)
            && m.module == db::is_module(db, f))
        .then_some(m.rows.as_slice())
    }
}

/// The dependency graph of a repository's candidates, with each item's text hash and each
/// candidate's slice record.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct SliceMemo {
    /// The candidates' definitions, sorted.
    pub candidates: Vec<Item>,
    /// Every item a candidate reaches, sorted: node `n` of `slices/REPO.jsonl` is `items[n]`.
    pub items: Vec<Item>,
    /// Each item's direct dependencies (explicit and implicit), as node numbers, sorted.
    pub deps: Vec<Vec<u32>>,
    /// Each item's text hash (`db::item_text_hash`).
    pub text: Vec<Hash>,
    /// Each candidate's slice record, in the order of `candidates`.
    pub records: Vec<SliceRecord>,
    /// The content hash of the `slices/REPO.jsonl` written from this graph.
    pub file: Hash,
}

impl SliceMemo {
    /// The slice of node `start`, as `resolve::closure` gives it: items by breadth-first
    /// distance, each level sorted (node order is item order).
    pub fn closure(&self, start: u32) -> Vec<(Item, u32)> {
        r2e_python::resolve::breadth_first(start, |n| self.deps[n as usize].iter().copied())
            .into_iter()
            .map(|(n, d)| (self.items[n as usize], d))
            .collect()
    }

    /// The node of an item of the graph (a candidate's, say).
    pub fn node(&self, item: Item) -> u32 {
        self.items
            .binary_search(&item)
            .expect("the item is a node of the graph") as u32
    }

    /// The nodes that reach any of `from` (themselves included), walking the edges backwards.
    pub fn reaching(&self, from: &[u32]) -> FxHashSet<u32> {
        let mut back: Vec<Vec<u32>> = vec![Vec::new(); self.items.len()];
        for (n, deps) in self.deps.iter().enumerate() {
            for &d in deps {
                back[d as usize].push(n as u32);
            }
        }
        let mut seen: FxHashSet<u32> = from.iter().copied().collect();
        let mut stack: Vec<u32> = from.to_vec();
        while let Some(n) = stack.pop() {
            for &m in &back[n as usize] {
                if seen.insert(m) {
                    stack.push(m);
                }
            }
        }
        seen
    }
}

/// One dataset's analysis of a repository: extraction, and with slices their graph.
#[derive(Clone, Debug, Serialize, Deserialize)]
pub struct DatasetMemo {
    /// The interface fingerprint it was computed under ([`RepoParse::interfaces`]).
    pub interfaces: Hash,
    pub files: Vec<ExtractedFile>,
    pub slices: Option<SliceMemo>,
}

/// The dataset memo of a repository under these settings, when there is one that verifies.
pub fn load_dataset(
    cache: &Cache,
    rc: &RepoConfig,
    extract: &ExtractConfig,
    context: &ContextConfig,
) -> Option<DatasetMemo> {
    cache.get_action(&key(rc, "dataset", Some((extract, context))))
}

/// Replaces the dataset memo of a repository under these settings.
pub fn store_dataset(
    cache: &Cache,
    rc: &RepoConfig,
    extract: &ExtractConfig,
    context: &ContextConfig,
    memo: &DatasetMemo,
) {
    if let Some(slices) = &memo.slices {
        // What the slices add to the cache, apart from the extraction's rows.
        let bytes = postcard::to_stdvec(slices)
            .map(|b| b.len())
            .unwrap_or_default();
        r2e_core::log::size(&format!("analysis of `{}`: slices", rc.name), bytes);
    }
    if let Err(e) = cache.put_action(&key(rc, "dataset", Some((extract, context))), memo) {
        eprintln!("warning: cannot store the analysis of `{}`: {e}", rc.name);
    }
}

/// The text hashes of the graph's items in the files `changed` (by index), the others kept.
pub fn text_hashes(
    db: &dyn Db,
    repo: Repo,
    items: &[Item],
    old: &[Hash],
    changed: &[bool],
) -> Vec<Hash> {
    let files = repo.files(db);
    items
        .iter()
        .zip(old)
        .map(|(&it, &h)| {
            let (Item::Def(f, _) | Item::Global(f, _)) = it;
            if changed[f as usize] {
                db::item_text_hash(db, files[f as usize], it)
            } else {
                h
            }
        })
        .collect()
}

impl DatasetMemo {
    /// The rows the files may take from the memo: none when the connectivity filter (which
    /// resolves names) is on and the interfaces changed.
    pub fn stored_rows(&self, parse: &RepoParse, connectivity: bool) -> StoredRows<'_> {
        if connectivity && self.interfaces != parse.interfaces {
            return StoredRows::default();
        }
        StoredRows(self.files.iter().map(|f| (f.path.as_str(), f)).collect())
    }

    /// The stored graph, when it is the graph of these candidates (sorted) over these files
    /// (the same paths in the same order) under the interfaces `parse` found.
    pub fn kept_slices(
        &self,
        db: &dyn Db,
        repo: Repo,
        parse: &RepoParse,
        candidates: &[Item],
    ) -> Option<&SliceMemo> {
        let slices = self.slices.as_ref()?;
        let files = repo.files(db);
        let aligned = self.files.len() == files.len()
            && self
                .files
                .iter()
                .zip(files)
                .all(|(m, f)| m.path == *f.path(db));
        (self.interfaces == parse.interfaces && aligned && slices.candidates == candidates)
            .then_some(slices)
    }

    /// What the changes since this memo make render again under the kept graph `slices`: the
    /// items' text hashes now, and the candidates (indexes into `slices.candidates`) whose
    /// context shows an item whose text changed (`Sliced`: those whose slice holds it, found by
    /// walking the edges backwards; `Naive`: the changed candidates; `Full`: every candidate,
    /// when any file changed).
    pub fn affected(
        &self,
        db: &dyn Db,
        repo: Repo,
        slices: &SliceMemo,
        strategy: Strategy,
    ) -> (Vec<Hash>, Vec<usize>) {
        let files = repo.files(db);
        let changed: Vec<bool> = self
            .files
            .iter()
            .zip(files)
            .map(|(m, f)| m.content != f.hash(db))
            .collect();
        let text = text_hashes(db, repo, &slices.items, &slices.text, &changed);
        let dirty: Vec<u32> = (0..text.len() as u32)
            .filter(|&n| text[n as usize] != slices.text[n as usize])
            .collect();
        let own = &slices.candidates;
        let affected = match strategy {
            Strategy::Sliced if !dirty.is_empty() => {
                let reach = slices.reaching(&dirty);
                (0..own.len())
                    .filter(|&i| reach.contains(&slices.node(own[i])))
                    .collect()
            }
            Strategy::Naive => {
                let dirty: FxHashSet<u32> = dirty.iter().copied().collect();
                (0..own.len())
                    .filter(|&i| dirty.contains(&slices.node(own[i])))
                    .collect()
            }
            // A whole-file context shows every line of the files it holds.
            Strategy::Full if changed.contains(&true) => (0..own.len()).collect(),
            _ => Vec::new(),
        };
        (text, affected)
    }
}

/// What the analysis stages of the next build would run (for `r2e status`), found as the build
/// finds it: the changed files parsed, their functions extracted, the persisted analysis read.
/// Nothing is stored.
#[derive(Clone, Debug, Default, Serialize)]
pub struct AnalysisPlan {
    /// Files whose functions would be extracted.
    pub extract: u64,
    /// Candidates whose slice would be computed.
    pub slice: u64,
    /// Candidates whose context would be rendered.
    pub context: u64,
    /// Each repository's candidates (for `r2e status --plan`).
    #[serde(skip)]
    pub candidates: std::collections::BTreeMap<String, u64>,
}

/// The analysis plan of the pipeline's own dataset over `repos` (`Session::repos`, with their
/// configurations).
pub fn plan(
    db: &Database,
    cache: &Arc<Cache>,
    repos: &[(Repo, &RepoConfig)],
    settings: db::Settings,
    dedup: bool,
) -> AnalysisPlan {
    let mut plan = AnalysisPlan::default();
    let (extract, context) = (settings.extract(db), settings.context(db));
    let bar = ProgressBar::hidden();
    let mut analysed = Vec::new();
    let mut rows: Vec<(db::SourceFile, FunctionRow)> = Vec::new();
    for &(repo, rc) in repos {
        let parse = parse_repo(db, cache, rc, repo, &bar, false);
        let memo = load_dataset(cache, rc, extract, context);
        let stored = memo
            .as_ref()
            .map(|m| m.stored_rows(&parse, extract.connectivity))
            .unwrap_or_default();
        for &f in repo.files(db) {
            let found = match stored.rows(db, f) {
                Some(found) => found.to_vec(),
                None => {
                    plan.extract += 1;
                    db::file_functions(db, f, settings).to_vec()
                }
            };
            rows.extend(found.into_iter().map(|r| (f, r)));
        }
        analysed.push((repo, parse, memo));
    }
    // As the build does: the copies of earlier candidates are no candidates.
    if dedup {
        db::mark_duplicates(db, rows.iter_mut().map(|(f, r)| (*f, r)));
    }
    for (repo, parse, memo) in analysed {
        let mut candidates: Vec<Item> = rows
            .iter()
            .filter(|(f, r)| f.repo(db) == repo && r.excluded_by.is_none())
            .map(|(f, r)| Item::Def(f.ix(db), r.def))
            .collect();
        candidates.sort_unstable();
        plan.candidates
            .insert(repo.name(db).to_string(), candidates.len() as u64);
        match memo
            .as_ref()
            .and_then(|m| Some((m, m.kept_slices(db, repo, &parse, &candidates)?)))
        {
            Some((m, slices)) => {
                plan.context += m.affected(db, repo, slices, context.strategy).1.len() as u64;
            }
            None => {
                plan.slice += candidates.len() as u64;
                plan.context += candidates.len() as u64;
            }
        }
    }
    plan
}
