//! r2e's bottom layer: what every other layer shares and nothing of it runs code or holds a
//! database. Errors and their exit codes, hashes, atomic files, the typed records r2e writes and
//! reads back, the verdict a candidate's calls get, the configuration schema, the cache with its
//! self-verifying entries, and every action key.
//!
//! Architecture invariant: this crate depends on no other crate of the workspace, and on neither
//! salsa, bollard, tokio nor axum; its unit tests build without them.

pub mod cache;
pub mod config;
pub mod curation;
pub mod dates;
pub mod error;
pub mod fsutil;
pub mod hash;
pub mod keys;
pub mod license;
pub mod log;
pub mod model;
pub mod records;
pub mod verdict;
