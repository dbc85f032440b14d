//! Stage `bugfix` (with `[bugfix]`): bug-fix tasks from the instances' harnesses. A task is a
//! broken state of the repository (one of the dataset's mutants of an instance's function,
//! `python::mutate`, which stage `mutate` checked), a report of what goes wrong, and the hidden
//! tests that tell the fix: the harness's tests the broken state fails (FAIL_TO_PASS) and the
//! ones it passes (PASS_TO_PASS). The broken state is judged through the one check path
//! (`checkpath::check_repeated`), `[validate] repeats` times: it is a task only when every
//! FAIL_TO_PASS test fails and every PASS_TO_PASS test passes in each run. The original passes
//! them all: it is the reference, and validation checked it so. Which mutants become tasks is
//! decided by their content alone (`docs/bugfix.md`).

use std::collections::{BTreeMap, HashMap};
use std::path::PathBuf;
use std::sync::Arc;

use super::assemble::Done;
use super::candidate::Candidate;
use super::history::{self, Earlier};
use super::mutation;
use r2e_core::config::{BugSource, BugfixConfig};
use r2e_core::error::Result;
use r2e_core::hash::Hash;
use r2e_core::records::{
    BugLocation, BugOrigin, BugStability, BugfixTask, CheckOutcome, Instance, TestFailed,
};
use r2e_exec::checkpath::{self, TestVerdict, Verdict};
use r2e_exec::jobs::Exec;
use r2e_exec::py::TestedState;
use r2e_exec::runs;
use r2e_python::mutate::Mutant;

/// Where a task's hidden tests are added (`test_patch`), under the repository's root.
pub const TESTS_DIR: &str = "r2e_tests";
/// At depth 1, the broken states checked per task wanted (a callee's mutants are checked anew,
/// not taken from stage `mutate`).
const CHECKED_PER_TASK: usize = 4;
/// Calls a report shows besides the first.
const MORE_CALLS: usize = 2;
/// Characters of a call or an outcome a report shows.
const SHOWN: usize = 300;

/// What the stage made: the tasks, and the broken states it judged and left out, with why.
#[derive(Debug, Default)]
pub struct Made {
    pub tasks: Vec<BugfixTask>,
    /// `(task id it would have had, why not)`.
    pub rejected: Vec<(String, String)>,
    /// Broken states' checks that ran now, and that came from the cache (the repeated checks,
    /// and any first check stage `mutate` had not stored).
    pub executed: u64,
    pub cached: u64,
    /// Checks that could not judge a broken state (outcome `error`): the build runs again.
    pub errors: usize,
    /// Per instance, its share of the stage's seconds.
    pub times: Vec<Spent>,
}

/// An instance's share of the stage's seconds: an even share of its environment's.
#[derive(Debug)]
pub struct Spent {
    pub repo: String,
    /// Making and checking the broken states.
    pub checks: f64,
    /// The project's own tests on them.
    pub tests: f64,
    /// Whether any of its environment's work ran now.
    pub fresh: bool,
}

/// Where a broken state's bug comes from.
enum Bug {
    Mutant(Mutant),
    /// The body before the last change to it: the fix is that change.
    History(Arc<Earlier>),
    /// Several mutants, each in another function of the module (`[bugfix] combine`), each
    /// one caught by the harness alone.
    Combined(Vec<Part>),
}

/// One bug of a combined broken state.
struct Part {
    function: String,
    mutant: Mutant,
    /// Its lines in the module (`changed_lines`).
    lines: (u32, u32),
}

/// One broken state of an instance's function.
struct Broken<'a> {
    /// Index of the instance's `Done`.
    done: usize,
    bug: Bug,
    module: String,
    hash: Hash,
    /// The definition the bug is in (its index in the module), and its qualname: the
    /// instance's own function (depth 0), or one it calls (depth 1). A combined state's first.
    def: usize,
    function: String,
    candidate: &'a Candidate,
    instance: &'a Instance,
}

/// What the stage needs of a repository's checkout.
pub struct RepoFacts {
    /// Its history: the folder `git` reads it from, and the commit built (`Checkout::history`,
    /// `Checkout::identity`); `None` without history.
    pub history: Option<(PathBuf, String)>,
    /// `Checkout::tree`: what the project's tests read.
    pub tree: String,
}

/// The repositories, by name.
pub type Repos = HashMap<String, RepoFacts>;

/// The stage's settings.
pub struct Settings<'a> {
    pub bugfix: &'a BugfixConfig,
    /// `[validate] repeats`: the runs a broken state is judged on.
    pub repeats: u32,
    /// Seconds the project's own tests may run on one state (the capture's limit).
    pub tests_time_limit: u64,
}

/// A definition's earlier body, by (repository, file, place in the file).
type EarlierBodies = HashMap<(String, String, String), Arc<Earlier>>;

/// The tasks of the selected instances in `dones`. `exec` is stage `mutate`'s (its short run
/// timeout), so that the first check of each mutant is the one `mutate` stored.
pub fn make(exec: &Exec, settings: &Settings, dones: &[Done], repos: &Repos) -> Result<Made> {
    let cfg = settings.bugfix;
    let subjects: Vec<(usize, &Candidate, &Instance)> = dones
        .iter()
        .enumerate()
        .filter_map(|(i, d)| {
            let (c, _) = &**d.selected.as_ref()?;
            Some((i, c, d.instance.as_ref()?))
        })
        .filter(|(_, c, _)| c.env.is_some())
        .collect();
    let chunks = runs::chunks_by_env(
        subjects.iter().enumerate().map(|(k, (_, c, _))| {
            let env = c.env.as_ref().expect("filtered");
            (
                k,
                (
                    env.runtime(&c.target.root),
                    runs::worker_module(exec, &c.target).map(std::path::Path::to_path_buf),
                ),
            )
        }),
        runs::workers(),
    );
    use rayon::prelude::*;
    let mut out = Made::default();
    let earlier = if cfg.sources.contains(&BugSource::History) {
        let (found, unread) = earlier_bodies(cfg, &subjects, repos);
        out.errors += unread;
        found
    } else {
        EarlierBodies::new()
    };
    let made: Vec<Result<(Made, Vec<Tested>)>> = chunks
        .par_iter()
        .flat_map_iter(|bin| {
            bin.iter().map(|((runtime, _), idx)| {
                let chosen: Vec<&(usize, &Candidate, &Instance)> =
                    idx.iter().map(|&k| &subjects[k]).collect();
                chunk(exec, runtime, settings, &chosen, &earlier)
            })
        })
        .collect();
    let mut tested: Vec<Tested> = Vec::new();
    for m in made {
        let (m, t) = m?;
        let first = out.tasks.len();
        tested.extend(t.into_iter().map(|t| Tested {
            task: first + t.task,
            ..t
        }));
        out.tasks.extend(m.tasks);
        out.rejected.extend(m.rejected);
        out.executed += m.executed;
        out.cached += m.cached;
        out.times.extend(m.times);
        out.errors += m.errors;
    }
    project_tests(exec, settings, &tested, &mut out, repos)?;
    // The dataset's order: by instance, then by task id.
    out.tasks
        .sort_by(|a, b| (&a.instance, &a.instance_id).cmp(&(&b.instance, &b.instance_id)));
    Ok(out)
}

