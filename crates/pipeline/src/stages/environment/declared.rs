//! The dependencies a repository declares (`requirements*.txt`, `pyproject.toml`, `setup.cfg`,
//! `setup.py`), read without running its code: each declaration file only when it is a regular
//! file inside the repository (a symlink could lead to any file of this machine), `setup.py`
//! parsed with Python's `ast` in the sandbox, and every requirement checked as a PEP 508 string
//! before any installer sees it. What is refused is recorded with its reason, never requested.

use std::collections::BTreeSet;
use std::str::FromStr;

use crate::stages::checkout::{Checkout, DECLARATIONS};

/// What a repository declares.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Declared {
    /// Requirements that parse as PEP 508 strings, as written, sorted and unique.
    pub requirements: Vec<String>,
    /// (file, why) for each file or line that was not read or not taken.
    pub refused: Vec<(String, String)>,
    /// The distribution names of its optional dependencies (`[project.optional-dependencies]`,
    /// `[options.extras_require]`), sorted and unique. Not installed as such: an imported module
    /// that one of them provides is installed from it (`optional_provider`).
    pub optional: Vec<String>,
    /// The Python versions the project supports, as declared (`[project] requires-python`,
    /// else `[options] python_requires` of `setup.cfg`): (file, specifiers).
    pub requires_python: Option<(String, String)>,
}

impl Declared {
    /// Why the project cannot run on an interpreter of `version`: its `requires-python`
    /// excludes it. `None` when it is met, undeclared, or not PEP 440 (then `refused` says so).
    pub fn python_unmet(&self, version: &str) -> Option<String> {
        let (file, spec) = self.requires_python.as_ref()?;
        let specifiers = pep508_rs::pep440_rs::VersionSpecifiers::from_str(spec).ok()?;
        let v = pep508_rs::pep440_rs::Version::from_str(version).ok()?;
        (!specifiers.contains(&v)).then(|| {
            format!(
                "the project requires Python `{spec}` ({file}), and the configured interpreter is {version}: set `[env] python` to an interpreter it supports"
            )
        })
    }
}

/// The longest text of a refused line shown in its reason.
const SHOWN: usize = 80;

/// The dependencies a repository declares. `setup_py` reads a `setup.py`'s `install_requires`
/// (in the sandbox).
pub fn declared_dependencies(
    checkout: &Checkout,
    setup_py: impl Fn(&[u8]) -> Vec<String>,
) -> Declared {
    let mut found: Vec<(&str, String)> = Vec::new();
    let mut refused = Vec::new();
    let mut read = |name: &'static str| match checkout.read_declaration(name) {
        Ok(text) => text,
        Err(why) => {
            refused.push((name.to_owned(), why));
            None
        }
    };
    for name in DECLARATIONS.iter().filter(|n| n.ends_with(".txt")) {
        if let Some(text) = read(name) {
            found.extend(
                requirement_lines(&String::from_utf8_lossy(&text))
                    .into_iter()
                    .map(|l| (*name, l)),
            );
        }
    }
    let mut optional = Vec::new();
    let mut requires_python = None;
    if let Some(text) = read("pyproject.toml")
        && let Ok(doc) = String::from_utf8_lossy(&text).parse::<toml::Table>()
    {
        found.extend(
            pyproject_requires(&doc)
                .into_iter()
                .map(|r| ("pyproject.toml", r)),
        );
        optional.extend(pyproject_optional(&doc));
        requires_python = doc
            .get("project")
            .and_then(|p| p.get("requires-python"))
            .and_then(|v| v.as_str())
            .map(|v| ("pyproject.toml".to_owned(), v.trim().to_owned()));
    }
    if let Some(text) = read("setup.cfg") {
        let text = String::from_utf8_lossy(&text);
        if requires_python.is_none() {
            requires_python = setup_cfg_python_requires(&text).map(|v| ("setup.cfg".to_owned(), v));
        }
        found.extend(
            setup_cfg_requires(&text)
                .into_iter()
                .map(|r| ("setup.cfg", r)),
        );
        optional.extend(setup_cfg_extras(&text));
    }
    if let Some(text) = read("setup.py") {
        found.extend(
            setup_py(&text)
                .into_iter()
                .map(|r| ("setup.py", normalize_requirement(&r))),
        );
    }
    let mut requirements = BTreeSet::new();
    for (file, req) in found {
        if req.is_empty() {
            continue;
        }
        match pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(&req) {
            Ok(_) => {
                requirements.insert(req);
            }
            Err(_) => {
                let shown: String = req.chars().take(SHOWN).collect();
                refused.push((
                    file.to_owned(),
                    format!("not a PEP 508 requirement, not installed: `{shown}`"),
                ));
            }
        }
    }
    let optional: BTreeSet<String> = optional
        .iter()
        .filter_map(|req| {
            pep508_rs::Requirement::<pep508_rs::VerbatimUrl>::from_str(req)
                .ok()
                .map(|r| r.name.to_string())
        })
        .collect();
    if let Some((file, spec)) = &requires_python
        && pep508_rs::pep440_rs::VersionSpecifiers::from_str(spec).is_err()
    {
        let shown: String = spec.chars().take(SHOWN).collect();
        refused.push((
            file.clone(),
            format!("not PEP 440 version specifiers, not checked: requires-python `{shown}`"),
        ));
    }
    Declared {
        requirements: requirements.into_iter().collect(),
        refused,
        optional: optional.into_iter().collect(),
        requires_python,
    }
}

