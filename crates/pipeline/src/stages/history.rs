//! Functions' earlier bodies, from a repository's first-parent history: for a definition at a
//! commit, the commit on the first-parent line that last changed its body, and the
//! definition's text before that change. `[bugfix] sources = ["history"]` makes tasks of them
//! (`stages::bugfix`): the earlier body is the broken state, the maintainers' change its fix.
//!
//! A body is what `stages::dating` compares (`DefLayout::code_hash`: blind to comments and
//! formatting), and a definition is found by its place in its file (`path:qualname`, `#n` for
//! the n-th of a name), as dating matches them. The walk goes back through the commits that
//! changed the file (`git log --first-parent -- PATH`, newest first, at most [`DEPTH`]): at each,
//! the file as its first parent had it is read; the first one where the definition's body
//! differs is the change. A definition the parent lacks was added there (or came with a rename
//! or a move): it has no earlier body. A version that does not parse ends the walk.

use std::collections::HashMap;
use std::ops::Range;
use std::path::Path;

use super::checkout::{CatFile, run_git};
use r2e_python::summary::numbered_places;

/// How many commits that changed a file are walked back, newest first.
pub const DEPTH: usize = 200;

/// A definition's body before the change that made it what it is now.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct Earlier {
    /// The commit that changed it (on the first-parent line), and its committer time.
    pub commit: String,
    pub time: i64,
    /// The definition's text at that commit's first parent, dedented.
    pub definition: String,
}

/// Definitions wanted in a file: each one's place and its body's hash.
pub type Wanted = Vec<(String, [u8; 32])>;

/// A file at one version: its text, and its definitions by place, each one's body hash and
/// where it is in the text.
struct Version {
    text: String,
    defs: HashMap<String, ([u8; 32], Range<usize>)>,
}

/// For each of `wanted` (a place in `path` and its body's hash at `commit`), its earlier body,
/// from the history in `dir` (a bare mirror or a work tree). `Err` when the history cannot be
/// read.
pub fn earlier(
    dir: &Path,
    commit: &str,
    path: &str,
    wanted: &[(String, [u8; 32])],
) -> Result<Vec<Option<Earlier>>, String> {
    let commits = changes_of(dir, commit, path)?;
    let mut blobs = CatFile::spawn(dir).map_err(|e| e.to_string())?;
    // The parents' versions, read and parsed once for all the file's definitions.
    let mut parents: Vec<Option<Version>> = Vec::new();
    let mut out = Vec::with_capacity(wanted.len());
    for (place, body) in wanted {
        let mut found = None;
        for (k, (sha, time)) in commits.iter().enumerate() {
            if parents.len() <= k {
                let bytes = blobs
                    .read(&format!("{sha}^:{path}"))
                    .map_err(|e| e.to_string())?;
                parents.push(bytes.as_deref().and_then(version));
            }
            // The parent has no such file (or one that does not parse): the walk ends.
            let Some(before) = &parents[k] else { break };
            match before.defs.get(place) {
                None => break,
                Some((was, _)) if was == body => continue,
                Some((_, at)) => {
                    let chunk = &before.text[at.clone()];
                    found = Some(Earlier {
                        commit: sha.clone(),
                        time: *time,
                        definition: r2e_python::dedent(chunk, &r2e_python::strings_in(chunk)),
                    });
                    break;
                }
            }
        }
        out.push(found);
    }
    Ok(out)
}

/// The commits on `commit`'s first-parent line that changed `path`, newest first, with their
/// committer times.
fn changes_of(dir: &Path, commit: &str, path: &str) -> Result<Vec<(String, i64)>, String> {
    let max = format!("--max-count={DEPTH}");
    let args = [
        "log",
        "--no-color",
        "--first-parent",
        &max,
        "--format=%H %ct",
        commit,
        "--",
        path,
    ];
    let out = run_git(&args, Some(dir)).map_err(|e| e.to_string())?;
    if !out.status.success() {
        return Err(format!(
            "`git log` failed: {}",
            String::from_utf8_lossy(&out.stderr).trim()
        ));
    }
    String::from_utf8_lossy(&out.stdout)
        .lines()
        .map(|l| {
            let (sha, t) = l
                .split_once(' ')
                .ok_or_else(|| format!("unexpected `git log` line `{l}`"))?;
            let t = t
                .parse()
                .map_err(|_| format!("unexpected `git log` line `{l}`"))?;
            Ok((sha.to_owned(), t))
        })
        .collect()
}

