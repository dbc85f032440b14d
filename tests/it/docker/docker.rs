//! The Docker backend's parts against the machine's Docker daemon: `r2e image base` makes the
//! base image (the configured interpreter and the pinned coverage.py) once, and jobs run in its
//! containers with no network, a read-only root, the unprivileged user, nothing of this machine
//! but their own folders, and their limits.

use crate::common;
use std::path::PathBuf;

use assert_cmd::Command;
use r2e_exec::sandbox::docker::DockerSandbox;
use r2e_exec::sandbox::{Exit, Job, Limits, Sandbox};

/// `r2e image base` for a pipeline in `dir`, offline (coverage.py from the wheelhouse): the tag
/// and what it said.
fn image_base(dir: &std::path::Path) -> (String, String) {
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .args(["image", "base"])
        .current_dir(dir)
        .envs(common::offline_env())
        .timeout(std::time::Duration::from_secs(600))
        .assert()
        .success()
        .get_output()
        .clone();
    (
        String::from_utf8(out.stdout).unwrap().trim().to_owned(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

/// The interpreter `python3` is: the one the image holds, at its own path.
fn python() -> (PathBuf, String) {
    let out = std::process::Command::new("python3")
        .args([
            "-I",
            "-c",
            "import sys; print(sys.executable); print(sys.version.split()[0])",
        ])
        .output()
        .unwrap();
    let text = String::from_utf8(out.stdout).unwrap();
    let mut lines = text.lines();
    (
        PathBuf::from(lines.next().unwrap()),
        lines.next().unwrap().to_owned(),
    )
}

#[test]
fn the_base_image_is_built_once_and_its_containers_hold_jobs_in() {
    let Some(daemon) = common::docker() else {
        return;
    };
    let p = common::Project::new("//- m.py\nX = 1\n", "");
    let (tag, said) = image_base(p.path());
    assert!(tag.starts_with("r2e-base:"), "{tag}");
    assert!(
        said.contains("base image built") || said.contains("present"),
        "{said}"
    );
    // The same interpreter and coverage: the same tag, nothing built.
    let (again, said) = image_base(p.path());
    assert_eq!(again, tag);
    assert!(said.contains("base image present"), "{said}");

    let sandbox = DockerSandbox::new(daemon, tag);
    let scratch = tempfile::tempdir().unwrap();
    let (python, version) = python();
    let job = |code: &str, limits: Limits| Job {
        program: python.clone(),
        args: vec!["-I".into(), "-c".into(), code.into()],
        env: vec![("GIVEN".into(), "yes".into())],
        scratch: scratch.path().to_path_buf(),
        writable: vec![],
        readonly: vec![],
        hidden: vec![],
        network: false,
        limits,
        image: None,
    };
    let small = Limits {
        wall_seconds: 60,
        ..Limits::default()
    };

    // The same Python (its version) and the pinned coverage, as the unprivileged user; the
    // job's variables and none of this machine's: not `CARGO_MANIFEST_DIR`, which cargo sets for
    // the test process. (A variable of the process's own, not one the test sets: the tests
    // share the process, and a variable set in it would reach every other test's children.)
    let host = "CARGO_MANIFEST_DIR";
    assert!(
        std::env::var_os(host).is_some(),
        "the test process has no `{host}` (run the tests with cargo)"
    );
    let out = sandbox
        .run(&job(
            &format!("import coverage, os, sys; print(coverage.__version__, os.getuid(), sys.version.split()[0], os.environ.get('GIVEN'), os.environ.get('{host}'))"),
            small.clone(),
        ))
        .unwrap();
    let pinned = r2e_exec::py::COVERAGE.split("==").nth(1).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("{pinned} 65534 {version} yes None"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // No network: only the loopback interface, and nothing reachable.
    let out = sandbox
        .run(&job(
            "import socket\nprint([n for _, n in socket.if_nameindex()])\ntry:\n    socket.create_connection(('1.1.1.1', 53), timeout=3); print('reached')\nexcept OSError as e:\n    print('unreachable')",
            small.clone(),
        ))
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "['lo']\nunreachable",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A read-only root, a writable scratch (the host sees what it wrote), and nothing of this
    // machine's folders: not the test's own, not the home folder's files.
    let here = std::env::current_dir().unwrap();
    let out = sandbox
        .run(&job(
            &format!(
                "import os\ntry:\n    open('/etc/x', 'w'); print('root writable')\nexcept OSError:\n    print('root read-only')\nopen('out.txt', 'w').write('from the job')\nprint(os.path.exists({here:?}), sorted(os.listdir('/root')) if os.path.isdir('/root') else [])",
                here = here.to_string_lossy()
            ),
            small.clone(),
        ))
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!(
            "root read-only\nFalse [{}]",
            root_entries(&python).join(", ")
        ),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    assert_eq!(
        std::fs::read_to_string(scratch.path().join("out.txt")).unwrap(),
        "from the job"
    );

    // Limits: memory beyond the job's is the kernel's kill, classed `memory`; the wall clock
    // ends a job that sleeps.
    let out = sandbox
        .run(&job(
            "x = bytearray(600 << 20)\nx[::4096] = b'x' * len(x[::4096])\nprint('survived')",
            Limits {
                memory_mib: 128,
                ..small.clone()
            },
        ))
        .unwrap();
    assert_eq!(out.limit_hit, Some("memory"), "{out:?}");
    assert!(!String::from_utf8_lossy(&out.stdout).contains("survived"));
    let out = sandbox
        .run(&job(
            "import time; time.sleep(60)",
            Limits {
                wall_seconds: 2,
                ..small.clone()
            },
        ))
        .unwrap();
    assert_eq!(out.exit, Exit::Timeout, "{out:?}");

    // `venv` makes an environment with pip in the image, as environments are built: the
    // interpreter's `ensurepip` finds its wheels there (Debian's python3 takes them from
    // `/usr/share/python-wheels`, outside its own folders, which the image carries).
    let out = sandbox
        .run(&job(
            "import os, subprocess, sys, venv\nvenv.create('v', with_pip=True)\nr = subprocess.run([os.path.join('v', 'bin', 'python'), '-m', 'pip', '--version'], capture_output=True, text=True)\nprint(r.stdout.split()[0], r.returncode)",
            Limits {
                wall_seconds: 120,
                ..small.clone()
            },
        ))
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "pip 0",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // A hidden file reads empty and stays a regular file (Python's importer finds a module only
    // in one), as in the local backend; a shell and the common tools are there, and a job's
    // PATH is its own.
    let folder = tempfile::tempdir().unwrap();
    std::fs::write(folder.path().join("original.py"), "SECRET = 1\n").unwrap();
    let hidden = folder.path().join("original.py");
    let mut probe = job(
        &format!(
            "import os, stat, subprocess\np = {hidden:?}\nprint(repr(open(p).read()), stat.S_ISREG(os.stat(p).st_mode), os.environ['PATH'])\nprint(subprocess.run(['sh', '-c', 'echo hi | grep -c hi'], capture_output=True, text=True).stdout.strip())",
            hidden = hidden.to_string_lossy()
        ),
        small.clone(),
    );
    probe.readonly = vec![folder.path().to_path_buf()];
    probe.hidden = vec![hidden.clone()];
    probe.env.push(("PATH".into(), "/usr/bin:/bin".into()));
    let out = sandbox.run(&probe).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        "'' True /usr/bin:/bin\n1",
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
}

/// What `/root` holds in the image, as Python prints the names: the first folder of the
/// interpreter's path under it, or nothing when the interpreter is elsewhere.
fn root_entries(python: &std::path::Path) -> Vec<String> {
    let real = std::fs::canonicalize(python).unwrap();
    match real.strip_prefix("/root") {
        Ok(rest) => vec![
            rest.components()
                .next()
                .unwrap()
                .as_os_str()
                .to_string_lossy()
                .into_owned(),
        ]
        .into_iter()
        .map(|n| format!("'{n}'"))
        .collect(),
        Err(_) => vec![],
    }
}

/// `r2e build --json` in `dir`, offline, against the daemon at `host` (`DOCKER_HOST`), or the
/// machine's own with `None`.
pub(crate) fn build_against(dir: &std::path::Path, host: Option<&str>) -> std::process::Output {
    let mut command = Command::cargo_bin("r2e").unwrap();
    command
        .args(["build", "--json"])
        .current_dir(dir)
        .envs(common::offline_env())
        .env_remove("DOCKER_HOST")
        .timeout(std::time::Duration::from_secs(600));
    if let Some(host) = host {
        command.env("DOCKER_HOST", host);
    }
    command.output().unwrap()
}

/// Asserts that a build of the two-candidate project failed for the daemon (`why`): exit 1, the
/// reason said and listed under `retry`, to be tried again. Returns what it said.
fn failed_for_the_daemon(out: &std::process::Output, why: &str) -> String {
    let said = String::from_utf8_lossy(&out.stderr).into_owned();
    assert_eq!(out.status.code(), Some(1), "{said}");
    assert!(said.contains(why), "{said}");
    assert!(said.contains("next build tries again"), "{said}");
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    assert_eq!(summary["counts"]["candidates"], 2, "{summary}");
    assert!(
        summary["retry"][0].as_str().unwrap().contains(why),
        "{summary}"
    );
    said
}

#[test]
fn a_build_without_a_daemon_says_so_stores_nothing_of_it_and_keeps_what_it_did() {
    // No daemon is needed: the socket named does not exist.
    let p = common::Project::new(
        &format!("//- pkg/__init__.py\n//- pkg/text.py\n{TEXT_PY}"),
        "[env]\ninstaller = \"pip\"\n\n[sandbox]\nbackend = \"docker\"\n",
    );
    let socket = format!("unix://{}", p.path().join("no-daemon.sock").display());
    let run = || build_against(p.path(), Some(&socket));
    // An environmental failure: exit 1, the daemon named, and the outputs of what could run.
    failed_for_the_daemon(&run(), "cannot reach the Docker daemon");
    let functions = common::jsonl(&p.path().join("out/functions.jsonl"));
    assert_eq!(functions.len(), 3, "the analysis's outputs are written");
    assert!(common::jsonl(&p.path().join("out/dataset.jsonl")).is_empty());
    // Nothing of the failure was stored: no environment, no harness; the build's failure
    // report names it.
    let cache = p.path().join("cache");
    for bucket in ["envs-v4", "actions/generate-v5", "actions/validate-v10"] {
        let stored = std::fs::read_dir(cache.join(bucket))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(
            stored, 0,
            "{bucket} holds an entry of a build without a daemon"
        );
    }
    let failures = common::jsonl(&p.path().join("out/failures.jsonl"));
    assert_eq!(failures.len(), 1, "{failures:?}");
    assert_eq!(failures[0]["stage"], "env");
    assert!(
        failures[0]["reason"]
            .as_str()
            .unwrap()
            .contains("cannot reach the Docker daemon"),
        "{failures:?}"
    );
    // What it did is kept: the next build would parse, extract and slice nothing again, and
    // would build the environment (nothing of it was stored).
    let status = common::stdout_json(
        Command::cargo_bin("r2e")
            .unwrap()
            .args(["status", "--json"])
            .current_dir(p.path()),
    );
    assert_eq!(status["parse"]["would_run"], 0, "{status}");
    for stage in ["extract", "slice", "context"] {
        assert_eq!(status["analysis"][stage], 0, "{stage}: {status}");
    }
    assert_eq!(status["env"][0]["would_build"], true, "{status}");
    let second = run();
    assert_eq!(second.status.code(), Some(1));
    assert!(String::from_utf8_lossy(&second.stderr).contains("cannot reach the Docker daemon"));
}

/// `r2e check --candidates FILE --json` in `dir` (exit 0 or 1): one verdict per line.
fn check_lines(dir: &std::path::Path, candidates: &std::path::Path) -> Vec<serde_json::Value> {
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .args(["check", "--candidates"])
        .arg(candidates)
        .current_dir(dir)
        .timeout(std::time::Duration::from_secs(600))
        .output()
        .unwrap();
    assert!(
        matches!(out.status.code(), Some(0 | 1)),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );
    String::from_utf8(out.stdout)
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect()
}

/// The module of the export test: two functions with docstrings, each using the module.
pub(crate) const TEXT_PY: &str = "VOWELS = \"aeiou\"\n\n\ndef join_words(words):\n    return \" \".join(words)\n\n\ndef shout(text, times):\n    \"\"\"The text in capitals, `times` times, joined by spaces.\"\"\"\n    words = [text.upper()] * times\n    return join_words(words)\n\n\ndef count_vowels(text):\n    \"\"\"How many vowels the text holds.\"\"\"\n    total = 0\n    for c in text.lower():\n        if c in VOWELS:\n            total += 1\n    return total\n";

#[test]
fn an_export_imported_again_gives_the_same_verdicts_in_its_images_and_names_no_host_path() {
    let Some(daemon) = common::docker() else {
        return;
    };
    let p = common::Project::new(
        &format!("//- pkg/__init__.py\n//- pkg/text.py\n{TEXT_PY}"),
        "[env]\ninstaller = \"pip\"\n",
    );
    // A clean git checkout: its instances name the commit, which the export's folder of its
    // files stands for.
    for args in [
        &["init", "-q", "-b", "main"][..],
        &["add", "."],
        &[
            "-c",
            "user.name=t",
            "-c",
            "user.email=t@t",
            "commit",
            "-qm",
            "one",
        ],
    ] {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(p.path().join("repo"))
            .output()
            .unwrap();
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
    }
    common::offline_build(p.path());
    let instances = common::jsonl(&p.path().join("out/dataset.jsonl"));
    assert_eq!(instances.len(), 2, "{instances:?}");
    assert!(
        !instances[0]["commit"]
            .as_str()
            .unwrap()
            .starts_with("tree:")
    );

    // Candidates: the reference, a wrong one, and one that runs the original's source.
    let reference = TEXT_PY[TEXT_PY.find("def shout").unwrap()..]
        .split("\n\n")
        .next()
        .unwrap()
        .to_owned()
        + "\n";
    let cheat = "def shout(text, times):\n    import sys\n    here = [p for p in sys.path if p.endswith('repo')] + ['/r2e/repo']\n    ns = {}\n    for root in here:\n        try:\n            exec(open(root + '/pkg/text.py').read(), ns)\n        except OSError:\n            pass\n    return ns['shout'](text, times)\n";
    let lines = [
        ("reference", reference.as_str()),
        (
            "wrong",
            "def shout(text, times):\n    return text.upper()\n",
        ),
        ("cheat", cheat),
    ];
    let candidates = p.path().join("candidates.jsonl");
    let text: String = lines
        .iter()
        .map(|(label, c)| {
            serde_json::json!({"id": "r:pkg/text.py:shout", "candidate": c, "label": label})
                .to_string()
                + "\n"
        })
        .collect();
    std::fs::write(&candidates, text).unwrap();
    let here = check_lines(p.path(), &candidates);
    let passed: Vec<bool> = here.iter().map(|v| v["passed"] == true).collect();
    assert_eq!(passed, [true, false, false], "{here:?}");

    // The export: one image per repository, its archive, and nothing of this machine.
    let dir = p.path().join("export");
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .args(["export", "--json"])
        .arg(&dir)
        .current_dir(p.path())
        .envs(common::offline_env())
        .timeout(std::time::Duration::from_secs(600))
        .assert()
        .success()
        .get_output()
        .clone();
    let exported: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let images = exported["images"].as_array().unwrap();
    assert_eq!(images.len(), 1, "{exported}");
    let tag = images[0]["tag"].as_str().unwrap().to_owned();
    let sizes = &images[0]["sizes"];
    assert!(sizes["env"].as_u64().unwrap() > 0, "{sizes}");
    assert!(sizes["repo"].as_u64().unwrap() > 0, "{sizes}");
    for line in common::jsonl(&dir.join("out/dataset.jsonl")) {
        assert_eq!(line["image"], tag.as_str());
    }
    let host = p.path().to_string_lossy().into_owned();
    for folder in ["out", "repos"] {
        assert_eq!(
            common::found_under(&dir.join(folder), host.as_bytes()),
            None
        );
    }
    for file in ["pipeline.toml", "export.json"] {
        let text = std::fs::read_to_string(dir.join(file)).unwrap();
        assert!(
            !text.contains(&host),
            "{file} names a path of the building machine"
        );
    }

    // `gc` keeps the image the last build uses (a dry run: the daemon's images are not the
    // test's to remove).
    let would_remove = |dir: &std::path::Path| -> Vec<String> {
        let report = common::stdout_json(
            Command::cargo_bin("r2e")
                .unwrap()
                .args(["gc", "--images-older-than", "0s", "--dry-run", "--json"])
                .current_dir(dir),
        );
        report["images"]
            .as_array()
            .unwrap()
            .iter()
            .flat_map(|i| i["tags"].as_array().unwrap().clone())
            .map(|t| t.as_str().unwrap().to_owned())
            .collect()
    };
    assert!(!would_remove(p.path()).contains(&tag));
    // ... also when a newer base image is on the daemon (another pipeline's `base_image`).
    let newer = format!("r2e-base:test-newer-{}", std::process::id());
    import_empty_image(&newer);
    let removable = would_remove(p.path());
    r2e_exec::sandbox::docker::remove_image(&daemon, &newer).unwrap();
    assert!(!removable.contains(&tag), "{removable:?}");

    // Removed from the daemon, then imported: the same verdicts, in the image.
    r2e_exec::sandbox::docker::remove_image(&daemon, &tag).unwrap();
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .args(["import"])
        .arg(&dir)
        .timeout(std::time::Duration::from_secs(600))
        .assert()
        .success()
        .get_output()
        .clone();
    assert!(String::from_utf8_lossy(&out.stdout).contains(&tag));
    let there = check_lines(&dir, &candidates);
    assert_eq!(there, here, "the imported export's verdicts");

    // `r2e serve` on the imported export: sessions run in its image, a command cannot read the
    // repository's files there (the reference), and the reference earns the whole reward.
    {
        use serde_json::json;
        let server = common::serve::Server::start_with(
            &dir.join("pipeline.toml"),
            &dir.join("out"),
            &[],
            &[],
        );
        let listed = server.call("GET", "/v1/instances", None).json();
        let first = &listed["instances"][0];
        let (id, path) = (
            first["id"].as_str().unwrap(),
            first["path"].as_str().unwrap(),
        );
        let sid = server.open(id);
        let ran = server
            .json(
                "POST",
                &format!("/v1/sessions/{sid}/exec"),
                json!({"command": "ls -A /r2e/repo; python -c 'import pkg; print(pkg.__file__)'", "timeout_s": 30}),
            )
            .json();
        assert_eq!(ran["stdout"], "<workspace>/pkg/__init__.py\n", "{ran}");
        let reference = std::fs::read_to_string(p.path().join("repo").join(path)).unwrap();
        let put = server.call(
            "PUT",
            &format!("/v1/sessions/{sid}/files/{path}"),
            Some(reference.as_bytes()),
        );
        assert_eq!(put.status, 200, "{}", put.body);
        let submitted = server
            .call("POST", &format!("/v1/sessions/{sid}/submit"), None)
            .json();
        assert_eq!(submitted["reward"], 1.0, "{submitted}");
    }

    // Without its image the export cannot check (it mounts nothing of this machine instead);
    // its cache of verdicts removed, so that the check runs.
    r2e_exec::sandbox::docker::remove_image(&daemon, &tag).unwrap();
    std::fs::remove_dir_all(dir.join("cache")).unwrap();
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .args(["check", "--candidates"])
        .arg(&candidates)
        .current_dir(&dir)
        .timeout(std::time::Duration::from_secs(600))
        .output()
        .unwrap();
    // Not the candidates' doing: each verdict is `error` (exit 3), and says what to do.
    let said = String::from_utf8_lossy(&out.stderr);
    assert_eq!(out.status.code(), Some(3), "{said}");
    let verdicts: Vec<serde_json::Value> = String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert!(!verdicts.is_empty(), "{said}");
    for v in &verdicts {
        assert_eq!(v["outcome"], "error", "{v}");
        assert!(v["error"].as_str().unwrap().contains("r2e import"), "{v}");
    }

    // Once the repository changed and was built again, the image is another commit's: `gc`
    // would remove it.
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .arg("import")
        .arg(&dir)
        .output()
        .unwrap();
    assert!(out.status.success());
    p.write(
        "pkg/text.py",
        &TEXT_PY.replace("total += 1", "total = total + 1"),
    );
    common::offline_build(p.path());
    assert!(would_remove(p.path()).contains(&tag));

    // A damaged archive is refused before anything is loaded.
    let archive = dir.join(images[0]["archive"].as_str().unwrap());
    let mut bytes = std::fs::read(&archive).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&archive, bytes).unwrap();
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .args(["import"])
        .arg(&dir)
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("blake3"));
    r2e_exec::sandbox::docker::remove_image(&daemon, &tag).unwrap();
}

/// A second daemon of this machine's `dockerd`, as another host's: a daemon whose disk fills up
/// (its data root a small tmpfs, [`SmallDaemon::start`]), or one with a data root on the disk
/// ([`SmallDaemon::on_disk`]). It runs in a network namespace of its own (`unshare --net`), so
/// that its bridge and rules touch nothing of the machine's daemon, with its own data, exec root
/// and socket. Stopped, unmounted and removed when dropped.
pub(crate) struct SmallDaemon {
    dir: PathBuf,
    child: std::process::Child,
    disk: Option<common::Tmpfs>,
}

impl SmallDaemon {
    /// A daemon whose data root is a tmpfs of `size` (`vfs`, no bridge).
    fn start(size: &str) -> SmallDaemon {
        SmallDaemon::start_with(Some(size), "vfs", &["--bridge", "none"])
    }

    /// A daemon whose data root is a folder of the disk (`overlay2`), with its own bridge and
    /// its namespace's loopback up (a registry reached at `127.0.0.1` is taken as insecure,
    /// plain HTTP).
    pub(crate) fn on_disk() -> SmallDaemon {
        SmallDaemon::start_with(None, "overlay2", &[])
    }

    fn start_with(size: Option<&str>, driver: &str, args: &[&str]) -> SmallDaemon {
        static STARTED: std::sync::atomic::AtomicU32 = std::sync::atomic::AtomicU32::new(0);
        let n = STARTED.fetch_add(1, std::sync::atomic::Ordering::Relaxed);
        // A short folder: the daemon's and containerd's sockets live under it.
        let dir = PathBuf::from(format!("/tmp/r2e-dockerd-{}-{n}", std::process::id()));
        let _ = std::fs::remove_dir_all(&dir);
        std::fs::create_dir_all(dir.join("data")).unwrap();
        let disk = size.map(|size| common::Tmpfs::mount(&dir.join("data"), size));
        // Its own (empty) configuration: the machine's may name the data root too.
        std::fs::write(dir.join("daemon.json"), "{}").unwrap();
        let log = std::fs::File::create(dir.join("log")).unwrap();
        // `unshare` runs the shell, which brings the new namespace's loopback up and becomes
        // the daemon: one pid throughout.
        let child = std::process::Command::new("unshare")
            .arg("--net")
            .args(["sh", "-c", "ip link set lo up && exec dockerd \"$@\"", "sh"])
            .arg("--config-file")
            .arg(dir.join("daemon.json"))
            .arg("--data-root")
            .arg(dir.join("data"))
            .arg("--exec-root")
            .arg(dir.join("x"))
            .arg("--pidfile")
            .arg(dir.join("pid"))
            .arg("-H")
            .arg(format!("unix://{}", dir.join("s").display()))
            .args(["--storage-driver", driver])
            .args(args)
            .args(["--iptables=false", "--ip-masq=false"])
            .stdout(log.try_clone().unwrap())
            .stderr(log)
            .spawn()
            .expect("dockerd starts");
        let daemon = SmallDaemon { dir, child, disk };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(60);
        while daemon.docker(&["info"]).is_none() {
            assert!(
                std::time::Instant::now() < deadline,
                "the second dockerd did not answer: {}",
                std::fs::read_to_string(daemon.dir.join("log")).unwrap_or_default()
            );
            std::thread::sleep(std::time::Duration::from_millis(250));
        }
        daemon
    }

    /// Its `DOCKER_HOST`.
    pub(crate) fn host(&self) -> String {
        format!("unix://{}", self.dir.join("s").display())
    }

    /// Its network namespace.
    pub(crate) fn netns(&self) -> PathBuf {
        PathBuf::from(format!("/proc/{}/ns/net", self.child.id()))
    }

    /// What `docker ARGS` against this daemon printed, when it succeeded.
    pub(crate) fn docker(&self, args: &[&str]) -> Option<String> {
        let out = std::process::Command::new("docker")
            .arg("-H")
            .arg(self.host())
            .args(args)
            .output()
            .ok()?;
        out.status
            .success()
            .then(|| String::from_utf8_lossy(&out.stdout).into_owned())
    }
}

impl Drop for SmallDaemon {
    fn drop(&mut self) {
        // SAFETY: signals the daemon this test started (`unshare` execs it: the same pid),
        // which has not been reaped yet.
        unsafe { libc::kill(self.child.id() as i32, libc::SIGTERM) };
        let deadline = std::time::Instant::now() + std::time::Duration::from_secs(30);
        while matches!(self.child.try_wait(), Ok(None)) {
            if std::time::Instant::now() > deadline {
                let _ = self.child.kill();
            }
            std::thread::sleep(std::time::Duration::from_millis(100));
        }
        drop(self.disk.take());
        let _ = std::fs::remove_dir_all(&self.dir);
    }
}

#[test]
fn a_daemon_whose_disk_fills_up_during_an_image_build_fails_the_build_clearly_and_keeps_the_cache()
{
    if common::docker().is_none()
        || !common::require(
            common::is_root(),
            "root, to mount a small tmpfs and start a second dockerd on it",
            "run the tests as root, as `.ci/run` does",
        )
    {
        return;
    }
    let p = common::Project::new(
        &format!("//- pkg/__init__.py\n//- pkg/text.py\n{TEXT_PY}"),
        "[env]\ninstaller = \"pip\"\n\n[sandbox]\nbackend = \"docker\"\n",
    );
    let run = |host: Option<&str>| build_against(p.path(), host);

    // The base image (about 124 MB) does not fit in the daemon's 40 MB.
    let small = SmallDaemon::start("40m");
    let said = failed_for_the_daemon(
        &run(Some(&small.host())),
        "the Docker daemon's disk is full",
    );
    assert!(said.contains("no space left on device"), "{said}");
    // The daemon kept no image of the part it was sent.
    assert_eq!(small.docker(&["images", "-q"]).unwrap().trim(), "");
    drop(small);
    // Nothing of the failure was stored; what came before it (coverage.py for the image) was.
    let cache = p.path().join("cache");
    for bucket in ["envs-v4", "actions/generate-v5", "actions/validate-v10"] {
        let stored = std::fs::read_dir(cache.join(bucket))
            .map(|d| d.count())
            .unwrap_or(0);
        assert_eq!(stored, 0, "{bucket} holds an entry of the failed build");
    }
    let coverage = std::fs::read_dir(cache.join("tools-v1"))
        .unwrap()
        .flatten()
        .map(|e| e.path().join(".complete"))
        .find(|c| c.is_file())
        .expect("coverage.py for the image is in the cache");
    let installed = std::fs::metadata(&coverage).unwrap().modified().unwrap();

    // The machine's daemon has room: the same build goes on from what the first kept, and
    // builds everything the failure stopped.
    let second = run(None);
    let said = String::from_utf8_lossy(&second.stderr);
    assert_eq!(second.status.code(), Some(0), "{said}");
    let summary: serde_json::Value = serde_json::from_slice(&second.stdout).unwrap();
    assert_eq!(summary["counts"]["instances"], 2, "{summary}");
    assert_eq!(
        std::fs::metadata(&coverage).unwrap().modified().unwrap(),
        installed,
        "coverage.py was installed again"
    );
}

/// Each instance of the build in `dir` by id: its tests, coverage and expected outcomes.
fn instances_by_id(dir: &std::path::Path) -> std::collections::BTreeMap<String, serde_json::Value> {
    common::jsonl(&dir.join("out/dataset.jsonl"))
        .into_iter()
        .map(|i| {
            let id = i["id"].as_str().unwrap().to_owned();
            let kept = serde_json::json!({
                "tests": i["tests"],
                "branch_coverage": i["branch_coverage"],
                "line_coverage": i["line_coverage"],
                "expected": i["expected"],
                "harness_hash": i["harness_hash"],
            });
            (id, kept)
        })
        .collect()
}

#[test]
fn a_base_image_on_debians_packages_gives_the_local_instances_and_a_missing_one_is_named() {
    let Some(daemon) = common::docker() else {
        return;
    };
    let have_debian = r2e_exec::sandbox::docker::has_image(&daemon, "r2e-debian:bookworm");
    let can_debootstrap = std::process::Command::new("debootstrap")
        .arg("--version")
        .output()
        .is_ok_and(|o| o.status.success());
    if !common::require(
        have_debian || can_debootstrap,
        "Debian's `debootstrap` (the base image is made from Debian's packages here: no registry)",
        "apt-get install debootstrap; `.ci/run` does",
    ) {
        return;
    }
    let repo = format!("//- pkg/__init__.py\n//- pkg/text.py\n{TEXT_PY}");
    let local = common::Project::new(&repo, "[env]\ninstaller = \"pip\"\n");
    common::offline_build(local.path());
    let docker_toml = |image: &str| {
        format!(
            "[env]\ninstaller = \"pip\"\n\n[sandbox]\nbackend = \"docker\"\nbase_image = \"{image}\"\n"
        )
    };
    let p = common::Project::new(&repo, &docker_toml("debian:bookworm-slim"));
    // No registry serves `debian:bookworm-slim` here: it is made from Debian's packages, once.
    common::offline_build(p.path());
    let want = instances_by_id(local.path());
    assert_eq!(want.len(), 2, "{want:?}");
    assert_eq!(instances_by_id(p.path()), want);

    // The base image is the Debian system with the interpreter and coverage.py on top: its
    // jobs see Debian's files and tools, as the unprivileged user, with no network and a
    // read-only root.
    let (tag, _) = image_base(p.path());
    let labels = std::process::Command::new("docker")
        .args([
            "image",
            "inspect",
            "-f",
            "{{index .Config.Labels \"r2e.userland\"}}",
            &tag,
        ])
        .output()
        .unwrap();
    assert_eq!(
        String::from_utf8_lossy(&labels.stdout).trim(),
        "debian:bookworm-slim"
    );
    let sandbox = DockerSandbox::new(daemon.clone(), tag);
    let scratch = tempfile::tempdir().unwrap();
    let (python, version) = python();
    let job = Job {
        program: python,
        args: vec![
            "-I".into(),
            "-c".into(),
            "import coverage, os, socket, subprocess, sys\nprint(open('/etc/debian_version').read().split('.')[0], sys.version.split()[0], os.getuid())\nprint([n for _, n in socket.if_nameindex()])\ntry:\n    open('/etc/x', 'w'); print('root writable')\nexcept OSError:\n    print('root read-only')\nr = subprocess.run(['sh', '-c', 'dpkg-query -W dpkg'], capture_output=True, text=True)\nprint(r.stdout.split()[0] if r.returncode == 0 else r.stderr)".into(),
        ],
        env: vec![],
        scratch: scratch.path().to_path_buf(),
        writable: vec![],
        readonly: vec![],
        hidden: vec![],
        network: false,
        limits: Limits {
            wall_seconds: 60,
            ..Limits::default()
        },
        image: None,
    };
    let out = sandbox.run(&job).unwrap();
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("12 {version} 65534\n['lo']\nroot read-only\ndpkg"),
        "{}",
        String::from_utf8_lossy(&out.stderr)
    );

    // An image that does not exist: named, with what was tried; an environmental failure,
    // so nothing of it is stored and what the build did is kept.
    let cache = p.path().join("cache");
    let stored = |bucket: &str| {
        std::fs::read_dir(cache.join(bucket))
            .map(|d| d.count())
            .unwrap_or(0)
    };
    let counts = || -> Vec<usize> {
        ["envs-v4", "actions/generate-v5", "actions/validate-v10"]
            .iter()
            .map(|b| stored(b))
            .collect()
    };
    let pipeline = p.path().join("pipeline.toml");
    let use_image = |from: &str, to: &str| {
        let text = std::fs::read_to_string(&pipeline).unwrap();
        std::fs::write(&pipeline, text.replace(from, to)).unwrap();
    };
    let before = counts();
    use_image("debian:bookworm-slim", "r2e-test/no-such-image:1");
    let said = failed_for_the_daemon(
        &build_against(p.path(), None),
        "`[sandbox] base_image = \"r2e-test/no-such-image:1\"`: the Docker daemon has no such image and cannot pull it",
    );
    assert!(said.contains("docker load"), "{said}");
    assert_eq!(counts(), before, "the failure stored or lost entries");
    // Put back, the build finds everything it did and runs no code again.
    use_image("r2e-test/no-such-image:1", "debian:bookworm-slim");
    let summary = common::offline_build(p.path());
    for stage in ["env", "generate", "validate"] {
        assert_eq!(
            summary["stages"][stage]["executed"], 0,
            "{stage}: {summary}"
        );
    }
    assert_eq!(instances_by_id(p.path()), want, "{summary}");
}

/// Makes image `tag` of an empty root filesystem (`docker import`): no registry is needed.
fn import_empty_image(tag: &str) {
    let made = std::process::Command::new("sh")
        .arg("-c")
        .arg(format!("tar -cf - -T /dev/null | docker import - {tag}"))
        .output()
        .unwrap();
    assert!(
        made.status.success(),
        "{}",
        String::from_utf8_lossy(&made.stderr)
    );
}

#[test]
fn a_base_image_on_a_system_the_interpreter_cannot_run_on_is_refused_and_not_kept() {
    if common::docker().is_none() {
        return;
    }
    let tag = format!("r2e-test/empty:{}", std::process::id());
    import_empty_image(&tag);
    let p = common::Project::new(
        &format!("//- pkg/__init__.py\n//- pkg/text.py\n{TEXT_PY}"),
        &format!(
            "[env]\ninstaller = \"pip\"\n\n[sandbox]\nbackend = \"docker\"\nbase_image = \"{tag}\"\n"
        ),
    );
    let out = build_against(p.path(), None);
    let made_on = || {
        let out = std::process::Command::new("docker")
            .args(["images", "-q", "--filter"])
            .arg(format!("label=r2e.userland={tag}"))
            .output()
            .unwrap();
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    };
    let left = made_on();
    let _ = std::process::Command::new("docker")
        .args(["rmi", "-f", &tag])
        .output();
    // Its libraries go where they are here, under `/usr`, which an empty system does not lead
    // `/lib64` to: the interpreter's loader is not found. The build fails for it, saying what
    // `base_image` must be, and the base image made on it is removed, not used.
    let said = failed_for_the_daemon(&out, &format!("(made on `{tag}`) cannot run `"));
    assert!(
        said.contains("must be a glibc system with merged /usr"),
        "{said}"
    );
    assert_eq!(left, "", "a base image that failed its check was kept");
}
