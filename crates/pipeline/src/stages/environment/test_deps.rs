//! What a project's own test suite needs, as the project declares it, for the capture's
//! environment only (`stages::capture`): never for the environment its functions run in, which
//! stays what the project installs for its users.
//!
//! Read, without running any code, from:
//! - extras named like a test group (`TEST_GROUPS`) of `[project.optional-dependencies]` and of
//!   `setup.cfg`'s `[options.extras_require]`;
//! - PEP 735 `[dependency-groups]` of those names (with their `include-group`s);
//! - the build tools' own tables: hatch's `[tool.hatch.envs.NAME] dependencies` and
//!   `extra-dependencies` (its `default` and `hatch-test` environments too), poetry's
//!   `[tool.poetry.group.NAME.dependencies]` and `[tool.poetry.dev-dependencies]` (by name: their
//!   version constraints are not PEP 440), pdm's `[tool.pdm.dev-dependencies]`;
//! - the requirement files of `checkout::TEST_FILES`, and tox's `[testenv] deps`.
//!
//! Every requirement is checked as a PEP 508 string before an installer sees it; each is
//! recorded with the file and the table or extra that declared it (`TestRequirement::source`).
//! Nothing is guessed from names of modules.

use std::collections::BTreeMap;
use std::str::FromStr;

use r2e_core::records::TestRequirement;

use super::declared::{normalize_requirement, section_lines, setup_cfg_extras_named};
use crate::stages::checkout::{Checkout, TEST_FILES};

/// The groups, extras and environments that hold a test suite's dependencies.
pub const TEST_GROUPS: &[&str] = &["test", "tests", "testing", "dev"];

/// Hatch's environments whose dependencies its test command uses, besides `TEST_GROUPS`.
const HATCH_ENVS: &[&str] = &["default", "hatch-test"];

/// pytest, which the capture runs a test suite with, where the project's test dependencies do
/// not name it.
pub const PYTEST: &str = "pytest==8.3.5";

/// The requirements a project declares for its test suite, sorted by requirement, each once
/// (the first source found kept), with `PYTEST` added where none names pytest. Requirements
/// that are not PEP 508 strings (`-e .`, `-r other.txt`, a URL) are left out.
pub fn test_requirements(checkout: &Checkout) -> Vec<TestRequirement> {
    let mut found: Vec<(String, String)> = Vec::new();
    let text = |name: &str| {
        checkout
            .read_declaration(name)
            .ok()
            .flatten()
            .map(|b| String::from_utf8_lossy(&b).into_owned())
    };
    if let Some(doc) = text("pyproject.toml").and_then(|t| t.parse::<toml::Table>().ok()) {
        found.extend(pyproject_tests(&doc));
    }
    if let Some(cfg) = text("setup.cfg") {
        found.extend(
            setup_cfg_extras_named(&cfg)
                .into_iter()
                .filter(|(extra, _)| TEST_GROUPS.contains(&extra.as_str()))
                .map(|(extra, r)| (r, format!("setup.cfg [options.extras_require] {extra}"))),
        );
    }
    for name in TEST_FILES {
        let Some(body) = text(name) else { continue };
        if *name == "tox.ini" {
            found.extend(
                tox_deps(&body)
                    .into_iter()
                    .map(|r| (r, "tox.ini [testenv] deps".into())),
            );
        } else {
            found.extend(
                body.lines()
                    .map(normalize_requirement)
                    .filter(|l| !l.is_empty())
                    .map(|r| (r, (*name).to_owned())),
            );
        }
    }
    let mut out: BTreeMap<String, String> = BTreeMap::new();
    for (requirement, source) in found {
        if pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(&requirement).is_ok() {
            out.entry(requirement).or_insert(source);
        }
    }
    let names_pytest = out.keys().any(|r| {
        pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(r)
            .is_ok_and(|r| r.name.as_ref() == "pytest")
    });
    if !names_pytest {
        out.insert(PYTEST.to_owned(), "r2e".to_owned());
    }
    out.into_iter()
        .map(|(requirement, source)| TestRequirement {
            requirement,
            source,
        })
        .collect()
}

