//! The project layer: the repository itself, built as a wheel by its own build backend (PEP 517,
//! `uv build` or `pip wheel`) and installed with `--target` into a folder of its own, which runs
//! put on `sys.path` after the environment's packages. The dependency environment stays shared
//! and untouched: the layer is the only per-project part, and costs one build and one install.
//!
//! What the layer gives a run is what users see of an installed project: its distribution
//! metadata (`importlib.metadata.version`), its entry points, and the files its build makes
//! (built extensions, generated modules). Its pure-Python modules are stripped out: every `.py`
//! file whose path ends a Python file of the checkout comes from the checkout at run time
//! (`r2e_equiv.use_project_layer` adds the layer's folder of each package behind the checkout's,
//! for what only the build made). So the layer is keyed on what the build reads
//! ([`ProjectKey`]), a body edit rebuilds nothing and re-validates only what it touches, and a
//! candidate's process never finds the original function's source through the layer.
//!
//! A project whose build fails (a broken backend, a missing compiler) falls back to its source on
//! `sys.path` plus generated metadata (from `PKG-INFO`, `[project]` or `setup.cfg`'s
//! `[metadata]`): the layer's outcome is `partial`, with the reason. A failure that may pass (the
//! index, a timeout, a full disk) is never stored.

use r2e_core::records::ProjectOutcome;
use std::collections::HashSet;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::Env;
use super::archive;
use super::build::{Building, EnvBuilder, Step, Stop, transient};
use r2e_core::cache::remote::{Event, Remote};
use r2e_core::cache::{ActionKey, Bucket, entry, write_atomic};
use r2e_core::error::{Error, Result};
use r2e_core::hash::Hash;
use r2e_core::keys::ProjectKey;
use r2e_exec::sandbox::Outcome;

/// The layer's format (`ProjectKey::format`).
pub const FORMAT: u32 = 1;

/// The record a layer's folder holds, sealed with its key.
const RECORD: &str = "record";

/// What a layer's archive holds, and its files that may name the folders it was built in.
const PROJECT_PARTS: [&str; 2] = ["site", RECORD];
const PROJECT_REWRITE: [&str; 1] = ["site/bin"];

/// A project layer, as sealed in its folder in the cache.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct ProjectRecord {
    pub key: String,
    pub outcome: ProjectOutcome,
    /// The distribution's name and version, as its metadata in the layer says.
    pub name: Option<String>,
    pub version: Option<String>,
    /// Why the project is only `partial`.
    pub reason: Option<String>,
    /// How many of the wheel's modules were left to the checkout.
    pub overlaid: u32,
    /// The build's log, with this machine's paths replaced by names.
    pub log: String,
}

/// A project layer ready for use.
#[derive(Clone, Debug)]
pub struct ProjectLayer {
    pub record: ProjectRecord,
    /// The folder runs put on `sys.path`.
    pub site: PathBuf,
    /// Whether it came from the cache.
    pub cached: bool,
}

/// Files at the repository's root that a build reads.
const ROOT_FILES: &[&str] = &[
    "pyproject.toml",
    "setup.py",
    "setup.cfg",
    "PKG-INFO",
    "MANIFEST.in",
    "hatch_build.py",
    "build.py",
    "meson.build",
    "CMakeLists.txt",
    "Cargo.toml",
    "Cargo.lock",
];

/// Extensions of the sources a build compiles, wherever they are.
const EXTENSION_SOURCES: &[&str] = &[
    "c", "cc", "cpp", "cxx", "h", "hh", "hpp", "pyx", "pxd", "pxi", "rs", "f", "f90", "i",
];

/// The folder a layer's site lives in, for a key.
pub fn layer_site(cache: &r2e_core::cache::Cache, key: &str) -> PathBuf {
    cache.path(Bucket::Projects).join(key).join("site")
}

