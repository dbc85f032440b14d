//! `r2e report`: one row per dataset (each variant, or the pipeline's own), computed from the
//! files the build wrote (`harnesses.jsonl`, `dataset.jsonl`, `manifest.json`), so that every
//! number can be checked against them: candidates, valid harnesses, mean branch coverage of the
//! valid ones, the in-file / out-of-file split, failure classes, model requests and tokens; and
//! per repository, functions, candidates, what the filters excluded, valid harnesses, instances;
//! the mutation scores of the instances and their surviving mutants; with `results.jsonl`, the
//! pass@k tables and self-repair curves of the evaluated models.

use r2e_core::records::OutputFile;

mod card;
mod html;
mod svg;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::Serialize;

use r2e_core::config::Config;
use r2e_core::error::{Error, Result};
use r2e_core::fsutil::write_if_changed;
use r2e_core::records::{
    BugfixTask, EvalResult, EvalTables, FunctionHead, HarnessRecord, Instance, Manifest,
    MutationScore, PassRow, RepoCounts, SpecSource, Spent, read_built, read_jsonl, read_manifest,
};

/// A group of candidates: all, in-file or out-of-file.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Group {
    pub candidates: u64,
    pub valid: u64,
    /// `valid / candidates`, in percent.
    pub valid_percent: Option<f64>,
    /// The mean branch coverage of the valid harnesses (line coverage for functions without
    /// branches, as selection uses).
    pub mean_coverage: Option<f64>,
}

/// One row of the report.
#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Row {
    pub variant: String,
    pub dataset_version: Option<String>,
    pub all: Group,
    pub in_file: Group,
    pub out_of_file: Group,
    pub instances: u64,
    /// The mean number of tests per instance (R2E's benchmark: 11.5).
    pub mean_tests: Option<f64>,
    pub specs_refined: u64,
    /// The valid harnesses by their coverage (as `mean_coverage` counts it), in ten bins of
    /// 10 points: `[0, 0.1)`, ..., `[0.9, 1.0]`.
    pub coverage_bins: Vec<u64>,
    /// Invalid candidates by failure class.
    pub failure_classes: BTreeMap<String, u64>,
    /// Candidates whose harness has no test at all, by why (`harnesses.jsonl`'s `no_tests`).
    pub no_tests: BTreeMap<String, u64>,
    /// Model requests the dataset needed (cached or not) and their tokens.
    pub model_requests: u64,
    pub prompt_tokens: u64,
    pub completion_tokens: u64,
    /// Per repository (every repository of the dataset's manifest, even one that gave nothing):
    /// functions, candidates, what the filters excluded, valid harnesses and instances.
    pub repos: Vec<RepoCounts>,
    /// The harnesses' strength on built-in mutants of the references (instances that carry it).
    pub mutation: Option<Mutation>,
    /// How stable the instances' tests were when validated (instances that carry it).
    pub stability: Option<StabilitySummary>,
    /// With `[bugfix]`: the bug-fix tasks (`bugfix.jsonl`) per repository, origin and depth,
    /// and whether the project's own tests catch them.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub bugfix: Option<BugfixSummary>,
    /// With `results.jsonl`: pass@k per model (overall, per repository, by dependencies, by
    /// tokens, single- and multi-file, and split at each model's cutoff) and the self-repair
    /// curves.
    pub evaluation: Option<EvalTables>,
    /// The models' cutoffs (`[[evaluate.model]] cutoff`), by `PROVIDER/MODEL`.
    #[serde(skip_serializing_if = "BTreeMap::is_empty")]
    pub cutoffs: BTreeMap<String, String>,
    /// The settings that made the dataset (`[extract]`, `[context]`, `[generate]`,
    /// `[validate]`, `[select]`, `[sandbox] backend`), as `section.key` → value.
    pub settings: BTreeMap<String, String>,
    /// Each repository's licence (an SPDX id; `null` when its files do not tell), from the
    /// manifest.
    pub licenses: BTreeMap<String, Option<String>>,
    /// Where the last build that ran spent its time per repository (`.r2e/timings.json`);
    /// absent before one did.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub times: Option<Vec<r2e_core::records::RepoTime>>,
    /// Each repository's environment: its size on the disk (its folder in the local cache,
    /// which both sandbox backends run), by repository; absent where the folder is not there
    /// (collected, or on another host).
    pub env_bytes: BTreeMap<String, u64>,
}

