//! Layering tests: the architecture's code map, enforced.
//!
//! ARCHITECTURE.md's code map stacks the workspace's crates bottom up
//! (`r2e-core`, `r2e-python`, `r2e-exec`, `r2e-store`, `r2e-pipeline`, then the `r2e` binary
//! on top). A map that nothing checks drifts, so these tests hold the code to it:
//!
//! - `crates_depend_only_downward`: every dependency (normal, build or dev)
//!   from one workspace member on another is allowed by [`CODE_MAP`], every
//!   member is placed in it, there are at least [`MIN_MEMBERS`] crates besides
//!   the root, and none of them is empty or a mere re-export of another.
//! - `no_module_cycles_within_a_crate`: inside each crate, the module files do
//!   not refer to each other in a cycle (the reference that closes one is a
//!   layering mistake inside the crate, and the first thing to untangle when a
//!   crate is split further).
//! - `only_the_binary_parses_the_command_line`: no library crate depends on
//!   clap; the command line's types live in the `r2e` binary (`src/cli/`).
//! - `targets_without_tests_hold_none`: a target with `test = false` has no
//!   test in its source files, so that setting turns no test off silently.
//!
//! Only the standard library and `serde_json` are used: the dependency graph
//! comes from `cargo metadata`, and the module graph from a small scanner of
//! the source text (comments, string literals and `#[cfg(test)]` items are
//! skipped, `crate::`, `super::` and `self::` paths are followed; see
//! [`module_graph`]).
//!
//! The tests look at the repository root, `CARGO_MANIFEST_DIR`, unless the
//! environment variable `R2E_LAYERS_ROOT` names another checkout (useful to
//! run them against a branch or a snapshot; nothing sets it in CI).

use std::collections::{BTreeMap, BTreeSet, VecDeque};
use std::fmt::Write as _;
use std::fs;
use std::path::{Path, PathBuf};
use std::process::Command;

/// The code map: each workspace package and the workspace packages it may
/// depend on, bottom up. The single place to edit, together with
/// ARCHITECTURE.md's code map, when a crate is added or an edge is allowed.
const CODE_MAP: &[(&str, &[&str])] = &[
    ("r2e-core", &[]),
    ("r2e-python", &["r2e-core"]),
    ("r2e-exec", &["r2e-core", "r2e-python"]),
    ("r2e-store", &["r2e-core"]),
    (
        "r2e-pipeline",
        &["r2e-core", "r2e-python", "r2e-exec", "r2e-store"],
    ),
    (
        "r2e",
        &[
            "r2e-core",
            "r2e-python",
            "r2e-exec",
            "r2e-store",
            "r2e-pipeline",
        ],
    ),
];

/// The fewest workspace members besides the root package.
const MIN_MEMBERS: usize = 4;

/// The fewest `.rs` files a member's `src/` holds (fewer is an empty crate or
/// a façade).
const MIN_FILES: usize = 2;

// ---------------------------------------------------------------------------
// The tests
// ---------------------------------------------------------------------------

#[test]
fn crates_depend_only_downward() {
    let root = root();
    let packages = packages(&root);
    let members: BTreeSet<&str> = packages.iter().map(|p| p.name.as_str()).collect();
    let map: BTreeMap<&str, &[&str]> = CODE_MAP.iter().copied().collect();
    let mut failures = Vec::new();

    for package in &packages {
        if !map.contains_key(package.name.as_str()) {
            failures.push(format!(
                "workspace member `{}` is not in the code map: place it in ARCHITECTURE.md's \
                 code map and in CODE_MAP (tests/it/layers.rs)",
                package.name
            ));
        }
    }
    for name in map.keys() {
        if !members.contains(name) {
            failures.push(format!(
                "the code map lists `{name}`, which is no workspace member: update \
                 ARCHITECTURE.md's code map and CODE_MAP (tests/it/layers.rs)"
            ));
        }
    }

    for package in &packages {
        let Some(allowed) = map.get(package.name.as_str()) else {
            continue;
        };
        for (dep, kind) in &package.deps {
            if members.contains(dep.as_str()) && !allowed.contains(&dep.as_str()) {
                failures.push(format!(
                    "`{}` -> `{dep}` ({kind} dependency) is not allowed by the code map \
                     (`{}` may depend on: {}): remove the dependency, or update \
                     ARCHITECTURE.md's code map and CODE_MAP (tests/it/layers.rs) if the \
                     layering changed",
                    package.name,
                    package.name,
                    if allowed.is_empty() {
                        "nothing".to_string()
                    } else {
                        allowed.join(", ")
                    }
                ));
            }
        }
    }

    let root_manifest = canonical(&root.join("Cargo.toml"));
    let crate_names: BTreeSet<String> = packages.iter().map(|p| p.name.replace('-', "_")).collect();
    let others: Vec<&Package> = packages
        .iter()
        .filter(|p| canonical(&p.manifest) != root_manifest)
        .collect();
    if others.len() < MIN_MEMBERS {
        failures.push(format!(
            "the workspace has {} members besides the root package (want at least {MIN_MEMBERS}): {}",
            others.len(),
            others.iter().map(|p| p.name.as_str()).collect::<Vec<_>>().join(", ")
        ));
    }
    for package in others {
        let src = package.dir().join("src");
        let files = rust_files(&src);
        if files.len() < MIN_FILES {
            failures.push(format!(
                "`{}` has {} .rs file(s) under {} (want at least {MIN_FILES}): an empty crate \
                 or a façade has no place in the code map",
                package.name,
                files.len(),
                shown(&root, &src)
            ));
        }
        let lib = src.join("lib.rs");
        if let Ok(text) = fs::read_to_string(&lib) {
            let toks = tokenize(&blank(&text));
            for (i, t) in toks.iter().enumerate() {
                if t.is("pub") && toks.get(i + 1).is_some_and(|t| t.is("use")) {
                    let mut j = i + 2;
                    while toks.get(j).is_some_and(|t| t.is("::") || t.is("{")) {
                        j += 1;
                    }
                    if let Some(t) = toks.get(j).filter(|t| crate_names.contains(&t.text)) {
                        failures.push(format!(
                            "{}:{}: `{}` re-exports another member (`pub use {}`): depend on \
                             that crate where it is used instead",
                            shown(&root, &lib),
                            t.line,
                            package.name,
                            t.text
                        ));
                    }
                }
            }
        }
    }

    assert!(
        failures.is_empty(),
        "the crates break the code map:\n  {}",
        failures.join("\n  ")
    );
}

