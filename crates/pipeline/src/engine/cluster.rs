//! A build spread over hosts: the store they share (`[cache] remote`), shards (`--shard I/N`),
//! and what each host leaves for the others to check (a shard's summary, every host's action
//! trace).
//!
//! A shard builds every stage of its repositories (those whose name hashes to its index, the
//! same on every host) into a scratch output of its local cache, which it discards: its product
//! is what it stored in the remote store, and a summary beside the output
//! (`.<output>.r2e/shards/shard-I-of-N.json`). A plain build with the remote store then
//! assembles the whole dataset from the shards' stored results. A shard that could not store a
//! result exits 1, so that the engine (Slurm's `--requeue`) runs it again and the assemble,
//! which depends on every shard's success, never runs on missing work.

use std::path::{Path, PathBuf};
use std::sync::Arc;
use std::time::Duration;

use serde::Serialize;

use r2e_core::cache::remote::{Remote, Trace, host_name};
use r2e_core::cache::sign::SigningKey;
use r2e_core::cache::{Bucket, LocalStore, Scheme, Store};
use r2e_core::config::{Config, RemoteMode, Shard};
use r2e_core::error::{Error, Result};

use r2e_core::records::Summary;

/// The folder beside an output where shards leave their summaries and hosts their traces.
pub fn shards_dir(output: &Path) -> Result<PathBuf> {
    Ok(super::outputs::store_of(output)?.join("shards"))
}

/// Opens the pipeline's remote store (none without `[cache] remote`), with this host's action
/// trace at `trace`. `publish`: entries found in the local cache are written to the store when
/// it lacks them (a shard's, whose results must reach the assemble).
pub fn open_remote(cfg: &Config, trace: &Path, publish: bool) -> Result<Option<Remote>> {
    let Some(rc) = &cfg.remote else {
        return Ok(None);
    };
    // The key first: a missing one is bad input, whatever the store.
    let signer = match &rc.signing_key_env {
        Some((var, at)) => Some(
            SigningKey::from_env(var)
                .map_err(|e| Error::input(format!("{at}: `signing_key_env = \"{var}\"`: {e}")))?,
        ),
        None => None,
    };
    let read_only = rc.mode == RemoteMode::Read;
    if read_only && publish {
        return Err(Error::input(
            "a shard stores its results for the assemble in the remote cache: it cannot run with `[cache] remote_mode = \"read\"`",
        ));
    }
    let store = open_store(&rc.url, read_only)?;
    let mut remote = Remote::new(store, &rc.url, Duration::from_secs(rc.lease_seconds))
        .with_trace(Trace::create(trace)?);
    if publish {
        remote = remote.publishing();
    }
    if read_only {
        remote = remote.read_only();
    }
    let signed = signer
        .as_ref()
        .map(|k| format!(", entries signed and checked with the key in ${}", k.var()));
    if let Some(key) = signer {
        remote = remote.signing(key);
    }
    eprintln!(
        "remote cache: {}{}{} (this host's actions: {})",
        rc.url,
        if read_only { ", read only" } else { "" },
        signed.unwrap_or_default(),
        trace.display()
    );
    remote.probe();
    Ok(Some(remote))
}

/// The store a URL names: a folder every host mounts (`file://`), or an object store or WebDAV
/// server (`r2e-store`).
fn open_store(url: &str, read_only: bool) -> Result<Arc<dyn Store>> {
    if let Some((Scheme::File, path)) = Scheme::of(url) {
        let root = Path::new(path);
        if !read_only {
            fs_err::create_dir_all(root)?;
        }
        return Ok(Arc::new(LocalStore::new(root)));
    }
    r2e_store::open(url)
}

/// What a shard leaves beside the output.
#[derive(Debug, Serialize)]
pub struct ShardSummary<'a> {
    pub shard: Shard,
    pub host: String,
    /// The repositories it built.
    pub repos: Vec<&'a str>,
    /// Results it could not write to the remote store (a shard with any exits 1).
    pub lost: u64,
    /// Its build's summary (its scratch output is gone).
    pub summary: Option<&'a Summary>,
}

/// The repositories of `shard` of the pipeline: those whose name hashes to it, or those `plan`
/// gives it (`shard_plan`).
pub fn shard_config(
    cfg: &Config,
    shard: Shard,
    plan: Option<&super::shard_plan::ShardPlan>,
) -> Config {
    cfg.clone().with_repos(&|r| match plan {
        Some(plan) => plan.holds(shard, &r.name),
        None => shard.holds(&r.name),
    })
}

/// Where a shard's summary goes.
pub fn shard_summary_path(output: &Path, shard: Shard) -> Result<PathBuf> {
    Ok(shards_dir(output)?.join(format!("shard-{}-of-{}.json", shard.index, shard.count)))
}

/// Where this host's action trace goes: one file per shard (or the assemble) and host, so that
/// a shard requeued on another host leaves both.
pub fn trace_path(output: &Path, shard: Option<Shard>) -> Result<PathBuf> {
    let label = match shard {
        Some(s) => format!("shard-{}-of-{}", s.index, s.count),
        None => "build".to_owned(),
    };
    Ok(shards_dir(output)?.join(format!("{label}.{}.trace.jsonl", host_name())))
}

/// A scratch output in the local cache for a shard's build (discarded after it).
pub fn scratch_output(cfg: &Config) -> PathBuf {
    cfg.cache
        .join(Bucket::Scratch.folder())
        .join(format!("shard-{}", std::process::id()))
        .join("out")
}

/// A shard's summary as read back: its build's summary (the rest is for people).
#[derive(serde::Deserialize)]
struct StoredShard {
    summary: Option<Summary>,
}

/// The build summaries of the shards' summaries beside `output` (in the order of their file
/// names); one that cannot be read is passed over.
pub fn shard_summaries(output: &Path) -> Vec<Summary> {
    let Ok(entries) = shards_dir(output).and_then(|d| Ok(std::fs::read_dir(d)?)) else {
        return Vec::new();
    };
    let mut paths: Vec<PathBuf> = entries
        .flatten()
        .map(|e| e.path())
        .filter(|p| p.extension().is_some_and(|e| e == "json"))
        .collect();
    paths.sort();
    paths
        .iter()
        .filter_map(|p| serde_json::from_slice::<StoredShard>(&std::fs::read(p).ok()?).ok())
        .filter_map(|s| s.summary)
        .collect()
}

/// Writes a shard's summary beside the output, atomically.
pub fn write_shard_summary(output: &Path, s: &ShardSummary) -> Result<PathBuf> {
    let path = shard_summary_path(output, s.shard)?;
    if let Some(parent) = path.parent() {
        fs_err::create_dir_all(parent)?;
    }
    let mut text = serde_json::to_string_pretty(s).map_err(Error::internal)?;
    text.push('\n');
    r2e_core::cache::write_atomic(&path, text.as_bytes())?;
    Ok(path)
}
