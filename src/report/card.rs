//! The dataset card: `README.md` in the output, with the Hugging Face Hub's YAML front matter
//! (licence, task, size, a config per dataset pointing at its `dataset.jsonl`), the fields, how
//! to check a candidate, how the dataset was built, its headline numbers and each repository's
//! licence. Written from the report's rows, as the other report files are.

use std::collections::BTreeMap;
use std::fmt::Write;
use std::path::Path;

use super::Row;
use r2e_core::config::Config;

/// A YAML scalar: a JSON string is a YAML double-quoted one.
fn y(s: &str) -> String {
    serde_json::Value::String(s.to_owned()).to_string()
}

/// The Hub's size category of `n` instances.
fn size_category(n: u64) -> &'static str {
    match n {
        0..=999 => "n<1K",
        1_000..=9_999 => "1K<n<10K",
        10_000..=99_999 => "10K<n<100K",
        100_000..=999_999 => "100K<n<1M",
        _ => "1M<n<10M",
    }
}

/// The card's configurations: each dataset's `dataset.jsonl`, relative to the pipeline's output
/// (`dataset.jsonl` for the pipeline's own, `variants/NAME/dataset.jsonl` for a variant's), and,
/// for a dataset built with `[bugfix]` that made tasks, its `bugfix.jsonl` as config `bugfix`
/// (a variant's `NAME-bugfix`).
fn data_files(cfg: &Config) -> Vec<(String, String)> {
    use r2e_core::records::OutputFile;
    let root = r2e_pipeline::engine::outputs::resolve(&cfg.output);
    let mut out = Vec::new();
    let mut bugfix = Vec::new();
    for (name, c) in cfg.builds() {
        let dir = r2e_pipeline::engine::outputs::resolve(&c.output);
        let rel = dir
            .strip_prefix(&root)
            .map(Path::to_path_buf)
            .unwrap_or_else(|_| dir.clone());
        let path = |file: OutputFile| rel.join(file.name()).to_string_lossy().replace('\\', "/");
        out.push((
            name.unwrap_or("default").to_owned(),
            path(OutputFile::Dataset),
        ));
        let tasks = dir.join(OutputFile::Bugfix.name());
        if c.bugfix.is_some() && std::fs::metadata(&tasks).is_ok_and(|m| m.len() > 0) {
            let config = match name {
                Some(n) => format!("{n}-bugfix"),
                None => "bugfix".to_owned(),
            };
            bugfix.push((config, path(OutputFile::Bugfix)));
        }
    }
    out.extend(bugfix);
    out
}

/// The licences of the repositories, over every dataset: repository → SPDX id or `None`.
fn licenses(rows: &[Row]) -> BTreeMap<String, Option<String>> {
    let mut out = BTreeMap::new();
    for r in rows {
        for (repo, l) in &r.licenses {
            out.entry(repo.clone()).or_insert_with(|| l.clone());
        }
    }
    out
}

/// The card's text.
pub fn render(cfg: &Config, rows: &[Row]) -> String {
    let licenses = licenses(rows);
    let mut out = front_matter(cfg, rows, &licenses);
    let _ = writeln!(out, "# {}\n", cfg.name);
    out.push_str(
        "A benchmark of Python functions taken from real repositories, each with an equivalence \
         harness: the reference implementation and a candidate run on the same inputs in a \
         sandbox, and the candidate passes when it behaves as the reference does (its return \
         values, exceptions and effects on its arguments). Built with r2e, after *R2E: Turning any GitHub Repository into a \
         Programming Agent Environment* (Jain et al., ICML 2024).\n\n",
    );
    headline_numbers(&mut out, rows);
    use_of_the_dataset(&mut out);
    how_it_was_built(&mut out, cfg, rows);

    out.push_str("\n## Licences\n\n");
    out.push_str(
        "Each instance's code is its repository's, under that repository's licence (from its \
         own files; `unknown` where they do not tell: check before you redistribute).\n\n\
         | repository | licence |\n|---|---|\n",
    );
    for (repo, l) in &licenses {
        let _ = writeln!(out, "| {repo} | {} |", l.as_deref().unwrap_or("unknown"));
    }
    out
}