#[test]
fn only_the_binary_parses_the_command_line() {
    let root = root();
    let root_manifest = canonical(&root.join("Cargo.toml"));
    let packages = packages(&root);
    let mut failures = Vec::new();
    for package in packages
        .iter()
        .filter(|p| canonical(&p.manifest) != root_manifest)
    {
        for (dep, kind) in &package.deps {
            if dep == "clap" || dep.starts_with("clap_") {
                failures.push(format!(
                    "`{}` -> `{dep}` ({kind} dependency): the command line is the `r2e` \
                     binary's (`src/cli/`); give the library plain types it converts to",
                    package.name
                ));
            }
        }
    }
    assert!(
        packages
            .iter()
            .any(|p| canonical(&p.manifest) == root_manifest
                && p.deps.iter().any(|(dep, _)| dep == "clap")),
        "the root package parses the command line with clap"
    );
    assert!(failures.is_empty(), "{}", failures.join("\n"));
}

#[test]
fn no_module_cycles_within_a_crate() {
    let root = root();
    let mut src_dirs = vec![root.join("src")];
    if let Ok(entries) = fs::read_dir(root.join("crates")) {
        let mut more: Vec<PathBuf> = entries
            .flatten()
            .map(|e| e.path().join("src"))
            .filter(|p| p.is_dir())
            .collect();
        more.sort();
        src_dirs.extend(more);
    }
    let mut report = String::new();
    let mut count = 0;
    for src in src_dirs.iter().filter(|p| p.is_dir()) {
        let graph = module_graph(src);
        for cycle in cycles(&graph) {
            count += 1;
            report.push_str(&describe_cycle(&root, src, &graph, &cycle));
        }
    }
    assert!(
        count == 0,
        "{count} module cycle(s) within a crate (one line per reference to untangle):\n{report}"
    );
}

#[test]
fn targets_without_tests_hold_none() {
    let root = root();
    let mut failures = Vec::new();
    for package in packages(&root) {
        for target in package.targets.iter().filter(|t| !t.test) {
            for file in target_files(&target.src_path) {
                let Ok(text) = fs::read_to_string(&file) else {
                    continue;
                };
                for (marker, line) in test_markers(&tokenize(&blank(&text))) {
                    failures.push(format!(
                        "{}:{line}: `{marker}` in target `{}` of `{}`, which has `test = false`, \
                         so it never runs: move it to a target that is tested, or drop \
                         `test = false`",
                        shown(&root, &file),
                        target.name,
                        package.name
                    ));
                }
            }
        }
    }
    assert!(
        failures.is_empty(),
        "tests turned off by `test = false`:\n  {}",
        failures.join("\n  ")
    );
}

// ---------------------------------------------------------------------------
// The workspace, from `cargo metadata`
// ---------------------------------------------------------------------------

/// The checkout under test: `R2E_LAYERS_ROOT` if set, else this package's root.
fn root() -> PathBuf {
    match std::env::var_os("R2E_LAYERS_ROOT") {
        Some(dir) if !dir.is_empty() => PathBuf::from(dir),
        _ => PathBuf::from(env!("CARGO_MANIFEST_DIR")),
    }
}

struct Package {
    name: String,
    manifest: PathBuf,
    /// Each dependency's package name and kind (`normal`, `build`, `dev`).
    deps: Vec<(String, String)>,
    targets: Vec<Target>,
}

impl Package {
    fn dir(&self) -> &Path {
        self.manifest.parent().unwrap_or(Path::new("."))
    }
}

struct Target {
    name: String,
    src_path: PathBuf,
    test: bool,
}

/// The workspace's packages, from `cargo metadata --no-deps`.
fn packages(root: &Path) -> Vec<Package> {
    let cargo = std::env::var_os("CARGO").unwrap_or_else(|| "cargo".into());
    let out = Command::new(&cargo)
        .args([
            "metadata",
            "--format-version",
            "1",
            "--no-deps",
            "--offline",
        ])
        .current_dir(root)
        .output()
        .unwrap_or_else(|e| panic!("cannot run {cargo:?} metadata: {e}"));
    assert!(
        out.status.success(),
        "cargo metadata failed in {}:\n{}",
        root.display(),
        String::from_utf8_lossy(&out.stderr)
    );
    let meta: serde_json::Value =
        serde_json::from_slice(&out.stdout).expect("cargo metadata prints JSON");
    let str_of = |v: &serde_json::Value| v.as_str().unwrap_or_default().to_string();
    let members: BTreeSet<String> = meta["workspace_members"]
        .as_array()
        .expect("workspace_members")
        .iter()
        .map(str_of)
        .collect();
    meta["packages"]
        .as_array()
        .expect("packages")
        .iter()
        .filter(|p| members.contains(&str_of(&p["id"])))
        .map(|p| Package {
            name: str_of(&p["name"]),
            manifest: PathBuf::from(str_of(&p["manifest_path"])),
            deps: p["dependencies"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|d| {
                    let kind = d["kind"].as_str().unwrap_or("normal").to_string();
                    (str_of(&d["name"]), kind)
                })
                .collect(),
            targets: p["targets"]
                .as_array()
                .into_iter()
                .flatten()
                .map(|t| Target {
                    name: str_of(&t["name"]),
                    src_path: PathBuf::from(str_of(&t["src_path"])),
                    test: t["test"].as_bool().unwrap_or(true),
                })
                .collect(),
        })
        .collect()
}

