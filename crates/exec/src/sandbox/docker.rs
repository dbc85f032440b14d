//! The Docker backend's parts, through `bollard`: the **base image** (`r2e image base`) and
//! **jobs in containers**.
//!
//! The base image holds the interpreter environments are made from and the pinned coverage.py,
//! so that both backends run the same Python and measure coverage alike. It is made from the
//! machine's own interpreter folder (`sys.base_prefix`, without its `site-packages`, whose
//! packages are this machine's), the shared libraries it and its extension modules load (their
//! `ldd` closure), a minimal `/etc` with an unprivileged user, the wheels its `ensurepip` takes
//! from the system where it takes them there (`WHEEL_PKG_DIR`, Debian's
//! `/usr/share/python-wheels`: `venv` needs them), and coverage.py installed from the
//! package index into its `site-packages`: a root filesystem given to `docker import`
//! (`create_image` from a tar stream). The interpreter keeps its path, so environments built
//! from it run in the image unchanged. Its tag holds a hash of what it was made from; labels
//! name the Python and coverage versions. With `[sandbox] base_image` (a [`Userland`]) the same
//! files but the system's programs and `/etc` go as one layer over that image (found, pulled,
//! or for `debian:SUITE` made by `debootstrap`), libraries at this machine's real paths.
//!
//! A job runs in a container of the base image with no network (unless the job asks for it: an
//! installation), memory (without swap), process and CPU limits, CPU-time and file-size
//! ulimits, a read-only root, a tmpfs `/tmp`, the unprivileged user, no capabilities and
//! `no-new-privileges`. Mounted are its scratch folder and the folders its `Job` names (read-only
//! unless writable), at their own paths; hidden paths are covered. A wall-clock timeout kills
//! the container; a container the kernel killed for memory is classed `memory`.
//!
//! `[sandbox] backend = "docker"` runs a build's jobs this way (`services`). A job with an
//! `ImageRun` runs in that environment image instead (an export's: `r2e::export`), with only
//! its scratch folder mounted. Also here: building an image from a streamed context (the
//! classic builder), `docker save`/`load`, an image's ID and layers.
//!
//! A container holds one job. A validation or check job is a batch worker that forks each run
//! inside its container, with each child's own memory limit (`r2e_batch`); `r2e serve` keeps
//! such workers, so containers, warm across requests (`stages::warm`). Not yet: a build keeping
//! containers across its batches.

use std::collections::HashMap;
use std::io::Write;
use std::path::{Path, PathBuf};
use std::sync::OnceLock;
use std::time::{Duration, Instant};

pub use bollard::Docker;
use bollard::models::{ContainerCreateBody, HostConfig, ResourcesUlimits};
use bollard::query_parameters::{
    CreateContainerOptions, CreateImageOptions, LogsOptions, RemoveContainerOptions,
    StartContainerOptions, WaitContainerOptions,
};
use futures_util::StreamExt;

use super::{Exit, Job, Outcome, Sandbox};
use r2e_core::error::{Error, Result};

/// The unprivileged user jobs run as.
pub const USER: u32 = 65534;

/// The base image's format: what it holds and how (part of its tag).
const BASE_FORMAT: u32 = 5;

/// The programs every image gets from this machine (those it has), at `/usr/bin/NAME`, with
/// `/bin/sh`: a shell and the common tools, so that a command an agent runs (`r2e serve`'s
/// `exec`) and code that starts programs find what the local backend shows of the system
/// (`git`: GitPython runs `git version` when it is imported), and what Harbor's runtime needs of
/// a task's image (`tar`, `gzip`, `find`, `timeout`, `bash`).
const PROGRAMS: &[&str] = &[
    "sh", "bash", "dash", "env", "ls", "cat", "echo", "printf", "cp", "mv", "rm", "mkdir", "rmdir",
    "ln", "touch", "chmod", "head", "tail", "wc", "sort", "uniq", "cut", "tr", "tee", "grep",
    "sed", "find", "xargs", "diff", "cmp", "sleep", "true", "false", "test", "[", "pwd", "id",
    "whoami", "uname", "date", "stat", "du", "basename", "dirname", "readlink", "realpath",
    "mktemp", "timeout", "nproc", "seq", "yes", "expr", "git", "tar", "gzip",
];

/// Libraries every image gets besides the interpreter's closure (see `base_files`): the
/// manylinux policy's system libraries without the graphical ones, which wheels and installers
/// (uv) link.
const RUNTIME_LIBRARIES: &[&str] = &[
    "libc.so.6",
    "libm.so.6",
    "libdl.so.2",
    "librt.so.1",
    "libpthread.so.0",
    "libutil.so.1",
    "libresolv.so.2",
    "libnsl.so.1",
    "libgcc_s.so.1",
    "libstdc++.so.6",
    "libgomp.so.1",
    "libz.so.1",
    "libexpat.so.1",
];

/// An empty regular file of this machine, bound over a file a job must not see, as the local
/// backend does. Not `/dev/null`, a character device: Python's importer finds modules only in
/// regular files, and a hidden module must stay importable when a candidate is loaded in its
/// place (its `__file__` the original's, as locally). Made once per process, in a folder named
/// by its pid (removed by a later process once this one is gone).
fn empty_file() -> Result<PathBuf> {
    static ETC: OnceLock<std::result::Result<crate::sandbox::local::Etc, String>> = OnceLock::new();
    ETC.get_or_init(|| crate::sandbox::local::Etc::create().map_err(|e| e.to_string()))
        .as_ref()
        .map(|etc| etc.empty())
        .map_err(|e| Error::env(format!("cannot make the empty file hidden files show: {e}")))
}

/// One tokio runtime for every call into the Docker API (jobs run on many threads).
fn runtime() -> &'static tokio::runtime::Runtime {
    static RT: OnceLock<tokio::runtime::Runtime> = OnceLock::new();
    RT.get_or_init(|| {
        tokio::runtime::Builder::new_multi_thread()
            .worker_threads(2)
            .enable_all()
            .build()
            .expect("a tokio runtime starts")
    })
}

/// Connects to the local Docker daemon and checks that it answers.
pub fn connect() -> Result<Docker> {
    let docker = Docker::connect_with_local_defaults()
        .map_err(|e| Error::env(format!("cannot reach the Docker daemon: {e}")))?;
    answers(docker)
}

/// Connects to the daemon listening at `socket` (`unix://PATH`, as `DOCKER_HOST` names it)
/// and checks that it answers: another daemon than the environment's (tests).
pub fn connect_to(socket: &str) -> Result<Docker> {
    let docker = Docker::connect_with_unix(socket, 120, bollard::API_DEFAULT_VERSION)
        .map_err(|e| Error::env(format!("cannot reach the Docker daemon `{socket}`: {e}")))?;
    answers(docker)
}

fn answers(docker: Docker) -> Result<Docker> {
    runtime()
        .block_on(docker.ping())
        .map_err(|e| Error::env(format!("the Docker daemon does not answer: {e}")))?;
    Ok(docker)
}

