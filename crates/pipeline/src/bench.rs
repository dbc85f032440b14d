//! Checking candidates against a built dataset: `r2e check ID --candidate FILE`, and the
//! [`Bench`] that `evaluate` and `serve` check through.
//!
//! A bench opens a build's committed output once: each instance's module text and definition,
//! its function's place, and its repository's environment. A candidate is spliced into its
//! module (`stages::splice`) and run through the one check path (`stages::checkpath`): its own
//! process, the original absent, its calls judged against the reference's recorded calls under
//! the policy the dataset was built with.

use r2e_core::records::OutputFile;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};
use std::sync::Arc;

use rayon::prelude::*;

use crate::db;
use crate::session::Session;
use r2e_core::cache::Cache;
use r2e_core::config::{Config, SandboxConfig};
use r2e_core::error::{Error, Result};
use r2e_core::records::{BugfixTask, EnvLine, Instance, read_built, read_jsonl, resolve_output};
use r2e_exec::checkpath::{self, Candidate, Checked, Verdict};
use r2e_exec::jobs::{Exec, Runtime};
use r2e_exec::runs;
use r2e_exec::sandbox::Sandbox;
use r2e_exec::services::Services;
use r2e_exec::splice::splice;
use r2e_exec::target::Target;
use r2e_exec::warm::WarmPool;
use r2e_python::summary::ModuleSummary;

/// Where an instance's function is, and what runs it.
struct Resolved {
    /// The repository's files on this machine (the target's root, unless it is relocated into
    /// an image).
    host_root: PathBuf,
    target: Target,
    source: Arc<str>,
    summary: Arc<ModuleSummary>,
    def: usize,
    runtime: Runtime,
}

/// A candidate made ready for its instance.
pub struct Prepared {
    instance: usize,
    module: String,
}

/// A built dataset opened for checking candidates. Holds no database: it may be shared by
/// threads.
pub struct Bench {
    cache: Arc<Cache>,
    sandbox: Arc<dyn Sandbox>,
    settings: SandboxConfig,
    instances: Vec<Instance>,
    /// Per instance: where it is, or why it can no longer be checked.
    resolved: Vec<std::result::Result<Resolved, String>>,
    /// Workers kept across checks (`r2e serve`), when asked for.
    warm: Option<WarmPool>,
}

impl Bench {
    /// Opens the dataset a configuration builds (its committed output, one generation whatever
    /// a build commits meanwhile).
    pub fn open(cfg: &Config, services: &Services) -> Result<Bench> {
        let output = resolve_output(&cfg.output);
        let instances: Vec<Instance> = read_built(&output.join(OutputFile::Dataset.name()))?;
        let envs: Vec<EnvLine> =
            read_jsonl(&output.join(OutputFile::Envs.name()))?.unwrap_or_default();
        let s = Session::open(cfg)?;
        Bench::of(&s, cfg, services, instances, &envs)
    }

    /// A bench over instances of a session (a build's, before its output is committed), with
    /// the environments of `envs`.
    pub fn of(
        s: &Session,
        cfg: &Config,
        services: &Services,
        instances: Vec<Instance>,
        envs: &[EnvLine],
    ) -> Result<Bench> {
        let mut roots: BTreeMap<String, std::result::Result<(PathBuf, Runtime), String>> =
            BTreeMap::new();
        let resolved = instances
            .iter()
            .map(|instance| resolve(s, envs, &mut roots, instance))
            .collect::<Result<Vec<_>>>()?;
        Ok(Bench {
            cache: s.cache.clone(),
            sandbox: services.sandbox.clone(),
            settings: cfg.sandbox.clone(),
            instances,
            resolved,
            warm: None,
        })
    }

    /// Keeps workers across checks (each stops after `idle` without one): a check is then a
    /// forked child of a running worker where one can serve (`stages::warm`).
    pub fn keep_workers_warm(mut self, idle: std::time::Duration) -> Bench {
        self.warm = Some(WarmPool::new(self.sandbox.clone(), idle));
        self
    }