/// Whether the checkout at `root` is a project a build backend can build (a `setup.py`, or a
/// `pyproject.toml` with `[build-system]` or `[project]`), and the files its build reads, each
/// with its content hash, sorted. Folders in `skip` (version control, caches, local
/// environments) and symlinks are never read.
pub fn build_inputs(root: &Path, skip: &[String]) -> Option<Vec<(String, Hash)>> {
    let pyproject = regular_file(&root.join("pyproject.toml"))
        .and_then(|text| String::from_utf8_lossy(&text).parse::<toml::Table>().ok());
    let buildable = regular_file(&root.join("setup.py")).is_some()
        || pyproject
            .as_ref()
            .is_some_and(|doc| doc.contains_key("build-system") || doc.contains_key("project"));
    if !buildable {
        return None;
    }
    // An in-tree backend (`[build-system] backend-path`): all of its folders' files.
    let backend: Vec<String> = pyproject
        .as_ref()
        .and_then(|doc| {
            doc.get("build-system")?
                .get("backend-path")?
                .as_array()
                .cloned()
        })
        .unwrap_or_default()
        .iter()
        .filter_map(|v| v.as_str())
        .map(|p| p.trim_matches('/').trim_start_matches("./").to_owned())
        .collect();
    let mut out = Vec::new();
    for (rel, path) in tree_files(root, skip) {
        let ext = rel.rsplit_once('.').map(|(_, e)| e).unwrap_or_default();
        let wanted = ROOT_FILES.contains(&rel.as_str())
            || EXTENSION_SOURCES.contains(&ext)
            || backend
                .iter()
                .any(|b| b == "." && !rel.contains('/') || rel.starts_with(&format!("{b}/")));
        if wanted && let Some(bytes) = regular_file(&path) {
            out.push((rel, Hash::of_bytes(&bytes)));
        }
    }
    out.sort();
    Some(out)
}

/// The regular files under `root` (relative `/`-separated path, full path), sorted: never a
/// symlink, nor anything under `.git` or the folders in `skip`.
pub fn tree_files(root: &Path, skip: &[String]) -> Vec<(String, PathBuf)> {
    let skip: HashSet<&str> = skip.iter().map(String::as_str).collect();
    let mut out = Vec::new();
    let walk = walkdir::WalkDir::new(root)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| {
            let rel = e.path().strip_prefix(root).unwrap_or(e.path());
            let rel = rel.to_string_lossy();
            e.depth() == 0
                || !(e.file_name() == ".git"
                    || e.file_name() == "__pycache__"
                    || skip.contains(rel.as_ref()))
        });
    for e in walk.flatten() {
        if !e.file_type().is_file() {
            continue;
        }
        if let Ok(rel) = e.path().strip_prefix(root) {
            let rel = rel.to_string_lossy().replace('\\', "/");
            out.push((rel, e.path().to_path_buf()));
        }
    }
    out
}

/// A regular file's bytes (never through a symlink).
fn regular_file(path: &Path) -> Option<Vec<u8>> {
    let meta = std::fs::symlink_metadata(path).ok()?;
    meta.is_file().then(|| std::fs::read(path).ok()).flatten()
}

