//! The real binary, as a user runs it: exit codes, messages, the `--json` summary, git repos.

use crate::common;
use assert_cmd::Command;
use common::Project;
use serde_json::Value;

fn r2e() -> Command {
    Command::cargo_bin("r2e").unwrap()
}

/// Runs `cmd`, which must exit with status 2 (bad input); returns its stderr.
fn stderr_of_bad_input(cmd: &mut Command) -> String {
    let out = cmd.assert().code(2).get_output().stderr.clone();
    String::from_utf8_lossy(&out).into_owned()
}

const SMALL: &str = r#"
//- m.py
K = 2

def helper(x):
    """Helper."""
    y = x + K
    return y

def user(x):
    """Uses helper."""
    y = helper(x)
    return y * 2
"#;

#[test]
fn json_summary_has_every_stage_and_exits_zero() {
    let p = Project::new(SMALL, "");
    let v = common::build_until_slice(&p.pipeline());
    assert_eq!(v["stages"]["env"]["executed"], 0, "not reached");
    for stage in ["checkout", "parse", "extract", "slice", "env"] {
        for k in ["executed", "cached", "failed"] {
            assert!(v["stages"][stage][k].is_u64(), "{stage}.{k} in {v}");
        }
    }
    assert_eq!(v["counts"]["candidates"], 2);
    assert_eq!(v["counts"]["repos"], 1);
    assert!(std::path::Path::new(v["output"].as_str().unwrap()).is_absolute());
    assert!(
        v["dataset_version"].is_null(),
        "no dataset before `assemble`"
    );

    // --until stops early: later stages are zero and there is no dataset version.
    let p2 = Project::new(SMALL, "");
    let out = r2e()
        .arg("build")
        .arg(p2.pipeline())
        .args(["--until", "parse", "--json"])
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["stages"]["slice"]["executed"], 0);
    assert_eq!(v["stages"]["parse"]["executed"], 1);
    assert!(v["dataset_version"].is_null());
}

#[test]
fn bad_config_names_file_line_and_column() {
    let p = Project::new(SMALL, "[contxt]\nstrategy = \"sliced\"\n");
    let assert = r2e()
        .arg("build")
        .arg(p.pipeline())
        .args(["--until", "slice"])
        .assert()
        .code(2);
    let err = String::from_utf8_lossy(&assert.get_output().stderr).into_owned();
    assert!(
        err.contains("pipeline.toml:8:2") && err.contains("unknown field `contxt`"),
        "{err}"
    );

    std::fs::write(p.pipeline(), "[[repo]]\npath = \"nowhere\"\n").unwrap();
    let err = stderr_of_bad_input(r2e().arg("build").arg(p.pipeline()));
    assert!(
        err.contains("pipeline.toml:2:8") && err.contains("nowhere` does not exist"),
        "{err}"
    );

    let err = stderr_of_bad_input(r2e().args(["build", "/no/such/pipeline.toml"]));
    assert!(
        err.contains("/no/such/pipeline.toml` does not exist"),
        "{err}"
    );
}

#[test]
fn git_repos_resolve_revisions_and_reject_unknown_ones() {
    let p = Project::new(SMALL, "");
    let repo = p.path().join("repo");
    let git = |args: &[&str]| {
        let ok = std::process::Command::new("git")
            .arg("-C")
            .arg(&repo)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .output()
            .unwrap();
        assert!(
            ok.status.success(),
            "{}",
            String::from_utf8_lossy(&ok.stderr)
        );
        String::from_utf8_lossy(&ok.stdout).trim().to_owned()
    };
    git(&["init", "-q", "-b", "main"]);
    git(&["add", "."]);
    git(&["commit", "-qm", "one"]);
    let first = git(&["rev-parse", "HEAD"]);
    std::fs::write(
        repo.join("extra.py"),
        "def more(x):\n    \"\"\"More.\"\"\"\n    y = x\n    return y\n",
    )
    .unwrap();
    git(&["add", "."]);
    git(&["commit", "-qm", "two"]);

    let toml = |rev: &str| format!("[[repo]]\ngit = \"repo\"\nrev = \"{rev}\"\nname = \"g\"\n");
    std::fs::write(p.pipeline(), toml(&first)).unwrap();
    let v = common::build_until_slice(&p.pipeline());
    assert_eq!(v["counts"]["files"], 1, "the first commit has one file");

    std::fs::write(p.pipeline(), toml("main")).unwrap();
    let v = common::build_until_slice(&p.pipeline());
    assert_eq!(
        v["counts"]["files"], 2,
        "the branch resolves to its newest commit"
    );
    assert_eq!(
        v["stages"]["parse"]["cached"], 1,
        "the unchanged file's parse is reused"
    );

    std::fs::write(p.pipeline(), toml("no-such-branch")).unwrap();
    let err = stderr_of_bad_input(r2e().arg("build").arg(p.pipeline()));
    assert!(
        err.contains("git rev `no-such-branch` does not exist"),
        "{err}"
    );
}