/// (requirement, source) of `pyproject.toml`'s test tables.
fn pyproject_tests(doc: &toml::Table) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let strings = |v: Option<&toml::Value>| -> Vec<String> {
        v.and_then(|v| v.as_array())
            .into_iter()
            .flatten()
            .filter_map(|v| v.as_str())
            .map(normalize_requirement)
            .collect()
    };
    let table = |path: &[&str]| -> Option<&toml::Table> {
        let mut at = doc;
        for key in path {
            at = at.get(*key)?.as_table()?;
        }
        Some(at)
    };
    if let Some(extras) = table(&["project", "optional-dependencies"]) {
        for group in TEST_GROUPS {
            for r in strings(extras.get(*group)) {
                out.push((
                    r,
                    format!("pyproject.toml [project.optional-dependencies] {group}"),
                ));
            }
        }
    }
    if let Some(groups) = table(&["dependency-groups"]) {
        for group in TEST_GROUPS {
            for r in dependency_group(groups, group, 0) {
                out.push((r, format!("pyproject.toml [dependency-groups] {group}")));
            }
        }
    }
    if let Some(envs) = table(&["tool", "hatch", "envs"]) {
        for name in TEST_GROUPS.iter().chain(HATCH_ENVS) {
            let Some(env) = envs.get(*name).and_then(|e| e.as_table()) else {
                continue;
            };
            for key in ["dependencies", "extra-dependencies"] {
                for r in strings(env.get(key)) {
                    out.push((r, format!("pyproject.toml [tool.hatch.envs.{name}] {key}")));
                }
            }
        }
    }
    let poetry_names =
        |t: Option<&toml::Table>, source: String, out: &mut Vec<(String, String)>| {
            for name in t.into_iter().flat_map(|t| t.keys()) {
                if name != "python" {
                    out.push((name.clone(), source.clone()));
                }
            }
        };
    for group in TEST_GROUPS {
        poetry_names(
            table(&["tool", "poetry", "group", group, "dependencies"]),
            format!("pyproject.toml [tool.poetry.group.{group}.dependencies]"),
            &mut out,
        );
    }
    poetry_names(
        table(&["tool", "poetry", "dev-dependencies"]),
        "pyproject.toml [tool.poetry.dev-dependencies]".into(),
        &mut out,
    );
    if let Some(pdm) = table(&["tool", "pdm", "dev-dependencies"]) {
        for group in TEST_GROUPS {
            for r in strings(pdm.get(*group)) {
                out.push((
                    r,
                    format!("pyproject.toml [tool.pdm.dev-dependencies] {group}"),
                ));
            }
        }
    }
    out
}

/// A PEP 735 dependency group's requirements, its `{include-group = "…"}` entries followed (a
/// cycle, or a depth past 8, ends there).
fn dependency_group(groups: &toml::Table, name: &str, depth: u32) -> Vec<String> {
    let mut out = Vec::new();
    if depth > 8 {
        return out;
    }
    for item in groups
        .get(name)
        .and_then(|g| g.as_array())
        .into_iter()
        .flatten()
    {
        if let Some(r) = item.as_str() {
            out.push(normalize_requirement(r));
        } else if let Some(included) = item.get("include-group").and_then(|g| g.as_str()) {
            out.extend(dependency_group(groups, included, depth + 1));
        }
    }
    out
}