impl EnvBuilder<'_> {
    /// The project layer of the repository checked out at `root` (`skip`: its folders that are
    /// not its source), on `env`: from the cache when its sealed record verifies, else built.
    /// `None` when the repository is not a buildable project, or `[env] install_project` is
    /// off. `Err` for a failure that may pass (never stored).
    pub fn project(&self, env: &Env, root: &Path, skip: &[String]) -> Result<Option<ProjectLayer>> {
        if !self.cfg.install_project || env.dir.as_os_str().is_empty() {
            return Ok(None);
        }
        let Some(inputs) = build_inputs(root, skip) else {
            return Ok(None);
        };
        let key = ProjectKey {
            format: FORMAT,
            env: env.record.key.clone(),
            inputs,
        };
        let hash = key.hash();
        let dir = self.cache.dir(Bucket::Projects)?.join(hash.to_hex());
        let site = dir.join("site");
        if let Ok(bytes) = std::fs::read(dir.join(RECORD)) {
            match entry::unseal::<ProjectRecord>(&Bucket::Projects.folder(), hash, &bytes) {
                Ok(record) if site.is_dir() => {
                    self.cache.note_use(&dir);
                    return Ok(Some(ProjectLayer {
                        record,
                        site,
                        cached: true,
                    }));
                }
                Ok(_) | Err(_) => {
                    eprintln!(
                        "warning: project layer `{}` is damaged; it is rebuilt",
                        dir.display()
                    );
                    fs_err::remove_dir_all(&dir)?;
                }
            }
        }
        let tmp = dir.with_extension(format!("tmp{}", std::process::id()));
        // With a remote store: the layer another host built, unpacked (its paths, and its
        // environment's, rewritten to this host's), or built here and stored for the others.
        let remote = self.cache.remote();
        if let Some(remote) = remote {
            if let Some(layer) = self.fetch_project(remote, hash, &dir, env)? {
                return Ok(Some(layer));
            }
            self.cache.trace(Event::Started, Bucket::Projects, hash);
        }
        let _ = fs_err::remove_dir_all(&tmp);
        fs_err::create_dir_all(tmp.join("scratch"))?;
        let mut b = Building {
            builder: self,
            venv: env.dir.join("venv"),
            python: env.python.clone(),
            tmp,
            log: String::new(),
            readonly: vec![env.dir.clone()],
            label: "<project>",
            caches: super::build::installer_caches(self.cache, Bucket::Projects, hash)?,
        };
        let built = self.build_project(&mut b, root, skip, hash);
        let built = match built {
            Ok(record) => record,
            Err(stop) => {
                let _ = fs_err::remove_dir_all(&b.tmp);
                if let Stop::Error(_) = stop {
                    // The caches stay only for another try of a failure that may pass.
                    b.drop_caches();
                }
                return Err(match stop {
                    Stop::Error(e) => e,
                    Stop::Transient(why) => Error::env(why),
                });
            }
        };
        write_atomic(
            &b.tmp.join(RECORD),
            &entry::seal(&Bucket::Projects.folder(), hash, &built),
        )?;
        for gone in ["scratch", "src", "dist"] {
            let _ = fs_err::remove_dir_all(b.tmp.join(gone));
        }
        b.drop_caches();
        if dir.exists() {
            // Another build finished it first; use theirs.
            let _ = fs_err::remove_dir_all(&b.tmp);
        } else {
            fs_err::rename(&b.tmp, &dir)?;
            if let Some(remote) = remote {
                archive::upload(
                    self.cache,
                    remote,
                    Bucket::Projects,
                    hash,
                    &dir,
                    &PROJECT_PARTS,
                    &[b.tmp.clone(), dir.clone(), env.dir.clone()],
                );
            }
        }
        self.cache.note_use(&dir);
        Ok(Some(ProjectLayer {
            record: built,
            site,
            cached: false,
        }))
    }

    /// The project layer of `hash` unpacked from the remote store's archive (a hit, traced), or
    /// `None` (none there, or a damaged one, named on stderr: then built here).
    fn fetch_project(
        &self,
        remote: &Remote,
        hash: Hash,
        dir: &Path,
        env: &Env,
    ) -> Result<Option<ProjectLayer>> {
        let record_ok = |tmp: &Path| -> std::result::Result<(), String> {
            let bytes = std::fs::read(tmp.join(RECORD)).map_err(|e| format!("its record: {e}"))?;
            entry::unseal::<ProjectRecord>(&Bucket::Projects.folder(), hash, &bytes)
                .map(drop)
                .map_err(|why| format!("its record: {why}"))
        };
        let now_at = [dir.to_path_buf(), dir.to_path_buf(), env.dir.clone()];
        match archive::fetch(
            remote,
            Bucket::Projects,
            hash,
            dir,
            &now_at,
            &PROJECT_REWRITE,
            // A project layer's links stay inside it.
            &[],
            &record_ok,
        ) {
            archive::Fetched::Unpacked => {
                let record = std::fs::read(dir.join(RECORD)).ok().and_then(|b| {
                    entry::unseal::<ProjectRecord>(&Bucket::Projects.folder(), hash, &b).ok()
                });
                let site = dir.join("site");
                match record {
                    Some(record) if site.is_dir() => {
                        self.cache.trace(Event::Hit, Bucket::Projects, hash);
                        self.cache.note_use(dir);
                        Ok(Some(ProjectLayer {
                            record,
                            site,
                            cached: true,
                        }))
                    }
                    _ => Ok(None),
                }
            }
            archive::Fetched::Miss => Ok(None),
            archive::Fetched::Damaged => {
                self.cache.trace(Event::Damaged, Bucket::Projects, hash);
                Ok(None)
            }
        }
    }

    /// The steps: copy the source (a build may write into it), build the wheel, install it
    /// into `site`, strip what the checkout has; or the fallback.
    fn build_project(
        &self,
        b: &mut Building,
        root: &Path,
        skip: &[String],
        hash: Hash,
    ) -> std::result::Result<ProjectRecord, Stop> {
        let src = b.tmp.join("src");
        let mut sources = Vec::new();
        for (rel, path) in tree_files(root, skip) {
            let to = src.join(&rel);
            if let Some(parent) = to.parent() {
                fs_err::create_dir_all(parent).map_err(Error::from)?;
            }
            fs_err::copy(&path, &to).map_err(Error::from)?;
            if rel.ends_with(".py") {
                sources.push(rel);
            }
        }
        let dist = b.tmp.join("dist");
        let site = b.tmp.join("site");
        fs_err::create_dir_all(&dist).map_err(Error::from)?;
        let wheel = b.build_wheel(&src, &dist);
        let failed = match wheel {
            Ok(wheel) => {
                let installed = b.install_wheel(&wheel, &site)?;
                if installed.success() {
                    None
                } else {
                    self.stop_if_transient(b, &installed, "installing the project's wheel")?;
                    Some(format!(
                        "its wheel did not install: {}",
                        last_line(&installed)
                    ))
                }
            }
            Err(BuildFailure::Step(out)) => {
                self.stop_if_transient(b, &out, "building the project's wheel")?;
                Some(format!("its wheel could not be built: {}", last_line(&out)))
            }
            Err(BuildFailure::Stopped(stop)) => return Err(stop),
            Err(BuildFailure::NoWheel) => Some("its build made no wheel".into()),
        };
        if r2e_core::fsutil::disk_full(&b.tmp) {
            return Err(Stop::Transient(format!(
                "the project could not be built: the disk is full ({} MiB free where it is built)",
                r2e_core::fsutil::free_bytes(&b.tmp).unwrap_or(0) >> 20
            )));
        }
        let (outcome, reason, overlaid) = match failed {
            None => (
                ProjectOutcome::Installed,
                None,
                strip_checkout_modules(&site, &sources).map_err(Error::from)?,
            ),
            Some(why) => {
                let _ = fs_err::remove_dir_all(&site);
                fs_err::create_dir_all(&site).map_err(Error::from)?;
                let why = match fallback_metadata(&src, &site).map_err(Error::from)? {
                    Some(name) => format!(
                        "{why}; its source runs from the checkout, with metadata generated for `{name}`"
                    ),
                    None => format!(
                        "{why}; its source runs from the checkout, without metadata (no name is declared)"
                    ),
                };
                b.log.push_str(&format!("partial: {why}\n"));
                (ProjectOutcome::Partial, Some(why), 0)
            }
        };
        let (name, version) = installed_metadata(&site);
        let mut log = b.redacted_log();
        log = log.replace(&root.to_string_lossy().into_owned(), "<repo>");
        Ok(ProjectRecord {
            key: hash.to_hex(),
            outcome,
            name,
            version,
            reason,
            overlaid,
            log,
        })
    }

    /// Stops the build when a failed step failed for a reason that may pass.
    fn stop_if_transient(
        &self,
        b: &mut Building,
        out: &Outcome,
        what: &str,
    ) -> std::result::Result<(), Stop> {
        if let Some(cause) = transient(out) {
            return Err(Stop::Transient(format!("{what} failed: {cause}")));
        }
        if b.index_down()? {
            return Err(Stop::Transient(format!(
                "{what} failed: the package index cannot be reached"
            )));
        }
        Ok(())
    }
}