/// What a base image is made from.
pub struct BaseSpec {
    /// The interpreter's installation (`sys.base_prefix`).
    pub prefix: PathBuf,
    /// Its `pythonX.Y` folder name under `lib/`.
    pub lib: String,
    /// Its version (`3.11.7`).
    pub python_version: String,
    /// The pinned coverage.py requirement (`coverage==X.Y.Z`).
    pub coverage: String,
    /// A folder holding coverage.py installed for this interpreter (`pip install --target`).
    pub coverage_dir: PathBuf,
    /// The interpreter's own packages folder (`site.getsitepackages()[0]`), where the image
    /// gets coverage.py.
    pub site: PathBuf,
    /// The image whose root filesystem the base image starts from (`[sandbox] base_image`);
    /// `None`: only what it needs of this machine.
    pub userland: Option<Userland>,
    /// The folder of wheels the interpreter's `ensurepip` installs pip from, when it is one of
    /// the system's (`WHEEL_PKG_DIR`, Debian's `/usr/share/python-wheels`): `venv` needs them
    /// to make an environment with pip, and they are outside the interpreter's folders.
    pub wheels: Option<PathBuf>,
}

/// The image a base image starts from: its name as configured and the ID the daemon holds it
/// under (part of the base image's tag).
#[derive(Clone, Debug)]
pub struct Userland {
    pub name: String,
    pub id: String,
}

/// Where `debootstrap` gets Debian's packages.
pub const DEBIAN_MIRROR: &str = "http://deb.debian.org/debian";

/// The Debian suite `debian:SUITE` or `debian:SUITE-slim` names (`bookworm`, `stable`): what
/// `debootstrap` can make when no registry serves the image.
pub fn debian_suite(name: &str) -> Option<&str> {
    let tag = name
        .strip_prefix("debian:")
        .or_else(|| name.strip_prefix("docker.io/library/debian:"))?;
    let suite = tag.strip_suffix("-slim").unwrap_or(tag);
    (!suite.is_empty() && suite.chars().all(|c| c.is_ascii_lowercase())).then_some(suite)
}

/// The image `[sandbox] base_image` names, as the daemon has it: found there, else pulled from
/// its registry, else (a `debian:SUITE[-slim]`) made once from Debian's packages with
/// `debootstrap` in `scratch` and kept as `r2e-debian:SUITE`. Either way a failure is
/// environmental and says what was tried.
pub fn userland(docker: &Docker, name: &str, scratch: &Path) -> Result<Userland> {
    let found = |tag: &str| {
        runtime()
            .block_on(docker.inspect_image(tag))
            .ok()
            .and_then(|i| i.id)
            .map(|id| Userland {
                name: name.to_owned(),
                id,
            })
    };
    if let Some(u) = found(name) {
        return Ok(u);
    }
    let suite = debian_suite(name);
    let made = suite.map(|suite| format!("r2e-debian:{suite}"));
    if let Some(u) = made.as_deref().and_then(found) {
        return Ok(u);
    }
    let pulled = runtime().block_on(async {
        let options = CreateImageOptions {
            from_image: Some(name.to_owned()),
            ..Default::default()
        };
        let mut stream = docker.create_image(Some(options), None, None);
        while let Some(step) = stream.next().await {
            let step = step.map_err(|e| e.to_string())?;
            if let Some(detail) = step.error_detail.and_then(|d| d.message) {
                return Err(detail);
            }
        }
        Ok(())
    });
    let why = match pulled {
        Ok(()) => match found(name) {
            Some(u) => return Ok(u),
            None => "the pull made no image".to_owned(),
        },
        Err(why) => why,
    };
    match (suite, made) {
        (Some(suite), Some(tag)) => {
            eprintln!(
                "`{name}` cannot be pulled ({why}); making it from Debian's packages (debootstrap {suite}), once"
            );
            debootstrap(docker, suite, &tag, scratch)?;
            found(&tag).ok_or_else(|| Error::env(format!("importing `{tag}` made no image")))
        }
        _ => Err(Error::env(format!(
            "`[sandbox] base_image = \"{name}\"`: the Docker daemon has no such image and cannot pull it: {why} (load it with `docker load`, or name one `docker images` lists)"
        ))),
    }
}

/// Makes Debian `suite` with `debootstrap --variant=minbase` from [`DEBIAN_MIRROR`] in a
/// folder of `scratch` (this machine's root runs it: Debian's own packages, trusted) and
/// imports it as image `tag`. The folder is removed whatever happens.
fn debootstrap(docker: &Docker, suite: &str, tag: &str, scratch: &Path) -> Result<()> {
    if !crate::sandbox::local::is_root() {
        return Err(Error::env(format!(
            "making `{tag}` from Debian's packages needs `debootstrap` run as root"
        )));
    }
    let dir = scratch.join(format!("debootstrap-{suite}-{}", std::process::id()));
    let _ = std::fs::remove_dir_all(&dir);
    fs_err::create_dir_all(scratch)?;
    let made = (|| {
        let out = std::process::Command::new("debootstrap")
            .args(["--variant=minbase", suite])
            .arg(&dir)
            .arg(DEBIAN_MIRROR)
            .output()
            .map_err(|e| {
                Error::env(format!(
                    "cannot run `debootstrap` (Debian's package `debootstrap`): {e}"
                ))
            })?;
        if !out.status.success() {
            let said = String::from_utf8_lossy(&out.stderr);
            let log = std::fs::read_to_string(dir.join("debootstrap/debootstrap.log"))
                .unwrap_or_default();
            let tail: Vec<&str> = said.lines().chain(log.lines()).rev().take(5).collect();
            return Err(Error::env(format!(
                "`debootstrap {suite}` from {DEBIAN_MIRROR} failed: {}",
                tail.into_iter().rev().collect::<Vec<_>>().join(" | ")
            )));
        }
        let changes = vec![
            format!("LABEL r2e.debootstrap={suite}"),
            format!("LABEL r2e.mirror={DEBIAN_MIRROR}"),
        ];
        import_rootfs(docker, tag, changes, |out| {
            let mut child = std::process::Command::new("tar")
                .arg("-C")
                .arg(&dir)
                .args([
                    "--numeric-owner",
                    "--exclude=./dev/*",
                    "--exclude=./proc/*",
                    "--exclude=./sys/*",
                    "--exclude=./var/cache/apt/archives/*.deb",
                    "-cf",
                    "-",
                    ".",
                ])
                .stdout(std::process::Stdio::piped())
                .spawn()?;
            let copied = std::io::copy(child.stdout.as_mut().expect("piped"), out);
            let status = child.wait()?;
            copied?;
            if !status.success() {
                return Err(std::io::Error::other(format!(
                    "`tar` of the Debian folder exited with {status}"
                )));
            }
            Ok(())
        })
    })();
    let _ = std::fs::remove_dir_all(&dir);
    made
}

/// `docker import` of the root filesystem `write` writes as a tar, as image `tag`, with the
/// configuration `changes` (`USER`, `LABEL` lines).
fn import_rootfs(
    docker: &Docker,
    tag: &str,
    changes: Vec<String>,
    write: impl FnOnce(&mut ChunkWriter) -> std::io::Result<()> + Send,
) -> Result<()> {
    let (repo, version) = tag.split_once(':').unwrap_or((tag, "latest"));
    let options = CreateImageOptions {
        from_src: Some("-".into()),
        repo: Some(repo.into()),
        tag: Some(version.into()),
        changes,
        ..Default::default()
    };
    let what = format!("`docker import` of `{tag}`");
    streamed(write, |body| {
        runtime().block_on(async {
            let mut stream =
                docker.create_image(Some(options), Some(bollard::body_try_stream(body)), None);
            while let Some(step) = stream.next().await {
                let step = step.map_err(|e| daemon_failed(&what, e))?;
                if let Some(detail) = step.error_detail.and_then(|d| d.message) {
                    return Err(daemon_failed(&what, detail));
                }
            }
            Ok::<(), Error>(())
        })
    })
}

/// A base image's files, each as (path in the image, source on this machine), and its folders.
pub type BaseFiles = (Vec<(PathBuf, PathBuf)>, Vec<PathBuf>);

