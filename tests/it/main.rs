//! The integration tests, as one test binary: one module per area (each former `tests/X.rs`),
//! sharing `common`. One binary, so that the suite is compiled and linked once instead of once
//! per file (as in matklad's "Delete Cargo Integration Tests"). Run one area with
//! `cargo test --test it cli::`.
//!
//! The areas stand in four tiers, by what their tests need of the machine, each tier a module
//! (`tests/it/TIER/AREA.rs`, test names `TIER::AREA::…`; docs/testing.md says what each needs):
//! `pure` (the toolchain, git and python3: no repository's code runs), `local` (repository code
//! in the local sandbox, bubblewrap), `docker` (a Docker daemon), `services` (clusters and
//! servers: Slurm, Ray, Kubernetes' schema, S3 and WebDAV stores, a registry, a browser). A tier
//! needs nothing of a tier after it; `pure::tiers` checks it.
//! Run one tier with `cargo test --test it pure::`.
//!
//! The tests share one process and run on parallel threads under `cargo test`, and run one
//! process each under `cargo nextest run` (`.config/nextest.toml`, as `.ci/run` does): a test
//! sets no environment variable and changes no current folder of the process (a child gets its
//! variables with `Command::env`), what it names outside its own temporary folders (a folder,
//! an image, a marker) is its own, and what it must not run beside (a shared fixture's faults)
//! it keeps off with a lock between processes, not one in the process.

mod common;

/// No repository's code runs: the toolchain, git and python3.
mod pure {
    mod analysis;
    mod docs;
    mod gc;
    mod incremental;
    mod layers;
    mod python;
    mod seed;
    mod tiers;
}

/// Repository code in the local sandbox (bubblewrap), and the servers a test starts itself on
/// loopback (a scripted model, a package index, GitHub's API).
mod local {
    mod adapters;
    mod bugfix;
    mod busy;
    mod cli;
    mod curate;
    mod dataset;
    mod dating;
    mod durability;
    mod env;
    mod env_imports;
    mod evaluate;
    mod filters;
    mod gym;
    mod keys;
    mod leaks;
    mod llm;
    pub(crate) mod pypi;
    mod readable;
    mod sandbox;
    mod verdicts;
}

/// The machine's Docker daemon.
mod docker {
    // The Docker backend's own area, in the tier named after what it needs.
    #[allow(clippy::module_inception)]
    pub(crate) mod docker;
    mod harbor;
    mod harbor_run;
    mod hostile;
    mod outcomes;
    mod serve;

    /// What `crate::docker::…` names for the modules that build against a daemon.
    pub(crate) use self::docker::{SmallDaemon, TEXT_PY, build_against};
}

/// Clusters and services: Slurm, Ray, Kubernetes' schema, moto's S3 and nginx's WebDAV stores,
/// a second Docker daemon and a registry, a browser.
mod services {
    mod cluster;
    pub(crate) mod cluster_build;
    mod cluster_engine;
    mod cluster_ray;
    mod images;
    pub(crate) mod k8s;
    pub(crate) mod remote;
    mod report;
    mod trust;
}

// The paths the areas name each other's helpers by (`crate::remote::…`).
use local::pypi;
use services::{cluster_build, k8s, remote};
