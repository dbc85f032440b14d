//! The build's outputs: JSON-lines files streamed to a temporary file and switched in only when
//! their content changed, the `functions.jsonl` line of a function, the dependency graph of a
//! repository's slices (`slices/REPO.jsonl`), and the sealed build state
//! (`<output>/.r2e/state`) that the no-op check reads.

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;
use rustc_hash::{FxHashMap, FxHashSet};
use serde::{Deserialize, Serialize};

use crate::db::{self, Database, FunctionRow, ItemId, Repo, SourceFile};
use r2e_core::cache::entry;
use r2e_core::error::{Error, Result};
use r2e_core::fsutil::write_if_changed;
use r2e_core::hash::Hash;
use r2e_core::records::{
    DatasetTimes, FunctionRecord, NodeKind, SliceNode, SliceRecord, Summary, Timings, to_line,
};
use r2e_python::resolve::{Deps, Item};

/// An output file as a build recorded it: its name (relative to the output), content hash,
/// size and modification time.
pub type Recorded = (String, Hash, u64, i64);

/// What the last build of an output recorded.
#[derive(Serialize, Deserialize)]
pub struct State {
    pub fingerprint: Hash,
    pub summary_json: String,
    /// Output files with their content hashes, sizes and modification times.
    pub outputs: Vec<Recorded>,
    /// Repo name → identity.
    pub repos: Vec<(String, String)>,
    /// The hash of the stage settings.
    pub settings: Hash,
    /// Each stage's settings as its actions' keys hold them (`stages::keyed::of_pipeline`), by
    /// stage, each as JSON text (the state's binary format holds no `serde_json::Value`): what
    /// `r2e status` compares, field by field, to name the ones that changed. Empty in a state
    /// of the previous layout, whose settings are not read.
    pub keyed: BTreeMap<String, String>,
}

impl State {
    /// [`State::keyed`], each stage's settings read back as a JSON value.
    pub fn keyed_settings(&self) -> BTreeMap<String, serde_json::Value> {
        self.keyed
            .iter()
            .filter_map(|(stage, text)| Some((stage.clone(), serde_json::from_str(text).ok()?)))
            .collect()
    }
}

/// Each stage's settings as [`State::keyed`] holds them.
pub fn keyed_text(settings: &BTreeMap<String, serde_json::Value>) -> BTreeMap<String, String> {
    settings
        .iter()
        .map(|(stage, v)| (stage.clone(), v.to_string()))
        .collect()
}

/// The scope and key the state is sealed under. 4: the stages' settings are their keys' (as
/// JSON), not a map of fields.
const STATE_SCOPE: &str = "r2e-state-4";

fn state_key() -> Hash {
    Hash::of_bytes(STATE_SCOPE.as_bytes())
}

/// The state as layout 3 wrote it: read so that an output built by the r2e before keeps its
/// last build (its repositories, its outputs), with no settings recorded.
#[derive(Deserialize)]
#[cfg_attr(test, derive(Serialize))]
struct StateV3 {
    fingerprint: Hash,
    summary_json: String,
    outputs: Vec<Recorded>,
    repos: Vec<(String, String)>,
    settings: Hash,
    /// By stage, then by field, JSON text: not read.
    #[allow(dead_code)]
    stage_settings: BTreeMap<String, BTreeMap<String, String>>,
}

const STATE_SCOPE_V3: &str = "r2e-state-3";

fn state_path(output: &Path) -> PathBuf {
    output.join(".r2e").join("state")
}

/// The state of the last build of an output, when there is one that verifies (of this layout,
/// or of the previous one without its settings).
pub fn read_state(output: &Path) -> Option<State> {
    let bytes = std::fs::read(state_path(output)).ok()?;
    if let Ok(state) = entry::unseal(STATE_SCOPE, state_key(), &bytes) {
        return Some(state);
    }
    let v3: StateV3 = entry::unseal(
        STATE_SCOPE_V3,
        Hash::of_bytes(STATE_SCOPE_V3.as_bytes()),
        &bytes,
    )
    .ok()?;
    Some(State {
        fingerprint: v3.fingerprint,
        summary_json: v3.summary_json,
        outputs: v3.outputs,
        repos: v3.repos,
        settings: v3.settings,
        keyed: BTreeMap::new(),
    })
}