/// The files of a base image: (path in the image, source on this machine), and the folders
/// to make. Sorted, so that the same machine gives the same tar. Computed once per set-up
/// (it runs `ldd`), and given to [`base_tag`] and [`build_base`].
pub fn base_files(spec: &BaseSpec) -> Result<BaseFiles> {
    let mut files = interpreter_files(spec)?;
    // coverage.py, into the image's site-packages.
    for e in walkdir::WalkDir::new(&spec.coverage_dir)
        .follow_links(false)
        .sort_by_file_name()
    {
        let e = e.map_err(|e| Error::env(format!("cannot read coverage.py: {e}")))?;
        if e.file_type().is_dir() {
            continue;
        }
        let rel = e
            .path()
            .strip_prefix(&spec.coverage_dir)
            .unwrap_or(e.path());
        if rel.starts_with("bin") {
            continue;
        }
        files.push((spec.site.join(rel), e.path().to_path_buf()));
    }
    let programs = system_programs(spec, &mut files);
    // The shared libraries the interpreter, its extension modules and the programs load, and
    // the loader.
    let version = spec.lib.trim_start_matches("python");
    let mut objects = vec![spec.prefix.join("bin").join(format!("python{version}"))];
    objects.extend(programs);
    let dynload = spec.prefix.join("lib").join(&spec.lib).join("lib-dynload");
    if let Ok(entries) = std::fs::read_dir(&dynload) {
        objects.extend(entries.flatten().map(|e| e.path()));
    }
    objects.extend(
        files
            .iter()
            .filter(|(_, src)| src.extension().is_some_and(|x| x == "so"))
            .map(|(_, src)| src.clone()),
    );
    let libs = shared_libraries(spec, objects)?;
    for lib in libs {
        if !lib.starts_with(&spec.prefix) {
            // Over an image's system, a library goes where its folder really is here (`/lib`
            // is a link to `/usr/lib` on merged-/usr systems): a folder entry must never
            // replace the image's link.
            let to = match (&spec.userland, lib.parent(), lib.file_name()) {
                (Some(_), Some(dir), Some(name)) => std::fs::canonicalize(dir)
                    .map(|d| d.join(name))
                    .unwrap_or_else(|_| lib.clone()),
                _ => lib.clone(),
            };
            files.push((to, lib));
        }
    }
    files.sort();
    files.dedup_by(|a, b| a.0 == b.0);
    let dirs = vec![
        PathBuf::from("/tmp"),
        PathBuf::from("/etc"),
        spec.site.clone(),
    ];
    Ok((files, dirs))
}

/// The interpreter's own files: its binaries and library, its standard library, and the
/// wheels its `ensurepip` installs pip from.
fn interpreter_files(spec: &BaseSpec) -> Result<Vec<(PathBuf, PathBuf)>> {
    let mut files: Vec<(PathBuf, PathBuf)> = Vec::new();
    let stdlib = spec.prefix.join("lib").join(&spec.lib);
    // The interpreter's binaries and library: `bin/pythonX.Y` with its `python3`/`python`
    // names, `lib/libpythonX.Y*`; never the folder's other programs (this machine's tools).
    let version = spec.lib.trim_start_matches("python");
    for name in [
        format!("python{version}"),
        "python3".into(),
        "python".into(),
    ] {
        let p = spec.prefix.join("bin").join(name);
        if std::fs::symlink_metadata(&p).is_ok() {
            files.push((p.clone(), p));
        }
    }
    if let Ok(entries) = std::fs::read_dir(spec.prefix.join("lib")) {
        for e in entries.flatten() {
            if e.file_name()
                .to_string_lossy()
                .starts_with(&format!("libpython{version}"))
            {
                files.push((e.path(), e.path()));
            }
        }
    }
    // Its standard library, without the packages installed into it (this machine's) and the
    // parts no job uses (the test suite, IDLE, Tk).
    let skip: Vec<PathBuf> = [
        "site-packages",
        "dist-packages",
        "test",
        "idlelib",
        "tkinter",
        "turtledemo",
    ]
    .iter()
    .map(|d| stdlib.join(d))
    .collect();
    let walk = walkdir::WalkDir::new(&stdlib)
        .follow_links(false)
        .sort_by_file_name()
        .into_iter()
        .filter_entry(|e| !skip.iter().any(|s| e.path() == s) && e.file_name() != "__pycache__");
    for e in walk {
        let e = e.map_err(|e| Error::env(format!("cannot read the interpreter: {e}")))?;
        if !e.file_type().is_dir() {
            files.push((e.path().to_path_buf(), e.path().to_path_buf()));
        }
    }
    // The wheels its `ensurepip` installs pip from, where the interpreter takes them from a
    // folder of the system (Debian's `/usr/share/python-wheels`, from python3-pip-whl): at
    // their own path, as their real files. Without them, `python -m venv` fails in the image
    // (the local backend shows the system's `/usr`, so it finds them there).
    if let Some(dir) = &spec.wheels
        && let Ok(entries) = std::fs::read_dir(dir)
    {
        for e in entries.flatten() {
            let path = e.path();
            if path.extension().is_some_and(|x| x == "whl")
                && let Ok(real) = std::fs::canonicalize(&path)
                && real.is_file()
            {
                files.push((path, real));
            }
        }
    }
    Ok(files)
}

/// The shell and the tools a job may run, pushed into `files` at their place in the image
/// (none over an image's system): their real files here, to find the libraries they load.
fn system_programs(spec: &BaseSpec, files: &mut Vec<(PathBuf, PathBuf)>) -> Vec<PathBuf> {
    // The shell and tools (their real files: `/bin` may be a link to `/usr/bin` here), unless
    // an image gives the system.
    let mut programs = Vec::new();
    let own_system = spec.userland.is_none();
    let found = |name: &str| {
        ["/usr/bin", "/bin"]
            .iter()
            .find_map(|d| std::fs::canonicalize(Path::new(d).join(name)).ok())
    };
    if let Some(sh) = found("sh").filter(|_| own_system) {
        files.push((PathBuf::from("/bin/sh"), sh.clone()));
        programs.push(sh);
    }
    for name in PROGRAMS.iter().filter(|_| own_system) {
        if let Some(real) = found(name) {
            files.push((Path::new("/usr/bin").join(name), real.clone()));
            programs.push(real);
        }
    }
    programs
}

/// The shared libraries `objects` load (`ldd`), with the runtime libraries every Linux system
/// has, and the objects themselves that lie outside the interpreter and coverage.py.
fn shared_libraries(
    spec: &BaseSpec,
    mut objects: Vec<PathBuf>,
) -> Result<std::collections::BTreeSet<PathBuf>> {
    let mut libs = std::collections::BTreeSet::new();
    // The runtime libraries manylinux wheels and installers (uv) may link besides the C
    // library, as every Linux system has them: found with `ldconfig -p`, and with their own
    // dependencies.
    if let Ok(out) = std::process::Command::new("ldconfig").arg("-p").output() {
        let text = String::from_utf8_lossy(&out.stdout);
        for name in RUNTIME_LIBRARIES {
            if let Some(path) = text
                .lines()
                .filter(|l| l.trim_start().starts_with(&format!("{name} ")))
                .filter(|l| l.contains("x86-64") || l.contains("AArch64") || !l.contains('('))
                .find_map(|l| l.split_once("=> ").map(|(_, p)| PathBuf::from(p.trim())))
            {
                objects.push(path);
            }
        }
    }
    for chunk in objects.chunks(64) {
        let out = std::process::Command::new("ldd")
            .args(chunk)
            .output()
            .map_err(|e| Error::env(format!("cannot run `ldd`: {e}")))?;
        for line in String::from_utf8_lossy(&out.stdout).lines() {
            // With several files, each one's list opens with a `FILE:` line.
            if line.trim_end().ends_with(':') {
                continue;
            }
            let path = match line.split_once("=>") {
                Some((_, right)) => right.split_whitespace().next(),
                None => line.split_whitespace().next(),
            };
            if let Some(p) = path.filter(|p| p.starts_with('/')) {
                libs.insert(PathBuf::from(p));
            }
        }
    }
    libs.extend(
        objects
            .iter()
            .filter(|o| !o.starts_with(&spec.prefix) && !o.starts_with(&spec.coverage_dir))
            .cloned(),
    );
    Ok(libs)
}

