//! r2e's build layer: the salsa database and its queries, the parse packs, the stages, the
//! harness and evaluation orchestrators, and the engine that runs a build and commits its output.
//! [`session::Session`] (a build's in-process state) and [`bench::Bench`] (a built dataset opened
//! for checking) sit below the engine, so that the engine and the front doors both use them.
//! [`cluster`] is the cluster engines' interface and the driver of a sharded build on one.

pub mod bench;
pub mod cluster;
pub mod curate;
pub mod db;
pub mod engine;
pub mod evaluate;
pub mod filter;
pub mod inspect;
pub mod packs;
pub mod session;
pub mod stages;