/// The places of the definitions of a candidate's module (`qualname`, `#n` for the n-th of a
/// name), by index, as dating and the history name definitions.
fn places(c: &Candidate) -> Vec<String> {
    r2e_python::summary::numbered_places(
        c.summary.interface.defs.iter().map(|d| d.qualname.as_str()),
    )
}

/// The earlier bodies of the subjects' bug sites, read from their repositories' histories (a
/// file's once, the files in parallel), and how many files' histories could not be read (each
/// named on stderr; the build runs again).
fn earlier_bodies(
    cfg: &BugfixConfig,
    subjects: &[(usize, &Candidate, &Instance)],
    repos: &Repos,
) -> (EarlierBodies, usize) {
    use rayon::prelude::*;
    // (repository, file) → the places wanted there, with their bodies' hashes now.
    let mut wanted: BTreeMap<(String, String), history::Wanted> = BTreeMap::new();
    for (_, c, inst) in subjects {
        if repos
            .get(&c.repo)
            .and_then(|r| r.history.as_ref())
            .is_none()
        {
            continue;
        }
        let places_of = places(c);
        for (def, _, _) in bug_sites(c, cfg.depth) {
            let (Some(place), Some(layout)) = (places_of.get(def), c.summary.layout.defs.get(def))
            else {
                continue;
            };
            let places = wanted
                .entry((c.repo.clone(), inst.path.clone()))
                .or_default();
            if !places.iter().any(|(p, _)| p == place) {
                places.push((place.clone(), layout.code_hash));
            }
        }
    }
    let read: Vec<_> = wanted
        .into_par_iter()
        .map(|((repo, path), places)| {
            let (dir, commit) = repos[&repo].history.as_ref().expect("filtered");
            let found = history::earlier(dir, commit, &path, &places);
            (repo, path, places, found)
        })
        .collect();
    let mut out = EarlierBodies::new();
    let mut unread = 0;
    for (repo, path, places, found) in read {
        match found {
            Ok(found) => {
                for ((place, _), e) in places.into_iter().zip(found) {
                    if let Some(e) = e {
                        out.insert((repo.clone(), path.clone(), place), Arc::new(e));
                    }
                }
            }
            Err(e) => {
                eprintln!(
                    "warning: repo `{repo}`: cannot read the history of `{path}` for bug-fix tasks: {e}"
                );
                unread += 1;
            }
        }
    }
    (out, unread)
}

/// The tasks of one environment's instances, and their broken states for the project's tests.
fn chunk<'a>(
    exec: &Exec,
    runtime: &r2e_exec::jobs::Runtime,
    settings: &Settings,
    subjects: &[&(usize, &'a Candidate, &'a Instance)],
    earlier: &EarlierBodies,
) -> Result<(Made, Vec<Tested<'a>>)> {
    let (cfg, repeats) = (settings.bugfix, settings.repeats);
    let started = std::time::Instant::now();
    let mutants = cfg.sources.contains(&BugSource::Mutants);
    let combine = cfg.combine.max(1) as usize;
    let mut broken: Vec<Broken> = Vec::new();
    for &&(done, c, instance) in subjects {
        let mut seen: Vec<Hash> = Vec::new();
        let mut own: Vec<Broken> = Vec::new();
        let mut changes: Vec<Broken> = Vec::new();
        let places_of = if earlier.is_empty() {
            Vec::new()
        } else {
            places(c)
        };
        let mut sites = bug_sites(c, cfg.depth);
        if combine > 1 && cfg.depth == 0 {
            // A combined task's other bugs are in the functions it calls.
            sites.extend(bug_sites(c, 1).into_iter().filter(|(d, _, _)| *d != c.def));
        }
        for (def, function, definition) in sites {
            // The body before the last change to it, spliced into today's module (not in a
            // function that is a site only for a combined task's other bugs).
            let found = places_of
                .get(def)
                .filter(|_| cfg.depth > 0 || def == c.def)
                .and_then(|p| earlier.get(&(c.repo.clone(), instance.path.clone(), p.clone())));
            if let Some(e) = found
                && let Ok(module) =
                    r2e_exec::splice::splice(&c.source, &c.summary, def, &e.definition, &function)
            {
                let hash = Hash::of_bytes(module.as_bytes());
                if *module != *c.source && !seen.contains(&hash) {
                    seen.push(hash);
                    changes.push(Broken {
                        done,
                        bug: Bug::History(e.clone()),
                        module,
                        hash,
                        def,
                        function: function.clone(),
                        candidate: c,
                        instance,
                    });
                }
            }
            if !mutants {
                continue;
            }
            for m in mutation::of(&definition) {
                let Some(module) = mutation::module_with(&c.source, &c.summary, def, &function, &m)
                else {
                    continue;
                };
                let hash = Hash::of_bytes(module.as_bytes());
                // Identical broken states are one task; a mutant that changes nothing is none.
                if *module == *c.source || seen.contains(&hash) {
                    continue;
                }
                seen.push(hash);
                own.push(Broken {
                    done,
                    bug: Bug::Mutant(m),
                    module,
                    hash,
                    def,
                    function: function.clone(),
                    candidate: c,
                    instance,
                });
            }
        }
        // A callee's mutants were never checked against this harness: the first
        // `CHECKED_PER_TASK` per task wanted (per bug of a combined one), by content, are.
        // With `combine`, they take turns by function, so that each callee has its share.
        let (mut callees, mine): (Vec<Broken>, Vec<Broken>) = own
            .into_iter()
            .partition(|b| cfg.depth > 0 || b.def != c.def);
        if combine > 1 {
            let mut rank: HashMap<usize, usize> = HashMap::new();
            callees.sort_by_key(order);
            let mut ranked: Vec<(usize, Broken)> = callees
                .into_iter()
                .map(|b| {
                    let r = rank.entry(b.def).or_default();
                    *r += 1;
                    (*r, b)
                })
                .collect();
            ranked.sort_by_key(|(r, b)| (*r, order(b)));
            callees = ranked.into_iter().map(|(_, b)| b).collect();
        } else {
            callees.sort_by_key(order);
        }
        let bugs_in_callees = if cfg.depth > 0 { combine } else { combine - 1 };
        callees.truncate(CHECKED_PER_TASK * cfg.per_function as usize * bugs_in_callees);
        broken.extend(changes);
        broken.extend(mine);
        broken.extend(callees);
    }
    let mut made = Made::default();
    // The first check: stage `mutate`'s, from the cache.
    let checked = checkpath::check(
        exec,
        runtime,
        &broken.iter().map(candidate).collect::<Vec<_>>(),
    )?;
    let mut killed: BTreeMap<usize, Vec<(usize, Vec<String>)>> = BTreeMap::new();
    for (i, c) in checked.iter().enumerate() {
        made.executed += u64::from(c.fresh);
        let failing = failing(&c.verdict);
        match c.verdict.outcome {
            CheckOutcome::Error => made.errors += 1,
            // A broken state that does not import, or that no test fails, is no task.
            CheckOutcome::Fail if c.verdict.error.is_none() && !failing.is_empty() => {
                // An earlier body that fails only on a name today's module no longer has was
                // moved away from what it used (an import, a helper), not changed in what it
                // does: splicing it into today's module is what breaks it.
                if let (Bug::History(e), Some(missing)) =
                    (&broken[i].bug, only_missing_names(&c.verdict))
                {
                    made.rejected.push((
                        task_id(&broken[i]),
                        format!(
                            "the body before commit {} fails in today's module only on a name it no longer has ({missing}): its module changed around it, not its behaviour",
                            short(&e.commit)
                        ),
                    ));
                    continue;
                }
                killed.entry(broken[i].done).or_default().push((i, failing));
            }
            // A mutant the harness does not catch is one of many; a change from the history
            // that it does not catch is said (a refactor, as far as the tests can tell).
            _ => {
                if let Bug::History(e) = &broken[i].bug {
                    let why = match &c.verdict.error {
                        Some(err) => format!(
                            "the body before commit {} does not run in today's module: {err}",
                            short(&e.commit)
                        ),
                        None => format!(
                            "the harness does not tell the body before commit {} from today's (a refactor, as far as its tests can tell)",
                            short(&e.commit)
                        ),
                    };
                    made.rejected.push((task_id(&broken[i]), why));
                }
            }
        }
    }
    // Per instance, the changes from the history first, then the mutants, each by a hash of
    // the instance and the broken module, the first `per_function`: content decides, never
    // the order the bugs were made or checked in.
    let mut chosen: Vec<usize> = Vec::new();
    for (_, mut ks) in killed {
        ks.sort_by_key(|(i, _)| {
            let b = &broken[*i];
            (matches!(b.bug, Bug::Mutant(_)), order(b))
        });
        if combine == 1 {
            chosen.extend(ks.iter().take(cfg.per_function as usize).map(|(i, _)| *i));
            continue;
        }
        // With `combine`: the changes from the history alone, then the mutants in combined
        // states.
        let history: Vec<usize> = ks
            .iter()
            .map(|(i, _)| *i)
            .filter(|&i| matches!(broken[i].bug, Bug::History(_)))
            .take(cfg.per_function as usize)
            .collect();
        let wanted = cfg.per_function as usize - history.len();
        chosen.extend(history);
        let mutants: Vec<usize> = ks
            .iter()
            .map(|(i, _)| *i)
            .filter(|&i| matches!(broken[i].bug, Bug::Mutant(_)))
            .collect();
        for state in combined(&broken, &mutants, combine, cfg.depth, wanted) {
            match state {
                Chosen::One(i) => chosen.push(i),
                Chosen::Several(b) => {
                    chosen.push(broken.len());
                    broken.push(b);
                }
            }
        }
    }
    // The broken states that became tasks, in `made.tasks`' order.
    let mut tasked: Vec<usize> = Vec::new();
    let repeated = checkpath::check_repeated(
        exec,
        runtime,
        &chosen
            .iter()
            .map(|&i| candidate(&broken[i]))
            .collect::<Vec<_>>(),
        repeats,
    )?;
    for (&i, (verdicts, fresh)) in chosen.iter().zip(repeated) {
        if fresh {
            made.executed += 1;
        } else {
            made.cached += 1;
        }
        let b = &broken[i];
        let id = task_id(b);
        match judge_runs(&verdicts) {
            Judged::Error => made.errors += 1,
            Judged::Rejected(why) => made.rejected.push((id, why)),
            Judged::Task {
                fail_to_pass,
                pass_to_pass,
                stability,
                evidence,
            } => {
                made.tasks.push(task(
                    b,
                    cfg.depth,
                    id,
                    &fail_to_pass,
                    &pass_to_pass,
                    stability,
                    &evidence,
                ));
                tasked.push(i);
            }
        }
    }
    let n = subjects.len().max(1) as f64;
    let checks = started.elapsed().as_secs_f64() / n;
    let fresh = made.executed > 0;
    made.times = subjects
        .iter()
        .map(|(_, c, _)| Spent {
            repo: c.repo.clone(),
            checks,
            tests: 0.0,
            fresh,
        })
        .collect();
    let first = made.tasks.len() - tasked.len();
    let tested = tasked
        .iter()
        .enumerate()
        .map(|(k, &i)| Tested {
            task: first + k,
            done: broken[i].done,
            candidate: broken[i].candidate,
            module: broken[i].module.clone(),
        })
        .collect();
    Ok((made, tested))
}

