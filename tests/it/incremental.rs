//! Incrementality is a feature: these tests count executed queries (salsa's `WillExecute`
//! events) and executed actions across rebuilds.

use crate::common;
use common::Project;
use r2e_core::hash::Hash;
use r2e_pipeline::db::{self, Db, ItemId, SourceFile};
use r2e_pipeline::session::Session;
use r2e_python::resolve::Item;
use salsa::Setter;

const REPO: &str = r#"
//- pkg/__init__.py
//- pkg/base.py
RATE = 3

def leaf(x):
    """Leaf."""
    y = x * RATE
    return y
//- pkg/other.py
RATE = 4

def other_leaf(x):
    """Not in any slice but its own."""
    y = x - RATE
    return y
//- pkg/mid.py
from pkg.base import leaf

def middle(x):
    """Calls leaf."""
    y = leaf(x)
    return y + 1

def alone(x):
    """Calls other_leaf only."""
    from pkg.other import other_leaf
    z = other_leaf(x)
    return z
//- pkg/top.py
from pkg import mid

def top(x):
    """Calls middle."""
    y = mid.middle(x)
    return y * 2
"#;

/// Runs every query a build runs; returns the candidates as (file, def index).
fn run_all(s: &Session) -> Vec<(SourceFile, u32)> {
    let mut candidates = Vec::new();
    for f in s.all_files() {
        let _ = db::parse_file(&s.db, f);
        for row in db::file_functions(&s.db, f, s.settings).iter() {
            if row.excluded_by.is_none() {
                candidates.push((f, row.def));
            }
        }
    }
    for &(f, def) in &candidates {
        let item = ItemId::new(&s.db, f.repo(&s.db), Item::Def(f.ix(&s.db), def));
        let _ = db::slice_of(&s.db, item);
        let _ = db::context_of(&s.db, item, s.settings);
    }
    candidates
}

fn executions(s: &Session, query: &str) -> u64 {
    s.db.env().counters.executions_of(query)
}

fn edit(p: &Project, s: &mut Session, path: &str, text: &str) {
    p.write(path, text);
    let bytes = std::fs::read(p.path().join("repo").join(path)).unwrap();
    let file = s
        .all_files()
        .into_iter()
        .find(|f| f.path(&s.db) == path)
        .unwrap();
    file.set_hash(&mut s.db).to(Hash::of_bytes(&bytes));
    s.db.env().counters.reset_executions();
}

fn session(p: &Project) -> Session {
    let cfg = r2e_core::config::load(&p.pipeline()).unwrap();
    Session::open_with(&cfg, true).unwrap()
}

const BASE: &str =
    "RATE = 3\n\ndef leaf(x):\n    \"\"\"Leaf.\"\"\"\n    y = x * RATE\n    return y\n";

#[test]
fn noop_rebuild_executes_nothing() {
    let p = Project::new(REPO, "");
    let s = session(&p);
    let candidates = run_all(&s);
    assert_eq!(candidates.len(), 5);
    assert!(executions(&s, "parse_file") > 0);
    s.db.env().counters.reset_executions();
    run_all(&s);
    let total: u64 =
        s.db.env()
            .counters
            .executions
            .lock()
            .unwrap()
            .values()
            .sum();
    assert_eq!(total, 0);
}

#[test]
fn editing_one_file_reparses_only_that_file() {
    let p = Project::new(REPO, "");
    let mut s = session(&p);
    run_all(&s);
    edit(
        &p,
        &mut s,
        "pkg/top.py",
        "from pkg import mid\n\ndef top(x):\n    \"\"\"Calls middle, twice.\"\"\"\n    y = mid.middle(x)\n    return y * 2 + mid.middle(y)\n",
    );
    run_all(&s);
    assert_eq!(executions(&s, "parse_file"), 1);
    assert_eq!(
        executions(&s, "file_functions"),
        1,
        "only the edited file is re-extracted"
    );
}

