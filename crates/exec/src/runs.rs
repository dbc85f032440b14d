//! Running harnesses in the sandbox, many at a time: a warm worker (`src/py/r2e_batch.py`) per
//! batch forks a child per run. In **record** mode the worker holds the original module and each
//! run records the original's calls; in **candidate** mode it holds nothing of the repository,
//! the original module's file is hidden from the job, and each child imports its candidate under
//! the module's name. What a run did comes back as a [`RawRun`], cleaned of this machine's paths.

use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use super::jobs::{Exec, MESSAGE_CAP, NoAnswer, Runtime, redact, run_script};
use crate::py::{self, AnswerStatus, BatchAnswer, BatchRequest, Mode, RunAnswer, RunRequest};
use crate::sandbox::{Exit, Outcome};
use crate::target::Target;
use r2e_core::error::{Error, Result};

/// What a run is when the warm worker answered nothing for it.
const NO_ANSWER: &str = "the warm worker gave no answer for this harness";

/// How one run of a harness ended, as stored. Coverage lines are relative to the function's
/// `def` line (1 is the line after it), so that moving the function changes nothing.
#[derive(Clone, Debug, PartialEq, Serialize, Deserialize)]
pub enum RawRun {
    /// The runner answered.
    Answered(RunAnswer),
    /// It ran past its time limit (seconds).
    TimedOut(u64),
    /// It died without answering: how, and the limit that killed it (`memory limit (2048
    /// MiB)`), when one did.
    Died { how: String, limit: Option<String> },
    /// The run says nothing about the code it ran (outcome `error`): the sandbox could not
    /// start, the disk filled up, a candidate's worker died or answered nothing, none of it the
    /// code's doing. Never stored: the next check runs it again.
    Error(String),
}

impl RawRun {
    /// Not the code's doing: the run must not be stored ([`RawRun::Error`]).
    pub fn is_error(&self) -> bool {
        matches!(self, RawRun::Error(_))
    }

    pub fn timed_out(&self) -> bool {
        matches!(self, RawRun::TimedOut(_))
    }

    pub fn answer(&self) -> Option<&RunAnswer> {
        match self {
            RawRun::Answered(a) => Some(a),
            _ => None,
        }
    }

    /// A run as the warm worker reports it; `limit` is the limit the worker's job hit, which a
    /// run killed by a signal is taken to have met.
    fn of_worker(answer: RunAnswer, timeout: u64, clean: &Clean, limit: Option<&String>) -> RawRun {
        match answer.status {
            AnswerStatus::Timeout => RawRun::TimedOut(timeout),
            AnswerStatus::Crash => {
                let how = answer
                    .error
                    .unwrap_or_else(|| "the harness process died".into());
                RawRun::Died {
                    limit: limit.filter(|_| how.contains("signal 9")).cloned(),
                    how: clean.text(&how),
                }
            }
            _ => RawRun::Answered(clean.answer(answer)),
        }
    }
}

/// What a run's output may hold of this machine: its paths, named; and how long its messages may
/// be. Applied before a run is stored.
struct Clean<'a> {
    start_line: u32,
    names: &'a [(PathBuf, &'static str)],
}

impl Clean<'_> {
    fn text(&self, text: &str) -> String {
        redact(text, self.names, MESSAGE_CAP)
    }

    /// Coverage lines relative to the `def` line, messages redacted.
    fn answer(&self, mut answer: RunAnswer) -> RunAnswer {
        if let Some(c) = &mut answer.coverage {
            for line in c.missing_lines.iter_mut().chain(c.partial_lines.iter_mut()) {
                *line = line.saturating_sub(self.start_line);
            }
        }
        answer.error = answer.error.map(|e| self.text(&e));
        for t in &mut answer.tests {
            t.message = t.message.as_ref().map(|m| self.text(m));
            for r in &mut t.records {
                r.call = redact(&r.call, self.names, 400);
                if let r2e_core::verdict::Outcome::Raise { message, .. } = &mut r.outcome {
                    *message = self.text(message);
                }
            }
        }
        for e in &mut answer.examples {
            e.outcome = redact(&e.outcome, self.names, 400);
            e.call = redact(&e.call, self.names, 400);
        }
        answer
    }
}