fn canonical(path: &Path) -> PathBuf {
    fs::canonicalize(path).unwrap_or_else(|_| path.to_path_buf())
}

/// `path` relative to `root` where it is inside it, for messages.
fn shown(root: &Path, path: &Path) -> String {
    let (root, path) = (canonical(root), canonical(path));
    path.strip_prefix(&root)
        .unwrap_or(&path)
        .display()
        .to_string()
}

/// Every `.rs` file under `dir`, sorted.
fn rust_files(dir: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![dir.to_path_buf()];
    while let Some(d) = todo.pop() {
        let Ok(entries) = fs::read_dir(&d) else {
            continue;
        };
        for entry in entries.flatten() {
            let path = entry.path();
            if path.is_dir() {
                todo.push(path);
            } else if path.extension().is_some_and(|e| e == "rs") {
                out.push(path);
            }
        }
    }
    out.sort();
    out
}

/// The files of the target whose root is `src_path`: the root and the module
/// files it declares with `mod name;`, recursively (a `#[path]` attribute is
/// not followed).
fn target_files(src_path: &Path) -> Vec<PathBuf> {
    let mut out = Vec::new();
    let mut todo = vec![(src_path.to_path_buf(), true)];
    while let Some((file, is_root)) = todo.pop() {
        if out.contains(&file) {
            continue;
        }
        let Ok(text) = fs::read_to_string(&file) else {
            continue;
        };
        let dir = file.parent().unwrap_or(Path::new(".")).to_path_buf();
        let stem = file
            .file_stem()
            .and_then(|s| s.to_str())
            .unwrap_or_default();
        // `a/b.rs` declares its children in `a/b/`; roots and `mod.rs` in their own folder.
        let dir = if is_root || stem == "mod" {
            dir
        } else {
            dir.join(stem)
        };
        for (decl, _) in scan(&tokenize(&blank(&text)), &[]).decls {
            let base = decl.iter().fold(dir.clone(), |d, seg| d.join(seg));
            for candidate in [base.with_extension("rs"), base.join("mod.rs")] {
                if candidate.is_file() {
                    todo.push((candidate, false));
                }
            }
        }
        out.push(file);
    }
    out.sort();
    out
}

// ---------------------------------------------------------------------------
// The module graph of one crate
// ---------------------------------------------------------------------------

/// Where a reference occurs.
#[derive(Debug, Clone, PartialEq, Eq)]
struct Loc {
    file: PathBuf,
    line: usize,
}

/// Module files and the references between them. Modules are named by path
/// from the crate root (`stages::environment`), the root itself as `crate`.
#[derive(Debug, Default)]
struct Graph {
    /// Every module file's name.
    modules: BTreeSet<String>,
    /// `from -> to -> the first place where from refers to to`.
    edges: BTreeMap<String, BTreeMap<String, Loc>>,
}

/// The module graph of the crate whose sources are under `src_dir`.
///
/// Each `.rs` file is a module (`a/b.rs` and `a/b/mod.rs` are `a::b`, a
/// top-level `lib.rs` or `main.rs` the crate root). Each `crate::`, `super::`
/// and `self::` path, in a `use` (grouped ones included) or inline, is an edge
/// to the deepest module file that is a prefix of it. A reference to the
/// module itself, an ancestor or a descendant is no edge: that is how modules
/// are declared and use their parent's items. Comments, string and char
/// literals, and items under `#[cfg(test)]` (a `mod tests { .. }`, a
/// `#[cfg(test)] mod name;` file) are skipped.
fn module_graph(src_dir: &Path) -> Graph {
    struct File {
        path: PathBuf,
        module: Vec<String>,
        scan: Scan,
    }
    let mut files = Vec::new();
    for path in rust_files(src_dir) {
        let Ok(rel) = path.strip_prefix(src_dir) else {
            continue;
        };
        let mut module: Vec<String> = rel
            .iter()
            .map(|s| s.to_string_lossy().trim_end_matches(".rs").to_string())
            .collect();
        if module.last().is_some_and(|m| m == "mod")
            || (module.len() == 1 && (module[0] == "lib" || module[0] == "main"))
        {
            module.pop();
        }
        let Ok(text) = fs::read_to_string(&path) else {
            continue;
        };
        let scan = scan(&tokenize(&blank(&text)), &module);
        files.push(File { path, module, scan });
    }

    // Module files declared only under `#[cfg(test)]` are test code too.
    let test_only: Vec<Vec<String>> = files
        .iter()
        .flat_map(|f| {
            f.scan
                .decls
                .iter()
                .filter(|(_, test)| *test)
                .map(|(decl, _)| [f.module.clone(), decl.clone()].concat())
        })
        .collect();
    files.retain(|f| !test_only.iter().any(|t| f.module.starts_with(t)));

    let known: BTreeSet<Vec<String>> = files.iter().map(|f| f.module.clone()).collect();
    let mut graph = Graph {
        modules: known.iter().map(|m| name(m)).collect(),
        ..Graph::default()
    };
    for file in &files {
        for (path, line) in &file.scan.refs {
            let Some(target) = (0..=path.len())
                .rev()
                .map(|n| &path[..n])
                .find(|p| known.contains(*p))
            else {
                continue;
            };
            if target.starts_with(&file.module) || file.module.starts_with(target) {
                continue;
            }
            graph
                .edges
                .entry(name(&file.module))
                .or_default()
                .entry(name(target))
                .or_insert_with(|| Loc {
                    file: file.path.clone(),
                    line: *line,
                });
        }
    }
    graph
}

fn name(module: &[String]) -> String {
    if module.is_empty() {
        "crate".to_string()
    } else {
        module.join("::")
    }
}