#[test]
fn comment_in_a_sliced_function_reslices_nothing() {
    let p = Project::new(REPO, "");
    let mut s = session(&p);
    run_all(&s);
    edit(
        &p,
        &mut s,
        "pkg/base.py",
        &BASE.replace(
            "    y = x * RATE\n",
            "    # a new comment\n    y = x * RATE  # and another\n",
        ),
    );
    run_all(&s);
    assert_eq!(executions(&s, "parse_file"), 1);
    assert_eq!(executions(&s, "file_interface"), 1);
    assert_eq!(executions(&s, "slice_of"), 0, "interfaces did not change");
    assert_eq!(executions(&s, "item_deps"), 0);
    // Contexts show source text, comments included: exactly those showing base.py re-render
    // (leaf, middle, top); `alone` and `other_leaf` do not.
    assert_eq!(executions(&s, "context_of"), 3);
}

#[test]
fn body_edit_reslices_exactly_the_functions_holding_it() {
    let p = Project::new(REPO, "");
    let mut s = session(&p);
    run_all(&s);
    // A new call in leaf's body changes what it references.
    let edited = BASE.replace(
        "    return y\n",
        "    return helper(y)\n\ndef helper(v):\n    return v\n",
    );
    edit(&p, &mut s, "pkg/base.py", &edited);
    run_all(&s);
    // leaf, middle and top hold leaf; `alone` and `other_leaf` do not.
    assert_eq!(executions(&s, "slice_of"), 3);
    assert_eq!(executions(&s, "context_of"), 3);
    // A body edit that keeps every reference: slices stop early, contexts re-render for the same three.
    let edited2 = edited.replace("x * RATE", "x * RATE * RATE");
    edit(&p, &mut s, "pkg/base.py", &edited2);
    run_all(&s);
    assert_eq!(executions(&s, "slice_of"), 0);
    assert_eq!(executions(&s, "context_of"), 3);
}

#[test]
fn second_build_reports_zero_executed_and_keeps_outputs() {
    let p = Project::new(REPO, "");
    let first = p.build();
    assert!(first.stages.parse.executed > 0);
    // Slices and contexts are counted apart: five candidates, each sliced and rendered once.
    assert_eq!(first.stages.slice.executed, 5);
    assert_eq!(first.stages.context.executed, 5);
    let out = p.path().join("out/functions.jsonl");
    let mtime = std::fs::metadata(&out).unwrap().modified().unwrap();
    let second = p.build();
    for (stage, c) in second.stages.rows() {
        assert_eq!(c.executed, 0, "{stage}");
    }
    let functions = || std::fs::read(p.path().join("out/functions.jsonl")).unwrap();
    let before = functions();
    assert_eq!(
        std::fs::metadata(&out).unwrap().modified().unwrap(),
        mtime,
        "unchanged outputs are not rewritten"
    );
    // An edit re-parses exactly one file in a new process.
    p.write("pkg/top.py", "from pkg import mid\n\ndef top(x):\n    \"\"\"Changed.\"\"\"\n    y = mid.middle(x)\n    return y * 3\n");
    let third = p.build();
    let parse = third.stages.parse;
    assert_eq!((parse.executed, parse.cached), (1, 4));
    assert_ne!(functions(), before);
}

#[test]
fn a_build_that_changes_no_output_rewrites_none() {
    use std::os::unix::fs::MetadataExt;
    let p = Project::new(REPO, "");
    p.build();
    let out = p.path().join("out");
    let files = ["functions.jsonl", "slices/r.jsonl"];
    let stamp = || {
        files.map(|f| {
            let m = std::fs::metadata(out.join(f)).unwrap();
            (m.ino(), m.mtime(), m.mtime_nsec())
        })
    };
    let before = stamp();
    let bytes = files.map(|f| std::fs::read(out.join(f)).unwrap());
    // A body edit that keeps every line, name and token count: the build runs (the file is
    // parsed again), and every output it writes has the bytes it had.
    p.write(
        "pkg/base.py",
        &REPO[REPO.find("RATE = 3").unwrap()..REPO.find("//- pkg/other.py").unwrap()]
            .replace("x * RATE", "x + RATE"),
    );
    let second = p.build();
    assert_eq!(second.stages.parse.executed, 1);
    assert_eq!(files.map(|f| std::fs::read(out.join(f)).unwrap()), bytes);
    assert_eq!(
        stamp(),
        before,
        "unchanged outputs keep their inode and mtime"
    );
}

