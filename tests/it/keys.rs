//! Sound action keys: change one input of a key and exactly the actions it shapes run again
//! (counts from the `--json` summary of the real binary), and nothing else does. Builds are
//! offline: environments install the pinned coverage.py from the tests' wheelhouse.

use crate::common;

use common::Project;
use serde_json::Value;

const REPO: &str = r#"
//- pkg/__init__.py
LIMIT = 100
//- pkg/ops.py
def _double(x):
    return x * 2


def scale(x, k):
    """Scale x by k, doubled."""
    y = _double(x)
    return y * k


def shift(x, d):
    """Shift x by d, doubled."""
    y = _double(x)
    return y + d
//- other/__init__.py
//- other/calc.py
def _half(x):
    return x / 2


def halve_sum(a, b):
    """Half of the sum of a and b."""
    s = a + b
    return _half(s)
"#;

const PIPELINE: &str = "[env]\ninstaller = \"pip\"\n";

fn build(p: &Project) -> Value {
    common::offline_build(p.path())
}

/// (executed, cached) of a stage.
fn ran(summary: &Value, stage: &str) -> (u64, u64) {
    let s = &summary["stages"][stage];
    (
        s["executed"].as_u64().unwrap(),
        s["cached"].as_u64().unwrap(),
    )
}

#[test]
fn each_input_of_a_key_reruns_exactly_the_actions_it_shapes() {
    let p = Project::new(REPO, PIPELINE);
    let first = build(&p);
    assert_eq!(ran(&first, "generate"), (3, 0), "{first}");
    assert_eq!(ran(&first, "validate").0, 3, "{first}");
    let instances = || -> Vec<Value> {
        std::fs::read_to_string(p.path().join("out/dataset.jsonl"))
            .unwrap()
            .lines()
            .map(|l| {
                let mut v: Value = serde_json::from_str(l).unwrap();
                // A folder's identity is a hash of its files: it moves with any edit.
                v["commit"] = Value::Null;
                v
            })
            .collect()
    };
    let before = instances();

    // A comment above a function: the file is parsed again, and nothing past that runs.
    let ops = std::fs::read_to_string(p.path().join("repo/pkg/ops.py")).unwrap();
    std::fs::write(
        p.path().join("repo/pkg/ops.py"),
        ops.replace("def shift", "# Shifting, as the docs say.\ndef shift"),
    )
    .unwrap();
    let commented = build(&p);
    assert_eq!(ran(&commented, "parse"), (1, 3), "{commented}");
    for stage in ["env", "generate", "validate"] {
        assert_eq!(ran(&commented, stage).0, 0, "{stage}: {commented}");
    }
    assert_eq!(instances(), before, "the same instances");

    // Module-level code of a package's `__init__.py` runs when its modules are imported: the
    // functions of that package run again, the other package's do not.
    std::fs::write(
        p.path().join("repo/pkg/__init__.py"),
        "LIMIT = 100\nREGISTRY = {}\n",
    )
    .unwrap();
    let init = build(&p);
    assert_eq!(ran(&init, "parse"), (1, 3), "{init}");
    assert_eq!(ran(&init, "generate"), (2, 1), "{init}");
    assert_eq!(ran(&init, "validate"), (2, 1), "{init}");

    // A sandbox limit shapes what code does: everything that runs code runs again; parsing and
    // the environment do not.
    std::fs::write(
        p.pipeline(),
        std::fs::read_to_string(p.pipeline()).unwrap() + "\n[sandbox]\nmemory_mib = 1536\n",
    )
    .unwrap();
    let limited = build(&p);
    assert_eq!(ran(&limited, "parse"), (0, 4), "{limited}");
    assert_eq!(ran(&limited, "env"), (0, 1), "{limited}");
    assert_eq!(ran(&limited, "generate"), (3, 0), "{limited}");
    assert_eq!(ran(&limited, "validate"), (3, 0), "{limited}");
}

