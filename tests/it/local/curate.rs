//! `r2e curate` against a loopback GitHub API (`common::github`) holding 1,150 repositories
//! created over three months: the lock it writes, the 1,000-result cap got past by `created:`
//! windows, rate limits waited out, a repeated `--update` answered by 304s alone, the token kept
//! out of every file; a build from the lock, twice on an empty cache; and bad input.

use std::path::Path;
use std::time::{Duration, Instant};

use assert_cmd::Command;
use r2e_core::config::read_lock;
use r2e_core::dates::Date;

use crate::common;
use crate::common::github::{FakeGithub, FakeRepo, GitDaemon, bare_repo};

const TOKEN_VAR: &str = "R2E_TEST_CURATE_TOKEN";
const TOKEN: &str = "ghp_r2eTestToken0123456789abcdefSECRET";

const MODULE: &str = "K = 2\n\n\ndef helper(x):\n    \"\"\"Helper.\"\"\"\n    y = x + K\n    return y\n\n\ndef user(x):\n    \"\"\"Uses helper.\"\"\"\n    y = helper(x)\n    return y * 2\n";

/// The fake API's repositories: two kept (real git repositories behind `daemon`), one over the
/// limit, one each for every filter, and 1,141 with too few stars, created over 90 days.
fn world(dir: &Path, daemon_base: &Path, daemon: &GitDaemon) -> (Vec<FakeRepo>, [String; 2]) {
    let one = bare_repo(
        daemon_base,
        "alice/kept-one",
        &[
            (
                "pyproject.toml",
                "[project]\nname = \"kone\"\nversion = \"0.1\"\n",
            ),
            ("kone/__init__.py", ""),
            ("kone/m.py", MODULE),
        ],
        "2025-02-03T09:00:00Z",
    );
    let two = bare_repo(
        daemon_base,
        "bob/kept-two",
        &[
            (
                "setup.py",
                "from setuptools import setup\nsetup(name=\"ktwo\")\n",
            ),
            ("ktwo/__init__.py", ""),
            ("ktwo/calc.py", MODULE),
        ],
        "2025-03-04T09:00:00Z",
    );
    let _ = dir;
    let mut repos = Vec::new();
    for i in 0..1141u64 {
        let day = Date::from_days(Date::parse("2025-01-01").unwrap().days() + (i % 90) as i64);
        repos.push(FakeRepo::new(
            &format!("gen/repo-{i:04}"),
            &day.to_string(),
            i % 10,
        ));
    }
    let mut kept_one = FakeRepo::new("alice/kept-one", "2025-02-03", 50);
    kept_one.clone_url = format!("{}/alice/kept-one.git", daemon.url);
    kept_one.commit = one.clone();
    let mut kept_two = FakeRepo::new("bob/kept-two", "2025-03-04", 40);
    kept_two.clone_url = format!("{}/bob/kept-two.git", daemon.url);
    kept_two.commit = two.clone();
    kept_two.files = vec!["setup.py".into(), "ktwo".into()];
    kept_two.license = Some("Apache-2.0".into());
    let mut fork = FakeRepo::new("eve/forked", "2025-01-20", 100);
    fork.fork = true;
    let mut archived = FakeRepo::new("frank/old", "2025-01-21", 90);
    archived.archived = true;
    let mut unpackaged = FakeRepo::new("grace/no-pkg", "2025-01-22", 80);
    unpackaged.files = vec!["README.md".into(), "main.py".into()];
    let mut gpl = FakeRepo::new("heidi/gpl", "2025-01-23", 70);
    gpl.license = Some("GPL-3.0".into());
    let mut huge = FakeRepo::new("ivan/huge", "2025-01-24", 60);
    huge.size = 500_000;
    let mut unlicensed = FakeRepo::new("judy/unlicensed", "2025-01-25", 55);
    unlicensed.license = None;
    let over = FakeRepo::new("dave/over-limit", "2025-03-10", 15);
    repos.extend([
        kept_one, kept_two, fork, archived, unpackaged, gpl, huge, unlicensed, over,
    ]);
    assert_eq!(repos.len(), 1150);
    (repos, [one, two])
}