/// Records the state of a build.
pub fn write_state(output: &Path, state: &State) -> Result<()> {
    fs_err::create_dir_all(output.join(".r2e"))?;
    write_if_changed(
        &state_path(output),
        &entry::seal(STATE_SCOPE, state_key(), state),
    )?;
    Ok(())
}

/// The generation an output path shows now: kept beside the readers (`bench`, `inspect`) in
/// `records`, below the engine that writes the generations.
pub use r2e_core::records::resolve_output as resolve;

/// Size and modification time (ns) of a file.
pub fn stat(path: &Path) -> Option<(u64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.mtime() * 1_000_000_000 + m.mtime_nsec()))
}

/// A repository's dependency graph as `slices/REPO.jsonl` holds it: every item some candidate
/// reaches, the candidates included, in `Item` order (definitions, then globals; each by file,
/// then source order), then every name bound to nothing that those items use, sorted. A node's
/// number is its place.
pub struct Graph {
    pub repo: Repo,
    items: Vec<Item>,
    index: FxHashMap<Item, u32>,
    /// The unresolved names' nodes, numbered after the items.
    unresolved: FxHashMap<String, u32>,
    /// A definition's id, a global's qualified name, then the unresolved names.
    names: Vec<String>,
    /// For a global, the first node with its qualified name (a slice counts a name once).
    same_name: Vec<u32>,
}

impl Graph {
    /// The graph of `repo`'s candidates (`items`: their definitions).
    pub fn of(db: &Database, repo: Repo, items: impl IntoIterator<Item = Item>) -> Graph {
        // Breadth first, each level's dependencies resolved on every core.
        let mut seen: FxHashSet<Item> = FxHashSet::default();
        let mut level: Vec<Item> = items.into_iter().filter(|&i| seen.insert(i)).collect();
        while !level.is_empty() {
            let deps: Vec<Arc<Deps>> = level
                .par_iter()
                .map_with(db.clone(), |db, &item| {
                    db::item_deps(db, ItemId::new(db, repo, item)).clone()
                })
                .collect();
            level = deps
                .iter()
                .flat_map(|d| d.explicit.iter().chain(&d.implicit))
                .copied()
                .filter(|&dep| seen.insert(dep))
                .collect();
        }
        let mut items: Vec<Item> = seen.into_iter().collect();
        items.sort_unstable();
        let index: FxHashMap<Item, u32> = items
            .iter()
            .enumerate()
            .map(|(i, &it)| (it, i as u32))
            .collect();
        let files = repo.files(db);
        let modules = db::module_index(db, repo);
        let names: Vec<String> = items
            .iter()
            .map(|&it| match it {
                Item::Def(f, ix) => db::def_ids(db, files[f as usize])[ix as usize].clone(),
                Item::Global(f, ix) => {
                    let name = &db::file_interface(db, files[f as usize]).globals[ix as usize].name;
                    let module = modules.module_name(f);
                    if module.is_empty() {
                        name.clone()
                    } else {
                        format!("{module}.{name}")
                    }
                }
            })
            .collect();
        let mut unbound: Vec<String> = items
            .iter()
            .flat_map(|&it| {
                db::item_deps(db, ItemId::new(db, repo, it))
                    .unresolved
                    .iter()
                    .cloned()
            })
            .collect();
        unbound.sort_unstable();
        unbound.dedup();
        let mut first: FxHashMap<&str, u32> = FxHashMap::default();
        let same_name = items
            .iter()
            .zip(&names)
            .enumerate()
            .map(|(i, (it, name))| match it {
                Item::Def(..) => i as u32,
                Item::Global(..) => *first.entry(name.as_str()).or_insert(i as u32),
            })
            .collect();
        let unresolved = unbound
            .iter()
            .enumerate()
            .map(|(i, name)| (name.clone(), (items.len() + i) as u32))
            .collect();
        let mut names = names;
        names.extend(unbound);
        Graph {
            repo,
            items,
            index,
            unresolved,
            names,
            same_name,
        }
    }

