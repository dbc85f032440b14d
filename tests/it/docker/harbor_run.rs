//! `harbor run` itself on an export: Harbor 0.25.0 (from the package index) runs every task
//! of `r2e export --format harbor` against the machine's Docker daemon, its `oracle` agent (the
//! task's `solve.sh`) scored 1 on each and its `nop` agent (no change) 0, no trial failing.
//!
//! Harbor needs Python 3.12 and Docker Compose v2, which Debian 12 has not: it runs in a
//! Debian 13 root made with `debootstrap` once per machine (in the target folder), the daemon's
//! socket bound into it, in a mount namespace of its own (`unshare --mount`), so that every
//! mount it needs is gone with the process, whatever becomes of the test.
//!
//! The tasks say `network_mode = "no-network"`. Harbor's `docker` environment enforces that
//! only with its egress control, which needs two images it names by digest on Docker Hub (its
//! probe of the daemon's kernel, `alpine@sha256:…`, and its sidecar's base,
//! `gogost/gost@sha256:…`); where they cannot be pulled, it refuses the task. Harbor takes a
//! custom environment class (`--env module:Class`): the export's `harbor/r2e_harbor_env.py`
//! (`src/harbor_env.py`) is Harbor's Docker environment that, where that egress control is off, enforces no-network with Harbor's
//! own `docker-compose-no-network.yaml` (`network_mode: none` on `main`, as its Compose-on-a-VM
//! environments do), and fails the trial unless the container has no network interface but
//! loopback.

use std::path::{Path, PathBuf};
use std::process::Command;
use std::time::Duration;

use crate::common;
use crate::docker::TEXT_PY;

/// Makes the root `$1` (Debian 13, with `docker`, `docker compose` and Harbor in `/opt/harbor`),
/// keeping what it downloads in `$2` (the system's packages and Harbor's wheels, for the next
/// time it is made); `$3` is the machine's CA bundle, for the package index, or empty. Runs in
/// a mount namespace of its own. The root's marker holds this script, so that a root made by
/// another, or left half made by a run that was killed, is made again.
const MAKE_ROOT: &str = r#"
root=$1 cache=$2 ca=$3
mkdir -p "$cache/debs" "$cache/apt/partial" "$cache/wheels"
debootstrap --variant=minbase --cache-dir="$cache/debs" trixie "$root" http://deb.debian.org/debian >"$cache/debootstrap.log" 2>&1 || { tail -n 30 "$cache/debootstrap.log" >&2; exit 1; }
cp /etc/resolv.conf "$root/etc/resolv.conf"
pip_cert=
if [ -n "$ca" ]; then
    mkdir -p "$root/etc/ssl"
    cp "$ca" "$root/etc/ssl/host-ca.crt"
    pip_cert=/etc/ssl/host-ca.crt