/// The limit a job's cgroup saw hit, as a failure message names it.
pub fn limit_of(exec: &Exec, hit: Option<&'static str>) -> Option<String> {
    hit.map(|limit| match limit {
        "memory" => format!("memory limit ({} MiB)", exec.settings.memory_mib),
        "processes" => format!("process limit ({})", exec.settings.processes),
        other => format!("{other} limit"),
    })
}

/// What a job that wrote no answer did.
pub fn describe_crash(exec: &Exec, outcome: &Outcome, why: &NoAnswer) -> String {
    let stderr = String::from_utf8_lossy(&outcome.stderr);
    let tail: Vec<&str> = stderr.lines().rev().take(6).collect();
    let tail: Vec<&str> = tail.into_iter().rev().collect();
    match (&outcome.exit, limit_of(exec, outcome.limit_hit), why) {
        (exit, Some(limit), _) => format!("the {limit} was hit (killed: {exit:?})"),
        (Exit::Timeout, _, _) => {
            format!("timed out after {:.0}s", outcome.duration.as_secs_f64())
        }
        (_, _, NoAnswer::Unreadable(e)) => format!("its answer cannot be read: {e}"),
        (exit, _, NoAnswer::Missing) => format!("exited with {exit:?}: {}", tail.join("\n")),
    }
}

/// One harness to run: its function, its text, and (candidate mode) the candidate module's
/// whole text.
#[derive(Clone, Copy)]
pub struct Item<'a> {
    pub target: &'a Target,
    pub harness: &'a str,
    pub candidate: Option<&'a str>,
}

/// Cuts work into chunks for the worker pool, one warm worker each, laid out in `workers`
/// bins of about equal size that run side by side, each bin's chunks one after another. Items
/// are grouped by `key` (an environment, and for candidates their module where a worker's
/// children cannot each hide their own: `worker_module`), and groups are never merged: each
/// chunk has one key, its items in their order. The groups, largest first, fill the bins in
/// turn, and a group is cut only where a bin is full, so the bins end together (a pool that
/// took chunks as they come would leave a thread idle while another works through two large
/// ones).
pub fn chunks_by_env<K: Ord + Clone>(
    items: impl IntoIterator<Item = (usize, K)>,
    workers: usize,
) -> Vec<Vec<(K, Vec<usize>)>> {
    let mut groups: std::collections::BTreeMap<K, Vec<usize>> = Default::default();
    let mut total = 0usize;
    for (i, key) in items {
        groups.entry(key).or_default().push(i);
        total += 1;
    }
    let share = total.div_ceil(workers.max(1)).max(1);
    let mut groups: Vec<(K, Vec<usize>)> = groups.into_iter().collect();
    // Largest first; among equals, in key order (a stable sort of the key-ordered groups).
    groups.sort_by_key(|(_, idx)| std::cmp::Reverse(idx.len()));
    let mut bins: Vec<Vec<(K, Vec<usize>)>> = Vec::new();
    let mut room = 0usize;
    for (key, idx) in groups {
        let mut rest: &[usize] = &idx;
        while !rest.is_empty() {
            if room == 0 {
                bins.push(Vec::new());
                room = share;
            }
            let (piece, after) = rest.split_at(room.min(rest.len()));
            bins.last_mut()
                .expect("a bin")
                .push((key.clone(), piece.to_vec()));
            room -= piece.len();
            rest = after;
        }
    }
    bins
}

/// How many warm workers run at once: the threads of the pool the caller runs in.
pub fn workers() -> usize {
    rayon::current_num_threads().max(1)
}