/// The bytes of the files under `dir` (links not followed), or `None` when it is not a folder.
fn folder_bytes(dir: &Path) -> Option<u64> {
    if !dir.is_dir() {
        return None;
    }
    Some(
        walkdir::WalkDir::new(dir)
            .follow_links(false)
            .into_iter()
            .flatten()
            .filter(|e| e.file_type().is_file())
            .filter_map(|e| e.metadata().ok())
            .map(|m| m.len())
            .sum(),
    )
}

/// Environment folders' sizes, each measured once: variants share their environments.
pub type EnvSizes = BTreeMap<PathBuf, Option<u64>>;

/// The sizes of the environments `envs.jsonl` in `dir` names, from their folders in `cache`.
fn env_sizes(dir: &Path, cache: &Path, measured: &mut EnvSizes) -> BTreeMap<String, u64> {
    let lines: Vec<r2e_core::records::EnvLine> = read_jsonl(&dir.join(OutputFile::Envs.name()))
        .ok()
        .flatten()
        .unwrap_or_default();
    // A folder per environment, named by its key (`cache::Layout::Folders`).
    let envs = cache.join(r2e_core::cache::Bucket::Envs.folder());
    lines
        .iter()
        .filter(|l| r2e_core::hash::Hash::from_hex(&l.env_key).is_some())
        .filter_map(|l| {
            let folder = envs.join(&l.env_key);
            let bytes = *measured
                .entry(folder)
                .or_insert_with_key(|f| folder_bytes(f));
            Some((l.repo.clone(), bytes?))
        })
        .collect()
}

/// Ten bins of 10 points over `[0, 1]`: how many of `values` fall in each (1.0 in the last).
pub fn bins(values: impl IntoIterator<Item = f64>) -> Vec<u64> {
    let mut out = vec![0u64; 10];
    for v in values {
        let i = ((v.clamp(0.0, 1.0) * 10.0).floor() as usize).min(9);
        out[i] += 1;
    }
    out
}

/// Mutation scores over a dataset's instances.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct Mutation {
    pub instances: u64,
    /// The mean of the instances' scores (killed / total).
    pub mean_score: f64,
    pub total: u64,
    pub killed: u64,
    /// The instances by their mutation score, in ten bins of 0.1 (as [`bins`]).
    pub score_bins: Vec<u64>,
    /// Surviving mutants, for a person to look at (some are equivalent to the reference).
    pub survivors: Vec<Survivor>,
}

/// The distribution of the instances' test stability: how many tests were dropped as unstable.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct StabilitySummary {
    pub instances: u64,
    /// The tests validated, and those dropped as unstable.
    pub tests: u64,
    pub dropped: u64,
    /// Instances by how many of their tests were dropped: `0`, `1`, `2`, `3+`.
    pub instances_by_dropped: BTreeMap<String, u64>,
    /// The instances that lost tests, with how many.
    pub unstable: Vec<(String, u64)>,
}

fn stability(instances: &[Instance]) -> Option<StabilitySummary> {
    let mut out = StabilitySummary::default();
    for i in instances {
        let Some(st) = &i.stability else { continue };
        out.instances += 1;
        out.tests += st.tests.len() as u64;
        let dropped = st.dropped.len() as u64;
        out.dropped += dropped;
        let bucket = if dropped >= 3 {
            "3+".to_owned()
        } else {
            dropped.to_string()
        };
        *out.instances_by_dropped.entry(bucket).or_default() += 1;
        if dropped > 0 {
            out.unstable.push((i.id.clone(), dropped));
        }
    }
    (out.instances > 0).then_some(out)
}

/// A dataset's bug-fix tasks, counted.
#[derive(Clone, Debug, Default, Serialize, PartialEq)]
pub struct BugfixSummary {
    pub tasks: u64,
    /// Instances with at least one task.
    pub instances: u64,
    /// Tasks per repository, per origin (`mutant`, `history`) and per depth.
    pub per_repo: BTreeMap<String, u64>,
    pub per_origin: BTreeMap<String, u64>,
    pub per_depth: BTreeMap<String, u64>,
    /// Tasks per `"ORIGIN DEPTH"` (`"mutant 0"`).
    pub per_origin_depth: BTreeMap<String, u64>,
    /// Tasks the project's own tests catch, do not catch, and were not run on.
    pub caught_by_project_tests: u64,
    pub not_caught_by_project_tests: u64,
    pub project_tests_not_run: u64,
    /// FAIL_TO_PASS tests over all tasks.
    pub fail_to_pass: u64,
    /// With `bugfix_results.jsonl`: pass@k of the evaluated models on the tasks, over all of
    /// them, per origin and per depth (`evaluate::bugfix_table`).
    #[serde(skip_serializing_if = "Vec::is_empty")]
    pub pass: Vec<PassRow>,
}