/// Another interpreter behind `[env] python` (an upgrade in place, another one first on the
/// `PATH`) changes every environment's key: the build is not a no-op.
#[test]
fn a_changed_interpreter_is_not_a_noop() {
    let dir = tempfile::tempdir().unwrap();
    let python = dir.path().join("python3");
    std::fs::write(&python, "#!/bin/sh\nexit 0\n").unwrap();
    let p = Project::new(REPO, &format!("[env]\npython = \"{}\"\n", python.display()));
    p.build();
    // A build that runs records its fingerprint in the output's state; a no-op leaves it.
    let state = || std::fs::read(p.path().join("out/.r2e/state")).unwrap();
    let first = state();
    let again = p.build();
    assert_eq!(again.stages.extract.executed, 0, "a no-op");
    assert_eq!(state(), first, "a no-op");
    // The same path, another file.
    std::fs::write(&python, "#!/bin/sh\n# upgraded\nexit 0\n").unwrap();
    p.build();
    assert_ne!(state(), first, "not a no-op");
}

/// The persisted analysis (`engine::memo`): each build is a new session, as a new process is,
/// with only the cache in common. After each edit the counts are those the edit calls for,
/// and the outputs are byte for byte those of a cold build of the same tree with an empty
/// cache.
#[test]
fn persisted_analysis_reruns_only_what_an_edit_touches_and_matches_a_cold_build() {
    let p = Project::new(REPO, "");
    let cold_pipeline = p.path().join("cold.toml");
    let outputs = |out: &str| {
        ["functions.jsonl", "slices/r.jsonl"]
            .map(|f| String::from_utf8(std::fs::read(p.path().join(out).join(f)).unwrap()).unwrap())
    };
    let cold = |n: u32| {
        // A fresh cache and output every time.
        std::fs::write(
            &cold_pipeline,
            format!(
                "[project]\nname = \"t\"\noutput = \"cold{n}\"\ncache = \"cold-cache{n}\"\n\n[[repo]]\npath = \"repo\"\nname = \"r\"\n"
            ),
        )
        .unwrap();
        let cfg = r2e_core::config::load(&cold_pipeline).unwrap();
        let summary = r2e_pipeline::engine::build(
            &cfg,
            &r2e_pipeline::engine::BuildOptions {
                until: r2e_pipeline::stages::Stage::Slice,
                jobs: Some(2),
            },
        )
        .unwrap();
        assert_eq!(
            summary.stages.slice.executed, 5,
            "a cold build slices everything"
        );
        outputs(&format!("cold{n}"))
    };
    let counts = |s: &r2e_core::records::Summary| {
        let st = &s.stages;
        [
            st.parse.executed,
            st.extract.executed,
            st.slice.executed,
            st.context.executed,
        ]
    };
    let base = |body: &str| {
        REPO[REPO.find("RATE = 3").unwrap()..REPO.find("//- pkg/other.py").unwrap()]
            .replace("    y = x * RATE\n", body)
    };
    p.build();

    // A comment outside every definition: one file parsed and extracted (its lines moved),
    // no slice, no context.
    p.write(
        "pkg/base.py",
        &format!("# a note\n{}", base("    y = x * RATE\n")),
    );
    assert_eq!(counts(&p.build()), [1, 1, 0, 0]);
    assert_eq!(outputs("out"), cold(1));

    // A comment inside `leaf`: the contexts that show it (leaf's, middle's and top's) are
    // rendered again; no slice is computed.
    p.write(
        "pkg/base.py",
        &format!("# a note\n{}", base("    # why\n    y = x * RATE\n")),
    );
    assert_eq!(counts(&p.build()), [1, 1, 0, 3]);
    assert_eq!(outputs("out"), cold(2));

    // A body edit that names nothing new: the same three contexts (longer now), no slice.
    p.write(
        "pkg/base.py",
        &format!(
            "# a note\n{}",
            base("    # why\n    y = x * RATE * RATE * RATE\n")
        ),
    );
    assert_eq!(counts(&p.build()), [1, 1, 0, 3]);
    assert_eq!(outputs("out"), cold(3));

    // A body edit that names another function changes the interfaces: every slice again.
    p.write(
        "pkg/base.py",
        &format!(
            "# a note\nfrom pkg.other import other_leaf\n{}",
            base("    y = other_leaf(x) * RATE\n")
        ),
    );
    let after = p.build();
    assert_eq!(after.stages.slice.executed, 5);
    assert_eq!(outputs("out"), cold(4));

    // A damaged entry is a miss: everything of the repository is computed again, the same.
    let analysis = p.path().join("cache").join("analysis-v1");
    let mut damaged = 0;
    for entry in walkdir::WalkDir::new(&analysis) {
        let entry = entry.unwrap();
        if entry.file_type().is_file() {
            let mut bytes = std::fs::read(entry.path()).unwrap();
            let last = bytes.len() - 1;
            bytes[last] ^= 1;
            std::fs::write(entry.path(), bytes).unwrap();
            damaged += 1;
        }
    }
    assert_eq!(
        damaged, 2,
        "one entry for the parse stage, one for the dataset"
    );
    p.write("pkg/top.py", "from pkg import mid\n\ndef top(x):\n    \"\"\"Calls middle.\"\"\"\n    y = mid.middle(x)\n    return y * 2\n# end\n");
    let again = p.build();
    assert_eq!(again.stages.slice.executed, 5);
    assert_eq!(
        again.stages.parse.executed, 1,
        "the others come from the action cache"
    );
    assert_eq!(outputs("out"), cold(5));
}