/// The card's YAML front matter, which the Hugging Face Hub reads: the licence, the names, the
/// configurations and their data files.
fn front_matter(cfg: &Config, rows: &[Row], licenses: &BTreeMap<String, Option<String>>) -> String {
    let distinct: std::collections::BTreeSet<Option<&str>> =
        licenses.values().map(|l| l.as_deref()).collect();
    // One licence the Hub knows, for every repository; else `other`, listed below.
    let hub = match distinct.iter().collect::<Vec<_>>().as_slice() {
        [Some(one)] => r2e_core::license::hub_id(one),
        _ => None,
    };
    let total: u64 = rows.iter().map(|r| r.instances).max().unwrap_or(0);
    let mut out = String::from("---\n");
    match hub {
        Some(id) => {
            let _ = writeln!(out, "license: {id}");
        }
        None => {
            let _ = writeln!(
                out,
                "license: other\nlicense_name: per-repository\nlicense_link: LICENSES.md"
            );
        }
    }
    let _ = writeln!(out, "pretty_name: {}", y(&cfg.name));
    out.push_str("language:\n- en\n");
    out.push_str("task_categories:\n- text-generation\n");
    out.push_str("tags:\n- code\n- python\n- code-generation\n- r2e\n- equivalence-testing\n");
    let _ = writeln!(out, "size_categories:\n- {}", size_category(total));
    out.push_str("configs:\n");
    for (i, (name, file)) in data_files(cfg).iter().enumerate() {
        let _ = writeln!(
            out,
            "- config_name: {}\n  data_files:\n  - split: test\n    path: {}",
            y(name),
            y(file)
        );
        if i == 0 {
            out.push_str("  default: true\n");
        }
    }
    out.push_str("---\n\n");
    out
}

/// The headline numbers per dataset, and each evaluated dataset's pass@k.
fn headline_numbers(out: &mut String, rows: &[Row]) {
    out.push_str("## Headline numbers\n\n");
    out.push_str(
        "| dataset | version | repositories | candidates | valid harnesses | mean coverage of \
         valid | instances | tests per instance |\n|---|---|---|---|---|---|---|---|\n",
    );
    for r in rows {
        let _ = writeln!(
            out,
            "| {} | `{}` | {} | {} | {} ({}) | {} | {} | {} |",
            r.variant,
            r.dataset_version.as_deref().unwrap_or("-"),
            r.repos.len(),
            r.all.candidates,
            r.all.valid,
            r.all
                .valid_percent
                .map_or_else(|| "-".into(), |p| format!("{p:.1}%")),
            r.all
                .mean_coverage
                .map_or_else(|| "-".into(), |c| format!("{:.1}%", c * 100.0)),
            r.instances,
            r.mean_tests
                .map_or_else(|| "-".into(), |t| format!("{t:.1}")),
        );
    }
    for r in rows {
        let Some(t) = &r.evaluation else { continue };
        let _ = writeln!(out, "\npass@k of `{}`:\n", r.variant);
        for p in &t.overall {
            let ks: Vec<String> = p.pass.iter().map(|(k, v)| format!("{k} {v:.3}")).collect();
            let _ = writeln!(
                out,
                "- `{}` over {} instances: {}",
                p.model,
                p.instances,
                ks.join(", ")
            );
        }
    }
    out.push_str(
        "\n`report.html` beside this card draws these and more (coverage, mutation scores, \
         pass@k by dependencies and tokens, self-repair); `report.json` holds every number.\n",
    );
}

/// The dataset's fields, and how to check a candidate.
fn use_of_the_dataset(out: &mut String) {
    out.push_str("\n## Fields of `dataset.jsonl`\n\n");
    for (field, what) in FIELDS {
        let _ = writeln!(out, "- `{field}`: {what}");
    }

    out.push_str("\n## Checking a candidate\n\n");
    out.push_str(
        "A candidate is a Python file defining the function (for a method, the method or its \
         class). With r2e, in the folder the dataset was built in:\n\n\
         ```sh\nr2e check 'ID' --candidate candidate.py --json   # exit 0 pass, 1 fail, 3 error\n\
         r2e check --candidates candidates.jsonl          # many: {\"id\", \"candidate\"} per line\n```\n\n\
         `outcome` is `pass`, `fail` (the candidate's doing: a wrong value, an exception, its \
         own timeout) or `error` (not judged: the sandbox or the machine failed; check again). \
         `r2e export DIR` writes the environments as Docker images with a `pipeline.toml` that \
         checks candidates on another machine (`r2e import DIR`, then `r2e check -p \
         DIR/pipeline.toml`); `r2e serve` serves the instances to programming agents over \
         HTTP.\n",
    );
}

