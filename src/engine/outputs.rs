//! The build's outputs: JSON-lines files streamed to a temporary file and switched in only when
//! their content changed, the `functions.jsonl` line of a function, and the sealed build state
//! (`<output>/.r2e/state`) that the no-op check reads.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use crate::cache::entry;
use crate::db::{self, Database, FunctionRow, ItemId, Settings, SourceFile};
use crate::error::{Error, Result};
use crate::fsutil::write_if_changed;
use crate::hash::Hash;
use crate::python::resolve::Item;
use crate::records::{FunctionRecord, SliceRecord, to_line};

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
}

/// The scope and key the state is sealed under.
const STATE_SCOPE: &str = "r2e-state-2";

fn state_key() -> Hash {
    Hash::of_bytes(STATE_SCOPE.as_bytes())
}

fn state_path(output: &Path) -> PathBuf {
    output.join(".r2e").join("state")
}

/// The state of the last build of an output, when there is one that verifies.
pub fn read_state(output: &Path) -> Option<State> {
    let bytes = std::fs::read(state_path(output)).ok()?;
    entry::unseal(STATE_SCOPE, state_key(), &bytes).ok()
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

/// Forgets the state, so that the next build runs (something may succeed next time).
pub fn clear_state(output: &Path) {
    let _ = std::fs::remove_file(state_path(output));
}

/// Size and modification time (ns) of a file.
pub fn stat(path: &Path) -> Option<(u64, i64)> {
    use std::os::unix::fs::MetadataExt;
    let m = std::fs::metadata(path).ok()?;
    Some((m.len(), m.mtime() * 1_000_000_000 + m.mtime_nsec()))
}

/// The line of `functions.jsonl` for one function (with its slice when `with_slice` and it is a
/// candidate).
pub fn function_line(
    db: &Database,
    file: SourceFile,
    row: &FunctionRow,
    settings: Settings,
    with_slice: bool,
) -> Vec<u8> {
    let repo = file.repo(db);
    let slice = (with_slice && row.excluded_by.is_none()).then(|| {
        let item = ItemId::new(db, repo, Item::Def(file.ix(db), row.def));
        let slice = db::slice_of(db, item);
        let ctx = db::context_of(db, item, settings);
        let files = repo.files(db);
        let index = db::module_index(db, repo);
        let mut items: Vec<Item> = slice.items.iter().map(|&(it, _)| it).collect();
        // Files are in path order and definitions in source order: ids come out sorted by path.
        items.sort_unstable();
        let mut functions = Vec::new();
        let mut globals = Vec::new();
        for &it in &items {
            match it {
                Item::Def(f, ix) => functions.push(
                    db::def_ids(db, files[f as usize])[ix as usize]
                        .as_str()
                        .into(),
                ),
                Item::Global(f, ix) => {
                    let name = &db::file_interface(db, files[f as usize]).globals[ix as usize].name;
                    let module = index.module_name(f);
                    globals.push(if module.is_empty() {
                        name.clone()
                    } else {
                        format!("{module}.{name}")
                    });
                }
            }
        }
        globals.sort_unstable();
        globals.dedup();
        SliceRecord {
            size: functions.len() + globals.len(),
            functions,
            globals,
            tokens: ctx.tokens,
            truncated: ctx.truncated,
            in_file: slice.in_file(file.ix(db)),
            unresolved: slice.unresolved.as_slice().into(),
        }
    });
    to_line(&FunctionRecord {
        id: row.id.as_str().into(),
        repo: repo.name(db).as_str().into(),
        path: file.path(db).as_str().into(),
        qualname: row.qualname.as_str().into(),
        kind: row.kind,
        start_line: row.start_line,
        end_line: row.end_line,
        docstring: row.docstring.as_deref().map(Into::into),
        excluded_by: row.excluded_by,
        slice,
    })
}

/// Streams a JSON-lines output to a temporary file, hashing it; on `finish`, replaces the old
/// file only if the content changed, so unchanged outputs keep their bytes and mtime.
pub struct JsonlWriter {
    name: String,
    path: PathBuf,
    tmp: PathBuf,
    out: std::io::BufWriter<fs_err::File>,
    hasher: blake3::Hasher,
}

impl JsonlWriter {
    /// A writer of `root/name`; `name` (relative to the output) is what the state records.
    pub fn create(root: &Path, name: &str) -> Result<JsonlWriter> {
        let path = root.join(name);
        let tmp = path.with_extension(format!("tmp.{}", std::process::id()));
        let file = fs_err::File::create(&tmp)?;
        Ok(JsonlWriter {
            name: name.to_owned(),
            path,
            tmp,
            out: std::io::BufWriter::with_capacity(1 << 20, file),
            hasher: blake3::Hasher::new(),
        })
    }

    pub fn write_line(&mut self, line: &[u8]) -> Result<()> {
        use std::io::Write;
        let fail =
            |e: std::io::Error| Error::env(format!("cannot write `{}`: {e}", self.tmp.display()));
        self.hasher.update(line);
        self.out.write_all(line).map_err(fail)?;
        if !line.ends_with(b"\n") {
            self.hasher.update(b"\n");
            self.out.write_all(b"\n").map_err(fail)?;
        }
        Ok(())
    }

    /// Writes one record as a line.
    pub fn write<T: Serialize>(&mut self, record: &T) -> Result<()> {
        self.write_line(&to_line(record))
    }

    /// Returns the file as recorded in the build state.
    pub fn finish(self, previous: &[Recorded]) -> Result<Recorded> {
        let name = self.name.clone();
        let hash = Hash(*self.hasher.finalize().as_bytes());
        let fail = |e: String| Error::env(format!("cannot write `{}`: {e}", self.tmp.display()));
        let file = self.out.into_inner().map_err(|e| fail(e.to_string()))?;
        let unchanged = previous.iter().any(|(n, h, size, mtime)| {
            n == &name && *h == hash && stat(&self.path) == Some((*size, *mtime))
        });
        if unchanged {
            drop(file);
            fs_err::remove_file(&self.tmp)?;
        } else {
            file.sync_data().map_err(|e| fail(e.to_string()))?;
            drop(file);
            fs_err::rename(&self.tmp, &self.path)?;
        }
        let (size, mtime) = stat(&self.path)
            .ok_or_else(|| Error::env(format!("cannot stat `{}`", self.path.display())))?;
        Ok((name, hash, size, mtime))
    }
}
