//! `r2e export DIR` and `r2e import DIR`: a built dataset shipped with its environments as
//! Docker images, so that anyone can check candidates against it on another machine.
//!
//! **Environment images.** Each repository of the dataset gets an image layered on the base
//! image (`sandbox::docker`): its environment at `/r2e/env` (the dependency layer), its project
//! layer at `/r2e/project`, and its files at the dataset's commit at `/r2e/repo`, one layer
//! each. Its tag holds the environment key; its labels hold the lock hash, the repository and
//! its commit. A job in it mounts nothing of the machine but its scratch folder
//! (`sandbox::ImageRun`).
//!
//! **The export folder.** `export.json` ([`ExportManifest`]: each image's tag, ID, archive
//! with its blake3, and sizes); `images/REPO.tar` (`docker save`, base layers included);
//! `repos/REPO/` (the repository's files at its commit); `out/` (the dataset, whose instances
//! name their image, `envs.jsonl`, whose lines name it, and `manifest.json`); and
//! `pipeline.toml`, which names those repositories and the docker backend. Nothing in it names a
//! path of the building machine.
//!
//! **Import.** `r2e import DIR` checks each archive against its blake3, loads it, and checks
//! that the daemon gives the image the ID the export recorded. Then `r2e check -p
//! DIR/pipeline.toml` checks candidates through the one check path, in the images.

use r2e_core::records::OutputFile;
use std::path::{Path, PathBuf};
use std::time::Instant;

use serde::{Deserialize, Serialize};

use r2e_core::config::{Backend, Config, RepoConfig, RepoSource};
use r2e_core::error::{Error, Result};
use r2e_core::hash::Hash;
use r2e_core::records::{EnvLine, Instance, read_built, read_jsonl, read_manifest, to_line};
use r2e_exec::image::{IMAGE_ENV, IMAGE_PROJECT, IMAGE_REPO};
use r2e_exec::sandbox::docker::{self, ChunkWriter};
use r2e_pipeline::bench::Bench;
use r2e_pipeline::session::Session;
use r2e_pipeline::stages::environment::project::tree_files;

/// The layout of an environment image (part of its tag): what it holds, where, and its labels.
const ENV_IMAGE_FORMAT: u32 = 1;
/// The export manifest's format tag.
pub const EXPORT_FORMAT: &str = "r2e-export/1";

/// `export.json`.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportManifest {
    pub format: String,
    /// The dataset's version (`manifest.json`'s).
    pub dataset_version: String,
    /// The base image the environment images are layered on.
    pub base_image: String,
    pub images: Vec<ExportedImage>,
}

/// One environment image of an export.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ExportedImage {
    pub tag: String,
    /// The image's ID (the digest of its configuration), which `docker load` gives back.
    pub id: String,
    pub repo: String,
    pub commit: String,
    pub env_key: String,
    pub lock_hash: String,
    /// The `docker save` archive, relative to the export folder, its blake3 and its size.
    pub archive: String,
    pub archive_blake3: String,
    pub archive_bytes: u64,
    pub instances: u32,
    pub sizes: ImageSizes,
}

/// An environment image's size, and its layers' (bytes), and how long it took to build.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ImageSizes {
    pub image: u64,
    pub base: u64,
    /// The environment's layer: the dependencies, shared by every commit of the repository.
    pub env: u64,
    /// The project layer and the repository's files: what each commit adds.
    pub project: u64,
    pub repo: u64,
    /// How long its build took; `None` when the daemon had it already.
    pub build_seconds: Option<f64>,
}

/// A repository name as a file name.
fn file_name(repo: &str) -> String {
    repo.chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || "-_.".contains(c) {
                c
            } else {
                '_'
            }
        })
        .collect::<String>()
        .trim_start_matches('.')
        .to_owned()
}

/// What an export holds besides the images and the dataset.
#[derive(Clone, Copy, Debug, PartialEq, Eq, clap::ValueEnum)]
pub enum Format {
    /// The dataset and a `pipeline.toml` that checks candidates in the images.
    R2e,
    /// Also one Harbor task folder per instance and per bug-fix task (`tasks/`) and
    /// `registry.json` (`harbor.rs`).
    Harbor,
}

