//! Every action key, in one place: a named, documented struct per action kind, holding every
//! input that shapes the action's result, and nothing else (no absolute path, no time, no
//! mtime). `docs/caching.md` lists each key's inputs; the rule is sccache's: change an input,
//! bump the bucket's version (`cache::Bucket`).
//!
//! A key is hashed with blake3 over its bucket's folder and its canonical JSON form (fields in
//! declaration order), so a key's hash changes only when its contents or its shape change.

use serde::{Deserialize, Serialize};

use crate::cache::{ActionKey, Bucket};
use crate::hash::Hash;
use crate::records::FunctionKind;
use crate::records::{CallSiteArgs, CaptureTarget};

/// The parser and the summary format: bump `SUMMARY_FORMAT` when `python::summary` or what the
/// summarizer records changes.
pub const PARSER: &str = "ruff_python_parser=0.0.10";
pub const SUMMARY_FORMAT: u32 = 8;

/// Stage `parse`: a module summary per source content.
#[derive(Clone, Debug, Serialize)]
pub struct ParseKey {
    pub parser: &'static str,
    pub summary_format: u32,
    /// The content hash of the file's bytes (blake3; for a git blob, of its object id).
    pub content: Hash,
}

impl ParseKey {
    pub fn new(content: Hash) -> ParseKey {
        ParseKey {
            parser: PARSER,
            summary_format: SUMMARY_FORMAT,
            content,
        }
    }
}

impl ActionKey for ParseKey {
    const BUCKET: Bucket = Bucket::Parse;
}

/// Stage `parse`, many files at once: the outcomes (as [`ParseKey`]'s) of the files one build
/// parsed in one repository, in one entry (`packs::ParsePack`), so that a cold build writes one
/// file instead of one per source file. `engine::memo::PackList` records a repository's
/// packs; a file's own [`ParseKey`] entry is read first.
#[derive(Clone, Debug, Serialize)]
pub struct ParsePackKey {
    pub parser: &'static str,
    pub summary_format: u32,
    /// blake3 over the content hashes of its files, sorted.
    pub contents: Hash,
}

impl ActionKey for ParsePackKey {
    const BUCKET: Bucket = Bucket::ParsePack;
}

/// The persisted analysis of one repository (`engine::memo`): where it is found. Unlike an
/// action key, it names a place, not a result: each build of the same repository under the same
/// settings replaces the entry, and what the entry holds is reused only where the inputs it
/// records (every file's content hash, interface hash and scope) still hash the same. Bump
/// `ANALYSIS_FORMAT` when what `engine::memo` stores, or how it is computed, changes.
#[derive(Clone, Debug, Serialize)]
pub struct AnalysisKey<'a> {
    pub format: u32,
    /// The r2e that computed it (`engine::build_identity`: its version and its executable's
    /// size and modification time): the filters, name resolution, contexts and token counts
    /// are its code, so another build of r2e analyses again.
    pub analyzer: String,
    pub parser: &'static str,
    pub summary_format: u32,
    /// The repository's name and where it comes from (its folder, or its URL).
    pub repo: &'a str,
    pub source: String,
    /// `files`: the parse stage's outcomes; `dataset`: extraction and slices under the settings.
    pub part: &'static str,
    /// `[extract]` and `[context]` (`dataset` only).
    pub extract: Option<&'a crate::config::ExtractConfig>,
    pub context: Option<&'a crate::config::ContextConfig>,
}

pub const ANALYSIS_FORMAT: u32 = 3;

impl ActionKey for AnalysisKey<'_> {
    const BUCKET: Bucket = Bucket::Analysis;
}

/// The version of function dating (`stages::dating`): bump it when what makes a body the same
/// (the summary's `code_hash`), how moves and renames are followed, or the history walked
/// changes.
pub const DATING_ALGORITHM: u32 = 1;

/// The state of `stages::dating`'s walk of a repository's history at one commit (each file's
/// definitions with their bodies and dates, from which `dates::Dates` is read): the history
/// below a commit never changes, so the commit names it. Not in the key: the
/// repository's name or URL (the same commit has the same history wherever it is fetched).
#[derive(Clone, Debug, Serialize)]
pub struct DatingKey<'a> {
    /// `DATING_ALGORITHM`.
    pub algorithm: u32,
    /// What parses each version of a file and hashes its definitions' bodies.
    pub parser: &'static str,
    pub summary_format: u32,
    /// The commit's full sha.
    pub commit: &'a str,
}

