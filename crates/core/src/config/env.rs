//! `[env]`, with what the `env` stage takes from environment variables, and the other readers of
//! the environment: the `*_env` settings' variable names, `R2E_LOG`, secrets named on a command
//! line.

use std::path::PathBuf;

use schemars::JsonSchema;
use serde::{Deserialize, Serialize};
use toml::Spanned;

use super::locate::Source;
use crate::error::Result;

/// `[env]`: how each repository's environment is made. Environments honour `PIP_INDEX_URL`,
/// `UV_INDEX_URL` (and the extra-index variants), `PIP_FIND_LINKS`, `UV_FIND_LINKS`,
/// `SSL_CERT_FILE` and the proxy variables. Installation runs in the sandbox, the only place
/// where the network is allowed, with these variables only and a cache of its own (no
/// repository's install reads what another's wrote). Index and proxy URLs are replaced by their
/// variable's name in every log; the code an install runs (a `setup.py`) can read them, as with
/// any `pip install` from that index.
#[derive(Deserialize, Default, JsonSchema)]
#[serde(deny_unknown_fields)]
pub(super) struct EnvOptions {
    /// The interpreter environments are made from; never downloaded.
    #[schemars(extend("default" = DEFAULT_PYTHON))]
    python: Option<String>,
    /// How environments are made.
    #[schemars(extend("default" = Installer::default()))]
    installer: Option<Installer>,
    /// Installed into every environment besides the repository's dependencies and `coverage`.
    #[schemars(extend("default" = []))]
    extra_packages: Option<Vec<String>>,
    /// Install third-party modules the code imports but no declaration names (as pipreqs does).
    #[schemars(extend("default" = DEFAULT_INFER_IMPORTS))]
    infer_imports: Option<bool>,
    /// Seconds one environment's installation may take.
    #[schemars(extend("default" = DEFAULT_TIMEOUT_SECONDS))]
    timeout_seconds: Option<u64>,
    /// Let environments see the interpreter's own packages (for offline machines that have
    /// `coverage` and the dependencies installed already).
    #[schemars(extend("default" = DEFAULT_SYSTEM_SITE_PACKAGES))]
    system_site_packages: Option<bool>,
    /// Build the repository as a wheel with its own build backend and install it on top of its
    /// environment (its metadata, entry points and built extensions), as its users get it.
    #[schemars(extend("default" = DEFAULT_INSTALL_PROJECT))]
    install_project: Option<bool>,
    /// Resolve as the index was at this instant (RFC 3339 UTC, as `2025-06-01T00:00:00Z`, or a
    /// date `2025-06-01`, its midnight UTC): files uploaded later are ignored (uv's
    /// `--exclude-newer`; with pip, 26 and later's `--uploaded-prior-to`, an older pip is
    /// refused), so that a rebuild months later installs the same versions. Default: the
    /// curation date of the `repos.lock` the repositories come from, else none.
    #[schemars(with = "Option<String>")]
    exclude_newer: Option<Spanned<String>>,
}

const DEFAULT_PYTHON: &str = "python3";
const DEFAULT_INFER_IMPORTS: bool = true;
const DEFAULT_TIMEOUT_SECONDS: u64 = 900;
const DEFAULT_SYSTEM_SITE_PACKAGES: bool = false;
const DEFAULT_INSTALL_PROJECT: bool = true;

/// How environments are created.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default, JsonSchema)]
#[serde(rename_all = "lowercase")]
pub enum Installer {
    /// `uv` when it is available or can be installed from the package index, else `venv` + pip.
    #[default]
    Auto,
    /// `uv` (installed from the package index when missing).
    Uv,
    /// `venv` and pip.
    Pip,
}

/// The settings of the `env` stage, with what it takes from the environment variables.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct EnvConfig {
    /// The interpreter environments are made from (never downloaded).
    pub python: String,
    pub installer: Installer,
    /// Installed into every environment besides the repository's dependencies and `coverage`.
    pub extra_packages: Vec<String>,
    /// Install third-party modules the code imports but no declaration names (as pipreqs does).
    pub infer_imports: bool,
    pub timeout_seconds: u64,
    /// Let environments see the interpreter's own packages (for offline machines that have
    /// `coverage` and the dependencies installed already).
    pub system_site_packages: bool,
    /// Build the repository as a wheel with its own build backend and install it on top of
    /// its environment (its metadata, entry points and built extensions), as its users get it.
    pub install_project: bool,
    /// Resolve as the index was at this instant (RFC 3339 UTC, `2025-06-01T00:00:00Z`): files
    /// uploaded later are ignored (uv's `--exclude-newer`), so that a rebuild months later
    /// installs the same versions. `[env] exclude_newer`, or the curation date of the
    /// `repos.lock` the repositories come from.
    #[serde(skip_serializing_if = "Option::is_none")]
    pub exclude_newer: Option<String>,
    /// Index and certificate settings passed to installers (`PIP_INDEX_URL`, `UV_INDEX_URL`,
    /// `PIP_EXTRA_INDEX_URL`, `UV_EXTRA_INDEX_URL`, `SSL_CERT_FILE`, proxies), by name.
    pub passthrough: Vec<(String, String)>,
}