/// Runs each item `runs` times in warm workers, in `mode` (coverage in the first run of a
/// record): per item, its runs. A record runs every item in one worker. Candidates share a
/// worker whose children each hide their own module's file when the sandbox can
/// ([`per_child`]); otherwise only candidates for the same module share one, its job hiding
/// the module's file (a candidate for another module may import it).
pub fn run_batch(
    exec: &Exec,
    runtime: &Runtime,
    items: &[Item],
    mode: Mode,
    runs: u32,
) -> Result<Vec<Vec<RawRun>>> {
    run_batch_from(
        exec,
        runtime,
        items,
        mode,
        Runs {
            first: 0,
            count: runs,
        },
    )
}

/// Which runs of each item a batch makes: `count` of them, numbered from `first` (run 0 in the
/// tests' natural order, with coverage in a record; run n shuffled with seed n).
#[derive(Clone, Copy, Debug)]
pub struct Runs {
    pub first: u32,
    pub count: u32,
}

/// Set once a worker's child could not hide its module's file in this process: from then on,
/// candidates run in a worker per module.
static UNHIDDEN: std::sync::atomic::AtomicBool = std::sync::atomic::AtomicBool::new(false);

/// Whether one worker serves candidates of several modules, each child hiding its own
/// module's file: the sandbox says it can, and no child of this process has failed to.
pub fn per_child(exec: &Exec) -> bool {
    exec.sandbox.hides_per_child() && !UNHIDDEN.load(std::sync::atomic::Ordering::SeqCst)
}

/// What a worker for candidates is kept apart by: nothing more than its environment when its
/// children hide their own modules, otherwise also the module's file.
pub fn worker_module<'a>(exec: &Exec, target: &'a Target) -> Option<&'a Path> {
    (!per_child(exec)).then_some(target.source_file.as_path())
}

/// [`run_batch`] with runs numbered from `runs.first`: a validation's later records run in a
/// worker process of their own, a fresh interpreter (its own hash seed, its own import-time
/// state), numbered after the first.
pub fn run_batch_from(
    exec: &Exec,
    runtime: &Runtime,
    items: &[Item],
    mode: Mode,
    runs: Runs,
) -> Result<Vec<Vec<RawRun>>> {
    if mode == Mode::Record {
        return Ok(run_group(exec, runtime, items, mode, runs, false)?.expect("nothing to hide"));
    }
    if per_child(exec) {
        if let Some(out) = run_group(exec, runtime, items, mode, runs, true)? {
            return Ok(out);
        }
        UNHIDDEN.store(true, std::sync::atomic::Ordering::SeqCst);
        eprintln!(
            "warning: the sandbox's workers cannot hide a module's file per candidate here (no \
             user namespaces inside the sandbox?): candidates run in a worker per module"
        );
    }
    let mut groups: std::collections::BTreeMap<&Path, Vec<usize>> = Default::default();
    for (i, item) in items.iter().enumerate() {
        groups.entry(&item.target.source_file).or_default().push(i);
    }
    let mut out: Vec<Option<Vec<RawRun>>> = vec![None; items.len()];
    for idx in groups.into_values() {
        let group: Vec<Item> = idx.iter().map(|&i| items[i]).collect();
        let ran = run_group(exec, runtime, &group, mode, runs, false)?.expect("hidden per job");
        for (i, r) in idx.into_iter().zip(ran) {
            out[i] = Some(r);
        }
    }
    Ok(out
        .into_iter()
        .map(|r| r.expect("every item ran"))
        .collect())
}

/// Runs items in one warm worker. When the worker answers nothing at all, each item gets a
/// worker of its own once. `None` when `per_child` and a child could not hide its module.
fn run_group(
    exec: &Exec,
    runtime: &Runtime,
    items: &[Item],
    mode: Mode,
    runs: Runs,
    per_child: bool,
) -> Result<Option<Vec<Vec<RawRun>>>> {
    let missing = || vec![RawRun::Error(NO_ANSWER.into()); runs.count as usize];
    let Some(first) = run_worker(exec, runtime, items, mode, runs, per_child)? else {
        return Ok(None);
    };
    if items.len() <= 1 || first.iter().any(|r| r.is_some()) {
        return Ok(Some(
            first
                .into_iter()
                .map(|r| r.unwrap_or_else(missing))
                .collect(),
        ));
    }
    let mut out = Vec::with_capacity(items.len());
    for item in items {
        let Some(alone) = run_worker(
            exec,
            runtime,
            std::slice::from_ref(item),
            mode,
            runs,
            per_child,
        )?
        else {
            return Ok(None);
        };
        out.push(alone.into_iter().next().flatten().unwrap_or_else(missing));
    }
    Ok(Some(out))
}