fn pipeline(dir: &Path, api: &str) {
    std::fs::write(
        dir.join("pipeline.toml"),
        format!(
            "[project]\nname = \"cur\"\n\n[[source]]\n\
             github = \"language:python created:2025-01-01..2025-03-31 fork:false\"\n\
             limit = 2\nlicenses = [\"MIT\", \"Apache-2.0\"]\nmax_size_kb = 100000\nmin_stars = 10\n\
             api_url = \"{api}\"\ntoken_env = \"{TOKEN_VAR}\"\n\n\
             [env]\ninstaller = \"pip\"\ninstall_project = false\ninfer_imports = false\n"
        ),
    )
    .unwrap();
}

fn curate(dir: &Path, args: &[&str]) -> (String, String) {
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .arg("curate")
        .args(args)
        .current_dir(dir)
        .env(TOKEN_VAR, TOKEN)
        .timeout(Duration::from_secs(120))
        .assert()
        .success()
        .get_output()
        .clone();
    (
        String::from_utf8(out.stdout).unwrap(),
        String::from_utf8(out.stderr).unwrap(),
    )
}

#[test]
fn curate_pins_the_search_gets_past_the_cap_waits_out_limits_and_revalidates() {
    let dir = tempfile::tempdir().unwrap();
    let daemon_base = dir.path().join("git");
    std::fs::create_dir_all(&daemon_base).unwrap();
    let daemon = GitDaemon::start(&daemon_base);
    let (repos, [one, two]) = world(dir.path(), &daemon_base, &daemon);
    // The first root listing meets the primary limit (reset 2 s ahead), the second search
    // request a secondary limit (`Retry-After: 1`), and the first branch's answer says the
    // limit is used up (reset 2 s ahead).
    let api = FakeGithub::start(repos, Some(2), Some(1));
    pipeline(dir.path(), &api.url);

    let started = Instant::now();
    let (_, first_log) = curate(dir.path(), &[]);
    let took = started.elapsed();
    let seen = api.seen();
    assert_eq!(seen.primary_limited, 1, "{seen:?}");
    assert_eq!(seen.secondary_limited, 1, "{seen:?}");
    // The first branch's answer said the limit was used up for 2 s more: nothing was sent
    // before its reset.
    assert_eq!(seen.before_reset, 0, "{seen:?}");
    assert!(
        took >= Duration::from_secs(5),
        "waited out 2 s, 1 s and 2 s: {took:?}"
    );
    assert!(first_log.contains("rate limit is used up"), "{first_log}");
    assert!(first_log.contains("secondary rate limit"), "{first_log}");
    // Past the 1,000 cap: the query as written matched 1,150; the repositories were read
    // through `created:` windows of at most 1,000 each, and no page past the cap was asked.
    let answered: Vec<_> = seen
        .searches
        .iter()
        .filter_map(|(q, page, total)| total.map(|t| (q.clone(), *page, t)))
        .collect();
    assert_eq!(answered[0].2, 1150, "{answered:?}");
    let paged: Vec<_> = answered.iter().filter(|(_, page, _)| *page > 1).collect();
    assert!(!paged.is_empty());
    assert!(
        paged
            .iter()
            .all(|(q, _, t)| *t <= 1000 && q.contains("created:2025-")),
        "{paged:?}"
    );
    let windows: std::collections::BTreeSet<&str> = answered
        .iter()
        .filter(|(_, _, t)| *t <= 1000)
        .map(|(q, _, _)| q.as_str())
        .collect();
    assert!(windows.len() >= 2, "{windows:?}");
    assert!(
        windows.iter().all(|q| q.contains("..")),
        "each window a `created:A..B` range: {windows:?}"
    );
    // The token went in `Authorization`, as a bearer token, and nothing else did.
    assert_eq!(seen.authorizations, [format!("Bearer {TOKEN}")]);

    // The lock, exactly: the two kept, with their commits and dates; every other candidate
    // with its reason.
    let lock_file = dir.path().join("repos.lock");
    let text = std::fs::read_to_string(&lock_file).unwrap();
    assert!(text.starts_with("# This file is generated by `r2e curate`"));
    let lock = read_lock(&lock_file).unwrap().unwrap();
    assert_eq!(lock.source.len(), 1);
    assert_eq!((lock.source[0].matched, lock.source[0].kept), (1150, 2));
    let kept: Vec<_> = lock
        .repo
        .iter()
        .map(|r| {
            (
                r.name.as_str(),
                r.url.as_str(),
                r.commit.as_str(),
                r.created_at.as_str(),
                r.pushed_at.as_str(),
                r.stars,
                r.license.as_str(),
            )
        })
        .collect();
    let url_one = format!("{}/alice/kept-one.git", daemon.url);
    let url_two = format!("{}/bob/kept-two.git", daemon.url);
    assert_eq!(
        kept,
        [
            (
                "alice__kept-one",
                url_one.as_str(),
                one.as_str(),
                "2025-02-03T10:00:00Z",
                "2025-02-03T12:00:00Z",
                50,
                "MIT"
            ),
            (
                "bob__kept-two",
                url_two.as_str(),
                two.as_str(),
                "2025-03-04T10:00:00Z",
                "2025-03-04T12:00:00Z",
                40,
                "Apache-2.0"
            ),
        ]
    );
    assert_eq!(
        lock.repo[0].kept_because,
        [
            "matched the search",
            "not a fork",
            "not archived",
            "licence MIT allowed",
            "10 KB <= 100000",
            "50 stars >= 10",
            "has pyproject.toml"
        ]
    );
    assert_eq!(lock.repo[1].kept_because.last().unwrap(), "has setup.py");
    let reason = |name: &str| {
        lock.left_out
            .iter()
            .find(|l| l.full_name == name)
            .map(|l| l.reason.clone())
            .unwrap_or_else(|| panic!("{name} is not left out"))
    };
    assert_eq!(reason("eve/forked"), "fork");
    assert_eq!(reason("frank/old"), "archived");
    assert_eq!(
        reason("grace/no-pkg"),
        "no packaging file (none of pyproject.toml, setup.py, setup.cfg)"
    );
    assert_eq!(
        reason("heidi/gpl"),
        "licence GPL-3.0 is not allowed (allowed: MIT, Apache-2.0)"
    );
    assert_eq!(reason("ivan/huge"), "500000 KB, over max_size_kb = 100000");
    assert_eq!(
        reason("judy/unlicensed"),
        "no licence (allowed: MIT, Apache-2.0)"
    );
    assert_eq!(reason("dave/over-limit"), "over the limit of 2");
    assert_eq!(reason("gen/repo-0007"), "7 stars, under min_stars = 10");
    assert_eq!(lock.left_out.len(), 1148, "every other candidate, once");
    // Sorted, so that the file is the same whatever order the search answered in.
    let names: Vec<_> = lock.left_out.iter().map(|l| l.full_name.clone()).collect();
    let mut sorted = names.clone();
    sorted.sort();
    assert_eq!(names, sorted);

    // The shards of a build on Kubernetes get the lock beside the pipeline, in its ConfigMap.
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .args(["cluster", "k8s", "--shards", "2", "--image", "r2e:1"])
        .args(["--remote-cache", "s3://bucket/prefix"])
        .arg(dir.path().join("pipeline.toml"))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let yaml = String::from_utf8(out).unwrap();
    assert!(
        yaml.contains("repos.lock") && yaml.contains(&lock.repo[0].commit),
        "{yaml}"
    );

    // `--update` with nothing changed: every request conditional, every answer a 304 (which
    // GitHub does not count against the rate limit), the lock byte-identical.
    api.reset_seen();
    let (out, second_log) = curate(dir.path(), &["--update"]);
    let seen = api.seen();
    assert!(seen.requests > 10, "{seen:?}");
    assert_eq!(seen.conditional, seen.requests, "{seen:?}");
    assert_eq!(seen.not_modified, seen.requests, "{seen:?}");
    assert_eq!(std::fs::read_to_string(&lock_file).unwrap(), text);
    assert!(
        out.contains("0 added, 0 removed, 0 moved, 2 unchanged"),
        "{out}"
    );
    assert!(out.contains("(unchanged)"), "{out}");

    // Without `--update`, a lock that matches its sources is kept: no request at all.
    api.reset_seen();
    let (out, third_log) = curate(dir.path(), &[]);
    assert_eq!(api.seen().requests, 0);
    assert!(out.contains("kept: it matches the sources"), "{out}");

    // Only stars moved (as they do on GitHub all the time): the same repositories at the same
    // commits keep the curation date, and with it every environment's `exclude_newer`; the
    // lock holds the new count.
    api.set_stars("alice/kept-one", 51);
    let (out, _) = curate(dir.path(), &["--update"]);
    assert!(
        out.contains("0 added, 0 removed, 0 moved, 2 unchanged"),
        "{out}"
    );
    let restarred = read_lock(&lock_file).unwrap().unwrap();
    assert_eq!(restarred.curated_at, lock.curated_at);
    assert_eq!(restarred.repo[0].stars, 51);
    assert!(
        restarred.repo[0]
            .kept_because
            .contains(&"51 stars >= 10".to_owned())
    );
    api.set_stars("alice/kept-one", 50);

    // A branch that moved: `--update` says so, as `dataset diff` does, and pins the new head.
    let moved = "ab".repeat(20);
    api.set_commit("bob/kept-two", &moved);
    let (out, fourth_log) = curate(dir.path(), &["--update"]);
    assert!(
        out.contains(&format!(
            "> bob__kept-two moved: {} -> abababababab\n",
            &two[..12]
        )) && out.contains("0 added, 0 removed, 1 moved, 1 unchanged"),
        "{out}"
    );
    let relocked = read_lock(&lock_file).unwrap().unwrap();
    assert_eq!(relocked.repo[1].commit, moved);
    assert_eq!(relocked.left_out, lock.left_out);

    // Without the variable, anonymous: no `Authorization` at all, and said so.
    api.reset_seen();
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .args(["curate", "--update"])
        .current_dir(dir.path())
        .env_remove(TOKEN_VAR)
        .assert()
        .success()
        .get_output()
        .clone();
    let seen = api.seen();
    assert!(
        seen.requests > 0 && seen.authorizations.is_empty(),
        "{seen:?}"
    );
    let anonymous_log = String::from_utf8(out.stderr).unwrap();
    assert!(
        anonymous_log.contains(&format!(
            "`{TOKEN_VAR}` is not set: searching GitHub anonymously"
        )),
        "{anonymous_log}"
    );

    // The token is in no file (the lock, the cache's stored answers) and no log.
    assert_eq!(common::found_under(dir.path(), TOKEN.as_bytes()), None);
    for log in [&first_log, &second_log, &third_log, &fourth_log] {
        assert!(!log.contains(TOKEN));
    }
    assert!(dir.path().join("cache/github-v1").is_dir());
}