/// Writes the export of `cfg`'s built dataset into `dir` (which must not exist, or be empty),
/// in `format`; a Harbor export's task images pushed to `registry` (`HOST[:PORT]/PREFIX`) when
/// one is given. Nothing is left in `dir` unless all of it was written.
pub fn export(
    cfg: &Config,
    dir: &Path,
    format: Format,
    registry: Option<&str>,
) -> Result<ExportManifest> {
    if dir.exists()
        && std::fs::read_dir(dir)
            .map(|mut d| d.next().is_some())
            .unwrap_or(true)
    {
        return Err(Error::input(format!(
            "`{}` is not empty: an export is written into a new folder",
            dir.display()
        )));
    }
    let tmp = dir.with_extension(format!("part{}", std::process::id()));
    let _ = fs_err::remove_dir_all(&tmp);
    let written = write_into(cfg, &tmp, format, registry).and_then(|exported| {
        if dir.exists() {
            fs_err::remove_dir(dir)?;
        }
        fs_err::rename(&tmp, dir)?;
        Ok(exported)
    });
    if written.is_err() {
        let _ = fs_err::remove_dir_all(&tmp);
    }
    written
}

/// The export, written into `tmp`.
fn write_into(
    cfg: &Config,
    tmp: &Path,
    format: Format,
    registry: Option<&str>,
) -> Result<ExportManifest> {
    let output = r2e_pipeline::engine::outputs::resolve(&cfg.output);
    let instances: &[Instance] = &read_built(&output.join(OutputFile::Dataset.name()))?;
    let envs: &[EnvLine] = &read_jsonl(&output.join(OutputFile::Envs.name()))?.unwrap_or_default();
    let session = Session::open(cfg)?;
    let manifest_path = output.join(OutputFile::Manifest.name());
    let manifest = read_manifest(&manifest_path)?;
    let docker = docker::connect()?;
    let local = r2e_exec::sandbox::local::LocalSandbox::new(false);
    let tools = session.cache.dir(r2e_core::cache::Bucket::Tools)?;
    let ((base, _), _) = r2e_exec::image::base_in(cfg, &tools, &local, None)?;
    let (_, base_size) = docker::image_id(&docker, &base)?;
    let tmp = tmp.to_path_buf();
    fs_err::create_dir_all(tmp.join("images"))?;
    fs_err::create_dir_all(tmp.join("repos"))?;
    fs_err::create_dir_all(tmp.join("out"))?;

    let exporter = Exporter {
        cfg,
        session,
        docker,
        base,
        base_size,
        tmp,
    };
    let mut repos: Vec<&str> = instances.iter().map(|i| i.repo.as_str()).collect();
    repos.sort();
    repos.dedup();
    let mut images = Vec::new();
    let mut tags = std::collections::BTreeMap::new();
    let mut identities = std::collections::BTreeMap::new();
    for repo in repos {
        let (image, files_identity) = exporter.repo(repo, instances, envs)?;
        identities.insert(repo.to_owned(), files_identity);
        tags.insert(repo.to_owned(), image.tag.clone());
        images.push(image);
    }
    let Exporter {
        base,
        tmp,
        session,
        docker,
        ..
    } = exporter;
    // The dataset, whose instances and environments name their images.
    let mut dataset = Vec::new();
    for instance in instances {
        let mut instance = instance.clone();
        instance.image = tags.get(&instance.repo).cloned();
        dataset.extend(to_line(&instance));
    }
    let mut env_lines = Vec::new();
    for line in envs.iter().filter(|e| tags.contains_key(&e.repo)) {
        let mut line = line.clone();
        line.image = tags.get(&line.repo).cloned();
        line.image_files = identities.get(&line.repo).cloned();
        env_lines.extend(to_line(&line));
    }
    fs_err::write(tmp.join("out/dataset.jsonl"), dataset)?;
    fs_err::write(tmp.join("out/envs.jsonl"), env_lines)?;
    fs_err::copy(&manifest_path, tmp.join("out/manifest.json"))?;
    fs_err::write(tmp.join("pipeline.toml"), pipeline_text(cfg, &tags)?)?;
    let exported = ExportManifest {
        format: EXPORT_FORMAT.into(),
        dataset_version: manifest.version.clone(),
        base_image: base,
        images,
    };
    let json = serde_json::to_vec_pretty(&exported).map_err(Error::internal)?;
    fs_err::write(tmp.join("export.json"), json)?;
    if format == Format::Harbor {
        let services = r2e_exec::services::Services::for_config(cfg, false);
        let bench = Bench::of(&session, cfg, &services, instances.to_vec(), envs)?;
        let push = registry.map(|registry| crate::harbor::Push {
            docker: &docker,
            registry,
        });
        let names = crate::harbor::write_tasks(cfg, &bench, &tmp, &tags, &manifest, push.as_ref())?;
        match registry {
            Some(registry) => eprintln!(
                "wrote {} Harbor task folders under tasks/, their images pushed to `{registry}` and named by digest",
                names.len()
            ),
            None => eprintln!(
                "wrote {} Harbor task folders under tasks/: their images are in this export only, so load them with `r2e import` on the machine that runs the tasks (or export with `--registry HOST/PREFIX` to push them)",
                names.len()
            ),
        }
    }
    Ok(exported)
}