    /// Lets builds and `r2e gc` take the cache while this bench goes on checking
    /// ([`Cache::unlock`]): `r2e serve`, which runs for as long as agents train.
    pub fn unlock_cache(&self) {
        self.cache.unlock();
    }

    /// Stops the warm workers (a server's end), waiting for their jobs to end.
    pub fn stop_workers(&self) {
        if let Some(pool) = &self.warm {
            pool.stop();
        }
    }

    /// Warm workers started, and requests they answered (zeros without a pool).
    pub fn warm_stats(&self) -> (usize, usize) {
        self.warm.as_ref().map_or((0, 0), WarmPool::stats)
    }

    pub fn instances(&self) -> &[Instance] {
        &self.instances
    }

    /// The place of instance `id` among [`Bench::instances`] (exit 2 when there is none).
    pub fn index(&self, id: &str) -> Result<usize> {
        self.instances
            .iter()
            .position(|i| i.id == id)
            .ok_or_else(|| Error::input(format!("`{id}` is not an instance of the dataset")))
    }

    /// The module an instance's function is in, and its definition's text (decorators
    /// included, dedented): the reference answer. `None` when it can no longer be checked.
    pub fn original(&self, ix: usize) -> Option<(&str, String)> {
        let r = self.resolved.get(ix)?.as_ref().ok()?;
        let chunk = r.summary.layout.defs[r.def].chunk;
        let text = r.source.get(chunk.start as usize..chunk.end as usize)?;
        Some((&r.target.module, dedented(text)))
    }

    /// Where instance `ix`'s function is (its repository's files on this machine, and the
    /// target as runs see it) and what runs it; why not when it can no longer be checked.
    pub fn place(&self, ix: usize) -> std::result::Result<(&Path, &Target, &Runtime), String> {
        let r = self.resolved[ix].as_ref().map_err(Clone::clone)?;
        Ok((&r.host_root, &r.target, &r.runtime))
    }

    /// What a verifier inside instance `ix`'s environment image needs to check a candidate
    /// there (`r2e_exec::verifier`), with the harness's `timeout_seconds`; why not when it can
    /// no longer be checked.
    pub fn verifier_task(
        &self,
        ix: usize,
        timeout_seconds: u64,
    ) -> std::result::Result<r2e_exec::verifier::VerifierTask, String> {
        use r2e_exec::verifier::{VERIFIER_FORMAT, VerifierTask, relative};
        let r = self.resolved[ix].as_ref().map_err(Clone::clone)?;
        let (t, instance) = (&r.target, &self.instances[ix]);
        Ok(VerifierTask {
            format: VERIFIER_FORMAT.into(),
            instance_id: instance.id.clone(),
            path: instance.path.clone(),
            module: t.module.clone(),
            qualname: instance.qualname.clone(),
            def: r.def,
            start_line: t.start_line,
            end_line: t.end_line,
            original: r.source.to_string(),
            import_root: relative(&t.root, &t.import_root),
            extra_roots: t.extra_roots.iter().map(|p| relative(&t.root, p)).collect(),
            expected: instance.expected.clone(),
            policy: instance.policy,
            timeout_seconds,
            bugfix: None,
        })
    }

    /// Instance `ix`'s module as an agent is given it: the function's body replaced by its
    /// signature, `spec` as its docstring and `raise NotImplementedError`; the rest unchanged.
    pub fn stub_module(&self, ix: usize) -> Option<String> {
        let r = self.resolved.get(ix)?.as_ref().ok()?;
        let chunk = r.summary.layout.defs[r.def].chunk;
        let (start, end) = (chunk.start as usize, chunk.end as usize);
        let def_text = r.source.get(start..end)?;
        let spec = self.instances[ix].spec.as_deref();
        let stub = r2e_python::signature_stub(def_text, spec);
        let indent = stub
            .lines()
            .last()
            .map(|l| &l[..l.len() - l.trim_start().len()])
            .unwrap_or("    ");
        let mut body = format!("{stub}{indent}raise NotImplementedError\n");
        if !def_text.ends_with('\n') {
            body.pop();
        }
        Some(format!("{}{body}{}", &r.source[..start], &r.source[end..]))
    }

