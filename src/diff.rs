//! `r2e dataset diff OLD NEW`: the instances added, removed and changed between two manifests.
//!
//! The manifests say which instances changed (their hashes differ); the `dataset.jsonl` beside
//! each manifest says how: the fields of the instance's line that differ. An instance whose
//! only changed field is `commit` kept its function, harness and spec while its repository's
//! commit moved, and is listed apart (`commit_only`) from the instances that really changed.

use r2e_core::records::OutputFile;
use std::collections::BTreeMap;
use std::path::{Path, PathBuf};

use serde::{Deserialize, Serialize};

use r2e_core::error::{Error, Result};
use r2e_core::hash::Hash;
use r2e_core::records::{Instance, Manifest, read_manifest};

/// What changed between two manifests.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Diff {
    pub old_version: String,
    pub new_version: String,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    /// Instances whose function, harness, spec or another field changed (not the commit alone).
    pub changed: Vec<Changed>,
    /// Instances where only the repository's commit moved: the same function, harness and spec.
    pub commit_only: Vec<CommitMove>,
    pub unchanged: usize,
}

/// A changed instance and the fields of its `dataset.jsonl` line that differ, in the line's
/// order; `null` when they cannot be known (no `dataset.jsonl` matching a manifest beside it).
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Changed {
    pub id: String,
    pub fields: Option<Vec<String>>,
}

/// An instance whose repository's commit moved and nothing else.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct CommitMove {
    pub id: String,
    pub old_commit: String,
    pub new_commit: String,
}

/// A manifest given as its file or as the folder holding it (a build's output).
pub fn manifest_path(path: &Path) -> PathBuf {
    if path.is_dir() {
        path.join(OutputFile::Manifest.name())
    } else {
        path.to_path_buf()
    }
}

/// The instances of the `dataset.jsonl` beside a manifest whose lines hash as the manifest
/// says, by id; empty when there is no such file (a manifest alone).
fn instances_beside(manifest_file: &Path, m: &Manifest) -> Result<BTreeMap<String, Instance>> {
    let file = manifest_file
        .parent()
        .unwrap_or(Path::new("."))
        .join(OutputFile::Dataset.name());
    let text = match std::fs::read_to_string(&file) {
        Ok(t) => t,
        Err(e) if e.kind() == std::io::ErrorKind::NotFound => return Ok(BTreeMap::new()),
        Err(e) => return Err(Error::env(format!("cannot read `{}`: {e}", file.display()))),
    };
    let hashes: BTreeMap<&str, &str> = m
        .instances
        .iter()
        .map(|i| (i.id.as_str(), i.hash.as_str()))
        .collect();
    let mut out = BTreeMap::new();
    for (n, line) in text.lines().enumerate() {
        if line.trim().is_empty() {
            continue;
        }
        let instance: Instance = serde_json::from_str(line).map_err(|e| {
            Error::input(format!("{}:{}:{}: {e}", file.display(), n + 1, e.column()))
        })?;
        // The manifest hashes each line without its newline: a line from another build is
        // not this manifest's instance.
        let hash = Hash::of_bytes(line.as_bytes()).to_hex();
        if hashes.get(instance.id.as_str()).is_some_and(|h| *h == hash) {
            out.insert(instance.id.clone(), instance);
        }
    }
    Ok(out)
}

/// The fields of two instances' lines that differ, in the line's order.
fn changed_fields(old: &Instance, new: &Instance) -> Result<Vec<String>> {
    let object = |i: &Instance| match serde_json::to_value(i).map_err(Error::internal)? {
        serde_json::Value::Object(map) => Ok(map),
        _ => Err(Error::internal("an instance serializes as an object")),
    };
    let (a, b) = (object(old)?, object(new)?);
    let mut fields: Vec<String> = b
        .iter()
        .filter(|(k, v)| a.get(*k) != Some(*v))
        .map(|(k, _)| k.clone())
        .collect();
    fields.extend(a.keys().filter(|k| !b.contains_key(*k)).cloned());
    Ok(fields)
}

/// The instances added, removed and changed between the manifests at `old` and `new` (files,
/// or folders holding a `manifest.json`), and for each changed instance the fields that
/// changed, from the `dataset.jsonl` beside each manifest.
pub fn diff_manifests(old: &Path, new: &Path) -> Result<Diff> {
    let (old, new) = (manifest_path(old), manifest_path(new));
    let (a, b) = (read_manifest(&old)?, read_manifest(&new)?);
    let index = |m: &Manifest| -> BTreeMap<String, String> {
        m.instances
            .iter()
            .map(|i| (i.id.clone(), i.hash.clone()))
            .collect()
    };
    let (ia, ib) = (index(&a), index(&b));
    let added: Vec<String> = ib
        .keys()
        .filter(|k| !ia.contains_key(*k))
        .cloned()
        .collect();
    let removed: Vec<String> = ia
        .keys()
        .filter(|k| !ib.contains_key(*k))
        .cloned()
        .collect();
    let differ: Vec<&String> = ib
        .iter()
        .filter(|(k, h)| ia.get(*k).is_some_and(|old| old != *h))
        .map(|(k, _)| k)
        .collect();
    let (mut changed, mut commit_only) = (Vec::new(), Vec::new());
    if !differ.is_empty() {
        let (da, db) = (instances_beside(&old, &a)?, instances_beside(&new, &b)?);
        for id in &differ {
            let fields = match (da.get(*id), db.get(*id)) {
                (Some(x), Some(y)) => Some((changed_fields(x, y)?, x, y)),
                _ => None,
            };
            match fields {
                Some((fields, x, y)) if fields == ["commit"] => commit_only.push(CommitMove {
                    id: (*id).clone(),
                    old_commit: x.commit.clone(),
                    new_commit: y.commit.clone(),
                }),
                other => changed.push(Changed {
                    id: (*id).clone(),
                    fields: other.map(|(fields, _, _)| fields),
                }),
            }
        }
    }
    Ok(Diff {
        unchanged: ib.len() - added.len() - differ.len(),
        old_version: a.version,
        new_version: b.version,
        added,
        removed,
        changed,
        commit_only,
    })
}

/// The diff for people.
pub fn diff_text(d: &Diff) -> String {
    let short = |v: &str| v.get(..16).unwrap_or(v).to_owned();
    let mut out = format!("{} -> {}\n", short(&d.old_version), short(&d.new_version));
    for (ids, sign) in [(&d.added, "+"), (&d.removed, "-")] {
        for id in ids {
            out.push_str(&format!("{sign} {id}\n"));
        }
    }
    for c in &d.changed {
        match &c.fields {
            Some(fields) => out.push_str(&format!("~ {} changed: {}\n", c.id, fields.join(", "))),
            None => out.push_str(&format!(
                "~ {} changed (which fields is unknown: no `dataset.jsonl` of that manifest beside it)\n",
                c.id
            )),
        }
    }
    for m in &d.commit_only {
        out.push_str(&format!(
            "> {} commit only: {} -> {} (same function, harness and spec)\n",
            m.id,
            short(&m.old_commit),
            short(&m.new_commit)
        ));
    }
    out.push_str(&format!(
        "{} added, {} removed, {} changed, {} commit only, {} unchanged\n",
        d.added.len(),
        d.removed.len(),
        d.changed.len(),
        d.commit_only.len(),
        d.unchanged
    ));
    out
}
