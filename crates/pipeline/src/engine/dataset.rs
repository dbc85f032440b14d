//! One dataset of a build (the pipeline's own, or each variant's): extract, slice, the harness
//! stages, and its output files.
//!
//! Extraction reads only the extract settings and contexts only the context settings, so a
//! variant uses the first salsa input whose extract (for extraction) or context (for contexts)
//! equals its own: variants that differ in one share every query of the other.

use crate::stages::Stage;
use r2e_core::records::OutputFile;
use std::collections::HashMap;
use std::path::Path;
use std::sync::Arc;
use std::sync::atomic::Ordering;

use rayon::prelude::*;

use super::memo::{self, DatasetMemo, SliceMemo};
use super::outputs::{self, Graph, JsonlWriter, Recorded, function_line};
use super::{Lap, Shared, dataset_folder};
use crate::db::{self, Database, Db, FunctionRow, Repo, Settings, SourceFile};
use crate::engine::BuildOptions;
use crate::session::Session;
use crate::session::progress;
use crate::stages::candidate::Inputs;
use crate::stages::harnesses::{self, HarnessOutputs};
use r2e_core::config::Config;
use r2e_core::error::{Error, Result};
use r2e_core::hash::Hash;
use r2e_core::records::{
    ExcludedBy, Filter, RepoCounts, RepoTime, SliceRecord, StageCounts, StageTime, Summary,
    Variants,
};
use r2e_exec::services::Services;
use r2e_python::resolve::Item;

/// Builds every dataset; returns the build's summary, the output files it recorded, and
/// whether something must run again next build.
#[allow(clippy::too_many_arguments)]
pub(super) fn run_all(
    s: &Session,
    services: &Services,
    opts: &BuildOptions,
    staging: &Path,
    files: &[SourceFile],
    shared_outputs: &Shared,
    shared: Summary,
    clock: &mut Lap,
    failed_requests: &mut Vec<String>,
) -> Result<(Summary, Vec<Recorded>, bool)> {
    let db = &s.db;
    let mut inputs: Vec<Settings> = vec![s.settings];
    let mut recorded = Vec::new();
    let mut retry_later = false;
    let mut summary = shared.clone();
    let mut variants = Vec::new();
    for (name, cfg) in s.cfg.builds() {
        let find = |inputs: &[Settings]| {
            let extract = inputs
                .iter()
                .find(|i| *i.extract(db) == cfg.extract)
                .copied();
            let context = inputs
                .iter()
                .find(|i| *i.context(db) == cfg.context)
                .copied();
            extract.zip(context)
        };
        let settings = match find(&inputs) {
            Some(found) => found,
            None => {
                inputs.push(Settings::new(db, cfg.extract.clone(), cfg.context.clone()));
                find(&inputs).expect("the new input matches")
            }
        };
        if let Some(name) = name {
            eprintln!("variant {name}");
        }
        let mut one = shared.clone();
        let dataset = Dataset {
            s,
            services,
            cfg,
            settings,
            opts,
            staging,
            rel: dataset_folder(name),
            files,
            shared: shared_outputs,
        };
        let (files_recorded, retry) = dataset.run(&mut one, clock, failed_requests)?;
        recorded.extend(files_recorded);
        retry_later |= retry;
        match name {
            None => summary = one,
            Some(name) => {
                summary.stages.add_dataset(&one.stages);
                for (stage, models) in &one.llm {
                    for (model, u) in models {
                        summary
                            .llm
                            .entry(stage.clone())
                            .or_default()
                            .entry(model.clone())
                            .or_default()
                            .add(u);
                    }
                }
                one.output = cfg.output.clone();
                variants.push((name.to_owned(), one));
            }
        }
    }
    if !variants.is_empty() {
        summary.counts.variants = Some(variants.len() as u64);
        summary.counts.failures = shared_outputs.failures.len() as u64;
        summary.variants = Variants(variants);
    }
    Ok((summary, recorded, retry_later))
}

/// A repository's slices in one dataset: what the persisted analysis keeps (the graph's
/// items, edges and text hashes, and each candidate's slice record), and the graph itself when
/// this build computed it.
pub(super) struct RepoSlices {
    memo: SliceMemo,
    graph: Option<Arc<Graph>>,
}

