//! A WebDAV server as a cache [`Store`]: `http://HOST/PATH` or `https://...`, with plain HTTP
//! methods (GET, HEAD, PUT, DELETE) and WebDAV's `MOVE`, as nginx's `ngx_http_dav_module`
//! serves them.
//!
//! Each entry or blob is one file, `PATH/<bucket's folder>/<2 hex>/<hex>`. A write goes to a
//! temporary name beside it (`<name>.tmp-<random>`), then `MOVE`s into place, so that a reader
//! sees the old file or the new one, never a part: with `Overwrite: T` for a plain write, with
//! `Overwrite: F` for a create-only one (a `412 Precondition Failed` means another writer won:
//! the temporary file is deleted and the winner's bytes read back). The temporary file is PUT
//! into the destination's own collection, so the collection `MOVE` needs exists (nginx makes
//! it with `create_full_put_path on;`).
//!
//! A version is the blake3 hash of the bytes read, not the server's ETag: nginx's ETag is the
//! file's modification time in seconds and its length, the same for two writes of one length
//! within a second. [`Store::replace`] reads the entry again and writes only if its bytes still
//! hash to the version expected: **best-effort, not atomic** (a write by another host between
//! the read and the `MOVE` is overwritten; both writers hold a good entry for the key, so the
//! cache stays correct). Leases never rely on it: a lease is taken over by a create-only write
//! of its next generation (`cache::remote`).
//!
//! As with the object stores ([`crate::object`]), [`Store::remove`] removes nothing and
//! [`Store::touch`] does nothing; [`Store::list`] gives an empty listing (listing a collection
//! is `PROPFIND`, which nginx's module does not serve): a server's garbage is its own business.
//!
//! The server needs, besides `dav_methods PUT DELETE MOVE;` and `create_full_put_path on;`,
//! `client_max_body_size 0;` (or a size above the largest blob): nginx refuses bodies over 1 MiB
//! by default.

use std::io::Read;
use std::sync::Arc;
use std::sync::atomic::{AtomicU64, Ordering};
use std::time::{SystemTime, UNIX_EPOCH};

use bytes::Bytes;
use futures_util::StreamExt;
use r2e_core::cache::Bucket;
use r2e_core::cache::store::{Created, Fetched, Listing, Store, Version, entry_name};
use r2e_core::error::{Error, Result};
use r2e_core::hash::Hash;
use reqwest::{Method, StatusCode};

use crate::rt::{Runtime, StreamReader};
use crate::{Options, RemoteUrl, Scheme, redact, with_causes};

/// The bytes read from a blob's source at a time.
const READ: usize = 1 << 20;

/// A WebDAV server, as a [`Store`].
pub struct Dav {
    runtime: Arc<Runtime>,
    http: reqwest::Client,
    /// `scheme://host[:port][/path]`, without credentials: the base of every file's URL.
    base: String,
    /// HTTP basic auth, from the URL's `user:password@`.
    auth: Option<(String, Option<String>)>,
    /// The password, never shown in a message.
    secrets: Vec<String>,
}

/// What went wrong with one request: the transport's failure, or the server's answer.
enum Failure {
    Transport(reqwest::Error),
    Status(StatusCode),
    /// The request's task was cut short (the runtime is shutting down).
    Cancelled,
}

impl std::fmt::Display for Failure {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        match self {
            Failure::Transport(e) => f.write_str(&with_causes(e)),
            Failure::Status(status) => write!(f, "the server answered {status}"),
            Failure::Cancelled => write!(f, "the request was cancelled"),
        }
    }
}

impl From<reqwest::Error> for Failure {
    fn from(e: reqwest::Error) -> Self {
        Failure::Transport(e.without_url())
    }
}

/// A unique suffix for a temporary name: the process, a count and the time, hashed.
fn random() -> String {
    static COUNT: AtomicU64 = AtomicU64::new(0);
    let now = SystemTime::now()
        .duration_since(UNIX_EPOCH)
        .map_or(0, |d| d.as_nanos());
    let seed = format!(
        "{}:{}:{now}:{:?}",
        std::process::id(),
        COUNT.fetch_add(1, Ordering::Relaxed),
        std::thread::current().id()
    );
    blake3::hash(seed.as_bytes()).to_hex()[..16].to_owned()
}

/// The version of bytes read: their blake3 hash.
fn version_of(bytes: &[u8]) -> Version {
    Version::new(format!("b3:{}", blake3::hash(bytes).to_hex()))
}

impl Dav {
    /// The server `url` names (`http://`, `https://`), set up without a request.
    pub fn open(url: &RemoteUrl, options: &Options) -> Result<Dav> {
        if !matches!(url.scheme(), Scheme::Http | Scheme::Https) {
            return Err(Error::internal(format!("`{url}` is not a WebDAV server")));
        }
        let http = reqwest::Client::builder()
            .connect_timeout(options.connect_timeout)
            .read_timeout(options.read_timeout)
            .build()
            .map_err(|e| {
                Error::env(format!(
                    "cannot set up an HTTP client for the remote store `{url}`: {}",
                    Failure::Transport(e)
                ))
            })?;
        let auth = url.userinfo().cloned();
        let secrets = auth
            .iter()
            .filter_map(|(_, password)| password.clone())
            .collect();
        Ok(Dav {
            runtime: Runtime::new()?,
            http,
            base: url.base(),
            auth,
            secrets,
        })
    }

