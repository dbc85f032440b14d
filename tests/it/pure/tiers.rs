//! The tiers of `tests/it` (its `main.rs`, docs/testing.md): every area is a file of a tier's
//! folder, declared in that tier's module (a file that no `mod` names is never compiled, so its
//! tests would silently not run), and no area calls a helper of a tier after its own, so that a
//! tier runs where the tiers before it can (`cargo test --test it pure::` with the toolchain, git
//! and python3 only).

use std::collections::BTreeMap;
use std::path::Path;

/// The tiers, in order, each with what marks a test as needing it: the helpers that start what
/// only that tier has.
const TIERS: [(&str, &[&str]); 4] = [
    ("pure", &[]),
    (
        "local",
        // Builds that run a repository's code (in bubblewrap), and the dataset `serve` serves.
        &["offline_build", "offline_env", "common::serve"],
    ),
    (
        "docker",
        &["common::docker()", "crate::docker::", "SmallDaemon"],
    ),
    (
        "services",
        &[
            "Cluster::start",
            "Network::start",
            "have_moto",
            "nginx_program",
            "have_ray",
            "kubernetes_validate",
            "docker-registry",
            "chromium",
            "crate::remote::",
            "crate::cluster_build::",
            "crate::k8s::",
        ],
    ),
];

/// What is wrong with the tiers of the test folder `it` (its `main.rs`, the tiers' folders):
/// one line each.
fn tier_problems(it: &Path) -> Vec<String> {
    let main = std::fs::read_to_string(it.join("main.rs")).unwrap();
    let declared = declared_modules(&main);
    let mut problems = Vec::new();
    for entry in std::fs::read_dir(it).unwrap() {
        let entry = entry.unwrap();
        let name = entry.file_name().to_string_lossy().into_owned();
        let is_tier = TIERS.iter().any(|(t, _)| *t == name);
        if entry.file_type().unwrap().is_dir() {
            if !is_tier && name != "common" {
                problems.push(format!("{name}/ is no tier ({:?})", TIERS.map(|t| t.0)));
            }
        } else if name != "main.rs" {
            problems.push(format!(
                "{name} is in no tier: move it into a tier's folder"
            ));
        }
    }
    for (rank, (tier, _)) in TIERS.iter().enumerate() {
        let dir = it.join(tier);
        let mut files: Vec<String> = std::fs::read_dir(&dir)
            .into_iter()
            .flatten()
            .map(|e| e.unwrap().file_name().to_string_lossy().into_owned())
            .collect();
        files.sort();
        let modules = declared.get(*tier).cloned().unwrap_or_default();
        for module in &modules {
            if !files.contains(&format!("{module}.rs")) {
                problems.push(format!(
                    "main.rs declares {tier}::{module}, which has no file"
                ));
            }
        }
        for file in files {
            let Some(module) = file.strip_suffix(".rs") else {
                problems.push(format!("{tier}/{file} is not a module file"));
                continue;
            };
            if !modules.iter().any(|m| m == module) {
                problems.push(format!(
                    "{tier}/{file} is not declared in main.rs's `mod {tier}`: its tests never run"
                ));
            }
            if (*tier, module) == ("pure", "tiers") {
                continue; // this file, which names every marker
            }
            let text = std::fs::read_to_string(dir.join(&file)).unwrap();
            for (higher, markers) in &TIERS[rank + 1..] {
                for marker in markers.iter().filter(|m| text.contains(**m)) {
                    problems.push(format!(
                        "{tier}::{module} uses `{marker}`, which needs the tier `{higher}`: move \
                         it there"
                    ));
                }
            }
        }
    }
    problems
}

/// The modules main.rs declares in each inline module (`mod TIER { mod AREA; … }`).
fn declared_modules(main: &str) -> BTreeMap<String, Vec<String>> {
    let mut declared: BTreeMap<String, Vec<String>> = BTreeMap::new();
    let mut tier: Option<String> = None;
    for line in main.lines() {
        let line = line.trim();
        let decl = line
            .strip_prefix("pub(crate) mod ")
            .or_else(|| line.strip_prefix("mod "));
        if let Some(name) = decl.and_then(|d| d.strip_suffix(" {")) {
            tier = Some(name.to_owned());
        } else if line == "}" {
            tier = None;
        } else if let (Some(tier), Some(name)) = (&tier, decl.and_then(|d| d.strip_suffix(';'))) {
            declared
                .entry(tier.clone())
                .or_default()
                .push(name.to_owned());
        }
    }
    declared
}

#[test]
fn every_test_module_is_in_a_tier_that_has_what_it_needs() {
    let it = Path::new(env!("CARGO_MANIFEST_DIR")).join("tests/it");
    let problems = tier_problems(&it);
    assert!(problems.is_empty(), "{}", problems.join("\n"));
    // Each tier holds areas: an empty one would check nothing.
    let declared = declared_modules(&std::fs::read_to_string(it.join("main.rs")).unwrap());
    for (tier, _) in TIERS {
        assert!(
            declared.get(tier).is_some_and(|m| !m.is_empty()),
            "{tier}: {declared:?}"
        );
    }
}

#[test]
fn a_module_outside_the_tiers_or_above_its_tier_is_found() {
    let dir = tempfile::tempdir().unwrap();
    let it = dir.path();
    for (tier, _) in TIERS {
        std::fs::create_dir_all(it.join(tier)).unwrap();
    }
    std::fs::create_dir_all(it.join("common")).unwrap();
    std::fs::write(
        it.join("main.rs"),
        "mod common;\n\nmod pure {\n    mod fine;\n    mod sly;\n    mod gone;\n}\n\n\
         mod local {\n    pub(crate) mod builds;\n}\n\nmod docker {\n    mod daemon;\n}\n",
    )
    .unwrap();
    std::fs::write(
        it.join("pure/fine.rs"),
        "fn f() { crate::common::git(); }\n",
    )
    .unwrap();
    std::fs::write(it.join("pure/sly.rs"), "fn f() { common::docker(); }\n").unwrap();
    std::fs::write(it.join("pure/forgotten.rs"), "#[test]\nfn t() {}\n").unwrap();
    std::fs::write(
        it.join("local/builds.rs"),
        "fn f() { common::offline_build(p); }\n",
    )
    .unwrap();
    std::fs::write(
        it.join("docker/daemon.rs"),
        "fn f() { Cluster::start(); crate::remote::have_moto(); }\n",
    )
    .unwrap();
    std::fs::write(it.join("stray.rs"), "").unwrap();
    std::fs::create_dir_all(it.join("slow")).unwrap();
    let mut problems = tier_problems(it);
    problems.sort();
    let mut expected = vec![
        "docker::daemon uses `Cluster::start`, which needs the tier `services`: move it there",
        "docker::daemon uses `crate::remote::`, which needs the tier `services`: move it there",
        "docker::daemon uses `have_moto`, which needs the tier `services`: move it there",
        "main.rs declares pure::gone, which has no file",
        "pure/forgotten.rs is not declared in main.rs's `mod pure`: its tests never run",
        "pure::sly uses `common::docker()`, which needs the tier `docker`: move it there",
        "slow/ is no tier ([\"pure\", \"local\", \"docker\", \"services\"])",
        "stray.rs is in no tier: move it into a tier's folder",
    ];
    expected.sort();
    assert_eq!(problems, expected);
}