/// The requirements of tox's `[testenv] deps`: one a line, a factor's condition (`py311: x`)
/// dropped; substitutions (`{[base]deps}`) and options (`-r file`) left out.
fn tox_deps(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut inside = false;
    for line in section_lines(text, "[testenv]") {
        let trimmed = line.trim();
        if !line.starts_with([' ', '\t']) {
            inside = false;
            if let Some((key, value)) = trimmed.split_once('=')
                && key.trim() == "deps"
            {
                inside = true;
                let value = normalize_requirement(value);
                if !value.is_empty() {
                    out.push(value);
                }
            }
            continue;
        }
        if !inside || trimmed.is_empty() || trimmed.starts_with(['#', '-', '{']) {
            continue;
        }
        // `py311,py312: pytest-xdist` holds for some factors: the requirement is taken.
        let requirement = match trimmed.split_once(": ") {
            Some((factors, rest))
                if factors
                    .chars()
                    .all(|c| c.is_ascii_alphanumeric() || "-_,!.".contains(c)) =>
            {
                rest
            }
            _ => trimmed,
        };
        out.push(normalize_requirement(requirement));
    }
    out.into_iter().filter(|r| !r.contains('{')).collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    fn requirements(files: &[(&str, &str)]) -> Vec<(String, String)> {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir_all(root.join("requirements")).unwrap();
        std::fs::create_dir_all(root.join("tests")).unwrap();
        for (name, body) in files {
            std::fs::write(root.join(name), body).unwrap();
        }
        std::fs::write(root.join("m.py"), "def f():\n    return 1\n").unwrap();
        let repo = r2e_core::config::RepoConfig {
            scope: Default::default(),
            name: "r".into(),
            source: r2e_core::config::RepoSource::Path(root.clone()),
        };
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = r2e_core::cache::Cache::open(cache_dir.path()).unwrap();
        let checkout = crate::stages::checkout::checkout(&repo, &cache).unwrap();
        test_requirements(&checkout)
            .into_iter()
            .map(|t| (t.requirement, t.source))
            .collect()
    }

    fn pairs(list: &[(&str, &str)]) -> Vec<(String, String)> {
        list.iter()
            .map(|(a, b)| ((*a).to_owned(), (*b).to_owned()))
            .collect()
    }

    #[test]
    fn every_declaring_table_is_read_with_its_source() {
        let pyproject = r#"
[project]
name = "p"
dependencies = ["attrs"]
[project.optional-dependencies]
test = ["pytest>=7", "hypothesis"]
docs = ["sphinx"]
[dependency-groups]
lint = ["ruff"]
dev = [{include-group = "typing"}, "coverage"]
typing = ["mypy"]
[tool.hatch.envs.default]
dependencies = ["markdown-it-py"]
[tool.hatch.envs.docs]
dependencies = ["mkdocs"]
[tool.poetry.group.test.dependencies]
python = "^3.9"
freezegun = "^1.2"
[tool.pdm.dev-dependencies]
testing = ["pytest-cov"]
"#;
        assert_eq!(
            requirements(&[("pyproject.toml", pyproject)]),
            pairs(&[
                ("coverage", "pyproject.toml [dependency-groups] dev"),
                (
                    "freezegun",
                    "pyproject.toml [tool.poetry.group.test.dependencies]"
                ),
                (
                    "hypothesis",
                    "pyproject.toml [project.optional-dependencies] test"
                ),
                (
                    "markdown-it-py",
                    "pyproject.toml [tool.hatch.envs.default] dependencies"
                ),
                ("mypy", "pyproject.toml [dependency-groups] dev"),
                (
                    "pytest-cov",
                    "pyproject.toml [tool.pdm.dev-dependencies] testing"
                ),
                (
                    "pytest>=7",
                    "pyproject.toml [project.optional-dependencies] test"
                ),
            ])
        );
    }

    #[test]
    fn files_setup_cfg_and_tox_are_read_and_pytest_comes_where_none_is_named() {
        let cfg =
            "[metadata]\nname = p\n[options.extras_require]\ntesting =\n    lxml>=4\ncli = click\n";
        let tox = "[tox]\nenvlist = py311\n[testenv]\ndeps =\n    -r requirements.txt\n    {[base]deps}\n    py311: beautifulsoup4\n    toml\ncommands = pytest\n";
        assert_eq!(
            requirements(&[
                ("setup.cfg", cfg),
                ("tox.ini", tox),
                ("requirements/test.txt", "# tests\nhtml5lib\n-e .\n"),
            ]),
            pairs(&[
                ("beautifulsoup4", "tox.ini [testenv] deps"),
                ("html5lib", "requirements/test.txt"),
                ("lxml>=4", "setup.cfg [options.extras_require] testing"),
                (PYTEST, "r2e"),
                ("toml", "tox.ini [testenv] deps"),
            ])
        );
        // Nothing declared: pytest alone.
        assert_eq!(requirements(&[]), pairs(&[(PYTEST, "r2e")]));
    }
}
