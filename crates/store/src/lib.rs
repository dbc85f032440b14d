//! r2e's remote cache stores: the implementations of `r2e-core`'s cache [`Store`] that keep
//! entries and blobs on another machine, so that hosts share one cache.
//!
//! - **Object stores** (`s3://BUCKET/PREFIX`, `gs://BUCKET/PREFIX`, `az://CONTAINER/PREFIX`),
//!   through the `object_store` crate ([`object`]). Credentials and endpoints come from the
//!   usual environment variables (`AWS_ACCESS_KEY_ID`, `AWS_SECRET_ACCESS_KEY`, `AWS_REGION`,
//!   `AWS_ENDPOINT_URL`, `AWS_ALLOW_HTTP`; `GOOGLE_*`; `AZURE_*`), as the builders' `from_env`
//!   reads them. Create-only writes are S3's `If-None-Match: *`, conditional ones `If-Match`
//!   on the ETag a read returned. Only `s3://` is tested against a server; `gs://` and `az://`
//!   are not (no emulator of theirs installs here).
//! - **WebDAV servers** (`http://HOST/PATH`, `https://...`), with plain HTTP methods
//!   ([`dav`]): writes go to a temporary name, then `MOVE` into place (`Overwrite: F` for a
//!   create-only write). `https://USER:PASSWORD@HOST/PATH` authenticates with HTTP basic auth.
//!
//! Both lay entries out as the local store does, under the URL's prefix:
//! `PREFIX/<bucket's folder>/<2 hex>/<hex>` ([`r2e_core::cache::store::entry_name`]).
//!
//! Neither ever deletes an entry: [`Store::remove`] does nothing and says so (`Ok(false)`), as
//! S3 has no delete conditional on an ETag; a damaged remote entry is repaired in place by
//! [`Store::replace`] (the cache recomputes the value and replaces the damaged bytes only if they
//! are still there). Collecting a remote cache's garbage is left to the store's own lifecycle
//! rules.
//!
//! The [`Store`] trait is synchronous: each store owns a small tokio runtime ([`rt`]) and blocks
//! on it, from any thread (rayon's workers, or a thread that is itself inside another tokio
//! runtime: then the call runs on a thread of its own). A failure of the store (the network, the
//! server, a refused credential) is an environment error (exit 1), whose message names the
//! object's URL and never a credential's value.

pub mod dav;
pub mod object;
mod rt;
mod url;

use std::sync::Arc;
use std::time::Duration;

use r2e_core::cache::Store;
use r2e_core::error::{Error, Result};

pub use url::{RemoteUrl, Scheme, parse};

/// How a remote store connects: timeouts, retries, and settings that take the place of
/// environment variables (for a caller that must not change the process's environment, such as
/// a test).
#[derive(Clone)]
pub struct Options {
    /// How long a connection may take to open (default 5 s): an unreachable server fails fast.
    pub connect_timeout: Duration,
    /// How long a read may wait for the next bytes of an answer (default 60 s).
    pub read_timeout: Duration,
    /// How many times an object store retries a request that failed for a transient reason
    /// (default 3).
    pub retries: usize,
    /// Settings as the environment names them (`AWS_ENDPOINT_URL`, `AWS_ACCESS_KEY_ID`, ...),
    /// applied after (and so over) the process's environment.
    pub settings: Vec<(String, String)>,
}

impl Default for Options {
    fn default() -> Self {
        Options {
            connect_timeout: Duration::from_secs(5),
            read_timeout: Duration::from_secs(60),
            retries: 3,
            settings: Vec::new(),
        }
    }
}

impl std::fmt::Debug for Options {
    /// The settings' names only: their values may be credentials.
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        f.debug_struct("Options")
            .field("connect_timeout", &self.connect_timeout)
            .field("read_timeout", &self.read_timeout)
            .field("retries", &self.retries)
            .field(
                "settings",
                &self.settings.iter().map(|(k, _)| k).collect::<Vec<_>>(),
            )
            .finish()
    }
}