impl<'a> DatingKey<'a> {
    pub fn new(commit: &'a str) -> DatingKey<'a> {
        DatingKey {
            algorithm: DATING_ALGORITHM,
            parser: PARSER,
            summary_format: SUMMARY_FORMAT,
            commit,
        }
    }
}

impl ActionKey for DatingKey<'_> {
    const BUCKET: Bucket = Bucket::Dates;
}

/// The candidate extraction's version: bump it when what `stages::answer::candidate` takes out
/// of an answer changes (its code, or `python::dedent`, which it uses).
pub const EXTRACTOR: u32 = 2;

/// The installer that actually builds environments, and its version.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct InstallerId {
    /// `uv` or `pip`.
    pub name: String,
    /// Its version, as it reports it.
    pub version: String,
}

/// Stage `env`: an environment, keyed on what determines the packages in it. Never on the
/// repository's source (its code is importable from its checkout at run time).
#[derive(Clone, Debug, Serialize)]
pub struct EnvKey {
    /// The version of the interpreter the environment is made from.
    pub python_version: String,
    /// The installer actually used, with its version (not the one configured: `auto` may be
    /// either).
    pub installer: InstallerId,
    /// The pinned coverage.py every environment gets.
    pub coverage: &'static str,
    /// The dependencies the repository declares, normalized and sorted.
    pub declared: Vec<String>,
    /// Third-party modules its code imports that no declaration names (not those it imports
    /// only where it runs without them: optional imports, other platforms' code).
    pub inferred: Vec<String>,
    /// How inferred modules become installed distributions (`stages::environment::INFERENCE`): the
    /// check that each distribution provides its module, and the uninstalling of one that
    /// does not.
    pub inference: u32,
    /// The distribution each inferred module is installed from when the environment lacks it
    /// (`stages::environment::provider`: the table of known names, the optional dependencies, else the
    /// module's own name; empty for none), in `inferred`'s order.
    pub providers: Vec<(String, String)>,
    /// The distributions its optional dependencies name (extras): an inferred module one of
    /// them provides is installed from it.
    pub optional: Vec<String>,
    /// `[env] extra_packages`.
    pub extra: Vec<String>,
    pub system_site_packages: bool,
    /// The index settings passed to installers (they decide what gets installed; certificates,
    /// proxies and timeouts do not).
    pub index: Vec<(String, String)>,
    /// `[env] exclude_newer`: the instant resolution sees the index as of (uv's
    /// `--exclude-newer`). Left out of the key when unset, so that keys made before it existed
    /// still name their environments.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exclude_newer: Option<String>,
}

impl ActionKey for EnvKey {
    const BUCKET: Bucket = Bucket::Envs;
}

/// Stage `env`, the project layer: the repository built as a wheel by its own build backend
/// and installed on top of its environment (`stages::environment::project`). Keyed on what the build
/// reads, never on the pure-Python sources (they are overlaid from the checkout at run time, so
/// that a body edit rebuilds nothing).
#[derive(Clone, Debug, Serialize)]
pub struct ProjectKey {
    /// The layer's format: what is built, how it is stripped and what its record holds.
    pub format: u32,
    /// The environment it is installed on (its `EnvKey`'s hash): its interpreter, installer
    /// and dependencies.
    pub env: String,
    /// The files the build reads, each with its content hash, sorted by path: the build
    /// declarations (`pyproject.toml`, `setup.py`, `setup.cfg`, `PKG-INFO`, `MANIFEST.in`,
    /// build hooks), an in-tree backend's folder, and extension sources (C, C++, Cython, Rust).
    pub inputs: Vec<(String, Hash)>,
}

impl ActionKey for ProjectKey {
    const BUCKET: Bucket = Bucket::Projects;
}