/// Environment variables that installers honour and that change what they install or reach.
const PASSTHROUGH: &[&str] = &[
    "PIP_INDEX_URL",
    "PIP_EXTRA_INDEX_URL",
    "UV_INDEX_URL",
    "UV_EXTRA_INDEX_URL",
    "UV_DEFAULT_INDEX",
    "SSL_CERT_FILE",
    "SSL_CERT_DIR",
    "PIP_CERT",
    "HTTP_PROXY",
    "HTTPS_PROXY",
    "NO_PROXY",
    "http_proxy",
    "https_proxy",
    "no_proxy",
    "PIP_RETRIES",
    "PIP_NO_INDEX",
    "PIP_FIND_LINKS",
    "UV_FIND_LINKS",
    "UV_OFFLINE",
    "PIP_TIMEOUT",
    "UV_HTTP_TIMEOUT",
];

impl EnvConfig {
    /// The local paths the index settings name (a folder of wheels, certificates): what an
    /// installation must see of this machine to use them.
    pub fn index_mounts(&self) -> Vec<PathBuf> {
        let mut out = Vec::new();
        for (key, value) in &self.passthrough {
            if key.contains("FIND_LINKS") || key.contains("CERT") {
                out.extend(
                    value
                        .split([' ', ','])
                        .map(std::path::Path::new)
                        .filter(|p| p.is_absolute() && p.exists())
                        .map(std::path::Path::to_path_buf),
                );
            }
        }
        out
    }
}

impl EnvOptions {
    pub(super) fn resolve(self, src: &Source) -> Result<EnvConfig> {
        let exclude_newer = match &self.exclude_newer {
            Some(v) => Some(crate::dates::utc_instant(v.get_ref()).ok_or_else(|| {
                src.at(
                    Some(v.span()),
                    &format!(
                        "`{}` is not an instant in UTC: write `2025-06-01T00:00:00Z` (RFC 3339, `Z`) or a date `2025-06-01` (its midnight UTC)",
                        v.get_ref()
                    ),
                )
            })?),
            None => None,
        };
        Ok(EnvConfig {
            python: self.python.unwrap_or_else(|| DEFAULT_PYTHON.into()),
            installer: self.installer.unwrap_or_default(),
            extra_packages: self.extra_packages.unwrap_or_default(),
            infer_imports: self.infer_imports.unwrap_or(DEFAULT_INFER_IMPORTS),
            timeout_seconds: self.timeout_seconds.unwrap_or(DEFAULT_TIMEOUT_SECONDS),
            system_site_packages: self
                .system_site_packages
                .unwrap_or(DEFAULT_SYSTEM_SITE_PACKAGES),
            install_project: self.install_project.unwrap_or(DEFAULT_INSTALL_PROJECT),
            passthrough: PASSTHROUGH
                .iter()
                .filter_map(|k| std::env::var(k).ok().map(|v| (k.to_string(), v)))
                .collect(),
            exclude_newer,
        })
    }
}

/// Whether `R2E_LOG` asks for stage timings on stderr.
pub fn log_timings() -> bool {
    std::env::var("R2E_LOG").is_ok_and(|v| v.split(',').any(|p| p.trim() == "timings"))
}

/// A secret a command line names by its environment variable (`r2e serve --token-env VAR`),
/// trimmed; `None` when the variable is unset or blank. This module is the only reader of the
/// environment, so what r2e takes from it is all in one place.
pub fn secret_from_env(var: &str) -> Option<String> {
    std::env::var(var)
        .ok()
        .map(|v| v.trim().to_owned())
        .filter(|v| !v.is_empty())
}

/// The variable an `*_env` setting (`key`) names, checked to be an environment variable's name
/// (letters, digits and `_`, not first a digit): a `secret` written there itself is refused.
pub(super) fn env_var_name<'a>(
    src: &Source,
    var: &'a Spanned<String>,
    key: &str,
    secret: &str,
) -> Result<&'a String> {
    let name = var.get_ref();
    if !is_variable_name(name) {
        // What is written is not repeated: it may be the secret itself.
        return Err(src.at(
            Some(var.span()),
            &format!(
                "`{key}` must name an environment variable (capitals, digits and `_`, as `GITHUB_TOKEN`), not hold the {secret}: the {secret} never goes in a file (what is written there is not shown)"
            ),
        ));
    }
    Ok(name)
}

/// Whether `name` is an environment variable's conventional name (`[A-Z_][A-Z0-9_]*`) that does
/// not look like a secret: every token shape in use (`ghp_...`, `github_pat_...`, `sk-...`, a hex
/// key) has lowercase letters or a `-`, and a long run of capitals and digits without `_` is
/// taken for a key written in the wrong place.
fn is_variable_name(name: &str) -> bool {
    let conventional = name.starts_with(|c: char| c.is_ascii_uppercase() || c == '_')
        && name
            .chars()
            .all(|c| c.is_ascii_uppercase() || c.is_ascii_digit() || c == '_');
    conventional && (name.len() < 32 || name.contains('_'))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn a_secret_is_never_taken_for_a_variable_name() {
        for name in [
            "GITHUB_TOKEN",
            "OPENAI_API_KEY",
            "R2E_CACHE_KEY",
            "_X",
            "K2",
        ] {
            assert!(is_variable_name(name), "{name}");
        }
        for secret in [
            "ghp_0123456789abcdefABCDEF0123456789abcd",
            "github_pat_11ABCDEFG0123456789_abcdefghijklmnop",
            "sk-proj-abc123",
            "3f2a9c0d4e5b6a7c8d9e0f1a2b3c4d5e",
            "3F2A9C0D4E5B6A7C8D9E0F1A2B3C4D5E",
            "my secret key",
            "github_token",
            "",
            "9LIVES",
        ] {
            assert!(!is_variable_name(secret), "{secret}");
        }
    }
}