/// `r2e status` names the setting that changed, stage by stage: a filter, a harness setting,
/// a prompt edited.
#[test]
fn status_names_the_settings_that_changed() {
    // Refinement on (a provider on loopback that nothing asks: the build stops at `slice`).
    let p = Project::new(
        SMALL,
        "[providers.local]\nbase_url = \"http://127.0.0.1:9/v1\"\n\n\
         [refine]\nenabled = true\nprovider = \"local\"\nmodel = \"m\"\n",
    );
    common::build_until_slice(&p.pipeline());
    let status = || {
        let mut cmd = r2e();
        cmd.args(["status", "--until", "slice", "-p"])
            .arg(p.pipeline());
        cmd
    };
    let json = || common::stdout_json(status().arg("--json"));
    let v = json();
    assert_eq!(v["up_to_date"], true, "{v}");
    assert!(v.get("settings_changed").is_none(), "{v}");

    let pipeline = std::fs::read_to_string(p.pipeline()).unwrap();
    std::fs::write(
        p.pipeline(),
        format!("{pipeline}\n[extract]\nconnectivity = false\n\n[generate]\nbudget = 99\n"),
    )
    .unwrap();
    std::fs::create_dir_all(p.path().join("prompts")).unwrap();
    std::fs::write(
        p.path().join("prompts/specgen.j2"),
        "Write a spec for {{ code }}\n",
    )
    .unwrap();
    let v = json();
    assert_eq!(v["up_to_date"], false, "{v}");
    let changes = v["settings_changed"].as_array().unwrap();
    let stage = |name: &str| -> Vec<String> {
        changes
            .iter()
            .find(|c| c["stage"] == name)
            .unwrap_or_else(|| panic!("{name} in {v}"))["changed"]
            .as_array()
            .unwrap()
            .iter()
            .map(|s| s.as_str().unwrap().to_owned())
            .collect()
    };
    assert_eq!(stage("extract"), ["`connectivity`: true -> false"]);
    assert_eq!(stage("generate"), ["`explorer.budget`: 1500 -> 99"]);
    let refine = stage("refine");
    assert_eq!(refine.len(), 1, "{refine:?}");
    assert!(refine[0].starts_with("`prompt.specgen`: "), "{refine:?}");
    // Stages in build order; the text says the same.
    let order: Vec<&str> = changes
        .iter()
        .map(|c| c["stage"].as_str().unwrap())
        .collect();
    assert_eq!(order, ["extract", "generate", "refine"]);
    let text = String::from_utf8(status().assert().success().get_output().stdout.clone()).unwrap();
    assert!(
        text.contains("  generate: its settings changed: `explorer.budget`: 1500 -> 99\n"),
        "{text}"
    );
}

