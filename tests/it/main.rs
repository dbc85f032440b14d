//! The integration tests, as one test binary: one module per area (each former `tests/X.rs`),
//! sharing `common`. One binary, so that the suite is compiled and linked once instead of once
//! per file (as in matklad's "Delete Cargo Integration Tests"). Run one area with
//! `cargo test --test it cli::`.
//!
//! The tests share one process and run on parallel threads: a test sets no environment
//! variable and changes no current folder of the process (a child gets its variables with
//! `Command::env`), and what it names outside its own temporary folders (a folder, an image, a
//! marker) is its own.

mod common;

mod analysis;
mod busy;
mod cli;
mod cluster;
mod cluster_build;
mod cluster_engine;
mod cluster_ray;
mod curate;
mod dataset;
mod dating;
mod docker;
mod durability;
mod env;
mod env_imports;
mod evaluate;
mod filters;
mod gc;
mod gym;
mod hostile;
mod images;
mod incremental;
mod k8s;
mod keys;
mod layers;
mod leaks;
mod llm;
mod outcomes;
mod pypi;
mod python;
mod readable;
mod remote;
mod report;
mod sandbox;
mod serve;
mod trust;
mod verdicts;