/// The module cycles of `graph`, as a to-do list: the strongly connected
/// components are found (Tarjan), and for each edge inside one, the shortest
/// cycle through it is listed. So every reference that takes part in a cycle
/// shows up, without the exponential count of all elementary cycles. Each
/// cycle starts at its smallest module and goes back to it from its last one;
/// the list is sorted and has no duplicates.
fn cycles(graph: &Graph) -> Vec<Vec<String>> {
    let nodes: Vec<&str> = graph.modules.iter().map(String::as_str).collect();
    let index: BTreeMap<&str, usize> = nodes.iter().enumerate().map(|(i, n)| (*n, i)).collect();
    let succ: Vec<Vec<usize>> = nodes
        .iter()
        .map(|n| {
            graph
                .edges
                .get(*n)
                .into_iter()
                .flat_map(|to| to.keys())
                .filter_map(|t| index.get(t.as_str()).copied())
                .collect()
        })
        .collect();

    let component = tarjan(&succ);
    let mut found = BTreeSet::new();
    for (u, outs) in succ.iter().enumerate() {
        for &v in outs
            .iter()
            .filter(|&&v| v != u && component[v] == component[u])
        {
            // Shortest path v -> .. -> u inside the component closes u -> v.
            let mut prev = vec![usize::MAX; nodes.len()];
            prev[v] = v;
            let mut queue = VecDeque::from([v]);
            while let Some(x) = queue.pop_front() {
                if x == u {
                    break;
                }
                for &y in &succ[x] {
                    if prev[y] == usize::MAX && component[y] == component[u] {
                        prev[y] = x;
                        queue.push_back(y);
                    }
                }
            }
            let mut back = vec![u];
            while let Some(&x) = back.last().filter(|&&x| x != v) {
                back.push(prev[x]);
            }
            back.reverse(); // v .. u
            let mut cycle: Vec<String> = std::iter::once(u)
                .chain(back.into_iter().filter(|&x| x != u))
                .map(|x| nodes[x].to_string())
                .collect();
            let smallest = (0..cycle.len()).min_by_key(|&i| &cycle[i]).unwrap_or(0);
            cycle.rotate_left(smallest);
            found.insert(cycle);
        }
    }
    found.into_iter().collect()
}

/// Tarjan's strongly connected components: each node's component number.
fn tarjan(succ: &[Vec<usize>]) -> Vec<usize> {
    struct State<'a> {
        succ: &'a [Vec<usize>],
        index: Vec<usize>,
        low: Vec<usize>,
        on_stack: Vec<bool>,
        stack: Vec<usize>,
        next: usize,
        component: Vec<usize>,
        components: usize,
    }
    fn visit(s: &mut State, v: usize) {
        s.index[v] = s.next;
        s.low[v] = s.next;
        s.next += 1;
        s.stack.push(v);
        s.on_stack[v] = true;
        for i in 0..s.succ[v].len() {
            let w = s.succ[v][i];
            if s.index[w] == usize::MAX {
                visit(s, w);
                s.low[v] = s.low[v].min(s.low[w]);
            } else if s.on_stack[w] {
                s.low[v] = s.low[v].min(s.index[w]);
            }
        }
        if s.low[v] == s.index[v] {
            while let Some(w) = s.stack.pop() {
                s.on_stack[w] = false;
                s.component[w] = s.components;
                if w == v {
                    break;
                }
            }
            s.components += 1;
        }
    }
    let n = succ.len();
    let mut s = State {
        succ,
        index: vec![usize::MAX; n],
        low: vec![0; n],
        on_stack: vec![false; n],
        stack: Vec::new(),
        next: 0,
        component: vec![0; n],
        components: 0,
    };
    for v in 0..n {
        if s.index[v] == usize::MAX {
            visit(&mut s, v);
        }
    }
    s.component
}

/// `a -> b -> a` and, for each edge, where the reference is.
fn describe_cycle(root: &Path, src: &Path, graph: &Graph, cycle: &[String]) -> String {
    let mut out = format!(
        "  [{}] {} -> {}\n",
        shown(root, src),
        cycle.join(" -> "),
        cycle[0]
    );
    for (i, from) in cycle.iter().enumerate() {
        let to = &cycle[(i + 1) % cycle.len()];
        if let Some(loc) = graph.edges.get(from).and_then(|e| e.get(to)) {
            let _ = writeln!(
                out,
                "      {from} -> {to}: {}:{}",
                shown(root, &loc.file),
                loc.line
            );
        }
    }
    out
}

// ---------------------------------------------------------------------------
// A small scanner of Rust source
// ---------------------------------------------------------------------------