/// After a whole build with the hybrid generator (the built-in explorer, then a scripted model
/// on loopback), `status` names each edited setting by its place in the stage's keys: the
/// explorer's budget under `generate`, an edited prompt template under `generate` (the hashes
/// of its text before and after), and the verdict policy, which no key holds and under which
/// `validate` judges its stored runs again, under `validate`. Each time no other stage is named.
#[test]
fn status_names_the_key_fields_an_edit_changed_after_a_whole_build() {
    // The model answers with prose: no harness of its own, an answer all the same (stored).
    let (url, _asked, _) = common::server::serve(std::time::Duration::ZERO, |_, _| {
        (200, "", "I would rather not write tests.".into())
    });
    let p = Project::new(SMALL, "");
    let pipeline = |generate: &str, validate: &str| {
        std::fs::write(
            p.pipeline(),
            format!(
                "[project]\nname = \"t\"\n\n[[repo]]\npath = \"repo\"\nname = \"r\"\n\n\
                 [env]\ninstaller = \"pip\"\n\n[providers.local]\nbase_url = \"{url}\"\n\n\
                 [generate]\ngenerator = \"hybrid\"\nprovider = \"local\"\nmodel = \"scripted\"\n\
                 {generate}\n[validate]\n{validate}"
            ),
        )
        .unwrap();
    };
    pipeline("", "");
    let built = common::offline_build(p.path());
    assert!(
        built["stages"]["generate"]["executed"].as_u64() > Some(0),
        "{built}"
    );
    let status = || {
        let out = r2e()
            .args(["status", "-p"])
            .arg(p.pipeline())
            .envs(common::offline_env())
            .assert()
            .success()
            .get_output()
            .stdout
            .clone();
        String::from_utf8(out).unwrap()
    };
    // The settings' lines of the text: the stages named, each with what changed.
    let named = |text: &str| -> Vec<String> {
        text.lines()
            .filter(|l| l.contains(": its settings changed: ") || l.contains("recorded no"))
            .map(str::to_owned)
            .collect()
    };
    let text = status();
    assert!(text.contains("up to date"), "{text}");

    pipeline("budget = 99\n", "");
    assert_eq!(
        named(&status()),
        ["  generate: its settings changed: `explorer.budget`: 1500 -> 99"]
    );
    pipeline("capture_time_limit_seconds = 30\n", "");
    assert_eq!(
        named(&status()),
        ["  generate: its settings changed: `capture.time_limit_seconds`: 120 -> 30"]
    );

    pipeline("", "");
    let builtin = std::fs::read_to_string(
        std::path::Path::new(env!("CARGO_MANIFEST_DIR")).join("prompts/testgen_equivalence.j2"),
    )
    .unwrap();
    let edited = format!("Write careful tests.\n{builtin}");
    std::fs::create_dir_all(p.path().join("prompts")).unwrap();
    std::fs::write(p.path().join("prompts/testgen_equivalence.j2"), &edited).unwrap();
    let hash = |t: &str| r2e_core::hash::Hash::of_bytes(t.as_bytes()).to_hex();
    assert_eq!(
        named(&status()),
        [format!(
            "  generate: its settings changed: `prompt.testgen_equivalence`: \"{}\" -> \"{}\"",
            hash(&builtin),
            hash(&edited)
        )]
    );

    std::fs::remove_dir_all(p.path().join("prompts")).unwrap();
    assert!(status().contains("up to date"));
    pipeline("", "compare_exception_messages = true\n");
    let text = status();
    assert!(text.contains("a build would run:"), "{text}");
    assert_eq!(
        named(&text),
        ["  validate: its settings changed: `policy.compare_exception_messages`: false -> true"]
    );
}

/// The docker backend's `base_image` is part of every key that runs code: `status` names it for
/// the stages that run code. (No code runs here, so no daemon is needed.)
#[test]
fn status_names_a_changed_base_image() {
    let p = Project::new(
        SMALL,
        "[sandbox]\nbackend = \"docker\"\nbase_image = \"debian:bookworm-slim\"\n",
    );
    common::build_until_slice(&p.pipeline());
    let json = || {
        common::stdout_json(
            r2e()
                .args(["status", "--json", "--until", "slice", "-p"])
                .arg(p.pipeline()),
        )
    };
    assert_eq!(json()["up_to_date"], true);
    let pipeline = std::fs::read_to_string(p.pipeline()).unwrap();
    std::fs::write(
        p.pipeline(),
        pipeline.replace("debian:bookworm-slim", "debian:trixie-slim"),
    )
    .unwrap();
    let v = json();
    assert_eq!(v["up_to_date"], false, "{v}");
    for stage in ["generate", "validate"] {
        let changed = &v["settings_changed"]
            .as_array()
            .unwrap()
            .iter()
            .find(|c| c["stage"] == stage)
            .unwrap_or_else(|| panic!("{stage} in {v}"))["changed"];
        assert_eq!(
            changed,
            &serde_json::json!([
                "`sandbox.base_image`: \"debian:bookworm-slim\" -> \"debian:trixie-slim\""
            ]),
            "{stage}: {v}"
        );
    }
}