/// The remote store `url` names, with the default [`Options`] (settings from the environment).
/// An unknown scheme is a usage error (exit 2); a store that cannot be set up (a missing
/// credential, a bad setting) an environment error. Nothing is sent over the network yet: the
/// first request is the first use.
pub fn open(url: &str) -> Result<Arc<dyn Store>> {
    open_with(&parse(url)?, &Options::default())
}

/// The remote store `url` names, with `options`.
pub fn open_with(url: &RemoteUrl, options: &Options) -> Result<Arc<dyn Store>> {
    match url.scheme() {
        Scheme::S3 | Scheme::Gs | Scheme::Az => {
            Ok(Arc::new(object::ObjectRemote::open(url, options)?))
        }
        Scheme::Http | Scheme::Https => Ok(Arc::new(dav::Dav::open(url, options)?)),
        Scheme::File => Err(Error::internal(format!(
            "`{url}` is a folder, not a store reached over the network"
        ))),
    }
}

/// An error and its causes, each once (`object_store`'s errors do not repeat the cause
/// underneath, a refused connection, in their own text).
pub(crate) fn with_causes(e: &(dyn std::error::Error + 'static)) -> String {
    let mut out = e.to_string();
    let mut source = e.source();
    while let Some(inner) = source {
        let said = inner.to_string();
        if !out.contains(&said) {
            out.push_str(": ");
            out.push_str(&said);
        }
        source = inner.source();
    }
    out
}

/// `message` without the credentials it might hold: the values of `secrets` (each at least 6
/// characters long) and the query strings of URLs (a signature, a SAS token).
pub(crate) fn redact(message: &str, secrets: &[String]) -> String {
    let mut out = message
        .split_inclusive(char::is_whitespace)
        .map(|word| match (word.find("://"), word.find('?')) {
            (Some(scheme), Some(query)) if query > scheme => {
                let tail = &word[word.trim_end().len()..];
                format!("{}?…{tail}", &word[..query])
            }
            _ => word.to_owned(),
        })
        .collect::<String>();
    for secret in secrets.iter().filter(|s| s.len() >= 6) {
        out = out.replace(secret.as_str(), "<redacted>");
    }
    out
}

/// The values among `vars` that may be credentials: every variable whose name speaks of a
/// key, a secret, a token, a password or a signature.
pub(crate) fn secret_values<'a>(vars: impl IntoIterator<Item = (&'a str, &'a str)>) -> Vec<String> {
    vars.into_iter()
        .filter(|(name, _)| {
            let name = name.to_ascii_uppercase();
            [
                "KEY",
                "SECRET",
                "TOKEN",
                "PASSWORD",
                "SAS",
                "SIGNATURE",
                "CREDENTIAL",
            ]
            .iter()
            .any(|word| name.contains(word))
        })
        .map(|(_, value)| value.to_owned())
        .collect()
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn messages_lose_credentials() {
        let secrets = secret_values([
            ("AWS_SECRET_ACCESS_KEY", "wJalrXUtnFEMI"),
            ("AWS_REGION", "us-east-1"),
            ("AWS_ACCESS_KEY_ID", "abc"),
        ]);
        assert_eq!(secrets, vec!["wJalrXUtnFEMI".to_owned(), "abc".to_owned()]);
        let said = redact(
            "GET https://acct.blob.core.windows.net/c/k?sv=1&sig=xyz failed: wJalrXUtnFEMI, abc\n",
            &secrets,
        );
        assert_eq!(
            said,
            "GET https://acct.blob.core.windows.net/c/k?… failed: <redacted>, abc\n"
        );
        let shown = format!(
            "{:?}",
            Options {
                settings: vec![("AWS_SECRET_ACCESS_KEY".into(), "wJalrXUtnFEMI".into())],
                ..Options::default()
            }
        );
        assert!(!shown.contains("wJalr"), "{shown}");
    }
}
