//! Shards balanced by cost (`r2e status --plan N`, `r2e build --shard I/N --plan FILE`).
//!
//! Without a plan a repository's shard is the hash of its name (`Shard::holds`): even in count,
//! blind to cost, so that 6 repositories on 2 hosts can split 5 to 1. A plan assigns each
//! repository to a shard by its **estimated seconds**, longest first, each to the shard with the
//! least so far (the LPT rule: within 4/3 of the best possible longest shard).
//!
//! A repository's estimate ([`estimate`]), in order of preference:
//! - **`timings`**: what its work took when last computed: the build's `.r2e/timings.json` or a
//!   shard's summary beside the output, whichever computed most of its candidates. Each stage's
//!   seconds per computed unit, times its units (computed and cached): the cold cost.
//! - **`candidates`**: its candidates now (the analysis `r2e status` runs), times the seconds per
//!   candidate of the measured repositories (their median; [`SECONDS_PER_CANDIDATE`] when none
//!   is measured), plus an environment's seconds (the measured median; else
//!   [`ENV_SECONDS`]).
//!
//! The plan is a file ([`ShardPlan`], JSON) so that every host follows the same one: a shard
//! holds exactly the repositories the plan gives it; a pipeline repository the plan does not
//! name, a plan of another shard count, or one that names a repository the pipeline lacks, is
//! refused (exit 2). The same inputs give the same plan (ties go by name, then shard index).

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use r2e_core::config::{Config, Shard};
use r2e_core::error::{Error, Result};
use r2e_core::records::RepoTime;

/// The plan file's format tag.
pub const PLAN_FORMAT: &str = "r2e-shard-plan/1";
/// Seconds per candidate when no repository is measured: a cold long-tail build's
/// (`bench/longtail`: 3.1 to 4.4 s per candidate, every stage).
pub const SECONDS_PER_CANDIDATE: f64 = 3.5;
/// An environment's seconds when none is measured.
pub const ENV_SECONDS: f64 = 20.0;

/// `r2e status --plan N --json`: each repository's shard and estimate.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct ShardPlan {
    pub format: String,
    pub shards: u32,
    /// Every repository of the pipeline, longest first.
    pub repos: Vec<PlannedRepo>,
    /// Each shard's estimated seconds (the sum of its repositories').
    pub shard_seconds: Vec<f64>,
}

/// One repository of a plan.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
#[serde(deny_unknown_fields)]
pub struct PlannedRepo {
    pub repo: String,
    pub shard: u32,
    /// Its estimated seconds of work.
    pub seconds: f64,
    /// What the estimate stands on.
    pub basis: Basis,
    /// Its candidates now.
    pub candidates: u64,
}

/// What a repository's estimate stands on.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize, Deserialize)]
#[serde(rename_all = "kebab-case")]
pub enum Basis {
    /// Its own measured timings.
    Timings,
    /// Its candidates, at the measured (or default) seconds per candidate.
    Candidates,
}

/// A repository's estimate, before it is placed.
#[derive(Clone, Debug, PartialEq)]
pub struct Estimate {
    pub repo: String,
    pub seconds: f64,
    pub basis: Basis,
    pub candidates: u64,
}

/// A measured repository's cold cost: its environment's, and the rest (seconds), and how many
/// candidates that rest was for.
struct Measured {
    env: f64,
    rest: f64,
    candidates: u64,
}

/// What a timing record says a repository's work costs cold: each stage's seconds per
/// computed unit times its units. `None` when it computed no harness (all of it was cached:
/// its seconds say nothing of the cost).
fn measured(t: &RepoTime) -> Option<Measured> {
    if t.generate.computed == 0 {
        return None;
    }
    let cold = |s: &r2e_core::records::StageTime| {
        if s.computed == 0 {
            0.0
        } else {
            s.seconds / s.computed as f64 * (s.computed + s.cached) as f64
        }
    };
    let rest: f64 = t
        .stages()
        .iter()
        .filter(|(name, _)| *name != "env")
        .map(|(_, s)| cold(s))
        .sum();
    Some(Measured {
        env: cold(&t.env),
        rest,
        candidates: t.generate.computed + t.generate.cached,
    })
}

fn median(mut xs: Vec<f64>) -> Option<f64> {
    if xs.is_empty() {
        return None;
    }
    xs.sort_by(f64::total_cmp);
    let n = xs.len();
    Some(if n % 2 == 1 {
        xs[n / 2]
    } else {
        (xs[n / 2 - 1] + xs[n / 2]) / 2.0
    })
}