/// An interpreter that does not run: `status` says it cannot plan the environments, and still
/// answers the rest.
#[test]
fn status_without_an_interpreter_says_so() {
    let p = Project::new(SMALL, "[env]\npython = \"r2e-no-such-python\"\n");
    let v = common::stdout_json(r2e().args(["status", "--json", "-p"]).arg(p.pipeline()));
    assert!(
        v["env_unknown"]
            .as_str()
            .unwrap()
            .contains("r2e-no-such-python"),
        "{v}"
    );
    assert_eq!(v["parse"]["would_run"], 1, "{v}");
}

#[test]
fn status_and_explain() {
    let p = Project::new(SMALL, "");
    let out = r2e()
        .args(["status", "--json", "--until", "slice", "-p"])
        .arg(p.pipeline())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["up_to_date"], false);
    assert_eq!(v["parse"]["would_run"], 1);
    r2e()
        .arg("build")
        .arg(p.pipeline())
        .args(["--until", "slice"])
        .assert()
        .success();
    let out = r2e()
        .args(["status", "--json", "--until", "slice", "-p"])
        .arg(p.pipeline())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["up_to_date"], true, "{v}");

    let out = r2e()
        .args(["explain", "r:m.py:user", "--json", "-p"])
        .arg(p.pipeline())
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let v: serde_json::Value = serde_json::from_slice(&out).unwrap();
    assert_eq!(v["file"]["parse_cached"], true);
    assert_eq!(v["slice"]["items"][0]["item"], "r:m.py:helper");
    assert!(
        v["context"]["text"]
            .as_str()
            .unwrap()
            .contains("def helper")
    );
    let err = stderr_of_bad_input(
        r2e()
            .args(["explain", "r:m.py:nope", "-p"])
            .arg(p.pipeline()),
    );
    assert!(err.contains("no function `r:m.py:nope`"), "{err}");
}

#[test]
fn a_killed_build_loses_no_finished_parse() {
    // Parse results are stored as they finish; a build that dies after parsing re-parses nothing.
    let p = Project::new(SMALL, "");
    r2e()
        .arg("build")
        .arg(p.pipeline())
        .args(["--until", "parse"])
        .assert()
        .success();
    std::fs::remove_dir_all(p.path().join("out")).unwrap();
    let v = common::build_until_slice(&p.pipeline());
    assert_eq!(v["stages"]["parse"]["executed"], 0);
    assert_eq!(v["stages"]["parse"]["cached"], 1);
}

#[test]
fn bad_input_loses_nothing_already_cached() {
    let p = Project::new(SMALL, "");
    r2e()
        .arg("build")
        .arg(p.pipeline())
        .args(["--until", "slice"])
        .assert()
        .success();
    let good = std::fs::read_to_string(p.pipeline()).unwrap();
    // A misspelled key, then a file with a syntax error, then the good config again.
    std::fs::write(p.pipeline(), good.replace("[project]", "[projcet]")).unwrap();
    r2e()
        .arg("build")
        .arg(p.pipeline())
        .args(["--until", "slice"])
        .assert()
        .code(2);
    std::fs::write(p.path().join("repo/broken.py"), "def f(:\n").unwrap();
    std::fs::write(p.pipeline(), &good).unwrap();
    let v = common::build_until_slice(&p.pipeline());
    assert_eq!(
        v["stages"]["parse"]["executed"], 1,
        "only the new file is parsed: {v}"
    );
    assert_eq!(v["stages"]["parse"]["cached"], 1);
    assert_eq!(v["stages"]["parse"]["failed"], 1);
    assert_eq!(
        v["counts"]["candidates"], 2,
        "the failure is data; the build goes on"
    );
}