    fn url(&self, bucket: Bucket, key: Hash) -> String {
        format!("{}/{}", self.base, entry_name(bucket, key))
    }

    fn request(&self, method: Method, url: &str) -> reqwest::RequestBuilder {
        let request = self.http.request(method, url);
        match &self.auth {
            Some((user, password)) => request.basic_auth(user, password.as_ref()),
            None => request,
        }
    }

    /// An environment error: what could not be done to which file, and why.
    fn failed(&self, what: &str, url: &str, e: Failure) -> Error {
        Error::env(redact(
            &format!("cannot {what} `{url}` in the remote cache: {e}"),
            &self.secrets,
        ))
    }

    /// The file's bytes and version, or `None` when there is none.
    fn fetch(&self, url: &str) -> Result<Option<Fetched>> {
        let got = self.runtime.block_on(async {
            let response = self.request(Method::GET, url).send().await?;
            match response.status() {
                StatusCode::NOT_FOUND => Ok(None),
                status if status.is_success() => Ok(Some(response.bytes().await?)),
                status => Err(Failure::Status(status)),
            }
        });
        match got {
            Ok(Some(bytes)) => Ok(Some(Fetched {
                version: version_of(&bytes),
                bytes: bytes.into(),
            })),
            Ok(None) => Ok(None),
            Err(e) => Err(self.failed("read", url, e)),
        }
    }

    /// PUTs `body` to a temporary name beside `url`; returns that name.
    fn put_temp(&self, url: &str, body: reqwest::Body) -> Result<String> {
        let temp = format!("{url}.tmp-{}", random());
        let put = self.runtime.block_on(async {
            let response = self.request(Method::PUT, &temp).body(body).send().await?;
            match response.status() {
                status if status.is_success() => Ok(()),
                status => Err(Failure::Status(status)),
            }
        });
        match put {
            Ok(()) => Ok(temp),
            Err(e) => {
                // A server that answered may hold a part (nginx does not: it writes a body
                // aside first); one that did not answer would not answer a DELETE either.
                if matches!(e, Failure::Status(_)) {
                    self.delete(&temp);
                }
                Err(self.failed("write", url, e))
            }
        }
    }

    /// MOVEs `temp` to `url`; with `overwrite` false, says `false` when something is there
    /// (`412`: `temp` stays).
    fn place(&self, temp: &str, url: &str, overwrite: bool) -> Result<bool> {
        let moved = self.runtime.block_on(async {
            let response = self
                .request(Method::from_bytes(b"MOVE").expect("a method"), temp)
                .header("Destination", url)
                .header("Overwrite", if overwrite { "T" } else { "F" })
                .send()
                .await?;
            match response.status() {
                StatusCode::PRECONDITION_FAILED if !overwrite => Ok(false),
                status if status.is_success() => Ok(true),
                status => Err(Failure::Status(status)),
            }
        });
        moved.map_err(|e| {
            self.delete(temp);
            self.failed("write", url, e)
        })
    }

    /// Deletes a temporary file, ignoring a failure (a leftover only takes room).
    fn delete(&self, temp: &str) {
        // `send` starts its timers at once: inside the runtime.
        let _ = self
            .runtime
            .block_on(async { self.request(Method::DELETE, temp).send().await });
    }
}

/// An entry's parts as one body (each part copied once).
fn body(entry: &[&[u8]]) -> reqwest::Body {
    reqwest::Body::from(entry.concat())
}

impl Store for Dav {
    fn describe(&self, bucket: Bucket, key: Hash) -> String {
        self.url(bucket, key)
    }

    fn get(&self, bucket: Bucket, key: Hash) -> Result<Option<Fetched>> {
        self.fetch(&self.url(bucket, key))
    }

    fn contains(&self, bucket: Bucket, key: Hash) -> Result<bool> {
        let url = self.url(bucket, key);
        let found = self.runtime.block_on(async {
            let response = self.request(Method::HEAD, &url).send().await?;
            match response.status() {
                StatusCode::NOT_FOUND => Ok(false),
                status if status.is_success() => Ok(true),
                status => Err(Failure::Status(status)),
            }
        });
        found.map_err(|e| self.failed("look at", &url, e))
    }

    fn put(&self, bucket: Bucket, key: Hash, entry: &[&[u8]]) -> Result<()> {
        let url = self.url(bucket, key);
        let temp = self.put_temp(&url, body(entry))?;
        self.place(&temp, &url, true).map(drop)
    }

