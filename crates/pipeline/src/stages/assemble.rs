//! Stage `assemble`: each candidate's harness record, the selection of benchmark instances
//! (valid harnesses whose coverage reaches `[select] min_branch_coverage`), and the dataset's
//! manifest. (`[select] created_after` leaves functions out before any harness is made for
//! them: `engine::dataset`.)

use std::sync::Arc;

use super::candidate::Candidate;
use super::checkout::Checkout;
use super::environment::Env;
use super::validate::Validation;
use r2e_core::config::Config;
use r2e_core::error::{Error, Result};
use r2e_core::hash::Hash;
use r2e_core::records::{
    FailureClass, Generator, HarnessFrom, HarnessRecord, Instance, MANIFEST_FORMAT, Manifest,
    ManifestInstance, ManifestRepo, MutantCount, MutationScore, SpecSource, Spent,
};

/// A harness with its validation, from whichever generator wrote it.
pub struct Written {
    pub harness: String,
    pub validation: Validation,
    /// Whether the validation (or a request) ran now.
    pub fresh: bool,
    pub generator: Generator,
    /// `hybrid`: which harness won.
    pub from: Option<HarnessFrom>,
    /// The model requests the harness needed, for the model-driven generators.
    pub spent: Option<Spent>,
    /// What the explorer said of the built-in harness's tests (none for a model's alone).
    pub explorer: ExplorerNotes,
    /// The dataset's mutation score of the harness (stage `mutate`, valid harnesses).
    pub mutants: Option<MutationScore>,
}

/// What the explorer says of the harness it wrote, for its record.
#[derive(Clone, Copy, Debug, Default)]
pub struct ExplorerNotes {
    /// What its tests kill of the explorer's own mutants.
    pub mutants: Option<MutantCount>,
    /// The explorer stopped at `[generate] time_limit_seconds`: the tests are those found by
    /// then, which depends on the machine's speed.
    pub time_limit_hit: bool,
}

/// A candidate's harness record and, when selected, its instance.
pub struct Done {
    pub record: HarnessRecord,
    pub instance: Option<Instance>,
    /// A selected candidate and its validation, for refinement.
    pub selected: Option<Box<(Candidate, Validation)>>,
}

impl Done {
    fn record(c: &Candidate, generator: Generator, v: Option<&Validation>) -> HarnessRecord {
        HarnessRecord {
            id: c.id.clone(),
            generator,
            valid: v.map(|v| v.valid),
            tests: v.map(|v| v.tests),
            branches: v.map(|v| v.branches),
            branch_coverage: v.and_then(|v| v.branch_coverage),
            line_coverage: v.and_then(|v| v.line_coverage),
            failure_class: v.and_then(|v| v.failure_class),
            failure_message: v.and_then(|v| v.failure_message.clone()),
            in_file: c.in_file,
            harness_from: None,
            llm: None,
            refine: None,
            explorer_mutants: None,
            explorer_time_limit_hit: false,
            no_tests: v.and_then(crate::stages::validate::no_tests),
        }
    }

    /// A candidate without a harness, for this reason.
    pub fn invalid(
        c: &Candidate,
        generator: Generator,
        class: FailureClass,
        message: String,
    ) -> Done {
        Done {
            record: Done::record(c, generator, Some(&Validation::failed(class, message))),
            instance: None,
            selected: None,
        }
    }

    /// A candidate the model wrote no harness for.
    pub fn model_failure(c: &Candidate, generator: Generator, v: Validation, spent: Spent) -> Done {
        let mut done = Done::invalid(
            c,
            generator,
            v.failure_class.unwrap_or(FailureClass::Other),
            v.failure_message.unwrap_or_default(),
        );
        done.record.llm = Some(spent);
        done
    }

    /// A candidate whose harness the build did not validate (`--until generate`).
    pub fn unvalidated(c: &Candidate) -> Done {
        Done {
            record: Done::record(c, Generator::Builtin, None),
            instance: None,
            selected: None,
        }
    }
}