/// Why no wheel came out of a build.
enum BuildFailure {
    /// The step failed, with its outcome.
    Step(Outcome),
    /// It succeeded but left no wheel.
    NoWheel,
    Stopped(Stop),
}

impl From<Error> for BuildFailure {
    fn from(e: Error) -> Self {
        BuildFailure::Stopped(Stop::Error(e))
    }
}

impl Building<'_> {
    /// Builds the project in `src` as a wheel into `dist`, with its own backend in an isolated
    /// build environment: the wheel's path.
    fn build_wheel(
        &mut self,
        src: &Path,
        dist: &Path,
    ) -> std::result::Result<PathBuf, BuildFailure> {
        // The build backend is resolved into an isolated environment: as the index was at
        // `[env] exclude_newer`, as the environment's packages were.
        let pin = self.builder.exclude_newer_args();
        let out = self.step(Step::BuildWheel { pin, src, dist })?;
        if !out.success() {
            return Err(BuildFailure::Step(out));
        }
        let mut wheels: Vec<PathBuf> = std::fs::read_dir(dist)
            .map_err(Error::from)?
            .flatten()
            .map(|e| e.path())
            .filter(|p| p.extension().is_some_and(|e| e == "whl"))
            .collect();
        wheels.sort();
        wheels.pop().ok_or(BuildFailure::NoWheel)
    }

    /// Installs the wheel, without its dependencies (the environment has them), into `site`.
    fn install_wheel(&mut self, wheel: &Path, site: &Path) -> Result<Outcome> {
        self.step(Step::InstallWheel { wheel, site })
    }
}