/// A task's broken state, for the project's tests: `task` is its index in the tasks made.
struct Tested<'a> {
    task: usize,
    done: usize,
    candidate: &'a Candidate,
    module: String,
}

/// A broken state chosen to be judged: one already checked, or one of several bugs.
enum Chosen<'a> {
    One(usize),
    Several(Broken<'a>),
}

/// An instance's `wanted` broken states of up to `combine` bugs each, from its mutants the
/// harness caught (`killed`, indices in `broken`, in their order), each bug in another
/// function: at depth 0 one bug in the instance's function and the others in functions it
/// calls, at depth 1 all in functions it calls. The functions take turns (by their first bug's
/// order), and each function's bugs too, so that the states differ; a state whose bugs cannot
/// all be put in the module together, or that is one already made, is skipped. With one
/// function caught, a state is one bug. Each bug alone is caught: none of them may be left
/// unfixed.
fn combined<'a>(
    broken: &[Broken<'a>],
    killed: &[usize],
    combine: usize,
    depth: u32,
    wanted: usize,
) -> Vec<Chosen<'a>> {
    let Some(&first) = killed.first() else {
        return Vec::new();
    };
    let c = broken[first].candidate;
    // Per function, its bugs in order; the functions in order of their first bug.
    let mut functions: Vec<(usize, Vec<usize>)> = Vec::new();
    for &i in killed {
        match functions.iter_mut().find(|(d, _)| *d == broken[i].def) {
            Some((_, bugs)) => bugs.push(i),
            None => functions.push((broken[i].def, vec![i])),
        }
    }
    let own = if depth == 0 {
        let Some(k) = functions.iter().position(|(d, _)| *d == c.def) else {
            return Vec::new();
        };
        Some(functions.remove(k))
    } else {
        None
    };
    let mut used: HashMap<usize, usize> = HashMap::new();
    let mut pick = |(def, bugs): &(usize, Vec<usize>)| {
        let n = used.entry(*def).or_default();
        *n += 1;
        bugs[(*n - 1) % bugs.len()]
    };
    let mut seen: Vec<Hash> = Vec::new();
    let mut out = Vec::new();
    for k in 0..wanted {
        let mut parts: Vec<usize> = own.iter().map(&mut pick).collect();
        let others = combine - parts.len();
        let n = functions.len();
        parts.extend(
            (0..others.min(n))
                .map(|j| &functions[(k + j) % n])
                .map(&mut pick)
                .collect::<Vec<_>>(),
        );
        if parts.len() == 1 {
            if !seen.contains(&broken[parts[0]].hash) {
                seen.push(broken[parts[0]].hash);
                out.push(Chosen::One(parts[0]));
            }
            continue;
        }
        let Some(module) = compose(
            &c.source,
            &parts
                .iter()
                .map(|&i| broken[i].module.as_str())
                .collect::<Vec<_>>(),
        ) else {
            continue;
        };
        let hash = Hash::of_bytes(module.as_bytes());
        if seen.contains(&hash) {
            continue;
        }
        seen.push(hash);
        let b = &broken[parts[0]];
        let bugs = parts
            .iter()
            .filter_map(|&i| match &broken[i].bug {
                Bug::Mutant(m) => Some(Part {
                    function: broken[i].function.clone(),
                    mutant: m.clone(),
                    lines: changed_lines(&c.source, &broken[i].module),
                }),
                _ => None,
            })
            .collect();
        out.push(Chosen::Several(Broken {
            done: b.done,
            bug: Bug::Combined(bugs),
            module,
            hash,
            def: b.def,
            function: b.function.clone(),
            candidate: c,
            instance: b.instance,
        }));
    }
    out
}