fn bugfix(tasks: &[BugfixTask]) -> BugfixSummary {
    let mut out = BugfixSummary {
        tasks: tasks.len() as u64,
        ..Default::default()
    };
    let mut instances = std::collections::BTreeSet::new();
    for t in tasks {
        instances.insert(t.instance.as_str());
        *out.per_repo.entry(t.repo.clone()).or_default() += 1;
        let origin = serde_json::to_value(t.origin)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default();
        *out.per_origin_depth
            .entry(format!("{origin} {}", t.depth))
            .or_default() += 1;
        *out.per_origin.entry(origin).or_default() += 1;
        *out.per_depth.entry(t.depth.to_string()).or_default() += 1;
        match t.caught_by_project_tests {
            Some(true) => out.caught_by_project_tests += 1,
            Some(false) => out.not_caught_by_project_tests += 1,
            None => out.project_tests_not_run += 1,
        }
        out.fail_to_pass += t.fail_to_pass.len() as u64;
    }
    out.instances = instances.len() as u64;
    out
}

/// The bug-fix tasks per dataset that has them.
pub fn bugfix_markdown(rows: &[Row]) -> String {
    let with: Vec<(&Row, &BugfixSummary)> = rows
        .iter()
        .filter_map(|r| r.bugfix.as_ref().map(|b| (r, b)))
        .collect();
    if with.is_empty() {
        return String::new();
    }
    let counts = |m: &BTreeMap<String, u64>| {
        m.iter()
            .map(|(k, v)| format!("{k} {v}"))
            .collect::<Vec<_>>()
            .join(", ")
    };
    let mut out = String::from(
        "\n| variant | bug-fix tasks | instances with tasks | per origin | per depth | FAIL_TO_PASS per task | caught by the project's tests (yes / no / not run) | per repository |\n|---|---|---|---|---|---|---|---|\n",
    );
    for (r, b) in with {
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {:.1} | {} / {} / {} | {} |\n",
            r.variant,
            b.tasks,
            b.instances,
            counts(&b.per_origin),
            counts(&b.per_depth),
            b.fail_to_pass as f64 / b.tasks.max(1) as f64,
            b.caught_by_project_tests,
            b.not_caught_by_project_tests,
            b.project_tests_not_run,
            counts(&b.per_repo),
        ));
    }
    for (r, b) in rows
        .iter()
        .filter_map(|r| r.bugfix.as_ref().map(|b| (r, b)))
    {
        if b.pass.is_empty() {
            continue;
        }
        out.push_str(&pass_table(
            &format!(
                "pass@k of `{}` on its bug-fix tasks (single-file fixes)",
                r.variant
            ),
            "tasks",
            &b.pass,
            &pass_ks(&b.pass),
        ));
    }
    out
}

/// A Markdown table of pass@k rows under `heading`: the model, the group, how many `unit`
/// (instances, tasks) it holds, and a column per k of `ks`.
fn pass_table(heading: &str, unit: &str, rows: &[PassRow], ks: &[String]) -> String {
    let mut out = format!(
        "\n{heading}:\n\n| model | group | {unit} | {} |\n|---|---|---|{}\n",
        ks.join(" | "),
        "---|".repeat(ks.len())
    );
    for row in rows {
        let cells: Vec<String> = ks
            .iter()
            .map(|k| {
                row.pass
                    .get(k)
                    .map_or_else(|| "-".into(), |v| format!("{v:.3}"))
            })
            .collect();
        out.push_str(&format!(
            "| {} | {} | {} | {} |\n",
            row.model,
            row.group,
            row.instances,
            cells.join(" | ")
        ));
    }
    out
}