/// A validated harness's record and, when it is selected, its instance.
pub fn select(cfg: &Config, c: Candidate, env: &Arc<Env>, w: Written) -> Done {
    let v = w.validation;
    let mut record = Done::record(&c, w.generator, Some(&v));
    record.harness_from = w.from;
    record.llm = w.spent;
    record.explorer_mutants = w.explorer.mutants;
    record.explorer_time_limit_hit = w.explorer.time_limit_hit;
    let strong = w
        .mutants
        .as_ref()
        .is_none_or(|m| m.score() >= cfg.select.min_mutation_score);
    let selected = v.valid && v.coverage() >= cfg.select.min_branch_coverage && strong;
    let instance = selected.then(|| Instance {
        id: c.id.clone(),
        repo: c.repo.clone(),
        commit: c.commit.clone(),
        path: c.path.clone(),
        qualname: c.qualname.clone(),
        docstring: c.docstring.clone(),
        spec: c.docstring.clone(),
        spec_source: SpecSource::Docstring,
        context: c.context.clone(),
        problem: c.problem.render(c.docstring.as_deref()),
        reference: c.problem.reference(),
        harness_hash: Hash::of_bytes(w.harness.as_bytes()).to_hex(),
        harness: w.harness,
        tests: v.tests,
        branch_coverage: v.branch_coverage,
        line_coverage: v.line_coverage,
        env_lock: env.record.lock_hash.clone(),
        expected: v.expected.clone(),
        policy: cfg.validate.policy(),
        code_hash: r2e_core::hash::Hash::of_key(&c.code).to_hex(),
        deps: c.deps,
        tokens: c.tokens,
        in_file: c.in_file,
        mutants: w.mutants,
        stability: v.stability.clone(),
        image: None,
        created_at: c.created_at.clone(),
        changed_at: c.changed_at.clone(),
    });
    Done {
        record,
        instance,
        selected: selected.then(|| Box::new((c, v))),
    }
}

/// `manifest.json`: the dataset version (blake3 over the instances and the settings that made
/// them), the repos with their commits, and each instance's hash. No times, no absolute paths.
/// Returns the version and the file's bytes.
pub fn manifest(
    cfg: &Config,
    checkouts: &[Arc<Checkout>],
    instances: &[(String, Vec<u8>)],
) -> Result<(String, Vec<u8>)> {
    let settings = Hash::of_key(&(
        &cfg.extract,
        &cfg.context,
        &cfg.generate,
        &cfg.validate,
        &cfg.select,
        env!("CARGO_PKG_VERSION"),
    ));
    let mut listed: Vec<ManifestInstance> = instances
        .iter()
        .map(|(id, line)| ManifestInstance {
            id: id.clone(),
            hash: Hash::of_bytes(line).to_hex(),
        })
        .collect();
    listed.sort_by(|a, b| (&a.id, &a.hash).cmp(&(&b.id, &b.hash)));
    let mut h = blake3::Hasher::new();
    h.update(&settings.0);
    for i in &listed {
        h.update(i.id.as_bytes());
        h.update(&[0]);
        h.update(i.hash.as_bytes());
    }
    let version = h.finalize().to_hex().to_string();
    let manifest = Manifest {
        format: MANIFEST_FORMAT.into(),
        version: version.clone(),
        r2e: env!("CARGO_PKG_VERSION").into(),
        settings_hash: settings.to_hex(),
        repos: checkouts
            .iter()
            .map(|c| ManifestRepo {
                name: c.name.clone(),
                commit: c.identity.clone(),
                rev: c.rev.clone(),
                license: r2e_core::license::detect(|path| {
                    let bytes = c.read_declaration(path).ok()??;
                    String::from_utf8(bytes).ok()
                }),
            })
            .collect(),
        instances: listed,
    };
    let mut bytes = serde_json::to_vec_pretty(&manifest).map_err(Error::internal)?;
    bytes.push(b'\n');
    Ok((version, bytes))
}