/// What a function's results depend on of its code and its environment: its own code and its
/// slice's, the code that runs when its module is imported, and the environment's lock.
/// Positions, comments and unrelated functions do not count.
#[derive(Clone, Debug, PartialEq, Serialize)]
pub struct CodeKey {
    pub module: String,
    pub qualname: String,
    pub kind: FunctionKind,
    /// The function's code hash (its tokens: blind to comments and formatting).
    pub code: Hash,
    /// The code hashes of its slice, sorted.
    pub slice: Vec<Hash>,
    /// The code that runs when its module is imported: the module-level code of the module, of
    /// its packages' `__init__` files and of every repository module they import at module
    /// level, and the slices of their globals (`db::import_key`).
    pub import_time: Hash,
    /// The environment's lock hash (its `pip freeze`): a rebuilt environment with other
    /// packages is another key.
    pub env_lock: String,
    /// The project layer's key (`ProjectKey`'s hash), empty without one: the project built
    /// otherwise (another backend, a new version, changed extensions) is another key.
    pub project: String,
}

/// The sandbox backend as the keys of actions that run code hold it: which backend, and for
/// Docker the version of its recipe (`docker-2`), serialized as the names keys always held.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum SandboxBackend {
    /// bubblewrap on this machine (`sandbox::local`).
    #[serde(rename = "local")]
    Local,
    /// A container of the base image (`sandbox::docker`).
    #[serde(rename = "docker-2")]
    Docker,
    /// Answers from a closure, in tests (`sandbox::fake`).
    #[serde(rename = "fake")]
    Fake,
}

/// The settings of a sandbox that shape what code run in it does.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct SandboxKey {
    /// `local` (bubblewrap or none) or `docker`.
    pub backend: SandboxBackend,
    /// Whether code runs isolated (without isolation it sees more of the machine).
    pub isolated: bool,
    /// Memory in MiB, processes at once, and the largest file in MiB a job may write.
    pub memory_mib: u64,
    pub processes: u64,
    pub file_size_mib: u64,
    /// The docker backend's `[sandbox] base_image`, by name (absent without one, so that the
    /// keys of builds without one are unchanged): the system code sees.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_image: Option<String>,
}

/// The settings of the built-in generator.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct ExplorerSettings {
    /// Executions of the function the explorer may spend; decides what is kept.
    pub budget: u32,
    /// The stopping rule (`[generate] plateau`): executions that keep nothing after which the
    /// search and the hunt stop (v4 added it).
    pub plateau: u32,
    pub seed: u64,
    pub max_tests: u32,
    /// Milliseconds one call may take before it is abandoned.
    pub per_call_timeout_ms: u64,
    /// A safety stop for one exploration, recorded when it fires.
    pub time_limit_seconds: u64,
}

/// Stage `generate` (built-in): the explorer's harness for one function.
#[derive(Clone, Debug, Serialize)]
pub struct GenerateKey<'a> {
    /// The embedded explorer scripts (`py::EXPLORER`).
    pub scripts: Hash,
    pub code: &'a CodeKey,
    pub settings: &'a ExplorerSettings,
    /// Literal arguments at the function's call sites, likeliest first.
    pub call_sites: &'a [CallSiteArgs],
    pub sandbox: &'a SandboxKey,
}

impl ActionKey for GenerateKey<'_> {
    const BUCKET: Bucket = Bucket::Generate;
}

/// The settings part of a [`GenerateKey`]: every field but the function's own (`code`,
/// `call_sites`). Stage `generate` makes its keys from it ([`GenerateSettings::key`]), and the
/// build records it for `r2e status` to compare field by field, so the two cannot drift. It is
/// a view, never hashed: its JSON names the explorer's settings `explorer` (the key's
/// `settings`) and shows hashes as hex.
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct GenerateSettings {
    #[serde(serialize_with = "crate::hash::hex")]
    pub scripts: Hash,
    pub explorer: ExplorerSettings,
    pub sandbox: SandboxKey,
}

impl GenerateSettings {
    /// The key of one function's exploration under these settings.
    pub fn key<'a>(&'a self, code: &'a CodeKey, call_sites: &'a [CallSiteArgs]) -> GenerateKey<'a> {
        GenerateKey {
            scripts: self.scripts,
            code,
            settings: &self.explorer,
            call_sites,
            sandbox: &self.sandbox,
        }
    }
}