/// The tag of the base image for `spec` made of `files`: a hash of its format, versions and
/// file list with each file's content hash. The contents (about 120 MB) are read only when the
/// files' paths, sizes, inodes and times differ from those `memo` (a file of this machine's
/// cache) recorded with the tag last time; every build's first job asks for the tag.
pub fn base_tag(spec: &BaseSpec, files: &[(PathBuf, PathBuf)], memo: &Path) -> Result<String> {
    use std::os::unix::fs::MetadataExt;
    let mut stat = blake3::Hasher::new();
    stat.update(&BASE_FORMAT.to_le_bytes());
    stat.update(spec.python_version.as_bytes());
    stat.update(spec.coverage.as_bytes());
    if let Some(u) = &spec.userland {
        stat.update(u.id.as_bytes());
    }
    for (to, from) in files {
        stat.update(to.as_os_str().as_encoded_bytes());
        stat.update(&[0]);
        stat.update(from.as_os_str().as_encoded_bytes());
        stat.update(&[0]);
        let m = std::fs::metadata(from)
            .map_err(|e| Error::env(format!("cannot read `{}`: {e}", from.display())))?;
        for n in [m.len(), m.ino(), m.mtime() as u64, m.mtime_nsec() as u64] {
            stat.update(&n.to_le_bytes());
        }
        for n in [m.ctime() as u64, m.ctime_nsec() as u64] {
            stat.update(&n.to_le_bytes());
        }
    }
    let stat = stat.finalize().to_hex().to_string();
    if let Ok(text) = std::fs::read_to_string(memo)
        && let Some((seen, tag)) = text.trim().split_once(' ')
        && seen == stat
        && tag.starts_with("r2e-base:")
    {
        return Ok(tag.to_owned());
    }
    let mut h = blake3::Hasher::new();
    h.update(&BASE_FORMAT.to_le_bytes());
    h.update(spec.python_version.as_bytes());
    h.update(spec.coverage.as_bytes());
    if let Some(u) = &spec.userland {
        h.update(u.id.as_bytes());
    }
    for (to, from) in files {
        h.update(to.as_os_str().as_encoded_bytes());
        h.update(&[0]);
        let bytes = std::fs::read(from)
            .map_err(|e| Error::env(format!("cannot read `{}`: {e}", from.display())))?;
        h.update(blake3::hash(&bytes).as_bytes());
    }
    let tag = format!("r2e-base:{}", &h.finalize().to_hex()[..16]);
    // A memo that cannot be written only costs the next build the hashing.
    let _ = r2e_core::fsutil::write_atomic(memo, format!("{stat} {tag}\n").as_bytes());
    Ok(tag)
}

/// Whether the daemon has an image of this tag.
pub fn has_image(docker: &Docker, tag: &str) -> bool {
    runtime().block_on(docker.inspect_image(tag)).is_ok()
}

/// Builds the base image for `spec` under `tag` (see the module's documentation), unless the
/// daemon has it. Returns whether it was built. Without a userland it is a root filesystem
/// given to `docker import`; with one, a build `FROM` it that adds the same files as one layer.
pub fn build_base(docker: &Docker, spec: &BaseSpec, base: &BaseFiles, tag: &str) -> Result<bool> {
    if has_image(docker, tag) {
        return Ok(false);
    }
    // One `LABEL` instruction: each instruction of a build is a step of its own.
    let mut labels = format!(
        "LABEL r2e.python={} r2e.coverage={} r2e.format={BASE_FORMAT}",
        spec.python_version, spec.coverage
    );
    if let Some(userland) = &spec.userland {
        labels.push_str(&format!(" r2e.userland={}", userland.name));
    }
    let config = vec![format!("USER {USER}"), "WORKDIR /tmp".into(), labels];
    let Some(userland) = &spec.userland else {
        import_rootfs(docker, tag, config, |out| write_base_tar(spec, base, out))?;
        return Ok(true);
    };
    // The files go into the build's context under `rootfs/`, copied over the image as one layer.
    let dockerfile = format!(
        "FROM {}\nCOPY rootfs/ /\n{}\n",
        userland.id,
        config.join("\n")
    );
    build_image(docker, tag, |out| {
        let mut context = tar::Builder::new(out);
        let mut h = tar::Header::new_gnu();
        h.set_mode(0o644);
        h.set_size(dockerfile.len() as u64);
        context.append_data(&mut h, "Dockerfile", dockerfile.as_bytes())?;
        append_base_files(spec, base, Path::new("rootfs"), &mut context)?;
        context.into_inner()?.flush()
    })?;
    Ok(true)
}

/// Writes the base image's root filesystem as a tar to `out`.
fn write_base_tar(spec: &BaseSpec, base: &BaseFiles, out: impl Write) -> std::io::Result<()> {
    let mut tar = tar::Builder::new(out);
    append_base_files(spec, base, Path::new(""), &mut tar)?;
    tar.into_inner()?.flush()
}

/// Appends the base image's files and folders to `tar`, each at its path in the image under
/// the folder `under` (relative).
fn append_base_files<W: Write>(
    spec: &BaseSpec,
    base: &BaseFiles,
    under: &Path,
    tar: &mut tar::Builder<W>,
) -> std::io::Result<()> {
    let (files, dirs) = base;
    let at = |p: &Path| under.join(rel(p));
    let header = |mode: u32, size: u64, kind: tar::EntryType| {
        let mut h = tar::Header::new_gnu();
        h.set_entry_type(kind);
        h.set_mode(mode);
        h.set_size(size);
        h.set_uid(0);
        h.set_gid(0);
        h.set_mtime(0);
        h
    };
    // Every folder the files are in, explicitly (0755): a folder a daemon makes for an entry
    // whose parent the tar lacks gets a mode of its own choosing (0600 on some), which the
    // unprivileged user could not cross.
    let mut parents = std::collections::BTreeSet::new();
    for (to, _) in files {
        for p in to.ancestors().skip(1) {
            if p != Path::new("/") && !dirs.iter().any(|d| d == p) {
                parents.insert(p.to_path_buf());
            }
        }
    }
    for p in &parents {
        let mut h = header(0o755, 0, tar::EntryType::Directory);
        tar.append_data(&mut h, at(p), std::io::empty())?;
    }
    for d in dirs {
        let mode = if d == Path::new("/tmp") {
            0o1777
        } else {
            0o755
        };
        let mut h = header(mode, 0, tar::EntryType::Directory);
        tar.append_data(&mut h, at(d), std::io::empty())?;
    }
    let etc = [
        (
            "etc/passwd",
            format!("root:x:0:0:root:/root:/bin/false\nr2e:x:{USER}:{USER}:r2e:/tmp:/bin/false\n"),
        ),
        ("etc/group", format!("root:x:0:\nr2e:x:{USER}:\n")),
    ];
    for (path, text) in etc.iter().filter(|_| spec.userland.is_none()) {
        let mut h = header(0o644, text.len() as u64, tar::EntryType::Regular);
        tar.append_data(&mut h, under.join(path), text.as_bytes())?;
    }
    for (to, from) in files {
        // Symlinks inside the interpreter stay symlinks; everything else is copied as a file
        // (a library's symlink chain becomes its target's content at the linked name).
        let meta = std::fs::symlink_metadata(from)?;
        if meta.file_type().is_symlink() && from.starts_with(&spec.prefix) {
            let target = std::fs::read_link(from)?;
            let mut h = header(0o777, 0, tar::EntryType::Symlink);
            tar.append_link(&mut h, at(to), &target)?;
            continue;
        }
        use std::os::unix::fs::PermissionsExt;
        let file = std::fs::File::open(from)?;
        let meta = file.metadata()?;
        let mode = meta.permissions().mode() & 0o755 | 0o444;
        let mut h = header(mode, meta.len(), tar::EntryType::Regular);
        tar.append_data(&mut h, at(to), file)?;
    }
    Ok(())
}