/// `python_requires` of a `setup.cfg`'s `[options]`.
fn setup_cfg_python_requires(text: &str) -> Option<String> {
    section_lines(text, "[options]").find_map(|line| {
        let (key, value) = line.trim().split_once(['=', ':'])?;
        (key.trim() == "python_requires" && !value.trim().is_empty())
            .then(|| value.trim().to_owned())
    })
}

/// The lines of a `setup.cfg` section (`header`, such as `[options]`), as written.
pub(super) fn section_lines<'t>(text: &'t str, header: &'t str) -> impl Iterator<Item = &'t str> {
    let mut inside = false;
    text.lines().filter(move |line| {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            inside = trimmed == header;
            return false;
        }
        inside
    })
}

/// `[project] dependencies` and Poetry's dependency table.
fn pyproject_requires(doc: &toml::Table) -> Vec<String> {
    let mut out = Vec::new();
    if let Some(list) = doc
        .get("project")
        .and_then(|p| p.get("dependencies"))
        .and_then(|d| d.as_array())
    {
        out.extend(
            list.iter()
                .filter_map(|v| v.as_str())
                .map(normalize_requirement),
        );
    }
    if let Some(table) = doc
        .get("tool")
        .and_then(|t| t.get("poetry"))
        .and_then(|p| p.get("dependencies"))
        .and_then(|d| d.as_table())
    {
        out.extend(
            table
                .keys()
                .filter(|k| k.as_str() != "python")
                .map(|k| normalize_requirement(k)),
        );
    }
    out
}

/// The requirements of `[project.optional-dependencies]`, every extra.
fn pyproject_optional(doc: &toml::Table) -> Vec<String> {
    doc.get("project")
        .and_then(|p| p.get("optional-dependencies"))
        .and_then(|d| d.as_table())
        .into_iter()
        .flat_map(|t| t.values())
        .filter_map(|v| v.as_array())
        .flatten()
        .filter_map(|v| v.as_str())
        .map(normalize_requirement)
        .collect()
}

/// The requirements of `setup.cfg`'s `[options.extras_require]`, every extra.
fn setup_cfg_extras(text: &str) -> Vec<String> {
    setup_cfg_extras_named(text)
        .into_iter()
        .map(|(_, requirement)| requirement)
        .collect()
}

/// (extra, requirement) of `setup.cfg`'s `[options.extras_require]`.
pub(super) fn setup_cfg_extras_named(text: &str) -> Vec<(String, String)> {
    let mut out = Vec::new();
    let mut extra = String::new();
    for line in section_lines(text, "[options.extras_require]") {
        let trimmed = line.trim();
        if trimmed.is_empty() || trimmed.starts_with(['#', ';']) {
            continue;
        }
        let value = match trimmed.split_once(['=', ':']) {
            Some((key, value))
                if !line.starts_with([' ', '\t']) && !key.contains(['<', '>', '!']) =>
            {
                extra = key.trim().to_owned();
                value.trim()
            }
            _ => trimmed,
        };
        if !value.is_empty() {
            out.push((extra.clone(), normalize_requirement(value)));
        }
    }
    out
}