/// A repository's slices computed in this process for one set of extract settings (shared by
/// the datasets that have them): its graph, what the persisted analysis keeps of it (without
/// records), and each candidate's slice (the items it reaches, with their distances).
pub(super) struct ComputedSlices {
    graph: Arc<Graph>,
    memo: SliceMemo,
    slices: Vec<Vec<(Item, u32)>>,
}

/// The graph of a repository's candidates (`own`, sorted), each reachable item's direct
/// dependencies resolved in salsa; each candidate's slice is then its node's closure over
/// those edges (counted as a slice computed), as `db::slice_of` computes it, without a salsa
/// lookup per entry.
fn compute_slices(db: &Database, repo: Repo, own: &[(SourceFile, Item)]) -> ComputedSlices {
    let mut clock = Lap(std::time::Instant::now());
    let graph = Graph::of(db, repo, own.iter().map(|&(_, it)| it));
    clock.lap("slice: graph");
    let files = repo.files(db);
    let nodes = graph.items().len();
    let deps: Vec<Vec<u32>> = (0..nodes)
        .into_par_iter()
        .map_with(db.clone(), |db, n| graph.deps(db, n))
        .collect();
    let text: Vec<Hash> = graph
        .items()
        .par_iter()
        .map_with(db.clone(), |db, &it| {
            let (Item::Def(f, _) | Item::Global(f, _)) = it;
            db::item_text_hash(db, files[f as usize], it)
        })
        .collect();
    clock.lap("slice: edges and text hashes");
    let memo = SliceMemo {
        candidates: own.iter().map(|&(_, it)| it).collect(),
        items: graph.items().to_vec(),
        deps,
        text,
        records: Vec::new(),
        file: Hash([0; 32]),
    };
    let slices = own
        .par_iter()
        .map_with(db.clone(), |db, &(_, it)| {
            let node = graph
                .node(it)
                .expect("every candidate is a node of its graph");
            db.env().counters.sliced.fetch_add(1, Ordering::Relaxed);
            memo.closure(node)
        })
        .collect();
    clock.lap("slice: closures");
    ComputedSlices {
        graph: Arc::new(graph),
        memo,
        slices,
    }
}

/// One dataset's build.
struct Dataset<'a> {
    s: &'a Session,
    services: &'a Services,
    cfg: &'a Config,
    /// The salsa inputs for extraction and for contexts.
    settings: (Settings, Settings),
    opts: &'a BuildOptions,
    /// Where the build writes the output's new generation.
    staging: &'a Path,
    /// The dataset's folder, relative to the output.
    rel: std::path::PathBuf,
    files: &'a [SourceFile],
    shared: &'a Shared<'a>,
}