/// The persisted analysis is this r2e's: another build of r2e (rebuilt, upgraded) does not take
/// the slices, rows or contexts that the previous one computed, which its code may compute
/// differently.
#[test]
fn another_build_of_r2e_does_not_reuse_the_persisted_analysis() {
    let p = Project::new(REPO, "");
    let bin = assert_cmd::cargo::cargo_bin("r2e");
    let copy = |name: &str, stamp: &str| {
        let to = p.path().join(name);
        std::fs::copy(&bin, &to).unwrap();
        let touched = std::process::Command::new("touch")
            .args(["-d", stamp])
            .arg(&to)
            .status()
            .unwrap();
        assert!(touched.success());
        to
    };
    let old = copy("r2e-old", "2026-01-01 00:00:00");
    let new = copy("r2e-new", "2026-01-02 00:00:00");
    let build = |bin: &std::path::Path| {
        common::stdout_json(
            assert_cmd::Command::new(bin)
                .arg("build")
                .arg(p.pipeline())
                .args(["--until", "slice", "--json"]),
        )
    };
    let comment = |n: u32| {
        p.write(
            "pkg/top.py",
            &format!("from pkg import mid\n\ndef top(x):\n    \"\"\"Calls middle.\"\"\"\n    y = mid.middle(x)\n    return y * 2\n# {n}\n"),
        )
    };
    build(&old);
    comment(1);
    let same = build(&old);
    assert_eq!(same["stages"]["slice"]["executed"], 0, "{same}");
    comment(2);
    let other = build(&new);
    assert_eq!(other["stages"]["slice"]["executed"], 5, "{other}");
    assert_eq!(other["stages"]["extract"]["executed"], 5, "{other}");
}