/// The optional dependency that provides the module `module`, by name: the distribution whose
/// normalized name is the module's, or begins with it and a separator (`railroad` from
/// `railroad-diagrams`). The shortest such name wins, then the first in order.
pub fn optional_provider(module: &str, optional: &[String]) -> Option<String> {
    let norm = |s: &str| s.to_ascii_lowercase().replace(['_', '.'], "-");
    let module = norm(module);
    optional
        .iter()
        .filter(|d| {
            let d = norm(d);
            d == module || d.strip_prefix(&module).is_some_and(|r| r.starts_with('-'))
        })
        .min_by_key(|d| d.len())
        .cloned()
}

pub(super) fn normalize_requirement(req: &str) -> String {
    req.split('#').next().unwrap_or_default().trim().to_owned()
}

/// The lines of a requirements file that are not blank or comments (pip's options and URLs
/// included: they are refused as not PEP 508).
fn requirement_lines(text: &str) -> Vec<String> {
    text.lines()
        .map(normalize_requirement)
        .filter(|l| !l.is_empty())
        .collect()
}

fn setup_cfg_requires(text: &str) -> Vec<String> {
    let mut out = Vec::new();
    let mut in_options = false;
    let mut in_key = false;
    for line in text.lines() {
        let trimmed = line.trim();
        if trimmed.starts_with('[') {
            in_options = trimmed == "[options]";
            in_key = false;
            continue;
        }
        if !in_options {
            continue;
        }
        if let Some(rest) = trimmed.strip_prefix("install_requires") {
            in_key = true;
            let value = rest.trim_start().trim_start_matches(['=', ':']).trim();
            out.extend(
                value
                    .split(';')
                    .next()
                    .filter(|v| !v.is_empty())
                    .map(normalize_requirement),
            );
            continue;
        }
        if in_key {
            if line.starts_with([' ', '\t']) && !trimmed.is_empty() {
                out.push(normalize_requirement(trimmed));
            } else if !trimmed.is_empty() {
                in_key = false;
            }
        }
    }
    out
}

/// Import names and the distributions that provide them, sorted by import name.
const KNOWN: &[(&str, &str)] = &[
    ("AppKit", ""),
    ("Bio", "biopython"),
    ("BioSQL", "biopython"),
    ("Crypto", "pycryptodome"),
    ("Cryptodome", "pycryptodomex"),
    ("Foundation", ""),
    ("MySQLdb", "mysqlclient"),
    ("OpenGL", "PyOpenGL"),
    ("OpenSSL", "pyOpenSSL"),
    ("PIL", "Pillow"),
    ("Quartz", ""),
    ("Stemmer", "PyStemmer"),
    ("Xlib", "python-xlib"),
    ("_winreg", ""),
    ("absl", "absl-py"),
    ("apiclient", "google-api-python-client"),
    ("attr", "attrs"),
    ("bs4", "beautifulsoup4"),
    ("bson", "pymongo"),
    ("cairo", "pycairo"),
    ("consul", "python-consul"),
    ("cups", "pycups"),
    ("curl", "pycurl"),
    ("cv2", "opencv-python-headless"),
    ("daemon", "python-daemon"),
    ("dateutil", "python-dateutil"),
    ("dbus", "dbus-python"),
    ("dns", "dnspython"),
    ("docx", "python-docx"),
    ("dotenv", "python-dotenv"),
    ("editor", "python-editor"),
    ("elftools", "pyelftools"),
    ("enchant", "pyenchant"),
    ("engineio", "python-engineio"),
    ("faiss", "faiss-cpu"),
    ("fitz", "PyMuPDF"),
    ("frontmatter", "python-frontmatter"),
    ("fuse", "fusepy"),
    ("gi", "PyGObject"),
    ("git", "GitPython"),
    ("github", "PyGithub"),
    ("google", "protobuf"),
    ("googleapiclient", "google-api-python-client"),
    ("gridfs", "pymongo"),
    ("grpc", "grpcio"),
    ("hamcrest", "PyHamcrest"),
    ("hydra", "hydra-core"),
    ("icu", "PyICU"),
    ("jnius", ""),
    ("jose", "python-jose"),
    ("jwt", "PyJWT"),
    ("kafka", "kafka-python"),
    ("ldap", "python-ldap"),
    ("magic", "python-magic"),
    ("memcache", "python-memcached"),
    ("mpl_toolkits", "matplotlib"),
    ("msvcrt", ""),
    ("multipart", "python-multipart"),
    ("nacl", "PyNaCl"),
    ("objc", ""),
    ("odf", "odfpy"),
    ("paho", "paho-mqtt"),
    ("pdfminer", "pdfminer.six"),
    ("pkg_resources", "setuptools"),
    ("png", "pypng"),
    ("pptx", "python-pptx"),
    ("psycopg2", "psycopg2-binary"),
    ("pydispatch", "PyDispatcher"),
    ("pylab", "matplotlib"),
    ("pythoncom", ""),
    ("pythonjsonlogger", "python-json-logger"),
    ("pywintypes", ""),
    ("pyximport", "Cython"),
    ("rest_framework", "djangorestframework"),
    ("ruamel", "ruamel.yaml"),
    ("sass", "libsass"),
    ("serial", "pyserial"),
    ("shapefile", "pyshp"),
    ("skimage", "scikit-image"),
    ("sklearn", "scikit-learn"),
    ("slugify", "python-slugify"),
    ("snappy", "python-snappy"),
    ("socketio", "python-socketio"),
    ("stdnum", "python-stdnum"),
    ("telegram", "python-telegram-bot"),
    ("tidylib", "pytidylib"),
    ("umap", "umap-learn"),
    ("usb", "pyusb"),
    ("websocket", "websocket-client"),
    ("win32api", ""),
    ("win32com", ""),
    ("win32con", ""),
    ("win32event", ""),
    ("win32file", ""),
    ("win32gui", ""),
    ("win32process", ""),
    ("winerror", ""),
    ("winrm", "pywinrm"),
    ("wx", "wxPython"),
    ("xdg", "pyxdg"),
    ("yaml", "PyYAML"),
    ("zmq", "pyzmq"),
];

