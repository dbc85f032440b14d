//! The docs cannot drift: `ARCHITECTURE.md` names only paths and modules that exist, none of
//! its table cells runs over 300 characters, it names every file that reads an environment
//! variable, and every link of the README, `ARCHITECTURE.md` and `docs/` leads to a file.

use std::path::{Path, PathBuf};

/// The longest table cell `ARCHITECTURE.md` may hold; more detail goes to `docs/code-map.md`.
const MAX_CELL: usize = 300;

/// A code span starting with one of these is a path from the repository's root.
const ROOTS: &[&str] = &[
    "crates/",
    "src/",
    "tests/",
    "docs/",
    "bench/",
    "examples/",
    "clients/",
];

fn root() -> PathBuf {
    PathBuf::from(env!("CARGO_MANIFEST_DIR"))
}

fn read(path: &Path) -> String {
    std::fs::read_to_string(path).unwrap_or_else(|e| panic!("{}: {e}", path.display()))
}

/// The lines outside fenced code blocks, with their numbers (from 1).
fn prose(text: &str) -> Vec<(usize, &str)> {
    let mut fenced = false;
    let mut out = Vec::new();
    for (i, line) in text.lines().enumerate() {
        if line.trim_start().starts_with("```") {
            fenced = !fenced;
        } else if !fenced {
            out.push((i + 1, line));
        }
    }
    out
}

/// The code spans of a line (`like this`).
fn spans(line: &str) -> Vec<&str> {
    line.split('`').skip(1).step_by(2).collect()
}

/// The cells of a table row, trimmed; `None` for a line that is not one.
fn cells(line: &str) -> Option<Vec<String>> {
    let row = line.trim().strip_prefix('|')?.strip_suffix('|')?;
    let row = row.replace("\\|", "\u{0}");
    Some(
        row.split('|')
            .map(|c| c.replace('\u{0}', "\\|").trim().to_owned())
            .collect(),
    )
}

/// Whether a code span reads as a path (`crates/exec/src/runs.rs`, `stages/environment/`).
fn path_like(span: &str) -> bool {
    !span.is_empty()
        && !span.starts_with('.')
        && span
            .chars()
            .all(|c| c.is_ascii_alphanumeric() || "_-./".contains(c))
}

/// The folder a code-map table's paths are under, from its heading: `` ### `crates/NAME` ``
/// is `crates/NAME/src/`; the root package's (`` ### `r2e` ``) is the repository's root.
fn table_base(heading: &str, root: &Path) -> Option<PathBuf> {
    let name = spans(heading).into_iter().next()?;
    if name == "r2e" {
        Some(root.to_owned())
    } else if name.starts_with("crates/") {
        Some(root.join(name).join("src"))
    } else {
        None
    }
}

/// What is wrong with an `ARCHITECTURE.md` of this text, against the tree at `root`: each path
/// or module it names that does not exist, and each table cell over [`MAX_CELL`] characters.
fn architecture_problems(text: &str, root: &Path) -> Vec<String> {
    let mut problems = Vec::new();
    let mut base: Option<PathBuf> = None;
    for (n, line) in prose(text) {
        if let Some(heading) = line.strip_prefix("### ") {
            base = table_base(heading, root);
            continue;
        }
        if line.starts_with("## ") {
            base = None;
        }
        for span in spans(line) {
            if path_like(span)
                && ROOTS.iter().any(|r| span.starts_with(r))
                && !root.join(span).exists()
            {
                problems.push(format!("line {n}: `{span}` does not exist"));
            }
        }
        let Some(row) = cells(line) else { continue };
        for cell in &row {
            let len = cell.chars().count();
            if len > MAX_CELL {
                let head: String = cell.chars().take(60).collect();
                problems.push(format!(
                    "line {n}: a table cell of {len} characters (at most {MAX_CELL}): {head}…"
                ));
            }
        }
        let Some(base) = &base else { continue };
        if row[0] == "path" || row[0].starts_with("---") {
            continue;
        }
        let shown = base
            .strip_prefix(root)
            .unwrap_or(base)
            .display()
            .to_string();
        for module in spans(&row[0]) {
            if !base.join(module).exists() {
                problems.push(format!(
                    "line {n}: the code map's module `{module}` ({shown}/{module}) does not exist"
                ));
            }
        }
        for cell in &row[1..] {
            for span in spans(cell) {
                if path_like(span)
                    && span.ends_with(".rs")
                    && !base.join(span).exists()
                    && !root.join(span).exists()
                {
                    problems.push(format!(
                        "line {n}: `{span}` is not a file under {shown}/ nor the root"
                    ));
                }
            }
        }
    }
    problems
}

