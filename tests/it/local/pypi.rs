//! `[[repo]] pypi = "NAME==VERSION"`: a source release from the package index builds into a
//! dataset named by its archive's hash; a `sha256` that differs is refused at its line, and so
//! is an archive whose hash differs from the one the index publishes (a loopback index). And
//! `[env] exclude_newer`: an environment rebuilt after a newer release of a dependency reached
//! the index keeps the old one.

use std::path::{Path, PathBuf};
use std::sync::OnceLock;

use assert_cmd::Command;

use crate::common;
use crate::common::index::{Index, sdist, wheel};

/// isodate 0.6.1's sdist on PyPI, and the sha256 PyPI publishes for it.
const ISODATE_SHA256: &str = "48c5881de7e8b0a0d648cb024c8062dc84e7b840ed81e864c7614fd3c127bde9";

/// A folder beside the [`common::wheelhouse`] holding `six` (isodate's one dependency),
/// downloaded once per machine from the package index.
fn six_wheels() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| common::wheels("wheelhouse-six", &["six==1.16.0"]))
}

/// `r2e build --json` in `dir` with environments from the wheelhouse and `six`.
fn r2e(dir: &Path) -> Command {
    let mut c = Command::cargo_bin("r2e").unwrap();
    c.args(["build", "--json"])
        .current_dir(dir)
        .env("PIP_NO_INDEX", "1")
        .env(
            "PIP_FIND_LINKS",
            format!(
                "{} {}",
                common::wheelhouse().display(),
                six_wheels().display()
            ),
        )
        .timeout(std::time::Duration::from_secs(600));
    c
}

#[test]
fn a_release_from_pypi_builds_into_a_dataset_named_by_its_hash() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::write(
        dir.path().join("pipeline.toml"),
        format!(
            "[project]\nname = \"rel\"\n\n[[repo]]\npypi = \"isodate==0.6.1\"\nsha256 = \"{ISODATE_SHA256}\"\n\
             include = [\"src/isodate/isotzinfo.py\"]\n\n[env]\ninstaller = \"pip\"\ninstall_project = false\n"
        ),
    )
    .unwrap();
    let out = r2e(dir.path()).assert().success().get_output().clone();
    let summary: serde_json::Value = serde_json::from_slice(&out.stdout).unwrap();
    let stderr = String::from_utf8_lossy(&out.stderr);
    let instances = common::jsonl(&dir.path().join("out/dataset.jsonl"));
    assert!(!instances.is_empty(), "{summary}\n{stderr}");
    for i in &instances {
        assert_eq!(i["repo"], "isodate", "{i}");
        assert!(
            i["id"].as_str().unwrap().contains("isotzinfo"),
            "only the included file gives instances: {i}"
        );
    }
    let manifest: serde_json::Value = serde_json::from_str(
        &std::fs::read_to_string(dir.path().join("out/manifest.json")).unwrap(),
    )
    .unwrap();
    assert!(
        manifest
            .to_string()
            .contains(&format!("sha256:{ISODATE_SHA256}")),
        "the repository is named by its archive's hash: {manifest}"
    );
    let envs = common::jsonl(&dir.path().join("out/envs.jsonl"));
    assert!(
        envs[0]["lock"]
            .as_array()
            .unwrap()
            .iter()
            .any(|p| p == "six==1.16.0"),
        "the release's declared dependency is installed: {}",
        envs[0]
    );
    // The release is unpacked once, under its hash, without its top folder.
    let unpacked = dir
        .path()
        .join("cache")
        .join(r2e_core::cache::Bucket::Pypi.folder())
        .join(ISODATE_SHA256);
    assert!(unpacked.join("setup.py").is_file());
    assert!(unpacked.join("src/isodate/isotzinfo.py").is_file());
}

/// A loopback index holding `tinyrel` 1.0's sdist, with the hash it publishes for it
/// (`None`: the archive's own): the index, the archive's real sha256.
fn tinyrel_index(published: Option<&str>) -> (Index, String, tempfile::TempDir) {
    let files = tempfile::tempdir().unwrap();
    let archive = tinyrel_sdist(files.path(), "1.0");
    let real = r2e_pipeline::stages::pypi::sha256_hex(&std::fs::read(&archive).unwrap());
    let index = Index::start();
    match published {
        Some(h) => index.add_published("tinyrel", &archive, "2024-01-01T00:00:00Z", h),
        None => index.add("tinyrel", &archive, "2024-01-01T00:00:00Z"),
    }
    (index, real, files)
}