/// What a failed step said of its failure: the last Python exception it printed (a backend's
/// error), else its last line.
fn last_line(out: &Outcome) -> String {
    let text =
        String::from_utf8_lossy(&out.stderr).into_owned() + &String::from_utf8_lossy(&out.stdout);
    let lines: Vec<&str> = text
        .lines()
        .map(str::trim)
        .filter(|l| !l.is_empty())
        .collect();
    let exception = lines.iter().rev().find(|l| {
        l.split_once(": ").is_some_and(|(name, _)| {
            (name.ends_with("Error") || name.ends_with("Exception"))
                && name
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || c == '.' || c == '_')
        })
    });
    let line = exception.or(lines.last()).copied().unwrap_or("it failed");
    line.chars().take(300).collect()
}

/// Removes from `site` every module the checkout has (a `.py` file whose path ends one of
/// `sources`, the checkout's Python files), and the bytecode of any: they come from the
/// checkout at run time. Returns how many it removed.
fn strip_checkout_modules(site: &Path, sources: &[String]) -> std::io::Result<u32> {
    let mut suffixes: HashSet<&str> = HashSet::new();
    for s in sources {
        suffixes.insert(s);
        for (i, _) in s.match_indices('/') {
            suffixes.insert(&s[i + 1..]);
        }
    }
    let mut removed = 0;
    for e in walkdir::WalkDir::new(site)
        .follow_links(false)
        .into_iter()
        .flatten()
    {
        let Ok(rel) = e.path().strip_prefix(site) else {
            continue;
        };
        let rel = rel.to_string_lossy().replace('\\', "/");
        if rel.split('/').next().is_some_and(|top| {
            top.ends_with(".dist-info") || top.ends_with(".data") || top == "bin"
        }) {
            continue;
        }
        if e.file_type().is_dir() && e.file_name() == "__pycache__" {
            std::fs::remove_dir_all(e.path())?;
            continue;
        }
        if e.file_type().is_file() && rel.ends_with(".py") && suffixes.contains(rel.as_str()) {
            std::fs::remove_file(e.path())?;
            removed += 1;
        }
    }
    Ok(removed)
}