/// How the datasets were built: the stages, and each dataset's version and settings.
fn how_it_was_built(out: &mut String, cfg: &Config, rows: &[Row]) {
    out.push_str("\n## How it was built\n\n");
    let _ = writeln!(
        out,
        "With r2e {} from the pipeline `{}`:",
        env!("CARGO_PKG_VERSION"),
        cfg.file.file_name().map_or_else(
            || "pipeline.toml".into(),
            |n| n.to_string_lossy().into_owned()
        )
    );
    out.push_str(
        "functions with docstrings are extracted and sliced (their dependencies), each \
         repository's environment is built, the built-in explorer (or a model) writes a harness \
         of up to `max_tests` tests whose inputs reach the function's branches, the harness is \
         validated in the sandbox (the reference against itself, `repeats` runs; an unstable test \
         is dropped), and the harnesses whose branch coverage reaches `min_branch_coverage` \
         become instances, scored on built-in mutants of the reference. The dataset's version is \
         a hash of its instances and the settings that made them: the same pipeline at the same \
         commits gives the same version on any machine.\n\n",
    );
    for r in rows {
        let pick = |k: &str| r.settings.get(k).map_or("-", String::as_str);
        let _ = writeln!(
            out,
            "- `{}`: version `{}`; context `{}`, generator `{}`, budget {}, max_tests {}, \
             repeats {}, min_branch_coverage {}, sandbox `{}`.",
            r.variant,
            r.dataset_version.as_deref().unwrap_or("-"),
            pick("context.strategy"),
            pick("generate.generator"),
            pick("generate.budget"),
            pick("generate.max_tests"),
            pick("validate.repeats"),
            pick("select.min_branch_coverage"),
            pick("sandbox.backend"),
        );
    }
}

/// The licences as their own page, which the front matter's `license_link` names when they
/// differ.
pub fn licenses_page(rows: &[Row]) -> String {
    let mut out = String::from(
        "# Licences\n\nEach repository's code is under its own licence.\n\n| repository | licence |\n|---|---|\n",
    );
    for (repo, l) in licenses(rows) {
        let _ = writeln!(out, "| {repo} | {} |", l.as_deref().unwrap_or("unknown"));
    }
    out
}

/// The fields of an instance, for the card.
const FIELDS: &[(&str, &str)] = &[
    ("id", "`REPO:path.py:Qual.name`"),
    ("repo, commit, path, qualname", "where the function is"),
    (
        "problem",
        "what a model or agent is shown: the context with the function's body replaced by its \
         signature and spec",
    ),
    (
        "reference",
        "the solution: the function's source in the commit, from its first decorator to its \
         last line",
    ),
    (
        "docstring, spec, spec_source",
        "the original docstring and the spec shown in `problem`",
    ),
    (
        "context",
        "the function's dependencies (its slice), as source",
    ),
    (
        "harness, harness_hash",
        "the equivalence harness (Python) and its hash",
    ),
    ("tests", "the harness's tests"),
    (
        "expected",
        "per test, the reference's calls as structural snapshots: what a candidate is judged \
         against",
    ),
    ("policy", "how outcomes are compared"),
    (
        "branch_coverage, line_coverage",
        "of the reference under the harness",
    ),
    (
        "deps, tokens, in_file",
        "the slice's size, the reference's length, whether the slice stays in its file",
    ),
    (
        "mutants",
        "built-in mutants of the reference the harness kills (`total`, `killed`, `survivors`)",
    ),
    (
        "stability",
        "the reference's runs and, per test, how many agreed",
    ),
    (
        "env_lock, code_hash",
        "the environment's lock and the function's code key",
    ),
    (
        "created_at, changed_at",
        "when the body was introduced and last changed (from the history)",
    ),
];
