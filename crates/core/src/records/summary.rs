//! The build summary's records (`summary.json`, the report's tables): how much of each stage
//! ran, came from the cache or failed, the counts of what was kept and why, and the times.

use super::*;

/// How much of a stage ran, came from the cache, or failed.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageCounts {
    pub executed: u64,
    pub cached: u64,
    pub failed: u64,
}

impl StageCounts {
    pub fn add(&mut self, other: &StageCounts) {
        self.executed += other.executed;
        self.cached += other.cached;
        self.failed += other.failed;
    }
}

/// The counts of every stage of a build, in stage order.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct StageTable {
    pub checkout: StageCounts,
    pub parse: StageCounts,
    pub extract: StageCounts,
    /// Slice membership: which definitions each candidate reaches.
    pub slice: StageCounts,
    /// Contexts rendered from the slices (counted apart from `slice`).
    #[serde(default)]
    pub context: StageCounts,
    pub env: StageCounts,
    pub generate: StageCounts,
    pub validate: StageCounts,
    #[serde(default)]
    pub mutate: StageCounts,
    pub refine: StageCounts,
    pub assemble: StageCounts,
    /// Bug-fix tasks' broken states judged (`[bugfix]`): each one's repeated check.
    #[serde(default)]
    pub bugfix: StageCounts,
    /// Bug-fix statements a model wrote (`[bugfix] statement = "model"`); `failed`: answers
    /// not used.
    #[serde(default)]
    pub statement: StageCounts,
    #[serde(default)]
    pub evaluate: StageCounts,
    /// Repositories whose functions were dated from their history now (`executed`) or taken
    /// from the cache by commit (`cached`); a repository without history counts in neither.
    #[serde(default)]
    pub date: StageCounts,
}

impl StageTable {
    /// Every stage's counts, by name, in stage order.
    pub fn rows(&self) -> [(&'static str, &StageCounts); 14] {
        [
            ("checkout", &self.checkout),
            ("parse", &self.parse),
            ("extract", &self.extract),
            ("slice", &self.slice),
            ("context", &self.context),
            ("env", &self.env),
            ("generate", &self.generate),
            ("validate", &self.validate),
            ("mutate", &self.mutate),
            ("refine", &self.refine),
            ("assemble", &self.assemble),
            ("bugfix", &self.bugfix),
            ("statement", &self.statement),
            ("evaluate", &self.evaluate),
        ]
    }

    fn rows_mut(&mut self) -> [&mut StageCounts; 13] {
        [
            &mut self.checkout,
            &mut self.parse,
            &mut self.extract,
            &mut self.slice,
            &mut self.context,
            &mut self.env,
            &mut self.generate,
            &mut self.validate,
            &mut self.mutate,
            &mut self.refine,
            &mut self.assemble,
            &mut self.bugfix,
            &mut self.evaluate,
        ]
    }

    /// Adds the stages of one dataset's build (everything but the shared checkout, parse and
    /// env).
    pub fn add_dataset(&mut self, other: &StageTable) {
        for (mine, theirs) in self.rows_mut().into_iter().zip(other.rows()) {
            if !matches!(theirs.0, "checkout" | "parse" | "env") {
                mine.add(theirs.1);
            }
        }
    }

    /// Everything counted as taken from the cache (a no-op build reports this).
    pub fn all_cached(&mut self) {
        for c in self.rows_mut() {
            c.cached += c.executed;
            c.executed = 0;
        }
        self.date.cached += self.date.executed;
        self.date.executed = 0;
    }
}

/// The counts a build reports besides its stages.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct Counts {
    pub repos: u64,
    pub files: u64,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub functions: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub candidates: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harnesses_valid: Option<u64>,
    /// `generator = "hybrid"`: candidates the built-in generator covered well enough alone.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub hybrid_builtin_sufficient: Option<u64>,
    /// With `[refine]`: instances whose `spec` is a refined docstring.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub specs_refined: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<u64>,
    /// With `[bugfix]`: the bug-fix tasks made, and the broken states judged and left out.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bugfix_tasks: Option<u64>,
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub bugfix_rejected: Option<u64>,
    /// With `[select] created_after`: candidates written before that date (or without a date),
    /// left out before any harness was made for them.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub created_before: Option<u64>,
    pub failures: u64,
    /// With `[[variant]]` tables: how many.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variants: Option<u64>,
}

