//! Unit tests of the environment build: the installers' command lines, failures that may pass, and archives between hosts.

use super::*;

fn failed(stderr: &str) -> Outcome {
    Outcome {
        exit: Exit::Code(1),
        stdout: Vec::new(),
        stderr: stderr.as_bytes().to_vec(),
        duration: std::time::Duration::ZERO,
        limit_hit: None,
    }
}

#[test]
fn a_429_is_an_http_status_not_a_number_in_a_port() {
    assert_eq!(
        transient(&failed(
            "ERROR: Could not find a version that satisfies the requirement tinydep (from http://127.0.0.1:42917/simple/)"
        )),
        None
    );
    assert_eq!(
        transient(&failed(
            "ERROR: HTTP error 429 while getting https://pypi.org/simple/x/"
        )),
        Some("the package index refuses too many requests (429)")
    );
    assert_eq!(
        transient(&failed("error: Failed to fetch: 429 Too Many Requests")),
        Some("the package index refuses too many requests (429)")
    );
}

/// An index URL's token, in its user, its password or its path, never reaches a log: the
/// whole URL reads as its setting's name, its credentials wherever they appear alone.
#[test]
fn index_credentials_never_reach_a_log() {
    let passthrough = vec![
        (
            "PIP_INDEX_URL".to_owned(),
            "https://alice:s3cr3t-token@pypi.example/simple".to_owned(),
        ),
        (
            "PIP_EXTRA_INDEX_URL".to_owned(),
            "https://pkgs.example/TOKEN123/simple https://ghp_abcdef@other.example/".to_owned(),
        ),
        ("PIP_NO_INDEX".to_owned(), "1".to_owned()),
    ];
    let log = "Looking in indexes: https://alice:****@pypi.example/simple\n\
               GET https://alice:s3cr3t-token@pypi.example/simple/foo/ 401\n\
               GET https://pkgs.example/TOKEN123/simple/bar/\n\
               GET https://****@other.example/ ghp_abcdef\n\
               password s3cr3t-token, exit 1\n";
    let out = redact_settings(log, &passthrough);
    for secret in ["s3cr3t-token", "TOKEN123", "alice", "ghp_abcdef"] {
        assert!(!out.contains(secret), "{secret} in {out}");
    }
    assert!(out.contains("GET <PIP_INDEX_URL>/foo/ 401"), "{out}");
    assert!(out.contains("GET <PIP_EXTRA_INDEX_URL>/bar/"), "{out}");
    assert!(out.contains("exit 1"), "{out}");
}

/// A pure-Python wheel `name`, made with Python's zipfile module, in `dir`.
fn wheel(dir: &Path, name: &str, version: &str) {
    let script = format!(
        "import zipfile\nz = zipfile.ZipFile({path:?}, 'w')\n\
         z.writestr('{name}/__init__.py', 'VERSION = {version:?}\\n')\n\
         z.writestr('{name}-{version}.dist-info/METADATA', 'Metadata-Version: 2.1\\nName: {name}\\nVersion: {version}\\n')\n\
         z.writestr('{name}-{version}.dist-info/WHEEL', 'Wheel-Version: 1.0\\nGenerator: test\\nRoot-Is-Purelib: true\\nTag: py3-none-any\\n')\n\
         z.writestr('{name}-{version}.dist-info/entry_points.txt', '[console_scripts]\\n{name}-tool = {name}:main\\n')\n\
         z.writestr('{name}-{version}.dist-info/RECORD', '')\n\
         z.close()\n",
        path = dir
            .join(format!("{name}-{version}-py3-none-any.whl"))
            .to_string_lossy(),
    );
    let ok = std::process::Command::new("python3")
        .args(["-c", &script])
        .status()
        .unwrap();
    assert!(ok.success());
}

fn events(trace: &Path) -> Vec<r2e_core::cache::remote::Event> {
    std::fs::read_to_string(trace)
        .unwrap_or_default()
        .lines()
        .map(|l| {
            serde_json::from_str::<r2e_core::cache::remote::TraceRecord>(l)
                .unwrap()
                .event
        })
        .collect()
}

/// The environment settings of a pip build from the folder of wheels `wheels` alone.
fn offline_pip(wheels: &Path) -> EnvConfig {
    EnvConfig {
        python: "python3".into(),
        installer: ConfiguredInstaller::Pip,
        extra_packages: Vec::new(),
        infer_imports: false,
        timeout_seconds: 300,
        system_site_packages: false,
        install_project: false,
        exclude_newer: None,
        passthrough: vec![
            ("PIP_NO_INDEX".into(), "1".into()),
            (
                "PIP_FIND_LINKS".into(),
                wheels.to_string_lossy().into_owned(),
            ),
        ],
    }
}