    /// Every item some candidate reaches, sorted: node `n` is `items()[n]`.
    pub fn items(&self) -> &[Item] {
        &self.items
    }

    /// An item's direct dependencies (explicit and implicit) as node numbers, sorted.
    pub fn deps(&self, db: &Database, n: usize) -> Vec<u32> {
        let deps = db::item_deps(db, ItemId::new(db, self.repo, self.items[n]));
        let mut on: Vec<u32> = deps
            .explicit
            .iter()
            .chain(&deps.implicit)
            .map(|dep| self.index[dep])
            .collect();
        on.sort_unstable();
        on.dedup();
        on
    }

    /// The `slice` record of a candidate of the file `own_file` (node `node`) in
    /// `functions.jsonl`, from its slice (`slice`: the items it reaches with their distances)
    /// and its context: its node, its slice's size (definitions, and globals by qualified name
    /// once each), its context's tokens, and whether the slice stays in its file.
    pub fn record(
        &self,
        own_file: u32,
        node: u32,
        slice: &[(Item, u32)],
        ctx: &db::Context,
    ) -> SliceRecord {
        let mut globals = Vec::new();
        let mut defs = 0;
        for &(it, _) in slice {
            match it {
                Item::Def(..) => defs += 1,
                Item::Global(..) => globals.push(self.same_name[self.index[&it] as usize]),
            }
        }
        globals.sort_unstable();
        globals.dedup();
        SliceRecord {
            node,
            size: defs + globals.len(),
            tokens: ctx.tokens,
            truncated: ctx.truncated,
            in_file: db::in_file(slice, own_file),
        }
    }

    /// The node of an item, when some candidate reaches it.
    pub fn node(&self, item: Item) -> Option<u32> {
        self.index.get(&item).copied()
    }

    /// How many nodes: items and unresolved names.
    pub fn len(&self) -> usize {
        self.names.len()
    }

    pub fn is_empty(&self) -> bool {
        self.names.is_empty()
    }

    /// The line of node `n`: its name and its direct dependencies, sorted.
    pub fn line(&self, db: &Database, n: usize) -> Vec<u8> {
        let Some(&item) = self.items.get(n) else {
            return to_line(&SliceNode {
                kind: NodeKind::Unresolved,
                name: self.names[n].as_str().into(),
                deps: Vec::new(),
            });
        };
        let mut on = self.deps(db, n);
        let deps = db::item_deps(db, ItemId::new(db, self.repo, item));
        on.extend(deps.unresolved.iter().map(|name| self.unresolved[name]));
        on.sort_unstable();
        on.dedup();
        to_line(&SliceNode {
            kind: match item {
                Item::Def(..) => NodeKind::Def,
                Item::Global(..) => NodeKind::Global,
            },
            name: self.names[n].as_str().into(),
            deps: on,
        })
    }
}

/// `<output>/.r2e/timings.json`: where the build's time went, per dataset and repository
/// (`records::Timings`), written into the staging generation beside the state.
pub fn write_timings(staging: &Path, summary: &Summary, seconds: f64) -> Result<()> {
    let mut datasets = Vec::new();
    if summary.variants.0.is_empty() {
        datasets.push(DatasetTimes {
            variant: None,
            repos: summary.time.clone(),
        });
    }
    for (name, v) in &summary.variants.0 {
        datasets.push(DatasetTimes {
            variant: Some(name.clone()),
            repos: v.time.clone(),
        });
    }
    let timings = Timings {
        seconds: (seconds * 1000.0).round() / 1000.0,
        datasets,
    };
    let dir = staging.join(".r2e");
    fs_err::create_dir_all(&dir)?;
    let mut bytes = serde_json::to_vec_pretty(&timings).map_err(Error::internal)?;
    bytes.push(b'\n');
    r2e_core::fsutil::write_atomic(&dir.join(TIMINGS), &bytes)?;
    Ok(())
}