/// The name and version of the distribution installed in `site` (its `*.dist-info/METADATA`).
fn installed_metadata(site: &Path) -> (Option<String>, Option<String>) {
    let Ok(entries) = std::fs::read_dir(site) else {
        return (None, None);
    };
    let mut infos: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "dist-info"))
        .collect();
    infos.sort();
    let Some(text) = infos
        .first()
        .and_then(|d| std::fs::read_to_string(d.join("METADATA")).ok())
    else {
        return (None, None);
    };
    (
        metadata_field(&text, "Name"),
        metadata_field(&text, "Version"),
    )
}

/// A field of core metadata (`METADATA`, `PKG-INFO`): its first value among the headers.
fn metadata_field(text: &str, name: &str) -> Option<String> {
    text.lines()
        .take_while(|l| !l.is_empty())
        .find_map(|l| l.strip_prefix(name)?.strip_prefix(':'))
        .map(|v| v.trim().to_owned())
}

/// Metadata for a project that could not be built, from what it declares: `PKG-INFO` (an
/// sdist's), else `[project]` of `pyproject.toml` (with its scripts and entry points), else
/// `[metadata]` of `setup.cfg`. Writes `site/NAME-VERSION.dist-info`; returns the name, or
/// `None` when nothing names the project.
fn fallback_metadata(src: &Path, site: &Path) -> std::io::Result<Option<String>> {
    let mut name = None;
    let mut version = None;
    let mut metadata = None;
    let mut entry_points = String::new();
    if let Some(text) = regular_file(&src.join("PKG-INFO")) {
        let text = String::from_utf8_lossy(&text).into_owned();
        let (n, v) = (
            metadata_field(&text, "Name"),
            metadata_field(&text, "Version"),
        );
        if n.is_some() {
            (name, version, metadata) = (n, v, Some(text));
        }
    }
    if name.is_none()
        && let Some(doc) = regular_file(&src.join("pyproject.toml"))
            .and_then(|t| String::from_utf8_lossy(&t).parse::<toml::Table>().ok())
        && let Some(project) = doc.get("project").and_then(|p| p.as_table())
    {
        name = project
            .get("name")
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        version = project
            .get("version")
            .and_then(|v| v.as_str())
            .map(str::to_owned);
        let mut groups: Vec<(String, &toml::Table)> = Vec::new();
        if let Some(t) = project.get("scripts").and_then(|v| v.as_table()) {
            groups.push(("console_scripts".into(), t));
        }
        if let Some(t) = project.get("gui-scripts").and_then(|v| v.as_table()) {
            groups.push(("gui_scripts".into(), t));
        }
        if let Some(eps) = project.get("entry-points").and_then(|v| v.as_table()) {
            for (group, t) in eps {
                if let Some(t) = t.as_table() {
                    groups.push((group.clone(), t));
                }
            }
        }
        for (group, table) in groups {
            entry_points.push_str(&format!("[{group}]\n"));
            for (k, v) in table {
                if let Some(v) = v.as_str() {
                    entry_points.push_str(&format!("{k} = {v}\n"));
                }
            }
            entry_points.push('\n');
        }
    }
    if name.is_none()
        && let Some(text) = regular_file(&src.join("setup.cfg"))
    {
        let text = String::from_utf8_lossy(&text);
        for line in super::declared::section_lines(&text, "[metadata]") {
            if let Some((k, v)) = line.trim().split_once('=') {
                match k.trim() {
                    "name" => name = Some(v.trim().to_owned()),
                    "version" if !v.contains(':') => version = Some(v.trim().to_owned()),
                    _ => {}
                }
            }
        }
    }
    let Some(name) = name.filter(|n| {
        !n.is_empty()
            && n.chars()
                .all(|c| c.is_ascii_alphanumeric() || "._-".contains(c))
    }) else {
        return Ok(None);
    };
    // A dynamic version is not known without the build: `0` stands for it.
    let version = version
        .filter(|v| {
            !v.is_empty()
                && v.chars()
                    .all(|c| c.is_ascii_alphanumeric() || ".+-!_".contains(c))
        })
        .unwrap_or_else(|| "0".into());
    let metadata = metadata
        .unwrap_or_else(|| format!("Metadata-Version: 2.1\nName: {name}\nVersion: {version}\n"));
    let dist = format!(
        "{}-{}.dist-info",
        name.replace(['-', '.'], "_"),
        version.replace('-', "_")
    );
    let info = site.join(dist);
    std::fs::create_dir_all(&info)?;
    std::fs::write(info.join("METADATA"), metadata)?;
    std::fs::write(info.join("INSTALLER"), "r2e\n")?;
    if !entry_points.is_empty() {
        std::fs::write(info.join("entry_points.txt"), entry_points)?;
    }
    std::fs::write(info.join("RECORD"), "")?;
    Ok(Some(name))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn build_inputs_are_the_declarations_and_extension_sources_never_the_modules() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path();
        let write = |rel: &str, text: &str| {
            let p = root.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, text).unwrap();
        };
        write("pkg/mod.py", "def f(): pass\n");
        write("README.md", "hello\n");
        // Only declarations: not a project yet (no [build-system], no [project], no setup.py).
        write("pyproject.toml", "[tool.black]\nline-length = 100\n");
        assert_eq!(build_inputs(root, &[]), None);
        write("pyproject.toml", "[project]\nname = \"pkg\"\n");
        write("pkg/_speed.c", "int x;\n");
        write(".venv/lib/x.c", "int y;\n");
        let inputs = build_inputs(root, &[".venv".into()]).unwrap();
        let paths: Vec<&str> = inputs.iter().map(|(p, _)| p.as_str()).collect();
        assert_eq!(paths, ["pkg/_speed.c", "pyproject.toml"]);
        // A body edit of a module changes nothing; an extension source does.
        write("pkg/mod.py", "def f(): return 1\n");
        assert_eq!(build_inputs(root, &[".venv".into()]).unwrap(), inputs);
        write("pkg/_speed.c", "int x = 1;\n");
        assert_ne!(build_inputs(root, &[".venv".into()]).unwrap(), inputs);
    }

    #[test]
    fn stripping_leaves_what_only_the_build_made() {
        let dir = tempfile::tempdir().unwrap();
        let site = dir.path();
        for rel in [
            "pkg/__init__.py",
            "pkg/core.py",
            "pkg/_version.py",
            "pkg/_speed.so",
            "pkg/__pycache__/core.cpython-311.pyc",
            "pkg-1.0.dist-info/METADATA",
        ] {
            let p = site.join(rel);
            std::fs::create_dir_all(p.parent().unwrap()).unwrap();
            std::fs::write(p, "x").unwrap();
        }
        let sources = vec![
            "src/pkg/__init__.py".to_owned(),
            "src/pkg/core.py".to_owned(),
        ];
        assert_eq!(strip_checkout_modules(site, &sources).unwrap(), 2);
        assert!(!site.join("pkg/core.py").exists());
        assert!(!site.join("pkg/__pycache__").exists());
        assert!(site.join("pkg/_version.py").exists() && site.join("pkg/_speed.so").exists());
        assert!(site.join("pkg-1.0.dist-info/METADATA").exists());
    }

    #[test]
    fn fallback_metadata_comes_from_what_the_project_declares() {
        let dir = tempfile::tempdir().unwrap();
        let (src, site) = (dir.path().join("src"), dir.path().join("site"));
        std::fs::create_dir_all(&src).unwrap();
        std::fs::write(
            src.join("pyproject.toml"),
            "[project]\nname = \"my-pkg\"\nversion = \"1.2\"\n[project.scripts]\nmy = \"my_pkg:main\"\n",
        )
        .unwrap();
        assert_eq!(
            fallback_metadata(&src, &site).unwrap().as_deref(),
            Some("my-pkg")
        );
        assert_eq!(
            installed_metadata(&site),
            (Some("my-pkg".into()), Some("1.2".into()))
        );
        let eps =
            std::fs::read_to_string(site.join("my_pkg-1.2.dist-info/entry_points.txt")).unwrap();
        assert_eq!(eps, "[console_scripts]\nmy = my_pkg:main\n\n");
    }
}
