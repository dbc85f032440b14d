//! `report.html`: the report's rows as one self-contained page (inline SVG charts and CSS, a few
//! lines of script that sort the per-repository table; no request leaves the file, which its
//! Content-Security-Policy also forbids), rendered with minijinja from `report.html.j2`.

use serde::Serialize;

use super::Row;
use super::svg::{Chart, Scale, Series};
use r2e_core::error::{Error, Result};

/// One chart of a section, as inline SVG (escaped where it was drawn).
#[derive(Serialize)]
struct Figure {
    svg: minijinja::Value,
    /// What it shows, for a reader.
    caption: String,
}

#[derive(Serialize)]
struct Section {
    title: String,
    figures: Vec<Figure>,
}

/// A dataset's header line.
#[derive(Serialize)]
struct Head {
    variant: String,
    version: String,
    repos: usize,
    candidates: u64,
    valid: u64,
    instances: u64,
}

/// A setting's values, a column per dataset; `differs` when they are not all the same.
#[derive(Serialize)]
struct SettingLine {
    key: String,
    values: Vec<String>,
    differs: bool,
}

/// A row of the per-repository table; `yield` is instances per candidate.
#[derive(Serialize)]
struct RepoLine {
    variant: String,
    repo: String,
    functions: u64,
    candidates: u64,
    excluded: u64,
    valid: Option<u64>,
    instances: Option<u64>,
    #[serde(rename = "yield")]
    yield_: Option<f64>,
    yield_text: String,
}

fn figure(chart: &Chart, lines: bool, caption: &str) -> Figure {
    let svg = if lines { chart.lines() } else { chart.bars() };
    Figure {
        svg: minijinja::Value::from_safe_string(svg),
        caption: caption.to_owned(),
    }
}

/// An id for a chart: its kind and the dataset's name, with anything but letters, digits,
/// `-` and `_` replaced.
fn chart_id(kind: &str, variant: &str) -> String {
    let clean: String = variant
        .chars()
        .map(|c| {
            if c.is_ascii_alphanumeric() || c == '-' || c == '_' {
                c
            } else {
                '_'
            }
        })
        .collect();
    format!("{kind}-{clean}")
}

/// Bucket names in their numeric order: `0`, `1-2`, `<100`, `>=1000`, `>10` by their number.
fn bucket_order(name: &str) -> f64 {
    let (bias, rest) = if let Some(r) = name.strip_prefix(">=") {
        (0.0, r)
    } else if let Some(r) = name.strip_prefix('>') {
        (0.5, r)
    } else if let Some(r) = name.strip_prefix('<') {
        (-0.5, r)
    } else {
        (0.0, name)
    };
    let digits: String = rest.chars().take_while(char::is_ascii_digit).collect();
    digits.parse::<f64>().map_or(f64::MAX, |n| n + bias)
}

const BIN_NAMES: [&str; 10] = [
    "0–10%",
    "10–20%",
    "20–30%",
    "30–40%",
    "40–50%",
    "50–60%",
    "60–70%",
    "70–80%",
    "80–90%",
    "90–100%",
];

/// The sections of the page: the harnesses, each dataset's evaluation, and each dataset's
/// environments and build time.
fn sections(rows: &[Row]) -> Vec<Section> {
    let mut out = vec![Section {
        title: "Harnesses".into(),
        figures: harnesses(rows),
    }];
    for r in rows {
        if let Some(t) = &r.evaluation {
            out.push(Section {
                title: format!("Evaluation of `{}`", r.variant),
                figures: evaluation(r, t),
            });
        }
    }
    out.extend(rows.iter().filter_map(build_cost));
    out
}