/// `original` with the changes of each of `states` (each differs from it in one stretch of
/// lines), when those stretches are apart: none overlaps or touches another.
fn compose(original: &str, states: &[&str]) -> Option<String> {
    let a: Vec<&str> = original.split_inclusive('\n').collect();
    let mut edits: Vec<(usize, usize, Vec<&str>)> = states
        .iter()
        .map(|state| {
            let b: Vec<&str> = state.split_inclusive('\n').collect();
            let (head, tail) = same_ends(&a, &b);
            (head, a.len() - tail, b[head..b.len() - tail].to_vec())
        })
        .collect();
    edits.sort_by_key(|(start, _, _)| *start);
    if edits.windows(2).any(|w| w[0].1 >= w[1].0) {
        return None;
    }
    let mut out = String::with_capacity(original.len());
    let mut at = 0;
    for (start, end, with) in &edits {
        out.extend(a[at..*start].iter().copied());
        out.extend(with.iter().copied());
        at = *end;
    }
    out.extend(a[at..].iter().copied());
    Some(out)
}

/// The project's own tests on each task's broken state: those the capture saw call the
/// instance's function (at depth 1, the caller's: the callee's own are not recorded), run on
/// each broken state, and once per module on the module as it is, with the tests of all its
/// instances (`capture::project_tests`); the modules side by side. A task's
/// `project_tests_fail` are the ones that fail on its broken state and not on the module as it
/// is; they stay `null` when the tests did not run under pytest or a run did not finish. Each
/// module's time is its repository's `tests`.
fn project_tests(
    exec: &Exec,
    settings: &Settings,
    tested: &[Tested],
    made: &mut Made,
    repos: &Repos,
) -> Result<()> {
    // By module (one checkout's file, imported from one root), then by instance.
    type Module<'a> = (&'a str, &'a str, &'a std::path::Path);
    let mut by_module: BTreeMap<Module, BTreeMap<usize, Vec<&Tested>>> = BTreeMap::new();
    for t in tested {
        let c = t.candidate;
        let module = (
            c.repo.as_str(),
            c.target.module.as_str(),
            c.target.import_root.as_path(),
        );
        by_module
            .entry(module)
            .or_default()
            .entry(t.done)
            .or_default()
            .push(t);
    }
    use rayon::prelude::*;
    // Per module: each task's failing tests (`None`: not known), whether a run was made, and
    // its seconds.
    type Outcome = (Vec<(usize, Option<Vec<String>>)>, bool, f64);
    let outcomes: Vec<Result<Outcome>> = by_module
        .par_iter()
        .map(|(_, instances)| {
            let started = std::time::Instant::now();
            let mut known: Vec<(usize, Option<Vec<String>>)> = Vec::new();
            let mut union: Vec<String> = Vec::new();
            let mut runs: Vec<(&Tested, &[String])> = Vec::new();
            let mut candidate = None;
            for states in instances.values() {
                let c = states[0].candidate;
                let (Some(tests), Some(facts)) = (&c.project_tests, repos.get(&c.repo)) else {
                    continue;
                };
                // No project test calls the function: none can catch its bugs, and nothing
                // need run.
                if tests.is_empty() {
                    known.extend(states.iter().map(|t| (t.task, Some(Vec::new()))));
                    continue;
                }
                for t in tests {
                    if !union.contains(t) {
                        union.push(t.clone());
                    }
                }
                runs.extend(states.iter().map(|&t| (t, tests.as_slice())));
                candidate.get_or_insert((c, &facts.tree));
            }
            let Some((c, tree)) = candidate else {
                return Ok((known, false, started.elapsed().as_secs_f64()));
            };
            let mut states = vec![TestedState {
                text: None,
                tests: &union,
            }];
            states.extend(runs.iter().map(|&(t, tests)| TestedState {
                text: Some(t.module.as_str()),
                tests,
            }));
            let (failed, fresh) =
                super::capture::project_tests(exec, c, tree, &states, settings.tests_time_limit)?;
            if let Some(Some(before)) = failed.first() {
                for (&(t, _), after) in runs.iter().zip(&failed[1..]) {
                    let caught = after.as_ref().map(|after| {
                        after
                            .iter()
                            .filter(|id| !before.contains(id))
                            .cloned()
                            .collect()
                    });
                    known.push((t.task, caught));
                }
            }
            Ok((known, fresh, started.elapsed().as_secs_f64()))
        })
        .collect();
    for ((repo, _, _), outcome) in by_module.keys().zip(outcomes) {
        let (known, fresh, seconds) = outcome?;
        made.executed += u64::from(fresh);
        for (k, caught) in known {
            let Some(caught) = caught else { continue };
            let task = &mut made.tasks[k];
            task.caught_by_project_tests = Some(!caught.is_empty());
            task.project_tests_fail = Some(caught);
        }
        made.times.push(Spent {
            repo: (*repo).to_owned(),
            checks: 0.0,
            tests: seconds,
            fresh,
        });
    }
    Ok(())
}

/// Where an instance's bugs go at `depth`: (the definition's index in the module, its
/// qualname, its text dedented). Depth 0: the function itself. Depth 1: each function or method
/// of its module it calls directly (its slice at distance 1), so that the caller's harness
/// fails one hop from the bug; the whole module is the candidate, so the bug may be anywhere in
/// it.
fn bug_sites(c: &Candidate, depth: u32) -> Vec<(usize, String, String)> {
    if depth == 0 {
        return vec![(c.def, c.target.qualname.clone(), c.problem.reference())];
    }
    c.callees
        .iter()
        .filter_map(|&d| {
            let def = c.summary.interface.defs.get(d)?;
            let chunk = c.summary.layout.defs.get(d)?.chunk;
            let text = c.source.get(chunk.start as usize..chunk.end as usize)?;
            let text = r2e_python::dedent(text, &r2e_python::strings_in(text));
            Some((d, def.qualname.clone(), text))
        })
        .collect()
}

/// A broken state as the check path takes it.
fn candidate<'a>(b: &'a Broken<'a>) -> checkpath::Candidate<'a> {
    checkpath::Candidate {
        target: &b.candidate.target,
        harness: &b.instance.harness,
        expected: &b.instance.expected,
        module: &b.module,
        policy: b.instance.policy,
        code: &b.instance.code_hash,
    }
}

/// The names of a verdict's failing tests.
fn failing(v: &Verdict) -> Vec<String> {
    v.tests
        .iter()
        .filter(|t| !t.passed)
        .map(|t| t.name.clone())
        .collect()
}