    pub fn instance(&self, id: &str) -> Result<&Instance> {
        Ok(&self.instances[self.index(id)?])
    }

    /// A candidate (a file's text holding the function, or for a method its class) made ready
    /// for instance `id`; the verdict instead when it cannot run at all (it does not compile,
    /// it defines no such function). An instance that can no longer be checked is an error.
    pub fn prepare(
        &self,
        id: &str,
        candidate: &str,
    ) -> Result<std::result::Result<Prepared, Verdict>> {
        let ix = self.index(id)?;
        let r = self.resolved[ix]
            .as_ref()
            .map_err(|e| Error::Unrunnable(e.clone()))?;
        let qualname = &self.instances[ix].qualname;
        Ok(
            match splice(&r.source, &r.summary, r.def, candidate, qualname) {
                Ok(module) => Ok(Prepared {
                    instance: ix,
                    module,
                }),
                Err(message) => Err(Verdict::unrunnable(message)),
            },
        )
    }

    /// Bug-fix task `task`'s broken state: the module of its instance (`ix`) with its
    /// `bug_patch` applied. Unrunnable when the instance can no longer be checked or the patch
    /// no longer applies.
    pub fn broken_module(&self, ix: usize, task: &BugfixTask) -> Result<String> {
        let original = self.module_source(ix)?;
        let file = task.locations.first().map_or("", |l| l.file.as_str());
        crate::stages::bugfix::apply_patch(file, original, &task.bug_patch).map_err(|e| {
            Error::Unrunnable(format!(
                "task `{}`'s broken state cannot be made from the dataset's commit: {e:?}",
                task.instance_id
            ))
        })
    }

    /// The definition of the function bug-fix task `task` is about (its first location's,
    /// found by its qualified name and, among several of that name, by the changed line) in
    /// instance `ix`'s module: its index in the module's summary.
    fn task_def(&self, ix: usize, task: &BugfixTask) -> Option<usize> {
        let r = self.resolved.get(ix)?.as_ref().ok()?;
        let loc = task.locations.first()?;
        // The first changed line, as a byte range: the text before it is the module's.
        let mut lines = r.source.split_inclusive('\n');
        let before: usize = lines
            .by_ref()
            .take(loc.lines[0].saturating_sub(1) as usize)
            .map(str::len)
            .sum();
        let line = (
            before as u32,
            (before + lines.next().map_or(0, str::len)) as u32,
        );
        let named = |d: &usize| r.summary.interface.defs[*d].qualname == loc.function;
        let defs: Vec<usize> = (0..r.summary.interface.defs.len()).filter(named).collect();
        defs.iter()
            .copied()
            .find(|&d| {
                let chunk = r.summary.layout.defs[d].chunk;
                chunk.start <= line.1 && line.0 < chunk.end
            })
            .or_else(|| defs.first().copied())
    }

    /// The function a bug-fix task is about, as instance `ix`'s module has it (the gold fix's
    /// definition, dedented) and as the task's broken state (`broken`, from
    /// [`Bench::broken_module`]) has it. `None` when it is not found.
    pub fn task_definitions(
        &self,
        ix: usize,
        task: &BugfixTask,
        broken: &str,
    ) -> Option<(String, String)> {
        let r = self.resolved.get(ix)?.as_ref().ok()?;
        let d = self.task_def(ix, task)?;
        let chunk = r.summary.layout.defs[d].chunk;
        let gold = dedented(r.source.get(chunk.start as usize..chunk.end as usize)?);
        // The broken state differs from the module only inside this definition: the text
        // after it is the same.
        let tail = r.source.len() - chunk.end as usize;
        let bad = dedented(broken.get(chunk.start as usize..broken.len().checked_sub(tail)?)?);
        Some((gold, bad))
    }

