//! `[cache]`: the store shared between hosts (`[cache] remote`, its lease, mode and signing key),
//! and the shards a build is spread over (`--shard I/N`).

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::env::env_var_name;
use super::locate::{Source, line_col};
use crate::error::Result;

/// `[cache]`: the store shared between hosts, for a build spread over them
/// (`docs/caching.md`). `--remote-cache URL` and `--remote-mode read` on the command line win
/// over the file. Credentials come from the environment only, as each store's own tools read
/// them (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
/// `AWS_ALLOW_HTTP` for S3 and S3-compatible servers); r2e never writes them to a file, a log or
/// an output.
#[derive(Deserialize, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct CacheOptions {
    /// The store's URL: `s3://BUCKET/PREFIX` (and S3-compatible servers), `gs://`, `az://`,
    /// `http(s)://HOST/PATH` (WebDAV), or `file:///PATH` (a folder every host mounts). The
    /// other keys need it.
    #[schemars(with = "Option<String>")]
    remote: Option<Spanned<String>>,
    /// Seconds an action that two hosts need stays claimed without renewal; at least 5 (a lease
    /// is renewed every third of it).
    #[schemars(with = "Option<u64>", extend("default" = RemoteCache::DEFAULT_LEASE_SECONDS))]
    lease_seconds: Option<Spanned<u64>>,
    /// Whether this host writes to the store.
    #[schemars(with = "Option<RemoteMode>", extend("default" = RemoteMode::default()))]
    remote_mode: Option<Spanned<String>>,
    /// The environment variable holding the key this host signs what it writes with; entries
    /// read are then taken only when signed with it. The name only: the key is read when the
    /// store is opened, and never kept.
    #[schemars(with = "Option<String>")]
    signing_key_env: Option<Spanned<String>>,
}

/// The schemes of a remote cache's URL ([`crate::cache::Scheme`], their one list): object stores
/// (`s3://BUCKET/PREFIX`, `gs://`, `az://`), a WebDAV server (`http://`, `https://`), a folder
/// every host mounts (`file:///PATH`).
pub const REMOTE_SCHEMES: [&str; 6] = crate::cache::Scheme::NAMES;

/// One shard of a build spread over hosts (`--shard I/N`): the repositories whose name hashes
/// to `index` modulo `count`.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Serialize)]
pub struct Shard {
    pub index: u32,
    pub count: u32,
}

impl Shard {
    /// Parses `I/N` (I counts from 0 and is less than N).
    pub fn parse(text: &str) -> std::result::Result<Shard, String> {
        let bad = || {
            format!("`{text}` is not a shard: give `I/N`, with I counting from 0 (`0/2` and `1/2`)")
        };
        let (i, n) = text.split_once('/').ok_or_else(bad)?;
        let (index, count): (u32, u32) = (
            i.trim().parse().map_err(|_| bad())?,
            n.trim().parse().map_err(|_| bad())?,
        );
        if count == 0 {
            return Err(format!("`{text}`: a build has at least one shard"));
        }
        if index >= count {
            return Err(format!(
                "`{text}`: shard {index} of {count} does not exist (shards count from 0 to {})",
                count - 1
            ));
        }
        Ok(Shard { index, count })
    }

    /// The shard a repository falls in: a stable hash of its name (the same on every host and
    /// every run), modulo the count.
    pub fn of(name: &str, count: u32) -> u32 {
        let h = crate::hash::Hash::of_bytes(name.as_bytes());
        let n = u64::from_le_bytes(h.0[..8].try_into().expect("8 bytes"));
        (n % u64::from(count)) as u32
    }

    /// Whether the repository named `name` is this shard's.
    pub fn holds(&self, name: &str) -> bool {
        Shard::of(name, self.count) == self.index
    }
}

impl std::fmt::Display for Shard {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(f, "{}/{}", self.index, self.count)
    }
}