/// The stability of the instances' tests per dataset.
pub fn stability_markdown(rows: &[Row]) -> String {
    let with: Vec<(&Row, &StabilitySummary)> = rows
        .iter()
        .filter_map(|r| r.stability.as_ref().map(|s| (r, s)))
        .collect();
    if with.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n| variant | instances | tests | dropped as unstable | instances by tests dropped (0 / 1 / 2 / 3+) |\n|---|---|---|---|---|\n",
    );
    for (r, s) in &with {
        let n = |k: &str| s.instances_by_dropped.get(k).copied().unwrap_or(0);
        out.push_str(&format!(
            "| {} | {} | {} | {} ({:.1}%) | {} / {} / {} / {} |\n",
            r.variant,
            s.instances,
            s.tests,
            s.dropped,
            100.0 * s.dropped as f64 / s.tests.max(1) as f64,
            n("0"),
            n("1"),
            n("2"),
            n("3+")
        ));
    }
    for (r, s) in &with {
        if s.unstable.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "\nInstances of `{}` with unstable tests (dropped; `[validate] unstable`):\n\n",
            r.variant
        ));
        for (id, dropped) in s.unstable.iter().take(SURVIVORS_SHOWN) {
            out.push_str(&format!("- `{id}`: {dropped}\n"));
        }
        if s.unstable.len() > SURVIVORS_SHOWN {
            out.push_str("- ... (all of them in `report.json`)\n");
        }
    }
    out
}

#[derive(Clone, Debug, Serialize, PartialEq)]
pub struct Survivor {
    pub id: String,
    pub mutant: String,
}

fn mutation(instances: &[Instance]) -> Option<Mutation> {
    let scored: Vec<&MutationScore> = instances
        .iter()
        .filter_map(|i| i.mutants.as_ref())
        .collect();
    if scored.is_empty() {
        return None;
    }
    Some(Mutation {
        instances: scored.len() as u64,
        mean_score: scored.iter().map(|m| m.score()).sum::<f64>() / scored.len() as f64,
        total: scored.iter().map(|m| u64::from(m.total)).sum(),
        killed: scored.iter().map(|m| u64::from(m.killed)).sum(),
        score_bins: bins(scored.iter().map(|m| m.score())),
        survivors: instances
            .iter()
            .flat_map(|i| {
                i.mutants.iter().flat_map(|m| {
                    m.survivors.iter().map(|s| Survivor {
                        id: i.id.clone(),
                        mutant: s.clone(),
                    })
                })
            })
            .collect(),
    })
}

#[derive(Default)]
struct Sums {
    candidates: u64,
    valid: u64,
    coverage: f64,
}

impl Sums {
    fn group(&self) -> Group {
        Group {
            candidates: self.candidates,
            valid: self.valid,
            valid_percent: (self.candidates > 0)
                .then(|| 100.0 * self.valid as f64 / self.candidates as f64),
            mean_coverage: (self.valid > 0).then(|| self.coverage / self.valid as f64),
        }
    }
}

