//! `r2e dataset diff OLD NEW`: the instances added, removed and changed between two manifests.

use std::collections::BTreeMap;
use std::path::Path;

use serde::{Deserialize, Serialize};

use crate::error::Result;
use crate::records::{Manifest, read_manifest};

/// What changed between two manifests.
#[derive(Clone, Debug, Serialize, Deserialize, PartialEq)]
pub struct Diff {
    pub old_version: String,
    pub new_version: String,
    pub added: Vec<String>,
    pub removed: Vec<String>,
    pub changed: Vec<String>,
    pub unchanged: usize,
}

/// The instances added, removed and changed between the manifests at `old` and `new`.
pub fn diff_manifests(old: &Path, new: &Path) -> Result<Diff> {
    let (a, b) = (read_manifest(old)?, read_manifest(new)?);
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
    let changed: Vec<String> = ib
        .iter()
        .filter(|(k, h)| ia.get(*k).is_some_and(|old| old != *h))
        .map(|(k, _)| k.clone())
        .collect();
    Ok(Diff {
        unchanged: ib.len() - added.len() - changed.len(),
        old_version: a.version,
        new_version: b.version,
        added,
        removed,
        changed,
    })
}

/// The diff for people.
pub fn diff_text(d: &Diff) -> String {
    let short = |v: &str| v.get(..16).unwrap_or(v).to_owned();
    let mut out = format!("{} -> {}\n", short(&d.old_version), short(&d.new_version));
    for (ids, sign) in [(&d.added, "+"), (&d.removed, "-"), (&d.changed, "~")] {
        for id in ids {
            out.push_str(&format!("{sign} {id}\n"));
        }
    }
    out.push_str(&format!(
        "{} added, {} removed, {} changed, {} unchanged\n",
        d.added.len(),
        d.removed.len(),
        d.changed.len(),
        d.unchanged
    ));
    out
}