/// When every call the failing tests make differently raises `NameError`: the first such
/// outcome.
fn only_missing_names(v: &Verdict) -> Option<String> {
    let mut first = None;
    for t in v.tests.iter().filter(|t| !t.passed) {
        let differing: Vec<&String> = t
            .expected
            .iter()
            .zip(&t.actual)
            .filter(|(want, got)| want != got)
            .map(|(_, got)| got)
            .collect();
        if differing.is_empty()
            || !differing
                .iter()
                .all(|got| got.starts_with("raises NameError"))
        {
            return None;
        }
        first.get_or_insert_with(|| clip(differing[0]));
    }
    first
}

/// The order of an instance's broken states: blake3 of its id and the broken module's hash.
fn order(b: &Broken) -> [u8; 32] {
    *blake3::hash(format!("bugfix\0{}\0{}", b.instance.id, b.hash.to_hex()).as_bytes()).as_bytes()
}

fn task_id(b: &Broken) -> String {
    let kind = match b.bug {
        Bug::Mutant(_) => "bug",
        Bug::History(_) => "hist",
        Bug::Combined(_) => "bugs",
    };
    format!("{}:{kind}-{}", b.instance.id, &b.hash.to_hex()[..12])
}

/// A commit's id as people quote it.
fn short(commit: &str) -> &str {
    commit.get(..12).unwrap_or(commit)
}

/// What a broken state's runs say.
#[derive(Debug, PartialEq)]
enum Judged {
    /// A run could not judge it: nothing is decided.
    Error,
    Rejected(String),
    Task {
        fail_to_pass: Vec<String>,
        pass_to_pass: Vec<String>,
        stability: BugStability,
        /// The first run's verdicts of the FAIL_TO_PASS tests: what the report shows.
        evidence: Vec<TestVerdict>,
    },
}

/// A broken state is a task when it imports in every run and some test fails in every run;
/// the tests that fail in every run are FAIL_TO_PASS, those that pass in every run
/// PASS_TO_PASS, and a test that does both is neither.
fn judge_runs(verdicts: &[Verdict]) -> Judged {
    if verdicts.iter().any(|v| v.outcome == CheckOutcome::Error) {
        return Judged::Error;
    }
    let Some(first) = verdicts.first() else {
        return Judged::Rejected("it was not run".into());
    };
    if let Some(v) = verdicts.iter().find(|v| v.error.is_some()) {
        return Judged::Rejected(format!(
            "the broken state does not run: {}",
            v.error.as_deref().unwrap_or_default()
        ));
    }
    let names: Vec<&str> = first.tests.iter().map(|t| t.name.as_str()).collect();
    let failed_in = |name: &str| -> u32 {
        verdicts
            .iter()
            .filter(|v| v.tests.iter().any(|t| t.name == name && !t.passed))
            .count() as u32
    };
    let runs = verdicts.len() as u32;
    let tests: Vec<TestFailed> = names
        .iter()
        .map(|&name| TestFailed {
            name: name.to_owned(),
            failed: failed_in(name),
        })
        .collect();
    let fail_to_pass: Vec<String> = tests
        .iter()
        .filter(|t| t.failed == runs)
        .map(|t| t.name.clone())
        .collect();
    let pass_to_pass: Vec<String> = tests
        .iter()
        .filter(|t| t.failed == 0)
        .map(|t| t.name.clone())
        .collect();
    if fail_to_pass.is_empty() {
        return Judged::Rejected(format!(
            "no test fails in every one of its {runs} runs (it is caught only sometimes)"
        ));
    }
    let evidence = first
        .tests
        .iter()
        .filter(|t| fail_to_pass.contains(&t.name))
        .cloned()
        .collect();
    Judged::Task {
        fail_to_pass,
        pass_to_pass,
        stability: BugStability { runs, tests },
        evidence,
    }
}

/// The task's record.
fn task(
    b: &Broken,
    depth: u32,
    id: String,
    fail_to_pass: &[String],
    pass_to_pass: &[String],
    stability: BugStability,
    evidence: &[TestVerdict],
) -> BugfixTask {
    let inst = b.instance;
    let original: &str = &b.candidate.source;
    let tests_path = tests_path(inst);
    let named = |names: &[String]| -> Vec<String> {
        names.iter().map(|n| test_id(&tests_path, n)).collect()
    };
    let location = |function: &str, (first, last): (u32, u32)| BugLocation {
        file: inst.path.clone(),
        function: function.to_owned(),
        lines: [first, last],
    };
    let locations = match &b.bug {
        Bug::Combined(parts) => parts
            .iter()
            .map(|p| location(&p.function, p.lines))
            .collect(),
        _ => vec![location(&b.function, changed_lines(original, &b.module))],
    };
    let (origin, mutant_kind, mutant, history_commit, created_at) = match &b.bug {
        Bug::Mutant(m) => (
            BugOrigin::Mutant,
            Some(m.kind.name().to_owned()),
            Some(m.description.clone()),
            None,
            inst.changed_at.clone().or_else(|| inst.created_at.clone()),
        ),
        Bug::Combined(parts) => {
            let each = |f: fn(&Mutant) -> &str, by: &str| {
                parts
                    .iter()
                    .map(|p| f(&p.mutant))
                    .collect::<Vec<_>>()
                    .join(by)
            };
            (
                BugOrigin::Mutant,
                Some(each(|m| m.kind.name(), "+")),
                Some(each(|m| &m.description, "; ")),
                None,
                inst.changed_at.clone().or_else(|| inst.created_at.clone()),
            )
        }
        Bug::History(e) => (
            BugOrigin::History,
            None,
            None,
            Some(e.commit.clone()),
            Some(r2e_core::dates::rfc3339(e.time)),
        ),
    };
    BugfixTask {
        instance_id: id,
        repo: inst.repo.clone(),
        base_commit: inst.commit.clone(),
        created_at,
        problem_statement: report(inst, evidence),
        statement_source: Default::default(),
        patch: diff(&inst.path, &b.module, original),
        test_patch: added(&tests_path, &inst.harness),
        fail_to_pass: named(fail_to_pass),
        pass_to_pass: named(pass_to_pass),
        version: inst.env_lock.clone(),
        environment_setup_commit: inst.commit.clone(),
        instance: inst.id.clone(),
        bug_patch: diff(&inst.path, original, &b.module),
        origin,
        depth,
        locations,
        mutant_kind,
        mutant,
        history_commit,
        project_tests_fail: None,
        caught_by_project_tests: None,
        env_lock: inst.env_lock.clone(),
        stability,
    }
}

/// A fix's check, judged as a task's (`judge`).
pub struct FixVerdict {
    /// The check's verdict, `pass` when no FAIL_TO_PASS or PASS_TO_PASS test fails.
    pub verdict: Verdict,
    /// FAIL_TO_PASS tests the fixed state still fails.
    pub fail_to_pass_failing: Vec<String>,
    /// PASS_TO_PASS tests the fix broke.
    pub pass_to_pass_failing: Vec<String>,
}