/// Setups that would harm the user are refused before anything runs: an output inside a
/// repository or inside the cache, a cache inside a repository, one folder listed twice.
#[test]
fn harmful_setups_are_refused_with_their_location() {
    let p = Project::new(SMALL, "");
    let cases = [
        (
            "[project]\noutput = \"repo/out\"\n\n[[repo]]\npath = \"repo\"\n",
            "pipeline.toml:2:10",
            "is inside repo `repo`",
        ),
        (
            "[project]\ncache = \"repo/.cache\"\n\n[[repo]]\npath = \"repo\"\n",
            "pipeline.toml:2:9",
            "is inside repo `repo`",
        ),
        (
            "[project]\noutput = \"cache/out\"\n\n[[repo]]\npath = \"repo\"\n",
            "pipeline.toml:2:10",
            "which git and backups skip",
        ),
        (
            "[[repo]]\npath = \"repo\"\n\n[[repo]]\npath = \"./repo/\"\nname = \"again\"\n",
            "pipeline.toml:5:8",
            "is repo `repo` again",
        ),
    ];
    for (text, at, says) in cases {
        std::fs::write(p.pipeline(), text).unwrap();
        let err = stderr_of_bad_input(r2e().arg("build").arg(p.pipeline()));
        assert!(err.contains(at) && err.contains(says), "{text}\n{err}");
    }
    assert!(!p.path().join("repo/out").exists());
}

/// Without bubblewrap r2e runs no repository code unless told to.
#[test]
fn code_never_runs_unsandboxed_unless_asked() {
    let p = Project::new(SMALL, "[env]\ninstaller = \"pip\"\n");
    // A PATH without bubblewrap: the real interpreter and git only.
    let bin = tempfile::tempdir().unwrap();
    let python = std::process::Command::new("python3")
        .args(["-c", "import sys; print(sys.executable)"])
        .output()
        .unwrap();
    let python = String::from_utf8_lossy(&python.stdout).trim().to_owned();
    std::os::unix::fs::symlink(python, bin.path().join("python3")).unwrap();
    if let Ok(git) = which("git") {
        std::os::unix::fs::symlink(git, bin.path().join("git")).unwrap();
    }
    // A build on that PATH: it stops at the sandbox, an environmental failure (exit 1).
    let build = || {
        let out = r2e()
            .arg("build")
            .arg(p.pipeline())
            .env("PATH", bin.path())
            .envs(common::offline_env())
            .output()
            .unwrap();
        let err = String::from_utf8_lossy(&out.stderr).into_owned();
        assert_eq!(out.status.code(), Some(1), "{err}");
        err
    };
    let err = build();
    assert!(err.contains("--unsafe-no-sandbox"), "{err}");
    assert!(
        err.contains("bubblewrap (`bwrap`) is not available"),
        "{err}"
    );

    // A `bwrap` that is there but cannot start a sandbox (as where user namespaces are off) is
    // told apart from a missing one, with its own message, after its three tries.
    let tries = bin.path().join("tries");
    let fake = bin.path().join("bwrap");
    std::fs::write(
        &fake,
        format!(
            "#!/bin/sh\necho try >> {}\necho 'bwrap: No permissions to create new namespace' >&2\nexit 1\n",
            tries.display()
        ),
    )
    .unwrap();
    std::fs::set_permissions(&fake, std::os::unix::fs::PermissionsExt::from_mode(0o755)).unwrap();
    std::os::unix::fs::symlink(which("sh").unwrap(), bin.path().join("sh")).unwrap();
    let err = build();
    assert!(
        err.contains("is installed but cannot start a sandbox"),
        "{err}"
    );
    assert!(
        err.contains("No permissions to create new namespace"),
        "{err}"
    );
    assert!(!err.contains("is not available"), "{err}");
    let tries = std::fs::read_to_string(&tries).unwrap();
    assert!(tries.lines().count() >= 3, "{tries}");
}