/// What every repository's image is made from, while an export is written into `tmp`.
struct Exporter<'c> {
    cfg: &'c Config,
    session: Session,
    docker: docker::Docker,
    /// The base image's tag, and its size.
    base: String,
    base_size: u64,
    tmp: PathBuf,
}

impl Exporter<'_> {
    /// One repository's environment image, built unless the daemon has it, saved into
    /// `images/`, and its files copied into `repos/`; with the copied files' identity, as a
    /// checkout of the export's pipeline will find it.
    fn repo(
        &self,
        repo: &str,
        instances: &[Instance],
        envs: &[EnvLine],
    ) -> Result<(ExportedImage, String)> {
        let (cfg, session, docker, base, base_size, tmp) = (
            self.cfg,
            &self.session,
            &self.docker,
            &self.base,
            self.base_size,
            &self.tmp,
        );
        let ix = session
            .checkouts
            .iter()
            .position(|c| c.name == repo)
            .ok_or_else(|| {
                Error::input(format!(
                    "the pipeline has no repo `{repo}` any more: run `r2e build`"
                ))
            })?;
        let checkout = &session.checkouts[ix];
        let mine: Vec<&Instance> = instances.iter().filter(|i| i.repo == repo).collect();
        if mine.iter().any(|i| i.commit != checkout.identity) {
            return Err(Error::input(format!(
                "repo `{repo}` changed since the dataset was built: run `r2e build` before exporting"
            )));
        }
        let line = envs.iter().find(|e| e.repo == repo).ok_or_else(|| {
            Error::input(format!("repo `{repo}` has no environment: run `r2e build`"))
        })?;
        let root = checkout.materialize(&session.cache)?;
        let runtime = r2e_pipeline::stages::environment::runtime_of(&session.cache, line, &root)
            .ok_or_else(|| {
                Error::input(format!(
                    "the environment of repo `{repo}` is not built: run `r2e build`"
                ))
            })?;
        let files = tree_files(&root, &checkout.masked);
        let project_key = line.project.as_ref().map(|p| p.key.as_str()).unwrap_or("");
        let snapshot = Hash::of_bytes(
            format!(
                "{ENV_IMAGE_FORMAT}\0{base}\0{}\0{project_key}\0{}",
                line.env_key, checkout.identity
            )
            .as_bytes(),
        );
        let tag = format!(
            "r2e-env:{}-{}",
            &line.env_key[..line.env_key.len().min(16)],
            &snapshot.to_hex()[..16]
        );
        let started = Instant::now();
        let mut build_seconds = None;
        if !docker::has_image(docker, &tag) {
            let dockerfile = dockerfile(
                base,
                line,
                repo,
                &checkout.identity,
                runtime.project.is_some(),
            );
            let env_dir = runtime.env.join("venv");
            let project = runtime.project.clone();
            docker::build_image(docker, &tag, |out| {
                write_context(out, &dockerfile, &env_dir, project.as_deref(), &files)
            })?;
            build_seconds = Some(started.elapsed().as_secs_f64());
        }
        let (id, size) = docker::image_id(docker, &tag)?;
        let layers = docker::layers(docker, &tag)?;
        let layer = |what: &str| -> u64 {
            layers
                .iter()
                .filter(|(made_by, _)| made_by.contains(what))
                .map(|(_, size)| size)
                .sum()
        };
        let sizes = ImageSizes {
            image: size,
            base: base_size,
            env: layer(IMAGE_ENV),
            project: layer(IMAGE_PROJECT),
            repo: layer(IMAGE_REPO),
            build_seconds,
        };
        let name = file_name(repo);
        let archive = format!("images/{name}.tar");
        let (archive_blake3, archive_bytes) =
            docker::save_image(docker, &tag, &tmp.join(&archive))?;
        let repo_dir = tmp.join("repos").join(&name);
        for (rel, path) in &files {
            let to = repo_dir.join(rel);
            fs_err::create_dir_all(to.parent().expect("a file is in a folder"))?;
            fs_err::copy(path, &to)?;
        }
        // The copied folder's identity, as a checkout of the export's pipeline will find it.
        let copied = RepoConfig {
            name: repo.to_owned(),
            source: RepoSource::Path(repo_dir.clone()),
            scope: cfg.repos[ix].scope.clone(),
        };
        let files_identity =
            r2e_pipeline::stages::checkout::checkout(&copied, &session.cache)?.identity;
        eprintln!(
            "{}",
            format_args!(
                "exported `{repo}`: {tag}, {:.1} MB ({:.1} MB of dependencies, {:.2} MB of project and files over the base's {:.1} MB), archive {:.1} MB",
                size as f64 / 1e6,
                sizes.env as f64 / 1e6,
                (sizes.project + sizes.repo) as f64 / 1e6,
                base_size as f64 / 1e6,
                archive_bytes as f64 / 1e6
            )
        );
        let image = ExportedImage {
            tag,
            id,
            repo: repo.to_owned(),
            commit: checkout.identity.clone(),
            env_key: line.env_key.clone(),
            lock_hash: line.lock_hash.clone(),
            archive,
            archive_blake3,
            archive_bytes,
            instances: mine.len() as u32,
            sizes,
        };
        Ok((image, files_identity))
    }
}