/// The distribution that provides an import name, where it differs from the name (`""`: none
/// to install, a module of another platform's system). The well-known mismatches, as pipreqs
/// keeps them (its table, checked against each project's current name: `bcrypt` is `bcrypt`,
/// not pipreqs' `python_bcrypt`). A change here changes `EnvKey::providers`, hence the keys of
/// the environments it concerns. After installing, `Building::install_inferred` checks that each
/// distribution provides its module and uninstalls one that does not.
pub fn distribution_for(module: &str) -> Option<&'static str> {
    KNOWN
        .binary_search_by(|(m, _)| (*m).cmp(module))
        .ok()
        .map(|i| KNOWN[i].1)
}

/// The distribution an inferred module is installed from when the environment lacks it: the
/// known one (`distribution_for`), else the optional dependency that provides it by name
/// (`optional_provider`), else the module's own name (`_` read as `-`). Empty: none.
pub fn provider(module: &str, optional: &[String]) -> String {
    distribution_for(module)
        .map(str::to_owned)
        .or_else(|| optional_provider(module, optional))
        .unwrap_or_else(|| module.replace('_', "-"))
}

#[cfg(test)]
mod tests {
    use super::*;

    #[test]
    fn requires_python_is_read_and_checked_against_the_interpreter() {
        let cfg =
            "[metadata]\nname = x\n\n[options]\npython_requires = >=3.9, <4\npackages = find:\n";
        assert_eq!(setup_cfg_python_requires(cfg).as_deref(), Some(">=3.9, <4"));
        assert_eq!(
            setup_cfg_python_requires("[metadata]\npython_requires = >=3\n"),
            None
        );
        let declared = |spec: &str| Declared {
            requirements: Vec::new(),
            refused: Vec::new(),
            optional: Vec::new(),
            requires_python: Some(("pyproject.toml".into(), spec.into())),
        };
        assert_eq!(declared(">=3.9").python_unmet("3.11.7"), None);
        assert_eq!(declared("~=3.11").python_unmet("3.11.7"), None);
        let why = declared(">=3.12").python_unmet("3.11.7").unwrap();
        assert!(
            why.contains("`>=3.12` (pyproject.toml)") && why.contains("3.11.7"),
            "{why}"
        );
        assert!(declared("<3.11").python_unmet("3.11.0").is_some());
        // Not PEP 440: not checked (the declaration is refused, with its reason).
        assert_eq!(declared(">=3.x").python_unmet("3.11.7"), None);
    }