#[test]
fn a_file_changed_between_the_walk_and_the_read_is_never_cached_under_the_walked_hash() {
    use r2e_core::cache::ActionKey;
    use r2e_pipeline::engine::BuildOptions;
    use r2e_pipeline::session::Session;
    use r2e_pipeline::stages::Stage;

    let p = Project::new(REPO, "");
    let cfg = r2e_core::config::load(&p.pipeline()).unwrap();
    let opts = BuildOptions {
        until: Stage::Slice,
        jobs: Some(2),
    };
    let session = Session::open(&cfg).unwrap();
    let walked = session
        .checkouts
        .iter()
        .flat_map(|c| c.files.iter())
        .find(|f| f.path == "other/calc.py")
        .unwrap()
        .hash;
    // The file changes after the walk hashed it, before the parser reads it.
    std::fs::write(
        p.path().join("repo/other/calc.py"),
        "def _half(x):\n    return x / 4\n\n\ndef halve_sum(a, b):\n    \"\"\"Changed.\"\"\"\n    s = a + b\n    return _half(s)\n",
    )
    .unwrap();
    let services = r2e_exec::services::Services::for_config(&cfg, false);
    let first = r2e_pipeline::engine::build_session(session, &opts, &services).unwrap();
    assert_eq!(first.stages.parse.failed, 1);
    let failures = std::fs::read_to_string(p.path().join("out/failures.jsonl")).unwrap();
    assert!(
        failures.contains("other/calc.py") && failures.contains("changed while the build read it"),
        "{failures}"
    );
    // Nothing was stored under the hash the walk saw.
    let cache = r2e_core::cache::Cache::open(&cfg.cache).unwrap();
    assert!(!cache.contains(
        r2e_core::keys::ParseKey::BUCKET,
        r2e_core::keys::ParseKey::new(walked).hash()
    ));
    drop(cache);
    // The next build is not taken for up to date: it reads the file as it is now, and only it.
    let second = r2e_pipeline::engine::build(&cfg, &opts).unwrap();
    assert_eq!(second.stages.parse.executed, 1);
    assert_eq!(second.stages.parse.failed, 0);
    let functions = p.functions();
    assert!(functions.contains_key("r:other/calc.py:halve_sum"));
}

/// The entry files of a cache bucket, sorted.
fn entries(p: &Project, bucket: r2e_core::cache::Bucket) -> Vec<std::path::PathBuf> {
    let dir = p.path().join("cache").join(bucket.folder());
    let mut out: Vec<_> = walkdir::WalkDir::new(dir)
        .into_iter()
        .flatten()
        .filter(|e| e.file_type().is_file())
        .map(|e| e.into_path())
        .collect();
    out.sort();
    out
}

fn flip_a_bit(path: &std::path::Path) {
    let mut bytes = std::fs::read(path).unwrap();
    let at = bytes.len() / 2;
    bytes[at] ^= 0x04;
    std::fs::write(path, bytes).unwrap();
}

#[test]
fn damaged_cache_entries_are_recomputed_and_never_served() {
    use r2e_core::cache::Bucket;
    let p = Project::new(REPO, PIPELINE);
    let clean = build(&p);
    let validations = entries(&p, Bucket::Validate);
    assert_eq!(validations.len(), 3);
    // Two validations swapped: each file holds the other's entry.
    let (a, b) = (
        std::fs::read(&validations[0]).unwrap(),
        std::fs::read(&validations[1]).unwrap(),
    );
    std::fs::write(&validations[0], &b).unwrap();
    std::fs::write(&validations[1], &a).unwrap();
    // One explorer result torn, one parse result and the stat memo with a flipped bit.
    let generated = entries(&p, Bucket::Generate);
    let torn = std::fs::read(&generated[0]).unwrap();
    std::fs::write(&generated[0], &torn[..torn.len() - 7]).unwrap();
    flip_a_bit(&entries(&p, Bucket::Parse)[0]);
    let memos = entries(&p, Bucket::Stat);
    assert_eq!(memos.len(), 1);
    flip_a_bit(&memos[0]);
    std::fs::remove_dir_all(p.path().join("out")).unwrap();

    let (rebuilt, stderr) = common::offline_build_logged(p.path());
    let executed: u64 = ["parse", "generate", "validate"]
        .iter()
        .map(|s| ran(&rebuilt, s).0)
        .sum();
    assert_eq!(
        executed, 4,
        "one action per damaged entry: {rebuilt}\n{stderr}"
    );
    assert_eq!(ran(&rebuilt, "env").0, 0);
    assert_eq!(rebuilt["dataset_version"], clean["dataset_version"]);
    // Each damaged entry was named on stderr.
    let warnings: Vec<&str> = stderr
        .lines()
        .filter(|l| l.contains("is damaged"))
        .collect();
    assert_eq!(warnings.len(), 5, "{stderr}");
    for path in [&validations[0], &validations[1], &generated[0], &memos[0]] {
        assert!(
            warnings
                .iter()
                .any(|w| w.contains(&*path.to_string_lossy())),
            "{} is not named: {stderr}",
            path.display()
        );
    }
    // The recomputed entries verify: the next build (fresh output again) executes nothing.
    std::fs::remove_dir_all(p.path().join("out")).unwrap();
    let (again, stderr) = common::offline_build_logged(p.path());
    for stage in ["parse", "generate", "validate", "env"] {
        assert_eq!(ran(&again, stage).0, 0, "{stage}: {again}");
    }
    assert!(!stderr.contains("is damaged"), "{stderr}");
}