    /// A fixed definition of the function bug-fix task `task` is about, spliced into instance
    /// `ix`'s module (the broken state differs from it only in that definition, which the
    /// candidate replaces); the verdict instead when it cannot run at all.
    pub fn prepare_fix(
        &self,
        ix: usize,
        task: &BugfixTask,
        candidate: &str,
    ) -> Result<std::result::Result<Prepared, Verdict>> {
        let r = self.resolved[ix]
            .as_ref()
            .map_err(|e| Error::Unrunnable(e.clone()))?;
        let Some(def) = self.task_def(ix, task) else {
            return Err(Error::Unrunnable(format!(
                "task `{}`'s function is not in its module",
                task.instance_id
            )));
        };
        let qualname = &r.summary.interface.defs[def].qualname;
        Ok(
            match splice(&r.source, &r.summary, def, candidate, qualname) {
                Ok(module) => Ok(Prepared {
                    instance: ix,
                    module,
                }),
                Err(message) => Err(Verdict::unrunnable(message)),
            },
        )
    }

    /// The text of the module instance `ix`'s function is in, as the dataset's commit has it.
    pub fn module_source(&self, ix: usize) -> Result<&str> {
        let r = self.resolved[ix]
            .as_ref()
            .map_err(|e| Error::Unrunnable(e.clone()))?;
        Ok(&r.source)
    }

    /// A whole module's text (a patched file) made ready for instance `ix`, checked as it is.
    pub fn prepare_module(&self, ix: usize, module: String) -> Result<Prepared> {
        self.resolved[ix]
            .as_ref()
            .map_err(|e| Error::Unrunnable(e.clone()))?;
        Ok(Prepared {
            instance: ix,
            module,
        })
    }

    /// Checks prepared candidates through the check cache: those of one environment together
    /// in warm workers, the environments side by side. Per candidate, its verdict and whether
    /// it ran now.
    pub fn check(&self, prepared: &[Prepared]) -> Result<Vec<Checked>> {
        let exec = Exec {
            cache: &self.cache,
            sandbox: self.sandbox.as_ref(),
            settings: &self.settings,
            warm: self.warm.as_ref().map(|w| w as &dyn r2e_exec::jobs::Warm),
        };
        // A chunk is one environment's, and one module's where a worker's children cannot
        // each hide their own module's file (`runs::worker_module`); the chunks run side by
        // side in the pool.
        let chunks = runs::chunks_by_env(
            prepared.iter().enumerate().map(|(i, p)| {
                let r = self.resolved[p.instance].as_ref().expect("prepared");
                (i, (&r.runtime, runs::worker_module(&exec, &r.target)))
            }),
            runs::workers(),
        );
        let done: Vec<Result<Vec<(usize, Checked)>>> = chunks
            .par_iter()
            .flat_map_iter(|bin| {
                bin.iter().map(|((runtime, _), idx)| {
                    let candidates: Vec<Candidate> = idx
                        .iter()
                        .map(|&i| {
                            let p = &prepared[i];
                            let instance = &self.instances[p.instance];
                            let r = self.resolved[p.instance].as_ref().expect("prepared");
                            Candidate {
                                target: &r.target,
                                harness: &instance.harness,
                                expected: &instance.expected,
                                module: &p.module,
                                policy: instance.policy,
                                code: &instance.code_hash,
                            }
                        })
                        .collect();
                    let verdicts = checkpath::check(&exec, runtime, &candidates)?;
                    Ok(idx.iter().copied().zip(verdicts).collect())
                })
            })
            .collect();
        let mut out: Vec<Option<Checked>> = vec![None; prepared.len()];
        for chunk in done {
            for (i, v) in chunk? {
                out[i] = Some(v);
            }
        }
        Ok(out
            .into_iter()
            .map(|v| v.expect("every candidate checked"))
            .collect())
    }

