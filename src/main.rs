//! The `r2e` binary: the command line and the front doors over a built dataset (`check`,
//! `report`, `dataset diff`, `export`/`import`, `serve`). The work lives in the workspace's
//! crates below (`r2e-pipeline`, `r2e-exec`, `r2e-python`, `r2e-core`); `main` maps the outcome to an
//! exit code.

mod check;
mod cli;
mod cluster;
mod diff;
mod export;
mod harbor;
mod init;
mod report;
mod serve;

#[global_allocator]
static GLOBAL: mimalloc::MiMalloc = mimalloc::MiMalloc;

fn main() -> std::process::ExitCode {
    no_huge_pages();
    cli::main()
}

/// Turns transparent huge pages off for this process (and what it starts, which inherits it).
/// The allocator asks for them, and the kernel then zeroes 2 MiB at each first touch of fresh
/// memory: for a build that allocates its whole working set once, that cost more than it saved.
/// A cold build of the standard library spent a third of its kernel time there (see
/// `bench/README.md`).
fn no_huge_pages() {
    // SAFETY: `prctl(PR_SET_THP_DISABLE)` takes integer arguments only; a failure (an old
    // kernel) leaves the default.
    unsafe {
        libc::prctl(libc::PR_SET_THP_DISABLE, 1, 0, 0, 0);
    }
}