fn which(tool: &str) -> Result<std::path::PathBuf, ()> {
    std::env::var_os("PATH")
        .into_iter()
        .flat_map(|p| std::env::split_paths(&p).collect::<Vec<_>>())
        .map(|d| d.join(tool))
        .find(|p| p.is_file())
        .ok_or(())
}

/// `status` counts what the analysis stages would run as the build finds it, from the
/// persisted analysis: after a comment outside every definition, one file to extract and
/// nothing to slice or render; after a comment inside `helper`, the two contexts that show it
/// (helper's and user's). The build then runs exactly that.
#[test]
fn status_counts_the_analysis_the_build_would_run() {
    let p = Project::new(SMALL, "");
    let status = || {
        common::stdout_json(
            r2e()
                .args(["status", "--json", "--until", "slice", "-p"])
                .arg(p.pipeline()),
        )
    };
    let before = status();
    assert_eq!(before["analysis"]["extract"], 1, "{before}");
    assert_eq!(before["analysis"]["slice"], 2, "{before}");
    common::build_until_slice(&p.pipeline());
    assert_eq!(status()["analysis"]["extract"], 0);
    let counts = |v: &serde_json::Value, key: &str| {
        ["extract", "slice", "context"].map(|s| v[key][s].clone())
    };
    let file = p.path().join("repo/m.py");
    let text = std::fs::read_to_string(&file).unwrap();
    for (edited, contexts) in [
        (format!("# a note\n{text}"), 0),
        (
            format!(
                "# a note\n{}",
                text.replace("    y = x + K\n", "    # why\n    y = x + K\n")
            ),
            2,
        ),
    ] {
        std::fs::write(&file, edited).unwrap();
        let planned = status();
        assert_eq!(planned["analysis"]["context"], contexts, "{planned}");
        let text_out = String::from_utf8(
            r2e()
                .args(["status", "--until", "slice", "-p"])
                .arg(p.pipeline())
                .assert()
                .success()
                .get_output()
                .stdout
                .clone(),
        )
        .unwrap();
        assert!(
            text_out.contains("  extract: 1 files\n  slice: 0 candidates\n"),
            "{text_out}"
        );
        let built = common::build_until_slice(&p.pipeline());
        let ran = ["extract", "slice", "context"].map(|s| built["stages"][s]["executed"].clone());
        assert_eq!(counts(&planned, "analysis"), ran, "{planned} {built}");
    }
    assert_eq!(status()["up_to_date"], true);
}

/// The items of the `Arguments:`, `Options:` and `Commands:` sections of a `--help` text that
/// have no description (on their line, or on the next one, indented further), and the
/// commands it lists (`help` aside).
fn undescribed_and_commands(help: &str) -> (Vec<String>, Vec<String>) {
    let (mut missing, mut commands) = (Vec::new(), Vec::new());
    let lines: Vec<&str> = help.lines().collect();
    let mut section = "";
    for (i, line) in lines.iter().enumerate() {
        if !line.starts_with(' ') && line.ends_with(':') {
            section = line.trim_end_matches(':');
            continue;
        }
        if !matches!(section, "Arguments" | "Options" | "Commands") {
            continue;
        }
        let Some(item) = line.strip_prefix("  ") else {
            continue;
        };
        if item.starts_with(' ') || item.is_empty() {
            continue;
        }
        let (name, text) = match item.find("  ") {
            Some(gap) => (&item[..gap], item[gap..].trim()),
            None => (item, ""),
        };
        let next_line_help = lines
            .get(i + 1)
            .is_some_and(|n| n.starts_with("          ") && !n.trim().is_empty());
        if text.is_empty() && !next_line_help {
            missing.push(format!("{section}: `{name}`"));
        }
        if section == "Commands" && name != "help" {
            commands.push(name.to_owned());
        }
    }
    (missing, commands)
}