    #[test]
    fn declarations_are_read_without_running_code() {
        let cfg = "[metadata]\nname = x\n\n[options]\ninstall_requires =\n    requests>=2\n    numpy ; python_version > '3'\npackages = find:\n";
        assert_eq!(
            setup_cfg_requires(cfg),
            vec!["requests>=2", "numpy ; python_version > '3'"]
        );
        assert_eq!(
            requirement_lines("# c\nflask==2.0  # web\n-e .\n-r other.txt\n\nclick\n"),
            vec!["flask==2.0", "-e .", "-r other.txt", "click"]
        );
        assert_eq!(distribution_for("yaml"), Some("PyYAML"));
        let doc: toml::Table =
            "[project.optional-dependencies]\ndiagrams = [\"railroad-diagrams\", \"jinja2\"]\n"
                .parse()
                .unwrap();
        assert_eq!(
            pyproject_optional(&doc),
            vec!["railroad-diagrams", "jinja2"]
        );
        assert_eq!(
            setup_cfg_extras(
                "[options.extras_require]\nfast =\n    ujson>=5\ncli = click\n[other]\nx = y\n"
            ),
            vec!["ujson>=5", "click"]
        );
        let optional = [
            "jinja2".to_owned(),
            "railroad-diagrams".to_owned(),
            "railroad-diagrams-contrib".to_owned(),
        ];
        assert_eq!(
            optional_provider("railroad", &optional).as_deref(),
            Some("railroad-diagrams")
        );
        assert_eq!(
            optional_provider("jinja2", &optional).as_deref(),
            Some("jinja2")
        );
        assert_eq!(optional_provider("rail", &optional), None);
        assert_eq!(distribution_for("numpy"), None);
        assert_eq!(distribution_for("icu"), Some("PyICU"));
        assert_eq!(distribution_for("dateutil"), Some("python-dateutil"));
        assert_eq!(distribution_for("win32api"), Some(""));
        assert_eq!(provider("tiny_dep", &[]), "tiny-dep");
        assert_eq!(provider("railroad", &optional), "railroad-diagrams");
        assert_eq!(provider("yaml", &optional), "PyYAML");
    }

    /// The table is sorted (it is searched by halves) and names each module once.
    #[test]
    fn the_table_of_known_distributions_is_sorted() {
        assert!(
            KNOWN.windows(2).all(|w| w[0].0 < w[1].0),
            "not sorted: {:?}",
            KNOWN.windows(2).find(|w| w[0].0 >= w[1].0)
        );
        for (module, dist) in KNOWN {
            assert_eq!(distribution_for(module), Some(*dist), "{module}");
        }
        assert_eq!(distribution_for("zzz"), None);
        assert_eq!(distribution_for("requests"), None);
    }

    #[test]
    fn only_pep508_requirements_from_files_inside_the_repository_are_taken() {
        let dir = tempfile::tempdir().unwrap();
        let root = dir.path().join("repo");
        std::fs::create_dir(&root).unwrap();
        let secret = dir.path().join("secret.txt");
        std::fs::write(&secret, "hunter2-password\n").unwrap();
        std::os::unix::fs::symlink(&secret, root.join("requirements.txt")).unwrap();
        std::fs::write(
            root.join("requirements-dev.txt"),
            "pytest>=7\n-r other.txt\nnumpy ; python_version > '3'\n~~junk line~~\n",
        )
        .unwrap();
        let repo = r2e_core::config::RepoConfig {
            scope: Default::default(),
            name: "r".into(),
            source: r2e_core::config::RepoSource::Path(root.clone()),
        };
        let cache_dir = tempfile::tempdir().unwrap();
        let cache = r2e_core::cache::Cache::open(cache_dir.path()).unwrap();
        let checkout = crate::stages::checkout::checkout(&repo, &cache).unwrap();
        let declared = declared_dependencies(&checkout, |_| Vec::new());
        assert_eq!(
            declared.requirements,
            vec!["numpy ; python_version > '3'", "pytest>=7"]
        );
        let reasons: Vec<String> = declared
            .refused
            .iter()
            .map(|(f, why)| format!("{f}: {why}"))
            .collect();
        assert!(
            reasons[0].starts_with(
                "requirements.txt: `requirements.txt` is a symlink that leads outside"
            ),
            "{reasons:?}"
        );
        assert!(reasons.iter().any(|r| r.contains("`-r other.txt`")));
        assert!(reasons.iter().any(|r| r.contains("junk line")));
        assert!(
            !reasons.concat().contains("hunter2"),
            "the secret is never read"
        );
    }
}