/// One worker job: per item, its runs, or `None` when the worker did not answer for it (it
/// then gets a `Died` run per run when alone). With `per_child`, each candidate's child hides
/// its module's file (the job hides only what every candidate must not see); `None` when a
/// child could not.
fn run_worker(
    exec: &Exec,
    runtime: &Runtime,
    items: &[Item],
    mode: Mode,
    batch: Runs,
    per_child: bool,
) -> Result<Option<Vec<Option<Vec<RawRun>>>>> {
    let runs = batch.count;
    let harness_names: Vec<String> = (0..items.len())
        .map(|i| format!("harness_{i}.py"))
        .collect();
    let candidate_names: Vec<String> = (0..items.len())
        .map(|i| format!("candidate_{i}.py"))
        .collect();
    let timeout = exec.settings.run_timeout_seconds;
    let request = BatchRequest {
        runs,
        first_run: batch.first,
        timeout,
        memory_mib: exec.settings.memory_mib,
        jobs: items
            .iter()
            .enumerate()
            .map(|(i, item)| RunRequest {
                repo_root: &item.target.import_root,
                extra_roots: &item.target.extra_roots,
                module: &item.target.module,
                qualname: &item.target.qualname,
                harness_file: &harness_names[i],
                source_file: &item.target.source_file,
                start_line: item.target.start_line,
                end_line: item.target.end_line,
                candidate_file: item.candidate.map(|_| candidate_names[i].as_str()),
                coverage: mode == Mode::Record,
                hide: if per_child && mode == Mode::Candidate {
                    std::slice::from_ref(&item.target.source_file)
                } else {
                    &[]
                },
                mode,
            })
            .collect(),
    };
    // Candidates are written in UTF-8: a coding line naming another encoding is made to say so.
    let candidates: Vec<Option<std::borrow::Cow<'_, str>>> = items
        .iter()
        .map(|item| item.candidate.map(r2e_python::decode::as_utf8_text))
        .collect();
    let mut files: Vec<(&str, &str)> = Vec::new();
    for (i, item) in items.iter().enumerate() {
        files.push((&harness_names[i], item.harness));
        if let Some(c) = &candidates[i] {
            files.push((&candidate_names[i], c));
        }
    }
    let hidden = hidden(items, mode, per_child);
    // A run's limit is `timeout` seconds of its CPU or idle-machine time (`r2e_limit.py`, kept
    // by `r2e_batch.py`'s parent); the job's own wall clock, three times that and 5 s a run,
    // only stops a worker that hangs on a machine kept that busy.
    let wall = (3 * timeout + 5) * u64::from(runs) * items.len() as u64 + 60;
    let worker = py::batch_worker();
    // A worker that lives across requests answers a candidate's check when it can; a run of it
    // that crashed is told apart from a limit hit only by a job's own limit counters, so such
    // an answer is left for a worker of its own, as is any it could not give.
    if let (Mode::Candidate, Some(pool)) = (mode, exec.warm) {
        let warm = pool.answer(
            exec,
            runtime,
            &files,
            &request,
            &hidden,
            std::time::Duration::from_secs(wall),
        );
        if let Some((answer, scratch)) = warm {
            if unhidden(&answer) {
                return Ok(None);
            }
            let crashed = answer
                .results
                .iter()
                .flatten()
                .any(|r| r.status == AnswerStatus::Crash);
            if !crashed && answer.results.len() == items.len() {
                let names = runtime.names(&scratch, exec.cache.root());
                return Ok(Some(runs_of(answer, items, runs, timeout, &names, None)));
            }
        }
    }
    let ran = run_script::<_, BatchAnswer>(
        exec,
        runtime,
        &worker,
        &files,
        &request,
        exec.limits(wall),
        &hidden,
    );
    let (outcome, answer, scratch) = match ran {
        Ok(ran) => ran,
        // The machine's failure (the sandbox did not start, the scratch disk is full, the
        // daemon is gone): every item's run says nothing about its code.
        Err(Error::Env(why)) => {
            let mut names = runtime.own_names();
            names.push((exec.cache.root().to_path_buf(), "<cache>"));
            let why = redact(
                &format!("the sandbox could not run the harness: {why}"),
                &names,
                MESSAGE_CAP,
            );
            return Ok(Some(vec![
                Some(vec![RawRun::Error(why); runs as usize]);
                items.len()
            ]));
        }
        Err(e) => return Err(e),
    };
    let names = runtime.names(&scratch, exec.cache.root());
    let limit = limit_of(exec, outcome.limit_hit);
    let answer = match answer {
        Ok(answer) => answer,
        Err(why) if items.len() == 1 => {
            let clean = Clean {
                start_line: items[0].target.start_line,
                names: &names,
            };
            let how = clean.text(&describe_crash(exec, &outcome, &why));
            let died = died_alone(&outcome, how, mode, limit);
            return Ok(Some(vec![Some(vec![died; runs as usize])]));
        }
        Err(_) => return Ok(Some(vec![None; items.len()])),
    };
    if unhidden(&answer) {
        return Ok(None);
    }
    Ok(Some(runs_of(
        answer,
        items,
        runs,
        timeout,
        &names,
        limit.as_ref(),
    )))
}

