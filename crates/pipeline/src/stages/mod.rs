//! The stages that turn queries into actions, in order: `checkout` reads repositories;
//! `extract` holds the curation filters; `env` builds environments; `candidate` gathers what one
//! function's actions need; `generate` (the built-in explorer), `llmgen` (a model, with repair)
//! and `hybrid` write harnesses; `validate` runs them; `mutation` scores them on mutants of the
//! reference; `refine` rewrites docstrings; `keyed` makes the settings part of their action
//! keys, which the build records for `r2e status`;
//! `harnesses` runs those over every candidate; `assemble` selects the instances and writes the
//! manifest; `bugfix` (with `[bugfix]`) makes bug-fix tasks from the instances' harnesses. `jobs` runs the embedded Python in the sandbox for all of them.

pub mod answer;
pub mod assemble;
pub mod bugfix;
pub mod candidate;
pub mod capture;
pub mod checkout;
pub mod dating;
pub mod environment;
pub mod generate;
pub mod harnesses;
pub mod history;
pub mod hybrid;
pub mod keyed;
pub mod llmgen;
pub mod mutation;
pub mod pypi;
pub mod refine;
pub mod statement;
pub mod validate;

use r2e_core::records::StageCounts;
use std::sync::atomic::{AtomicU64, Ordering};

use serde::{Deserialize, Serialize};

/// The stages, in order.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
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

    /// Every stage, in order.
    pub const ALL: [Stage; 11] = [
        Stage::Checkout,
        Stage::Parse,
        Stage::Extract,
        Stage::Slice,
        Stage::Env,
        Stage::Generate,
        Stage::Validate,
        Stage::Mutate,
        Stage::Refine,
        Stage::Assemble,
        Stage::Evaluate,
    ];

    /// The stage's name, as the records and the command line (`--until`) spell it.
    pub fn name(self) -> &'static str {
        match self {
            Stage::Checkout => "checkout",
            Stage::Parse => "parse",
            Stage::Extract => "extract",
            Stage::Slice => "slice",
            Stage::Env => "env",
            Stage::Generate => "generate",
            Stage::Validate => "validate",
            Stage::Mutate => "mutate",
            Stage::Refine => "refine",
            Stage::Assemble => "assemble",
            Stage::Evaluate => "evaluate",
        }
    }
}

impl std::str::FromStr for Stage {
    type Err = String;

    /// A stage by its name.
    fn from_str(name: &str) -> Result<Stage, String> {
        Stage::ALL
            .into_iter()
            .find(|s| s.name() == name)
            .ok_or_else(|| format!("no stage is named `{name}`"))
    }
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

#[cfg(test)]
mod tests {
    use super::Stage;

    #[test]
    fn every_stage_is_listed_in_order_under_its_recorded_name() {
        assert_eq!(Stage::ALL.len(), Stage::LAST as usize + 1);
        for (i, stage) in Stage::ALL.into_iter().enumerate() {
            assert_eq!(stage as usize, i, "{stage:?} out of order in Stage::ALL");
            assert_eq!(
                serde_json::to_value(stage).unwrap(),
                serde_json::json!(stage.name())
            );
            assert_eq!(stage.name().parse::<Stage>(), Ok(stage));
        }
        assert!("nope".parse::<Stage>().is_err());
    }
}