/// The capture's settings (`[generate] capture_*`, and the script's fixed bounds).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize)]
pub struct CaptureSettings {
    /// Calls kept per function.
    pub per_target: u32,
    /// The longest argument text kept, in bytes.
    pub max_bytes: u32,
    pub time_limit_seconds: u64,
}

/// Stage `generate`'s capture (built-in): the arguments a repository's own test files pass to
/// its candidates, recorded in one run of them (`r2e_capture.py`).
#[derive(Clone, Debug, Serialize)]
pub struct CaptureKey<'a> {
    /// The embedded capture scripts (`py::CAPTURE`).
    pub scripts: Hash,
    /// The checkout's hash of the files read (its `tree`): the tests and the code they run.
    pub tree: &'a str,
    /// The lock hash of the environment the tests run in (the capture's environment, with what
    /// the test suite needs: `stages::environment::test_deps`; the repository's own where
    /// there is none), and the project layer's key, as in `CodeKey`.
    pub env_lock: &'a str,
    pub project: &'a str,
    /// The test files run, relative to the repository's root, in order.
    pub tests: &'a [String],
    /// The functions whose calls are recorded, sorted.
    pub targets: &'a [CaptureTarget],
    pub settings: &'a CaptureSettings,
    pub sandbox: &'a SandboxKey,
}

impl ActionKey for CaptureKey<'_> {
    const BUCKET: Bucket = Bucket::Capture;
}

/// Stage `validate`: the raw runs of one harness in self-equivalence mode. The verdict is
/// computed from the runs when they are read (`stages::validate::classify`), so changing the
/// classification needs no new key.
#[derive(Clone, Debug, Serialize)]
pub struct ValidateKey<'a> {
    /// The embedded runner scripts (`py::RUNNER`).
    pub scripts: Hash,
    pub code: &'a CodeKey,
    /// The harness text's hash.
    pub harness: Hash,
    /// How many times it runs, each in a fresh process.
    pub runs: u32,
    /// Seconds one run may take.
    pub run_timeout_seconds: u64,
    pub sandbox: &'a SandboxKey,
}

impl ActionKey for ValidateKey<'_> {
    const BUCKET: Bucket = Bucket::Validate;
}

/// The settings part of a [`ValidateKey`]: every field but the function's and the harness's
/// (`code`, `harness`). Stage `validate` makes its keys from it ([`ValidateSettings::key`]);
/// the build records it for `r2e status`, as [`GenerateSettings`].
#[derive(Clone, Debug, PartialEq, Eq, Serialize)]
pub struct ValidateSettings {
    #[serde(serialize_with = "crate::hash::hex")]
    pub scripts: Hash,
    pub runs: u32,
    pub run_timeout_seconds: u64,
    pub sandbox: SandboxKey,
}

impl ValidateSettings {
    /// The key of one harness's validation under these settings.
    pub fn key<'a>(&'a self, code: &'a CodeKey, harness: Hash) -> ValidateKey<'a> {
        ValidateKey {
            scripts: self.scripts,
            code,
            harness,
            runs: self.runs,
            run_timeout_seconds: self.run_timeout_seconds,
            sandbox: &self.sandbox,
        }
    }
}

/// A candidate's check: the raw run of one candidate module against one instance's harness,
/// in candidate mode. The verdict is judged from the run when it is read (against the
/// reference's recorded calls, under the instance's policy), so the key holds what shapes the
/// run, and the same code written by two models is checked once.
#[derive(Clone, Debug, Serialize)]
pub struct CheckKey<'a> {
    /// The embedded runner scripts (`py::RUNNER`).
    pub scripts: Hash,
    /// The function's code key (`CodeKey`, hashed): its code, slice, import-time code and the
    /// environment's lock.
    pub code: &'a str,
    /// The harness text's hash.
    pub harness: Hash,
    /// The candidate module's whole text (the original module with the candidate spliced in).
    pub module: Hash,
    /// Seconds the run may take.
    pub run_timeout_seconds: u64,
    pub sandbox: &'a SandboxKey,
}

