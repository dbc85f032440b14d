//! Test fixtures: small multi-file Python packages written from one string, and helpers to build
//! them with r2e and read the outputs.
#![allow(dead_code)]

use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use r2e::engine::{self, BuildOptions, Stage};

/// Writes a fixture: `//- path` lines start files; the rest is their text (dedented).
pub fn write_fixture(root: &Path, spec: &str) {
    let mut current: Option<(String, String)> = None;
    let mut files = Vec::new();
    for line in spec.lines() {
        if let Some(path) = line.trim_start().strip_prefix("//- ") {
            files.extend(current.take());
            current = Some((path.trim().to_owned(), String::new()));
        } else if let Some((_, text)) = current.as_mut() {
            text.push_str(line);
            text.push('\n');
        }
    }
    files.extend(current);
    for (path, text) in files {
        let full = root.join(&path);
        std::fs::create_dir_all(full.parent().unwrap()).unwrap();
        std::fs::write(full, r2e::python::dedent(&text)).unwrap();
    }
}

/// A temporary project: a repo folder `repo/` and a `pipeline.toml` beside it.
pub struct Project {
    pub dir: tempfile::TempDir,
}

impl Project {
    pub fn new(spec: &str, extra_toml: &str) -> Project {
        let dir = tempfile::tempdir().unwrap();
        write_fixture(&dir.path().join("repo"), spec);
        std::fs::write(
            dir.path().join("pipeline.toml"),
            format!(
                "[project]\nname = \"t\"\n\n[[repo]]\npath = \"repo\"\nname = \"r\"\n\n{extra_toml}"
            ),
        )
        .unwrap();
        Project { dir }
    }

    pub fn path(&self) -> &Path {
        self.dir.path()
    }

    pub fn pipeline(&self) -> PathBuf {
        self.dir.path().join("pipeline.toml")
    }

    pub fn write(&self, rel: &str, text: &str) {
        std::fs::write(
            self.dir.path().join("repo").join(rel),
            r2e::python::dedent(text),
        )
        .unwrap();
    }

    pub fn build(&self) -> engine::Summary {
        let cfg = r2e::config::load(&self.pipeline()).unwrap();
        engine::build(
            &cfg,
            &BuildOptions {
                until: Stage::Slice,
                jobs: Some(2),
            },
        )
        .unwrap()
    }

    /// `functions.jsonl`, by id.
    pub fn functions(&self) -> BTreeMap<String, serde_json::Value> {
        let text = std::fs::read_to_string(self.path().join("out/functions.jsonl")).unwrap();
        text.lines()
            .map(|l| {
                let v: serde_json::Value = serde_json::from_str(l).unwrap();
                (v["id"].as_str().unwrap().to_owned(), v)
            })
            .collect()
    }
}

/// The `slice.functions` of a candidate, or panics with what there is.
pub fn slice_functions(f: &BTreeMap<String, serde_json::Value>, id: &str) -> Vec<String> {
    let row = f
        .get(id)
        .unwrap_or_else(|| panic!("no {id}; have {:?}", f.keys().collect::<Vec<_>>()));
    let slice = row
        .get("slice")
        .unwrap_or_else(|| panic!("{id} is not a candidate: {row}"));
    slice["functions"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

pub fn slice_globals(f: &BTreeMap<String, serde_json::Value>, id: &str) -> Vec<String> {
    f[id]["slice"]["globals"]
        .as_array()
        .unwrap()
        .iter()
        .map(|v| v.as_str().unwrap().to_owned())
        .collect()
}

/// `r2e build --json` in `dir`, offline (environments from the machine's own packages, as the
/// pipelines of these tests ask), which must succeed: its summary.
pub fn offline_build(dir: &Path) -> serde_json::Value {
    let out = assert_cmd::Command::cargo_bin("r2e")
        .unwrap()
        .args(["build", "--json"])
        .current_dir(dir)
        .env("PIP_NO_INDEX", "1")
        .timeout(std::time::Duration::from_secs(900))
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    serde_json::from_slice(&out).expect("stdout is one JSON object")
}