/// The name of the timings file in an output's `.r2e/` folder.
pub const TIMINGS: &str = "timings.json";

/// The timings the last build that ran wrote into `output` (`None`: none, or unreadable).
pub fn read_timings(output: &Path) -> Option<Timings> {
    let bytes = std::fs::read(output.join(".r2e").join(TIMINGS)).ok()?;
    serde_json::from_slice(&bytes).ok()
}

/// The line of `functions.jsonl` for one function, with its slice record when it is a candidate
/// and slices were computed.
pub fn function_line(
    db: &Database,
    file: SourceFile,
    row: &FunctionRow,
    slice: Option<SliceRecord>,
    dates: Option<&r2e_core::dates::Dates>,
) -> Vec<u8> {
    let repo = file.repo(db).name(db);
    let (created_at, changed_at) = dates.map_or((None, None), |d| d.texts(&row.id, repo));
    to_line(&FunctionRecord {
        id: row.id.as_str().into(),
        repo: repo.as_str().into(),
        qualname: row.qualname.as_str().into(),
        kind: row.kind,
        start_line: row.start_line,
        end_line: row.end_line,
        docstring: row.docstring.as_deref().map(Into::into),
        excluded_by: row.excluded_by,
        created_at,
        changed_at,
        slice,
    })
}

/// The output `name` as the current generation holds it, linked to `path` (in the staging
/// folder) when the previous build recorded it with content hash `hash` and it is still as
/// that build left it (size and modification time), so that it keeps its bytes and
/// modification time: how [`JsonlWriter::finish`] keeps an unchanged file, and how a file whose
/// content is known without writing it (a kept graph's slices) is kept.
pub fn reuse(
    path: &Path,
    name: &str,
    hash: Hash,
    previous: &[Recorded],
    current: Option<&Path>,
) -> Option<Recorded> {
    let old = current?.join(name);
    let recorded = previous.iter().find(|(n, h, size, mtime)| {
        n == name && *h == hash && stat(&old) == Some((*size, *mtime))
    })?;
    if let Some(parent) = path.parent() {
        fs_err::create_dir_all(parent).ok()?;
    }
    std::fs::hard_link(&old, path).ok()?;
    Some(recorded.clone())
}

/// Streams a JSON-lines output to a temporary file in the staging folder, hashing it; on
/// `finish`, an unchanged file is linked from the current generation, so that it keeps its bytes
/// and modification time.
pub struct JsonlWriter {
    name: String,
    path: PathBuf,
    tmp: PathBuf,
    out: fs_err::File,
    /// Lines not written yet: hashed and written a megabyte at a time (blake3 hashes large
    /// inputs many chunks at once, and a line at a time one block at a time).
    buf: Vec<u8>,
    hasher: blake3::Hasher,
}

/// How many bytes a [`JsonlWriter`] gathers before it hashes and writes them.
const WRITE_CHUNK: usize = 1 << 20;

impl JsonlWriter {
    /// A writer of `root/name`; `name` (relative to the output) is what the state records.
    pub fn create(root: &Path, name: &str) -> Result<JsonlWriter> {
        let path = root.join(name);
        if let Some(parent) = path.parent() {
            fs_err::create_dir_all(parent)?;
        }
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        let file = fs_err::File::create(&tmp)?;
        Ok(JsonlWriter {
            name: name.to_owned(),
            path,
            tmp,
            out: file,
            buf: Vec::with_capacity(WRITE_CHUNK + (64 << 10)),
            hasher: blake3::Hasher::new(),
        })
    }