    /// Checks one candidate's text for instance `id`.
    pub fn check_one(&self, id: &str, candidate: &str) -> Result<Verdict> {
        match self.prepare(id, candidate)? {
            Ok(p) => Ok(self.check(&[p])?.remove(0).verdict),
            Err(verdict) => Ok(verdict),
        }
    }
}

/// A definition's text (decorators included), dedented.
fn dedented(text: &str) -> String {
    r2e_python::dedent(text, &r2e_python::strings_in(text))
}

/// Where an instance's function is now, and its environment; why it cannot be checked when its
/// repository changed or its environment is gone.
fn resolve(
    s: &Session,
    envs: &[EnvLine],
    roots: &mut BTreeMap<String, std::result::Result<(PathBuf, Runtime), String>>,
    instance: &Instance,
) -> Result<std::result::Result<Resolved, String>> {
    let dbase = &s.db;
    let repo_name = &instance.repo;
    let Some(ix) = s.repos.iter().position(|r| r.name(dbase) == repo_name) else {
        return Ok(Err(format!(
            "the pipeline has no repo `{repo_name}` any more"
        )));
    };
    let checkout = &s.checkouts[ix];
    // In an export, the folder of the repository's files stands for the commit.
    let expected = envs
        .iter()
        .find(|e| &e.repo == repo_name)
        .and_then(|e| e.image_files.as_ref())
        .unwrap_or(&instance.commit);
    if &checkout.identity != expected {
        return Ok(Err(format!(
            "repo `{repo_name}` changed since the dataset was built (it was `{}`, it is `{}`): run `r2e build`",
            instance.commit, checkout.identity
        )));
    }
    if !roots.contains_key(repo_name) {
        let root = checkout.materialize(&s.cache)?;
        let runtime = envs
            .iter()
            .find(|e| &e.repo == repo_name)
            .and_then(|e| crate::stages::environment::runtime_of(&s.cache, e, &root))
            .ok_or_else(|| {
                format!("the environment of repo `{repo_name}` is not built: run `r2e build`")
            });
        roots.insert(repo_name.clone(), runtime.map(|r| (root, r)));
    }
    let (root, runtime) = match &roots[repo_name] {
        Ok(found) => found.clone(),
        Err(e) => return Ok(Err(e.clone())),
    };
    let repo = s.repos[ix];
    let path = &instance.path;
    let Some(&file) = repo.files(dbase).iter().find(|f| f.path(dbase) == path) else {
        return Ok(Err(format!(
            "repo `{repo_name}` has no file `{path}` any more"
        )));
    };
    let summary = db::parse_file(dbase, file)
        .clone()
        .map_err(Error::Internal)?;
    let source = db::source_text(dbase, file).clone().map_err(Error::env)?;
    let rows = db::file_functions(dbase, file, s.settings);
    let Some(row) = rows.iter().find(|r| r.id == instance.id) else {
        return Ok(Err(format!("`{}` is no longer in `{path}`", instance.id)));
    };
    let layout = &summary.layout.defs[row.def as usize];
    let module = db::module_index(dbase, repo)
        .module_name(file.ix(dbase))
        .to_owned();
    let mut target = Target::new(
        &root,
        path,
        module,
        &instance.qualname,
        (layout.start_line, layout.end_line),
    )
    .hiding(&checkout.masked);
    if runtime.image.is_some() {
        // The checkout's files are in the environment image, at the runtime's `repo`.
        target = target.relocated(&runtime.repo);
    }
    target.kind = row.kind;
    Ok(Ok(Resolved {
        host_root: root,
        target,
        source,
        def: row.def as usize,
        summary,
        runtime,
    }))
}