/// The harnesses' charts: validity, failure classes, coverage, mutation score, stability.
fn harnesses(rows: &[Row]) -> Vec<Figure> {
    let variants: Vec<String> = rows.iter().map(|r| r.variant.clone()).collect();
    let mut harnesses = Vec::new();
    harnesses.push(figure(
        &Chart {
            id: "validity",
            title: "Valid harnesses and their mean branch coverage, per dataset (R2E's Table 1)",
            x_label: "dataset",
            y_label: "share",
            categories: variants.clone(),
            series: vec![
                Series {
                    name: "valid".into(),
                    values: rows
                        .iter()
                        .map(|r| r.all.valid_percent.map(|p| p / 100.0))
                        .collect(),
                },
                Series {
                    name: "mean coverage of valid".into(),
                    values: rows.iter().map(|r| r.all.mean_coverage).collect(),
                },
                Series {
                    name: "valid, in-file".into(),
                    values: rows
                        .iter()
                        .map(|r| r.in_file.valid_percent.map(|p| p / 100.0))
                        .collect(),
                },
                Series {
                    name: "valid, out-of-file".into(),
                    values: rows
                        .iter()
                        .map(|r| r.out_of_file.valid_percent.map(|p| p / 100.0))
                        .collect(),
                },
            ],
            scale: Scale::Share,
        },
        false,
        "Valid: candidates whose harness passed self-equivalence in the sandbox. Coverage: \
         branch coverage (line coverage for a function without branches) of the valid ones.",
    ));
    // Counts by a category (failure class, why no test), one series per variant.
    let by_category = |id: &'static str,
                       title: &'static str,
                       x_label: &'static str,
                       counts: &dyn Fn(&Row) -> &std::collections::BTreeMap<String, u64>,
                       caption: &str|
     -> Option<Figure> {
        let categories: Vec<String> = rows
            .iter()
            .flat_map(|r| counts(r).keys().cloned())
            .collect::<std::collections::BTreeSet<_>>()
            .into_iter()
            .collect();
        (!categories.is_empty()).then(|| {
            figure(
                &Chart {
                    id,
                    title,
                    x_label,
                    y_label: "candidates",
                    series: rows
                        .iter()
                        .map(|r| Series {
                            name: r.variant.clone(),
                            values: categories
                                .iter()
                                .map(|c| Some(counts(r).get(c).copied().unwrap_or(0) as f64))
                                .collect(),
                        })
                        .collect(),
                    categories,
                    scale: Scale::Count,
                },
                false,
                caption,
            )
        })
    };
    harnesses.extend(by_category(
        "failures",
        "Invalid harnesses by failure class",
        "failure class",
        &|r| &r.failure_classes,
        "Why a candidate got no valid harness (`harnesses.jsonl`'s `failure_class`).",
    ));
    harnesses.extend(by_category(
        "no-tests",
        "Harnesses with no test, by why",
        "why",
        &|r| &r.no_tests,
        "Why a candidate's harness has no test at all (`harnesses.jsonl`'s `no_tests`): every test \
         dropped as unstable, no call that a test can keep, every call at its limit, the import, \
         no input, or the explorer itself.",
    ));
    let bins = |f: &dyn Fn(&Row) -> Option<Vec<u64>>| -> Vec<Series> {
        rows.iter()
            .filter_map(|r| {
                Some(Series {
                    name: r.variant.clone(),
                    values: f(r)?.iter().map(|&n| Some(n as f64)).collect(),
                })
            })
            .collect()
    };
    harnesses.push(figure(
        &Chart {
            id: "coverage",
            title: "Valid harnesses by branch coverage",
            x_label: "branch coverage",
            y_label: "harnesses",
            categories: BIN_NAMES.iter().map(|s| (*s).to_owned()).collect(),
            series: bins(&|r| Some(r.coverage_bins.clone())),
            scale: Scale::Count,
        },
        false,
        "Each bin holds its lower bound; 100% is in the last.",
    ));
    let mutation = bins(&|r| r.mutation.as_ref().map(|m| m.score_bins.clone()));
    if !mutation.is_empty() {
        harnesses.push(figure(
            &Chart {
                id: "mutation",
                title: "Instances by mutation score",
                x_label: "built-in mutants of the reference killed",
                y_label: "instances",
                categories: BIN_NAMES.iter().map(|s| (*s).to_owned()).collect(),
                series: mutation,
                scale: Scale::Count,
            },
            false,
            "How strong each instance's harness is: the share of built-in mutants of the \
             reference its tests tell apart (stage `mutate`).",
        ));
    }
    let stable = bins(&|r| {
        r.stability.as_ref().map(|s| {
            ["0", "1", "2", "3+"]
                .iter()
                .map(|k| s.instances_by_dropped.get(*k).copied().unwrap_or(0))
                .collect()
        })
    });
    if !stable.is_empty() {
        harnesses.push(figure(
            &Chart {
                id: "stability",
                title: "Instances by tests dropped as unstable",
                x_label: "tests dropped",
                y_label: "instances",
                categories: ["0", "1", "2", "3+"]
                    .iter()
                    .map(|s| (*s).to_owned())
                    .collect(),
                series: stable,
                scale: Scale::Count,
            },
            false,
            "A test whose runs of the reference disagreed (`[validate] repeats`) is dropped.",
        ));
    }
    // `[bugfix]`: the tasks per depth (and origin), for the datasets that have them.
    let kinds = [
        ("mutant", "0"),
        ("mutant", "1"),
        ("history", "0"),
        ("history", "1"),
    ];
    let tasks = bins(&|r| {
        r.bugfix.as_ref().map(|b| {
            kinds
                .iter()
                .map(|(origin, depth)| {
                    b.per_origin_depth
                        .get(&format!("{origin} {depth}"))
                        .copied()
                        .unwrap_or(0)
                })
                .collect()
        })
    });
    if !tasks.is_empty() {
        harnesses.push(figure(
            &Chart {
                id: "bugfix",
                title: "Bug-fix tasks by origin and depth",
                x_label: "origin, depth",
                y_label: "tasks",
                categories: kinds
                    .iter()
                    .map(|(origin, depth)| format!("{origin}, depth {depth}"))
                    .collect(),
                series: tasks,
                scale: Scale::Count,
            },
            false,
            "`[bugfix]` (docs/bugfix.md): broken states the harnesses catch on their stable \
             tests; depth 1 when the bug is in a function the caught one calls.",
        ));
    }
    harnesses
}