    pub fn write_line(&mut self, line: &[u8]) -> Result<()> {
        self.buf.extend_from_slice(line);
        if !line.ends_with(b"\n") {
            self.buf.push(b'\n');
        }
        if self.buf.len() >= WRITE_CHUNK {
            self.flush()?;
        }
        Ok(())
    }

    /// Hashes and writes the lines gathered.
    fn flush(&mut self) -> Result<()> {
        use std::io::Write;
        self.hasher.update(&self.buf);
        self.out
            .write_all(&self.buf)
            .map_err(|e| Error::env(format!("cannot write `{}`: {e}", self.tmp.display())))?;
        self.buf.clear();
        Ok(())
    }

    /// Writes one record as a line.
    pub fn write<T: Serialize>(&mut self, record: &T) -> Result<()> {
        self.write_line(&to_line(record))
    }

    /// Finishes the file in the staging folder; returns it as recorded in the build state. A
    /// file whose content is what the current generation holds (as `previous` recorded it) is
    /// linked from there, keeping its bytes and modification time.
    pub fn finish(mut self, previous: &[Recorded], current: Option<&Path>) -> Result<Recorded> {
        self.flush()?;
        let name = self.name.clone();
        let hash = Hash(*self.hasher.finalize().as_bytes());
        drop(self.out);
        if let Some(kept) = reuse(&self.path, &name, hash, previous, current) {
            fs_err::remove_file(&self.tmp)?;
            return Ok(kept);
        }
        fs_err::rename(&self.tmp, &self.path)?;
        let (size, mtime) = stat(&self.path)
            .ok_or_else(|| Error::env(format!("cannot stat `{}`", self.path.display())))?;
        Ok((name, hash, size, mtime))
    }
}

/// An output folder committed as a set. The path the user names (`out`) is a symlink to the
/// current generation, kept in a store beside it (`.out.r2e/gen-<n>/`). A build writes a new
/// generation into a staging folder (`.out.r2e/staging-<pid>/`) and switches the symlink to it
/// in one rename: a reader that resolves the output once sees the whole old set or the whole new
/// one, whatever happens to the build. The store holds a lock, so that two builds writing one
/// output take turns; the next build removes what a dead one left.
pub struct Output {
    /// The path the user names, absolute.
    pub path: PathBuf,
    store: PathBuf,
    _lock: std::fs::File,
    /// The generation being written.
    staging: PathBuf,
    committed: bool,
}

/// The store of the output at `path`: `.NAME.r2e` beside it, holding its generations and what
/// outlives them (`r2e serve`'s traces and workspaces).
pub fn store_of(path: &Path) -> Result<PathBuf> {
    let path =
        std::path::absolute(path).map_err(|e| Error::env(format!("{}: {e}", path.display())))?;
    let parent = path.parent().unwrap_or(Path::new("/")).to_path_buf();
    let name = path
        .file_name()
        .map(|n| n.to_string_lossy().into_owned())
        .unwrap_or_else(|| "out".into());
    Ok(parent.join(format!(".{name}.r2e")))
}

/// The folder of `r2e serve`'s traces in an output's store. Every generation links to it as
/// `<output>/traces`, so that traces outlive the builds that replace the dataset.
pub const TRACES: &str = "traces";

/// Makes the store's traces folder and links `generation`'s `traces` to it (unless it has that
/// link); returns the folder.
pub fn link_traces(store: &Path, generation: &Path) -> Result<PathBuf> {
    let traces = store.join(TRACES);
    fs_err::create_dir_all(&traces)?;
    let link = generation.join(TRACES);
    if std::fs::symlink_metadata(&link).is_err() {
        std::os::unix::fs::symlink(Path::new("..").join(TRACES), &link)
            .map_err(|e| Error::env(format!("cannot make `{}`: {e}", link.display())))?;
    }
    Ok(traces)
}

/// The marker of a generation folder in the store.
const GEN: &str = "gen-";
const STAGING: &str = "staging-";

