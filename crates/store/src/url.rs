//! A remote store's URL, parsed without connecting: the scheme says which kind of store, the
//! rest where its entries go.

use std::fmt;

use r2e_core::error::{Error, Result};

/// The kinds of remote store, by URL scheme: their one list is `r2e-core`'s; this crate opens
/// those reached over the network ([`Scheme::is_network`]).
pub use r2e_core::cache::Scheme;

/// What a remote store's URL may start with, as messages list them.
fn accepted() -> String {
    Scheme::listed(Scheme::is_network)
}

/// A remote store's URL, checked: its scheme, its bucket (or host), the prefix its entries go
/// under, and for a WebDAV server the credentials the URL carries. Its `Display` shows no
/// credential.
#[derive(Clone, PartialEq, Eq)]
pub struct RemoteUrl {
    scheme: Scheme,
    /// The bucket or container; for a WebDAV server, the host and port.
    bucket: String,
    /// The path under the bucket (or host), without a slash at either end; may be empty.
    prefix: String,
    /// A WebDAV URL's `user:password` (percent-decoded): HTTP basic auth.
    userinfo: Option<(String, Option<String>)>,
}

/// Checks `url`'s form without connecting: a known scheme (else a usage error listing the
/// accepted ones), then a bucket or host. Meant for the config layer, which adds the place in
/// the file to the message.
pub fn parse(url: &str) -> Result<RemoteUrl> {
    let trimmed = url.trim();
    let Some((scheme, rest)) = trimmed.split_once("://") else {
        return Err(Error::input(format!(
            "`{}` is not a remote store's URL: it should start with one of {}",
            without_userinfo(trimmed),
            accepted()
        )));
    };
    let Some(scheme) = Scheme::ALL
        .into_iter()
        .filter(|s| s.is_network())
        .find(|s| s.as_str().eq_ignore_ascii_case(scheme))
    else {
        return Err(Error::input(format!(
            "`{scheme}://` is not a remote store's scheme: the accepted ones are {}",
            accepted()
        )));
    };
    if rest.contains(['?', '#']) {
        return Err(Error::input(format!(
            "the remote store `{}` has a query or a fragment: give only {}://{}/PREFIX",
            without_userinfo(trimmed),
            scheme.as_str(),
            what_comes_first(scheme)
        )));
    }
    let (authority, path) = rest.split_once('/').unwrap_or((rest, ""));
    let (userinfo, bucket) = match authority.rsplit_once('@') {
        Some((info, host)) => (Some(info), host),
        None => (None, authority),
    };
    if bucket.is_empty() {
        return Err(Error::input(format!(
            "the remote store `{}` names no {}: give {}://{}/PREFIX",
            without_userinfo(trimmed),
            what_comes_first(scheme),
            scheme.as_str(),
            what_comes_first(scheme).to_ascii_uppercase()
        )));
    }
    let userinfo = match (scheme, userinfo) {
        (_, None) => None,
        (Scheme::Http | Scheme::Https, Some(info)) => {
            let (user, password) = match info.split_once(':') {
                Some((user, password)) => (user, Some(decode(password))),
                None => (info, None),
            };
            Some((decode(user), password))
        }
        (_, Some(_)) => {
            return Err(Error::input(format!(
                "the remote store `{}` has credentials in its URL: an object store takes them \
                 from its environment variables",
                without_userinfo(trimmed)
            )));
        }
    };
    let prefix = path
        .split('/')
        .filter(|part| !part.is_empty())
        .collect::<Vec<_>>();
    if prefix.iter().any(|part| *part == "." || *part == "..") {
        return Err(Error::input(format!(
            "the remote store `{}` has `.` or `..` in its path",
            without_userinfo(trimmed)
        )));
    }
    Ok(RemoteUrl {
        scheme,
        bucket: bucket.to_owned(),
        prefix: prefix.join("/"),
        userinfo,
    })
}

fn what_comes_first(scheme: Scheme) -> &'static str {
    match scheme {
        Scheme::S3 | Scheme::Gs => "bucket",
        Scheme::Az => "container",
        Scheme::Http | Scheme::Https => "host",
        Scheme::File => "path",
    }
}

/// `url` with its `user:password@` (if any) left out, for messages.
fn without_userinfo(url: &str) -> String {
    let Some((scheme, rest)) = url.split_once("://") else {
        return url.to_owned();
    };
    let end = rest.find('/').unwrap_or(rest.len());
    match rest[..end].rfind('@') {
        Some(at) => format!("{scheme}://{}", &rest[at + 1..]),
        None => url.to_owned(),
    }
}