/// `tinyrel`'s sdist of `version` in `dir`: one function, `double`.
fn tinyrel_sdist(dir: &Path, version: &str) -> PathBuf {
    sdist(
        dir,
        "tinyrel",
        version,
        &format!(
            "//- setup.py\nfrom setuptools import setup\nsetup(name='tinyrel', version='{version}')\n\
             //- tinyrel/__init__.py\n\
             //- tinyrel/core.py\ndef double(x):\n    \"\"\"Twice x.\"\"\"\n    y = x * 2\n    return y\n"
        ),
    )
}

/// A pipeline naming `tinyrel==1.0` on `index`, with `extra` lines in its `[[repo]]`.
fn tinyrel_pipeline(dir: &Path, index: &Index, extra: &str) -> PathBuf {
    pipeline_of(dir, index, "tinyrel==1.0", extra)
}

/// A pipeline naming the release `pin` on `index`, with `extra` lines (from line 7) in its
/// `[[repo]]`.
fn pipeline_of(dir: &Path, index: &Index, pin: &str, extra: &str) -> PathBuf {
    let path = dir.join("pipeline.toml");
    std::fs::write(
        &path,
        format!(
            "[project]\nname = \"rel\"\n\n[[repo]]\npypi = \"{pin}\"\nindex_url = \"{}\"\n{extra}\n",
            index.url()
        ),
    )
    .unwrap();
    path
}

/// `r2e build PIPELINE --until parse`, which must exit with `code`: its stderr.
fn build_exits(pipeline: &Path, code: i32) -> String {
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .arg("build")
        .arg(pipeline)
        .args(["--until", "parse"])
        .assert()
        .code(code)
        .get_output()
        .clone();
    String::from_utf8_lossy(&out.stderr).into_owned()
}

/// The releases' cache folder under `dir`, which must hold nothing.
fn nothing_kept(dir: &Path) -> PathBuf {
    let bucket = dir
        .join("cache")
        .join(r2e_core::cache::Bucket::Pypi.folder());
    assert_eq!(
        std::fs::read_dir(&bucket).unwrap().count(),
        0,
        "nothing kept"
    );
    bucket
}

#[test]
fn a_published_sha256_that_is_not_one_is_refused_before_it_names_a_folder() {
    // A folder the hostile index would have read as the release (named in lowercase: the
    // index's hashes are read lowercased).
    let victim =
        Path::new(env!("CARGO_TARGET_TMPDIR")).join(format!("pypi-victim-{}", std::process::id()));
    common::write_fixture(
        &victim,
        "//- secret/core.py\ndef private(x):\n    \"\"\"Not the release's.\"\"\"\n    y = x + 1\n    return y\n",
    );
    let dir = tempfile::tempdir().unwrap();
    let bucket = dir
        .path()
        .join("cache")
        .join(r2e_core::cache::Bucket::Pypi.folder());
    let absolute = victim.to_string_lossy().into_owned();
    for published in [absolute.as_str(), "../..", "", "../../../../../../.."] {
        let (index, _real, _files) = tinyrel_index(Some(published));
        let pipeline = tinyrel_pipeline(dir.path(), &index, "");
        let stderr = build_exits(&pipeline, 2).to_ascii_lowercase();
        assert!(
            stderr.contains(&format!(
                "refused `tinyrel-1.0.tar.gz`: the index `{}` publishes {:?} as its \
                 sha256, which is not 64 hexadecimal digits",
                index.url(),
                published.to_ascii_lowercase()
            )),
            "{published:?}: {stderr}"
        );
        assert_eq!(index.requests(), 1, "the page only, nothing downloaded");
        assert_eq!(
            std::fs::read_dir(&bucket).unwrap().count(),
            0,
            "nothing kept"
        );
        assert!(!dir.path().join("out/functions.jsonl").exists());
    }
    // A hash published in uppercase hex is the same hash.
    let files = tempfile::tempdir().unwrap();
    let archive = tinyrel_sdist(files.path(), "1.0");
    let real = r2e_pipeline::stages::pypi::sha256_hex(&std::fs::read(&archive).unwrap());
    let index = Index::start();
    index.add_published(
        "tinyrel",
        &archive,
        "2024-01-01T00:00:00Z",
        &real.to_ascii_uppercase(),
    );
    let pipeline = tinyrel_pipeline(dir.path(), &index, "");
    let built = common::build_until_slice(&pipeline);
    assert_eq!(built["repos"][0]["functions"], 1, "{built}");
    assert!(bucket.join(&real).join("tinyrel/core.py").is_file());
    let _ = std::fs::remove_dir_all(&victim);
}