/// A writer that sends what it is given to a channel in chunks of about 1 MiB: the tar of the
/// base image streams to the daemon instead of being held whole in memory.
pub struct ChunkWriter {
    tx: tokio::sync::mpsc::Sender<std::io::Result<bytes::Bytes>>,
    buf: Vec<u8>,
}

impl Write for ChunkWriter {
    fn write(&mut self, data: &[u8]) -> std::io::Result<usize> {
        self.buf.extend_from_slice(data);
        if self.buf.len() >= 1 << 20 {
            self.flush()?;
        }
        Ok(data.len())
    }

    fn flush(&mut self) -> std::io::Result<()> {
        if self.buf.is_empty() {
            return Ok(());
        }
        let chunk = bytes::Bytes::from(std::mem::take(&mut self.buf));
        self.tx.blocking_send(Ok(chunk)).map_err(|_| {
            std::io::Error::new(std::io::ErrorKind::BrokenPipe, "the daemon stopped reading")
        })
    }
}

/// A request body streamed to the daemon.
type BodyStream =
    std::pin::Pin<Box<dyn futures_util::Stream<Item = std::io::Result<bytes::Bytes>> + Send>>;

/// A failure the daemon reported while making or loading an image (`what`: the operation), as
/// an environmental error; a full disk of the daemon's says so first, since that is what the
/// user must mend (the daemon's text only names the file it was writing).
fn daemon_failed(what: &str, detail: impl std::fmt::Display) -> Error {
    let detail = detail.to_string();
    if detail.contains("no space left on device") || detail.contains("disk quota exceeded") {
        Error::env(format!(
            "the Docker daemon's disk is full: {what} failed: {detail} (free space where the daemon keeps its data: `docker info` names that folder, and `r2e gc --images-older-than` removes old images)"
        ))
    } else {
        Error::env(format!("{what} failed: {detail}"))
    }
}

/// Streams what `write` writes into a body for the daemon, in chunks, from a thread of its
/// own; `send` runs with the body. When both fail, `write`'s error is the better reason,
/// unless it failed only because the daemon had stopped reading (then the daemon's is).
fn streamed<T>(
    write: impl FnOnce(&mut ChunkWriter) -> std::io::Result<()> + Send,
    send: impl FnOnce(BodyStream) -> Result<T>,
) -> Result<T> {
    let (tx, mut rx) = tokio::sync::mpsc::channel::<std::io::Result<bytes::Bytes>>(4);
    std::thread::scope(|scope| {
        let writer = scope.spawn(move || {
            let mut out = ChunkWriter {
                tx: tx.clone(),
                buf: Vec::new(),
            };
            let written = write(&mut out).and_then(|()| out.flush());
            if let Err(e) = &written {
                // The body ends with the error, so that the daemon keeps nothing of a part.
                let _ = tx.blocking_send(Err(std::io::Error::new(e.kind(), e.to_string())));
            }
            written
        });
        let body: BodyStream = Box::pin(futures_util::stream::poll_fn(move |cx| rx.poll_recv(cx)));
        let sent = send(body);
        let written = writer
            .join()
            .map_err(|_| Error::internal("the writer of a stream to the daemon panicked"))?;
        match written {
            Err(e) if e.kind() == std::io::ErrorKind::BrokenPipe && sent.is_err() => sent,
            Err(e) => Err(Error::env(format!(
                "cannot write what the daemon is sent: {e}"
            ))),
            Ok(()) => sent,
        }
    })
}

/// Builds image `tag` from the build context `write` writes (a tar holding a `Dockerfile`),
/// with the daemon's classic builder (no BuildKit, no registry: `FROM` names a local image).
pub fn build_image(
    docker: &Docker,
    tag: &str,
    write: impl FnOnce(&mut ChunkWriter) -> std::io::Result<()> + Send,
) -> Result<()> {
    let options = bollard::query_parameters::BuildImageOptions {
        dockerfile: "Dockerfile".into(),
        t: Some(tag.into()),
        rm: true,
        forcerm: true,
        ..Default::default()
    };
    streamed(write, |body| {
        runtime().block_on(async {
            let mut stream =
                docker.build_image(options, None, Some(bollard::body_try_stream(body)));
            let mut said = String::new();
            let what = format!("building image `{tag}`");
            while let Some(step) = stream.next().await {
                let step = step.map_err(|e| daemon_failed(&what, e))?;
                if let Some(detail) = step.error_detail.and_then(|d| d.message) {
                    return Err(daemon_failed(&what, detail));
                }
                if let Some(text) = step.stream {
                    said.push_str(&text);
                }
            }
            Ok(said)
        })
    })
    .and_then(|said| {
        if has_image(docker, tag) {
            Ok(())
        } else {
            Err(Error::env(format!(
                "building image `{tag}` made no image: {}",
                said.trim()
            )))
        }
    })
}

/// An image's ID (the digest of its configuration) and size in bytes.
pub fn image_id(docker: &Docker, tag: &str) -> Result<(String, u64)> {
    let inspect = runtime()
        .block_on(docker.inspect_image(tag))
        .map_err(|e| Error::env(format!("the daemon has no image `{tag}`: {e}")))?;
    Ok((
        inspect.id.unwrap_or_default(),
        inspect.size.unwrap_or(0).max(0) as u64,
    ))
}

/// An image's layers, newest first: the instruction that made each and its size in bytes.
pub fn layers(docker: &Docker, tag: &str) -> Result<Vec<(String, u64)>> {
    let history = runtime()
        .block_on(docker.image_history(tag))
        .map_err(|e| Error::env(format!("cannot read the layers of `{tag}`: {e}")))?;
    Ok(history
        .into_iter()
        .map(|h| (h.created_by, h.size.max(0) as u64))
        .collect())
}

/// `docker save` of an image into `path` (written whole, then renamed): its blake3 and size.
pub fn save_image(docker: &Docker, tag: &str, path: &Path) -> Result<(String, u64)> {
    let tmp = path.with_extension("tar.part");
    let mut file = std::io::BufWriter::new(fs_err::File::create(&tmp)?);
    let mut hasher = blake3::Hasher::new();
    let bytes = save_image_to(docker, tag, &mut TeeHash(&mut file, &mut hasher))?;
    file.into_inner()
        .map_err(|e| Error::from(e.into_error()))?
        .sync_all()?;
    fs_err::rename(&tmp, path)?;
    Ok((hasher.finalize().to_hex().to_string(), bytes))
}

