//! Object stores as a cache [`Store`]: S3 (and stores that speak its API), Google Cloud Storage
//! and Azure Blob Storage, through the `object_store` crate. Only S3 is tested against a server
//! (moto's, `tests/it/services/remote.rs`): no emulator of the APIs `object_store` speaks to GCS
//! (its XML API with generation preconditions and multipart uploads) or Azure installs from the
//! package registries the tests reach, so `gs://` and `az://` are untested.
//!
//! Each entry or blob is one object, `PREFIX/<bucket's folder>/<2 hex>/<hex>`, and its version
//! is the object's ETag (on GCS its generation, which `object_store`'s conditional write there
//! takes). A plain write is a PUT (atomic: readers see the old object or the new
//! one); a create-only write is a PUT with `If-None-Match: *` (S3's conditional writes, which
//! S3 and most S3-compatible stores honour); a conditional one a PUT with `If-Match` on the
//! ETag a read returned. A blob is streamed: read back chunk by chunk, written by a multipart
//! upload (whole or not at all, as a plain PUT).
//!
//! What S3 lacks: a delete conditional on an ETag, and a last use other than the last write.
//! So [`Store::remove`] removes nothing (`Ok(false)`): a damaged entry stays until the cache
//! repairs it with [`Store::replace`] (which only replaces the damaged bytes it read);
//! [`Store::touch`] does nothing, and [`Store::list`]'s last use is the last write. A remote
//! bucket's garbage is for the store's lifecycle rules, not `r2e gc`.

use std::sync::Arc;
use std::time::{Duration, SystemTime};

use bytes::Bytes;
use futures_util::{StreamExt, TryStreamExt};
use object_store::aws::{AmazonS3Builder, AmazonS3ConfigKey, S3ConditionalPut};
use object_store::azure::{AzureConfigKey, MicrosoftAzureBuilder};
use object_store::buffered::BufWriter;
use object_store::gcp::{GoogleCloudStorageBuilder, GoogleConfigKey};
use object_store::path::Path;
use object_store::{
    BackoffConfig, ClientConfigKey, ObjectStore, ObjectStoreExt, PutMode, PutPayload, RetryConfig,
    UpdateVersion,
};
use r2e_core::cache::Bucket;
use r2e_core::cache::store::{Created, Fetched, Listed, Listing, Store, Version, entry_name};
use r2e_core::error::{Error, Result};
use r2e_core::hash::Hash;
use tokio::io::AsyncWriteExt;

use crate::rt::{Runtime, StreamReader};
use crate::{Options, RemoteUrl, Scheme, redact, secret_values, with_causes};

/// The bytes a blob's upload holds in memory at most, per part in flight.
const PART: usize = 8 << 20;
/// The parts of a blob uploaded at once.
const PARTS_IN_FLIGHT: usize = 2;
/// The bytes read from a blob's source at a time.
const READ: usize = 1 << 20;

/// An object store, as a [`Store`].
pub struct ObjectRemote {
    runtime: Arc<Runtime>,
    store: Arc<dyn ObjectStore>,
    /// `scheme://bucket`, for messages.
    root: String,
    /// Where entries go under the bucket (no slash at either end; may be empty).
    prefix: String,
    /// The values of the settings that may be credentials, never shown in a message.
    secrets: Vec<String>,
    /// Whether an object's version is its generation (GCS, whose conditional write
    /// `object_store` makes with `x-goog-if-generation-match`) rather than its ETag.
    generation: bool,
}

/// The settings of a store whose environment variables start with `prefix` (`AWS_`): the
/// process's environment, then `options.settings`, applied in that order (as the builders'
/// `from_env` reads the environment; after r2e's own timeouts, so that a variable overrides
/// them). A name the store does not know is skipped, as `from_env` skips it.
fn settings(prefix: &str, options: &Options) -> Vec<(String, String)> {
    std::env::vars_os()
        .filter_map(|(name, value)| Some((name.into_string().ok()?, value.into_string().ok()?)))
        .chain(options.settings.iter().cloned())
        .filter(|(name, _)| name.starts_with(prefix))
        .map(|(name, value)| (name.to_ascii_lowercase(), value))
        .collect()
}