/// Judges the check of a task's fixed state (`r2e check TASK --patch`, `serve`'s bug-fix
/// sessions and `evaluate`'s bug-fix samples alike): the harness's tests by their task ids;
/// `pass` when no FAIL_TO_PASS or PASS_TO_PASS test fails (a test in neither list, flaky on
/// the broken state, does not count). A check that could not judge stays as it is.
pub fn judge(task: &BugfixTask, mut verdict: Verdict) -> FixVerdict {
    let tests_path = task
        .fail_to_pass
        .first()
        .and_then(|t| t.split_once("::"))
        .map_or("", |(path, _)| path)
        .to_owned();
    let failing: Vec<String> = verdict
        .tests
        .iter()
        .filter(|t| !t.passed)
        .map(|t| test_id(&tests_path, &t.name))
        .collect();
    let failing_of = |list: &[String]| -> Vec<String> {
        list.iter()
            .filter(|t| failing.contains(t))
            .cloned()
            .collect()
    };
    let fail_to_pass_failing = failing_of(&task.fail_to_pass);
    let pass_to_pass_failing = failing_of(&task.pass_to_pass);
    if verdict.outcome != CheckOutcome::Error && verdict.error.is_none() {
        let passed = fail_to_pass_failing.is_empty() && pass_to_pass_failing.is_empty();
        verdict.passed = passed;
        verdict.outcome = if passed {
            CheckOutcome::Pass
        } else {
            CheckOutcome::Fail
        };
    }
    FixVerdict {
        verdict,
        fail_to_pass_failing,
        pass_to_pass_failing,
    }
}

/// Where a task's hidden tests go: `r2e_tests/test_<module path>_<qualname>.py`.
pub fn tests_path(inst: &Instance) -> String {
    let stem = inst.path.strip_suffix(".py").unwrap_or(&inst.path);
    let slug: String = format!("{stem}_{}", inst.qualname)
        .chars()
        .map(|ch| if ch.is_ascii_alphanumeric() { ch } else { '_' })
        .collect();
    format!("{TESTS_DIR}/test_{slug}.py")
}

/// A harness test's id as pytest names it: `<path>::<Class>::<test>`.
pub fn test_id(tests_path: &str, name: &str) -> String {
    format!("{tests_path}::{}", name.replace('.', "::"))
}

/// The lines (1-based, inclusive) of `broken` that differ from `original`: from the first line
/// that differs to the last, counted from the end.
fn changed_lines(original: &str, broken: &str) -> (u32, u32) {
    let a: Vec<&str> = original.lines().collect();
    let b: Vec<&str> = broken.lines().collect();
    let (head, tail) = same_ends(&a, &b);
    let last = (b.len() - tail).max(head + 1);
    (head as u32 + 1, last as u32)
}

/// How many items `a` and `b` share at their start, and then at their end (never counting an
/// item twice).
fn same_ends<T: PartialEq>(a: &[T], b: &[T]) -> (usize, usize) {
    let head = a.iter().zip(b).take_while(|(x, y)| x == y).count();
    let tail = a
        .iter()
        .rev()
        .zip(b.iter().rev())
        .take_while(|(x, y)| x == y)
        .count()
        .min(a.len().min(b.len()) - head);
    (head, tail)
}

/// A unified diff of one file from `from` to `to`, with git's `a/` and `b/` paths.
pub fn diff(path: &str, from: &str, to: &str) -> String {
    diffy::DiffOptions::new()
        .set_original_filename(format!("a/{path}"))
        .set_modified_filename(format!("b/{path}"))
        .create_patch(from, to)
        .to_string()
}

/// A diff that adds a file.
fn added(path: &str, text: &str) -> String {
    diffy::DiffOptions::new()
        .set_original_filename("/dev/null")
        .set_modified_filename(format!("b/{path}"))
        .create_patch("", text)
        .to_string()
}

/// A user's report of the bug from the failing evidence: the calls that go wrong, what each did
/// and what was expected, and what the documentation says. Never a path, a line, the patch or
/// the tests' code.
pub fn report(inst: &Instance, evidence: &[TestVerdict]) -> String {
    let name = inst.qualname.as_str();
    let mut out = format!("`{name}` does not behave as it should.\n");
    let mut shown = 0;
    for t in evidence {
        for (k, call) in t.inputs.iter().enumerate() {
            let (Some(want), Some(got)) = (t.expected.get(k), t.actual.get(k)) else {
                continue;
            };
            if shown > MORE_CALLS {
                break;
            }
            let call = clip(call);
            if want != got {
                out.push_str(&format!(
                    "\n`{call}` {}, but I expected it to {}.\n",
                    clip(got),
                    infinitive(want)
                ));
            } else if let Some(why) = &t.message {
                out.push_str(&format!("\nAfter `{call}`, {}.\n", clip(why)));
            } else {
                continue;
            }
            shown += 1;
        }
    }
    if shown == 0 {
        out.push_str("\nIts results differ from what it returned before.\n");
    }
    if let Some(doc) = inst
        .docstring
        .as_deref()
        .map(str::trim)
        .filter(|d| !d.is_empty())
    {
        let first: String = doc
            .split("\n\n")
            .next()
            .unwrap_or(doc)
            .lines()
            .map(str::trim)
            .collect::<Vec<_>>()
            .join(" ");
        out.push_str(&format!("\nIts documentation says: \"{}\"\n", clip(&first)));
    }
    out
}

fn clip(s: &str) -> String {
    if s.chars().count() <= SHOWN {
        s.to_owned()
    } else {
        let cut: String = s.chars().take(SHOWN).collect();
        format!("{cut}…")
    }
}

/// `returns 3` → `return 3`; `raises KeyError` → `raise KeyError`.
fn infinitive(outcome: &str) -> String {
    let outcome = clip(outcome);
    if let Some(rest) = outcome.strip_prefix("returns ") {
        format!("return {rest}")
    } else if let Some(rest) = outcome.strip_prefix("raises ") {
        format!("raise {rest}")
    } else {
        outcome
    }
}

/// Why a patch was not applied.
#[derive(Debug, PartialEq)]
pub enum PatchError {
    /// Not a unified diff at this line (1-based): bad input.
    Malformed { line: usize, why: String },
    /// It names a path outside the repository, or another file than the task's: refused.
    Refused(String),
    /// A unified diff of the task's file that does not apply to the broken state: the fix's
    /// own failure.
    DoesNotApply(String),
}

/// One file's part of a unified diff: its paths (without `a/`, `b/`), and its lines from the
/// `---` header on, with the line number that header is at.
struct FilePatch<'a> {
    old: String,
    new: String,
    line: usize,
    lines: Vec<&'a str>,
}

