//! The stages that turn queries into actions, in order: `checkout` reads repositories;
//! `extract` holds the curation filters; `env` builds environments; `candidate` gathers what one
//! function's actions need; `generate` (the built-in explorer), `llmgen` (a model, with repair)
//! and `hybrid` write harnesses; `validate` runs them; `mutation` scores them on mutants of the
//! reference; `refine` rewrites docstrings; `keyed` makes the settings part of their action
//! keys, which the build records for `r2e status`;
//! `harnesses` runs those over every candidate; `assemble` selects the instances and writes the
//! manifest. `jobs` runs the embedded Python in the sandbox for all of them.

pub mod answer;
pub mod assemble;
pub mod candidate;
pub mod capture;
pub mod checkout;
pub mod dating;
pub mod env;
pub mod generate;
pub mod harnesses;
pub mod hybrid;
pub mod keyed;
pub mod llmgen;
pub mod mutation;
pub mod pypi;
pub mod refine;
pub mod validate;

use r2e_core::records::StageCounts;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// The stages, in order.
#[derive(
    Clone,
    Copy,
    Debug,
    PartialEq,
    Eq,
    PartialOrd,
    Ord,
    Hash,
    Serialize,
    Deserialize,
    clap::ValueEnum,
)]
#[serde(rename_all = "lowercase")]
pub enum Stage {
    Checkout,
    Parse,
    Extract,
    Slice,
    Env,
    Generate,
    Validate,
    Mutate,
    Refine,
    Assemble,
    Evaluate,
}

impl Stage {
    /// The last stage.
    pub const LAST: Stage = Stage::Evaluate;
}

/// A stage's counts while it runs, from many threads.
#[derive(Default)]
pub struct Tally {
    executed: AtomicU64,
    cached: AtomicU64,
    failed: AtomicU64,
}

impl Tally {
    /// One action ran now (`fresh`) or came from the cache.
    pub fn ran(&self, fresh: bool) {
        let counter = if fresh { &self.executed } else { &self.cached };
        counter.fetch_add(1, Ordering::Relaxed);
    }

    pub fn failed(&self) {
        self.failed.fetch_add(1, Ordering::Relaxed);
    }

    pub fn counts(&self) -> StageCounts {
        StageCounts {
            executed: self.executed.load(Ordering::Relaxed),
            cached: self.cached.load(Ordering::Relaxed),
            failed: self.failed.load(Ordering::Relaxed),
        }
    }
}