/// One dataset's environments and build time: where the last build's time went, and each
/// environment's size; none when the build recorded neither.
fn build_cost(r: &Row) -> Option<Section> {
    if r.times.is_none() && r.env_bytes.is_empty() {
        return None;
    }
    let mut figures = Vec::new();
    let times = r.times.as_deref().unwrap_or_default();
    let id = chart_id("time", &r.variant);
    let title = format!("Where the last build's time went in `{}`", r.variant);
    let stages = ["env", "generate", "validate", "mutate"];
    if !times.is_empty() {
        figures.push(figure(
            &Chart {
                id: &id,
                title: &title,
                x_label: "repository",
                y_label: "seconds",
                categories: times.iter().map(|t| t.repo.clone()).collect(),
                series: stages
                    .iter()
                    .enumerate()
                    .map(|(i, name)| Series {
                        name: (*name).to_owned(),
                        values: times
                            .iter()
                            .map(|t| Some(t.stages()[i].1.seconds))
                            .collect(),
                    })
                    .collect(),
                scale: Scale::Count,
            },
            false,
            "Seconds of each repository's work per stage in the last build that ran \
             (`.r2e/timings.json`); work taken from the cache costs about 0.",
        ));
    }
    if !r.env_bytes.is_empty() {
        let id = chart_id("envsize", &r.variant);
        let title = format!("Environment size per repository ({})", r.variant);
        figures.push(figure(
            &Chart {
                id: &id,
                title: &title,
                x_label: "repository",
                y_label: "MiB",
                categories: r.env_bytes.keys().cloned().collect(),
                series: vec![Series {
                    name: "environment".into(),
                    values: r
                        .env_bytes
                        .values()
                        .map(|&b| Some(b as f64 / f64::from(1u32 << 20)))
                        .collect(),
                }],
                scale: Scale::Count,
            },
            false,
            "Each repository's environment on the disk (its folder in the cache, which \
             the local and the Docker backend both run).",
        ));
    }
    Some(Section {
        title: format!("Environments and build time of `{}`", r.variant),
        figures,
    })
}

