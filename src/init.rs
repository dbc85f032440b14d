//! `r2e init`: a commented `pipeline.toml` for the repositories named on the command line
//! (folders, git URLs, `pypi:NAME==VERSION`), checked by the same parser `r2e build` uses before
//! it is written, and never over an existing file.

use std::path::{Path, PathBuf};

use r2e_core::error::{Error, Result};

/// One repository as the command line names it.
#[derive(Debug, PartialEq)]
enum Named {
    Folder(String),
    Git(String),
    Pypi(String),
}

/// What `arg` names: `pypi:NAME==VERSION`, a git URL (`https://`, `ssh://`, `git://`,
/// `file://`, `git@host:path`, or ending in `.git`), or a folder that exists.
fn classify(arg: &str, base: &Path) -> Result<Named> {
    if let Some(release) = arg.strip_prefix("pypi:") {
        let release = release.trim();
        if !release.contains("==") || release.contains([',', '<', '>', '~', '*']) {
            return Err(Error::input(format!(
                "`{arg}`: write `pypi:NAME==VERSION`, one exact release (e.g. `pypi:isodate==0.6.1`)"
            )));
        }
        return Ok(Named::Pypi(release.to_owned()));
    }
    let url = ["https://", "http://", "ssh://", "git://", "file://"]
        .iter()
        .any(|p| arg.starts_with(p))
        || (arg.starts_with("git@") && arg.contains(':'));
    if url || (arg.ends_with(".git") && !Path::new(arg).is_dir()) {
        return Ok(Named::Git(arg.to_owned()));
    }
    let dir = Path::new(arg);
    if !dir.is_dir() {
        return Err(Error::input(format!(
            "`{arg}` is not a folder, a git URL or `pypi:NAME==VERSION`"
        )));
    }
    Ok(Named::Folder(relative_to(dir, base)))
}

/// `dir` as the pipeline in `base` names it: relative when it is under `base`, else absolute.
fn relative_to(dir: &Path, base: &Path) -> String {
    let abs = |p: &Path| std::fs::canonicalize(p).unwrap_or_else(|_| p.to_path_buf());
    let (dir, base) = (abs(dir), abs(base));
    match dir.strip_prefix(&base) {
        Ok(rel) if rel.as_os_str().is_empty() => ".".to_owned(),
        Ok(rel) => rel.to_string_lossy().into_owned(),
        Err(_) => dir.to_string_lossy().into_owned(),
    }
}

/// A TOML basic string.
fn quoted(s: &str) -> String {
    toml::Value::String(s.to_owned()).to_string()
}

/// The pipeline's text for these repositories.
fn text(name: &str, repos: &[Named]) -> String {
    let mut out = format!(
        "# A pipeline written by `r2e init`. Build it with `r2e build` (this file is the default),\n\
         # then `r2e report`. Every key is in r2e's docs/pipeline-toml.md; the commented ones\n\
         # show their defaults. Relative paths are relative to this file.\n\
         version = 1\n\n\
         [project]\n\
         name = {}\n\
         output = \"out\"              # the dataset, its report and card\n\
         cache = \"cache\"             # every stage's memoized results; shareable\n",
        quoted(name)
    );
    for repo in repos {
        out.push_str("\n[[repo]]\n");
        match repo {
            Named::Folder(path) => out.push_str(&format!(
                "path = {}\n# include = [\"src/**\"]     # only these files give candidates\n",
                quoted(path)
            )),
            Named::Git(url) => out.push_str(&format!(
                "git = {}\n# rev = \"HEAD\"              # a sha, tag or branch; pin a sha for a dataset \
                 others rebuild\n",
                quoted(url)
            )),
            Named::Pypi(release) => out.push_str(&format!(
                "pypi = {}\n# sha256 = \"...\"            # pins the archive beyond the index's own \
                 hash\n",
                quoted(release)
            )),
        }
    }
    out.push_str(
        "\n[env]\n\
         # python = \"python3\"        # the interpreter environments are made from\n\
         # installer = \"auto\"        # uv where available, else venv + pip\n\
         \n[generate]\n\
         # generator = \"builtin\"     # the coverage-guided explorer; \"llm\" and \"hybrid\": a model\n\
         # max_tests = 16\n\
         \n[validate]\n\
         # repeats = 3               # runs of the reference; a test that disagrees is unstable\n\
         # unstable = \"drop\"         # or \"invalid\"\n\
         \n[select]\n\
         # min_branch_coverage = 0.8\n\
         \n[sandbox]\n\
         # backend = \"local\"         # bubblewrap; \"docker\" builds an image per environment\n\
         \n# [bugfix]                  # bug-fix tasks from the harnesses (bugfix.jsonl; docs/bugfix.md)\n\
         # sources = [\"mutants\"]     # and \"history\": each function's last change, from git\n\
         # per_function = 2\n\
         \n# [evaluate]                # pass@k of models on the dataset (`r2e build` runs it)\n\
         # k = [1, 5]\n\
         # [[evaluate.model]]\n\
         # provider = \"builtin\"\n\
         # model = \"reference\"\n",
    );
    out
}

/// Writes the pipeline at `path` for the repositories `args` names; refuses (bad input) when a
/// file is there already or an argument names nothing. Returns what was written.
pub fn init(path: &Path, args: &[String]) -> Result<String> {
    if path.exists() {
        return Err(Error::input(format!(
            "{}: a pipeline is there already; `r2e init` never overwrites one (remove it, or give \
             another with `--pipeline`)",
            path.display()
        )));
    }
    let base = match path.parent() {
        Some(p) if !p.as_os_str().is_empty() => p.to_path_buf(),
        _ => PathBuf::from("."),
    };
    if !base.is_dir() {
        return Err(Error::input(format!(
            "{}: the folder `{}` does not exist",
            path.display(),
            base.display()
        )));
    }
    let repos = args
        .iter()
        .map(|a| classify(a, &base))
        .collect::<Result<Vec<_>>>()?;
    let name = std::fs::canonicalize(&base)
        .ok()
        .and_then(|b| b.file_name().map(|n| n.to_string_lossy().into_owned()))
        .filter(|n| !n.is_empty())
        .unwrap_or_else(|| "my-benchmark".to_owned());
    let text = text(&name, &repos);
    // What `r2e build` would say of it, before it exists: a bad argument is named as the
    // pipeline's line would be.
    r2e_core::config::parse(&text, path)?;
    // Whole or not at all, and never over a file that appeared meanwhile: a temporary file
    // beside it, linked into place (a link fails where a file exists).
    let tmp = r2e_core::fsutil::write_temp(path, true, |f| {
        std::io::Write::write_all(f, text.as_bytes())
    })?;
    let linked = std::fs::hard_link(&tmp, path);
    let _ = std::fs::remove_file(&tmp);
    linked.map_err(|e| match e.kind() {
        std::io::ErrorKind::AlreadyExists => Error::input(format!(
            "{}: a pipeline is there already; `r2e init` never overwrites one",
            path.display()
        )),
        _ => Error::env(format!("{}: {e}", path.display())),
    })?;
    Ok(text)
}
