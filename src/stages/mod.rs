//! The stages that turn queries into actions: `checkout` reads repositories; `extract` holds the
//! curation filters; `env` builds environments; `harness` generates and validates harnesses;
//! `llmgen` is the model-driven generator (with repair); `assemble` runs those over every
//! candidate and makes the dataset.

pub mod assemble;
pub mod checkout;
pub mod env;
pub mod extract;
pub mod harness;
pub mod llmgen;
pub mod refine;

/// How much of a stage ran, came from the cache, or failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, serde::Serialize, serde::Deserialize)]
pub struct StageCounts {
    pub executed: u64,
    pub cached: u64,
    pub failed: u64,
}