/// Percent-decoding, for the user and password of a URL (`%40` for an `@` in a password).
fn decode(text: &str) -> String {
    let bytes = text.as_bytes();
    let mut out = Vec::with_capacity(bytes.len());
    let mut i = 0;
    while i < bytes.len() {
        let hex = |b: u8| (b as char).to_digit(16);
        match (bytes[i], bytes.get(i + 1), bytes.get(i + 2)) {
            (b'%', Some(&h), Some(&l)) if hex(h).is_some() && hex(l).is_some() => {
                out.push((hex(h).unwrap() * 16 + hex(l).unwrap()) as u8);
                i += 3;
            }
            (b, _, _) => {
                out.push(b);
                i += 1;
            }
        }
    }
    String::from_utf8_lossy(&out).into_owned()
}

impl RemoteUrl {
    pub fn scheme(&self) -> Scheme {
        self.scheme
    }

    /// The bucket or container; for a WebDAV server, the host (and port).
    pub fn bucket(&self) -> &str {
        &self.bucket
    }

    /// The path entries go under, without a slash at either end (empty: the bucket's root).
    pub fn prefix(&self) -> &str {
        &self.prefix
    }

    /// A WebDAV URL's user and password, for HTTP basic auth.
    pub(crate) fn userinfo(&self) -> Option<&(String, Option<String>)> {
        self.userinfo.as_ref()
    }

    /// `scheme://bucket[/prefix]`, without credentials: the base of the objects' URLs.
    pub fn base(&self) -> String {
        let mut out = format!("{}://{}", self.scheme.as_str(), self.bucket);
        if !self.prefix.is_empty() {
            out.push('/');
            out.push_str(&self.prefix);
        }
        out
    }
}

impl fmt::Display for RemoteUrl {
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        f.write_str(&self.base())
    }
}

impl fmt::Debug for RemoteUrl {
    /// As `Display`: no password.
    fn fmt(&self, f: &mut fmt::Formatter<'_>) -> fmt::Result {
        write!(f, "RemoteUrl({})", self.base())
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn every_accepted_scheme_parses() {
        let url = parse("s3://my-bucket/team/cache/").unwrap();
        assert_eq!(
            (url.scheme(), url.bucket(), url.prefix()),
            (Scheme::S3, "my-bucket", "team/cache")
        );
        assert_eq!(url.to_string(), "s3://my-bucket/team/cache");
        assert_eq!(parse("gs://b").unwrap().prefix(), "");
        assert_eq!(parse("AZ://c/p").unwrap().scheme(), Scheme::Az);
        let dav = parse("https://me:p%40ss@dav.example:8443/r2e//cache").unwrap();
        assert_eq!(dav.scheme(), Scheme::Https);
        assert_eq!(dav.bucket(), "dav.example:8443");
        assert_eq!(dav.prefix(), "r2e/cache");
        assert_eq!(
            dav.userinfo(),
            Some(&("me".to_owned(), Some("p@ss".to_owned())))
        );
        assert_eq!(dav.to_string(), "https://dav.example:8443/r2e/cache");
        assert!(!format!("{dav:?}").contains("p@ss"));
        assert_eq!(parse("http://127.0.0.1:81").unwrap().scheme(), Scheme::Http);
    }

    #[test]
    fn a_bad_url_is_a_usage_error_that_lists_the_schemes() {
        for bad in ["ftp://host/x", "file:///tmp/cache", "/tmp/cache", "s3:/b"] {
            let err = parse(bad).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad}: {err}");
            let said = err.to_string();
            for scheme in ["`s3://`", "`gs://`", "`az://`", "`http://`", "`https://`"] {
                assert!(said.contains(scheme), "{bad}: {said}");
            }
        }
        for bad in [
            "s3://",
            "s3:///prefix",
            "gs://b/p?x=1",
            "s3://k:s@b/p",
            "https://h/a/../b",
        ] {
            let err = parse(bad).unwrap_err();
            assert_eq!(err.exit_code(), 2, "{bad}: {err}");
        }
        // A password is never repeated in a message.
        let err = parse("webdav://me:hunter22@h/p").unwrap_err().to_string();
        assert!(!err.contains("hunter22"), "{err}");
        let err = parse("https://me:hunter22@h/p?x").unwrap_err().to_string();
        assert!(!err.contains("hunter22"), "{err}");
    }
}
