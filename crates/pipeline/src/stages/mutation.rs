//! Stage `mutate`: how strong a valid harness is. Built-in mutants of the reference
//! (`python::mutate`) are spliced into its module and checked through the one check path; the
//! share the harness fails is its mutation score. The sites come from a seed of their own, so
//! the explorer (which chooses its tests by its own mutants) cannot have tuned the harness to
//! these.

use r2e_core::error::Result;
use r2e_core::records::{CheckOutcome, ExpectedTest, MutationScore};
use r2e_core::verdict::Policy;
use r2e_exec::checkpath::{self, Candidate};
use r2e_exec::jobs::{Exec, Runtime};
use r2e_exec::splice::splice;
use r2e_exec::target::Target;
use r2e_python::mutate::{self, Mutant};
use r2e_python::summary::ModuleSummary;

/// The seed of the dataset's mutant sites (the explorer draws from another).
pub const SEED: u64 = 0x005E_ED0F_DA7A;
/// Sites per kind of mistake.
pub const PER_KIND: usize = 2;
/// Seconds a mutant's run may take (at most `[sandbox] run_timeout_seconds`): a mutant that
/// runs longer is killed, and counts as killed.
pub const RUN_TIMEOUT_SECONDS: u64 = 2;
/// Surviving mutants listed per instance.
const SURVIVORS_LISTED: usize = 10;

/// The dataset's mutants of a definition (its text, decorators included, dedented).
pub fn of(definition: &str) -> Vec<Mutant> {
    mutate::mutants(definition, SEED, PER_KIND)
}

/// A module with `mutant` in place of the definition `def` (None when it does not splice).
pub fn module_with(
    source: &str,
    summary: &ModuleSummary,
    def: usize,
    qualname: &str,
    mutant: &Mutant,
) -> Option<String> {
    splice(source, summary, def, &mutant.text, qualname).ok()
}

/// A valid harness to score, with what its checks need.
pub struct Subject<'a> {
    pub target: &'a Target,
    pub harness: &'a str,
    pub expected: &'a [ExpectedTest],
    /// The function's code key, hashed.
    pub code: &'a str,
    pub source: &'a str,
    pub summary: &'a ModuleSummary,
    pub def: usize,
    /// The definition's text, dedented.
    pub definition: &'a str,
}

/// A subject's score, whether any of its checks ran now, and how many of its mutants the
/// checks could not judge (outcome `error`: left out of the score, and the build runs again).
#[derive(Clone, Debug, Default)]
pub struct Scored {
    pub score: MutationScore,
    pub fresh: bool,
    pub errors: usize,
}

/// Scores harnesses of one environment: all their mutants checked together, per subject.
pub fn score(
    exec: &Exec,
    runtime: &Runtime,
    subjects: &[Subject],
    policy: Policy,
) -> Result<Vec<Scored>> {
    let mut modules: Vec<(usize, String, String)> = Vec::new();
    for (i, s) in subjects.iter().enumerate() {
        for m in of(s.definition) {
            if let Some(module) = module_with(s.source, s.summary, s.def, &s.target.qualname, &m) {
                modules.push((i, m.description, module));
            }
        }
    }
    let candidates: Vec<Candidate> = modules
        .iter()
        .map(|(i, _, module)| {
            let s = &subjects[*i];
            Candidate {
                target: s.target,
                harness: s.harness,
                expected: s.expected,
                module,
                policy,
                code: s.code,
            }
        })
        .collect();
    let checked = checkpath::check(exec, runtime, &candidates)?;
    let mut out: Vec<Scored> = vec![Default::default(); subjects.len()];
    for ((i, description, _), c) in modules.iter().zip(checked) {
        let Scored {
            score,
            fresh,
            errors,
        } = &mut out[*i];
        *fresh |= c.fresh;
        match c.verdict.outcome {
            CheckOutcome::Error => {
                *errors += 1;
                continue;
            }
            CheckOutcome::Pass | CheckOutcome::Fail => score.total += 1,
        }
        if c.verdict.passed {
            if score.survivors.len() < SURVIVORS_LISTED {
                score.survivors.push(description.clone());
            }
        } else {
            score.killed += 1;
        }
    }
    Ok(out)
}
