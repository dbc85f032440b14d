//! Results that do not follow the clock: one fixture built cold twice (each with an empty cache
//! of its own), first on the machine as it is, then with twice as many busy-loop processes as
//! it has cores (each in a session of its own, as other builds are), gives byte-identical
//! `harnesses.jsonl` and `dataset.jsonl`. The fixture is what a clock would decide: a receiver
//! whose construction costs some 0.3 s of CPU time (each of its method's calls pays it), a
//! method and a function that wait (sleep) and spin, and a test the capture runs that waits
//! and spins between its calls. Under `r2e_limit`'s rule (CPU time or idle-machine time) the
//! capture stops in its wait, at its limit, in both builds; under the rule before it (CPU time,
//! with a wall-clock backstop three times as long) the idle build recorded the calls after the
//! wait and the busy one, whose spin takes over 4 s of the wall clock there, did not.

use std::path::Path;

use crate::common;
use common::hogs::Hogs;

const FIXTURE: &str = r#"
//- machine/__init__.py
//- machine/core.py
"""A small stack machine whose construction is costly, and helpers that wait and spin."""

import time


def _warm(rounds):
    total = 0
    for i in range(rounds):
        total = (total * 31 + i) % 1000003
    return total


class Machine:
    """A stack machine with a precomputed seed (costly to build)."""

    def __init__(self, size=4):
        if size <= 0:
            raise ValueError("size must be positive")
        self.size = size
        self.seed = _warm(5000000)
        self.stack = []

    def room(self, extra):
        """How many more values fit after `extra` more, after a short wait."""
        time.sleep(0.01)
        if extra < 0:
            raise ValueError("extra must not be negative")
        return self.size - len(self.stack) - extra


def pause(label, times=1):
    """Waits a little and spins a little `times` times; the label repeated."""
    if times < 0:
        raise ValueError("times must not be negative")
    for _ in range(min(times, 3)):
        time.sleep(0.03)
        _warm(20000)
    return label * times

//- tests/test_core.py
import hashlib
import time
import unittest

from machine.core import Machine, pause


class CoreTest(unittest.TestCase):
    def test_calls(self):
        # Arguments only a run of the test knows (its text names a variable): a call before
        # the wait, which any limit records, and calls after it.
        label = "-".join(["tick", "tock"])
        self.assertEqual(pause(label, 2), label + label)
        # Waits 5.5 s and spins about 1.5 s: within 3 s of CPU time, past 3 s of the idle-machine
        # clock (where the capture stops), within the 9 s wall-clock backstop of the rule before
        # it on an idle machine, past it beside twice as many busy loops as cores: the calls
        # after it must be recorded, or not, as on an idle machine.
        time.sleep(5.5)
        hashlib.pbkdf2_hmac("sha256", b"key", b"salt", 6000000)
        other = "-".join(["tock", "tick"])
        self.assertEqual(Machine(len(other)).room(1), 8)
        self.assertEqual(pause(other, 1), other)
"#;

/// A cold build of the fixture in `dir` (its own cache): its summary, `harnesses.jsonl` and
/// `dataset.jsonl`.
fn cold_build(dir: &Path) -> (serde_json::Value, String, String) {
    common::write_fixture(&dir.join("repo"), FIXTURE);
    std::fs::write(
        dir.join("pipeline.toml"),
        "version = 1\n[project]\nname = \"busy\"\n\n[[repo]]\npath = \"repo\"\nname = \"machine\"\n\n\
         [env]\ninstaller = \"pip\"\n\n[select]\nmin_branch_coverage = 0.0\n\n[validate]\nrepeats = 2\n\n\
         [extract]\nconnectivity = false\n\n\
         [generate]\nbudget = 6\nmax_tests = 3\nper_call_timeout_ms = 3000\n\
         time_limit_seconds = 30\ncapture_time_limit_seconds = 3\n",
    )
    .unwrap();
    let summary = common::offline_build(dir);
    let read = |name: &str| std::fs::read_to_string(dir.join("out").join(name)).unwrap();
    (summary, read("harnesses.jsonl"), read("dataset.jsonl"))
}

#[test]
fn a_machine_kept_busy_writes_the_same_harnesses_and_dataset() {
    let idle = tempfile::tempdir().unwrap();
    let (summary, harnesses, dataset) = cold_build(idle.path());
    let cores = std::thread::available_parallelism().map_or(2, |n| n.get());
    let busy = tempfile::tempdir().unwrap();
    let (busy_summary, busy_harnesses, busy_dataset) = {
        let _hogs = Hogs::start(2 * cores);
        cold_build(busy.path())
    };
    assert!(
        busy_harnesses == harnesses,
        "the same harnesses.jsonl, byte for byte:\n{harnesses}\n---\n{busy_harnesses}"
    );
    assert!(
        busy_dataset == dataset,
        "the same dataset.jsonl, byte for byte:\n{dataset}\n---\n{busy_dataset}"
    );
    assert_eq!(
        busy_summary["dataset_version"], summary["dataset_version"],
        "idle: {summary}\nbusy: {busy_summary}"
    );
    // And they are worth comparing: the costly receiver's method was explored, and the
    // capture's calls (with an argument only a run of the test knows) reached a harness.
    assert!(harnesses.contains("Machine.room"), "{harnesses}");
    assert!(dataset.contains("tick-tock"), "{dataset}");
    assert!(
        summary["counts"]["instances"].as_u64() >= Some(1),
        "{summary}"
    );
}
