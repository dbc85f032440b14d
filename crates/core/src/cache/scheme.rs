//! The remote stores r2e reads, by URL scheme: their one list. The config checks a remote
//! cache's URL against it, `r2e-store` opens the object stores and WebDAV servers it names, and
//! a `file://` folder (every host mounts it) is opened as a [`super::LocalStore`].

/// A kind of remote store, by its URL's scheme.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash)]
pub enum Scheme {
    /// `s3://BUCKET/PREFIX`: Amazon S3 or a store that speaks its API.
    S3,
    /// `gs://BUCKET/PREFIX`: Google Cloud Storage (untested: no test server).
    Gs,
    /// `az://CONTAINER/PREFIX`: Azure Blob Storage (the account from
    /// `AZURE_STORAGE_ACCOUNT_NAME`; untested: no test server).
    Az,
    /// `http://HOST/PATH`: a WebDAV server.
    Http,
    /// `https://HOST/PATH`: a WebDAV server over TLS.
    Https,
    /// `file:///PATH`: a folder every host mounts.
    File,
}

impl Scheme {
    /// Every scheme, in the order messages list them.
    pub const ALL: [Scheme; 6] = [
        Scheme::S3,
        Scheme::Gs,
        Scheme::Az,
        Scheme::Http,
        Scheme::Https,
        Scheme::File,
    ];

    /// Every scheme as a URL spells it, without `://`.
    pub const NAMES: [&str; 6] = [
        Scheme::S3.as_str(),
        Scheme::Gs.as_str(),
        Scheme::Az.as_str(),
        Scheme::Http.as_str(),
        Scheme::Https.as_str(),
        Scheme::File.as_str(),
    ];

    /// The scheme as a URL spells it, without `://`.
    pub const fn as_str(self) -> &'static str {
        match self {
            Scheme::S3 => "s3",
            Scheme::Gs => "gs",
            Scheme::Az => "az",
            Scheme::Http => "http",
            Scheme::Https => "https",
            Scheme::File => "file",
        }
    }

    /// Whether the store is reached over the network (`r2e-store` opens it), not a folder.
    pub fn is_network(self) -> bool {
        self != Scheme::File
    }

    /// The scheme `url` starts with (`SCHEME://`, as a URL spells it), and what follows it.
    pub fn of(url: &str) -> Option<(Scheme, &str)> {
        let (scheme, rest) = url.split_once("://")?;
        Scheme::ALL
            .into_iter()
            .find(|s| s.as_str() == scheme)
            .map(|s| (s, rest))
    }

    /// The schemes `which` keeps, as messages list them: `` `s3://`, `gs://` ``...
    pub fn listed(which: impl Fn(Scheme) -> bool) -> String {
        Scheme::ALL
            .into_iter()
            .filter(|s| which(*s))
            .map(|s| format!("`{}://`", s.as_str()))
            .collect::<Vec<_>>()
            .join(", ")
    }
}