/// What a candidate's job must not see: the original (its module's file, hidden by the job, or
/// by each child for its own module with `per_child`), the repository's compiled caches and
/// its version control. A record's job sees it all.
fn hidden(items: &[Item], mode: Mode, per_child: bool) -> Vec<PathBuf> {
    let mut hidden: Vec<PathBuf> = Vec::new();
    if mode == Mode::Candidate {
        for item in items {
            if !per_child {
                hidden.push(item.target.source_file.clone());
            }
            hidden.extend(item.target.hide.iter().cloned());
        }
        hidden.sort();
        hidden.dedup();
    }
    hidden
}

/// The run of an item alone in a worker that did not answer (`how`: what it said, cleaned).
fn died_alone(outcome: &Outcome, how: String, mode: Mode, limit: Option<String>) -> RawRun {
    match outcome.exit {
        Exit::Timeout => RawRun::TimedOut(outcome.duration.as_secs()),
        // A candidate runs in a child the worker forks, which reports the child's death: a
        // candidate's worker that died without answering, with no limit hit, was killed or
        // could not start, which is not the candidate's doing (it cannot signal its worker:
        // `r2e_batch.py` runs it in a PID namespace of its own, where the worker's children
        // make namespaces). A record's worker holds the repository's own code, whose crash it
        // may be.
        _ if mode == Mode::Candidate && limit.is_none() => {
            RawRun::Error(format!("the candidate's worker died: {how}"))
        }
        _ => RawRun::Died { how, limit },
    }
}

/// Whether a child of the worker could not hide its module's file (and ran nothing).
fn unhidden(answer: &BatchAnswer) -> bool {
    answer
        .results
        .iter()
        .flatten()
        .any(|r| r.status == AnswerStatus::Unhidden)
}