/// Applies a unified diff (as `git diff` or `diff -u` writes it, paths with or without `a/`
/// and `b/`) to the task's file: the text after it. Only `file` may change; a path that is
/// absolute or climbs out (`..`) is refused, as is any other file.
pub fn apply_patch(file: &str, broken: &str, patch: &str) -> Result<String, PatchError> {
    let parts = split_files(patch)?;
    if parts.is_empty() {
        return Err(PatchError::Malformed {
            line: 1,
            why: "no file header (`--- a/PATH` then `+++ b/PATH`): not a unified diff".into(),
        });
    }
    let mut text = broken.to_owned();
    for part in parts {
        for path in [&part.old, &part.new] {
            if path == "/dev/null" {
                continue;
            }
            let climbs = std::path::Path::new(path).components().any(|c| {
                !matches!(
                    c,
                    std::path::Component::Normal(_) | std::path::Component::CurDir
                )
            });
            if climbs {
                return Err(PatchError::Refused(format!(
                    "the patch (line {}) names `{path}`, outside the repository",
                    part.line
                )));
            }
            if path.trim_start_matches("./") != file {
                return Err(PatchError::Refused(format!(
                    "the patch (line {}) changes `{path}`; a task's fix is judged in its own file, `{file}`",
                    part.line
                )));
            }
        }
        check_hunks(&part)?;
        let body = part.lines.join("\n") + "\n";
        let parsed = diffy::Patch::from_str(&body).map_err(|e| PatchError::Malformed {
            line: part.line,
            why: e.to_string(),
        })?;
        text = diffy::apply(&text, &parsed)
            .map_err(|e| PatchError::DoesNotApply(format!("{file}: {e}")))?;
    }
    Ok(text)
}

/// The diff's files, each from its `---` line; what comes before one (`diff --git`, `index`
/// lines, a message) is left out.
fn split_files(patch: &str) -> Result<Vec<FilePatch<'_>>, PatchError> {
    let lines: Vec<&str> = patch.lines().collect();
    let mut out: Vec<FilePatch> = Vec::new();
    let mut i = 0;
    while i < lines.len() {
        let line = lines[i];
        if let Some(old) = line.strip_prefix("--- ")
            && lines.get(i + 1).is_some_and(|n| n.starts_with("+++ "))
        {
            let new = &lines[i + 1][4..];
            out.push(FilePatch {
                old: header_path(old),
                new: header_path(new),
                line: i + 1,
                lines: vec![line, lines[i + 1]],
            });
            i += 2;
            continue;
        }
        match out.last_mut() {
            // A `diff --git` line starts the next file's headers.
            Some(_) if line.starts_with("diff ") => {}
            Some(part) if !(line.starts_with("index ") || line.starts_with("new file mode")) => {
                part.lines.push(line)
            }
            _ => {}
        }
        i += 1;
    }
    // A file's lines end at the next file's `diff` line, if any.
    Ok(out)
}

/// A header's path: without a timestamp (after a tab) and without git's `a/` or `b/`.
fn header_path(header: &str) -> String {
    let path = header.split('\t').next().unwrap_or(header).trim();
    if path == "/dev/null" {
        return path.to_owned();
    }
    path.strip_prefix("a/")
        .or_else(|| path.strip_prefix("b/"))
        .unwrap_or(path)
        .to_owned()
}