impl Output {
    /// Takes the output's lock (waiting for another build that holds it), removes what dead
    /// builds left in its store, and makes an empty staging folder.
    pub fn open(path: &Path) -> Result<Output> {
        let path = std::path::absolute(path)
            .map_err(|e| Error::env(format!("{}: {e}", path.display())))?;
        let store = store_of(&path)?;
        fs_err::create_dir_all(&store)?;
        let lock = r2e_core::cache::lock_file(&store.join("lock"), || {
            eprintln!(
                "waiting for the lock on `{}`: another build is writing this output",
                path.display()
            )
        })?;
        let mut out = Output {
            path,
            store,
            _lock: lock,
            staging: PathBuf::new(),
            committed: false,
        };
        out.remove_leftovers();
        out.adopt_folder()?;
        out.staging = out.store.join(format!("{STAGING}{}", std::process::id()));
        let _ = fs_err::remove_dir_all(&out.staging);
        fs_err::create_dir_all(&out.staging)?;
        Ok(out)
    }

    /// Where this build writes its files.
    pub fn staging(&self) -> &Path {
        &self.staging
    }

    /// The generation the output shows now, when there is one.
    pub fn current(&self) -> Option<PathBuf> {
        let target = std::fs::read_link(&self.path).ok()?;
        let target = self.path.parent()?.join(target);
        target.is_dir().then_some(target)
    }

    /// Staging folders of dead builds.
    fn remove_leftovers(&self) {
        let Ok(entries) = std::fs::read_dir(&self.store) else {
            return;
        };
        for e in entries.flatten() {
            let name = e.file_name().to_string_lossy().into_owned();
            let pid = name
                .strip_prefix(STAGING)
                .and_then(|p| p.parse::<u32>().ok());
            if pid.is_some_and(|pid| !r2e_core::fsutil::pid_alive(pid)) {
                let _ = fs_err::remove_dir_all(e.path());
            }
            if r2e_core::fsutil::tmp_owner(&name)
                .is_some_and(|pid| !r2e_core::fsutil::pid_alive(pid))
            {
                let _ = std::fs::remove_file(e.path());
            }
        }
    }

    /// An output folder an older r2e wrote in place becomes the first generation; any other
    /// folder at the path is the user's, and refused.
    fn adopt_folder(&self) -> Result<()> {
        let Ok(meta) = std::fs::symlink_metadata(&self.path) else {
            return Ok(());
        };
        if meta.file_type().is_symlink() {
            let ours = std::fs::read_link(&self.path)
                .is_ok_and(|t| t.starts_with(self.store.file_name().unwrap_or_default()));
            if ours {
                return Ok(());
            }
            return Err(Error::input(format!(
                "the output `{}` is a symlink r2e did not make; remove it or choose another `output`",
                self.path.display()
            )));
        }
        let made_by_r2e = self.path.join(".r2e").is_dir()
            || std::fs::read_dir(&self.path).is_ok_and(|mut d| d.next().is_none());
        if !meta.is_dir() || !made_by_r2e {
            return Err(Error::input(format!(
                "the output `{}` exists and is not an r2e output; remove it or choose another `output`",
                self.path.display()
            )));
        }
        let first = self.store.join(format!("{GEN}0"));
        let _ = fs_err::remove_dir_all(&first);
        fs_err::rename(&self.path, &first)?;
        self.point_at(&first)
    }

    /// Switches the output's symlink to `generation` in one rename.
    fn point_at(&self, generation: &Path) -> Result<()> {
        let relative = Path::new(self.store.file_name().unwrap_or_default())
            .join(generation.file_name().unwrap_or_default());
        let tmp = self.path.with_file_name(format!(
            ".{}{}{}.0",
            self.path.file_name().unwrap_or_default().to_string_lossy(),
            r2e_core::fsutil::TMP_MARKER,
            std::process::id()
        ));
        let _ = std::fs::remove_file(&tmp);
        std::os::unix::fs::symlink(&relative, &tmp)
            .map_err(|e| Error::env(format!("cannot make `{}`: {e}", tmp.display())))?;
        fs_err::rename(&tmp, &self.path)?;
        Ok(())
    }

