//! The configured interpreter (the machine's own, trusted), asked once what the environments
//! (`stages::environment`) and the Docker base image (`image`) need to know of it.

use std::collections::BTreeSet;
use std::path::PathBuf;

use r2e_core::error::{Error, Result};

/// Facts about the machine's interpreter, asked once per build.
#[derive(Clone, Debug)]
pub struct Interpreter {
    pub executable: PathBuf,
    pub version: String,
    pub stdlib_modules: BTreeSet<String>,
    /// The version of the pip its `venv` puts into new environments (empty without `ensurepip`).
    pub bundled_pip: String,
    /// Its installation (`sys.base_prefix`), which every environment made from it links to.
    pub base_prefix: PathBuf,
    /// Its own packages folder (`site.getsitepackages()[0]`).
    pub site: PathBuf,
    /// The folder its `ensurepip` takes pip's wheels from, when it was built to take them from
    /// the system (`sysconfig`'s `WHEEL_PKG_DIR`: Debian's and Fedora's
    /// `/usr/share/python-wheels`) rather than from its own `ensurepip/_bundled`.
    pub wheels: Option<PathBuf>,
}

/// What [`Interpreter::probe`] asks, a line a fact (the standard library's names on one line).
const SCRIPT: &str = "import site, sys, sysconfig
print(sys.executable)
print(sys.version.split()[0])
print(' '.join(sorted(sys.stdlib_module_names)))
try:
    import ensurepip; print(ensurepip.version())
except Exception:
    print()
print(sys.base_prefix)
print(site.getsitepackages()[0])
print(sysconfig.get_config_var('WHEEL_PKG_DIR') or '')";

impl Interpreter {
    /// Asks the configured interpreter for its version, its standard library's module names and
    /// where it lives.
    pub fn probe(python: &str) -> Result<Interpreter> {
        let out = std::process::Command::new(python)
            .args(["-I", "-c", SCRIPT])
            .output()
            .map_err(|e| {
                Error::env(format!("cannot run the Python interpreter `{python}`: {e}"))
            })?;
        if !out.status.success() {
            return Err(Error::env(format!(
                "the Python interpreter `{python}` failed: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let text = String::from_utf8_lossy(&out.stdout);
        let lines: Vec<&str> = text.lines().collect();
        if lines.len() != 7 || !lines[5].starts_with('/') {
            return Err(Error::env(format!(
                "the Python interpreter `{python}` does not say where it lives: {}",
                String::from_utf8_lossy(&out.stderr).trim()
            )));
        }
        let mut stdlib_modules: BTreeSet<String> = lines[2].split(' ').map(str::to_owned).collect();
        stdlib_modules.insert("__future__".into());
        Ok(Interpreter {
            executable: PathBuf::from(lines[0]),
            version: lines[1].to_owned(),
            stdlib_modules,
            bundled_pip: lines[3].trim().to_owned(),
            base_prefix: PathBuf::from(lines[4].trim()),
            site: lines[5].into(),
            wheels: Some(lines[6].trim())
                .filter(|w| w.starts_with('/'))
                .map(PathBuf::from),
        })
    }

    /// What a job running this interpreter must see: its installation, unless the system's
    /// software (always shown) holds it.
    pub fn mounts(&self) -> Vec<PathBuf> {
        crate::sandbox::local::outside_system(&self.base_prefix)
            .into_iter()
            .collect()
    }
}