impl ActionKey for CheckKey<'_> {
    const BUCKET: Bucket = Bucket::Check;
}

/// A candidate's repeated check: `runs` raw runs of one candidate module against one
/// instance's harness, in candidate mode, each in a fresh process (run 0 in the tests' natural
/// order, run n shuffled with seed n). What a bug-fix task's broken state is judged on: each of
/// its FAIL_TO_PASS tests must fail, and each PASS_TO_PASS test pass, in every run.
#[derive(Clone, Debug, Serialize)]
pub struct RepeatKey<'a> {
    /// The one check's key (its runner, code, harness, module, timeout and sandbox).
    pub check: &'a CheckKey<'a>,
    /// How many runs (`[validate] repeats`).
    pub runs: u32,
}

impl ActionKey for RepeatKey<'_> {
    const BUCKET: Bucket = Bucket::Repeat;
}

/// Stage `bugfix`: which of the project's own tests fail on one state of a module (a broken
/// state, or the module as it is), run under pytest in the capture's environment
/// (`r2e_capture.py`'s second mode). The value stored: the failing tests' node ids, sorted.
#[derive(Clone, Debug, Serialize)]
pub struct ProjectTestsKey<'a> {
    /// The embedded capture scripts (`py::CAPTURE`).
    pub scripts: Hash,
    /// As in `CaptureKey`: the checkout's files, the capture's environment, the project layer.
    pub tree: &'a str,
    pub env_lock: &'a str,
    pub project: &'a str,
    /// The module whose import the state replaces.
    pub module: &'a str,
    /// The tests run (pytest node ids), in order.
    pub tests: &'a [String],
    /// The state's text hash; `None`: the module as the checkout has it.
    pub state: Option<Hash>,
    /// Seconds the tests may run.
    pub time_limit_seconds: u64,
    pub sandbox: &'a SandboxKey,
}

impl ActionKey for ProjectTestsKey<'_> {
    const BUCKET: Bucket = Bucket::ProjectTests;
}

/// A model request: the API kind, the model, every sampling parameter, the rendered messages
/// and the sample index. Never the base URL or the API key.
#[derive(Clone, Debug, Serialize)]
pub struct LlmKey<'a> {
    pub request: &'a crate::model::Request,
}

impl ActionKey for LlmKey<'_> {
    const BUCKET: Bucket = Bucket::Llm;
}

/// A model request whose prompt the server refused as longer than the model's context window:
/// the same request as `LlmKey` (its own bucket keeps the two apart), stored with the server's
/// message, so that no later build asks it again.
#[derive(Clone, Debug, Serialize)]
pub struct RefusalKey<'a> {
    pub request: &'a crate::model::Request,
}

impl ActionKey for RefusalKey<'_> {
    const BUCKET: Bucket = Bucket::Refusal;
}

/// Stage `evaluate`: the candidate taken out of one model answer (`stages::answer::candidate`:
/// the `def` of the target's name with the answer's imports, or none). Not in the key: the
/// model, the request, the sample or the round, so the same answer text for the same function
/// is taken apart once, whichever model wrote it; nor the function's kind, which its qualname
/// says (a method's names its class, all the extractor reads of it).
#[derive(Clone, Debug, Serialize)]
pub struct AnswerKey<'a> {
    /// `EXTRACTOR`, the extraction's version.
    pub extractor: u32,
    /// blake3 of the answer's text, as the stage reads it (for the completions API, the
    /// prompt's open code block followed by the continuation).
    pub answer: Hash,
    /// The target's qualname: the `def`'s name and, for a method, its class.
    pub qualname: &'a str,
}

impl ActionKey for AnswerKey<'_> {
    const BUCKET: Bucket = Bucket::Answer;
}

