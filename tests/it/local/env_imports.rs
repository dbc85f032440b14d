//! Stage `env`, imports to distributions, against a package index on loopback that serves
//! decoys: an optional import and another platform's import are not installed (and the
//! package's candidates validate), an import name installs the distribution that provides it
//! (`yaml` from `PyYAML`, not from a `yaml` that does not), and a distribution that installs
//! but does not provide its module is uninstalled and recorded.

use crate::common;
use std::path::{Path, PathBuf};

use assert_cmd::Command;
use common::Project;
use common::index::Index;

/// A pure-Python wheel of the distribution `dist` holding `files` (path, text), made with
/// Python's zipfile.
fn wheel_with(dir: &Path, dist: &str, version: &str, files: &[(&str, &str)]) -> PathBuf {
    let stem = dist.replace('-', "_");
    let file = dir.join(format!("{stem}-{version}-py3-none-any.whl"));
    let spec = serde_json::json!({
        "path": file.to_string_lossy(),
        "dist": dist,
        "stem": stem,
        "version": version,
        "files": files,
    });
    let script = r#"
import json, sys, zipfile
s = json.loads(sys.argv[1])
info = f"{s['stem']}-{s['version']}.dist-info"
z = zipfile.ZipFile(s["path"], "w")
names = []
for path, text in s["files"]:
    z.writestr(path, text)
    names.append(path)
z.writestr(f"{info}/METADATA", f"Metadata-Version: 2.1\nName: {s['dist']}\nVersion: {s['version']}\n")
z.writestr(f"{info}/WHEEL", "Wheel-Version: 1.0\nGenerator: test\nRoot-Is-Purelib: true\nTag: py3-none-any\n")
names += [f"{info}/METADATA", f"{info}/WHEEL", f"{info}/RECORD"]
z.writestr(f"{info}/RECORD", "".join(f"{n},,\n" for n in names))
z.close()
"#;
    let ok = std::process::Command::new("python3")
        .args(["-c", script, &spec.to_string()])
        .status()
        .unwrap();
    assert!(ok.success());
    file
}

/// An index on loopback listing the real pinned coverage.py (the tests' wheelhouse) and
/// `wheels`, each (project, file).
fn index_with(wheels: &[(&str, PathBuf)]) -> Index {
    let index = Index::start();
    for entry in std::fs::read_dir(common::wheelhouse()).unwrap().flatten() {
        let path = entry.path();
        let name = path.file_name().unwrap().to_string_lossy().into_owned();
        if name.ends_with(".whl") {
            index.add(
                name.split('-').next().unwrap(),
                &path,
                "2024-01-01T00:00:00Z",
            );
        }
    }
    for (project, path) in wheels {
        index.add(project, path, "2024-01-01T00:00:00Z");
    }
    index
}

/// `r2e build --json` with pip pointed at `index`; the build must succeed. Its summary, and
/// the repository's `envs.jsonl` line.
fn build(p: &Project, index: &Index) -> (serde_json::Value, serde_json::Value) {
    let out = Command::cargo_bin("r2e")
        .unwrap()
        .arg("build")
        .arg(p.pipeline())
        .arg("--json")
        .env("PIP_INDEX_URL", index.url())
        .env("PIP_RETRIES", "0")
        .env("PIP_TIMEOUT", "5")
        .assert()
        .success()
        .get_output()
        .stdout
        .clone();
    let summary = serde_json::from_slice(&out).unwrap();
    let envs = std::fs::read_to_string(p.path().join("out/envs.jsonl")).unwrap();
    let env = serde_json::from_str(envs.lines().next().unwrap()).unwrap();
    (summary, env)
}

fn strings(v: &serde_json::Value) -> Vec<String> {
    v.as_array()
        .map(|a| a.iter().map(|s| s.as_str().unwrap().to_owned()).collect())
        .unwrap_or_default()
}

/// The names of the distributions of a lock (`pip freeze`), lowercased.
fn locked(env: &serde_json::Value) -> Vec<String> {
    strings(&env["lock"])
        .iter()
        .map(|l| l.split("==").next().unwrap().to_ascii_lowercase())
        .collect()
}