impl Dataset<'_> {
    /// Extract, slice, generate, validate, refine and assemble into `<output>/<rel>`, filling
    /// `summary`. Returns the files written and whether something must run again.
    fn run(
        &self,
        summary: &mut Summary,
        clock: &mut Lap,
        failed_requests: &mut Vec<String>,
    ) -> Result<(Vec<Recorded>, bool)> {
        let until = self.opts.until;
        let memos = self.load_memos();
        let mut rows: Vec<(SourceFile, FunctionRow)> = Vec::new();
        if until >= Stage::Extract {
            let (found, counts) = self.extract(&memos);
            rows = found;
            if self.cfg.select.dedup {
                db::mark_duplicates(&self.s.db, rows.iter_mut().map(|(f, r)| (*f, r)));
            }
            summary.stages.extract = counts;
            summary.counts.functions = Some(rows.len() as u64);
            summary.counts.candidates =
                Some(rows.iter().filter(|(_, r)| r.excluded_by.is_none()).count() as u64);
            clock.lap("extract");
        }
        summary.excluded_by = ExcludedBy(
            Filter::ALL
                .iter()
                .map(|&f| {
                    (
                        f,
                        rows.iter()
                            .filter(|(_, r)| r.excluded_by == Some(f))
                            .count() as u64,
                    )
                })
                .collect(),
        );
        let candidates: Vec<(SourceFile, FunctionRow)> = rows
            .iter()
            .filter(|(_, r)| r.excluded_by.is_none())
            .cloned()
            .collect();
        let mut slices = Vec::new();
        if until >= Stage::Slice {
            (summary.stages.slice, summary.stages.context, slices) =
                self.slice(&candidates, &memos);
            clock.lap("slice");
        }
        let mut harness_out = HarnessOutputs::default();
        if until >= Stage::Generate {
            // `[select] created_after`: functions written before it get no harness at all.
            let (recent, too_old) = self.created_after(&candidates);
            harness_out = self.harnesses(&recent)?;
            let st = &mut summary.stages;
            st.generate = harness_out.generate;
            st.validate = harness_out.validate;
            st.mutate = harness_out.mutate;
            st.refine = harness_out.refine;
            st.assemble = harness_out.assemble;
            if let Some(made) = &harness_out.bugfix {
                st.bugfix = r2e_core::records::StageCounts {
                    executed: made.executed,
                    cached: made.cached,
                    failed: 0,
                };
            }
            st.statement = harness_out.statement;
            let counts = &mut summary.counts;
            if let Some(made) = &harness_out.bugfix {
                counts.bugfix_tasks = Some(made.tasks.len() as u64);
                counts.bugfix_rejected = Some(made.rejected.len() as u64);
            }
            counts.harnesses_valid = Some(harness_out.valid);
            if self.cfg.generate.generator == r2e_core::config::Generator::Hybrid {
                counts.hybrid_builtin_sufficient = Some(harness_out.builtin_sufficient);
            }
            if self.cfg.refine.enabled {
                counts.specs_refined = Some(harness_out.refined);
            }
            counts.instances = Some(harness_out.instances.len() as u64);
            if self.cfg.select.created_after.is_some() {
                counts.created_before = Some(too_old);
            }
            clock.lap("harnesses");
        }
        if until >= Stage::Extract {
            summary.repos = self.repo_counts(&rows, &harness_out);
        }
        if let Some(env_times) = self.shared.env_times {
            summary.time = self.repo_times(env_times, &harness_out);
        }
        summary.counts.failures = self.shared.failures.len() as u64;
        summary.llm = harness_out.llm.clone();
        let mut results = None;
        let mut retry_errors = false;
        if until >= Stage::Evaluate && self.cfg.evaluate.enabled {
            let tasks = harness_out.bugfix.as_ref().map_or(&[][..], |m| &m.tasks);
            let ev = self.evaluate(&harness_out.instances, tasks, summary)?;
            failed_requests.extend(ev.failed_requests);
            if !ev.errors.is_empty() {
                summary.retry.push(errors_note(&ev.errors));
                retry_errors = true;
            }
            results = Some((ev.results, ev.bugfix_results));
            clock.lap("evaluate");
        }
        let results = results.as_ref().map(|(r, b)| (r.as_slice(), b.as_slice()));
        let recorded = self.write(&rows, &slices, &harness_out, results, summary)?;
        if until >= Stage::Slice {
            self.store_memos(rows, slices, &recorded);
        }
        Ok((recorded, harness_out.retry_later || retry_errors))
    }

    /// Each repository's persisted analysis under this dataset's settings (`memo`), when it
    /// is there and verifies (its parts are checked against this build where they are used).
    fn load_memos(&self) -> Vec<Option<DatasetMemo>> {
        let s = self.s;
        s.cfg
            .repos
            .iter()
            .enumerate()
            .map(|(i, rc)| {
                // Without a parse stage there is nothing to check a memo against.
                self.shared.parses.get(i)?;
                memo::load_dataset(&s.cache, rc, &self.cfg.extract, &self.cfg.context)
            })
            .collect()
    }

    /// Replaces each repository's persisted analysis with this build's, unless something
    /// transient happened (a file that could not be read).
    fn store_memos(
        &self,
        rows: Vec<(SourceFile, FunctionRow)>,
        slices: Vec<RepoSlices>,
        recorded: &[Recorded],
    ) {
        let db = &self.s.db;
        if db.env().counters.transient.load(Ordering::Relaxed) {
            return;
        }
        let mut by_file: HashMap<SourceFile, Vec<FunctionRow>> = HashMap::new();
        for (f, mut r) in rows {
            // Which copy is a duplicate depends on the other repositories: the memo keeps the
            // rows as extraction gave them (`db::mark_duplicates` runs on them each build).
            if r.excluded_by == Some(Filter::Duplicate) {
                r.excluded_by = None;
            }
            by_file.entry(f).or_default().push(r);
        }
        for (i, (rc, (&repo, mut slices))) in self
            .s
            .cfg
            .repos
            .iter()
            .zip(self.s.repos.iter().zip(slices))
            .enumerate()
        {
            let Some(parse) = self.shared.parses.get(i) else {
                continue;
            };
            let name = self.output_name(&format!("slices/{}.jsonl", repo.name(db)));
            let Some((_, hash, ..)) = recorded.iter().find(|r| r.0 == name) else {
                continue;
            };
            slices.memo.file = *hash;
            let files = repo
                .files(db)
                .iter()
                .map(|&f| memo::ExtractedFile {
                    path: f.path(db).clone(),
                    content: f.hash(db),
                    in_scope: f.in_scope(db),
                    module: db::is_module(db, f),
                    rows: by_file.remove(&f).unwrap_or_default(),
                })
                .collect();
            let fresh = DatasetMemo {
                interfaces: parse.interfaces,
                files,
                slices: Some(slices.memo),
            };
            memo::store_dataset(
                &self.s.cache,
                rc,
                &self.cfg.extract,
                &self.cfg.context,
                &fresh,
            );
        }
    }

    /// An output file's name relative to the build's output (a variant's is in its folder).
    fn output_name(&self, file: &str) -> String {
        let rel = self.rel.to_string_lossy();
        if rel.is_empty() {
            file.to_owned()
        } else {
            format!("{rel}/{file}")
        }
    }

    /// Stage `evaluate` over the dataset's instances, through a bench over this build.
    fn evaluate(
        &self,
        instances: &[r2e_core::records::Instance],
        tasks: &[r2e_core::records::BugfixTask],
        summary: &mut Summary,
    ) -> Result<crate::evaluate::EvalOutputs> {
        let cfg = self.cfg;
        let bench = crate::bench::Bench::of(
            self.s,
            cfg,
            self.services,
            instances.to_vec(),
            self.shared.env_lines,
        )?;
        let llm = r2e_exec::llm::Llm::new(self.services.models.clone());
        let templates = self.s.templates.get(cfg)?;
        let width = cfg
            .evaluate
            .model
            .iter()
            .filter_map(|m| cfg.providers.iter().find(|p| p.name == m.provider))
            .map(|p| p.max_concurrency as usize)
            .max()
            .unwrap_or(0)
            .max(rayon::current_num_threads());
        let pool = rayon::ThreadPoolBuilder::new()
            .num_threads(width)
            .build()
            .map_err(Error::internal)?;
        let tasks = if cfg.evaluate.bugfix { tasks } else { &[] };
        let evaluator = crate::evaluate::Evaluator::new(
            cfg,
            &bench,
            &llm,
            &templates,
            &self.s.cache,
            &pool,
            tasks,
        );
        let bar = progress(0, "evaluate");
        let out = evaluator.run(&bar)?;
        bar.finish_and_clear();
        for ((stage, model), usage) in llm.usage() {
            summary
                .llm
                .entry(stage)
                .or_default()
                .entry(model)
                .or_default()
                .add(&usage);
        }
        let tables = crate::evaluate::tables(
            &out.results,
            instances,
            &cfg.evaluate.k,
            cfg.evaluate.repair_rounds,
            &cfg.evaluate.model,
        );
        summary.stages.evaluate = out.samples;
        summary.evaluate = Some(r2e_core::records::EvalSummary {
            extractions: out.extractions,
            checks: out.checks,
            failed_requests: out.failed_requests.len() as u64,
            errors: out.errors.len() as u64,
            pass: tables.overall,
            unseen: tables.by_cutoff,
            repair: tables.repair,
            bugfix: crate::evaluate::bugfix_table(&out.bugfix_results, tasks, &cfg.evaluate.k),
        });
        Ok(out)
    }

    /// Per repository (every one of the pipeline, in its order): where its time went in `env`
    /// (shared by the datasets) and in this dataset's harness stages.
    fn repo_times(
        &self,
        env_times: &[(String, StageTime)],
        harness_out: &HarnessOutputs,
    ) -> Vec<RepoTime> {
        self.s
            .checkouts
            .iter()
            .map(|c| {
                let mut t = harness_out.times.get(&c.name).cloned().unwrap_or_default();
                t.repo = c.name.clone();
                if let Some((_, env)) = env_times.iter().find(|(repo, _)| *repo == c.name) {
                    t.env = *env;
                }
                t.rounded()
            })
            .collect()
    }

    /// Per repository (every one of the pipeline, in its order): functions, candidates, what
    /// the filters excluded, valid harnesses and instances.
    fn repo_counts(
        &self,
        rows: &[(SourceFile, FunctionRow)],
        harness_out: &HarnessOutputs,
    ) -> Vec<RepoCounts> {
        let db = &self.s.db;
        let repo_of: HashMap<&str, &str> = rows
            .iter()
            .map(|(f, r)| (r.id.as_str(), f.repo(db).name(db).as_str()))
            .collect();
        let reached = self.opts.until >= Stage::Generate;
        RepoCounts::rows(
            self.s.checkouts.iter().map(|c| c.name.as_str()),
            rows.iter()
                .map(|(f, r)| (f.repo(db).name(db).as_str(), r.excluded_by)),
            reached.then(|| {
                harness_out
                    .harnesses
                    .iter()
                    .map(|h| {
                        // Every harness is a candidate's; an id names its repository first.
                        let repo = repo_of.get(h.id.as_str()).copied();
                        let repo = repo.unwrap_or_else(|| h.id.split(':').next().unwrap_or(""));
                        (repo, h.valid == Some(true))
                    })
                    .collect()
            }),
            reached.then(|| {
                harness_out
                    .instances
                    .iter()
                    .map(|i| i.repo.as_str())
                    .collect()
            }),
        )
    }

    /// Stage `extract`: every file's functions with the filters' verdicts. A file whose content
    /// and scope are as the persisted analysis recorded them (and, with the connectivity
    /// filter, which resolves names, whose repository's interfaces are too) takes its functions
    /// from there.
    fn extract(
        &self,
        memos: &[Option<DatasetMemo>],
    ) -> (Vec<(SourceFile, FunctionRow)>, StageCounts) {
        let (db, settings) = (&self.s.db, self.settings.0);
        let before = db.env().counters.extracted.load(Ordering::Relaxed);
        let bar = progress(self.files.len() as u64, "extract");
        let known: HashMap<Repo, memo::StoredRows> = self
            .s
            .repos
            .iter()
            .zip(memos)
            .zip(self.shared.parses)
            .filter_map(|((&repo, memo), parse)| {
                Some((
                    repo,
                    memo.as_ref()?
                        .stored_rows(parse, self.cfg.extract.connectivity),
                ))
            })
            .collect();
        let per_file: Vec<Arc<Vec<FunctionRow>>> = self
            .files
            .par_iter()
            .map_with(db.clone(), |db, &f| {
                let stored = known.get(&f.repo(db)).and_then(|k| k.rows(db, f));
                let r = match stored {
                    Some(rows) => Arc::new(rows.to_vec()),
                    None => db::file_functions(db, f, settings).clone(),
                };
                bar.inc(1);
                r
            })
            .collect();
        bar.finish_and_clear();
        let mut rows = Vec::new();
        for (f, list) in self.files.iter().zip(per_file) {
            rows.extend(list.iter().map(|r| (*f, r.clone())));
        }
        let executed = db.env().counters.extracted.load(Ordering::Relaxed) - before;
        let counts = StageCounts {
            executed,
            cached: self.files.len() as u64 - executed,
            failed: 0,
        };
        (rows, counts)
    }

    /// Stage `slice`: every candidate's slice and context; the counts of slices computed and
    /// of contexts rendered, and each repository's graph and slice records.
    ///
    /// A repository whose persisted graph was computed under the same interfaces and for the
    /// same candidates keeps it: no slice is computed. A candidate's context is rendered again
    /// only when an item it shows changed its text (`memo`).
    fn slice(
        &self,
        candidates: &[(SourceFile, FunctionRow)],
        memos: &[Option<DatasetMemo>],
    ) -> (StageCounts, StageCounts, Vec<RepoSlices>) {
        let db = &self.s.db;
        let before = db.env().counters.sliced.load(Ordering::Relaxed);
        let contexts_before = db.env().counters.contexts.load(Ordering::Relaxed);
        let bar = progress(candidates.len() as u64, "slice");
        let mut out = Vec::new();
        for (i, (&repo, memo)) in self.s.repos.iter().zip(memos).enumerate() {
            let mut own: Vec<(SourceFile, Item)> = candidates
                .iter()
                .filter(|(f, _)| f.repo(db) == repo)
                .map(|(f, r)| (*f, Item::Def(f.ix(db), r.def)))
                .collect();
            own.sort_unstable_by_key(|&(_, it)| it);
            let items: Vec<Item> = own.iter().map(|&(_, it)| it).collect();
            let kept = memo.as_ref().and_then(|m| {
                let slices = m.kept_slices(db, repo, self.shared.parses.get(i)?, &items)?;
                Some(self.slices_kept(repo, m, slices, &own, &bar))
            });
            out.push(match kept {
                Some(kept) => kept,
                None => self.slices_computed(repo, &own, &bar),
            });
        }
        bar.finish_and_clear();
        let counts = |executed: u64| {
            let executed = executed.min(candidates.len() as u64);
            StageCounts {
                executed,
                cached: candidates.len() as u64 - executed,
                failed: 0,
            }
        };
        (
            counts(db.env().counters.sliced.load(Ordering::Relaxed) - before),
            counts(db.env().counters.contexts.load(Ordering::Relaxed) - contexts_before),
            out,
        )
    }

    /// A repository's slices computed in salsa: each candidate's slice and context, the graph
    /// they span, and what the persisted analysis keeps of it.
    fn slices_computed(
        &self,
        repo: Repo,
        own: &[(SourceFile, Item)],
        bar: &indicatif::ProgressBar,
    ) -> RepoSlices {
        let db = &self.s.db;
        // Slices read only interfaces and the candidates: datasets (variants) with the same
        // extract settings and the same candidates share them, as they share salsa's queries.
        // The candidates are part of the key: `[select]` (`dedup`) may differ between variants
        // of the same extract settings, and the records below pair candidates with slices.
        let key = (
            repo,
            self.settings.0,
            own.iter().map(|&(_, it)| it).collect(),
        );
        let found = self.shared.slices.lock().unwrap().get(&key).cloned();
        let computed = match found {
            Some(c) => c,
            None => {
                let c = Arc::new(compute_slices(db, repo, own));
                self.shared.slices.lock().unwrap().insert(key, c.clone());
                c
            }
        };
        let cfg = &self.cfg.context;
        let records: Vec<SliceRecord> = own
            .par_iter()
            .zip(&computed.slices)
            .map_with(db.clone(), |db, (&(f, it), slice)| {
                let node = computed
                    .graph
                    .node(it)
                    .expect("every candidate is a node of its graph");
                let ctx = db::plan_context(db, repo, it, cfg, || slice.clone());
                bar.inc(1);
                computed.graph.record(f.ix(db), node, slice, &ctx)
            })
            .collect();
        RepoSlices {
            memo: SliceMemo {
                records,
                ..computed.memo.clone()
            },
            graph: Some(computed.graph.clone()),
        }
    }

    /// A repository's slices kept from the persisted analysis: the contexts that show an item
    /// whose text changed are rendered again, from slices derived from the stored edges.
    fn slices_kept(
        &self,
        repo: Repo,
        memo: &DatasetMemo,
        slices: &SliceMemo,
        own: &[(SourceFile, Item)],
        bar: &indicatif::ProgressBar,
    ) -> RepoSlices {
        let db = &self.s.db;
        let (text, affected) = memo.affected(db, repo, slices, self.cfg.context.strategy);
        let cfg = &self.cfg.context;
        let fresh: Vec<(usize, db::Context)> = affected
            .par_iter()
            .map_with(db.clone(), |db, &i| {
                let it = own[i].1;
                let ctx = db::plan_context(db, repo, it, cfg, || slices.closure(slices.node(it)));
                (i, ctx)
            })
            .collect();
        let mut records = slices.records.clone();
        for (i, ctx) in fresh {
            records[i].tokens = ctx.tokens;
            records[i].truncated = ctx.truncated;
        }
        bar.inc(own.len() as u64);
        RepoSlices {
            memo: SliceMemo {
                text,
                records,
                ..slices.clone()
            },
            graph: None,
        }
    }

    /// The candidates `[select] created_after` keeps (all without it), and how many it left
    /// out: those created before it, or without a date.
    fn created_after(
        &self,
        candidates: &[(SourceFile, FunctionRow)],
    ) -> (Vec<(SourceFile, FunctionRow)>, u64) {
        let Some(after) = &self.cfg.select.created_after else {
            return (candidates.to_vec(), 0);
        };
        let db = &self.s.db;
        let kept: Vec<(SourceFile, FunctionRow)> = candidates
            .iter()
            .filter(|(f, row)| {
                let repo = f.repo(db);
                let created = self
                    .s
                    .repos
                    .iter()
                    .position(|&r| r == repo)
                    .and_then(|i| self.shared.dates.get(i)?.as_deref())
                    .and_then(|d| d.of(&row.id, repo.name(db)))
                    .map(|d| d.created);
                after.admits_secs(created)
            })
            .cloned()
            .collect();
        let left_out = (candidates.len() - kept.len()) as u64;
        (kept, left_out)
    }

    /// The harness stages over the candidates.
    fn harnesses(&self, candidates: &[(SourceFile, FunctionRow)]) -> Result<HarnessOutputs> {
        let s = self.s;
        let bar = progress(candidates.len() as u64, "harness");
        let inputs = Inputs {
            cfg: self.cfg,
            cache: &s.cache,
            checkouts: &s.checkouts,
            repos: &s.repos,
            settings: self.settings.1,
            envs: self.shared.envs,
            dates: self.shared.dates,
        };
        let out = harnesses::run(
            &inputs,
            &s.db,
            self.services,
            &s.templates,
            candidates,
            self.opts.until,
            &bar,
        )?;
        bar.finish_and_clear();
        Ok(out)
    }

    /// The dataset's files. Returns them as recorded.
    fn write(
        &self,
        rows: &[(SourceFile, FunctionRow)],
        slices: &[RepoSlices],
        harness_out: &HarnessOutputs,
        results: Option<(
            &[r2e_core::records::EvalResult],
            &[r2e_core::records::EvalResult],
        )>,
        summary: &mut Summary,
    ) -> Result<Vec<Recorded>> {
        let (until, db) = (self.opts.until, &self.s.db);
        let dir = self.staging.join(&self.rel);
        fs_err::create_dir_all(&dir)?;
        let (previous, current) = (&self.shared.previous, self.shared.current.as_deref());
        let rel = self.rel.to_string_lossy();
        let name = |file: &str| self.output_name(file);
        let open = |file: &str| JsonlWriter::create(self.staging, &name(file));
        // Log paths are relative to the output; a variant's folder is two levels down.
        let relocate = |log: &str| -> String {
            if rel.is_empty() {
                log.to_owned()
            } else {
                format!("../../{log}")
            }
        };
        let mut recorded = Vec::new();
        if until >= Stage::Extract {
            // With slices: each repository's dependency graph, which the candidates' lines
            // point into; a graph kept from the last build is its file, when that is as it was.
            for (&repo, slices) in self.s.repos.iter().zip(slices) {
                let file = format!("slices/{}.jsonl", repo.name(db));
                if slices.graph.is_none()
                    && let Some(kept) = outputs::reuse(
                        &self.staging.join(name(&file)),
                        &name(&file),
                        slices.memo.file,
                        previous,
                        current,
                    )
                {
                    recorded.push(kept);
                    continue;
                }
                let graph = match &slices.graph {
                    Some(g) => g.clone(),
                    None => Arc::new(Graph::of(db, repo, slices.memo.candidates.iter().copied())),
                };
                let mut out = open(&file)?;
                let nodes: Vec<usize> = (0..graph.len()).collect();
                for chunk in nodes.chunks(8192) {
                    let lines: Vec<Vec<u8>> = chunk
                        .par_iter()
                        .map_with(db.clone(), |db, &n| graph.line(db, n))
                        .collect();
                    for line in lines {
                        out.write_line(&line)?;
                    }
                }
                recorded.push(out.finish(previous, current)?);
            }
            let repos: &[Repo] = &self.s.repos;
            let record =
                |db: &Database, f: &SourceFile, row: &FunctionRow| -> Option<SliceRecord> {
                    if row.excluded_by.is_some() {
                        return None;
                    }
                    let repo = repos.iter().position(|&r| r == f.repo(db))?;
                    let memo = &slices.get(repo)?.memo;
                    let at = memo
                        .candidates
                        .binary_search(&Item::Def(f.ix(db), row.def))
                        .ok()?;
                    Some(memo.records[at].clone())
                };
            let dates_of = |db: &Database, f: &SourceFile| {
                let repo = repos.iter().position(|&r| r == f.repo(db))?;
                self.shared.dates.get(repo)?.as_deref()
            };
            let mut out = open(OutputFile::Functions.name())?;
            for chunk in rows.chunks(4096) {
                let lines: Vec<Vec<u8>> = chunk
                    .par_iter()
                    .map_with(db.clone(), |db, (f, row)| {
                        function_line(db, *f, row, record(db, f, row), dates_of(db, f))
                    })
                    .collect();
                for line in lines {
                    out.write_line(&line)?;
                }
            }
            recorded.push(out.finish(previous, current)?);
        }
        if until >= Stage::Env {
            let mut out = open(OutputFile::Envs.name())?;
            for line in self.shared.env_lines {
                let mut line = line.clone();
                line.log = relocate(&line.log);
                out.write(&line)?;
            }
            recorded.push(out.finish(previous, current)?);
        }
        if until >= Stage::Generate {
            let mut out = open(OutputFile::Harnesses.name())?;
            for record in &harness_out.harnesses {
                out.write(record)?;
            }
            recorded.push(out.finish(previous, current)?);
        }
        if until >= Stage::Assemble {
            // The manifest hashes each line without its newline.
            let lines: Vec<(String, Vec<u8>)> = harness_out
                .instances
                .iter()
                .map(|i| {
                    Ok((
                        i.id.clone(),
                        serde_json::to_vec(i).map_err(Error::internal)?,
                    ))
                })
                .collect::<Result<_>>()?;
            let mut out = open(OutputFile::Dataset.name())?;
            for (_, line) in &lines {
                out.write_line(line)?;
            }
            recorded.push(out.finish(previous, current)?);
            let (version, manifest) =
                crate::stages::assemble::manifest(self.cfg, &self.s.checkouts, &lines)?;
            let mut out = open(OutputFile::Manifest.name())?;
            out.write_line(&manifest)?;
            recorded.push(out.finish(previous, current)?);
            summary.dataset_version = Some(version);
        }
        if let Some(made) = &harness_out.bugfix {
            let mut out = open(OutputFile::Bugfix.name())?;
            for task in &made.tasks {
                out.write(task)?;
            }
            recorded.push(out.finish(previous, current)?);
        }
        if let Some((results, bugfix_results)) = results {
            let mut out = open(OutputFile::Results.name())?;
            for r in results {
                out.write(r)?;
            }
            recorded.push(out.finish(previous, current)?);
            // The samples on the bug-fix tasks, when they were evaluated.
            if harness_out.bugfix.is_some() && self.cfg.evaluate.bugfix {
                let mut out = open(OutputFile::BugfixResults.name())?;
                for r in bugfix_results {
                    out.write(r)?;
                }
                recorded.push(out.finish(previous, current)?);
            }
        }
        let mut out = open(OutputFile::Failures.name())?;
        for f in self.shared.failures {
            let mut f = f.clone();
            f.log = f.log.as_deref().map(relocate);
            out.write(&f)?;
        }
        // The broken states `[bugfix]` judged and left out, each with why.
        for (id, why) in harness_out.bugfix.iter().flat_map(|m| &m.rejected) {
            let (repo, path) = id.split_once(':').unwrap_or((id, ""));
            out.write(&r2e_core::records::FailureRecord {
                repo: repo.to_owned(),
                path: path.split(':').next().map(str::to_owned),
                stage: "bugfix".into(),
                reason: format!("{id}: {why}"),
                log: None,
            })?;
        }
        recorded.push(out.finish(previous, current)?);
        Ok(recorded)
    }
}

/// The summary's note on samples of `evaluate` that no check could judge (outcome `error`).
fn errors_note(errors: &[String]) -> String {
    let shown: Vec<&str> = errors.iter().take(10).map(String::as_str).collect();
    format!(
        "{} sample(s) of `evaluate` could not be checked (outcome `error`, not the candidates' doing); they are in `results.jsonl`, left out of pass@k, and the next build checks them again:\n  {}{}",
        errors.len(),
        shown.join("\n  "),
        if errors.len() > shown.len() {
            "\n  ..."
        } else {
            ""
        }
    )
}