/// Each hunk of a file's part: a header `@@ -A[,B] +C[,D] @@`, then lines that start with ` `,
/// `-`, `+` or `\` as many as the header says. The first line that breaks it is named.
fn check_hunks(part: &FilePatch) -> Result<(), PatchError> {
    let bad = |k: usize, why: String| PatchError::Malformed {
        line: part.line + k,
        why,
    };
    let range = |s: &str| -> Option<usize> {
        let mut it = s.splitn(2, ',');
        it.next()?.parse::<usize>().ok()?;
        match it.next() {
            Some(n) => n.parse().ok(),
            None => Some(1),
        }
    };
    let mut k = 2;
    if k >= part.lines.len() {
        return Err(bad(
            1,
            "no hunk (`@@ -A,B +C,D @@`) after the file's header".into(),
        ));
    }
    while k < part.lines.len() {
        let line = part.lines[k];
        let header = line
            .strip_prefix("@@ -")
            .and_then(|r| r.split_once(" @@"))
            .and_then(|(ranges, _)| ranges.split_once(" +"))
            .and_then(|(a, b)| Some((range(a)?, range(b)?)));
        let Some((mut old, mut new)) = header else {
            return Err(bad(
                k,
                format!("`{}` is not a hunk header (`@@ -A,B +C,D @@`)", clip(line)),
            ));
        };
        k += 1;
        while old > 0 || new > 0 {
            let Some(line) = part.lines.get(k) else {
                return Err(bad(
                    k,
                    "the hunk ends before the lines its header counts".into(),
                ));
            };
            match line.chars().next() {
                Some(' ') | None => {
                    old = old.saturating_sub(1);
                    new = new.saturating_sub(1);
                }
                Some('-') => old = old.saturating_sub(1),
                Some('+') => new = new.saturating_sub(1),
                Some('\\') => {}
                Some(_) => {
                    return Err(bad(
                        k,
                        format!(
                            "`{}`: a hunk's line starts with ` `, `-` or `+`",
                            clip(line)
                        ),
                    ));
                }
            }
            k += 1;
        }
        while part.lines.get(k).is_some_and(|l| l.starts_with('\\')) {
            k += 1;
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    fn verdict(tests: &[(&str, bool)]) -> Verdict {
        Verdict {
            outcome: if tests.iter().all(|t| t.1) {
                CheckOutcome::Pass
            } else {
                CheckOutcome::Fail
            },
            passed: tests.iter().all(|t| t.1),
            error: None,
            failure_class: None,
            tests: tests
                .iter()
                .map(|&(name, passed)| TestVerdict {
                    name: name.into(),
                    passed,
                    inputs: vec![format!("f({name:?})")],
                    expected: vec!["returns 1".into()],
                    actual: vec![if passed { "returns 1" } else { "returns 2" }.into()],
                    message: (!passed).then(|| "the return value differs".into()),
                })
                .collect(),
        }
    }

    /// FAIL_TO_PASS fail in every run, PASS_TO_PASS pass in every run, and a test that does
    /// both is in neither; a broken state caught only sometimes, or that does not run, is no
    /// task; an `error` run decides nothing.
    #[test]
    fn the_runs_decide_fail_to_pass_and_pass_to_pass() {
        let runs = [
            verdict(&[("T.a", false), ("T.b", true), ("T.c", false)]),
            verdict(&[("T.a", false), ("T.b", true), ("T.c", true)]),
            verdict(&[("T.a", false), ("T.b", true), ("T.c", false)]),
        ];
        let Judged::Task {
            fail_to_pass,
            pass_to_pass,
            stability,
            evidence,
        } = judge_runs(&runs)
        else {
            panic!("a task")
        };
        assert_eq!(fail_to_pass, ["T.a"]);
        assert_eq!(pass_to_pass, ["T.b"]);
        assert_eq!(stability.runs, 3);
        assert_eq!(
            stability.tests.iter().map(|t| t.failed).collect::<Vec<_>>(),
            [3, 0, 2]
        );
        assert_eq!(evidence.len(), 1);

        let sometimes = [verdict(&[("T.a", false)]), verdict(&[("T.a", true)])];
        assert!(
            matches!(judge_runs(&sometimes), Judged::Rejected(why) if why.contains("only sometimes"))
        );
        let mut broken = verdict(&[]);
        broken.error = Some("the candidate does not import: SyntaxError".into());
        broken.outcome = CheckOutcome::Fail;
        assert!(
            matches!(judge_runs(&[broken]), Judged::Rejected(why) if why.contains("does not run"))
        );
        let mut error = verdict(&[("T.a", false)]);
        error.outcome = CheckOutcome::Error;
        assert_eq!(judge_runs(&[runs[0].clone(), error]), Judged::Error);
    }

    /// The gold patch takes the broken file back to the original, the bug patch the other way,
    /// and the changed lines are the mutant's.
    #[test]
    fn the_patches_apply_and_the_lines_are_the_changed_ones() {
        let original =
            "def f(x):\n    \"\"\"Doc.\"\"\"\n    if x > 1:\n        return 1\n    return 2\n";
        let broken = original.replace("x > 1", "x <= 1");
        let gold = diff("pkg/m.py", &broken, original);
        assert!(
            gold.starts_with("--- a/pkg/m.py\n+++ b/pkg/m.py\n"),
            "{gold}"
        );
        let patch = diffy::Patch::from_str(&gold).unwrap();
        assert_eq!(diffy::apply(&broken, &patch).unwrap(), original);
        let bug_text = diff("pkg/m.py", original, &broken);
        let bug = diffy::Patch::from_str(&bug_text).unwrap();
        assert_eq!(diffy::apply(original, &bug).unwrap(), broken);
        assert_eq!(changed_lines(original, &broken), (3, 3));
        // A statement removed: the place it was.
        let removed = original.replace("        return 1\n", "        pass\n");
        assert_eq!(changed_lines(original, &removed), (4, 4));
        let shorter = original.replace("    return 2\n", "");
        assert_eq!(changed_lines(original, &shorter), (5, 5));
        let added = super::added("r2e_tests/test_m.py", "import x\n");
        assert!(
            added.starts_with("--- /dev/null\n+++ b/r2e_tests/test_m.py\n"),
            "{added}"
        );
    }

    /// A fix as an agent writes it: git's headers and paths, or plain `diff -u`'s; a diff that
    /// is not one is named by its line; a path out of the repository, or another file, is
    /// refused; a diff of the file that does not fit the broken state does not apply.
    #[test]
    fn a_patch_applies_to_the_tasks_file_alone() {
        let original = "def f(x):\n    if x > 1:\n        return 1\n    return 2\n";
        let broken = original.replace("x > 1", "x <= 1");
        let gold = diff("pkg/m.py", &broken, original);
        assert_eq!(apply_patch("pkg/m.py", &broken, &gold).unwrap(), original);
        let git =
            format!("diff --git a/pkg/m.py b/pkg/m.py\nindex 1234567..89abcde 100644\n{gold}");
        assert_eq!(apply_patch("pkg/m.py", &broken, &git).unwrap(), original);
        let plain = gold
            .replace("a/pkg/m.py", "pkg/m.py")
            .replace("b/pkg/m.py", "pkg/m.py");
        assert_eq!(apply_patch("pkg/m.py", &broken, &plain).unwrap(), original);
        // An empty patch is no diff.
        assert!(matches!(
            apply_patch("pkg/m.py", &broken, ""),
            Err(PatchError::Malformed { line: 1, .. })
        ));
        // A broken hunk line, named by its line in the whole patch (git's two lines first).
        let bad = git.replacen("-    if x <= 1:", "?    if x <= 1:", 1);
        match apply_patch("pkg/m.py", &broken, &bad) {
            Err(PatchError::Malformed { line, why }) => {
                let at = bad.lines().position(|l| l.starts_with('?')).unwrap() + 1;
                assert_eq!(line, at, "{why}");
            }
            other => panic!("{other:?}"),
        }
        let header = git.replacen("@@ -1,4 +1,4 @@", "@@ one @@", 1);
        assert!(
            matches!(
                apply_patch("pkg/m.py", &broken, &header),
                Err(PatchError::Malformed { line: 5, .. })
            ),
            "{header}"
        );
        // Outside the repository, or another file: refused.
        let out = gold.replace("a/pkg/m.py", "a/../etc/passwd");
        assert!(
            matches!(apply_patch("pkg/m.py", &broken, &out), Err(PatchError::Refused(why)) if why.contains("outside the repository"))
        );
        let abs = gold.replace("+++ b/pkg/m.py", "+++ /etc/passwd");
        assert!(
            matches!(apply_patch("pkg/m.py", &broken, &abs), Err(PatchError::Refused(why)) if why.contains("outside the repository"))
        );
        let other = gold.replace("pkg/m.py", "pkg/other.py");
        assert!(
            matches!(apply_patch("pkg/m.py", &broken, &other), Err(PatchError::Refused(why)) if why.contains("its own file"))
        );
        // The file's diff, but of another text: it does not apply.
        let elsewhere = diff("pkg/m.py", "a = 1\nb = 2\n", "a = 1\nb = 3\n");
        assert!(matches!(
            apply_patch("pkg/m.py", &broken, &elsewhere),
            Err(PatchError::DoesNotApply(_))
        ));
    }

    #[test]
    fn bugs_in_two_functions_are_put_together_when_they_are_apart() {
        let original = "def a(x):\n    return x + 1\n\n\ndef b(x):\n    return x * 2\n";
        let in_a = original.replace("x + 1", "x - 1");
        let in_b = original.replace("x * 2", "x * 3\n    pass");
        let both = compose(original, &[&in_b, &in_a]).unwrap();
        assert_eq!(
            both,
            "def a(x):\n    return x - 1\n\n\ndef b(x):\n    return x * 3\n    pass\n"
        );
        assert_eq!(changed_lines(original, &in_b), (6, 7));
        // Two changes of the same lines, or of lines that touch, are not put together.
        let also_a = original.replace("def a(x)", "def a(y)");
        assert_eq!(compose(original, &[&in_a, &also_a]), None);
        assert_eq!(compose(original, &[&in_a, &in_a]), None);
    }

    /// The report names the public call and the evidence, never the path or the tests.
    #[test]
    fn a_report_shows_the_evidence_and_nothing_of_the_solution() {
        let inst = Instance {
            id: "r:pkg/m.py:f".into(),
            repo: "r".into(),
            commit: "c".into(),
            path: "pkg/m.py".into(),
            qualname: "f".into(),
            docstring: Some("Adds one.\n\n    More words.".into()),
            spec: None,
            spec_source: r2e_core::records::SpecSource::Docstring,
            context: String::new(),
            problem: String::new(),
            reference: String::new(),
            harness: "class TestF: ...".into(),
            tests: 3,
            branch_coverage: None,
            line_coverage: None,
            harness_hash: String::new(),
            env_lock: String::new(),
            expected: Vec::new(),
            policy: Default::default(),
            code_hash: String::new(),
            deps: 0,
            tokens: 0,
            in_file: true,
            mutants: None,
            stability: None,
            image: None,
            created_at: None,
            changed_at: None,
        };
        let v = verdict(&[("TestF.test_0", false)]);
        let text = report(&inst, &v.tests);
        assert!(
            text.contains("`f(\"TestF.test_0\")` returns 2, but I expected it to return 1."),
            "{text}"
        );
        assert!(
            text.contains("Its documentation says: \"Adds one.\""),
            "{text}"
        );
        assert!(
            !text.contains("pkg/m.py") && !text.contains("class TestF"),
            "{text}"
        );
        assert_eq!(tests_path(&inst), "r2e_tests/test_pkg_m_f.py");
        assert_eq!(
            test_id(&tests_path(&inst), "TestF.test_0"),
            "r2e_tests/test_pkg_m_f.py::TestF::test_0"
        );
    }
}