/// r2e's defaults for every store's HTTP client: short connection timeouts (an unreachable
/// server fails in seconds), a read timeout, no cap on a whole request's time below an hour (a
/// blob may be large).
fn client_defaults(options: &Options) -> [(ClientConfigKey, String); 3] {
    let ms = |d: Duration| format!("{}ms", d.as_millis().max(1));
    [
        (ClientConfigKey::ConnectTimeout, ms(options.connect_timeout)),
        (ClientConfigKey::ReadTimeout, ms(options.read_timeout)),
        (ClientConfigKey::Timeout, "1h".to_owned()),
    ]
}

impl ObjectRemote {
    /// The store `url` names (`s3://`, `gs://`, `az://`), set up without a request.
    pub fn open(url: &RemoteUrl, options: &Options) -> Result<ObjectRemote> {
        let retry = RetryConfig {
            backoff: BackoffConfig {
                init_backoff: Duration::from_millis(100),
                max_backoff: Duration::from_secs(5),
                base: 2.0,
            },
            max_retries: options.retries,
            retry_timeout: Duration::from_secs(60),
        };
        let bucket_url = format!("{}://{}", url.scheme().as_str(), url.bucket());
        // The same for every kind: r2e's client defaults, then the kind's variables (which
        // win), then the bucket and the retries.
        macro_rules! configured {
            ($builder:expr, $key:ident, $prefix:literal) => {{
                let vars = settings($prefix, options);
                let mut builder = $builder;
                for (key, value) in client_defaults(options) {
                    builder = builder.with_config($key::Client(key), value);
                }
                for (name, value) in &vars {
                    if let Ok(key) = name.parse::<$key>() {
                        builder = builder.with_config(key, value);
                    }
                }
                (builder.with_url(&bucket_url).with_retry(retry), vars)
            }};
        }
        let (built, vars) = match url.scheme() {
            Scheme::S3 => {
                let (builder, vars) =
                    configured!(AmazonS3Builder::new(), AmazonS3ConfigKey, "AWS_");
                let built = builder
                    .with_conditional_put(S3ConditionalPut::ETagMatch)
                    .build()
                    .map(|s| Arc::new(s) as Arc<dyn ObjectStore>);
                (built, vars)
            }
            Scheme::Gs => {
                let (builder, vars) =
                    configured!(GoogleCloudStorageBuilder::new(), GoogleConfigKey, "GOOGLE_");
                (
                    builder.build().map(|s| Arc::new(s) as Arc<dyn ObjectStore>),
                    vars,
                )
            }
            Scheme::Az => {
                let (builder, vars) =
                    configured!(MicrosoftAzureBuilder::new(), AzureConfigKey, "AZURE_");
                (
                    builder.build().map(|s| Arc::new(s) as Arc<dyn ObjectStore>),
                    vars,
                )
            }
            Scheme::Http | Scheme::Https | Scheme::File => {
                return Err(Error::internal(format!("`{url}` is not an object store")));
            }
        };
        let secrets = secret_values(vars.iter().map(|(k, v)| (k.as_str(), v.as_str())));
        let store = built.map_err(|e| {
            Error::env(redact(
                &format!(
                    "cannot set up the remote store `{url}`: {}",
                    with_causes(&e)
                ),
                &secrets,
            ))
        })?;
        Ok(ObjectRemote {
            runtime: Runtime::new()?,
            store,
            root: bucket_url,
            prefix: url.prefix().to_owned(),
            secrets,
            generation: url.scheme() == Scheme::Gs,
        })
    }

    /// The object's path in the bucket.
    fn path(&self, bucket: Bucket, key: Hash) -> Path {
        Path::from(self.name(bucket, key))
    }

    fn name(&self, bucket: Bucket, key: Hash) -> String {
        if self.prefix.is_empty() {
            entry_name(bucket, key)
        } else {
            format!("{}/{}", self.prefix, entry_name(bucket, key))
        }
    }

