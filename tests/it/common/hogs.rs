//! CPU hogs: busy loops that keep a machine's cores busy for the length of a test.

use std::process::{Child, Command, Stdio};

/// Busy-loop processes, killed (each by its own id) and reaped when dropped. Each in a session
/// of its own (so in a scheduling group of its own, as a sandbox's job is): with the kernel's
/// autogroups, processes of one session share one share of the CPUs, so loops in the test's
/// session would hardly slow a sandbox job (a session of its own).
pub struct Hogs(Vec<Child>);

impl Hogs {
    /// Starts `n` busy loops.
    pub fn start(n: usize) -> Hogs {
        use std::os::unix::process::CommandExt;
        Hogs(
            (0..n)
                .map(|_| {
                    let mut c = Command::new("sh");
                    c.args(["-c", "while :; do :; done"]).stdin(Stdio::null());
                    // SAFETY: setsid is async-signal-safe and touches no memory of the parent.
                    unsafe {
                        c.pre_exec(|| {
                            libc::setsid();
                            Ok(())
                        });
                    }
                    c.spawn().unwrap()
                })
                .collect(),
        )
    }
}

impl Drop for Hogs {
    fn drop(&mut self) {
        for child in &mut self.0 {
            let _ = child.kill();
            let _ = child.wait();
        }
    }
}
