//! r2e: turns Python repositories into executable coding-benchmark environments.
//!
//! See `ARCHITECTURE.md` for the code map and the data flow.

pub mod cache;
pub mod check;
pub mod cli;
pub mod config;
pub mod db;
pub mod diff;
pub mod engine;
pub mod error;
pub mod export;
pub mod fsutil;
pub mod hash;
pub mod image;
pub mod inspect;
pub mod keys;
pub mod llm;
pub mod log;
pub mod packs;
pub mod py;
pub mod python;
pub mod records;
pub mod report;
pub mod sandbox;
pub mod serve;
pub mod services;
pub mod stages;
pub mod verdict;