/// `src` with comments blanked and each string, byte-string or char literal
/// turned into a `0` followed by blanks; line breaks are kept, so lines still
/// count right.
fn blank(src: &str) -> String {
    let c: Vec<char> = src.chars().collect();
    let n = c.len();
    let mut out = String::with_capacity(src.len());
    let put_blank = |out: &mut String, ch: char| out.push(if ch == '\n' { '\n' } else { ' ' });
    let literal = |out: &mut String, chars: &[char]| {
        out.push('0');
        for &ch in chars.iter().skip(1) {
            put_blank(out, ch);
        }
    };
    let ident = |ch: char| ch.is_alphanumeric() || ch == '_';
    let at = |i: usize| c.get(i).copied().unwrap_or('\0');
    let mut i = 0;
    while i < n {
        let ch = c[i];
        let after_ident = i > 0 && ident(c[i - 1]);
        if ch == '/' && at(i + 1) == '/' {
            while i < n && c[i] != '\n' {
                out.push(' ');
                i += 1;
            }
            continue;
        }
        if ch == '/' && at(i + 1) == '*' {
            let mut depth = 0;
            while i < n {
                if c[i] == '/' && at(i + 1) == '*' {
                    depth += 1;
                    out.push_str("  ");
                    i += 2;
                } else if c[i] == '*' && at(i + 1) == '/' {
                    depth -= 1;
                    out.push_str("  ");
                    i += 2;
                    if depth == 0 {
                        break;
                    }
                } else {
                    put_blank(&mut out, c[i]);
                    i += 1;
                }
            }
            continue;
        }
        // Raw strings: r"..", r#".."#, br".., cr"..
        if !after_ident && (ch == 'r' || (matches!(ch, 'b' | 'c') && at(i + 1) == 'r')) {
            let mut j = i + if ch == 'r' { 1 } else { 2 };
            let mut hashes = 0;
            while at(j) == '#' {
                hashes += 1;
                j += 1;
            }
            if at(j) == '"' {
                j += 1;
                while j < n && !(c[j] == '"' && (1..=hashes).all(|k| at(j + k) == '#')) {
                    j += 1;
                }
                let end = (j + 1 + hashes).min(n);
                literal(&mut out, &c[i..end]);
                i = end;
                continue;
            }
        }
        if ch == '"' {
            let mut j = i + 1;
            while j < n && c[j] != '"' {
                j += if c[j] == '\\' { 2 } else { 1 };
            }
            let end = (j + 1).min(n);
            literal(&mut out, &c[i..end]);
            i = end;
            continue;
        }
        if ch == '\'' {
            // A char literal ('x', '\n', '\'', '\u{..}'), else a lifetime or label.
            let end = if at(i + 1) == '\\' {
                (i + 3..(i + 14).min(n))
                    .find(|&j| c[j] == '\'')
                    .map(|j| j + 1)
            } else if at(i + 2) == '\'' && at(i + 1) != '\'' {
                Some(i + 3)
            } else {
                None
            };
            if let Some(end) = end {
                literal(&mut out, &c[i..end]);
                i = end;
                continue;
            }
        }
        out.push(ch);
        i += 1;
    }
    out
}

/// A token of blanked source: an identifier (or number), `::`, or one
/// punctuation character.
#[derive(Debug, Clone)]
struct Tok {
    text: String,
    line: usize,
}

impl Tok {
    fn is(&self, s: &str) -> bool {
        self.text == s
    }
    fn is_ident(&self) -> bool {
        self.text
            .chars()
            .next()
            .is_some_and(|c| c.is_alphanumeric() || c == '_')
    }
}

fn tokenize(blanked: &str) -> Vec<Tok> {
    let c: Vec<char> = blanked.chars().collect();
    let mut toks = Vec::new();
    let mut line = 1;
    let mut i = 0;
    while i < c.len() {
        let ch = c[i];
        if ch == '\n' {
            line += 1;
            i += 1;
        } else if ch.is_whitespace() {
            i += 1;
        } else if ch.is_alphanumeric() || ch == '_' {
            let start = i;
            while i < c.len() && (c[i].is_alphanumeric() || c[i] == '_') {
                i += 1;
            }
            toks.push(Tok {
                text: c[start..i].iter().collect(),
                line,
            });
        } else if ch == ':' && c.get(i + 1) == Some(&':') {
            toks.push(Tok {
                text: "::".into(),
                line,
            });
            i += 2;
        } else {
            toks.push(Tok {
                text: ch.to_string(),
                line,
            });
            i += 1;
        }
    }
    toks
}

/// What a file refers to and declares.
#[derive(Debug, Default)]
struct Scan {
    /// Absolute paths (from the crate root, without `crate`) of the
    /// `crate::`, `super::` and `self::` references outside test code, with
    /// their line.
    refs: Vec<(Vec<String>, usize)>,
    /// `mod name;` declarations: the path from the file's module (through any
    /// inline modules) and whether it is test-only.
    decls: Vec<(Vec<String>, bool)>,
}

/// Scans the tokens of the file whose module is `module`.
fn scan(t: &[Tok], module: &[String]) -> Scan {
    let test = test_mask(t);
    let is = |i: usize, s: &str| t.get(i).is_some_and(|t| t.is(s));
    let mut out = Scan::default();
    let mut inline: Vec<(String, usize)> = Vec::new(); // inline `mod name {`, and its depth
    let mut depth = 0;
    let mut i = 0;
    while i < t.len() {
        let here = |inline: &[(String, usize)]| -> Vec<String> {
            let inner = inline.iter().map(|(m, _)| m.clone());
            module.iter().cloned().chain(inner).collect()
        };
        if t[i].is("{") {
            depth += 1;
        } else if t[i].is("}") {
            if inline.last().is_some_and(|(_, d)| *d == depth) {
                inline.pop();
            }
            depth -= 1;
        } else if t[i].is("mod") && t.get(i + 1).is_some_and(Tok::is_ident) {
            let name = t[i + 1].text.clone();
            if is(i + 2, "{") {
                inline.push((name, depth + 1));
                i += 2; // the `{` is counted next
                continue;
            } else if is(i + 2, ";") {
                let decl = inline
                    .iter()
                    .map(|(m, _)| m.clone())
                    .chain([name])
                    .collect();
                out.decls.push((decl, test[i]));
            }
        } else if t[i].is("use") {
            let end = (i..t.len()).find(|&j| t[j].is(";")).unwrap_or(t.len());
            if !test[i] {
                let mut leaves = Vec::new();
                let mut j = i + 1;
                use_tree(&t[..end], &mut j, Vec::new(), &mut leaves);
                for (path, line) in leaves {
                    if let Some(abs) = resolve(&here(&inline), &path) {
                        out.refs.push((abs, line));
                    }
                }
            }
            i = end + 1;
            continue;
        } else if ["crate", "super", "self"].iter().any(|k| t[i].is(k))
            && is(i + 1, "::")
            && !(i > 0 && t[i - 1].is("$"))
        {
            let line = t[i].line;
            let mut path = vec![t[i].text.clone()];
            let mut j = i + 1;
            while is(j, "::") && t.get(j + 1).is_some_and(Tok::is_ident) {
                path.push(t[j + 1].text.clone());
                j += 2;
            }
            if !test[i]
                && let Some(abs) = resolve(&here(&inline), &path)
            {
                out.refs.push((abs, line));
            }
            i = j;
            continue;
        }
        i += 1;
    }
    out
}