/// Each link of a Markdown file (`[text](target)`, images too) to a file that does not exist.
fn broken_links(file: &Path, root: &Path) -> Vec<String> {
    let text = read(file);
    let dir = file.parent().unwrap();
    let shown = file.strip_prefix(root).unwrap_or(file).display();
    let mut broken = Vec::new();
    for (n, line) in prose(&text) {
        for piece in line.split("](").skip(1) {
            let Some(target) = piece.split(')').next() else {
                continue;
            };
            let target = target.split_whitespace().next().unwrap_or("");
            if target.is_empty()
                || target.starts_with('#')
                || target.contains("://")
                || target.starts_with("mailto:")
            {
                continue;
            }
            let path = target.split('#').next().unwrap();
            if !dir.join(path).exists() {
                broken.push(format!("{shown}:{n}: the link `{target}` leads nowhere"));
            }
        }
    }
    broken
}

/// The `.rs` files under a folder, recursively.
fn rust_files(dir: &Path, out: &mut Vec<PathBuf>) {
    for entry in std::fs::read_dir(dir).unwrap() {
        let path = entry.unwrap().path();
        if path.is_dir() {
            rust_files(&path, out);
        } else if path.extension().is_some_and(|e| e == "rs") {
            out.push(path);
        }
    }
}

#[test]
fn architecture_names_only_what_exists() {
    let root = root();
    let problems = architecture_problems(&read(&root.join("ARCHITECTURE.md")), &root);
    assert!(
        problems.is_empty(),
        "ARCHITECTURE.md:\n{}",
        problems.join("\n")
    );
}

/// A stale path, a stale module of the code map and an overlong cell are each named.
#[test]
fn a_stale_line_of_architecture_is_named() {
    let root = root();
    let text = read(&root.join("ARCHITECTURE.md"));
    assert!(architecture_problems(&text, &root).is_empty());
    let long = "x".repeat(MAX_CELL + 1);
    let planted = text.replacen(
        "### `crates/pipeline`\n\n| path | what it is |\n|---|---|\n",
        &format!(
            "### `crates/pipeline`\n\n| path | what it is |\n|---|---|\n\
             | `stages/splice.rs` | moved to `crates/exec` long ago |\n\
             | `db.rs` | {long} |\n"
        ),
        1,
    ) + "\nThe engine is in `crates/build/src/engine/`.\n";
    let problems = architecture_problems(&planted, &root).join("\n");
    assert!(
        problems.contains(
            "the code map's module `stages/splice.rs` (crates/pipeline/src/stages/splice.rs) does not exist"
        ),
        "{problems}"
    );
    assert!(
        problems.contains(&format!("a table cell of {} characters", MAX_CELL + 1)),
        "{problems}"
    );
    assert!(
        problems.contains("`crates/build/src/engine/` does not exist"),
        "{problems}"
    );
}

/// Every file of `src/` and `crates/` that reads an environment variable is named in
/// `ARCHITECTURE.md`'s "Environment variables", so what it says of them stays true.
#[test]
fn architecture_names_every_reader_of_the_environment() {
    let root = root();
    let text = read(&root.join("ARCHITECTURE.md"));
    let section = text
        .split("\n### Environment variables\n")
        .nth(1)
        .and_then(|s| s.split("\n#").next())
        .expect("ARCHITECTURE.md has a `### Environment variables` section");
    let mut files = Vec::new();
    rust_files(&root.join("src"), &mut files);
    rust_files(&root.join("crates"), &mut files);
    let readers: Vec<String> = files
        .iter()
        .filter(|f| read(f).contains("env::var"))
        .map(|f| f.strip_prefix(&root).unwrap().display().to_string())
        .collect();
    assert!(
        readers.iter().any(|r| r.ends_with("fsutil.rs")),
        "the search finds no reader of `PATH`: {readers:?}"
    );
    let unnamed: Vec<&String> = readers
        .iter()
        .filter(|r| !section.contains(&format!("`{r}`")))
        .collect();
    assert!(
        unnamed.is_empty(),
        "these files read environment variables, and ARCHITECTURE.md's \"Environment variables\" \
         does not name them: {unnamed:?}"
    );
}

/// Every link of the README, `ARCHITECTURE.md` and `docs/` leads to a file that exists.
#[test]
fn every_link_of_the_docs_resolves() {
    let root = root();
    let mut files = vec![root.join("README.md"), root.join("ARCHITECTURE.md")];
    for entry in std::fs::read_dir(root.join("docs")).unwrap() {
        let path = entry.unwrap().path();
        if path.extension().is_some_and(|e| e == "md") {
            files.push(path);
        }
    }
    assert!(files.len() >= 8, "{files:?}");
    let broken: Vec<String> = files.iter().flat_map(|f| broken_links(f, &root)).collect();
    assert!(broken.is_empty(), "{}", broken.join("\n"));
}