#[test]
fn a_build_from_the_lock_is_the_same_dataset_twice_on_an_empty_cache() {
    let dir = tempfile::tempdir().unwrap();
    let daemon_base = dir.path().join("git");
    std::fs::create_dir_all(&daemon_base).unwrap();
    let daemon = GitDaemon::start(&daemon_base);
    let (repos, [one, two]) = world(dir.path(), &daemon_base, &daemon);
    let api = FakeGithub::start(repos, None, None);
    pipeline(dir.path(), &api.url);
    curate(dir.path(), &[]);
    // The API is gone: a build reads the lock and never searches.
    drop(api);
    // Built with the token in the environment and every log on: the token reaches no output,
    // no cache entry and no log (the build never needs it).
    let built = Command::cargo_bin("r2e")
        .unwrap()
        .args(["build", "--json"])
        .current_dir(dir.path())
        .envs(common::offline_env())
        .env(TOKEN_VAR, TOKEN)
        .env("R2E_LOG", "timings")
        .timeout(Duration::from_secs(900))
        .assert()
        .success()
        .get_output()
        .clone();
    let first: serde_json::Value = serde_json::from_slice(&built.stdout).unwrap();
    let log = String::from_utf8_lossy(&built.stderr);
    assert!(
        log.contains("[time]") || log.contains("[count]"),
        "logs on: {log}"
    );
    assert!(!log.contains(TOKEN));
    assert!(dir.path().join("out/dataset.jsonl").is_file());
    assert_eq!(common::found_under(dir.path(), TOKEN.as_bytes()), None);
    let version = first["dataset_version"]
        .as_str()
        .expect("a dataset")
        .to_owned();
    assert!(first["counts"]["candidates"].as_u64() >= Some(2), "{first}");
    // Months later: alice's branch was force-pushed, and no branch reaches the pinned commit.
    let work = daemon_base.join("work/alice/kept-one");
    for args in [
        &["commit", "-q", "--amend", "-m", "rewritten"][..],
        &[
            "push",
            "-q",
            "--force",
            "../../../alice/kept-one.git",
            "main",
        ][..],
    ] {
        let ok = std::process::Command::new("git")
            .args(args)
            .current_dir(&work)
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@example.com")
            .env("GIT_COMMITTER_DATE", "2025-09-01T00:00:00Z")
            .status()
            .unwrap();
        assert!(ok.success(), "git {args:?}");
    }
    let second = Command::cargo_bin("r2e")
        .unwrap()
        .args(["build", "--json", "--cache", "cache2", "--output", "out2"])
        .current_dir(dir.path())
        .envs(common::offline_env())
        .timeout(Duration::from_secs(900))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let second: serde_json::Value = serde_json::from_slice(&second).unwrap();
    assert_eq!(second["dataset_version"].as_str(), Some(version.as_str()));
    // Cloned partially (commits and trees; the files of the pinned commit fetched at once), and
    // at the pinned commit, fetched by its id.
    let mirrors: Vec<_> = std::fs::read_dir(dir.path().join("cache2/git-v1"))
        .unwrap()
        .flatten()
        .collect();
    assert_eq!(mirrors.len(), 2);
    for m in mirrors {
        let config = std::fs::read_to_string(m.path().join("config")).unwrap();
        assert!(config.contains("promisor = true"), "{config}");
    }
    // The shards of a build spread over hosts read the same lock: between them, its
    // repositories, each once.
    let store = format!("file://{}", dir.path().join("store").display());
    let mut held = Vec::new();
    for i in 0..2 {
        Command::cargo_bin("r2e")
            .unwrap()
            .args(["build", "--until", "slice", "--cache", "cache3"])
            .args(["--shard", &format!("{i}/2"), "--remote-cache", &store])
            .current_dir(dir.path())
            .envs(common::offline_env())
            .timeout(Duration::from_secs(300))
            .assert()
            .success();
        let summary = dir
            .path()
            .join(format!(".out.r2e/shards/shard-{i}-of-2.json"));
        let summary: serde_json::Value =
            serde_json::from_slice(&std::fs::read(&summary).unwrap()).unwrap();
        for r in summary["repos"].as_array().unwrap() {
            held.push(r.as_str().unwrap().to_owned());
        }
    }
    held.sort();
    assert_eq!(held, ["alice__kept-one", "bob__kept-two"]);
    let manifest: serde_json::Value =
        serde_json::from_slice(&std::fs::read(dir.path().join("out2/manifest.json")).unwrap())
            .unwrap();
    let pinned: Vec<(String, String)> = manifest["repos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| {
            (
                r["name"].as_str().unwrap().to_owned(),
                r["commit"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    assert_eq!(
        pinned,
        [
            ("alice__kept-one".to_owned(), one),
            ("bob__kept-two".to_owned(), two)
        ]
    );
}

#[test]
fn bad_sources_and_locks_are_refused_with_their_place() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = Command::cargo_bin("r2e")
            .unwrap()
            .args(args)
            .current_dir(dir.path())
            .assert()
            .code(2)
            .get_output()
            .clone();
        String::from_utf8(out.stderr).unwrap()
    };
    let write = |query: &str, extra: &str| {
        std::fs::write(
            dir.path().join("pipeline.toml"),
            format!("[project]\nname = \"bad\"\n\n[[source]]\ngithub = \"{query}\"\n{extra}"),
        )
        .unwrap();
    };
    write("language:python stras:>=40", "");
    let err = run(&["curate"]);
    assert!(
        err.contains("pipeline.toml:5:27: `stras:` is not a GitHub"),
        "{err}"
    );
    let err = run(&["build"]);
    assert!(err.contains("`stras:` is not a GitHub"), "{err}");
    write("language:python created:>=2025-02-30", "");
    let err = run(&["curate"]);
    assert!(
        err.contains("pipeline.toml:5:27: `created:>=2025-02-30`: a date is `YYYY-MM-DD`"),
        "{err}"
    );
    write("created:2025-06-01..2025-01-01", "");
    let err = run(&["curate"]);
    assert!(err.contains("ends before it starts"), "{err}");
    write("language:python", "token_env = \"ghp_abc-def\"\n");
    let err = run(&["curate"]);
    assert!(err.contains("pipeline.toml:6:13: `token_env"), "{err}");

    // Nothing to curate.
    std::fs::create_dir_all(dir.path().join("repo")).unwrap();
    std::fs::write(
        dir.path().join("pipeline.toml"),
        "[project]\nname = \"bad\"\n\n[[repo]]\npath = \"repo\"\n",
    )
    .unwrap();
    let err = run(&["curate"]);
    assert!(err.contains("no `[[source]]` table"), "{err}");

    // No lock: a build says to curate.
    write("language:python created:>=2025-06-01", "");
    let err = run(&["build"]);
    assert!(
        err.contains("pipeline.toml:5:10: the pipeline has `[[source]]` tables but no lock")
            && err.contains("run `r2e curate`"),
        "{err}"
    );
    // A lock of other sources: a build says to update it.
    let lock = r2e_core::curation::Lock {
        version: r2e_core::curation::LOCK_VERSION,
        curated_at: "2025-07-01T00:00:00Z".into(),
        sources: "0".repeat(64),
        source: Vec::new(),
        repo: Vec::new(),
        left_out: Vec::new(),
    };
    std::fs::write(dir.path().join("repos.lock"), lock.render()).unwrap();
    let err = run(&["build"]);
    assert!(
        err.contains("was curated from other `[[source]]` settings")
            && err.contains("run `r2e curate --update`"),
        "{err}"
    );
    // A lock that is not one names its place.
    std::fs::write(
        dir.path().join("repos.lock"),
        "version = 1\ncurated_at = 3\n",
    )
    .unwrap();
    let err = run(&["build"]);
    assert!(err.contains("repos.lock:2:"), "{err}");
    // A lock of these sources whose repository would reach `git` as an option: refused at its
    // line, before any clone.
    let cfg = r2e_core::config::load_unlocked(&dir.path().join("pipeline.toml")).unwrap();
    let evil = r2e_core::curation::LockedRepo {
        name: "o__r".into(),
        full_name: "o/r".into(),
        url: "--upload-pack=touch pwned".into(),
        commit: "c".repeat(40),
        branch: "main".into(),
        created_at: "2025-06-02T00:00:00Z".into(),
        pushed_at: "2025-06-03T00:00:00Z".into(),
        stars: 41,
        license: "MIT".into(),
        size_kb: 12,
        source: 0,
        kept_because: Vec::new(),
    };
    let lock = r2e_core::curation::Lock {
        sources: r2e_core::config::sources_fingerprint(&cfg.sources),
        repo: vec![evil],
        ..lock
    };
    let text = lock.render();
    std::fs::write(dir.path().join("repos.lock"), &text).unwrap();
    let line = text.lines().position(|l| l.starts_with("url = ")).unwrap() + 1;
    let err = run(&["build"]);
    assert!(
        err.contains(&format!("repos.lock:{line}:1: repository `o__r`"))
            && err.contains("starts with `-`"),
        "{err}"
    );
    assert!(!dir.path().join("pwned").exists());
}

/// A lock pins resolution as well as commits: its curation date is uv's `--exclude-newer` for
/// every environment built from it, so a release that reaches the index after the curation is
/// not installed when the lock is built again, from an empty cache.
#[test]
fn a_lock_rebuilt_after_a_newer_release_resolves_the_same_packages() {
    let dir = tempfile::tempdir().unwrap();
    let daemon_base = dir.path().join("git");
    std::fs::create_dir_all(&daemon_base).unwrap();
    let daemon = GitDaemon::start(&daemon_base);
    let commit = bare_repo(
        &daemon_base,
        "carol/needs-dep",
        &[
            (
                "pyproject.toml",
                "[project]\nname = \"needs\"\nversion = \"0.1\"\ndependencies = [\"dep\"]\n",
            ),
            ("needs/__init__.py", ""),
            (
                "needs/core.py",
                "import dep\n\n\ndef tagged(x):\n    \"\"\"x with the dependency's version.\"\"\"\n    v = dep.VERSION\n    return str(x) + v\n",
            ),
        ],
        "2025-02-03T09:00:00Z",
    );
    let mut repo = FakeRepo::new("carol/needs-dep", "2025-02-03", 50);
    repo.clone_url = format!("{}/carol/needs-dep.git", daemon.url);
    repo.commit = commit;
    let api = FakeGithub::start(vec![repo], None, None);
    std::fs::write(
        dir.path().join("pipeline.toml"),
        format!(
            "[project]\nname = \"pinned\"\n\n[[source]]\n\
             github = \"language:python created:2025-01-01..2025-03-31\"\n\
             api_url = \"{}\"\ntoken_env = \"{TOKEN_VAR}\"\n\n\
             [env]\ninstaller = \"uv\"\ninstall_project = false\ninfer_imports = false\n",
            api.url
        ),
    )
    .unwrap();
    // The index before the curation: a stand-in for the pinned coverage.py, and dep 1.0.
    let wheels = tempfile::tempdir().unwrap();
    let index = common::index::Index::start();
    let pinned = r2e_exec::py::COVERAGE.split("==").nth(1).unwrap();
    let coverage = common::index::wheel(wheels.path(), "coverage", pinned, &[]);
    index.add("coverage", &coverage, "2023-01-01T00:00:00Z");
    let dep1 = common::index::wheel(wheels.path(), "dep", "1.0", &[]);
    index.add("dep", &dep1, "2024-01-01T00:00:00Z");

    curate(dir.path(), &[]);
    drop(api);
    let lock = read_lock(&dir.path().join("repos.lock"))
        .unwrap()
        .expect("a lock");
    let curated = r2e_core::dates::parse_rfc3339(&lock.curated_at).expect("an RFC 3339 date");
    let pipeline = dir.path().join("pipeline.toml");
    let first = crate::pypi::env_lock(&pipeline, &index);
    assert!(first.contains(&"dep==1.0".to_owned()), "{first:?}");

    // A minute after the curation, dep 2.0 reaches the index; the lock is built again from
    // nothing and keeps dep 1.0.
    let dep2 = common::index::wheel(wheels.path(), "dep", "2.0", &[]);
    index.add("dep", &dep2, &r2e_core::dates::rfc3339(curated + 60));
    std::fs::remove_dir_all(dir.path().join("cache")).unwrap();
    std::fs::remove_dir_all(dir.path().join("out")).unwrap();
    let again = crate::pypi::env_lock(&pipeline, &index);
    assert_eq!(
        again, first,
        "the rebuilt environment resolves the same packages"
    );
}

/// What the API says is checked before it reaches the lock: malformed names, clone URLs that
/// are no `https://` (nor to this machine) and commits that are no hashes are left out with
/// the reason, as are repositories gone since the search (404, apart from empty ones, 409); an
/// incomplete search is asked again, then fails writing nothing and keeping nothing; a `Link`
/// to another origin is not followed (the token would go along).
#[test]
fn curate_checks_what_github_says() {
    let dir = tempfile::tempdir().unwrap();
    let mut repos = Vec::new();
    // 101 without stars (left out without a request): two pages.
    for i in 0..101u64 {
        repos.push(FakeRepo::new(&format!("gen/r-{i:03}"), "2025-01-05", 0));
    }
    let fine = FakeRepo::new("ok/fine", "2025-01-02", 30);
    let mut gone = FakeRepo::new("ok/gone", "2025-01-02", 29);
    gone.contents_status = Some(404);
    let mut empty = FakeRepo::new("ok/empty", "2025-01-02", 28);
    empty.contents_status = Some(409);
    let dotdot = FakeRepo::new("ok/..", "2025-01-02", 27);
    let mut local = FakeRepo::new("ok/local", "2025-01-02", 26);
    local.clone_url = "file:///etc/repo.git".into();
    let mut option = FakeRepo::new("ok/option", "2025-01-02", 25);
    option.clone_url = "--upload-pack=touch /tmp/r2e-pwned".into();
    let mut plain = FakeRepo::new("ok/plain", "2025-01-02", 24);
    plain.clone_url = "git://git.example.org/ok/plain.git".into();
    let mut nosha = FakeRepo::new("ok/nosha", "2025-01-02", 23);
    nosha.commit = "main".into();
    repos.extend([fine, gone, empty, dotdot, local, option, plain, nosha]);
    let api = FakeGithub::start(repos, None, None);
    std::fs::write(
        dir.path().join("pipeline.toml"),
        format!(
            "[project]\nname = \"chk\"\n\n[[source]]\ngithub = \"language:python\"\n\
             min_stars = 1\napi_url = \"{}\"\ntoken_env = \"{TOKEN_VAR}\"\n",
            api.url
        ),
    )
    .unwrap();
    let lock_file = dir.path().join("repos.lock");
    let failing = |args: &[&str]| {
        let out = Command::cargo_bin("r2e")
            .unwrap()
            .arg("curate")
            .args(args)
            .current_dir(dir.path())
            .env(TOKEN_VAR, TOKEN)
            .timeout(Duration::from_secs(120))
            .assert()
            .code(1)
            .get_output()
            .clone();
        String::from_utf8(out.stderr).unwrap()
    };

    // Incomplete three times in a row (the first answer and both retries): nothing written,
    // nothing kept for the next conditional request.
    api.set_incomplete(3);
    let err = failing(&[]);
    assert!(
        err.contains("are incomplete (its search timed out) after 3 attempts"),
        "{err}"
    );
    assert!(!lock_file.exists());
    assert_eq!(
        common::found_under(dir.path(), common::github::INCOMPLETE_MARK.as_bytes()),
        None
    );
    // Incomplete once: asked again, and whole.
    api.set_incomplete(1);
    let (_, log) = curate(dir.path(), &[]);
    assert!(log.contains("asking again"), "{log}");
    let lock = read_lock(&lock_file).unwrap().unwrap();
    let names: Vec<_> = lock.repo.iter().map(|r| r.full_name.as_str()).collect();
    assert_eq!(names, ["ok/fine"]);
    let reason = |name: &str| {
        lock.left_out
            .iter()
            .find(|l| l.full_name == name)
            .map(|l| l.reason.clone())
            .unwrap_or_else(|| panic!("{name} is not left out"))
    };
    assert_eq!(reason("ok/gone"), "not found (deleted, renamed or private)");
    assert_eq!(reason("ok/empty"), "empty repository");
    assert!(reason("ok/..").contains("is not a GitHub `OWNER/NAME`"));
    assert!(reason("ok/local").contains("`file:///etc/repo.git` is not an `https://` URL"));
    assert!(reason("ok/option").contains("starts with `-`"));
    assert!(reason("ok/plain").contains("only from this machine or the API's host"));
    assert!(reason("ok/nosha").contains("the commit `main` is not 40"));
    assert_eq!(lock.left_out.len(), 101 + 7);
    assert_eq!(
        common::found_under(dir.path(), common::github::INCOMPLETE_MARK.as_bytes()),
        None
    );

    // A next page on another origin: refused, without the token; the lock as it was.
    let text = std::fs::read_to_string(&lock_file).unwrap();
    api.set_link_base(Some("http://127.0.0.2:9"));
    api.set_stars("gen/r-000", 2);
    let err = failing(&["--update"]);
    assert!(
        err.contains("the next page's link `http://127.0.0.2:9/search/repositories?")
            && err.contains("is not on"),
        "{err}"
    );
    assert!(!err.contains(TOKEN));
    assert_eq!(std::fs::read_to_string(&lock_file).unwrap(), text);
}