/// The Dockerfile of an environment image: one layer for the environment, one for the project
/// layer, one for the repository's files.
fn dockerfile(base: &str, line: &EnvLine, repo: &str, commit: &str, project: bool) -> String {
    let label = |k: &str, v: &str| format!("LABEL {k}={}\n", serde_json::Value::from(v));
    let mut text = format!("FROM {base}\nCOPY env {IMAGE_ENV}\n");
    if project {
        text.push_str(&format!("COPY project {IMAGE_PROJECT}\n"));
    }
    text.push_str(&format!("COPY repo {IMAGE_REPO}\n"));
    text.push_str(&label("r2e.base", base));
    text.push_str(&label("r2e.env_key", &line.env_key));
    text.push_str(&label("r2e.lock", &line.lock_hash));
    text.push_str(&label("r2e.repo", repo));
    text.push_str(&label("r2e.commit", commit));
    text
}

/// The build context: the Dockerfile, the environment's folder, the project layer and the
/// repository's files (symlinks kept as symlinks: a virtual environment's interpreter is one).
fn write_context(
    out: &mut ChunkWriter,
    dockerfile: &str,
    env: &Path,
    project: Option<&Path>,
    files: &[(String, PathBuf)],
) -> std::io::Result<()> {
    let mut tar = tar::Builder::new(out);
    tar.follow_symlinks(false);
    let mut h = tar::Header::new_gnu();
    h.set_size(dockerfile.len() as u64);
    h.set_mode(0o644);
    h.set_mtime(0);
    tar.append_data(&mut h, "Dockerfile", dockerfile.as_bytes())?;
    tar.append_dir_all("env", env)?;
    if let Some(project) = project {
        tar.append_dir_all("project", project)?;
    }
    // Every folder explicitly (0755), so that no daemon picks a mode for one.
    let mut folders = std::collections::BTreeSet::from(["repo".to_owned()]);
    for (rel, _) in files {
        let mut at = rel.as_str();
        while let Some((parent, _)) = at.rsplit_once('/') {
            folders.insert(format!("repo/{parent}"));
            at = parent;
        }
    }
    for folder in &folders {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(tar::EntryType::Directory);
        h.set_mode(0o755);
        h.set_size(0);
        h.set_mtime(0);
        tar.append_data(&mut h, folder, std::io::empty())?;
    }
    for (rel, path) in files {
        tar.append_path_with_name(path, format!("repo/{rel}"))?;
    }
    tar.into_inner()?;
    Ok(())
}