#[test]
fn a_pinned_sha256_of_another_version_is_refused_on_a_warm_cache_as_on_a_clean_one() {
    let files = tempfile::tempdir().unwrap();
    let index = Index::start();
    let mut hashes = Vec::new();
    for version in ["1.0", "2.0"] {
        let archive = tinyrel_sdist(files.path(), version);
        hashes.push(r2e_pipeline::stages::pypi::sha256_hex(
            &std::fs::read(&archive).unwrap(),
        ));
        index.add("tinyrel", &archive, "2024-01-01T00:00:00Z");
    }
    let (old, new) = (&hashes[0], &hashes[1]);
    assert_ne!(old, new);
    let dir = tempfile::tempdir().unwrap();
    let pinned = format!("sha256 = \"{old}\"");
    let pipeline = pipeline_of(dir.path(), &index, "tinyrel==1.0", &pinned);
    let built = common::build_until_slice(&pipeline);
    assert_eq!(built["repos"][0]["functions"], 1, "{built}");
    let bucket = dir
        .path()
        .join("cache")
        .join(r2e_core::cache::Bucket::Pypi.folder());
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bucket.join(format!("{old}.release"))).unwrap())
            .unwrap();
    assert_eq!(
        record,
        serde_json::json!({"project": "tinyrel", "version": "1.0", "index_url": index.url(),
            "filename": "tinyrel-1.0.tar.gz"})
    );

    // The version bumped, `sha256` forgotten: 1.0 is in the cache, but it is not 2.0.
    pipeline_of(dir.path(), &index, "tinyrel==2.0", &pinned);
    let warm = build_exits(&pipeline, 2);
    std::fs::remove_dir_all(dir.path().join("cache")).unwrap();
    let clean = build_exits(&pipeline, 2);
    let refusal = format!(
        "{}:7:10: repo `tinyrel`: refused `tinyrel-2.0.tar.gz`: its sha256 is {new}, not the \
         `sha256` written here ({old})",
        pipeline.display()
    );
    for stderr in [&warm, &clean] {
        assert!(stderr.contains(&refusal), "{stderr}");
    }

    // A record that is not this release's is also not taken without a pin: the archive is
    // downloaded and checked, the folder kept.
    pipeline_of(dir.path(), &index, "tinyrel==1.0", &pinned);
    common::build_until_slice(&pipeline);
    std::fs::write(
        bucket.join(format!("{old}.release")),
        br#"{"project": "other", "version": "9", "index_url": "x", "filename": "y"}"#,
    )
    .unwrap();
    pipeline_of(dir.path(), &index, "tinyrel==1.0", "");
    let asked = index.requests();
    let again = common::build_until_slice(&pipeline);
    assert_eq!(again["repos"][0]["functions"], 1, "{again}");
    assert_eq!(index.requests(), asked + 2, "the page and the archive");
    let record: serde_json::Value =
        serde_json::from_slice(&std::fs::read(bucket.join(format!("{old}.release"))).unwrap())
            .unwrap();
    assert_eq!(
        record["project"], "tinyrel",
        "the record is this release's again"
    );
    // Now recorded, the index's page is all a build without a pin asks.
    let asked = index.requests();
    common::build_until_slice(&pipeline);
    assert_eq!(index.requests(), asked + 1, "the page only");
}