/// Writes to a writer and hashes what it wrote.
struct TeeHash<'a, W>(&'a mut W, &'a mut blake3::Hasher);

impl<W: Write> Write for TeeHash<'_, W> {
    fn write(&mut self, buf: &[u8]) -> std::io::Result<usize> {
        let n = self.0.write(buf)?;
        self.1.update(&buf[..n]);
        Ok(n)
    }
    fn flush(&mut self) -> std::io::Result<()> {
        self.0.flush()
    }
}

/// `docker save` of an image, streamed into `out`: how many bytes it wrote.
pub fn save_image_to(docker: &Docker, tag: &str, out: &mut dyn Write) -> Result<u64> {
    let mut bytes = 0u64;
    runtime().block_on(async {
        let mut stream = docker.export_image(tag);
        while let Some(chunk) = stream.next().await {
            let chunk =
                chunk.map_err(|e| daemon_failed(&format!("`docker save` of `{tag}`"), e))?;
            bytes += chunk.len() as u64;
            out.write_all(&chunk)?;
        }
        Ok::<(), Error>(())
    })?;
    Ok(bytes)
}

/// `docker load` of an archive `docker save` wrote.
pub fn load_image(docker: &Docker, path: &Path) -> Result<()> {
    let file = path.to_path_buf();
    streamed(
        move |out| {
            let mut f = std::fs::File::open(&file)?;
            std::io::copy(&mut f, out).map(|_| ())
        },
        |body| {
            runtime().block_on(async {
                let options = bollard::query_parameters::ImportImageOptions {
                    quiet: true,
                    ..Default::default()
                };
                let mut stream = docker.import_image(options, bollard::body_try_stream(body), None);
                let what = format!("`docker load` of `{}`", path.display());
                while let Some(step) = stream.next().await {
                    let step = step.map_err(|e| daemon_failed(&what, e))?;
                    if let Some(detail) = step.error_detail.and_then(|d| d.message) {
                        return Err(daemon_failed(&what, detail));
                    }
                }
                Ok(())
            })
        },
    )
}

/// Gives image `source` the name `repo:tag` too (`docker tag`).
pub fn tag_image(docker: &Docker, source: &str, repo: &str, tag: &str) -> Result<()> {
    let options = bollard::query_parameters::TagImageOptions {
        repo: Some(repo.to_owned()),
        tag: Some(tag.to_owned()),
    };
    runtime()
        .block_on(docker.tag_image(source, Some(options)))
        .map_err(|e| Error::env(format!("cannot tag `{source}` as `{repo}:{tag}`: {e}")))
}

/// The registry's host of `repo` (`HOST[:PORT]/PATH`): its first part.
fn registry_host(repo: &str) -> &str {
    repo.split('/').next().unwrap_or(repo)
}

/// The credentials Docker's own configuration holds for the registry `host`
/// (`$DOCKER_CONFIG/config.json`, else `~/.docker/config.json`: `auths.HOST.auth`, as
/// `docker login` writes it), passed to the daemon as the `docker` command passes them; none
/// when it holds none (a credential helper's are not read). r2e writes no credential.
fn credentials(host: &str) -> Option<bollard::auth::DockerCredentials> {
    let dir = r2e_core::config::docker_config_dir()?;
    let text = std::fs::read_to_string(dir.join("config.json")).ok()?;
    let config: serde_json::Value = serde_json::from_str(&text).ok()?;
    let auth = config["auths"][host]["auth"].as_str()?;
    use base64::Engine;
    let decoded = base64::engine::general_purpose::STANDARD
        .decode(auth)
        .ok()?;
    let (user, password) = std::str::from_utf8(&decoded).ok()?.split_once(':')?;
    Some(bollard::auth::DockerCredentials {
        username: Some(user.to_owned()),
        password: Some(password.to_owned()),
        serveraddress: Some(host.to_owned()),
        ..Default::default()
    })
}

/// Pushes `repo:tag` to its registry (`docker push`).
pub fn push_image(docker: &Docker, repo: &str, tag: &str) -> Result<()> {
    let what = format!("`docker push` of `{repo}:{tag}`");
    runtime().block_on(async {
        let options = bollard::query_parameters::PushImageOptions {
            tag: Some(tag.to_owned()),
            ..Default::default()
        };
        let mut stream = docker.push_image(repo, Some(options), credentials(registry_host(repo)));
        while let Some(step) = stream.next().await {
            let step = step.map_err(|e| daemon_failed(&what, e))?;
            if let Some(detail) = step.error_detail.and_then(|d| d.message) {
                return Err(daemon_failed(&what, detail));
            }
        }
        Ok(())
    })
}

/// Pushes the image `image` to its registry as `repo:tag` (`repo` is `HOST[:PORT]/PATH`): the
/// reference by digest the registry holds it under (`repo@sha256:…`), as the push recorded it.
pub fn push_by_digest(docker: &Docker, image: &str, repo: &str, tag: &str) -> Result<String> {
    tag_image(docker, image, repo, tag)?;
    push_image(docker, repo, tag)?;
    let prefix = format!("{repo}@");
    repo_digests(docker, image)?
        .into_iter()
        .find(|d| d.starts_with(&prefix))
        .ok_or_else(|| {
            Error::env(format!(
                "`docker push` of `{repo}:{tag}` recorded no digest of the image"
            ))
        })
}

/// Pulls `reference` (`HOST/PATH@sha256:...`) from its registry (`docker pull`).
pub fn pull_image(docker: &Docker, reference: &str) -> Result<()> {
    let what = format!("`docker pull` of `{reference}`");
    runtime().block_on(async {
        let options = CreateImageOptions {
            from_image: Some(reference.to_owned()),
            ..Default::default()
        };
        let credentials = credentials(registry_host(reference));
        let mut stream = docker.create_image(Some(options), None, credentials);
        while let Some(step) = stream.next().await {
            let step = step.map_err(|e| daemon_failed(&what, e))?;
            if let Some(detail) = step.error_detail.and_then(|d| d.message) {
                return Err(daemon_failed(&what, detail));
            }
        }
        Ok(())
    })
}

/// The digests under which registries hold an image (`REPO@sha256:...`, as `docker push`
/// and `docker pull` record them).
pub fn repo_digests(docker: &Docker, tag: &str) -> Result<Vec<String>> {
    let inspect = runtime()
        .block_on(docker.inspect_image(tag))
        .map_err(|e| Error::env(format!("the daemon has no image `{tag}`: {e}")))?;
    Ok(inspect.repo_digests.unwrap_or_default())
}

/// An image of the daemon r2e made: its ID, tags, creation time (seconds since the epoch),
/// size and labels.
pub struct ImageInfo {
    pub id: String,
    pub tags: Vec<String>,
    pub created: i64,
    pub size: u64,
    pub labels: HashMap<String, String>,
}

/// The daemon's images whose repository is `repo` (`r2e-base`, `r2e-env`).
pub fn list_images(docker: &Docker, repo: &str) -> Result<Vec<ImageInfo>> {
    let options = bollard::query_parameters::ListImagesOptions {
        filters: Some(HashMap::from([(
            "reference".to_owned(),
            vec![repo.to_owned()],
        )])),
        ..Default::default()
    };
    let images = runtime()
        .block_on(docker.list_images(Some(options)))
        .map_err(|e| Error::env(format!("cannot list the daemon's images: {e}")))?;
    Ok(images
        .into_iter()
        .map(|i| ImageInfo {
            id: i.id,
            tags: i.repo_tags,
            created: i.created,
            size: i.size.max(0) as u64,
            labels: i.labels,
        })
        .collect())
}