/// `n` hosts, each with a cache (and a trace of its remote store's events) under its own root,
/// sharing `shared` as their remote store.
fn hosts(shared: &Path, n: usize) -> (Vec<tempfile::TempDir>, Vec<r2e_core::cache::Cache>) {
    use r2e_core::cache::remote::{Remote, Trace};
    use r2e_core::cache::{Cache, LocalStore};
    let roots: Vec<tempfile::TempDir> = (0..n).map(|_| tempfile::tempdir().unwrap()).collect();
    let caches: Vec<Cache> = roots
        .iter()
        .map(|r| {
            let mut cache = Cache::open(&r.path().join("cache")).unwrap();
            let trace = Trace::create(&r.path().join("trace.jsonl")).unwrap();
            cache.set_remote(
                Remote::new(
                    std::sync::Arc::new(LocalStore::new(shared)),
                    "file:///shared",
                    std::time::Duration::from_secs(6),
                )
                .with_trace(trace),
            );
            cache
        })
        .collect();
    (roots, caches)
}

/// An environment unpacked under `root` runs code there, and its scripts name its own
/// interpreter.
fn runs_code_there(sandbox: &dyn Sandbox, env: &Env, root: &Path) {
    let scratch = root.join("scratch-run");
    std::fs::create_dir_all(&scratch).unwrap();
    let out = sandbox
        .run(&Job {
            program: env.python.clone(),
            args: vec![
                "-I".into(),
                "-c".into(),
                "import sys, tinydep, coverage; print(tinydep.VERSION, sys.prefix)".into(),
            ],
            env: vec![],
            scratch,
            writable: vec![],
            readonly: [env.dir.clone()]
                .into_iter()
                .chain(env.mounts.clone())
                .collect(),
            hidden: vec![],
            network: false,
            limits: Limits::default(),
            image: None,
        })
        .unwrap();
    assert!(out.success(), "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(
        String::from_utf8_lossy(&out.stdout).trim(),
        format!("1.0 {}", env.dir.join("venv").display())
    );
    // The scripts name this host's interpreter.
    let tool = std::fs::read_to_string(env.dir.join("venv/bin/tinydep-tool")).unwrap();
    assert!(
        tool.starts_with(&format!("#!{}", env.dir.join("venv/bin/python").display())),
        "{tool}"
    );
}

/// Hosts with caches under different roots, one shared folder as their remote store: two
/// need one environment at once (one builds it, the other unpacks its archive, which works
/// there and runs code); a third finds the archive damaged and builds it itself.
#[test]
fn an_environment_travels_between_hosts_as_an_archive() {
    use r2e_core::cache::LocalStore;
    let wheels = tempfile::tempdir().unwrap();
    wheel(
        wheels.path(),
        "coverage",
        COVERAGE.split("==").nth(1).unwrap(),
    );
    wheel(wheels.path(), "tinydep", "1.0");
    let cfg = offline_pip(wheels.path());
    let interpreter = Interpreter::probe("python3").unwrap();
    let installer = Installer {
        uv: None,
        id: InstallerId {
            name: "pip".into(),
            version: interpreter.bundled_pip.clone(),
        },
    };
    let sandbox = r2e_exec::sandbox::local::LocalSandbox::new(false);
    let shared = tempfile::tempdir().unwrap();
    let (roots, caches) = hosts(shared.path(), 3);
    let builder = |cache| EnvBuilder {
        cache,
        sandbox: &sandbox,
        cfg: &cfg,
        interpreter: &interpreter,
        installer: &installer,
    };
    let declared = vec!["tinydep".to_owned()];
    let started = std::time::Instant::now();
    let envs: Vec<Env> = std::thread::scope(|s| {
        let handles: Vec<_> = caches[..2]
            .iter()
            .map(|c| {
                let declared = &declared;
                let builder = &builder;
                s.spawn(move || builder(c).build(declared, &[], &[]).unwrap())
            })
            .collect();
        handles.into_iter().map(|h| h.join().unwrap()).collect()
    });
    eprintln!("two hosts, one environment: {:?}", started.elapsed());
    let built: Vec<usize> = (0..2).filter(|&i| !envs[i].cached).collect();
    assert_eq!(built.len(), 1, "built once: {envs:?}");
    let (a, b) = (built[0], 1 - built[0]);
    assert!(envs[b].cached && envs[b].fetched);
    assert_eq!(
        envs[a].record.outcome,
        EnvOutcome::Ok,
        "{}",
        envs[a].record.log
    );
    let started_on = |i: usize| {
        events(&roots[i].path().join("trace.jsonl"))
            .contains(&r2e_core::cache::remote::Event::Started)
    };
    assert!(started_on(a) && !started_on(b));
    assert!(
        events(&roots[b].path().join("trace.jsonl")).contains(&r2e_core::cache::remote::Event::Hit)
    );
    // Unpacked under the other host's root: its check passes, and it runs code.
    let env = &envs[b];
    assert!(env.dir.starts_with(roots[b].path()));
    assert_eq!(builder(&caches[b]).check(env).unwrap(), Ok(()));
    runs_code_there(&sandbox, env, roots[b].path());
    let archive = LocalStore::new(shared.path()).path(
        Bucket::Envs,
        builder(&caches[a]).key(&declared, &[], &[]).hash(),
    );
    eprintln!(
        "archive: {} bytes",
        std::fs::metadata(&archive).unwrap().len()
    );
    // A flipped byte: the third host builds it itself (and stores it again).
    let mut bytes = std::fs::read(&archive).unwrap();
    let middle = bytes.len() / 2;
    bytes[middle] ^= 1;
    std::fs::write(&archive, &bytes).unwrap();
    let third = builder(&caches[2]).build(&declared, &[], &[]).unwrap();
    assert!(!third.cached && !third.fetched);
    let e = events(&roots[2].path().join("trace.jsonl"));
    use r2e_core::cache::remote::Event;
    assert_eq!(e, [Event::Damaged, Event::Started, Event::Stored], "{e:?}");
    assert_ne!(std::fs::read(&archive).unwrap(), bytes, "replaced");
}