/// What `r2e build --json` prints.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Summary {
    pub dataset_version: Option<String>,
    pub output: PathBuf,
    pub stages: StageTable,
    pub counts: Counts,
    /// Functions each filter excluded, by filter, in filter order.
    pub excluded_by: ExcludedBy,
    /// Model requests executed, cached and failed, and tokens, by stage and model.
    #[serde(default, skip_serializing_if = "BTreeMap::is_empty")]
    pub llm: UsageTable,
    /// With `[[variant]]` tables: each variant's own summary (its output is
    /// `<output>/variants/NAME`). The top-level stages then count the shared stages once and
    /// sum the others over the variants.
    #[serde(default, skip_serializing_if = "Variants::is_empty")]
    pub variants: Variants,
    /// With `[evaluate] enabled = true`: checks, failed requests, pass@k and self-repair.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub evaluate: Option<EvalSummary>,
    /// Per repository: functions, candidates, what the filters excluded, valid harnesses and
    /// instances (every repository, even one that gave nothing). Empty with `[[variant]]`
    /// tables: each variant's summary has its own.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub repos: Vec<RepoCounts>,
    /// Per repository, where this build's time went: stages `env`, `generate`, `validate` and
    /// `mutate` (every repository, in the pipeline's order; empty before `env`, and with
    /// `[[variant]]` tables, where each variant's summary has its own). Also written to
    /// `<output>/.r2e/timings.json`, never to a dataset file.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub time: Vec<RepoTime>,
    /// What failed for a reason that may pass (model requests, environments that could not be
    /// built): the outputs are written, the build exits 1, and the next build runs it again.
    #[serde(default, skip_serializing_if = "Vec::is_empty")]
    pub retry: Vec<String>,
}

/// Functions excluded by each filter, serialized as an object in filter order.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct ExcludedBy(pub Vec<(Filter, u64)>);

impl Serialize for ExcludedBy {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k.name(), v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for ExcludedBy {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let map: BTreeMap<Filter, u64> = Deserialize::deserialize(d)?;
        Ok(ExcludedBy(map.into_iter().collect()))
    }
}

impl ExcludedBy {
    /// Every filter, in filter order, with a count of 0.
    pub fn zero() -> ExcludedBy {
        ExcludedBy(Filter::ALL.iter().map(|&f| (f, 0)).collect())
    }

    /// Counts one function excluded by `filter`.
    pub fn add(&mut self, filter: Filter) {
        match self.0.iter_mut().find(|(f, _)| *f == filter) {
            Some((_, n)) => *n += 1,
            None => self.0.push((filter, 1)),
        }
    }

    /// Functions excluded, by any filter.
    pub fn total(&self) -> u64 {
        self.0.iter().map(|(_, n)| n).sum()
    }