/// The export's pipeline: its repositories from `repos/`, its dataset in `out/`, the docker
/// backend with the building pipeline's limits, and the building pipeline's extraction
/// settings (which find the instances' functions).
fn pipeline_text(
    cfg: &Config,
    tags: &std::collections::BTreeMap<String, String>,
) -> Result<String> {
    let quote = |s: &str| toml::Value::String(s.to_owned()).to_string();
    let mut text = format!(
        "# An r2e export ({EXPORT_FORMAT}): check candidates with `r2e check -p pipeline.toml`.\nversion = 1\n\n[project]\nname = {}\noutput = \"out\"\ncache = \"cache\"\n",
        quote(&cfg.name)
    );
    for repo in tags.keys() {
        text.push_str(&format!(
            "\n[[repo]]\npath = {}\nname = {}\n",
            quote(&format!("repos/{}", file_name(repo))),
            quote(repo)
        ));
    }
    let mut sandbox = cfg.sandbox.clone();
    sandbox.backend = Backend::Docker;
    let mut table = toml::Table::new();
    table.insert(
        "sandbox".into(),
        toml::Value::try_from(&sandbox).map_err(Error::internal)?,
    );
    table.insert(
        "extract".into(),
        toml::Value::try_from(&cfg.extract).map_err(Error::internal)?,
    );
    text.push('\n');
    text.push_str(&toml::to_string(&table).map_err(Error::internal)?);
    Ok(text)
}

/// What `r2e import` loaded: each image's tag and ID.
pub fn import(dir: &Path) -> Result<Vec<(String, String)>> {
    let path = dir.join("export.json");
    let text = fs_err::read_to_string(&path)
        .map_err(|e| Error::input(format!("`{}` is not an r2e export: {e}", dir.display())))?;
    let manifest: ExportManifest = serde_json::from_str(&text).map_err(|e| {
        Error::input(format!(
            "{}:{}:{}: not an r2e export manifest: {e}",
            path.display(),
            e.line(),
            e.column()
        ))
    })?;
    if manifest.format != EXPORT_FORMAT {
        return Err(Error::input(format!(
            "`{}` is of format `{}`, not `{EXPORT_FORMAT}`",
            path.display(),
            manifest.format
        )));
    }
    let docker = docker::connect()?;
    let mut loaded = Vec::new();
    for image in &manifest.images {
        let rel = Path::new(&image.archive);
        if rel.is_absolute()
            || rel
                .components()
                .any(|c| c == std::path::Component::ParentDir)
        {
            return Err(Error::input(format!(
                "`{}` names an archive outside the export: `{}`",
                path.display(),
                image.archive
            )));
        }
        let archive = dir.join(rel);
        let mut hasher = blake3::Hasher::new();
        hasher
            .update_reader(fs_err::File::open(&archive)?)
            .map_err(|e| Error::input(format!("cannot read `{}`: {e}", archive.display())))?;
        if hasher.finalize().to_hex().as_str() != image.archive_blake3 {
            return Err(Error::input(format!(
                "`{}` is not the archive the export wrote (its blake3 differs): copied in part?",
                archive.display()
            )));
        }
        docker::load_image(&docker, &archive)?;
        let (id, _) = docker::image_id(&docker, &image.tag)?;
        if id != image.id {
            return Err(Error::env(format!(
                "`docker load` of `{}` gave image `{id}`, not `{}`",
                archive.display(),
                image.id
            )));
        }
        loaded.push((image.tag.clone(), id));
    }
    Ok(loaded)
}