#[test]
fn a_sha256_that_differs_is_refused_at_its_line_and_a_pinned_release_is_not_asked_again() {
    let (index, real, _files) = tinyrel_index(None);
    let dir = tempfile::tempdir().unwrap();
    let wrong = "0".repeat(64);
    let pipeline = tinyrel_pipeline(dir.path(), &index, &format!("sha256 = \"{wrong}\""));
    let stderr = build_exits(&pipeline, 2);
    // `sha256` is on line 7, its value at column 10.
    assert!(
        stderr.contains(&format!("{}:7:10:", pipeline.display())) && stderr.contains(&real),
        "{stderr}"
    );
    let bucket = nothing_kept(dir.path());

    // The right hash builds; a second build finds the release unpacked and asks nothing.
    tinyrel_pipeline(dir.path(), &index, &format!("sha256 = \"{real}\""));
    let first = common::build_until_slice(&pipeline);
    assert_eq!(first["repos"][0]["repo"], "tinyrel", "{first}");
    assert_eq!(first["repos"][0]["functions"], 1, "{first}");
    assert!(bucket.join(&real).join("tinyrel/core.py").is_file());
    let asked = index.requests();
    assert!(asked >= 2, "the page and the archive: {asked}");
    let again = common::build_until_slice(&pipeline);
    assert_eq!(again["repos"][0]["functions"], 1, "{again}");
    assert_eq!(
        index.requests(),
        asked,
        "a pinned release in the cache needs no request"
    );
}

#[test]
fn an_archive_whose_hash_differs_from_the_index_is_refused() {
    let lie = "ab".repeat(32);
    let (index, real, _files) = tinyrel_index(Some(&lie));
    let dir = tempfile::tempdir().unwrap();
    let pipeline = tinyrel_pipeline(dir.path(), &index, "");
    let stderr = build_exits(&pipeline, 2);
    assert!(
        stderr.contains("refused `tinyrel-1.0.tar.gz`")
            && stderr.contains(&lie)
            && stderr.contains(&real),
        "{stderr}"
    );
    nothing_kept(dir.path());
    assert!(!dir.path().join("out/functions.jsonl").exists());
}

/// A folder whose `bin/uv` is the pinned uv, installed once per machine from the package
/// index (as r2e installs it into a cache that lacks it).
pub(crate) fn pinned_uv() -> &'static Path {
    static DIR: OnceLock<PathBuf> = OnceLock::new();
    DIR.get_or_init(|| {
        let pin = r2e_pipeline::stages::environment::UV;
        common::provisioned(&pin.replace("==", "-"), |dir| {
            let bin = dir.join("bin");
            if !bin.join("uv").is_file() {
                common::pip("install", &["--target"], &dir.join("site"), pin);
                std::fs::create_dir_all(&bin).unwrap();
                std::fs::rename(dir.join("site/bin/uv"), bin.join("uv")).unwrap();
            }
        })
        .join("bin")
    })
}

const NEEDS_DEP: &str = r#"
//- requirements.txt
dep
//- pkg/__init__.py
//- pkg/core.py
import dep

def tagged(x):
    """x with the dependency's version."""
    v = dep.VERSION
    return str(x) + v
"#;

/// `r2e build --until env --json` with uv (the pinned one, on the PATH) resolving from
/// `index`: the build's lock of its one environment.
pub(crate) fn env_lock(pipeline: &Path, index: &Index) -> Vec<String> {
    let path = format!(
        "{}:{}",
        pinned_uv().display(),
        std::env::var("PATH").unwrap_or_default()
    );
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .arg("build")
        .arg(pipeline)
        .args(["--until", "env", "--json"])
        .env("PATH", path)
        .env("UV_INDEX_URL", index.url())
        .env("UV_HTTP_TIMEOUT", "10")
        .timeout(std::time::Duration::from_secs(300))
        .assert()
        .success()
        .get_output()
        .clone();
    let envs = common::jsonl(&pipeline.parent().unwrap().join("out/envs.jsonl"));
    assert_eq!(envs.len(), 1, "{}", String::from_utf8_lossy(&out.stderr));
    assert_eq!(envs[0]["installer"], "uv", "{}", envs[0]);
    envs[0]["lock"]
        .as_array()
        .unwrap()
        .iter()
        .map(|p| p.as_str().unwrap().to_owned())
        .collect()
}

