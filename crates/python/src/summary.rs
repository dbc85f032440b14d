//! The per-file summary that parsing produces and the disk cache stores: everything later stages
//! need to know about one module, so that no stage re-reads or re-parses an unchanged file.
//!
//! It has two halves. [`ModuleInterface`] holds names and references only (no positions, no
//! text): a comment or a reformatting leaves it unchanged, so slicing can stop early on it.
//! [`ModuleLayout`] holds lines, byte ranges, docstrings, filter features and code hashes.

use serde::{Deserialize, Serialize};

/// Everything r2e keeps about one parsed module.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct ModuleSummary {
    pub interface: ModuleInterface,
    pub layout: ModuleLayout,
}

/// A module's names and references: what resolution and slicing read.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct ModuleInterface {
    /// Definitions in source order: module-level functions and classes (including those under
    /// module-level `if`/`try`/`with` blocks), and the methods of those classes.
    pub defs: Vec<DefInterface>,
    /// Module-level assignments, one per bound name.
    pub globals: Vec<GlobalInterface>,
    /// Module-level import bindings (including those under `if`/`try`).
    pub imports: Vec<ImportBinding>,
    /// Modules named by `from M import *`, as written.
    pub star_imports: Vec<ImportFrom>,
}

/// The places of a file's definitions, in source order, as ids name them: the qualname, and
/// for its later definitions in the same file `qualname#2`, `qualname#3`, ... The one
/// numbering of ids (`def_ids`) and of dates by place.
pub fn numbered_places<'a>(qualnames: impl IntoIterator<Item = &'a str>) -> Vec<String> {
    let mut seen: std::collections::HashMap<&str, u32> = std::collections::HashMap::new();
    qualnames
        .into_iter()
        .map(|q| {
            let n = seen.entry(q).or_insert(0);
            *n += 1;
            if *n == 1 {
                q.to_owned()
            } else {
                format!("{q}#{n}")
            }
        })
        .collect()
}

/// What kind of definition a [`DefInterface`] is.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum DefKind {
    Function,
    Method,
    Class,
}

/// One definition's name and the references of its code.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DefInterface {
    /// `name` or `Class.name`.
    pub qualname: String,
    pub kind: DefKind,
    /// For a method, the index of its class in `defs`.
    pub class: Option<u32>,
    /// For a class, the dotted names of its bases (those that are plain dotted names).
    pub bases: Vec<Vec<String>>,
    /// For a class, the names its body assigns (class attributes), sorted.
    pub attrs: Vec<String>,
    pub refs: Refs,
}

/// The references made by one definition's code (decorators, defaults, annotations and body,
/// nested functions included).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Refs {
    /// Dotted chains rooted at a free name: `helper`, `os.path.join`, `Config`.
    pub names: Vec<Vec<String>>,
    /// Attributes read on the method's first parameter (`self.x`, `cls.x`).
    pub self_attrs: Vec<String>,
    /// Attributes read on `super()`.
    pub super_attrs: Vec<String>,
    /// Imports made inside the body: the bound name and its target.
    pub local_imports: Vec<ImportBinding>,
}

/// A module-level assignment to one name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct GlobalInterface {
    pub name: String,
    pub refs: Refs,
}

/// A name bound by an import statement.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ImportBinding {
    pub name: String,
    pub target: ImportTarget,
    /// Why the code expects the import may fail or never run (`None`: it must succeed).
    pub guard: Option<ImportGuard>,
}

/// Why an import is not needed for its module to run here (on Linux, the sandbox's system).
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ImportGuard {
    /// In the body (or the `else`) of a `try` whose handler catches `ImportError` (or
    /// `ModuleNotFoundError`, `Exception`, `BaseException`, a bare `except:`, a tuple holding
    /// one) without raising again, or of `with suppress(ImportError)`: the code runs without it.
    Optional,
    /// Under a platform check that is false on Linux (`if sys.platform == "win32"`, an `else`
    /// of `if os.name == "posix"`): the check as written, whitespace collapsed, with `else of`
    /// before it for an `else` branch.
    Platform(String),
    /// Under `if TYPE_CHECKING:`: never run.
    TypeChecking,
}