const GUARDED: &str = r#"
//- pkg/__init__.py
//- pkg/core.py
import sys

try:
    import icu
except ImportError:
    icu = None

if sys.platform == "win32":
    import winreg_helper_pkg


def _mark():
    if icu is None:
        return "."
    return "!"


def shout(x):
    """x in capitals, with a mark."""
    m = _mark()
    return str(x).upper() + m
//- pkg/paths.py
import os


def native(path):
    """The path with the separators of this system."""
    if os.name == "nt":
        import ntpath_helper_pkg
        return ntpath_helper_pkg.convert(path)
    parts = [p for p in str(path).replace("\\", "/").split("/") if p]
    return "/".join(parts)
"#;

/// An optional import (`try: import icu` / `except ImportError`) and imports of another
/// platform (at module level and in a function) are not installed, though the index serves
/// distributions of those names (and `PyICU`, which the table maps `icu` to): the
/// environment's record names them with why, and the package's candidates validate.
#[test]
fn optional_and_other_platform_imports_are_not_installed() {
    let files = tempfile::tempdir().unwrap();
    let decoy = |dist: &str, module: &str| {
        (
            dist.to_owned(),
            wheel_with(
                files.path(),
                dist,
                "0.0.1",
                &[(&format!("{module}/__init__.py"), "DECOY = True\n")],
            ),
        )
    };
    let decoys = [
        decoy("icu", "icu"),
        decoy("PyICU", "icu"),
        decoy("winreg_helper_pkg", "winreg_helper_pkg"),
        decoy("ntpath_helper_pkg", "ntpath_helper_pkg"),
    ];
    let listed: Vec<(&str, PathBuf)> = decoys
        .iter()
        .map(|(d, p)| (d.as_str(), p.clone()))
        .collect();
    let index = index_with(&listed);
    let p = Project::new(
        GUARDED,
        "[env]\ninstaller = \"pip\"\ntimeout_seconds = 300\n",
    );
    let (summary, env) = build(&p, &index);
    assert_eq!(env["outcome"], "ok", "{env}");
    assert_eq!(env["inferred"], serde_json::json!([]), "{env}");
    let lock = locked(&env);
    for decoy in ["icu", "pyicu", "winreg-helper-pkg", "ntpath-helper-pkg"] {
        assert!(!lock.contains(&decoy.to_owned()), "{decoy} in {lock:?}");
    }
    let skipped: Vec<(String, String, String)> = env["skipped_imports"]
        .as_array()
        .unwrap_or_else(|| panic!("{env}"))
        .iter()
        .map(|s| {
            (
                s["module"].as_str().unwrap().to_owned(),
                s["path"].as_str().unwrap().to_owned(),
                s["reason"].as_str().unwrap().to_owned(),
            )
        })
        .collect();
    let modules: Vec<&str> = skipped.iter().map(|s| s.0.as_str()).collect();
    assert_eq!(
        modules,
        ["icu", "ntpath_helper_pkg", "winreg_helper_pkg"],
        "{env}"
    );
    assert_eq!(skipped[0].1, "pkg/core.py");
    assert!(skipped[0].2.starts_with("optional"), "{skipped:?}");
    assert_eq!(skipped[1].1, "pkg/paths.py");
    assert!(skipped[1].2.contains("os.name == \"nt\""), "{skipped:?}");
    assert!(
        skipped[2].2.contains("sys.platform == \"win32\""),
        "{skipped:?}"
    );
    // The log says so too.
    let log =
        std::fs::read_to_string(p.path().join("out").join(env["log"].as_str().unwrap())).unwrap();
    assert!(
        log.contains("not installed: `icu` (pkg/core.py): optional"),
        "{log}"
    );
    // The package's candidates validate.
    assert_eq!(summary["counts"]["instances"], 1, "{summary}");
    let dataset = std::fs::read_to_string(p.path().join("out/dataset.jsonl")).unwrap();
    assert!(dataset.contains("pkg/core.py:shout"), "{dataset}");
}

