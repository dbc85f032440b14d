//! Messages on stderr: everything that is not a command's product. `R2E_LOG=timings` (read once,
//! by the config layer's rules, here for the one switch it is) adds stage timings.

use std::sync::OnceLock;
use std::time::Duration;

fn timings_enabled() -> bool {
    static ON: OnceLock<bool> = OnceLock::new();
    *ON.get_or_init(crate::config::log_timings)
}

/// Prints how long a stage took, when timings are on.
pub fn timing(what: &str, elapsed: Duration) {
    if timings_enabled() {
        eprintln!("[timing] {what}: {:.3}s", elapsed.as_secs_f64());
    }
}

/// Prints how much work a stage did (commits walked, files read), when timings are on.
pub fn count(what: &str, n: usize) {
    if timings_enabled() {
        eprintln!("[count] {what}: {n}");
    }
}

/// Prints a size the timings explain (a persisted entry's parts), when timings are on.
pub fn size(what: &str, bytes: usize) {
    if timings_enabled() {
        eprintln!("[size] {what}: {bytes} bytes");
    }
}
