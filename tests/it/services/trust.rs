//! Who may write the remote store, and what a reader checks, on real builds against a WebDAV
//! server (nginx, whose access log counts the writes): a host with `remote_mode = "read"`
//! writes nothing and builds V from the store; with `signing_key_env`, entries a host without
//! the key wrote and a signed entry whose payload was changed are misses named on stderr, and
//! the build is still V; the key reaches no file and no log. Bad trust settings are exit 2
//! with their place.

use std::path::{Path, PathBuf};

use serde_json::Value;

use r2e_core::cache::entry;
use r2e_core::hash::Hash;

use crate::common;
use crate::k8s::{project, r2e};

const KEY_VAR: &str = "R2E_TEST_SIGNING_KEY";
const KEY: &str = "lab-ci-signing-key-7f3a9c2e51d04b8e";

/// A pipeline of the three repositories in `dir` with the remote store `url` and `extra`
/// lines in its `[cache]` table.
fn pipeline(dir: &Path, url: &str, extra: &str) -> PathBuf {
    let path = project(dir, Some(url));
    let mut text = std::fs::read_to_string(&path).unwrap();
    text.push_str(extra);
    std::fs::write(&path, text).unwrap();
    path
}

/// `r2e build --json` with a fresh local cache `cache`, offline, the signing key in the
/// environment when `key`: exit code, dataset version (with its count of instances), stderr.
fn build(pipeline: &Path, cache: &Path, key: bool) -> (i32, String, String) {
    let mut env: Vec<(&'static str, String)> = common::offline_env().into_iter().collect();
    if key {
        env.push((KEY_VAR, KEY.to_owned()));
    }
    let (code, summary, stderr) = crate::cluster_build::build(pipeline, cache, &env, &[]);
    let version = format!(
        "{} ({} instances)",
        summary["dataset_version"].as_str().unwrap_or(""),
        summary["counts"]["instances"]
    );
    (code, version, stderr)
}

/// The events of the builds' traces beside `output`.
fn events(output: &Path) -> Vec<Value> {
    crate::cluster_build::traces(output)
        .into_values()
        .flatten()
        .collect()
}

fn count(events: &[Value], event: &str) -> usize {
    events.iter().filter(|e| e["event"] == event).count()
}

/// Every file under `dir` whose bytes hold `needle`.
fn holding(dir: &Path, needle: &[u8]) -> Vec<PathBuf> {
    walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .filter(|e| {
            std::fs::read(e.path()).is_ok_and(|b| b.windows(needle.len()).any(|w| w == needle))
        })
        .map(|e| e.path().to_path_buf())
        .collect()
}

#[test]
fn a_read_only_host_writes_nothing_and_only_signed_entries_are_taken() {
    let Some(nginx) = crate::remote::nginx_program() else {
        return;
    };
    let server = crate::remote::nginx(&nginx);
    let work = tempfile::tempdir().unwrap();
    let w = work.path();
    let base = format!("http://127.0.0.1:{}/r2e", server.port);
    let signing = format!("signing_key_env = \"{KEY_VAR}\"\n");
    let mut said = String::new();

    // One machine, no store: V.
    let (code, v, stderr) = build(&project(&w.join("one"), None), &w.join("c-one"), false);
    assert_eq!(code, 0, "{stderr}");
    assert!(v.ends_with("(3 instances)"), "{v}");

    // The CI host holds the key: it writes signed entries.
    let signed = format!("{base}/signed");
    let ci = pipeline(&w.join("ci"), &signed, &signing);
    let (code, version, stderr) = build(&ci, &w.join("c-ci"), true);
    assert_eq!((code, version.as_str()), (0, v.as_str()), "{stderr}");
    assert!(
        stderr.contains(&format!("signed and checked with the key in ${KEY_VAR}")),
        "{stderr}"
    );
    said.push_str(&stderr);
    assert!(!server.writes().is_empty());

    // A reader in read mode, with the key: V from the store, and no write reaches the server.
    let reader = pipeline(
        &w.join("reader"),
        &signed,
        &format!("{signing}remote_mode = \"read\"\n"),
    );
    let (writes, requests) = (server.writes().len(), server.requests());
    let (code, version, stderr) = build(&reader, &w.join("c-reader"), true);
    assert_eq!((code, version.as_str()), (0, v.as_str()), "{stderr}");
    said.push_str(&stderr);
    assert_eq!(
        server.writes()[writes..],
        [] as [String; 0],
        "a read-only host wrote"
    );
    assert!(server.requests() > requests, "the reader read the store");
    let e = events(&w.join("reader/out"));
    assert!(count(&e, "hit") > 0, "{e:?}");
    assert_eq!(count(&e, "stored") + count(&e, "repaired"), 0);

    // A host without the key writes unsigned entries; a host with it takes none of them: each
    // is a miss named on stderr, recomputed and replaced with a signed one; V.
    let other = format!("{base}/unsigned");
    let (code, version, stderr) = build(
        &pipeline(&w.join("rogue"), &other, ""),
        &w.join("c-rogue"),
        false,
    );
    assert_eq!((code, version.as_str()), (0, v.as_str()), "{stderr}");
    let checker = pipeline(&w.join("checker"), &other, &signing);
    let (code, version, stderr) = build(&checker, &w.join("c-checker"), true);
    assert_eq!((code, version.as_str()), (0, v.as_str()), "{stderr}");
    said.push_str(&stderr);
    let untrusted = stderr
        .lines()
        .filter(|l| l.contains("is not trusted (it carries no signature"))
        .count();
    assert!(untrusted > 0, "{stderr}");
    let e = events(&w.join("checker/out"));
    assert_eq!(count(&e, "hit"), 0, "an unsigned entry was taken: {e:?}");
    assert!(count(&e, "repaired") > 0, "{e:?}");

    // A signed entry whose payload was changed (its checksum made good, its signature kept):
    // a miss, named by its place, for a reader with the key; still V.
    let stored = walkdir::WalkDir::new(server.data().join("r2e/signed"))
        .into_iter()
        .flatten()
        .find(|e| {
            e.path().to_string_lossy().contains("/actions/validate-") && e.file_type().is_file()
        })
        .unwrap_or_else(|| {
            let all: Vec<_> = walkdir::WalkDir::new(server.data())
                .into_iter()
                .flatten()
                .map(|e| e.path().display().to_string())
                .collect();
            panic!("no stored validation among {all:#?}")
        })
        .into_path();
    let bytes = std::fs::read(&stored).unwrap();
    assert_eq!(
        &bytes[..8],
        b"r2e-sig1",
        "signed entries start with their envelope"
    );
    let (envelope, sealed) = bytes.split_at(44);
    let key = Hash(sealed[8..40].try_into().unwrap());
    let mut payload = sealed[entry::HEADER..].to_vec();
    let last = payload.len() - 1;
    payload[last] ^= 1;
    let scope = stored
        .strip_prefix(server.data().join("r2e/signed"))
        .unwrap()
        .parent()
        .and_then(Path::parent)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    let mut forged = envelope.to_vec();
    forged.extend_from_slice(&entry::seal_bytes(&scope, key, &payload));
    std::fs::write(&stored, forged).unwrap();
    let late = pipeline(
        &w.join("late"),
        &signed,
        &format!("{signing}remote_mode = \"read\"\n"),
    );
    let (code, version, stderr) = build(&late, &w.join("c-late"), true);
    assert_eq!((code, version.as_str()), (0, v.as_str()), "{stderr}");
    said.push_str(&stderr);
    let hex = key.to_hex();
    assert!(
        stderr
            .lines()
            .any(|l| l.contains(&hex[..16]) && l.contains("its signature does not match")),
        "{stderr}"
    );

    // The key is in no file (caches, outputs, traces; the server's data and logs) and no log.
    assert_eq!(holding(w, KEY.as_bytes()), Vec::<PathBuf>::new());
    assert_eq!(
        holding(&server.data().join(".."), KEY.as_bytes()),
        Vec::<PathBuf>::new()
    );
    assert!(!said.contains(KEY));
}

#[test]
fn bad_trust_settings_are_exit_2_with_their_place() {
    let work = tempfile::tempdir().unwrap();
    let url = format!("file://{}", work.path().join("store").display());
    for (i, (extra, says)) in [
        ("remote_mode = \"write\"\n", "not a remote mode"),
        (
            "signing_key_env = \"my secret key\"\n",
            "must name an environment variable",
        ),
        (
            &format!("signing_key_env = \"{KEY_VAR}\"\n")[..],
            "is not set",
        ),
    ]
    .into_iter()
    .enumerate()
    {
        let p = pipeline(&work.path().join(format!("p{i}")), &url, extra);
        let text = std::fs::read_to_string(&p).unwrap();
        let line = text.lines().count();
        let out = r2e()
            .args(["build"])
            .arg(&p)
            .env_remove(KEY_VAR)
            .output()
            .unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{extra}: {stderr}");
        assert!(
            stderr.contains(&format!("{}:{line}:", p.display())) && stderr.contains(says),
            "{extra}: {stderr}"
        );
    }
    // A key too short to sign with; a read-only shard (its results could reach no one).
    let p = pipeline(
        &work.path().join("short"),
        &url,
        &format!("signing_key_env = \"{KEY_VAR}\"\n"),
    );
    let out = r2e()
        .arg("build")
        .arg(&p)
        .env(KEY_VAR, "zq9x")
        .output()
        .unwrap();
    assert_eq!(out.status.code(), Some(2));
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(
        stderr.contains("too short") && !stderr.contains("zq9x"),
        "{stderr}"
    );
    let p = pipeline(&work.path().join("ro"), &url, "remote_mode = \"read\"\n");
    for args in [
        &["build", "--shard", "0/2"][..],
        &["cluster", "slurm", "--shards", "2"],
        &["cluster", "k8s", "--shards", "2", "--image", "r2e"],
        &[
            "cluster",
            "ray",
            "--address",
            "http://127.0.0.1:9",
            "--shards",
            "2",
        ],
    ] {
        let out = r2e().args(args).arg(&p).output().unwrap();
        let stderr = String::from_utf8_lossy(&out.stderr);
        assert_eq!(out.status.code(), Some(2), "{args:?}: {stderr}");
        assert!(stderr.contains("remote_mode"), "{args:?}: {stderr}");
    }
    // Trust settings without a store.
    let p = project(&work.path().join("none"), None);
    let mut text = std::fs::read_to_string(&p).unwrap();
    text.push_str("[cache]\nremote_mode = \"read\"\n");
    std::fs::write(&p, &text).unwrap();
    let out = r2e().arg("build").arg(&p).output().unwrap();
    assert_eq!(out.status.code(), Some(2));
    assert!(String::from_utf8_lossy(&out.stderr).contains("needs a `remote` store"));
}