/// Parses a use tree from `t[*i]`, pushing each leaf path with its line.
fn use_tree(t: &[Tok], i: &mut usize, prefix: Vec<String>, out: &mut Vec<(Vec<String>, usize)>) {
    let mut path = prefix;
    if t.get(*i).is_some_and(|t| t.is("::")) {
        *i += 1;
    }
    while let Some(tok) = t.get(*i) {
        if tok.is("{") {
            *i += 1;
            while let Some(tok) = t.get(*i) {
                if tok.is("}") {
                    *i += 1;
                    break;
                }
                let before = *i;
                use_tree(t, i, path.clone(), out);
                if t.get(*i).is_some_and(|t| t.is(",")) {
                    *i += 1;
                }
                if *i == before {
                    *i += 1; // unexpected token: step over it
                }
            }
            return;
        } else if tok.is("*") {
            *i += 1;
            out.push((path, tok.line));
            return;
        } else if tok.is_ident() {
            path.push(tok.text.clone());
            *i += 1;
            if t.get(*i).is_some_and(|t| t.is("::")) {
                *i += 1;
                continue;
            }
            if t.get(*i).is_some_and(|t| t.is("as")) {
                *i += 2;
            }
            out.push((path, tok.line));
            return;
        } else {
            return;
        }
    }
}

/// The absolute module path of `path` as written in module `here`, for paths
/// that start with `crate`, `super` or `self`; `None` for other paths.
fn resolve(here: &[String], path: &[String]) -> Option<Vec<String>> {
    let (mut base, mut rest) = match path.first().map(String::as_str) {
        Some("crate") => (Vec::new(), &path[1..]),
        Some("self" | "super") => (here.to_vec(), path),
        _ => return None,
    };
    while let Some(first) = rest.first() {
        match first.as_str() {
            "super" => {
                base.pop()?;
            }
            "self" => {}
            _ => break,
        }
        rest = &rest[1..];
    }
    base.extend(rest.iter().filter(|s| *s != "self").cloned());
    Some(base)
}

/// `true` for each token that belongs to test-only code: an item, statement,
/// field or arm under `#[cfg(test)]`, or the rest of a block after
/// `#![cfg(test)]`.
fn test_mask(t: &[Tok]) -> Vec<bool> {
    let mut mask = vec![false; t.len()];
    let seq = |i: usize, s: &[&str]| {
        s.iter()
            .enumerate()
            .all(|(k, s)| t.get(i + k).is_some_and(|t| t.is(s)))
    };
    let mut i = 0;
    while i < t.len() {
        let end = if seq(i, &["#", "[", "cfg", "(", "test", ")", "]"]) {
            Some(item_end(t, i + 7))
        } else if seq(i, &["#", "!", "[", "cfg", "(", "test", ")", "]"]) {
            Some(block_end(t, i + 8))
        } else {
            None
        };
        if let Some(end) = end {
            mask[i..end].fill(true);
            i = end.max(i + 1);
        } else {
            i += 1;
        }
    }
    mask
}

/// The end (exclusive) of the item or statement starting at `t[i]`.
fn item_end(t: &[Tok], mut i: usize) -> usize {
    // Further attributes.
    while t.get(i).is_some_and(|t| t.is("#")) && t.get(i + 1).is_some_and(|t| t.is("[")) {
        i = matching(t, i + 1, "[", "]");
    }
    const ITEMS: &[&str] = &[
        "mod",
        "fn",
        "impl",
        "struct",
        "enum",
        "union",
        "use",
        "const",
        "static",
        "type",
        "trait",
        "macro_rules",
        "extern",
        "unsafe",
        "async",
    ];
    // In an item, a comma at depth 0 is in generics (`impl<A, B>`); elsewhere
    // (a field, an argument, a match arm) it ends what the attribute covers.
    let mut k = i;
    if t.get(k).is_some_and(|t| t.is("pub")) {
        k += 1;
        if t.get(k).is_some_and(|t| t.is("(")) {
            k = matching(t, k, "(", ")");
        }
    }
    let item = t.get(k).is_some_and(|t| ITEMS.contains(&t.text.as_str()));
    let mut depth = 0usize;
    let mut j = i;
    while let Some(tok) = t.get(j) {
        match tok.text.as_str() {
            "(" | "[" => depth += 1,
            ")" | "]" | "}" if depth == 0 => return j,
            ")" | "]" => depth -= 1,
            "{" if depth == 0 => return matching(t, j, "{", "}"),
            ";" if depth == 0 => return j + 1,
            "," if depth == 0 && !item => return j + 1,
            _ => {}
        }
        j += 1;
    }
    t.len()
}

/// The end of the block that `t[i]` is in: the index of its `}`.
fn block_end(t: &[Tok], i: usize) -> usize {
    let mut depth = 0usize;
    for (j, tok) in t.iter().enumerate().skip(i) {
        if tok.is("{") {
            depth += 1;
        } else if tok.is("}") {
            if depth == 0 {
                return j;
            }
            depth -= 1;
        }
    }
    t.len()
}

/// Past the `close` matching the `open` at `t[i]`.
fn matching(t: &[Tok], i: usize, open: &str, close: &str) -> usize {
    let mut depth = 0usize;
    for (j, tok) in t.iter().enumerate().skip(i) {
        if tok.is(open) {
            depth += 1;
        } else if tok.is(close) {
            depth -= 1;
            if depth == 0 {
                return j + 1;
            }
        }
    }
    t.len()
}