/// `[cache] remote` (or `--remote-cache`): a store shared by every host that builds the
/// pipeline, read after the local cache and written create-only (`docs/caching.md`).
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct RemoteCache {
    /// The store's URL as given (it holds no credentials: those come from the environment).
    pub url: String,
    /// How long a lease on an action another host may need lasts without renewal.
    pub lease_seconds: u64,
    /// Whether this host writes to the store (`[cache] remote_mode`).
    pub mode: RemoteMode,
    /// `[cache] signing_key_env`: the variable holding the key remote entries are signed and
    /// checked with (the name only: the key is read when the store is opened, and never kept
    /// here), and where the file names it (`file:line:col`, for messages).
    pub signing_key_env: Option<(String, String)>,
}

/// `[cache] remote_mode`: whether this host writes to the remote store.
#[derive(Clone, Copy, Debug, Default, PartialEq, Eq, Serialize, JsonSchema)]
#[serde(rename_all = "kebab-case")]
pub enum RemoteMode {
    /// Reads it, and stores what it computes there (the default).
    #[default]
    ReadWrite,
    /// Reads it and never writes to it: no results, no leases, no repairs.
    Read,
}

impl RemoteMode {
    /// Parses `read` or `read-write`.
    pub fn parse(text: &str) -> std::result::Result<RemoteMode, String> {
        match text {
            "read-write" => Ok(RemoteMode::ReadWrite),
            "read" => Ok(RemoteMode::Read),
            other => Err(format!(
                "`{other}` is not a remote mode: give `read` (never write to the store) or `read-write`"
            )),
        }
    }
}

impl RemoteCache {
    pub const DEFAULT_LEASE_SECONDS: u64 = 60;

    /// Checks a remote cache's URL: its scheme must be one r2e reads (the message lists them),
    /// with something after it.
    pub fn parse(url: &str) -> std::result::Result<RemoteCache, String> {
        let scheme = url.split_once("://").map(|(s, _)| s);
        let rest = url.split_once("://").map_or("", |(_, r)| r);
        match scheme {
            Some(s) if REMOTE_SCHEMES.contains(&s) && !rest.trim_matches('/').is_empty() => {
                if url.contains('@') && s != "file" {
                    return Err(format!(
                        "the remote cache `{url}` names credentials in its URL; give them in the environment instead (`AWS_ACCESS_KEY_ID`, ...)"
                    ));
                }
                Ok(RemoteCache {
                    url: url.to_owned(),
                    lease_seconds: Self::DEFAULT_LEASE_SECONDS,
                    mode: RemoteMode::default(),
                    signing_key_env: None,
                })
            }
            _ => Err(format!(
                "`{url}` is not a remote cache r2e can use; give a URL starting with {}",
                REMOTE_SCHEMES.map(|s| format!("`{s}://`")).join(", ")
            )),
        }
    }
}

/// The `[cache]` table's remote store.
pub(super) fn remote_cache(
    src: &Source,
    options: Option<CacheOptions>,
) -> Result<Option<RemoteCache>> {
    let Some(options) = options else {
        return Ok(None);
    };
    let Some(url) = options.remote else {
        let spans = [
            ("lease_seconds", options.lease_seconds.map(|l| l.span())),
            ("remote_mode", options.remote_mode.map(|m| m.span())),
            ("signing_key_env", options.signing_key_env.map(|k| k.span())),
        ];
        if let Some((name, span)) = spans.into_iter().find(|(_, s)| s.is_some()) {
            return Err(src.at(
                span,
                &format!("`{name}` needs a `remote` store in `[cache]`"),
            ));
        }
        return Ok(None);
    };
    let mut remote = RemoteCache::parse(url.get_ref()).map_err(|m| src.at(Some(url.span()), &m))?;
    if let Some(l) = options.lease_seconds {
        if *l.get_ref() < 5 {
            return Err(src.at(
                Some(l.span()),
                "`lease_seconds` must be at least 5: a lease is renewed every third of it",
            ));
        }
        remote.lease_seconds = *l.get_ref();
    }
    if let Some(m) = options.remote_mode {
        remote.mode = RemoteMode::parse(m.get_ref()).map_err(|e| src.at(Some(m.span()), &e))?;
    }
    if let Some(var) = options.signing_key_env {
        let name = env_var_name(src, &var, "signing_key_env", "key")?;
        let (line, col) = line_col(src.text, var.span().start);
        remote.signing_key_env =
            Some((name.clone(), format!("{}:{line}:{col}", src.file.display())));
    }
    Ok(Some(remote))
}