/// A cold build of a repository of many files stores their parse outcomes as one pack, not one
/// entry each; later builds read the summaries they need from it instead of parsing again, keep
/// it among what the output uses (for `r2e gc`), and give the outputs of a cold build. A
/// damaged pack is only a miss.
#[test]
fn a_cold_build_stores_parse_results_in_one_pack_that_later_builds_read() {
    const MODULES: usize = 70;
    let leaf = |body: &str| {
        format!("RATE = 3\n\ndef leaf(x):\n    \"\"\"Leaf.\"\"\"\n{body}    return y\n")
    };
    let mut spec = format!(
        "//- pkg/__init__.py\n//- pkg/base.py\n{}",
        leaf("    y = x * RATE\n")
    );
    for i in 0..MODULES {
        spec.push_str(&format!(
            "//- pkg/m{i}.py\nfrom pkg.base import leaf\n\ndef f{i}(x):\n    \"\"\"Calls leaf.\"\"\"\n    y = leaf(x)\n    return y + {i}\n"
        ));
    }
    let p = Project::new(&spec, "");
    let cache = p.path().join("cache");
    let entries = |bucket: &str| {
        walkdir::WalkDir::new(cache.join("actions").join(bucket))
            .into_iter()
            .filter_map(Result::ok)
            .filter(|e| e.file_type().is_file())
            .map(|e| e.into_path())
            .collect::<Vec<_>>()
    };
    let files = MODULES + 2;
    let cold = p.build();
    assert_eq!(
        cold.stages.parse.executed + cold.stages.parse.cached,
        files as u64
    );
    assert_eq!(entries("parse-pack-v1").len(), 1, "one pack");
    assert_eq!(entries("parse-v3").len(), 0, "no entry per file");
    let pack = entries("parse-pack-v1").remove(0);
    let uses = || r2e_core::cache::read_uses(&p.path().join("out")).unwrap();
    let rel = pack
        .strip_prefix(&cache)
        .unwrap()
        .to_string_lossy()
        .into_owned();
    assert!(uses().contains(&rel));

    // A comment in one module: that file alone is parsed, and stored in an entry of its own.
    // The build reads nothing from the pack, and still names it among what the output uses.
    p.write(
        "pkg/m3.py",
        "# a note\nfrom pkg.base import leaf\n\ndef f3(x):\n    \"\"\"Calls leaf.\"\"\"\n    y = leaf(x)\n    return y + 3\n",
    );
    let s = p.build();
    assert_eq!(
        [
            s.stages.parse.executed,
            s.stages.slice.executed,
            s.stages.context.executed
        ],
        [1, 0, 0]
    );
    assert_eq!(entries("parse-v3").len(), 1);
    assert!(uses().contains(&rel), "the memo's pack is kept for gc");

    // A body edit of `leaf`: every context holds it and is rendered again, from summaries read
    // out of the pack: one file parsed.
    p.write("pkg/base.py", &leaf("    y = x * RATE * RATE\n"));
    let s = p.build();
    assert_eq!(
        [
            s.stages.parse.executed,
            s.stages.slice.executed,
            s.stages.context.executed
        ],
        [1, 0, MODULES as u64 + 1]
    );
    let outputs = |out: &std::path::Path| {
        ["functions.jsonl", "slices/r.jsonl"].map(|f| std::fs::read(out.join(f)).unwrap())
    };
    let fresh = |n: u32| {
        let toml = p.path().join(format!("cold{n}.toml"));
        std::fs::write(
            &toml,
            format!("[project]\nname = \"t\"\noutput = \"cold{n}\"\ncache = \"cold-cache{n}\"\n\n[[repo]]\npath = \"repo\"\nname = \"r\"\n"),
        )
        .unwrap();
        let cfg = r2e_core::config::load(&toml).unwrap();
        r2e_pipeline::engine::build(
            &cfg,
            &r2e_pipeline::engine::BuildOptions {
                until: r2e_pipeline::stages::Stage::Slice,
                jobs: Some(2),
            },
        )
        .unwrap();
        outputs(&p.path().join(format!("cold{n}")))
    };
    assert!(
        outputs(&p.path().join("out")) == fresh(1),
        "as a cold build"
    );

    // A damaged pack is a miss: the summaries the contexts need are parsed again.
    let mut bytes = std::fs::read(&pack).unwrap();
    let last = bytes.len() - 1;
    bytes[last] ^= 1;
    std::fs::write(&pack, bytes).unwrap();
    p.write("pkg/base.py", &leaf("    y = x * RATE * RATE * RATE\n"));
    let s = p.build();
    assert_eq!(s.stages.slice.executed, 0);
    assert!(s.stages.parse.executed > 1, "{:?}", s.stages.parse);
    assert!(
        outputs(&p.path().join("out")) == fresh(2),
        "as a cold build"
    );
}
