//! Where a function is and how to import it: the [`Target`] every run of a function's code is
//! given (the explorer's, the runner's, a candidate's check).

use std::path::{Path, PathBuf};

use r2e_core::records::{CallSiteArgs, FunctionKind};

/// Where a function is and how to import it.
#[derive(Clone, Debug)]
pub struct Target {
    /// The repository's checkout.
    pub root: PathBuf,
    /// The folder put first on `sys.path` (the package root of the module).
    pub import_root: PathBuf,
    /// The repository's other import roots (its root, and `src/` when there is one), put last
    /// on `sys.path`.
    pub extra_roots: Vec<PathBuf>,
    pub module: String,
    pub qualname: String,
    pub kind: FunctionKind,
    /// The module's file, absolute, and the function's lines in it.
    pub source_file: PathBuf,
    pub start_line: u32,
    pub end_line: u32,
    /// Literal arguments at the function's call sites in the repository.
    pub call_sites: Vec<CallSiteArgs>,
    /// What a candidate's process must not see besides the module's file (other copies of the
    /// code in the repository).
    pub hide: Vec<PathBuf>,
}

impl Target {
    /// Where a function of a repository checked out at `root` is.
    pub fn new(root: &Path, path: &str, module: String, qualname: &str, lines: (u32, u32)) -> Self {
        Target {
            root: root.to_path_buf(),
            import_root: import_root(root, path, &module),
            extra_roots: extra_roots(root),
            module,
            qualname: qualname.to_owned(),
            kind: kind_of(qualname),
            source_file: root.join(path),
            start_line: lines.0,
            end_line: lines.1,
            call_sites: Vec::new(),
            hide: Vec::new(),
        }
    }

    /// The same target in a checkout at `to` (the repository's folder in an environment
    /// image) instead of at `root`.
    pub fn relocated(mut self, to: &Path) -> Self {
        let from = self.root.clone();
        let move_path = |p: &Path| match p.strip_prefix(&from) {
            Ok(rel) => to.join(rel),
            Err(_) => p.to_path_buf(),
        };
        self.import_root = move_path(&self.import_root);
        self.extra_roots = self.extra_roots.iter().map(|p| move_path(p)).collect();
        self.source_file = move_path(&self.source_file);
        self.hide = self.hide.iter().map(|p| move_path(p)).collect();
        self.root = to.to_path_buf();
        self
    }

    /// The target with the folders of a checkout that its candidates must not see (the
    /// checkout's masked paths, relative to its root).
    pub fn hiding(mut self, masked: &[String]) -> Self {
        self.hide = masked.iter().map(|m| self.root.join(m)).collect();
        self
    }
}

/// R2E's scope holds module-level functions and the methods of module-level classes: a dotted
/// qualified name is a method.
pub fn kind_of(qualname: &str) -> FunctionKind {
    if qualname.contains('.') {
        FunctionKind::Method
    } else {
        FunctionKind::Function
    }
}

/// The folder to put on `sys.path` so that `module` imports from `path` (relative to `root`).
pub fn import_root(root: &Path, path: &str, module: &str) -> PathBuf {
    let stem = path.strip_suffix(".py").unwrap_or(path);
    let mut parts: Vec<&str> = stem.split('/').collect();
    if parts.last() == Some(&"__init__") {
        parts.pop();
    }
    let depth = module.split('.').count();
    let keep = parts.len().saturating_sub(depth);
    parts[..keep]
        .iter()
        .fold(root.to_path_buf(), |p, s| p.join(s))
}

/// A repository's import roots other than a module's own: its root, and `src/` when present.
pub fn extra_roots(root: &Path) -> Vec<PathBuf> {
    let mut out = vec![root.to_path_buf()];
    if root.join("src").is_dir() {
        out.push(root.join("src"));
    }
    out
}