    /// The filters that excluded something, for people: `no_docstring 3, dunder 1`; empty when
    /// none did.
    pub fn text(&self) -> String {
        self.0
            .iter()
            .filter(|(_, n)| *n > 0)
            .map(|(f, n)| format!("{} {n}", f.name()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}

/// One repository's time in one stage of a build.
#[derive(Clone, Copy, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct StageTime {
    /// Wall-clock seconds of the repository's work in the stage, summed over its units of work
    /// (its environment; each candidate's harness generation; each batch of validations or of
    /// mutants, shared evenly by the batch's items), rounded to milliseconds. Units run in
    /// parallel, so the seconds of a build's repositories can add up to more than its wall
    /// time. A unit taken from the cache costs its lookup: about 0.
    pub seconds: f64,
    /// Units computed in this build (an action run: an environment built, a harness explored,
    /// validated or scored on its mutants), and units taken from the cache.
    pub computed: u64,
    pub cached: u64,
}

impl StageTime {
    /// Adds one unit of work that took `seconds`.
    pub fn add(&mut self, seconds: f64, fresh: bool) {
        self.seconds += seconds;
        if fresh {
            self.computed += 1;
        } else {
            self.cached += 1;
        }
    }

    /// The same work, as a build that took all of it from the cache (a no-op) reports it.
    pub fn all_cached(&mut self) {
        self.cached += self.computed;
        self.computed = 0;
        self.seconds = 0.0;
    }

    fn rounded(mut self) -> StageTime {
        self.seconds = (self.seconds * 1000.0).round() / 1000.0;
        self
    }
}

/// Where one repository's time went in a build (`Summary::time`, `.r2e/timings.json`).
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct RepoTime {
    pub repo: String,
    pub env: StageTime,
    pub generate: StageTime,
    pub validate: StageTime,
    pub mutate: StageTime,
    /// `[bugfix]`'s checks of the broken states (none without it).
    #[serde(default)]
    pub bugfix: StageTime,
    /// `[bugfix]`'s runs of the project's own tests on the broken states (none without it).
    #[serde(default)]
    pub bugfix_tests: StageTime,
}

impl RepoTime {
    /// Its stages, by name.
    pub fn stages(&self) -> [(&'static str, &StageTime); 6] {
        [
            ("env", &self.env),
            ("generate", &self.generate),
            ("validate", &self.validate),
            ("mutate", &self.mutate),
            ("bugfix", &self.bugfix),
            ("bugfix_tests", &self.bugfix_tests),
        ]
    }

    /// One line: each stage's seconds with what it computed and took from the cache, as
    /// `env 1.2 s (1 computed, 0 cached), generate ...`.
    pub fn text(&self) -> String {
        self.stages()
            .iter()
            .map(|(name, t)| {
                format!(
                    "{name} {:.1} s ({} computed, {} cached)",
                    t.seconds, t.computed, t.cached
                )
            })
            .collect::<Vec<_>>()
            .join(", ")
    }

    /// The same, its seconds rounded to milliseconds.
    pub fn rounded(mut self) -> RepoTime {
        for t in [
            &mut self.env,
            &mut self.generate,
            &mut self.validate,
            &mut self.mutate,
            &mut self.bugfix,
            &mut self.bugfix_tests,
        ] {
            *t = t.rounded();
        }
        self
    }

    /// The same work, as a build that took all of it from the cache (a no-op) reports it.
    pub fn all_cached(&mut self) {
        for t in [
            &mut self.env,
            &mut self.generate,
            &mut self.validate,
            &mut self.mutate,
            &mut self.bugfix,
        ] {
            t.all_cached();
        }
    }
}

/// `<output>/.r2e/timings.json`: where the last build that ran spent its time, per dataset and
/// repository. Beside the build's state, not a dataset file: it differs between a cold and an
/// incremental build of the same dataset.
#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct Timings {
    /// The build's wall-clock seconds, from the checkout to the outputs written.
    pub seconds: f64,
    /// Each dataset: the pipeline's own (`variant` absent), or each variant's.
    pub datasets: Vec<DatasetTimes>,
}

#[derive(Clone, Debug, Default, PartialEq, Serialize, Deserialize)]
pub struct DatasetTimes {
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub variant: Option<String>,
    pub repos: Vec<RepoTime>,
}

/// One repository's numbers in a dataset, as the build summary and `r2e report` list them.
#[derive(Clone, Debug, Default, PartialEq, Eq, Serialize, Deserialize)]
pub struct RepoCounts {
    pub repo: String,
    /// Every extracted function.
    pub functions: u64,
    /// The functions no filter excluded.
    pub candidates: u64,
    /// The functions the filters excluded, in all and by filter (every filter, in filter order).
    pub excluded: u64,
    pub excluded_by: ExcludedBy,
    /// Valid harnesses; absent when the build stopped before `generate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub harnesses_valid: Option<u64>,
    /// Benchmark instances; absent when the build stopped before `generate`.
    #[serde(default, skip_serializing_if = "Option::is_none")]
    pub instances: Option<u64>,
}

impl RepoCounts {
    /// Per-repository rows: one for each of `repos`, in their order (a repository that gave
    /// nothing keeps its row of zeros), then one for any other repository the records name.
    /// `functions`: each extracted function's repository and the filter that excluded it;
    /// `harnesses`: each candidate's repository and whether its harness is valid, and
    /// `instances`: each instance's repository (`None` when the build did not reach them).
    pub fn rows<'a>(
        repos: impl IntoIterator<Item = &'a str>,
        functions: impl IntoIterator<Item = (&'a str, Option<Filter>)>,
        harnesses: Option<Vec<(&'a str, bool)>>,
        instances: Option<Vec<&'a str>>,
    ) -> Vec<RepoCounts> {
        let mut rows: Vec<RepoCounts> = Vec::new();
        let mut index: BTreeMap<&str, usize> = BTreeMap::new();
        let mut row = |rows: &mut Vec<RepoCounts>, repo: &'a str| -> usize {
            *index.entry(repo).or_insert_with(|| {
                rows.push(RepoCounts {
                    repo: repo.to_owned(),
                    excluded_by: ExcludedBy::zero(),
                    harnesses_valid: harnesses.is_some().then_some(0),
                    instances: instances.is_some().then_some(0),
                    ..RepoCounts::default()
                });
                rows.len() - 1
            })
        };
        for repo in repos {
            row(&mut rows, repo);
        }
        for (repo, excluded_by) in functions {
            let i = row(&mut rows, repo);
            let r = &mut rows[i];
            r.functions += 1;
            match excluded_by {
                None => r.candidates += 1,
                Some(filter) => {
                    r.excluded += 1;
                    r.excluded_by.add(filter);
                }
            }
        }
        for &(repo, valid) in harnesses.iter().flatten() {
            let i = row(&mut rows, repo);
            let r = &mut rows[i];
            if valid {
                *r.harnesses_valid.get_or_insert(0) += 1;
            }
        }
        for &repo in instances.iter().flatten() {
            let i = row(&mut rows, repo);
            let r = &mut rows[i];
            *r.instances.get_or_insert(0) += 1;
        }
        rows
    }

    /// The row for people: `3 functions, 2 candidates, 1 excluded (no_docstring 1), 2 valid
    /// harnesses, 1 instance`.
    pub fn text(&self) -> String {
        let mut out = format!(
            "{} functions, {} candidates, {} excluded",
            self.functions, self.candidates, self.excluded
        );
        let by = self.excluded_by.text();
        if !by.is_empty() {
            out.push_str(&format!(" ({by})"));
        }
        if let Some(n) = self.harnesses_valid {
            out.push_str(&format!(", {n} valid harnesses"));
        }
        if let Some(n) = self.instances {
            out.push_str(&format!(", {n} instances"));
        }
        out
    }
}

/// Each variant's summary, by name, serialized as an object in the pipeline's order.
#[derive(Clone, Debug, Default, PartialEq)]
pub struct Variants(pub Vec<(String, Summary)>);

impl Variants {
    pub fn is_empty(&self) -> bool {
        self.0.is_empty()
    }
}

impl Serialize for Variants {
    fn serialize<S: serde::Serializer>(&self, s: S) -> std::result::Result<S::Ok, S::Error> {
        use serde::ser::SerializeMap;
        let mut map = s.serialize_map(Some(self.0.len()))?;
        for (k, v) in &self.0 {
            map.serialize_entry(k, v)?;
        }
        map.end()
    }
}

impl<'de> Deserialize<'de> for Variants {
    fn deserialize<D: serde::Deserializer<'de>>(d: D) -> std::result::Result<Self, D::Error> {
        let map: serde_json::Map<String, serde_json::Value> = Deserialize::deserialize(d)?;
        map.into_iter()
            .map(|(k, v)| {
                Summary::deserialize(v)
                    .map(|s| (k, s))
                    .map_err(serde::de::Error::custom)
            })
            .collect::<std::result::Result<Vec<_>, _>>()
            .map(Variants)
    }
}