const MAPPED: &str = r#"
//- pkg/__init__.py
//- pkg/core.py
import yaml
import dateutil


def _marks():
    return yaml.MARK + ":" + dateutil.MARK


def labelled(x):
    """x labelled with the marks of the libraries it was made with."""
    m = _marks()
    return str(x) + "@" + m
//- pkg/widgets.py
import widgetlib


def widget(n):
    """A widget's name."""
    return widgetlib.name(n)
"#;

/// An import name installs the distribution that provides it: `yaml` from `PyYAML` and
/// `dateutil` from `python-dateutil`, though the index also serves distributions named `yaml`
/// and `dateutil` that do not provide them. A distribution that installs but provides another
/// module than the one imported (`widgetlib`) is uninstalled, and the record says why.
#[test]
fn imports_install_the_distributions_that_provide_them() {
    let files = tempfile::tempdir().unwrap();
    let dir = files.path();
    let wheels = [
        (
            "PyYAML",
            wheel_with(
                dir,
                "PyYAML",
                "6.0.1",
                &[("yaml/__init__.py", "MARK = 'pyyaml'\nZERO = 0\n")],
            ),
        ),
        (
            "python-dateutil",
            wheel_with(
                dir,
                "python-dateutil",
                "2.9.0",
                &[("dateutil/__init__.py", "MARK = 'dateutil'\n")],
            ),
        ),
        (
            "yaml",
            wheel_with(
                dir,
                "yaml",
                "0.0.1",
                &[("yaml_decoy/__init__.py", "MARK = 'decoy'\n")],
            ),
        ),
        (
            "dateutil",
            wheel_with(
                dir,
                "dateutil",
                "0.0.1",
                &[("dateutil_decoy.py", "MARK = 'decoy'\n")],
            ),
        ),
        (
            "widgetlib",
            wheel_with(
                dir,
                "widgetlib",
                "1.0",
                &[("widgets_impl/__init__.py", "def name(n):\n    return 'w'\n")],
            ),
        ),
    ];
    let listed: Vec<(&str, PathBuf)> = wheels.iter().map(|(d, p)| (*d, p.clone())).collect();
    let index = index_with(&listed);
    let p = Project::new(
        MAPPED,
        "[env]\ninstaller = \"pip\"\ntimeout_seconds = 300\n",
    );
    let (summary, env) = build(&p, &index);
    assert_eq!(
        strings(&env["inferred"]),
        ["dateutil", "widgetlib", "yaml"],
        "{env}"
    );
    let lock = locked(&env);
    assert!(
        lock.contains(&"pyyaml".to_owned()) && lock.contains(&"python-dateutil".to_owned()),
        "{lock:?}"
    );
    for wrong in ["yaml", "dateutil", "widgetlib"] {
        assert!(!lock.contains(&wrong.to_owned()), "{wrong} in {lock:?}");
    }
    // The distribution that does not provide its module: uninstalled, and recorded.
    let rejected = env["rejected"]
        .as_array()
        .unwrap_or_else(|| panic!("{env}"));
    assert_eq!(rejected.len(), 1, "{env}");
    assert_eq!(rejected[0]["module"], "widgetlib");
    assert_eq!(rejected[0]["distribution"], "widgetlib");
    let reason = rejected[0]["reason"].as_str().unwrap();
    assert!(
        reason.contains("does not provide module `widgetlib`")
            && reason.contains("`widgets_impl`")
            && reason.ends_with("uninstalled"),
        "{reason}"
    );
    assert_eq!(env["outcome"], "partial", "{env}");
    // The function that uses `yaml` and `dateutil` runs with them: a valid instance.
    assert_eq!(summary["counts"]["instances"], 1, "{summary}");
    let dataset = std::fs::read_to_string(p.path().join("out/dataset.jsonl")).unwrap();
    assert!(dataset.contains("pkg/core.py:labelled"), "{dataset}");
}