    fn put_if_absent(&self, bucket: Bucket, key: Hash, entry: &[&[u8]]) -> Result<Created> {
        let url = self.url(bucket, key);
        // Lost: the winner's bytes, unless they went away since (then it tries again).
        for _ in 0..8 {
            let temp = self.put_temp(&url, body(entry))?;
            if self.place(&temp, &url, false)? {
                return Ok(Created::Stored);
            }
            self.delete(&temp);
            if let Some(winner) = self.fetch(&url)? {
                return Ok(Created::Exists(winner));
            }
        }
        Err(Error::env(format!(
            "cannot store `{url}` in the remote cache: other writers keep adding and removing it"
        )))
    }

    /// Best-effort: the entry is read again and replaced only if its bytes are still those of
    /// `current`, but not atomically (see the module's documentation).
    fn replace(
        &self,
        bucket: Bucket,
        key: Hash,
        current: &Version,
        entry: &[&[u8]],
    ) -> Result<bool> {
        let url = self.url(bucket, key);
        match self.fetch(&url)? {
            Some(now) if now.version == *current => {
                let temp = self.put_temp(&url, body(entry))?;
                self.place(&temp, &url, true)
            }
            _ => Ok(false),
        }
    }

    /// Removes nothing (as [`crate::object`]'s stores): a damaged entry is repaired by
    /// [`Store::replace`].
    fn remove(&self, _bucket: Bucket, _key: Hash, _current: &Version) -> Result<bool> {
        Ok(false)
    }

    /// Nothing: a file's last use is its last write.
    fn touch(&self, _bucket: Bucket, _key: Hash) {}

    fn get_blob(&self, bucket: Bucket, key: Hash) -> Result<Option<Box<dyn Read + Send>>> {
        let url = self.url(bucket, key);
        let got = self.runtime.block_on(async {
            let response = self.request(Method::GET, &url).send().await?;
            match response.status() {
                StatusCode::NOT_FOUND => Ok(None),
                status if status.is_success() => Ok(Some(response)),
                status => Err(Failure::Status(status)),
            }
        });
        let response = match got {
            Ok(Some(response)) => response,
            Ok(None) => return Ok(None),
            Err(e) => return Err(self.failed("read", &url, e)),
        };
        let secrets = self.secrets.clone();
        let stream = futures_util::stream::unfold(Some(response), move |state| {
            let (url, secrets) = (url.clone(), secrets.clone());
            async move {
                let mut response = state?;
                match response.chunk().await {
                    Ok(Some(chunk)) => Some((Ok(chunk), Some(response))),
                    Ok(None) => None,
                    Err(e) => {
                        let why = Failure::from(e);
                        let said = format!("cannot read `{url}` from the remote cache: {why}");
                        Some((Err(redact(&said, &secrets)), None))
                    }
                }
            }
        })
        .boxed();
        Ok(Some(Box::new(StreamReader::new(
            self.runtime.clone(),
            stream,
        ))))
    }

    fn put_blob(&self, bucket: Bucket, key: Hash, blob: &mut dyn Read) -> Result<()> {
        let url = self.url(bucket, key);
        let temp = format!("{url}.tmp-{}", random());
        // The body is a channel: this thread reads the source and sends its chunks while the
        // runtime's workers send the request.
        let (tx, rx) = tokio::sync::mpsc::channel::<std::io::Result<Bytes>>(4);
        let chunks = futures_util::stream::unfold(rx, |mut rx| async move {
            rx.recv().await.map(|chunk| (chunk, rx))
        });
        let request = self
            .request(Method::PUT, &temp)
            .body(reqwest::Body::wrap_stream(chunks));
        let sent = self.runtime.spawn(async move {
            let response = request.send().await?;
            match response.status() {
                status if status.is_success() => Ok(()),
                status => Err(Failure::Status(status)),
            }
        });
        let mut buf = vec![0u8; READ];
        let mut read_failure = None;
        loop {
            let chunk = match blob.read(&mut buf) {
                Ok(0) => break,
                Ok(n) => Ok(Bytes::copy_from_slice(&buf[..n])),
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    read_failure = Some(e.to_string());
                    // Cuts the request's body short: the server keeps nothing of it.
                    Err(e)
                }
            };
            let failed = chunk.is_err();
            if self.runtime.block_on(tx.send(chunk)).is_err() || failed {
                // The request ended early (the server refused it): its answer says why.
                break;
            }
        }
        drop(tx);
        let sent = match self.runtime.block_on(sent) {
            Ok(sent) => sent,
            Err(e) if e.is_panic() => std::panic::resume_unwind(e.into_panic()),
            Err(_) => Err(Failure::Cancelled),
        };
        if let Some(why) = read_failure {
            self.delete(&temp);
            return Err(Error::env(format!(
                "cannot read the blob to store as `{url}`: {why}"
            )));
        }
        if let Err(e) = sent {
            self.delete(&temp);
            return Err(self.failed("write", &url, e));
        }
        self.place(&temp, &url, true).map(drop)
    }

    /// Empty: nginx's WebDAV module does not list a collection (`PROPFIND`).
    fn list(&self, _bucket: Bucket) -> Result<Listing> {
        Ok(Listing::default())
    }
}