/// The row of the dataset in `dir`.
pub fn row(
    variant: &str,
    dir: &Path,
    cfg: &Config,
    times: Option<Vec<r2e_core::records::RepoTime>>,
    measured: &mut EnvSizes,
) -> Result<Row> {
    let harnesses: Vec<HarnessRecord> = read_built(&dir.join(OutputFile::Harnesses.name()))?;
    let instances: Vec<Instance> = read_built(&dir.join(OutputFile::Dataset.name()))?;
    let results: Option<Vec<EvalResult>> = read_jsonl(&dir.join(OutputFile::Results.name()))?;
    let tasks: Option<Vec<BugfixTask>> = read_jsonl(&dir.join(OutputFile::Bugfix.name()))?;
    let bugfix_results: Option<Vec<EvalResult>> =
        read_jsonl(&dir.join(OutputFile::BugfixResults.name()))?;
    let evaluation = results.map(|r| {
        r2e_pipeline::evaluate::tables(
            &r,
            &instances,
            &cfg.evaluate.k,
            cfg.evaluate.repair_rounds,
            &cfg.evaluate.model,
        )
    });
    let manifest = read_manifest(&dir.join(OutputFile::Manifest.name())).ok();
    let dataset_version = manifest.as_ref().map(|m| m.version.clone());
    let repos = repo_rows(dir, manifest.as_ref(), &harnesses, &instances)?;
    let (mut all, mut inside, mut outside) = (Sums::default(), Sums::default(), Sums::default());
    let mut failure_classes = BTreeMap::new();
    let mut no_tests = BTreeMap::new();
    let mut spent = Spent::default();
    let mut coverages = Vec::new();
    for h in &harnesses {
        let valid = h.valid == Some(true);
        let group = if h.in_file { &mut inside } else { &mut outside };
        for sums in [&mut all, group] {
            sums.candidates += 1;
            if valid {
                sums.valid += 1;
                sums.coverage += h.coverage();
            }
        }
        if valid {
            coverages.push(h.coverage());
        }
        if !valid && let Some(class) = h.failure_class {
            *failure_classes.entry(class.name().to_owned()).or_default() += 1;
        }
        if let Some(why) = h.no_tests {
            *no_tests.entry(why.name().to_owned()).or_default() += 1;
        }
        spent.add(&h.spent());
    }
    Ok(Row {
        variant: variant.to_owned(),
        dataset_version,
        all: all.group(),
        in_file: inside.group(),
        out_of_file: outside.group(),
        instances: instances.len() as u64,
        mean_tests: (!instances.is_empty()).then(|| {
            instances.iter().map(|i| f64::from(i.tests)).sum::<f64>() / instances.len() as f64
        }),
        specs_refined: instances
            .iter()
            .filter(|i| i.spec_source == SpecSource::Refined)
            .count() as u64,
        coverage_bins: bins(coverages),
        failure_classes,
        no_tests,
        model_requests: spent.requests,
        prompt_tokens: spent.prompt_tokens,
        completion_tokens: spent.completion_tokens,
        repos,
        mutation: mutation(&instances),
        stability: stability(&instances),
        bugfix: tasks.as_deref().map(|t| {
            let mut b = bugfix(t);
            if let Some(results) = &bugfix_results {
                b.pass = r2e_pipeline::evaluate::bugfix_table(results, t, &cfg.evaluate.k);
            }
            b
        }),
        evaluation,
        cutoffs: cfg
            .evaluate
            .model
            .iter()
            .filter_map(|m| Some((m.label(), m.cutoff.as_ref()?.text().to_owned())))
            .collect(),
        settings: settings(cfg),
        licenses: manifest
            .iter()
            .flat_map(|m| m.repos.iter().map(|r| (r.name.clone(), r.license.clone())))
            .collect(),
        times,
        env_bytes: env_sizes(dir, &cfg.cache, measured),
    })
}

/// The settings that made a dataset, flattened: `generate.budget` → `1500`.
fn settings(cfg: &Config) -> BTreeMap<String, String> {
    let mut out = BTreeMap::new();
    let sections = [
        ("extract", serde_json::to_value(&cfg.extract)),
        ("context", serde_json::to_value(&cfg.context)),
        ("generate", serde_json::to_value(&cfg.generate)),
        ("validate", serde_json::to_value(&cfg.validate)),
        ("select", serde_json::to_value(&cfg.select)),
    ];
    for (name, value) in sections {
        let Ok(serde_json::Value::Object(map)) = value else {
            continue;
        };
        for (k, v) in map {
            let text = match v {
                serde_json::Value::String(s) => s,
                serde_json::Value::Null => continue,
                v => v.to_string(),
            };
            out.insert(format!("{name}.{k}"), text);
        }
    }
    out.insert(
        "sandbox.backend".to_owned(),
        serde_json::to_value(cfg.sandbox.backend)
            .ok()
            .and_then(|v| v.as_str().map(str::to_owned))
            .unwrap_or_default(),
    );
    out
}

/// The per-repository rows of the dataset in `dir`, from `functions.jsonl` and the records read
/// already; the manifest lists every repository, even one without functions.
fn repo_rows(
    dir: &Path,
    manifest: Option<&Manifest>,
    harnesses: &[HarnessRecord],
    instances: &[Instance],
) -> Result<Vec<RepoCounts>> {
    let functions: Vec<FunctionHead> = read_built(&dir.join(OutputFile::Functions.name()))?;
    let repo_of: BTreeMap<&str, &str> = functions
        .iter()
        .map(|f| (f.id.as_str(), f.repo.as_str()))
        .collect();
    Ok(RepoCounts::rows(
        manifest
            .into_iter()
            .flat_map(|m| m.repos.iter().map(|r| r.name.as_str())),
        functions.iter().map(|f| (f.repo.as_str(), f.excluded_by)),
        Some(
            harnesses
                .iter()
                .map(|h| {
                    // An id names its repository first.
                    let repo = repo_of.get(h.id.as_str()).copied();
                    let repo = repo.unwrap_or_else(|| h.id.split(':').next().unwrap_or(""));
                    (repo, h.valid == Some(true))
                })
                .collect(),
        ),
        Some(instances.iter().map(|i| i.repo.as_str()).collect()),
    ))
}