/// Each repository's estimate: `candidates` (its candidates now, in the pipeline's order) and
/// `timings` (the measured records found, any number per repository: the one that computed
/// most harnesses counts).
pub fn estimate(candidates: &[(String, u64)], timings: &[RepoTime]) -> Vec<Estimate> {
    let mut best: BTreeMap<&str, &RepoTime> = BTreeMap::new();
    for t in timings {
        let better = best
            .get(t.repo.as_str())
            .is_none_or(|b| t.generate.computed > b.generate.computed);
        if better {
            best.insert(&t.repo, t);
        }
    }
    let measured: BTreeMap<&str, Measured> = best
        .iter()
        .filter_map(|(r, t)| Some((*r, measured(t)?)))
        .collect();
    let per_candidate = median(
        measured
            .values()
            .filter(|m| m.candidates > 0)
            .map(|m| m.rest / m.candidates as f64)
            .collect(),
    )
    .unwrap_or(SECONDS_PER_CANDIDATE);
    let env = median(measured.values().map(|m| m.env).collect()).unwrap_or(ENV_SECONDS);
    candidates
        .iter()
        .map(|(repo, n)| match measured.get(repo.as_str()) {
            Some(m) => Estimate {
                repo: repo.clone(),
                seconds: round(m.env + m.rest),
                basis: Basis::Timings,
                candidates: *n,
            },
            None => Estimate {
                repo: repo.clone(),
                seconds: round(env + per_candidate * *n as f64),
                basis: Basis::Candidates,
                candidates: *n,
            },
        })
        .collect()
}

fn round(x: f64) -> f64 {
    (x * 1000.0).round() / 1000.0
}

impl ShardPlan {
    /// The estimates placed on `shards` shards: longest first (ties by name), each on the
    /// shard with the least so far (ties: the lowest index).
    pub fn balance(mut estimates: Vec<Estimate>, shards: u32) -> ShardPlan {
        let shards = shards.max(1);
        estimates.sort_by(|a, b| {
            b.seconds
                .total_cmp(&a.seconds)
                .then_with(|| a.repo.cmp(&b.repo))
        });
        let mut load = vec![0.0f64; shards as usize];
        let repos = estimates
            .into_iter()
            .map(|e| {
                let (shard, _) = load
                    .iter()
                    .enumerate()
                    .min_by(|a, b| a.1.total_cmp(b.1).then(a.0.cmp(&b.0)))
                    .expect("at least one shard");
                load[shard] += e.seconds;
                PlannedRepo {
                    repo: e.repo,
                    shard: shard as u32,
                    seconds: e.seconds,
                    basis: e.basis,
                    candidates: e.candidates,
                }
            })
            .collect();
        ShardPlan {
            format: PLAN_FORMAT.into(),
            shards,
            repos,
            shard_seconds: load.into_iter().map(round).collect(),
        }
    }

    /// Reads a plan file; bad JSON is named with its line and column (exit 2).
    pub fn read(path: &Path) -> Result<ShardPlan> {
        let text = fs_err::read_to_string(path)
            .map_err(|e| Error::input(format!("cannot read the shard plan: {e}")))?;
        let plan: ShardPlan = serde_json::from_str(&text).map_err(|e| {
            Error::input(format!(
                "{}:{}:{}: not a shard plan (`r2e status --plan N --json` writes one): {e}",
                path.display(),
                e.line(),
                e.column()
            ))
        })?;
        if plan.format != PLAN_FORMAT {
            return Err(Error::input(format!(
                "{}: a shard plan of format `{}`, not `{PLAN_FORMAT}`: make it again with this r2e",
                path.display(),
                plan.format
            )));
        }
        Ok(plan)
    }

    /// Checks that the plan (read from `path`) is one of `count` shards for the pipeline's
    /// repositories, every one of them and no other.
    pub fn check(&self, cfg: &Config, count: u32, path: &Path) -> Result<()> {
        let at = path.display();
        if self.shards != count {
            return Err(Error::input(format!(
                "{at}: the plan is for {} shards, not {count}: make it with `r2e status --plan {count}`",
                self.shards
            )));
        }
        let planned: BTreeMap<&str, u32> = self
            .repos
            .iter()
            .map(|r| (r.repo.as_str(), r.shard))
            .collect();
        if let Some(r) = self.repos.iter().find(|r| r.shard >= count) {
            return Err(Error::input(format!(
                "{at}: repo `{}` is on shard {} of {count}",
                r.repo, r.shard
            )));
        }
        for rc in &cfg.repos {
            if !planned.contains_key(rc.name.as_str()) {
                return Err(Error::input(format!(
                    "{at}: the plan has no repo `{}` of `{}`: make it again with `r2e status --plan {count}`",
                    rc.name,
                    cfg.file.display()
                )));
            }
        }
        if let Some(extra) = planned
            .keys()
            .find(|n| !cfg.repos.iter().any(|rc| rc.name == **n))
        {
            return Err(Error::input(format!(
                "{at}: the plan names repo `{extra}`, which `{}` has not: it is another pipeline's plan",
                cfg.file.display()
            )));
        }
        Ok(())
    }