impl crate::model::Request {
    /// The request's cache key, as a hash (distinct requests, distinct hashes).
    pub fn key(&self) -> Hash {
        LlmKey { request: self }.hash()
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn code() -> CodeKey {
        CodeKey {
            module: "pkg.ops".into(),
            qualname: "scale".into(),
            kind: FunctionKind::Function,
            code: Hash::of_bytes(b"code"),
            slice: vec![Hash::of_bytes(b"slice")],
            import_time: Hash::of_bytes(b"import"),
            env_lock: "lock".into(),
            project: String::new(),
        }
    }

    fn sandbox(base_image: Option<&str>) -> SandboxKey {
        SandboxKey {
            backend: SandboxBackend::Local,
            isolated: true,
            memory_mib: 2048,
            processes: 64,
            file_size_mib: 64,
            base_image: base_image.map(str::to_owned),
        }
    }

    /// `exclude_newer` names other environments when set, and leaves the keys made before it
    /// existed (serialized without it) as they were.
    #[test]
    fn exclude_newer_is_in_the_environment_key_only_when_set() {
        let key = |exclude_newer: Option<&str>| EnvKey {
            python_version: "3.11.7".into(),
            installer: InstallerId {
                name: "uv".into(),
                version: "0.13.9".into(),
            },
            coverage: "coverage==7.6.1",
            declared: vec!["dep".into()],
            inferred: Vec::new(),
            inference: 1,
            providers: Vec::new(),
            optional: Vec::new(),
            extra: Vec::new(),
            system_site_packages: false,
            index: Vec::new(),
            exclude_newer: exclude_newer.map(str::to_owned),
        };
        let unset = serde_json::to_value(key(None)).unwrap();
        assert!(unset.get("exclude_newer").is_none(), "{unset}");
        assert_eq!(unset.as_object().unwrap().len(), 11);
        let pinned = key(Some("2025-06-01T00:00:00Z"));
        assert_eq!(
            serde_json::to_value(&pinned).unwrap()["exclude_newer"],
            "2025-06-01T00:00:00Z"
        );
        assert_ne!(pinned.hash(), key(None).hash());
        assert_ne!(pinned.hash(), key(Some("2025-07-01T00:00:00Z")).hash());
    }

    /// The hashes of the harness and model keys, pinned: a change of a key's shape or of how
    /// it is serialized shows here (and needs its bucket's version bumped).
    #[test]
    fn the_hashes_of_the_harness_and_model_keys_are_pinned() {
        let code = code();
        let explorer = ExplorerSettings {
            budget: 1500,
            plateau: 300,
            seed: 0,
            max_tests: 12,
            per_call_timeout_ms: 1000,
            time_limit_seconds: 60,
        };
        let call_sites = [CallSiteArgs {
            args: vec!["1".into()],
            kwargs: vec![("k".into(), "2".into())],
            receiver: None,
            then: Vec::new(),
        }];
        let mut hashes = Vec::new();
        for base_image in [None, Some("debian:bookworm-slim")] {
            let sandbox = sandbox(base_image);
            let generate = GenerateKey {
                scripts: Hash::of_bytes(b"explorer"),
                code: &code,
                settings: &explorer,
                call_sites: &call_sites,
                sandbox: &sandbox,
            };
            let validate = ValidateKey {
                scripts: Hash::of_bytes(b"runner"),
                code: &code,
                harness: Hash::of_bytes(b"harness"),
                runs: 2,
                run_timeout_seconds: 60,
                sandbox: &sandbox,
            };
            // The stages make their keys from the settings part: the same keys.
            let generate_settings = GenerateSettings {
                scripts: Hash::of_bytes(b"explorer"),
                explorer: explorer.clone(),
                sandbox: sandbox.clone(),
            };
            let validate_settings = ValidateSettings {
                scripts: Hash::of_bytes(b"runner"),
                runs: 2,
                run_timeout_seconds: 60,
                sandbox: sandbox.clone(),
            };
            assert_eq!(
                generate_settings.key(&code, &call_sites).hash(),
                generate.hash()
            );
            assert_eq!(
                validate_settings
                    .key(&code, Hash::of_bytes(b"harness"))
                    .hash(),
                validate.hash()
            );
            hashes.push(generate.hash().to_hex());
            hashes.push(validate.hash().to_hex());
        }
        let request = crate::model::Request {
            api: crate::config::Api::Chat,
            model: "m".into(),
            temperature: 0.0,
            max_tokens: 1024,
            messages: vec![
                crate::model::Message::system("system"),
                crate::model::Message::user("prompt"),
            ],
            sample: 0,
        };
        let settings = crate::model::RequestSettings {
            api: crate::config::Api::Chat,
            model: "m".into(),
            temperature: 0.0,
            max_tokens: 1024,
        };
        assert_eq!(
            LlmKey {
                request: &settings.request("system", "prompt".into())
            }
            .hash(),
            LlmKey { request: &request }.hash()
        );
        hashes.push(LlmKey { request: &request }.hash().to_hex());
        assert_eq!(hashes, PINNED);
    }

    /// A repeated check's key is its check's key and the number of runs: pinned, and another
    /// number of runs or another check is another key.
    #[test]
    fn the_hash_of_the_repeat_key_is_pinned() {
        let sandbox = sandbox(None);
        let check = CheckKey {
            scripts: Hash::of_bytes(b"runner"),
            code: "code",
            harness: Hash::of_bytes(b"harness"),
            module: Hash::of_bytes(b"module"),
            run_timeout_seconds: 2,
            sandbox: &sandbox,
        };
        let key = RepeatKey {
            check: &check,
            runs: 3,
        };
        assert_eq!(
            key.hash().to_hex(),
            "d2536ba19717aee51bda576751020a94dc057329dd99de1541d1f9a12a70845e"
        );
        assert_ne!(
            key.hash(),
            RepeatKey {
                check: &check,
                runs: 2
            }
            .hash()
        );
        let other = CheckKey {
            module: Hash::of_bytes(b"another"),
            ..check.clone()
        };
        assert_ne!(
            key.hash(),
            RepeatKey {
                check: &other,
                runs: 3
            }
            .hash()
        );
    }

    const PINNED: [&str; 5] = [
        "f9acc89f9b7b1a6f519339e5ceb30e6151ec2ed84c839ed508a52b1cc122c626",
        "e2c05449433c18500c8d8188fca04ef6665708363db2ebad4deef086aa4a43ee",
        "7e53936a218d1970a8e399c675e364ed600acde53f08fb0c21a0365f19dc2992",
        "8d65c889db13f19825a8ab10de4b908a580fd7af20f651b4571e2b20c056f1dc",
        "87db9d14313d21929d58e60027cd6e49f8a7eac074eff5070cfb13ea44c3edb7",
    ];

    #[test]
    fn the_sandbox_backend_is_keyed_by_the_names_keys_always_held() {
        // Keys are hashed as JSON: the enum must serialize as the strings the keys held before
        // it, so that no action cached under them is lost.
        for (backend, name) in [
            (SandboxBackend::Local, "local"),
            (SandboxBackend::Docker, "docker-2"),
            (SandboxBackend::Fake, "fake"),
        ] {
            assert_eq!(
                serde_json::to_string(&backend).unwrap(),
                format!("\"{name}\"")
            );
            assert_eq!(Hash::of_key(&backend), Hash::of_key(name));
        }
    }

    #[test]
    fn keys_of_different_buckets_never_collide() {
        // The same struct contents under two buckets hash apart: the bucket is hashed in.
        #[derive(Serialize)]
        struct A(u32);
        impl ActionKey for A {
            const BUCKET: Bucket = Bucket::Generate;
        }
        #[derive(Serialize)]
        struct B(u32);
        impl ActionKey for B {
            const BUCKET: Bucket = Bucket::Validate;
        }
        assert_ne!(A(1).hash(), B(1).hash());
        assert_eq!(A(1).hash(), A(1).hash());
        assert_ne!(
            ParseKey::new(Hash::of_bytes(b"x")).hash(),
            ParseKey::new(Hash::of_bytes(b"y")).hash()
        );
    }
}

/// A GitHub API request of `r2e curate` (`Bucket::Github`): its URL, which holds the API's base,
/// the path and the query (the search terms, the page). Never the token, nor any header: the
/// entry is the answer's `ETag` and body, revalidated with `If-None-Match` on every use, so a
/// stored answer is never used without the server saying it is current.
#[derive(Clone, Debug, Serialize)]
pub struct GithubKey<'a> {
    pub url: &'a str,
}

impl ActionKey for GithubKey<'_> {
    const BUCKET: Bucket = Bucket::Github;
}