    /// An environment error: what could not be done to which object, and why (no credential).
    fn failed(
        &self,
        what: &str,
        bucket: Bucket,
        key: Hash,
        e: impl std::error::Error + 'static,
    ) -> Error {
        let url = self.describe(bucket, key);
        Error::env(redact(
            &format!(
                "cannot {what} `{url}` in the remote cache: {}",
                with_causes(&e)
            ),
            &self.secrets,
        ))
    }

    /// The object's bytes and version, or `None` when there is none.
    fn fetch(&self, bucket: Bucket, key: Hash) -> Result<Option<Fetched>> {
        let path = self.path(bucket, key);
        let got = self.runtime.block_on(async {
            let got = self.store.get(&path).await?;
            let version = if self.generation {
                got.meta.version.clone()
            } else {
                got.meta.e_tag.clone()
            }
            .unwrap_or_default();
            let bytes = got.bytes().await?;
            Ok::<_, object_store::Error>((bytes, version))
        });
        match got {
            Ok((bytes, version)) => Ok(Some(Fetched {
                bytes: bytes.into(),
                version: Version::new(version),
            })),
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.failed("read", bucket, key, e)),
        }
    }
}

/// An entry's parts as one payload (each part copied once).
fn payload(entry: &[&[u8]]) -> PutPayload {
    entry
        .iter()
        .map(|part| Bytes::copy_from_slice(part))
        .collect()
}

impl Store for ObjectRemote {
    fn describe(&self, bucket: Bucket, key: Hash) -> String {
        format!("{}/{}", self.root, self.name(bucket, key))
    }

    fn get(&self, bucket: Bucket, key: Hash) -> Result<Option<Fetched>> {
        self.fetch(bucket, key)
    }

    fn contains(&self, bucket: Bucket, key: Hash) -> Result<bool> {
        let path = self.path(bucket, key);
        match self.runtime.block_on(self.store.head(&path)) {
            Ok(_) => Ok(true),
            Err(object_store::Error::NotFound { .. }) => Ok(false),
            Err(e) => Err(self.failed("look at", bucket, key, e)),
        }
    }

    fn put(&self, bucket: Bucket, key: Hash, entry: &[&[u8]]) -> Result<()> {
        let path = self.path(bucket, key);
        self.runtime
            .block_on(self.store.put(&path, payload(entry)))
            .map(drop)
            .map_err(|e| self.failed("write", bucket, key, e))
    }

    fn put_if_absent(&self, bucket: Bucket, key: Hash, entry: &[&[u8]]) -> Result<Created> {
        let path = self.path(bucket, key);
        // Lost: the winner's bytes, unless they went away since (then it tries again).
        for _ in 0..8 {
            let put = self.runtime.block_on(self.store.put_opts(
                &path,
                payload(entry),
                PutMode::Create.into(),
            ));
            match put {
                Ok(_) => return Ok(Created::Stored),
                Err(
                    object_store::Error::AlreadyExists { .. }
                    | object_store::Error::Precondition { .. },
                ) => {
                    if let Some(winner) = self.fetch(bucket, key)? {
                        return Ok(Created::Exists(winner));
                    }
                }
                Err(e) => return Err(self.failed("write", bucket, key, e)),
            }
        }
        Err(Error::env(format!(
            "cannot store `{}` in the remote cache: other writers keep adding and removing it",
            self.describe(bucket, key)
        )))
    }

    fn replace(
        &self,
        bucket: Bucket,
        key: Hash,
        current: &Version,
        entry: &[&[u8]],
    ) -> Result<bool> {
        if current.as_str().is_empty() {
            return Ok(false);
        }
        let path = self.path(bucket, key);
        let current = Some(current.as_str().to_owned());
        let mode = PutMode::Update(if self.generation {
            UpdateVersion {
                e_tag: None,
                version: current,
            }
        } else {
            UpdateVersion {
                e_tag: current,
                version: None,
            }
        });
        match self
            .runtime
            .block_on(self.store.put_opts(&path, payload(entry), mode.into()))
        {
            Ok(_) => Ok(true),
            Err(
                object_store::Error::Precondition { .. }
                | object_store::Error::NotFound { .. }
                | object_store::Error::AlreadyExists { .. },
            ) => Ok(false),
            Err(e) => Err(self.failed("replace", bucket, key, e)),
        }
    }