/// The test attributes in the tokens: `#[test]`, `#[tokio::test]` and
/// `#[cfg(test)]`, with their line.
fn test_markers(t: &[Tok]) -> Vec<(&'static str, usize)> {
    let seq = |i: usize, s: &[&str]| {
        s.iter()
            .enumerate()
            .all(|(k, s)| t.get(i + k).is_some_and(|t| t.is(s)))
    };
    let mut out = Vec::new();
    for (i, tok) in t.iter().enumerate() {
        for (marker, toks) in [
            ("#[test]", &["#", "[", "test", "]"][..]),
            ("#[tokio::test]", &["#", "[", "tokio", "::", "test"][..]),
            (
                "#[cfg(test)]",
                &["#", "[", "cfg", "(", "test", ")", "]"][..],
            ),
            (
                "#![cfg(test)]",
                &["#", "!", "[", "cfg", "(", "test", ")", "]"][..],
            ),
        ] {
            if seq(i, toks) {
                out.push((marker, tok.line));
            }
        }
    }
    out
}

// ---------------------------------------------------------------------------
// Tests of the scanner and the cycle finder, on synthetic trees
// ---------------------------------------------------------------------------

/// A temporary `src/` holding `files` (path, text).
fn tree(files: &[(&str, &str)]) -> tempfile::TempDir {
    let dir = tempfile::Builder::new()
        .prefix("r2e-layers-")
        .tempdir()
        .expect("temp dir");
    for (path, text) in files {
        let path = dir.path().join(path);
        fs::create_dir_all(path.parent().expect("parent")).expect("mkdir");
        fs::write(path, text).expect("write");
    }
    dir
}

fn edges(graph: &Graph) -> Vec<(String, String, String, usize)> {
    graph
        .edges
        .iter()
        .flat_map(|(from, to)| {
            to.iter().map(|(to, loc)| {
                let file = loc.file.file_name().unwrap_or_default().to_string_lossy();
                (from.clone(), to.clone(), file.into_owned(), loc.line)
            })
        })
        .collect()
}

fn strings(cycles: &[&[&str]]) -> Vec<Vec<String>> {
    cycles
        .iter()
        .map(|c| c.iter().map(|s| s.to_string()).collect())
        .collect()
}

#[test]
fn a_cycle_of_three_modules_is_found() {
    let dir = tree(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\nmod d;\n"),
        ("a.rs", "use crate::b::B;\npub struct A;\n"),
        ("b.rs", "pub struct B(crate::c::C);\n"),
        ("c.rs", "pub struct C;\nfn f() {\n    crate::a::g();\n}\n"),
        ("d.rs", "use crate::a::A;\n"),
    ]);
    let graph = module_graph(dir.path());
    assert_eq!(
        edges(&graph),
        [
            ("a".into(), "b".into(), "a.rs".into(), 1),
            ("b".into(), "c".into(), "b.rs".into(), 1),
            ("c".into(), "a".into(), "c.rs".into(), 3),
            ("d".into(), "a".into(), "d.rs".into(), 1),
        ]
    );
    assert_eq!(cycles(&graph), strings(&[&["a", "b", "c"]]));
}

#[test]
fn each_edge_of_a_tangle_is_listed_once() {
    let dir = tree(&[
        ("lib.rs", "mod a;\nmod b;\nmod c;\n"),
        ("a.rs", "use crate::b::B;\n"),
        ("b.rs", "use crate::a::A;\nuse crate::c::C;\n"),
        ("c.rs", "use crate::b::B;\n"),
    ]);
    assert_eq!(
        cycles(&module_graph(dir.path())),
        strings(&[&["a", "b"], &["b", "c"]])
    );
}

#[test]
fn parents_and_children_are_no_cycle() {
    let dir = tree(&[
        (
            "lib.rs",
            "pub mod stages;\nuse crate::stages::candidate::Target;\n",
        ),
        (
            "stages/mod.rs",
            "pub mod candidate;\npub struct Tally;\nuse self::candidate::Target;\n\
             fn f() { crate::stages::candidate::g(); }\n",
        ),
        (
            "stages/candidate.rs",
            "use super::Tally;\nuse crate::stages::Tally as T;\nuse crate::g;\n\
             pub struct Target;\nfn g() { self::h(); }\n",
        ),
    ]);
    let graph = module_graph(dir.path());
    assert_eq!(
        graph.modules,
        BTreeSet::from(["crate", "stages", "stages::candidate"].map(String::from))
    );
    assert!(graph.edges.is_empty(), "{:?}", graph.edges);
    assert!(cycles(&graph).is_empty());
}

#[test]
fn grouped_and_relative_paths_are_parsed() {
    let dir = tree(&[
        ("lib.rs", "mod a;\nmod b;\nmod e;\n"),
        ("a.rs", "pub struct X;\n"),
        ("b/mod.rs", "pub mod c;\npub fn d() {}\n"),
        (
            "b/c.rs",
            "pub struct Y;\npub struct Z;\nfn f() { super::super::e::g(); }\n",
        ),
        (
            "e.rs",
            "use crate::{\n    a::X,\n    b::{\n        c::{Y, Z},\n        d,\n    },\n};\n",
        ),
    ]);
    assert_eq!(
        edges(&module_graph(dir.path())),
        [
            ("b::c".into(), "e".into(), "c.rs".into(), 3),
            ("e".into(), "a".into(), "e.rs".into(), 2),
            ("e".into(), "b".into(), "e.rs".into(), 5),
            ("e".into(), "b::c".into(), "e.rs".into(), 4),
        ]
    );
}

