//! `[sandbox]`: where untrusted code runs and the limits of one job, with the checks of the
//! image names and registry it may name.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};

/// Which sandbox runs untrusted code.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Backend {
    /// This machine: bubblewrap (`apt-get install bubblewrap`), rlimits, cgroups. Without
    /// bubblewrap r2e refuses to run code unless `--unsafe-no-sandbox` is given (then only the
    /// limits apply).
    #[default]
    Local,
    /// Containers of the base image (`r2e image base`, made when missing) on the local Docker
    /// daemon (`sandbox::docker`).
    Docker,
}

/// `[sandbox]`: where code from repositories and models runs, and the limits of one job (the
/// explorer on one function, one validation or check run). Shared by every variant. Every
/// action that runs code is keyed on these settings: changing one runs them again (but for
/// `registry`).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, JsonSchema)]
#[serde(deny_unknown_fields, default)]
pub struct SandboxConfig {
    /// Which sandbox runs the code.
    pub backend: Backend,
    /// Memory of one job, in MiB.
    pub memory_mib: u64,
    /// Processes and threads of one job at once.
    pub processes: u64,
    /// The largest file a job may write, in MiB.
    pub file_size_mib: u64,
    /// Seconds one run of a harness may take: its CPU or idle-machine time, processes and all.
    pub run_timeout_seconds: u64,
    /// With `backend = "docker"`: the image whose root filesystem the base image starts from
    /// (its shell, tools and system files), under the configured interpreter and coverage.py.
    /// Taken from the daemon, else pulled from its registry; a `debian:SUITE[-slim]` no
    /// registry serves is made from Debian's packages (`debootstrap`). None: the base image
    /// holds only what it needs of this machine (`sandbox::docker`).
    #[serde(skip_serializing_if = "Option::is_none")]
    pub base_image: Option<String>,
    /// With `backend = "docker"` and a remote cache: the registry (`HOST[:PORT]/PREFIX`) the
    /// base image travels through between hosts, pushed as `HOST/PREFIX/r2e-base:TAG` and
    /// pulled by its digest. None: it travels as a `docker save` archive in the remote cache.
    /// How it travels changes nothing a build makes (no key holds it). `r2e export --format
    /// harbor` pushes its tasks' images there too, unless given `--registry`.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub registry: Option<String>,
}

impl Default for SandboxConfig {
    fn default() -> Self {
        SandboxConfig {
            backend: Backend::Local,
            memory_mib: 2048,
            processes: 64,
            file_size_mib: 64,
            run_timeout_seconds: 60,
            base_image: None,
            registry: None,
        }
    }
}

/// The folder of Docker's own client configuration (`$DOCKER_CONFIG`, else `~/.docker`), where
/// `docker login` keeps registry credentials, which a push or pull of `[sandbox] registry`
/// passes to the daemon as the `docker` command does.
pub fn docker_config_dir() -> Option<PathBuf> {
    std::env::var_os("DOCKER_CONFIG")
        .map(PathBuf::from)
        .or_else(|| std::env::var_os("HOME").map(|h| PathBuf::from(h).join(".docker")))
}

/// Checks that `registry` is `HOST[:PORT]/PREFIX`: a registry's host (a name with a dot or a
/// port, or `localhost`, which the daemon does not take for a Docker Hub account) and a path
/// under which `r2e-base:TAG` is an image reference.
pub fn check_registry(registry: &str) -> std::result::Result<(), String> {
    let Some((host, prefix)) = registry.split_once('/') else {
        return Err("it names no prefix after the host (`HOST[:PORT]/PREFIX`)".into());
    };
    if host.is_empty() || !(host.contains(['.', ':']) || host == "localhost") {
        return Err(format!(
            "`{host}` is no registry's host: give one with a dot or a port (`registry.example.org`, `127.0.0.1:5000`) or `localhost`"
        ));
    }
    if prefix.is_empty() || prefix.contains(['@', ':']) {
        return Err("its prefix is a path, without a tag or a digest".into());
    }
    check_reference(&format!("{registry}/r2e-base"))
}

/// Checks that `name` is an image reference the daemon accepts: `[HOST[:PORT]/]PATH[:TAG]`
/// with an optional `@ALGORITHM:HEX` digest, the path in lowercase.
pub fn check_reference(name: &str) -> std::result::Result<(), String> {
    let (rest, digest) = match name.split_once('@') {
        Some((r, d)) => (r, Some(d)),
        None => (name, None),
    };
    if let Some(d) = digest {
        let ok = d.split_once(':').is_some_and(|(algo, hex)| {
            !algo.is_empty()
                && algo
                    .chars()
                    .all(|c| c.is_ascii_lowercase() || c.is_ascii_digit())
                && hex.len() >= 32
                && hex.chars().all(|c| c.is_ascii_hexdigit())
        });
        if !ok {
            return Err(format!("`{d}` is not a digest (`sha256:` and its hex)"));
        }
    }
    let (path, tag) = match rest.rsplit_once(':') {
        Some((p, t)) if !t.contains('/') => (p, Some(t)),
        _ => (rest, None),
    };
    if let Some(t) = tag {
        let first = t.chars().next();
        if t.len() > 128
            || !first.is_some_and(|c| c.is_ascii_alphanumeric() || c == '_')
            || !t
                .chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '_' | '.' | '-'))
        {
            return Err(format!(
                "the tag `{t}` may hold letters, digits, `_`, `.` and `-`, and starts with a letter, a digit or `_`"
            ));
        }
    }
    if path.is_empty() {
        return Err("it names no image".into());
    }
    let parts: Vec<&str> = path.split('/').collect();
    for (i, part) in parts.iter().enumerate() {
        // The first of several parts may be a registry's host, with a port.
        let host = i == 0 && parts.len() > 1 && (part.contains(['.', ':']) || *part == "localhost");
        let ok = if host {
            part.chars()
                .all(|c| c.is_ascii_alphanumeric() || matches!(c, '.' | '-' | ':'))
        } else {
            !part.is_empty()
                && part.chars().all(|c| {
                    c.is_ascii_lowercase() || c.is_ascii_digit() || matches!(c, '.' | '_' | '-')
                })
                && part.starts_with(|c: char| c.is_ascii_alphanumeric())
                && part.ends_with(|c: char| c.is_ascii_alphanumeric())
        };
        if !ok {
            return Err(format!(
                "`{part}` may hold lowercase letters, digits and `.`, `_` or `-` between them"
            ));
        }
    }
    Ok(())
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn image_names_are_checked() {
        for good in [
            "debian:bookworm-slim",
            "python",
            "localhost:5000/team/python:3.11-slim",
            "registry.example.org/a_b/c-d.e:v1.2_3",
            "debian@sha256:0123456789abcdef0123456789abcdef0123456789abcdef0123456789abcdef",
        ] {
            assert_eq!(check_reference(good), Ok(()), "{good}");
        }
        for bad in [
            "",
            "Debian:bookworm",
            "debian:",
            "debian:-slim",
            "debian bookworm",
            "team//python",
            "-python",
            "debian@sha256:xyz",
        ] {
            assert!(check_reference(bad).is_err(), "{bad}");
        }
    }
}