    /// Whether `shard` holds the repository `name`.
    pub fn holds(&self, shard: Shard, name: &str) -> bool {
        self.repos
            .iter()
            .any(|r| r.repo == name && r.shard == shard.index)
    }

    /// The plan as a table: each shard's seconds and repositories.
    pub fn text(&self) -> String {
        let mut out = String::new();
        for (i, secs) in self.shard_seconds.iter().enumerate() {
            let mine: Vec<String> = self
                .repos
                .iter()
                .filter(|r| r.shard == i as u32)
                .map(|r| format!("{} ({:.0} s, {})", r.repo, r.seconds, basis_name(r.basis)))
                .collect();
            out.push_str(&format!(
                "shard {i}/{}: {secs:.0} s: {}\n",
                self.shards,
                mine.join(", ")
            ));
        }
        out
    }
}

fn basis_name(b: Basis) -> &'static str {
    match b {
        Basis::Timings => "timings",
        Basis::Candidates => "candidates",
    }
}

#[cfg(test)]
mod tests {
    use super::*;
    use r2e_core::records::StageTime;

    fn time(repo: &str, env: f64, gen_secs: f64, computed: u64, cached: u64) -> RepoTime {
        RepoTime {
            repo: repo.into(),
            env: StageTime {
                seconds: env,
                computed: 1,
                cached: 0,
            },
            generate: StageTime {
                seconds: gen_secs,
                computed,
                cached,
            },
            ..Default::default()
        }
    }

    #[test]
    fn estimates_prefer_timings_and_scale_the_rest_by_the_measured_rate() {
        let candidates = vec![("a".to_string(), 10), ("b".to_string(), 40)];
        // `a` measured: 10 s of environment, 2 s per harness over 5 computed of 10.
        let e = estimate(&candidates, &[time("a", 10.0, 10.0, 5, 5)]);
        assert_eq!(e[0].basis, Basis::Timings);
        assert_eq!(e[0].seconds, 30.0);
        // `b` from its candidates at `a`'s rate (2 s) and `a`'s environment.
        assert_eq!(e[1].basis, Basis::Candidates);
        assert_eq!(e[1].seconds, 10.0 + 2.0 * 40.0);
        // A record that computed no harness measures nothing: the default rate.
        let e = estimate(&candidates, &[time("a", 10.0, 0.1, 0, 10)]);
        assert_eq!(e[0].basis, Basis::Candidates);
        assert_eq!(e[0].seconds, ENV_SECONDS + SECONDS_PER_CANDIDATE * 10.0);
    }

    #[test]
    fn the_longest_go_first_each_to_the_least_loaded_shard() {
        let e = |r: &str, s: f64| Estimate {
            repo: r.into(),
            seconds: s,
            basis: Basis::Candidates,
            candidates: 0,
        };
        // Hash-blind shards could put all the big ones together; LPT gives 10 | 7+3 | 6+4.
        let plan = ShardPlan::balance(
            vec![
                e("c", 3.0),
                e("a", 10.0),
                e("d", 6.0),
                e("b", 7.0),
                e("e", 4.0),
            ],
            3,
        );
        let shard = |r: &str| plan.repos.iter().find(|p| p.repo == r).unwrap().shard;
        assert_eq!(plan.shard_seconds, vec![10.0, 10.0, 10.0]);
        assert_eq!((shard("a"), shard("b"), shard("d")), (0, 1, 2));
        assert_eq!((shard("e"), shard("c")), (2, 1));
        // The same inputs in another order: the same plan.
        let again = ShardPlan::balance(
            vec![
                e("e", 4.0),
                e("d", 6.0),
                e("c", 3.0),
                e("b", 7.0),
                e("a", 10.0),
            ],
            3,
        );
        assert_eq!(plan, again);
    }
}