#[test]
fn an_environment_rebuilt_after_a_newer_release_keeps_the_one_before_exclude_newer() {
    let wheels = tempfile::tempdir().unwrap();
    let index = Index::start();
    // A stand-in for the pinned coverage.py, and `dep` 1.0, both before the pin.
    let pinned = r2e_exec::py::COVERAGE.split("==").nth(1).unwrap();
    let coverage = wheel(wheels.path(), "coverage", pinned, &[]);
    index.add("coverage", &coverage, "2023-01-01T00:00:00Z");
    let dep1 = wheel(wheels.path(), "dep", "1.0", &[]);
    index.add("dep", &dep1, "2024-01-01T00:00:00Z");
    let p = common::Project::new(
        NEEDS_DEP,
        "[env]\ninstaller = \"uv\"\ninfer_imports = false\ninstall_project = false\n\
         exclude_newer = \"2024-06-01\"\n",
    );
    let first = env_lock(&p.pipeline(), &index);
    assert!(first.contains(&"dep==1.0".to_owned()), "{first:?}");

    // dep 2.0 reaches the index after the pin; the environment is built again from nothing.
    let dep2 = wheel(wheels.path(), "dep", "2.0", &[]);
    index.add("dep", &dep2, "2025-01-01T00:00:00Z");
    std::fs::remove_dir_all(p.path().join("cache")).unwrap();
    std::fs::remove_dir_all(p.path().join("out")).unwrap();
    let again = env_lock(&p.pipeline(), &index);
    assert_eq!(
        again, first,
        "the rebuilt environment resolves the same packages"
    );

    // Without the pin the same index gives 2.0: the pin, not the index, kept 1.0.
    let text = std::fs::read_to_string(p.pipeline()).unwrap();
    std::fs::write(
        p.pipeline(),
        text.replace("exclude_newer = \"2024-06-01\"\n", ""),
    )
    .unwrap();
    let unpinned = env_lock(&p.pipeline(), &index);
    assert!(unpinned.contains(&"dep==2.0".to_owned()), "{unpinned:?}");
}

#[test]
fn an_index_that_does_not_answer_is_environmental_and_leaves_nothing() {
    // Nothing listens on this port.
    let port = std::net::TcpListener::bind("127.0.0.1:0")
        .unwrap()
        .local_addr()
        .unwrap()
        .port();
    let dir = tempfile::tempdir().unwrap();
    let pipeline = dir.path().join("pipeline.toml");
    std::fs::write(
        &pipeline,
        format!(
            "[[repo]]\npypi = \"tinyrel==1.0\"\nindex_url = \"http://127.0.0.1:{port}/simple/\"\n"
        ),
    )
    .unwrap();
    let stderr = build_exits(&pipeline, 1);
    assert!(
        stderr.contains("repo `tinyrel`") && stderr.contains(&format!("127.0.0.1:{port}")),
        "{stderr}"
    );
    nothing_kept(dir.path());
}

#[test]
fn exclude_newer_with_a_pip_that_cannot_pin_is_refused() {
    let bundled = std::process::Command::new("python3")
        .args(["-c", "import ensurepip; print(ensurepip.version())"])
        .output()
        .unwrap();
    let bundled = String::from_utf8_lossy(&bundled.stdout).trim().to_owned();
    let major: u32 = bundled.split('.').next().unwrap().parse().unwrap();
    // A pip 26 or newer has `--uploaded-prior-to`: nothing to refuse, so nothing to test.
    if !common::require(
        major < 26,
        &format!(
            "a python3 whose bundled pip is older than 26 (it has pip {bundled}, which pins with `--uploaded-prior-to`)"
        ),
        "put a python3 whose `ensurepip` bundles an older pip first on the PATH",
    ) {
        return;
    }
    let p = common::Project::new(
        NEEDS_DEP,
        "[env]\ninstaller = \"pip\"\nexclude_newer = \"2024-06-01\"\n",
    );
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .arg("build")
        .arg(p.pipeline())
        .args(["--until", "env"])
        .assert()
        .code(1)
        .get_output()
        .clone();
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("`[env] exclude_newer = \"2024-06-01T00:00:00Z\"` needs uv")
            && stderr.contains(&format!("pip {bundled}"))
            && stderr.contains("installer = \"pip\""),
        "{stderr}"
    );
    assert!(
        !p.path().join("cache/envs-v4").exists()
            || std::fs::read_dir(p.path().join("cache/envs-v4"))
                .unwrap()
                .count()
                == 0
    );
}