impl ImportGuard {
    /// Why an import under this guard is not installed, for a person to read.
    pub fn reason(&self) -> String {
        match self {
            ImportGuard::Optional => {
                "optional: imported inside `try` with `except ImportError` (the code runs without it)"
                    .to_owned()
            }
            ImportGuard::Platform(check) => {
                format!("for another platform: imported under `{check}`, false on Linux")
            }
            ImportGuard::TypeChecking => {
                "for type checkers only: imported under `if TYPE_CHECKING`".to_owned()
            }
        }
    }
}

/// What an import binds a name to.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub enum ImportTarget {
    /// `import a.b.c as x` binds `x` to `a.b.c`; `import a.b.c` binds `a` to `a`.
    Module(String),
    /// `from .m import f` binds `f` to name `f` of module `.m`.
    From(ImportFrom, String),
}

/// The module part of a `from` import: its level (leading dots) and dotted name.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct ImportFrom {
    pub level: u32,
    pub module: String,
}

/// Positions, text ranges and features of a module's definitions, parallel to the interface.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct ModuleLayout {
    /// Parallel to `ModuleInterface::defs`.
    pub defs: Vec<DefLayout>,
    /// Parallel to `ModuleInterface::globals`.
    pub globals: Vec<Chunk>,
    /// The module's length in bytes.
    pub bytes: u32,
    /// blake3 of the code that runs when the module is imported (everything but function
    /// bodies), blind to comments, formatting and positions.
    pub import_hash: [u8; 32],
    /// Calls anywhere in the module that pass at least one literal argument (a constant, a
    /// container of constants, or a constructor call of those): inputs for the explorer.
    pub calls: Vec<CallSite>,
    /// Why importing the module fails on Linux, where it is for another platform
    /// (`platform::other_platform`); `None` when nothing says so for certain.
    pub other_platform: Option<String>,
}

/// One call `name(...)` or `x.name(...)` and the source text of its arguments.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct CallSite {
    /// The called name: `f` for `f(...)`, `m` for `x.y.m(...)`.
    pub callee: String,
    /// Whether the call was `x.name(...)` rather than `name(...)`.
    pub attribute: bool,
    pub args: Vec<String>,
    pub kwargs: Vec<(String, String)>,
}

/// A run of whole lines of the source: `[start, end)` in bytes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Chunk {
    pub start: u32,
    pub end: u32,
}

/// Where one definition is and what the filters need to know about it.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize)]
pub struct DefLayout {
    /// In R2E's scope: a direct child of the module, or of a class that is a direct child of it.
    pub in_scope: bool,
    pub is_async: bool,
    /// The `def`/`class` line (1-based), not a decorator's.
    pub start_line: u32,
    /// As CPython's `end_lineno`.
    pub end_line: u32,
    /// The definition's lines, decorators included. For a class: only its header and the
    /// statements of its body that are not method definitions are in `header` and `attrs`.
    pub chunk: Chunk,
    /// For a class: the decorator and `class ...:` lines.
    pub header: Chunk,
    /// For a class: its body's statements that are not `def`s.
    pub attrs: Vec<Chunk>,
    /// Cleaned as `ast.get_docstring` does.
    pub docstring: Option<String>,
    /// blake3 of the definition's syntax tree, blind to positions, formatting and comments.
    pub code_hash: [u8; 32],
    pub features: Features,
}

/// Facts about a function that the curation filters test.
#[derive(Clone, Debug, PartialEq, Eq, Hash, Serialize, Deserialize, Default)]
pub struct Features {
    /// Parameters, not counting a method's `self`/`cls`.
    pub params: u32,
    /// `return <value>` statements of the function itself (not of nested functions).
    pub value_returns: u32,
    /// Those whose value is a literal (a constant, or a container of constants).
    pub literal_returns: u32,
    /// Statements of the body, not counting the docstring.
    pub body_statements: u32,
    /// Lines of code from the `def` line to the end: blank lines, lines holding only a comment
    /// and the docstring's lines are not counted.
    pub lines: u32,
    /// Decorators as written, e.g. `staticmethod`, `functools.lru_cache`.
    pub decorators: Vec<String>,
}