/// An image `r2e gc --images-older-than` removed (or, with `--dry-run`, would remove).
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub struct GcImage {
    pub tags: Vec<String>,
    pub id: String,
    pub size: u64,
    pub age_seconds: i64,
}

/// Removes r2e's images older than `older_than` seconds that the dataset `cfg` builds does not
/// use: environment images (`r2e export`'s) whose environment key and commit are not those of
/// a repository of its last build, and base images other than the newest that no image kept is
/// built on. Which base a kept image stands on does not matter: pipelines with other
/// `base_image`s share a daemon, and the newest base may be another's. An image a container
/// uses stays. Returns what was removed.
pub fn gc_images(cfg: &Config, older_than: u64, dry_run: bool) -> Result<Vec<GcImage>> {
    let output = r2e_pipeline::engine::outputs::resolve(&cfg.output);
    let envs: Vec<EnvLine> = read_jsonl(&output.join(OutputFile::Envs.name()))?.unwrap_or_default();
    let instances: Vec<Instance> =
        read_jsonl(&output.join(OutputFile::Dataset.name()))?.unwrap_or_default();
    let used: std::collections::BTreeSet<(String, String)> = instances
        .iter()
        .filter_map(|i| {
            let line = envs.iter().find(|e| e.repo == i.repo)?;
            Some((line.env_key.clone(), i.commit.clone()))
        })
        .collect();
    let docker = docker::connect()?;
    let now = std::time::SystemTime::now()
        .duration_since(std::time::UNIX_EPOCH)
        .map(|d| d.as_secs() as i64)
        .unwrap_or(0);
    let mut removed = Vec::new();
    let mut consider = |image: docker::ImageInfo| -> Result<()> {
        let age = now - image.created;
        if age < older_than as i64 {
            return Ok(());
        }
        let gone = dry_run || docker::remove_unused_image(&docker, &image.id)?;
        if gone {
            removed.push(GcImage {
                tags: image.tags,
                id: image.id,
                size: image.size,
                age_seconds: age,
            });
        }
        Ok(())
    };
    let mut bases = docker::list_images(&docker, "r2e-base")?;
    bases.sort_by_key(|i| std::cmp::Reverse(i.created));
    let newest = bases
        .first()
        .and_then(|b| b.tags.first().cloned())
        .unwrap_or_default();
    // Environment images first: a base image is removable only once none is built on it.
    let mut kept_bases = std::collections::BTreeSet::from([newest.clone()]);
    for image in docker::list_images(&docker, "r2e-env")? {
        let label = |k: &str| image.labels.get(k).cloned().unwrap_or_default();
        let used = used.contains(&(label("r2e.env_key"), label("r2e.commit")));
        if used || now - image.created < older_than as i64 {
            kept_bases.insert(label("r2e.base"));
        }
        if !used {
            consider(image)?;
        }
    }
    for image in bases {
        if !image.tags.iter().any(|t| kept_bases.contains(t)) {
            consider(image)?;
        }
    }
    Ok(removed)
}

/// `7d`, `12h`, `30m`, `45s` or a number of seconds.
pub fn parse_age(text: &str) -> std::result::Result<u64, String> {
    let text = text.trim();
    let (number, unit) = match text.char_indices().find(|(_, c)| c.is_ascii_alphabetic()) {
        Some((i, _)) => (&text[..i], &text[i..]),
        None => (text, "s"),
    };
    let n: u64 = number
        .trim()
        .parse()
        .map_err(|_| format!("`{text}` is not an age: a number with s, m, h or d"))?;
    let unit = match unit {
        "s" => 1,
        "m" => 60,
        "h" => 3600,
        "d" => 86_400,
        _ => {
            return Err(format!(
                "`{text}` is not an age: a number with s, m, h or d"
            ));
        }
    };
    Ok(n * unit)
}