/// Removes an image unless a container or another image uses it: whether it was removed.
pub fn remove_unused_image(docker: &Docker, id: &str) -> Result<bool> {
    let options = bollard::query_parameters::RemoveImageOptions {
        force: false,
        ..Default::default()
    };
    match runtime().block_on(docker.remove_image(id, Some(options), None)) {
        Ok(_) => Ok(true),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404 | 409,
            ..
        }) => Ok(false),
        Err(e) => Err(Error::env(format!("cannot remove image `{id}`: {e}"))),
    }
}

/// Removes an image (for tests, and `gc`); an image that is not there is no error.
pub fn remove_image(docker: &Docker, tag: &str) -> Result<()> {
    let options = bollard::query_parameters::RemoveImageOptions {
        force: true,
        ..Default::default()
    };
    match runtime().block_on(docker.remove_image(tag, Some(options), None)) {
        Ok(_) => Ok(()),
        Err(bollard::errors::Error::DockerResponseServerError {
            status_code: 404, ..
        }) => Ok(()),
        Err(e) => Err(Error::env(format!("cannot remove image `{tag}`: {e}"))),
    }
}

/// A path in the image, relative to its root (tar entries are).
fn rel(path: &Path) -> &Path {
    path.strip_prefix("/").unwrap_or(path)
}

/// How a sandbox gets its daemon and image, the first time it runs a job, given the store
/// shared between hosts, if any.
pub type Setup = Box<
    dyn Fn(Option<std::sync::Arc<r2e_core::cache::remote::Remote>>) -> Result<(Docker, String)>
        + Send
        + Sync,
>;

/// Runs jobs in containers of one image.
pub struct DockerSandbox {
    ready: OnceLock<std::result::Result<(Docker, String), String>>,
    /// `None` when `ready` was given at construction.
    setup: Option<Setup>,
    /// The daemon alone, for jobs in environment images (they need no base image).
    daemon: OnceLock<std::result::Result<Docker, String>>,
    /// The store shared between hosts, which `setup` takes the base image from or puts it in.
    remote: std::sync::Mutex<Option<std::sync::Arc<r2e_core::cache::remote::Remote>>>,
}

impl DockerSandbox {
    pub fn new(docker: Docker, image: String) -> DockerSandbox {
        let ready = OnceLock::new();
        let _ = ready.set(Ok((docker, image)));
        DockerSandbox {
            ready,
            setup: None,
            daemon: OnceLock::new(),
            remote: Default::default(),
        }
    }

    /// A sandbox that connects and makes its image (`setup`) when it first runs a job: a
    /// build that runs no code needs no daemon. A failure is the build's (environmental),
    /// said by every job.
    pub fn lazy(setup: Setup) -> DockerSandbox {
        DockerSandbox {
            ready: OnceLock::new(),
            setup: Some(setup),
            daemon: OnceLock::new(),
            remote: Default::default(),
        }
    }

    fn target(&self) -> Result<(&Docker, &str)> {
        match self.ready.get_or_init(|| match &self.setup {
            Some(setup) => {
                let remote = self
                    .remote
                    .lock()
                    .unwrap_or_else(|e| e.into_inner())
                    .clone();
                setup(remote).map_err(|e| e.to_string())
            }
            None => Err("no daemon was given".into()),
        }) {
            Ok((docker, image)) => Ok((docker, image)),
            Err(why) => Err(Error::env(format!(
                "the docker sandbox is not ready: {why}"
            ))),
        }
    }

    /// The daemon, for a job in an environment image: the one set up, else connected to alone.
    fn daemon(&self) -> Result<&Docker> {
        if let Some(Ok((docker, _))) = self.ready.get() {
            return Ok(docker);
        }
        self.daemon
            .get_or_init(|| connect().map_err(|e| e.to_string()))
            .as_ref()
            .map_err(|why| Error::env(format!("the docker sandbox is not ready: {why}")))
    }

    async fn run_async(&self, docker: &Docker, image: &str, job: &Job) -> Result<Outcome> {
        let limits = &job.limits;
        // Each path once: writable where any of the job's lists makes it so.
        let mut mounts: std::collections::BTreeMap<&Path, bool> = std::collections::BTreeMap::new();
        // A job in an environment image finds its read-only folders in it: nothing of this
        // machine is mounted but its scratch (and writable) folders.
        for p in job
            .readonly
            .iter()
            .filter(|p| job.image.is_none() && p.exists())
        {
            mounts.entry(p).or_insert(false);
        }
        for p in std::iter::once(&job.scratch).chain(&job.writable) {
            mounts.insert(p, true);
        }
        let mut binds: Vec<String> = mounts
            .iter()
            .map(|(p, rw)| format!("{0}:{0}:{1}", p.display(), if *rw { "rw" } else { "ro" }))
            .collect();
        let mut tmpfs = HashMap::from([("/tmp".to_owned(), "rw,nosuid,size=256m".to_owned())]);
        for hidden in &job.hidden {
            // What it is, told by this machine's copy of the image's folder for an image.
            let here = match &job.image {
                Some(image) => image.on_host(hidden),
                None => Some(hidden.clone()),
            };
            let Some(here) = here else {
                return Err(Error::internal(format!(
                    "`{}` is to be hidden, but the image's folders do not hold it",
                    hidden.display()
                )));
            };
            if here.is_dir() {
                tmpfs.insert(hidden.display().to_string(), "ro,size=1k".into());
            } else if here.exists() {
                binds.push(format!(
                    "{}:{}:ro",
                    empty_file()?.display(),
                    hidden.display()
                ));
            }
        }
        // Code runs as the unprivileged user: its scratch and writable folders are its own.
        if crate::sandbox::local::is_root() {
            for dir in std::iter::once(&job.scratch).chain(&job.writable) {
                crate::sandbox::local::give_to(dir, USER);
            }
        }
        // The job's variables over the fixed ones, as the local backend sets them.
        let env: Vec<String> = crate::sandbox::local::fixed_env(&job.scratch)
            .into_iter()
            .chain(job.env.iter().cloned())
            .collect::<std::collections::BTreeMap<String, String>>()
            .into_iter()
            .map(|(k, v)| format!("{k}={v}"))
            .collect();
        let mut cmd = vec![job.program.to_string_lossy().into_owned()];
        cmd.extend(job.args.iter().cloned());
        let image = job.image.as_ref().map_or(image, |i| i.tag.as_str());
        let body = ContainerCreateBody {
            image: Some(image.to_owned()),
            cmd: Some(cmd),
            entrypoint: Some(vec![]),
            env: Some(env),
            user: Some(format!("{USER}:{USER}")),
            working_dir: Some(job.scratch.display().to_string()),
            network_disabled: Some(!job.network),
            labels: Some(HashMap::from([(
                "r2e.job".to_owned(),
                std::process::id().to_string(),
            )])),
            host_config: Some(HostConfig {
                binds: Some(binds),
                tmpfs: Some(tmpfs),
                network_mode: Some(if job.network { "bridge" } else { "none" }.into()),
                memory: Some((limits.memory_mib << 20) as i64),
                memory_swap: Some((limits.memory_mib << 20) as i64),
                pids_limit: Some(limits.processes as i64),
                nano_cpus: Some(1_000_000_000),
                ulimits: Some(vec![
                    ResourcesUlimits {
                        name: Some("cpu".into()),
                        soft: Some(limits.cpu_seconds as i64),
                        hard: Some(limits.cpu_seconds as i64),
                    },
                    ResourcesUlimits {
                        name: Some("fsize".into()),
                        soft: Some((limits.file_size_mib << 20) as i64),
                        hard: Some((limits.file_size_mib << 20) as i64),
                    },
                ]),
                readonly_rootfs: Some(true),
                cap_drop: Some(vec!["ALL".into()]),
                security_opt: Some(vec!["no-new-privileges".into()]),
                ..Default::default()
            }),
            ..Default::default()
        };
        let created = docker
            .create_container(None::<CreateContainerOptions>, body)
            .await
            .map_err(|e| match (&job.image, &e) {
                (
                    Some(run),
                    bollard::errors::Error::DockerResponseServerError {
                        status_code: 404, ..
                    },
                ) => Error::env(format!(
                    "the environment image `{}` is not in the Docker daemon: load its export with `r2e import DIR`",
                    run.tag
                )),
                _ => Error::env(format!("cannot create a container: {e}")),
            })?;
        let id = created.id;
        let outcome = finish(docker, &id, job)
            .await
            .and_then(|o| cannot_start(o, job));
        let _ = docker
            .remove_container(
                &id,
                Some(RemoveContainerOptions {
                    force: true,
                    v: true,
                    ..Default::default()
                }),
            )
            .await;
        outcome
    }
}