#[test]
fn every_flag_and_argument_has_help() {
    // Every command's own `--help`, at any depth (the debug binary also runs clap's own checks
    // of each definition it builds).
    let mut missing = Vec::new();
    let mut todo = vec![Vec::<String>::new()];
    let mut seen = 0;
    while let Some(path) = todo.pop() {
        let out = r2e().args(&path).arg("--help").assert().success();
        let help = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        let (undescribed, commands) = undescribed_and_commands(&help);
        let at = format!("r2e {}", path.join(" "));
        missing.extend(
            undescribed
                .into_iter()
                .map(|m| format!("`{}` {m}", at.trim())),
        );
        for c in commands {
            let mut sub = path.clone();
            sub.push(c);
            todo.push(sub);
        }
        seen += 1;
    }
    assert!(missing.is_empty(), "no help text: {}", missing.join(", "));
    assert!(seen > 10, "the walk reached only {seen} commands");
    // The reading finds an item without text, on its line or on the next, and nested commands.
    let probe = "Usage: x\n\nCommands:\n  a     A.\n  b\n  help  Print this\n\nArguments:\n  [POS]\n\nOptions:\n  --long <X>\n          Told on the next line\n  -q\n  -h, --help  Print help\n";
    let (undescribed, commands) = undescribed_and_commands(probe);
    assert_eq!(
        undescribed,
        ["Commands: `b`", "Arguments: `[POS]`", "Options: `-q`"]
    );
    assert_eq!(commands, ["a", "b"]);
}

#[test]
fn build_takes_its_pipeline_either_way_but_not_two() {
    let dir = tempfile::tempdir().unwrap();
    let run = |args: &[&str]| {
        let out = r2e()
            .current_dir(dir.path())
            .arg("build")
            .args(args)
            .assert()
            .code(2)
            .get_output()
            .stderr
            .clone();
        String::from_utf8_lossy(&out).into_owned()
    };
    // None given: `pipeline.toml`; one given either way: that one (none of them exists here).
    assert!(run(&[]).contains("pipeline.toml"), "{}", run(&[]));
    for args in [
        &["a.toml"][..],
        &["-p", "a.toml"],
        &["a.toml", "-p", "./a.toml"],
    ] {
        let err = run(args);
        assert!(err.contains("a.toml"), "{args:?}: {err}");
        assert!(!err.contains("two pipelines"), "{args:?}: {err}");
    }
    // Two different ones: refused, as bad input.
    let err = run(&["a.toml", "-p", "b.toml"]);
    assert!(err.contains("two pipelines given"), "{err}");
}

#[test]
fn help_lists_each_command_on_one_short_line_and_keeps_the_detail_for_its_own_help() {
    let out = r2e().arg("--help").assert().success();
    let help = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
    let long: Vec<&str> = help.lines().filter(|l| l.chars().count() > 100).collect();
    assert!(
        long.is_empty(),
        "lines over 100 characters:\n{}",
        long.join("\n")
    );
    // One line per command: the line after a command's is the next command's (or blank).
    let commands: Vec<&str> = help
        .lines()
        .skip_while(|l| *l != "Commands:")
        .skip(1)
        .take_while(|l| !l.is_empty())
        .collect();
    assert!(commands.len() >= 15, "{help}");
    for line in &commands {
        assert!(
            line.starts_with("  ") && !line.starts_with("   "),
            "a command's text runs onto a second line: {line:?}\n{help}"
        );
    }
    for c in ["init", "completions", "build", "report"] {
        assert!(
            commands.iter().any(|l| l.trim_start().starts_with(c)),
            "{c}: {help}"
        );
    }
    // The detail is under the command's own help.
    let own = r2e().args(["report", "--help"]).assert().success();
    let own = String::from_utf8_lossy(&own.get_output().stdout)
        .split_whitespace()
        .collect::<Vec<_>>()
        .join(" ");
    assert!(own.contains("report.html"), "{own}");
    assert!(own.contains("a row per repository"), "{own}");
}