/// The rows of every dataset the pipeline builds.
pub fn report(cfg: &Config) -> Result<Vec<Row>> {
    // Where the last build spent its time, beside the pipeline's own output.
    let timings = r2e_pipeline::engine::outputs::read_timings(
        &r2e_pipeline::engine::outputs::resolve(&cfg.output),
    );
    let mut measured = EnvSizes::new();
    cfg.builds()
        .into_iter()
        .map(|(name, c)| {
            let times = timings.as_ref().and_then(|t| {
                t.datasets
                    .iter()
                    .find(|d| d.variant.as_deref() == name)
                    .map(|d| d.repos.clone())
            });
            row(
                name.unwrap_or(&cfg.name),
                &r2e_pipeline::engine::outputs::resolve(&c.output),
                c,
                times,
                &mut measured,
            )
        })
        .collect()
}

fn percent(g: &Group) -> String {
    match g.valid_percent {
        Some(p) => format!("{}/{} ({p:.1}%)", g.valid, g.candidates),
        None => "0/0".into(),
    }
}

fn cov(g: &Group) -> String {
    g.mean_coverage
        .map_or_else(|| "-".into(), |c| format!("{:.1}%", c * 100.0))
}

/// The report as a Markdown table.
pub fn markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "| variant | candidates | valid | coverage of valid | in-file valid | in-file coverage | out-of-file valid | out-of-file coverage | instances | refined specs | failure classes | model requests | tokens (prompt + completion) |\n|---|---|---|---|---|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let counts = |m: &BTreeMap<String, u64>| {
            m.iter()
                .map(|(k, v)| format!("{k} {v}"))
                .collect::<Vec<_>>()
                .join(", ")
        };
        let mut failures = if r.failure_classes.is_empty() {
            "-".to_owned()
        } else {
            counts(&r.failure_classes)
        };
        if !r.no_tests.is_empty() {
            failures.push_str(&format!("; no test: {}", counts(&r.no_tests)));
        }
        out.push_str(&format!(
            "| {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} | {} + {} |\n",
            r.variant,
            r.all.candidates,
            percent(&r.all),
            cov(&r.all),
            percent(&r.in_file),
            cov(&r.in_file),
            percent(&r.out_of_file),
            cov(&r.out_of_file),
            r.instances,
            r.specs_refined,
            failures,
            r.model_requests,
            r.prompt_tokens,
            r.completion_tokens,
        ));
    }
    out.push_str(&repos_markdown(rows));
    out.push_str(&mutation_markdown(rows));
    out.push_str(&stability_markdown(rows));
    out.push_str(&bugfix_markdown(rows));
    out.push_str(&evaluation_markdown(rows));
    out
}

/// Mutation scores per dataset, and the surviving mutants (the first few per dataset).
pub fn mutation_markdown(rows: &[Row]) -> String {
    let scored: Vec<(&Row, &Mutation)> = rows
        .iter()
        .filter_map(|r| r.mutation.as_ref().map(|m| (r, m)))
        .collect();
    if scored.is_empty() {
        return String::new();
    }
    let mut out = String::from(
        "\n| variant | instances scored | mean mutation score | mutants killed |\n|---|---|---|---|\n",
    );
    for (r, m) in &scored {
        out.push_str(&format!(
            "| {} | {} | {:.3} | {}/{} |\n",
            r.variant, m.instances, m.mean_score, m.killed, m.total
        ));
    }
    for (r, m) in &scored {
        if m.survivors.is_empty() {
            continue;
        }
        out.push_str(&format!(
            "\nSurviving mutants of `{}` ({} in all; some may be equivalent to the reference):\n\n",
            r.variant,
            m.survivors.len()
        ));
        for s in m.survivors.iter().take(SURVIVORS_SHOWN) {
            out.push_str(&format!("- `{}`: {}\n", s.id, s.mutant));
        }
        if m.survivors.len() > SURVIVORS_SHOWN {
            out.push_str("- ... (all of them in `report.json`)\n");
        }
    }
    out
}

/// Survivors listed per dataset in the Markdown report.
const SURVIVORS_SHOWN: usize = 20;