    /// Removes nothing: S3 has no delete conditional on the version read, and an unconditional
    /// one could delete the good entry another writer just put. A damaged entry is repaired by
    /// [`Store::replace`] instead.
    fn remove(&self, _bucket: Bucket, _key: Hash, _current: &Version) -> Result<bool> {
        Ok(false)
    }

    /// Nothing: an object's last use is its last write.
    fn touch(&self, _bucket: Bucket, _key: Hash) {}

    fn get_blob(&self, bucket: Bucket, key: Hash) -> Result<Option<Box<dyn std::io::Read + Send>>> {
        let path = self.path(bucket, key);
        match self.runtime.block_on(self.store.get(&path)) {
            Ok(got) => {
                let url = self.describe(bucket, key);
                let secrets = self.secrets.clone();
                let stream = got
                    .into_stream()
                    .map_err(move |e| {
                        let why = with_causes(&e);
                        redact(
                            &format!("cannot read `{url}` from the remote cache: {why}"),
                            &secrets,
                        )
                    })
                    .boxed();
                Ok(Some(Box::new(StreamReader::new(
                    self.runtime.clone(),
                    stream,
                ))))
            }
            Err(object_store::Error::NotFound { .. }) => Ok(None),
            Err(e) => Err(self.failed("read", bucket, key, e)),
        }
    }

    fn put_blob(&self, bucket: Bucket, key: Hash, blob: &mut dyn std::io::Read) -> Result<()> {
        let mut writer = BufWriter::with_capacity(self.store.clone(), self.path(bucket, key), PART)
            .with_max_concurrency(PARTS_IN_FLIGHT);
        let mut buf = vec![0u8; READ];
        let written = loop {
            let n = match blob.read(&mut buf) {
                // A failed shutdown (the upload's completion) leaves nothing to abort.
                Ok(0) => {
                    return self
                        .runtime
                        .block_on(writer.shutdown())
                        .map_err(|e| self.failed("write", bucket, key, e));
                }
                Ok(n) => n,
                Err(e) if e.kind() == std::io::ErrorKind::Interrupted => continue,
                Err(e) => {
                    break Err(Error::env(format!(
                        "cannot read the blob stored as `{}`: {e}",
                        self.describe(bucket, key)
                    )));
                }
            };
            let chunk = Bytes::copy_from_slice(&buf[..n]);
            if let Err(e) = self.runtime.block_on(writer.put(chunk)) {
                break Err(self.failed("write", bucket, key, e));
            }
        };
        // An upload begun is abandoned (its parts are not kept); nothing was stored.
        let _ = self.runtime.block_on(writer.abort());
        written
    }

    fn list(&self, bucket: Bucket) -> Result<Listing> {
        let folder = if self.prefix.is_empty() {
            bucket.folder()
        } else {
            format!("{}/{}", self.prefix, bucket.folder())
        };
        let under = Path::from(folder.as_str());
        let listed = self
            .runtime
            .block_on(self.store.list(Some(&under)).try_collect::<Vec<_>>())
            .map_err(|e| {
                Error::env(redact(
                    &format!(
                        "cannot list `{}/{folder}` in the remote cache: {}",
                        self.root,
                        with_causes(&e)
                    ),
                    &self.secrets,
                ))
            })?;
        let start = format!("{folder}/");
        let items = listed
            .into_iter()
            .map(|meta| {
                let location = meta.location.as_ref();
                Listed {
                    name: location.strip_prefix(&start).unwrap_or(location).to_owned(),
                    bytes: meta.size,
                    used: SystemTime::from(meta.last_modified),
                    linked: None,
                }
            })
            .collect();
        Ok(Listing { items, overhead: 0 })
    }
}