#[test]
fn completions_are_printed_for_each_shell() {
    for (shell, mark) in [
        ("bash", "complete -F"),
        ("zsh", "#compdef r2e"),
        ("fish", "complete -c r2e"),
    ] {
        let out = r2e().args(["completions", shell]).assert().success();
        let text = String::from_utf8_lossy(&out.get_output().stdout).into_owned();
        assert!(text.contains(mark), "{shell}: {text}");
        for c in ["build", "report", "init", "serve"] {
            assert!(text.contains(c), "{shell} misses `{c}`");
        }
    }
    let bash = r2e().args(["completions", "bash"]).assert().success();
    let script = tempfile::NamedTempFile::new().unwrap();
    std::fs::write(script.path(), &bash.get_output().stdout).unwrap();
    // bash reads it without an error, and the completion function is defined.
    let check = std::process::Command::new("bash")
        .arg("-c")
        .arg(format!(
            "source {} && complete -p r2e",
            script.path().display()
        ))
        .output()
        .unwrap();
    assert!(
        check.status.success(),
        "{}{}",
        String::from_utf8_lossy(&check.stdout),
        String::from_utf8_lossy(&check.stderr)
    );
    r2e().args(["completions", "tcsh"]).assert().code(2);
}

#[test]
fn init_writes_a_pipeline_the_build_accepts_and_never_overwrites_one() {
    let dir = tempfile::tempdir().unwrap();
    for (name, code) in [
        (
            "alpha",
            "def double(x):\n    \"\"\"Twice x.\"\"\"\n    return 2 * x\n",
        ),
        (
            "beta",
            "def half(x):\n    \"\"\"Half of x.\"\"\"\n    return x / 2\n",
        ),
    ] {
        std::fs::create_dir_all(dir.path().join(name)).unwrap();
        std::fs::write(dir.path().join(name).join("m.py"), code).unwrap();
    }
    let init = |args: &[&str]| {
        r2e()
            .current_dir(dir.path())
            .arg("init")
            .args(args)
            .assert()
    };
    init(&["alpha", "beta", "pypi:isodate==0.6.1"]).success();
    let text = std::fs::read_to_string(dir.path().join("pipeline.toml")).unwrap();
    assert!(
        text.contains("path = \"alpha\"") && text.contains("path = \"beta\""),
        "{text}"
    );
    assert!(text.contains("pypi = \"isodate==0.6.1\""), "{text}");
    assert!(
        text.lines()
            .filter(|l| l.trim_start().starts_with('#'))
            .count()
            >= 10,
        "commented: {text}"
    );
    // The build reads it: the two folders and the release (from the package index) are
    // checked out and their functions extracted.
    let out = r2e()
        .current_dir(dir.path())
        .args(["build", "--json", "--until", "extract"])
        .timeout(std::time::Duration::from_secs(300))
        .assert()
        .success();
    let summary: Value = serde_json::from_slice(&out.get_output().stdout).unwrap();
    let repos: Vec<&str> = summary["repos"]
        .as_array()
        .unwrap()
        .iter()
        .map(|r| r["repo"].as_str().unwrap())
        .collect();
    assert_eq!(repos, ["alpha", "beta", "isodate"], "{summary}");
    for r in summary["repos"].as_array().unwrap() {
        assert!(r["functions"].as_u64() > Some(0), "{r}");
    }

    // An existing pipeline is never overwritten: exit 2, the file as it was.
    let again = init(&["alpha"]).code(2);
    let said = String::from_utf8_lossy(&again.get_output().stderr).into_owned();
    assert!(
        said.contains("pipeline.toml") && said.contains("never overwrites"),
        "{said}"
    );
    assert_eq!(
        std::fs::read_to_string(dir.path().join("pipeline.toml")).unwrap(),
        text
    );
    // Another file beside it, and arguments that name nothing or a bad release.
    init(&["-p", "other.toml", "nowhere"]).code(2);
    assert!(!dir.path().join("other.toml").exists());
    let bad = init(&["-p", "other.toml", "pypi:isodate>=1"]).code(2);
    let said = String::from_utf8_lossy(&bad.get_output().stderr).into_owned();
    assert!(said.contains("isodate>=1"), "{said}");
    assert!(!dir.path().join("other.toml").exists());
    init(&["-p", "other.toml", "alpha", "https://example.org/x/y.git"]).success();
    let other = std::fs::read_to_string(dir.path().join("other.toml")).unwrap();
    assert!(
        other.contains("git = \"https://example.org/x/y.git\""),
        "{other}"
    );
}
