//! The Python side that runs in the sandbox (`crates/exec/src/py/`: the equivalence helper, the explorer,
//! the runner) has its own unittest suite; it runs with the Rust tests, under an interpreter
//! with the pinned coverage.py (`common::test_python`).

use crate::common;

#[test]
fn python_unit_tests_pass() {
    let dir = std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("crates/exec/src/py");
    let out = std::process::Command::new(common::test_python())
        .args(["-m", "unittest", "discover", "-s", "tests"])
        .current_dir(&dir)
        .env("PYTHONDONTWRITEBYTECODE", "1")
        .output()
        .expect("python3 runs");
    let stderr = String::from_utf8_lossy(&out.stderr);
    assert!(out.status.success(), "{stderr}");
    let count = common::unittest_ran(&stderr);
    assert!(count >= 30, "only {count} Python tests ran: {stderr}");
}