/// The `pass@K` columns of pass@k rows (an evaluation's `overall`), by K (`pass@2` before
/// `pass@10`).
pub fn pass_ks(rows: &[PassRow]) -> Vec<String> {
    let mut ks: Vec<String> = rows
        .iter()
        .flat_map(|p| p.pass.keys().cloned())
        .collect::<std::collections::BTreeSet<_>>()
        .into_iter()
        .collect();
    ks.sort_by_key(|k| {
        k.trim_start_matches("pass@")
            .parse::<u32>()
            .unwrap_or(u32::MAX)
    });
    ks
}

/// pass@k tables and self-repair curves.
pub fn evaluation_markdown(rows: &[Row]) -> String {
    let mut out = String::new();
    for r in rows {
        let Some(t) = &r.evaluation else { continue };
        let ks = pass_ks(&t.overall);
        // The cutoffs the unseen split is after, as the pipeline gives them.
        let cutoffs: Vec<String> = r
            .cutoffs
            .iter()
            .map(|(model, cutoff)| format!("`{model}` {cutoff}"))
            .collect();
        let unseen_title = format!(
            "on all instances and on those created after the model's cutoff (unseen; {})",
            cutoffs.join(", ")
        );
        for (title, table) in [
            ("overall", &t.overall),
            ("per repository", &t.by_repo),
            ("by dependencies of the reference", &t.by_deps),
            ("by tokens of the reference", &t.by_tokens),
            ("single- and multi-file", &t.by_file),
            (unseen_title.as_str(), &t.by_cutoff),
        ] {
            // Without a model's cutoff there is no split to show.
            if table.is_empty() && std::ptr::eq(table, &t.by_cutoff) {
                continue;
            }
            out.push_str(&pass_table(
                &format!("pass@k of `{}`, {title}", r.variant),
                "instances",
                table,
                &ks,
            ));
        }
        if !t.repair.is_empty() {
            out.push_str(&format!(
                "\nSelf-repair of `{}`: of the samples that failed at first, the share passing by each round:\n\n| model | failing | by round |\n|---|---|---|\n",
                r.variant
            ));
            for c in &t.repair {
                let rounds: Vec<String> = c
                    .fixed_by_round
                    .iter()
                    .enumerate()
                    .map(|(n, f)| format!("{}: {:.3}", n + 1, f))
                    .collect();
                out.push_str(&format!(
                    "| {} | {} | {} |\n",
                    c.model,
                    c.failing,
                    if rounds.is_empty() {
                        "-".into()
                    } else {
                        rounds.join(", ")
                    }
                ));
            }
        }
    }
    out
}

/// The per-repository table: a row for each repository of each dataset.
pub fn repos_markdown(rows: &[Row]) -> String {
    let mut out = String::from(
        "\n| variant | repo | functions | candidates | excluded | excluded by | valid harnesses | instances |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        for repo in &r.repos {
            let by = repo.excluded_by.text();
            let n = |v: Option<u64>| v.map_or_else(|| "-".to_owned(), |n| n.to_string());
            out.push_str(&format!(
                "| {} | {} | {} | {} | {} | {} | {} | {} |\n",
                r.variant,
                repo.repo,
                repo.functions,
                repo.candidates,
                repo.excluded,
                if by.is_empty() { "-" } else { &by },
                n(repo.harnesses_valid),
                n(repo.instances),
            ));
        }
    }
    out
}

/// Writes `report.md`, `report.json`, `report.html` and the dataset card (`README.md`, with
/// `LICENSES.md`) into the output folder; returns the Markdown.
pub fn write(cfg: &Config, rows: &[Row]) -> Result<String> {
    let md = markdown(rows);
    let json = serde_json::to_vec_pretty(rows).map_err(Error::internal)?;
    let html = html::render(rows)?;
    let card = card::render(cfg, rows);
    fs_err::create_dir_all(&cfg.output)?;
    for (file, bytes) in [
        (OutputFile::ReportMd.name(), md.as_bytes()),
        (OutputFile::ReportJson.name(), &json),
        (OutputFile::ReportHtml.name(), html.as_bytes()),
        (OutputFile::Card.name(), card.as_bytes()),
        (
            OutputFile::Licenses.name(),
            card::licenses_page(rows).as_bytes(),
        ),
    ] {
        write_if_changed(&cfg.output.join(file), bytes)?;
    }
    Ok(md)
}
