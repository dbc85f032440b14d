//! A repository of hostile functions, built through the whole pipeline: each is stopped or
//! contained, its harness is recorded with a failure class or validated, the build goes on, and
//! nothing outside the sandbox's scratch folders changes.

use serde_json::Value;

use crate::common;

const HOSTILE: &str = r#"
LIMIT = 3

def spin(n):
    """Loops forever for positive n."""
    total = LIMIT
    while n > 0:
        total += 1
    return total

def hog(n):
    """Allocates without bound."""
    chunks = [LIMIT]
    while True:
        chunks.append(bytearray(10 ** 7 * max(n, 1)))
    return chunks

def breed(n):
    """Forks without bound."""
    import os
    pids = [LIMIT]
    for _ in range(100000):
        pids.append(os.fork())
    return len(pids)

def vandal(n):
    """Writes outside its folder."""
    with open(OUTSIDE, "w") as f:
        f.write(str(n + LIMIT))
    return n

def caller(n):
    """Opens a network connection."""
    import socket
    s = socket.create_connection(("127.0.0.1", PORT), timeout=2)
    s.sendall(b"hello")
    return n + LIMIT

def quitter(n):
    """Ends the process."""
    import os
    if n > LIMIT:
        os._exit(3)
    return n * 2

def fine(n):
    """A well-behaved neighbour."""
    if n > LIMIT:
        return n - LIMIT
    return n + LIMIT
"#;

#[test]
fn hostile_functions_are_contained_and_recorded() {
    hostile_functions_in("[sandbox]\nmemory_mib = 512\n\n");
}

/// The same suite with every job in a container of the Docker backend.
#[test]
fn hostile_functions_are_contained_and_recorded_in_docker() {
    if common::docker().is_some() {
        hostile_functions_in("[sandbox]\nbackend = \"docker\"\nmemory_mib = 512\n\n");
    }
}

/// The suite, with `sandbox` (a `[sandbox]` table, or nothing) in its pipeline.
fn hostile_functions_in(sandbox: &str) {
    let dir = tempfile::tempdir().unwrap();
    let outside = tempfile::tempdir().unwrap();
    let sentinel = outside.path().join("owned.txt");
    let listener = std::net::TcpListener::bind("127.0.0.1:0").unwrap();
    listener.set_nonblocking(true).unwrap();
    let port = listener.local_addr().unwrap().port();
    let source = format!(
        "OUTSIDE = {:?}\nPORT = {port}\n{HOSTILE}",
        sentinel.to_string_lossy()
    );
    std::fs::create_dir_all(dir.path().join("repo")).unwrap();
    std::fs::write(dir.path().join("repo/hostile.py"), source).unwrap();
    // A call's time limit well above the time `hog` takes to fill the job's memory (0.3 s for
    // its 512 MiB here, idle): with 0.5 s, a loaded machine stopped it by time first, and its
    // class was `timeout` instead of the memory limit that is under test. The explorer's time
    // limit stops `spin` after a few calls.
    std::fs::write(
        dir.path().join("pipeline.toml"),
        format!(
            "[[repo]]\npath = \"repo\"\n\n{sandbox}[extract]\nkeywords = false\n\n[env]\ninstaller = \"pip\"\n\n\
             [generate]\nbudget = 200\nper_call_timeout_ms = 2000\ntime_limit_seconds = 10\n"
        ),
    )
    .unwrap();
    let summary = common::offline_build(dir.path());
    assert_eq!(summary["counts"]["candidates"], 7, "{summary}");
    let harnesses: Vec<Value> = std::fs::read_to_string(dir.path().join("out/harnesses.jsonl"))
        .unwrap()
        .lines()
        .map(|l| serde_json::from_str(l).unwrap())
        .collect();
    assert_eq!(harnesses.len(), 7);
    let by_name = |name: &str| {
        harnesses
            .iter()
            .find(|h| h["id"].as_str().unwrap().ends_with(&format!(":{name}")))
            .unwrap()
            .clone()
    };
    // The neighbour is unharmed.
    assert_eq!(by_name("fine")["valid"], true, "{}", by_name("fine"));
    // The hostile ones are recorded, each with a class when invalid.
    for name in ["spin", "hog", "breed", "vandal", "caller", "quitter"] {
        let h = by_name(name);
        if h["valid"] == false {
            assert!(
                h["failure_class"].is_string() && h["failure_message"].is_string(),
                "{h}"
            );
        }
    }
    // A memory kill is called one, and names the limit.
    assert_eq!(
        by_name("hog")["failure_class"],
        "resource_limit",
        "{}",
        by_name("hog")
    );
    assert!(
        by_name("hog")["failure_message"]
            .as_str()
            .unwrap()
            .contains("memory limit"),
        "{}",
        by_name("hog")
    );
    // No failure message shows a path of this machine.
    let text = std::fs::read_to_string(dir.path().join("out/harnesses.jsonl")).unwrap();
    assert!(!text.contains(&*dir.path().to_string_lossy()), "{text}");
    // Nothing escaped.
    assert!(!sentinel.exists(), "a function wrote outside the sandbox");
    assert!(listener.accept().is_err(), "a function reached the network");
    // And a second build reruns nothing that was recorded.
    let again = common::offline_build(dir.path());
    assert_eq!(again["stages"]["generate"]["executed"], 0, "{again}");
}

/// A module whose import never ends: the explorer is killed by the sandbox's wall clock. That
/// may be a loaded machine rather than the code, so it is recorded but not cached, and the next
/// build runs it again instead of taking the output for up to date.
#[test]
fn a_sandbox_timeout_is_recorded_and_retried_by_the_next_build() {
    let dir = tempfile::tempdir().unwrap();
    std::fs::create_dir_all(dir.path().join("repo")).unwrap();
    std::fs::write(
        dir.path().join("repo/stuck.py"),
        "import signal\nimport time\n\nLIMIT = 3\n\n# Deaf to the explorer's own timers: only the sandbox's wall clock stops it.\nsignal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGALRM, signal.SIGVTALRM, signal.SIGPROF})\ntime.sleep(3600)\n\n\ndef fine(n):\n    \"\"\"Clamp n.\"\"\"\n    if n > LIMIT:\n        return LIMIT\n    return n\n",
    )
    .unwrap();
    std::fs::write(
        dir.path().join("pipeline.toml"),
        "[[repo]]\npath = \"repo\"\n\n[env]\ninstaller = \"pip\"\n\n\
         [generate]\ntime_limit_seconds = 1\n",
    )
    .unwrap();
    let first = common::offline_build(dir.path());
    assert_eq!(first["stages"]["generate"]["executed"], 1, "{first}");
    let harness = std::fs::read_to_string(dir.path().join("out/harnesses.jsonl")).unwrap();
    assert!(harness.contains("timed out"), "{harness}");
    // Not stored, and the build is not a no-op: the explorer runs again.
    let again = common::offline_build(dir.path());
    assert_eq!(again["stages"]["generate"]["executed"], 1, "{again}");
    assert_eq!(again["stages"]["generate"]["cached"], 0, "{again}");
}