    /// Makes the staging folder the output: synced, renamed to the next generation, and the
    /// output's symlink switched to it. Generations but the new and the previous one go. The new
    /// generation links `traces` to the store's traces.
    pub fn commit(mut self) -> Result<()> {
        link_traces(&self.store, &self.staging)?;
        sync_tree(&self.staging)?;
        let generations = self.generations();
        let next = generations.last().map_or(1, |(n, _)| n + 1);
        let generation = self.store.join(format!("{GEN}{next}"));
        fs_err::rename(&self.staging, &generation)?;
        self.point_at(&generation)?;
        self.committed = true;
        let previous = generations.last().map(|(n, _)| *n);
        for (n, dir) in generations {
            if Some(n) != previous {
                let _ = fs_err::remove_dir_all(dir);
            }
        }
        Ok(())
    }

    /// The generations in the store, oldest first.
    fn generations(&self) -> Vec<(u64, PathBuf)> {
        let mut out: Vec<(u64, PathBuf)> = std::fs::read_dir(&self.store)
            .into_iter()
            .flatten()
            .flatten()
            .filter_map(|e| {
                let n = e
                    .file_name()
                    .to_string_lossy()
                    .strip_prefix(GEN)?
                    .parse()
                    .ok()?;
                Some((n, e.path()))
            })
            .collect();
        out.sort();
        out
    }
}

impl Drop for Output {
    fn drop(&mut self) {
        if !self.committed && !self.staging.as_os_str().is_empty() {
            let _ = fs_err::remove_dir_all(&self.staging);
        }
    }
}

/// Flushes every file of a folder to the disk.
fn sync_tree(dir: &Path) -> Result<()> {
    for entry in walkdir::WalkDir::new(dir).into_iter().flatten() {
        if entry.file_type().is_file() {
            fs_err::File::open(entry.path())?.sync_all().map_err(|e| {
                Error::env(format!("cannot write `{}`: {e}", entry.path().display()))
            })?;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    /// A state of the previous layout still gives its last build, with no settings recorded:
    /// `r2e status` says each stage has no record, and nothing fails.
    #[test]
    fn a_state_of_the_previous_layout_reads_without_settings() {
        let dir = tempfile::tempdir().unwrap();
        let old = StateV3 {
            fingerprint: Hash::of_bytes(b"fp"),
            summary_json: "{}".into(),
            outputs: vec![("functions.jsonl".into(), Hash::of_bytes(b"f"), 1, 2)],
            repos: vec![("r".into(), "tree".into())],
            settings: Hash::of_bytes(b"s"),
            stage_settings: BTreeMap::from([(
                "generate".into(),
                BTreeMap::from([("budget".into(), "1500".into())]),
            )]),
        };
        std::fs::create_dir_all(dir.path().join(".r2e")).unwrap();
        std::fs::write(
            state_path(dir.path()),
            entry::seal(
                STATE_SCOPE_V3,
                Hash::of_bytes(STATE_SCOPE_V3.as_bytes()),
                &old,
            ),
        )
        .unwrap();
        let state = read_state(dir.path()).expect("the old state reads");
        assert_eq!(state.fingerprint, old.fingerprint);
        assert_eq!(state.repos, old.repos);
        assert!(state.keyed.is_empty() && state.keyed_settings().is_empty());

        // This layout's state reads back whole.
        let keyed = BTreeMap::from([(
            "generate".to_owned(),
            serde_json::json!({"explorer": {"budget": 1500}}),
        )]);
        let new = State {
            keyed: keyed_text(&keyed),
            ..state
        };
        write_state(dir.path(), &new).unwrap();
        assert_eq!(read_state(dir.path()).unwrap().keyed_settings(), keyed);
        // A state of neither layout is none.
        std::fs::write(state_path(dir.path()), b"r2e-ent1 something else").unwrap();
        assert!(read_state(dir.path()).is_none());
    }
}
