//! Results that do not depend on the machine's load: two cold builds of one fixture (each with
//! an empty cache of its own), the second while threads keep every core of the machine busy,
//! give the same dataset version and the same `dataset.jsonl`, byte for byte. Limits count CPU
//! time (the explorer's per-call timer and safety stop, a run of a harness, the capture), with
//! wall-clock backstops three times as long.

use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::{AtomicBool, Ordering};

use crate::common;

use common::calc::{calc_clamp, calc_scale};

const FIXTURE: &str = concat!(
    "\n//- calc/__init__.py\n//- calc/ops.py\n",
    calc_clamp!(),
    "\n",
    calc_scale!(),
    r#"

def count_up(n, step=1):
    """Count from zero up to n by step, one at a time; how many steps it took."""
    if step <= 0:
        raise ValueError("step must be positive")
    steps = 0
    i = 0
    while i < n:
        i += step
        steps += 1
    return steps
"#
);

/// A cold build of the fixture in `dir` (its own cache): its summary and `dataset.jsonl`.
fn cold_build(dir: &Path) -> (serde_json::Value, Vec<u8>) {
    common::write_fixture(&dir.join("repo"), FIXTURE);
    std::fs::write(
        dir.join("pipeline.toml"),
        "version = 1\n[project]\nname = \"load\"\n\n[[repo]]\npath = \"repo\"\nname = \"calc\"\n\n\
         [env]\ninstaller = \"pip\"\n\n[select]\nmin_branch_coverage = 0.0\n\n\
         [extract]\nconnectivity = false\n",
    )
    .unwrap();
    let summary = common::offline_build(dir);
    let dataset = std::fs::read(dir.join("out/dataset.jsonl")).unwrap();
    (summary, dataset)
}

#[test]
fn a_machine_kept_busy_builds_the_same_dataset_version() {
    let idle = tempfile::tempdir().unwrap();
    let (summary, dataset) = cold_build(idle.path());
    assert!(
        summary["counts"]["instances"].as_u64() >= Some(2),
        "{summary}"
    );

    // Every core busy, twice over, for the whole second build.
    let stop = Arc::new(AtomicBool::new(false));
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let hogs: Vec<_> = (0..2 * cores)
        .map(|_| {
            let stop = stop.clone();
            std::thread::spawn(move || {
                let mut x: u64 = 1;
                while !stop.load(Ordering::Relaxed) {
                    x = x.wrapping_mul(6364136223846793005).wrapping_add(1);
                    std::hint::black_box(x);
                }
            })
        })
        .collect();
    let busy = tempfile::tempdir().unwrap();
    let (busy_summary, busy_dataset) = cold_build(busy.path());
    stop.store(true, Ordering::Relaxed);
    for h in hogs {
        h.join().unwrap();
    }
    assert_eq!(
        busy_summary["dataset_version"], summary["dataset_version"],
        "idle: {summary}\nbusy: {busy_summary}"
    );
    assert!(
        busy_dataset == dataset,
        "the same dataset.jsonl, byte for byte:\n{}\n---\n{}",
        String::from_utf8_lossy(&dataset),
        String::from_utf8_lossy(&busy_dataset)
    );
}