#[test]
fn comments_literals_and_test_code_are_ignored() {
    let b_rs = r##"use crate::a::A;
// crate::a::x
/// crate::a::x
//! crate::a::x
/* crate::a::x /* nested */ crate::a::x */
/** crate::a::x */
pub struct B<'a>(&'a str);
const S: &str = "crate::a::x \" crate::a::x";
const R: &str = r#"crate::a::x " crate::a::x"#;
const Q: char = '"';
const E: char = '\'';
macro_rules! m { () => { $crate::a::x() }; }
#[cfg(test)]
use crate::a::Y;
#[cfg(test)]
thread_local! { static T: u8 = crate::a::Z; }
fn f(x: u8) -> u8 {
    #[cfg(test)]
    if x > 0 { crate::a::g(); }
    x
}
#[cfg(test)]
mod tests {
    use crate::a::A;
    #[test]
    fn t() { crate::a::g(); }
}
#[cfg(test)]
pub mod fake { use crate::a::A; }
#[cfg(test)]
mod more;
"##;
    let dir = tree(&[
        ("lib.rs", "mod a;\nmod b;\n"),
        ("a.rs", "pub struct A;\n"),
        ("b.rs", b_rs),
        ("b/more.rs", "use crate::a::A;\n"),
    ]);
    let graph = module_graph(dir.path());
    assert_eq!(edges(&graph), [("b".into(), "a".into(), "b.rs".into(), 1)]);
    assert!(!graph.modules.contains("b::more"));

    // With a.rs referring back, the only cycle is a <-> b.
    fs::write(
        dir.path().join("a.rs"),
        "pub struct A(crate::b::B<'static>);\n",
    )
    .expect("write");
    assert_eq!(cycles(&module_graph(dir.path())), strings(&[&["a", "b"]]));
}

#[test]
fn test_markers_are_found_in_declared_modules_only() {
    let dir = tree(&[
        ("main.rs", "mod cli;\n// #[test]\nfn main() {}\n"),
        ("cli/mod.rs", "mod args;\n"),
        (
            "cli/args.rs",
            "#[tokio::test(flavor = \"current_thread\")]\nasync fn t() {}\n",
        ),
        ("lib.rs", "#[cfg(test)]\nmod tests {}\n"),
    ]);
    let files = target_files(&dir.path().join("main.rs"));
    let names: Vec<String> = files
        .iter()
        .map(|f| {
            f.strip_prefix(dir.path())
                .unwrap_or(f)
                .display()
                .to_string()
        })
        .collect();
    assert_eq!(names, ["cli/args.rs", "cli/mod.rs", "main.rs"]);
    let markers: Vec<_> = files
        .iter()
        .flat_map(|f| test_markers(&tokenize(&blank(&fs::read_to_string(f).expect("read")))))
        .collect();
    assert_eq!(markers, [("#[tokio::test]", 1)]);
}

/// The folder lines of GitHub's `Python.gitignore` template, which many users keep as their
/// global ignore file (`core.excludesFile`): `rg`, `fd` and structure tools skip what they list,
/// so no source folder of the workspace may be named by one (`crates/build` was, and so was
/// `stages/env`).
const COMMON_GLOBAL_IGNORES: &str = "__pycache__/\nbuild/\ndevelop-eggs/\ndist/\ndownloads/\n\
eggs/\n.eggs/\nlib/\nlib64/\nparts/\nsdist/\nvar/\nwheels/\nshare/python-wheels/\n*.egg-info/\n\
htmlcov/\n.tox/\n.nox/\n.hypothesis/\n.pytest_cache/\ncover/\ninstance/\ndocs/_build/\n\
.pybuilder/\ntarget/\nprofile_default/\n__pypackages__/\n.env\n.venv\nenv/\nvenv/\nENV/\n\
env.bak/\nvenv.bak/\n/site\n.mypy_cache/\n.pyre/\n.pytype/\ncython_debug/\n";

/// The files `git ls-files` lists under `root` that the ignore file `ignores` would hide, as
/// `git check-ignore` decides it (the lines matched in that file only).
fn hidden_by(ignores: &str, root: &Path) -> Vec<String> {
    let dir = tempfile::tempdir().unwrap();
    let file = dir.path().join("ignore");
    fs::write(&file, ignores).unwrap();
    let files = Command::new("git")
        .args(["ls-files", "-z"])
        .current_dir(root)
        .output()
        .expect("git runs");
    assert!(
        files.status.success(),
        "git ls-files failed in {}",
        root.display()
    );
    let mut child = Command::new("git")
        .arg("-c")
        .arg(format!("core.excludesFile={}", file.display()))
        .args(["check-ignore", "--no-index", "--verbose", "--stdin", "-z"])
        .current_dir(root)
        .stdin(std::process::Stdio::piped())
        .stdout(std::process::Stdio::piped())
        .spawn()
        .expect("git runs");
    {
        use std::io::Write as _;
        let mut stdin = child.stdin.take().unwrap();
        stdin.write_all(&files.stdout).unwrap();
    }
    let out = child.wait_with_output().unwrap();
    // -z --verbose: SOURCE NUL LINE NUL PATTERN NUL PATH NUL, per matched path.
    let fields: Vec<&[u8]> = out.stdout.split(|b| *b == 0).collect();
    let source = file.to_string_lossy().into_owned();
    fields
        .chunks(4)
        .filter(|c| c.len() == 4 && String::from_utf8_lossy(c[0]) == source)
        .map(|c| String::from_utf8_lossy(c[3]).into_owned())
        .collect()
}

#[test]
fn no_source_file_sits_where_common_global_ignore_files_hide_it() {
    let root = root();
    let hidden = hidden_by(COMMON_GLOBAL_IGNORES, &root);
    assert!(
        hidden.is_empty(),
        "these files of the workspace are hidden from rg and other tools by a common global \
         ignore file (GitHub's Python.gitignore): rename their folders: {hidden:?}"
    );
    // The check itself can fail: an ignore file that lists the pipeline crate's folder hides
    // its sources.
    let planted = hidden_by("pipeline/\n", &root);
    assert!(
        planted.iter().any(|p| p == "crates/pipeline/src/lib.rs"),
        "a planted `pipeline/` line hid nothing: {planted:?}"
    );
}