/// A version of a file, or `None` when it does not decode or parse.
fn version(bytes: &[u8]) -> Option<Version> {
    let text = r2e_python::decode::decode_source(bytes).ok()?;
    let summary = r2e_python::extract::summarize(&text).ok()?;
    let places = numbered_places(summary.interface.defs.iter().map(|d| d.qualname.as_str()));
    let defs = places
        .into_iter()
        .zip(&summary.layout.defs)
        .map(|(place, l)| {
            (
                place,
                (l.code_hash, l.chunk.start as usize..l.chunk.end as usize),
            )
        })
        .filter(|(_, (_, at))| text.get(at.clone()).is_some())
        .collect();
    Some(Version { text, defs })
}

#[cfg(test)]
mod tests {
    use super::*;

    /// `git -C DIR ARGS…` at `date`, which must succeed: its stdout, trimmed.
    fn git(dir: &Path, date: &str, args: &[&str]) -> String {
        let out = std::process::Command::new("git")
            .arg("-C")
            .arg(dir)
            .args(args)
            .env("GIT_AUTHOR_NAME", "t")
            .env("GIT_AUTHOR_EMAIL", "t@t")
            .env("GIT_COMMITTER_NAME", "t")
            .env("GIT_COMMITTER_EMAIL", "t@t")
            .env("GIT_AUTHOR_DATE", date)
            .env("GIT_COMMITTER_DATE", date)
            .output()
            .unwrap();
        assert!(
            out.status.success(),
            "{}",
            String::from_utf8_lossy(&out.stderr)
        );
        String::from_utf8_lossy(&out.stdout).trim().to_owned()
    }

    fn commit(dir: &Path, date: &str, text: &str) -> String {
        std::fs::write(dir.join("m.py"), text).unwrap();
        git(dir, date, &["add", "-A"]);
        git(dir, date, &["commit", "-q", "-m", date]);
        git(dir, date, &["rev-parse", "HEAD"])
    }

    fn hash_of(text: &str, place: &str) -> [u8; 32] {
        version(text.as_bytes()).unwrap().defs[place].0
    }

    /// The last change of each body is found past commits that changed only other definitions
    /// or comments; a definition added later, or never changed, has no earlier body.
    #[test]
    fn the_last_change_of_a_body_and_the_text_before_it() {
        let dir = tempfile::tempdir().unwrap();
        let d = dir.path();
        git(d, "2024-01-01T00:00:00Z", &["init", "-q", "-b", "main"]);
        let v1 = "def f(x):\n    return x + 1\n\n\ndef g(x):\n    return x\n";
        commit(d, "2024-01-02T00:00:00Z", v1);
        let v2 = "def f(x):\n    return x + 2\n\n\ndef g(x):\n    return x\n";
        let changed = commit(d, "2024-02-03T00:00:00Z", v2);
        // Later: a comment in f, and g edited, and h added.
        let v3 = "def f(x):\n    # two\n    return x + 2\n\n\ndef g(x):\n    return -x\n\n\ndef h():\n    return 0\n";
        let head = commit(d, "2024-03-04T00:00:00Z", v3);
        let wanted: Vec<(String, [u8; 32])> = ["f", "g", "h"]
            .iter()
            .map(|p| (p.to_string(), hash_of(v3, p)))
            .collect();
        let got = earlier(d, &head, "m.py", &wanted).unwrap();
        let f = got[0].as_ref().unwrap();
        assert_eq!(f.commit, changed);
        assert_eq!(f.time, 1706918400);
        assert_eq!(f.definition, "def f(x):\n    return x + 1\n");
        let g = got[1].as_ref().unwrap();
        assert_eq!(g.commit, head);
        assert_eq!(g.definition, "def g(x):\n    return x\n");
        assert_eq!(got[2], None, "h was added, not changed");
        // At the first commit, nothing has an earlier body.
        let first = git(
            d,
            "2024-03-04T00:00:00Z",
            &["rev-list", "--max-parents=0", "HEAD"],
        );
        let got = earlier(d, &first, "m.py", &[("f".into(), hash_of(v1, "f"))]).unwrap();
        assert_eq!(got, vec![None]);
    }
}