/// Each installer step's command line, for `uv` and for pip: what the builds ran before the
/// steps had one place.
#[test]
fn each_step_runs_the_command_line_of_its_installer() {
    let id = InstallerId {
        name: String::new(),
        version: String::new(),
    };
    let uv = Installer {
        uv: Some(PathBuf::from("/t/uv")),
        id: id.clone(),
    };
    let pip = Installer { uv: None, id };
    let py = Path::new("/e/venv/bin/python");
    let packages = ["a==1".to_owned(), "b".to_owned()];
    let steps = || {
        let pin = || vec!["--PIN".to_owned()];
        vec![
            Step::Create {
                interpreter: Path::new("/usr/bin/python3"),
                venv: Path::new("/e/venv"),
                system_site_packages: true,
            },
            Step::Install {
                pin: pin(),
                packages: &packages,
            },
            Step::Uninstall { dist: "a" },
            Step::Freeze,
            Step::BuildWheel {
                pin: pin(),
                src: Path::new("/src"),
                dist: Path::new("/dist"),
            },
            Step::InstallWheel {
                wheel: Path::new("/dist/p.whl"),
                site: Path::new("/site"),
            },
        ]
    };
    let line = |installer: &Installer, step| {
        let (program, args) = installer.command(step, py);
        format!("{} {}", program.display(), args.join(" "))
    };
    let uv_lines: Vec<String> = steps().into_iter().map(|s| line(&uv, s)).collect();
    assert_eq!(
        uv_lines,
        [
            "/t/uv venv --no-python-downloads --python /usr/bin/python3 --system-site-packages /e/venv",
            "/t/uv pip install --python /e/venv/bin/python --PIN a==1 b",
            "/t/uv pip uninstall --python /e/venv/bin/python a",
            "/t/uv pip freeze --python /e/venv/bin/python",
            "/t/uv build --wheel --no-python-downloads --python /e/venv/bin/python --PIN --out-dir /dist /src",
            "/t/uv pip install --python /e/venv/bin/python --no-deps --target /site /dist/p.whl",
        ]
    );
    let pip_lines: Vec<String> = steps().into_iter().map(|s| line(&pip, s)).collect();
    assert_eq!(
        pip_lines,
        [
            "/usr/bin/python3 -m venv --system-site-packages /e/venv",
            "/e/venv/bin/python -m pip install --disable-pip-version-check --no-input --PIN a==1 b",
            "/e/venv/bin/python -m pip uninstall --yes --disable-pip-version-check a",
            "/e/venv/bin/python -m pip freeze --disable-pip-version-check",
            "/e/venv/bin/python -m pip wheel --no-deps --no-input --disable-pip-version-check --PIN --wheel-dir /dist /src",
            "/e/venv/bin/python -m pip install --no-deps --no-compile --no-input --disable-pip-version-check --target /site /dist/p.whl",
        ]
    );
}