/// A program the container could not start (a library it needs missing from the image: the
/// loader's message, exit 127) is the sandbox's failure, never the job's outcome: an error of
/// the build. (A program that is not there fails the container's start already.)
fn cannot_start(outcome: Outcome, job: &Job) -> Result<Outcome> {
    let stderr = String::from_utf8_lossy(&outcome.stderr);
    let loader = stderr.contains("error while loading shared libraries")
        && stderr.starts_with(&*job.program.to_string_lossy());
    if outcome.exit == Exit::Code(127) && loader {
        return Err(Error::env(format!(
            "`{}` cannot start in the docker sandbox's image: {}",
            job.program.display(),
            stderr.lines().next().unwrap_or_default()
        )));
    }
    Ok(outcome)
}

/// Starts the container, waits for it within the wall-clock limit, and reads its output.
async fn finish(docker: &Docker, id: &str, job: &Job) -> Result<Outcome> {
    {
        let start = Instant::now();
        docker
            .start_container(id, None::<StartContainerOptions>)
            .await
            .map_err(|e| Error::env(format!("cannot start a container: {e}")))?;
        let wall = Duration::from_secs(job.limits.wall_seconds.max(1));
        let mut wait = docker.wait_container(id, None::<WaitContainerOptions>);
        let waited = tokio::time::timeout(wall, wait.next()).await;
        let code = match waited {
            Err(_) => None,
            // A non-zero exit comes as an error carrying the code.
            Ok(Some(Ok(r))) => Some(r.status_code),
            Ok(Some(Err(bollard::errors::Error::DockerContainerWaitError { code, .. }))) => {
                Some(code)
            }
            Ok(Some(Err(e))) => return Err(Error::env(format!("waiting for a container: {e}"))),
            Ok(None) => return Err(Error::env("the container's wait ended without a status")),
        };
        if code.is_none() {
            let _ = docker
                .kill_container(id, None::<bollard::query_parameters::KillContainerOptions>)
                .await;
        }
        let duration = start.elapsed();
        let (mut stdout, mut stderr) = (Vec::new(), Vec::new());
        let mut logs = docker.logs(
            id,
            Some(LogsOptions {
                stdout: true,
                stderr: true,
                ..Default::default()
            }),
        );
        while let Some(Ok(chunk)) = logs.next().await {
            match chunk {
                bollard::container::LogOutput::StdOut { message } => {
                    stdout.extend_from_slice(&message)
                }
                bollard::container::LogOutput::StdErr { message } => {
                    stderr.extend_from_slice(&message)
                }
                _ => {}
            }
        }
        let oom = docker
            .inspect_container(
                id,
                None::<bollard::query_parameters::InspectContainerOptions>,
            )
            .await
            .ok()
            .and_then(|c| c.state?.oom_killed)
            .unwrap_or(false);
        let exit = match code {
            None => Exit::Timeout,
            // Docker reports a process killed by signal N as 128 + N.
            Some(c) if c > 128 && c <= 128 + 64 => Exit::Signal((c - 128) as i32),
            Some(c) => Exit::Code(c as i32),
        };
        // The kernel's memory killer, as the local backend's cgroup reports it; CPU time and
        // file size show as their signals (SIGXCPU, SIGXFSZ), as there.
        let limit_hit = oom.then_some("memory");
        Ok(Outcome {
            exit,
            stdout,
            stderr,
            duration,
            limit_hit,
        })
    }
}

impl Sandbox for DockerSandbox {
    fn run(&self, job: &Job) -> Result<Outcome> {
        std::fs::create_dir_all(job.scratch.join(".tmp"))?;
        // A job in an environment image needs the daemon, not the base image.
        let (docker, image) = match &job.image {
            Some(run) => (self.daemon()?, run.tag.as_str()),
            None => self.target()?,
        };
        runtime().block_on(self.run_async(docker, image, job))
    }

    fn describe(&self) -> String {
        match self.ready.get() {
            Some(Ok((_, image))) => format!("docker ({image})"),
            _ => "docker".into(),
        }
    }

    /// `docker-2`: the name carries the version of the backend's behaviour, so that results
    /// of an older one are not reused (2: a hidden file is an empty regular file, not
    /// `/dev/null`, so that a candidate's module keeps the original's `__file__`).
    fn backend(&self) -> r2e_core::keys::SandboxBackend {
        r2e_core::keys::SandboxBackend::Docker
    }

    fn isolated(&self) -> bool {
        true
    }

    fn share_through(&self, remote: std::sync::Arc<r2e_core::cache::remote::Remote>) {
        *self.remote.lock().unwrap_or_else(|e| e.into_inner()) = Some(remote);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn debian_suites_are_found() {
        assert_eq!(debian_suite("debian:bookworm-slim"), Some("bookworm"));
        assert_eq!(debian_suite("debian:trixie"), Some("trixie"));
        assert_eq!(
            debian_suite("docker.io/library/debian:stable"),
            Some("stable")
        );
        assert_eq!(debian_suite("debian:12"), None);
        assert_eq!(debian_suite("ubuntu:noble"), None);
    }

    fn outcome(code: i32, stderr: &str) -> Outcome {
        Outcome {
            exit: Exit::Code(code),
            stdout: Vec::new(),
            stderr: stderr.as_bytes().to_vec(),
            duration: Duration::ZERO,
            limit_hit: None,
        }
    }

    #[test]
    fn a_program_the_image_cannot_load_is_the_sandboxs_failure_not_an_outcome() {
        let job = Job {
            program: "/cache/tools/uv".into(),
            args: vec![],
            env: vec![],
            scratch: "/scratch".into(),
            writable: vec![],
            readonly: vec![],
            hidden: vec![],
            network: false,
            limits: super::super::Limits::default(),
            image: None,
        };
        let missing = "/cache/tools/uv: error while loading shared libraries: librt.so.1: cannot open shared object file: No such file or directory\n";
        let err = cannot_start(outcome(127, missing), &job).unwrap_err();
        assert!(err.to_string().contains("librt.so.1"), "{err}");
        // The job's own exit 127, or its own text, stays its outcome.
        assert!(cannot_start(outcome(127, "command not found\n"), &job).is_ok());
        assert!(cannot_start(outcome(1, missing), &job).is_ok());
    }
}