/// A worker's answer as each item's runs (`None` for an item it did not answer in full), its
/// messages cleaned; `limit`: the limit the worker's job hit, if any.
fn runs_of(
    answer: BatchAnswer,
    items: &[Item],
    runs: u32,
    timeout: u64,
    names: &[(PathBuf, &'static str)],
    limit: Option<&String>,
) -> Vec<Option<Vec<RawRun>>> {
    let mut results = answer.results.into_iter();
    items
        .iter()
        .map(|item| {
            let clean = Clean {
                start_line: item.target.start_line,
                names,
            };
            results
                .next()
                .filter(|r| r.len() == runs as usize)
                .map(|r| {
                    r.into_iter()
                        .map(|a| RawRun::of_worker(a, timeout, &clean, limit))
                        .collect()
                })
        })
        .collect()
}

#[cfg(test)]
mod tests {
    use super::chunks_by_env;

    #[test]
    fn chunks_keep_a_key_apart_and_fill_even_bins() {
        // 10 items over 2 workers: a bin holds 5. Key `a` (7 items) fills the first bin and
        // its last 2 go to the second, with `b` (2) and `c` (1).
        let keys = ["a", "b", "a", "a", "c", "a", "b", "a", "a", "a"];
        let bins = chunks_by_env(keys.iter().copied().enumerate(), 2);
        assert_eq!(
            bins,
            vec![
                vec![("a", vec![0, 2, 3, 5, 7])],
                vec![("a", vec![8, 9]), ("b", vec![1, 6]), ("c", vec![4])],
            ]
        );
        // Three environments of 70, 70 and 68 over 2 workers: two bins of 104, the second
        // environment cut where the first bin is full.
        let keys: Vec<u8> = (0..208).map(|i| (i / 70) as u8).collect();
        let bins = chunks_by_env(keys.iter().copied().enumerate(), 2);
        let sizes: Vec<Vec<(u8, usize)>> = bins
            .iter()
            .map(|b| b.iter().map(|(k, idx)| (*k, idx.len())).collect())
            .collect();
        assert_eq!(sizes, vec![vec![(0, 70), (1, 34)], vec![(1, 36), (2, 68)]]);
        // One worker: one bin, one chunk per key.
        let one = chunks_by_env(["a", "b", "a"].iter().copied().enumerate(), 1);
        assert_eq!(one, vec![vec![("a", vec![0, 2]), ("b", vec![1])]]);
        // Every item once, whatever the pool; never more bins than workers.
        for workers in 0..12 {
            let bins = chunks_by_env(
                ["a", "b", "a", "a", "c", "a", "b", "a", "a", "a"]
                    .iter()
                    .copied()
                    .enumerate(),
                workers,
            );
            assert!(bins.len() <= workers.max(1));
            let mut all: Vec<usize> = bins
                .into_iter()
                .flatten()
                .flat_map(|(_, idx)| idx)
                .collect();
            all.sort();
            assert_eq!(all, (0..10).collect::<Vec<_>>());
        }
        assert!(chunks_by_env(std::iter::empty::<(usize, u8)>(), 2).is_empty());
    }
}

/// A fake warm worker for tests of the stages that run harnesses.
/// For tests of this crate and of the layers above it (feature `testing`).
#[cfg(any(test, feature = "testing"))]
pub mod fake {
    use crate::py::{BatchAnswer, RunAnswer};
    use crate::sandbox::Exit;
    use crate::sandbox::fake::{FakeSandbox, outcome};

    /// A sandbox whose warm worker answers each run of each harness with
    /// `answers(harness text, mode, run number)`.
    pub fn warm_worker(
        answers: impl Fn(&str, &str, u32) -> RunAnswer + Send + Sync + 'static,
    ) -> FakeSandbox {
        FakeSandbox::new(move |job| {
            let request: serde_json::Value =
                serde_json::from_slice(&std::fs::read(&job.args[2]).unwrap()).unwrap();
            let runs = request["runs"].as_u64().unwrap() as u32;
            let first = request["first_run"].as_u64().unwrap_or(0) as u32;
            let results: Vec<Vec<RunAnswer>> = request["jobs"]
                .as_array()
                .unwrap()
                .iter()
                .map(|j| {
                    let file = j["harness_file"].as_str().unwrap();
                    let harness = std::fs::read_to_string(job.scratch.join(file)).unwrap();
                    let mode = j["mode"].as_str().unwrap().to_owned();
                    (first..first + runs)
                        .map(|n| answers(&harness, &mode, n))
                        .collect()
                })
                .collect();
            let out = job.args.last().expect("an answer path");
            std::fs::write(out, serde_json::to_vec(&BatchAnswer { results }).unwrap()).unwrap();
            outcome(Exit::Code(0))
        })
    }
}