fi
# debootstrap's copies of what it keeps in the cache.
rm -f "$root"/var/cache/apt/archives/*.deb
mount -t proc proc "$root/proc"
mount --bind "$cache/apt" "$root/var/cache/apt/archives"
mount --bind "$cache/wheels" "$root/mnt"
in_root() {
    chroot "$root" env -i PATH=/usr/sbin:/usr/bin:/sbin:/bin HOME=/root LC_ALL=C.UTF-8 \
        DEBIAN_FRONTEND=noninteractive PIP_CERT="$pip_cert" PIP_DISABLE_PIP_VERSION_CHECK=1 \
        ${PIP_INDEX_URL:+PIP_INDEX_URL="$PIP_INDEX_URL"} \
        ${http_proxy:+http_proxy="$http_proxy"} ${https_proxy:+https_proxy="$https_proxy"} \
        ${no_proxy:+no_proxy="$no_proxy"} "$@"
}
in_root apt-get update -q
in_root apt-get install -y -q --no-install-recommends python3-venv docker-cli docker-compose
rm -rf "$root"/var/lib/apt/lists/* "$root"/var/cache/apt/*.bin
in_root python3 -m venv /opt/harbor
if ! in_root /opt/harbor/bin/pip install -q --no-index --find-links /mnt harbor==0.25.0 2>/dev/null; then
    in_root /opt/harbor/bin/pip download -q -d /mnt harbor==0.25.0
    in_root /opt/harbor/bin/pip install -q --no-index --find-links /mnt harbor==0.25.0
fi
# Where the daemon's socket is bound when Harbor runs (`/var/run` is `/run` there).
touch "$root/run/docker.sock"
"#;

/// `harbor run ARGS…` (after `$1` the root, `$2` the test's folder, bound at the same path in
/// the root so that the paths Harbor and Compose read and write are the same inside and out,
/// `$3` the daemon's socket or empty), in a mount namespace of its own: `/proc`, and a `/tmp`
/// and a home on a tmpfs, so that the root is left as it was.
const RUN_HARBOR: &str = r#"
root=$1 work=$2 sock=$3
shift 3
mount -t proc proc "$root/proc"
mount -t tmpfs tmpfs "$root/tmp"
if [ -n "$sock" ]; then mount --bind "$sock" "$root/run/docker.sock"; fi
mkdir -p "$root$work"
mount --bind "$work" "$root$work"
exec chroot "$root" env -i PATH=/opt/harbor/bin:/usr/bin:/bin HOME=/tmp/home LC_ALL=C.UTF-8 \
    HARBOR_TELEMETRY=0 LITELLM_LOCAL_MODEL_COST_MAP=True PYTHONPATH="$work/harbor-env" \
    ${DOCKER_HOST:+DOCKER_HOST="$DOCKER_HOST"} harbor run "$@"
"#;

/// `unshare`'s options for a mount namespace of the command's own, whose mounts never reach the
/// machine's and are gone when it ends.
const PRIVATE_MOUNTS: [&str; 3] = ["--mount", "--propagation", "private"];

/// Whether `tool` is a file in a folder of `PATH`.
fn on_path(tool: &str) -> bool {
    std::env::var_os("PATH")
        .is_some_and(|path| std::env::split_paths(&path).any(|dir| dir.join(tool).is_file()))
}

/// The mount points at or under `dir` in this process's mount namespace (the machine's).
fn mounts_under(dir: &Path) -> Vec<String> {
    let dir = dir.to_string_lossy().into_owned();
    std::fs::read_to_string("/proc/self/mountinfo")
        .unwrap()
        .lines()
        .filter_map(|l| l.split(' ').nth(4).map(str::to_owned))
        .filter(|m| m == &dir || m.starts_with(&format!("{dir}/")))
        .collect()
}

/// The Debian 13 root with Harbor, made once per machine in the target folder.
fn harbor_root() -> PathBuf {
    let dir = common::provisioned("harbor-trixie", |dir| {
        let root = dir.join("root");
        let marker = dir.join("root.done");
        if std::fs::read_to_string(&marker).ok().as_deref() == Some(MAKE_ROOT) {
            return;
        }
        let _ = std::fs::remove_file(&marker);
        if root.exists() {
            // Never removes what a mount shows there (the machine's `/proc`, its socket).
            let mounted = mounts_under(&root);
            assert!(mounted.is_empty(), "mounted under the root: {mounted:?}");
            let out = Command::new("rm")
                .args(["-rf", "--one-file-system"])
                .arg(&root)
                .output()
                .unwrap();
            assert!(
                out.status.success(),
                "{}",
                String::from_utf8_lossy(&out.stderr)
            );
        }
        let ca = ["PIP_CERT", "SSL_CERT_FILE"]
            .iter()
            .filter_map(|v| std::env::var_os(v).map(PathBuf::from))
            .chain([PathBuf::from("/etc/ssl/certs/ca-certificates.crt")])
            .find(|p| p.is_file())
            .unwrap_or_default();
        let out = Command::new("unshare")
            .args(PRIVATE_MOUNTS)
            .args(["sh", "-euc", MAKE_ROOT, "sh"])
            .arg(&root)
            .arg(dir.join("cache"))
            .arg(&ca)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "cannot make Harbor's Debian 13 root (debootstrap, then apt-get from Debian's \
             archive and pip from the package index in it): {}{}",
            String::from_utf8_lossy(&out.stdout),
            String::from_utf8_lossy(&out.stderr)
        );
        std::fs::write(&marker, MAKE_ROOT).unwrap();
    });
    dir.join("root")
}

/// The daemon's socket to bind into the root, and the `DOCKER_HOST` to give Harbor there.
fn daemon() -> (String, Option<String>) {
    match std::env::var("DOCKER_HOST") {
        Ok(host) => match host.strip_prefix("unix://") {
            Some(path) => (path.to_owned(), None),
            None => (String::new(), Some(host)),
        },
        Err(_) => ("/var/run/docker.sock".to_owned(), None),
    }
}

/// `harbor run` with `agent` on every task under `tasks`, four trials at a time, its job in
/// `work/jobs/AGENT`: that folder.
fn harbor_run(root: &Path, work: &Path, tasks: &Path, agent: &str) -> PathBuf {
    // The folder is made in the root (on its tmpfs when under `/tmp`) through no symbolic
    // link of the root's, which would lead out of it (`/var/run` is one).
    for folder in work.ancestors() {
        let inside = root.join(folder.strip_prefix("/").unwrap());
        assert!(
            !inside.is_symlink(),
            "{} is a symbolic link in the root",
            folder.display()
        );
    }
    let (socket, host) = daemon();
    let jobs = work.join("jobs");
    let mut cmd = assert_cmd::Command::new("unshare");
    cmd.args(PRIVATE_MOUNTS)
        .args(["sh", "-euc", RUN_HARBOR, "sh"])
        .arg(root)
        .arg(work)
        .arg(&socket)
        .arg("-p")
        .arg(tasks)
        .args(["--agent", agent, "--env", "r2e_harbor_env:NoNetworkDocker"])
        .args(["-n", "4", "-y", "--job-name", agent, "-o"])
        .arg(&jobs)
        .env_remove("DOCKER_HOST")
        .timeout(Duration::from_secs(1200));
    if let Some(host) = host {
        cmd.env("DOCKER_HOST", host);
    }
    let out = cmd.output().unwrap();
    assert!(
        out.status.success(),
        "harbor run --agent {agent}: {}{}",
        String::from_utf8_lossy(&out.stdout),
        String::from_utf8_lossy(&out.stderr)
    );
    jobs.join(agent)
}

/// The `result.json` of each trial of the job in `job`.
fn trials(job: &Path) -> Vec<serde_json::Value> {
    let mut found: Vec<serde_json::Value> = std::fs::read_dir(job)
        .unwrap()
        .flatten()
        .map(|e| e.path().join("result.json"))
        .filter(|p| p.is_file())
        .map(|p| serde_json::from_slice(&std::fs::read(p).unwrap()).unwrap())
        .collect();
    found.sort_by_key(|t| t["task_name"].as_str().unwrap_or_default().to_owned());
    found
}

/// Removes, when dropped, what Harbor's trials under `jobs` may have left in the daemon when
/// a run was cut short (it takes each Compose project down itself when a trial ends): each
/// trial's containers, network and image (Compose's project is `TRIAL__env`, lowercased), and
/// the export's environment images, whose tags no other test's export has.
struct Leftovers {
    jobs: PathBuf,
    images: Vec<String>,
}

impl Drop for Leftovers {
    fn drop(&mut self) {
        let docker = |args: &[&str]| {
            Command::new("docker")
                .args(args)
                .output()
                .map(|o| String::from_utf8_lossy(&o.stdout).into_owned())
                .unwrap_or_default()
        };
        let trials = walkdir::WalkDir::new(&self.jobs)
            .min_depth(2)
            .max_depth(2)
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_dir());
        for trial in trials {
            let project = format!("{}__env", trial.file_name().to_string_lossy())
                .to_lowercase()
                .replace(
                    |c: char| !c.is_ascii_alphanumeric() && c != '_' && c != '-',
                    "-",
                );
            let label = format!("label=com.docker.compose.project={project}");
            for id in docker(&["ps", "-aq", "--filter", &label]).split_whitespace() {
                docker(&["rm", "-f", "-v", id]);
            }
            docker(&["network", "rm", &format!("{project}_default")]);
            docker(&["rmi", "-f", &format!("{project}-main")]);
        }
        for image in &self.images {
            docker(&["rmi", "-f", image]);
        }
    }
}

/// The export of a two-instance fixture with three bug-fix tasks per instance (seven tasks),
/// run by Harbor: `oracle` scores 1 on each (the verdict a pass), `nop` 0 (a fail), and no
/// trial fails; each ran in a container with no network but loopback.
#[test]
fn harbor_itself_scores_exported_tasks() {
    let Some(_daemon) = common::docker() else {
        return;
    };
    if !common::require(
        common::is_root(),
        "root (Harbor's Debian 13 root is made with debootstrap and entered with chroot)",
        "run the tests as root, as `.ci/run` does",
    ) {
        return;
    }
    let tools = ["debootstrap", "unshare", "chroot", "mount"];
    if !common::require(
        tools.iter().all(|t| on_path(t)),
        &format!("one of {tools:?} (Harbor runs in a Debian 13 root made with debootstrap)"),
        "apt-get install debootstrap util-linux coreutils mount",
    ) {
        return;
    }
    let started = std::time::Instant::now();
    let root = harbor_root();
    eprintln!("Harbor's root: {:.0?}", started.elapsed());

    let p = common::Project::new(
        &format!("//- pkg/__init__.py\n//- pkg/text.py\n{TEXT_PY}"),
        "[env]\ninstaller = \"pip\"\n\n[bugfix]\nper_function = 3\n",
    );
    // A commit of its own date: the environment image's tag names the commit, and this test
    // removes its image, which no other test's export may share.
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "."],
        &["commit", "-qm", "one"],
    ] {
        common::git(&p.path().join("repo"), Some("2024-03-01T12:00:00Z"), args);
    }
    common::offline_build(p.path());
    // The folder Harbor reads and writes in, by the path it has in the root too.
    let work = p.path().canonicalize().unwrap();
    let dir = work.join("harbor");
    assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .args(["export", "--format", "harbor"])
        .arg(&dir)
        .current_dir(p.path())
        .envs(common::offline_env())
        .timeout(Duration::from_secs(600))
        .assert()
        .success();
    let registry: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.join("registry.json")).unwrap()).unwrap();
    let mut tasks: Vec<String> = registry[0]["tasks"]
        .as_array()
        .unwrap()
        .iter()
        .map(|t| t["name"].as_str().unwrap().to_owned())
        .collect();
    tasks.sort();
    let bugfix = tasks.iter().filter(|t| t.contains("-bug-")).count();
    assert!(tasks.len() - bugfix == 2 && bugfix >= 3, "{tasks:?}");
    // The export's environment images, which the tasks' Dockerfiles start from.
    let mut images: Vec<String> = walkdir::WalkDir::new(dir.join("tasks"))
        .into_iter()
        .flatten()
        .filter(|e| e.file_name() == "Dockerfile")
        .flat_map(|e| {
            let text = std::fs::read_to_string(e.path()).unwrap();
            text.lines()
                .filter_map(|l| l.strip_prefix("FROM "))
                .map(|l| l.trim().to_owned())
                .collect::<Vec<_>>()
        })
        .collect();
    images.sort();
    images.dedup();
    assert!(
        !images.is_empty() && images.iter().all(|i| i.starts_with("r2e-env:")),
        "{images:?}"
    );
    let _leftovers = Leftovers {
        jobs: work.join("jobs"),
        images,
    };

    let env = work.join("harbor-env");
    std::fs::create_dir_all(&env).unwrap();
    // The export's own environment class (`harbor/r2e_harbor_env.py`).
    std::fs::copy(
        dir.join("harbor/r2e_harbor_env.py"),
        env.join("r2e_harbor_env.py"),
    )
    .unwrap();
    for (agent, reward, outcome) in [("oracle", 1.0, "pass"), ("nop", 0.0, "fail")] {
        let started = std::time::Instant::now();
        let job = harbor_run(&root, &work, &dir.join("tasks"), agent);
        eprintln!("harbor run --agent {agent}: {:.0?}", started.elapsed());
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(job.join("result.json")).unwrap()).unwrap();
        assert_eq!(summary["n_total_trials"], tasks.len(), "{summary:#}");
        assert_eq!(summary["stats"]["n_errored_trials"], 0, "{summary:#}");
        let trials = trials(&job);
        let ran: Vec<&str> = trials
            .iter()
            .map(|t| t["task_name"].as_str().unwrap())
            .collect();
        assert_eq!(ran, tasks, "{agent}");
        for trial in &trials {
            let name = trial["trial_name"].as_str().unwrap();
            assert!(
                trial["exception_info"].is_null(),
                "{agent} {name}: {:#}",
                trial["exception_info"]
            );
            assert_eq!(
                trial["verifier_result"]["rewards"]["reward"].as_f64(),
                Some(reward),
                "{agent} {name}: {:#}",
                trial["verifier_result"]
            );
            let verdict: serde_json::Value = serde_json::from_slice(
                &std::fs::read(job.join(name).join("verifier/r2e-verdict.json")).unwrap(),
            )
            .unwrap();
            assert_eq!(verdict["outcome"], outcome, "{agent} {name}: {verdict:#}");
        }
    }
    // Nothing of the runs is left mounted on the machine.
    assert_eq!(mounts_under(&root), Vec::<String>::new());
}