/// The evaluation's charts of one dataset.
fn evaluation(r: &Row, t: &r2e_core::records::EvalTables) -> Vec<Figure> {
    let mut figures = Vec::new();
    let models: Vec<String> = t.overall.iter().map(|p| p.model.clone()).collect();
    let ks = super::pass_ks(&t.overall);
    let id = chart_id("passk", &r.variant);
    let title = format!("pass@k per model ({})", r.variant);
    figures.push(figure(
        &Chart {
            id: &id,
            title: &title,
            x_label: "model",
            y_label: "pass@k",
            categories: models.clone(),
            series: ks
                .iter()
                .map(|k| Series {
                    name: k.clone(),
                    values: t.overall.iter().map(|p| p.pass.get(k).copied()).collect(),
                })
                .collect(),
            scale: Scale::Share,
        },
        false,
        "The unbiased estimator over every instance; samples the check could not judge \
         (`error`) are left out.",
    ));
    // pass@1 over the groups of a table, a series per model.
    let by_group =
        |kind: &str, title: &str, x: &str, rows: &[r2e_core::records::PassRow], numeric: bool| {
            let mut groups: Vec<String> = Vec::new();
            for p in rows {
                if !groups.contains(&p.group) {
                    groups.push(p.group.clone());
                }
            }
            if numeric {
                groups.sort_by(|a, b| bucket_order(a).total_cmp(&bucket_order(b)));
            }
            let id = chart_id(kind, &r.variant);
            let title = format!("{title} ({})", r.variant);
            let chart = Chart {
                id: &id,
                title: &title,
                x_label: x,
                y_label: "pass@1",
                categories: groups.clone(),
                series: models
                    .iter()
                    .map(|m| Series {
                        name: m.clone(),
                        values: groups
                            .iter()
                            .map(|g| {
                                rows.iter()
                                    .find(|p| &p.model == m && &p.group == g)
                                    .and_then(|p| p.pass.get("pass@1").copied())
                            })
                            .collect(),
                    })
                    .collect(),
                scale: Scale::Share,
            };
            figure(&chart, false, "")
        };
    let mut add = |f: Figure, caption: &str| {
        figures.push(Figure {
            caption: caption.to_owned(),
            ..f
        });
    };
    add(
        by_group(
            "deps",
            "pass@1 by the reference's dependencies (R2E's Fig. 4)",
            "dependencies in the slice",
            &t.by_deps,
            true,
        ),
        "Instances grouped by the size of the reference's slice.",
    );
    add(
        by_group(
            "tokens",
            "pass@1 by the reference's length in tokens (R2E's Fig. 12)",
            "tokens of the reference",
            &t.by_tokens,
            true,
        ),
        "Instances grouped by the reference's own length.",
    );
    add(
        by_group(
            "files",
            "pass@1, single- and multi-file (R2E's Fig. 13)",
            "where the slice lies",
            &t.by_file,
            false,
        ),
        "Single-file: the reference's slice stays within its own file.",
    );
    if !t.by_cutoff.is_empty() {
        add(
            by_group(
                "unseen",
                "pass@1 on all instances and on those created after the model's cutoff",
                "instances",
                &t.by_cutoff,
                false,
            ),
            "Unseen: instances whose function was created after the model's `cutoff`.",
        );
    }
    if !t.repair.is_empty() {
        let rounds = t
            .repair
            .iter()
            .map(|c| c.fixed_by_round.len())
            .max()
            .unwrap_or(0);
        let id = chart_id("repair", &r.variant);
        let title = format!(
            "Self-repair with the harness's feedback (R2E's Fig. 5; {})",
            r.variant
        );
        figures.push(figure(
            &Chart {
                id: &id,
                title: &title,
                x_label: "repair round",
                y_label: "failing samples fixed",
                categories: (1..=rounds).map(|n| format!("round {n}")).collect(),
                series: t
                    .repair
                    .iter()
                    .map(|c| Series {
                        name: c.model.clone(),
                        values: c.fixed_by_round.iter().map(|&v| Some(v)).collect(),
                    })
                    .collect(),
                scale: Scale::Share,
            },
            true,
            "Of the samples that failed at first, the share passing by each round.",
        ));
    }
    figures
}

fn heads(rows: &[Row]) -> Vec<Head> {
    rows.iter()
        .map(|r| Head {
            variant: r.variant.clone(),
            version: r.dataset_version.clone().unwrap_or_else(|| "-".into()),
            repos: r.repos.len(),
            candidates: r.all.candidates,
            valid: r.all.valid,
            instances: r.instances,
        })
        .collect()
}

fn setting_lines(rows: &[Row]) -> Vec<SettingLine> {
    let keys: std::collections::BTreeSet<&String> =
        rows.iter().flat_map(|r| r.settings.keys()).collect();
    keys.into_iter()
        .map(|k| {
            let values: Vec<String> = rows
                .iter()
                .map(|r| r.settings.get(k).cloned().unwrap_or_default())
                .collect();
            SettingLine {
                key: k.clone(),
                differs: values.iter().any(|v| v != &values[0]),
                values,
            }
        })
        .collect()
}

fn repo_lines(rows: &[Row]) -> Vec<RepoLine> {
    rows.iter()
        .flat_map(|r| {
            r.repos.iter().map(|repo| {
                let yield_ = repo
                    .instances
                    .filter(|_| repo.candidates > 0)
                    .map(|i| i as f64 / repo.candidates as f64);
                RepoLine {
                    variant: r.variant.clone(),
                    repo: repo.repo.clone(),
                    functions: repo.functions,
                    candidates: repo.candidates,
                    excluded: repo.excluded,
                    valid: repo.harnesses_valid,
                    instances: repo.instances,
                    yield_,
                    yield_text: yield_.map_or_else(|| "-".into(), |y| format!("{:.1}%", y * 100.0)),
                }
            })
        })
        .collect()
}

const TEMPLATE: &str = include_str!("report.html.j2");

/// The page.
pub fn render(rows: &[Row]) -> Result<String> {
    let mut env = minijinja::Environment::new();
    env.set_auto_escape_callback(|_| minijinja::AutoEscape::Html);
    env.add_template("report.html", TEMPLATE)
        .map_err(Error::internal)?;
    env.get_template("report.html")
        .and_then(|t| {
            t.render(minijinja::context! {
                version => env!("CARGO_PKG_VERSION"),
                heads => heads(rows),
                settings => setting_lines(rows),
                sections => sections(rows),
                repos => repo_lines(rows),
            })
        })
        .map_err(Error::internal)
}
