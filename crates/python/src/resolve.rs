//! Module names, name resolution and direct dependencies, over any [`World`] that can hand out
//! module interfaces (the salsa database in r2e; a plain map in tests).
//!
//! Package roots: a file's module name is its path from the nearest ancestor folder that holds no
//! `__init__.py` (so the repository root, a `src/` layout and any folder of top-level packages
//! all work). Names relative to the repository root and to `src/` are added as aliases where
//! they do not collide. Resolution follows `import x`, `import x as y`, `from .m import f`,
//! `from pkg import *`, `mod.f` chains, `self.m`/`cls.m`/`super().m` through the class and its
//! repository bases, and class bodies. Names it cannot bind to the repository are reported as
//! unresolved, never guessed.

use std::collections::{HashMap, HashSet};
use std::sync::Arc;

use super::summary::{DefKind, ImportFrom, ImportTarget, ModuleInterface, Refs};

/// A file index into the repository's file list.
pub type FileIx = u32;

/// Module names of a repository's files.
#[derive(Debug, Default, PartialEq, Eq)]
pub struct ModuleIndex {
    by_name: HashMap<String, FileIx>,
    names: Vec<String>,
    is_package: Vec<bool>,
    /// Dotted prefixes of module names: packages, namespace packages included.
    packages: HashSet<String>,
}

impl ModuleIndex {
    /// Builds the index from repository-relative `/`-separated paths.
    pub fn build(paths: &[&str]) -> ModuleIndex {
        let dirs_with_init: HashSet<&str> = paths
            .iter()
            .filter_map(|p| p.strip_suffix("__init__.py"))
            .map(|d| d.trim_end_matches('/'))
            .collect();
        let mut index = ModuleIndex::default();
        let mut aliases: Vec<(String, FileIx)> = Vec::new();
        for (i, path) in paths.iter().enumerate() {
            let i = i as FileIx;
            let stem = path.strip_suffix(".py").unwrap_or(path);
            let parts: Vec<&str> = stem.split('/').collect();
            let is_package = parts.last() == Some(&"__init__");
            let dir_parts = &parts[..parts.len() - 1];
            // Walk up while the folder is a package.
            let mut root = dir_parts.len();
            while root > 0 && dirs_with_init.contains(dir_parts[..root].join("/").as_str()) {
                root -= 1;
            }
            let name_of = |from: usize| -> Option<String> {
                let mut segs: Vec<&str> = parts[from..].to_vec();
                if is_package {
                    segs.pop();
                }
                (!segs.is_empty() && segs.iter().all(|s| is_identifier(s))).then(|| segs.join("."))
            };
            let primary = name_of(root);
            index.names.push(primary.clone().unwrap_or_default());
            index.is_package.push(is_package);
            if let Some(name) = primary {
                index.by_name.entry(name).or_insert(i);
            }
            for from in [0, usize::from(parts.first() == Some(&"src"))] {
                if from < root
                    && let Some(alias) = name_of(from)
                {
                    aliases.push((alias, i));
                }
            }
        }
        for (alias, i) in aliases {
            index.by_name.entry(alias).or_insert(i);
        }
        let names: Vec<String> = index.by_name.keys().cloned().collect();
        for name in names {
            let mut prefix = name.as_str();
            while let Some((head, _)) = prefix.rsplit_once('.') {
                index.packages.insert(head.to_owned());
                prefix = head;
            }
            index.packages.insert(name);
        }
        index
    }

    pub fn lookup(&self, module: &str) -> Option<FileIx> {
        self.by_name.get(module).copied()
    }

    /// The module name of a file (empty when its path is not importable).
    pub fn module_name(&self, file: FileIx) -> &str {
        &self.names[file as usize]
    }

    /// The absolute module named by a `from` import in `file`.
    pub fn absolute(&self, file: FileIx, from: &ImportFrom) -> Option<String> {
        if from.level == 0 {
            return Some(from.module.clone());
        }
        let name = self.module_name(file);
        let mut parts: Vec<&str> = if name.is_empty() {
            Vec::new()
        } else {
            name.split('.').collect()
        };
        if !self.is_package[file as usize] {
            parts.pop();
        }
        for _ in 1..from.level {
            parts.pop()?;
        }
        if !from.module.is_empty() {
            parts.push(&from.module);
        }
        Some(parts.join("."))
    }

    pub fn is_package_prefix(&self, dotted: &str) -> bool {
        self.packages.contains(dotted)
    }
}

fn is_identifier(s: &str) -> bool {
    let mut chars = s.chars();
    chars.next().is_some_and(|c| c == '_' || c.is_alphabetic())
        && chars.all(|c| c == '_' || c.is_alphanumeric())
}

/// Whatever hands out module interfaces.
pub trait World {
    fn index(&self) -> &ModuleIndex;
    fn interface(&self, file: FileIx) -> Arc<ModuleInterface>;
}

/// An item of a repository that a slice can hold.
#[derive(
    Clone, Copy, Debug, PartialEq, Eq, Hash, PartialOrd, Ord, serde::Serialize, serde::Deserialize,
)]
pub enum Item {
    /// `defs[index]` of the file: a function, class or method.
    Def(FileIx, u32),
    /// `globals[index]` of the file.
    Global(FileIx, u32),
}

/// What a name resolves to, along the way.
#[derive(Clone, Debug, PartialEq, Eq, Hash)]
enum Target {
    Item(Item),
    Module(FileIx),
    /// A package folder without an `__init__.py` (or before its file is known).
    Namespace(String),
    /// Bound to a module outside the repository.
    External,
}

/// The direct dependencies of one item.
#[derive(Clone, Debug, Default, PartialEq, Eq)]
pub struct Deps {
    /// Items its code calls or reads.
    pub explicit: Vec<Item>,
    /// Items it needs without naming them: a method's class; a class's constructors.
    pub implicit: Vec<Item>,
    /// Dotted names bound to nothing in the repository (builtins left out), sorted.
    pub unresolved: Vec<String>,
}

/// Computes the direct dependencies of `item` in `file`.
pub fn direct_deps(world: &dyn World, item: Item) -> Deps {
    let (file, refs, own_class, kind) = match item {
        Item::Def(file, ix) => {
            let iface = world.interface(file);
            let def = &iface.defs[ix as usize];
            (file, def.refs.clone(), def.class, Some((def.kind, ix)))
        }
        Item::Global(file, ix) => (
            file,
            world.interface(file).globals[ix as usize].refs.clone(),
            None,
            None,
        ),
    };
    let mut r = Resolver {
        world,
        seen: HashSet::new(),
    };
    let mut deps = Deps::default();
    collect_refs(&mut r, file, &refs, own_class, &mut deps);
    match kind {
        Some((DefKind::Method, _)) => {
            if let Some(class) = own_class {
                deps.implicit.push(Item::Def(file, class));
            }
        }
        Some((DefKind::Class, ix)) => {
            let iface = world.interface(file);
            let prefix = format!("{}.", iface.defs[ix as usize].qualname);
            for (j, d) in iface.defs.iter().enumerate() {
                if d.class == Some(ix)
                    && matches!(
                        d.qualname.strip_prefix(&prefix),
                        Some("__init__" | "__new__" | "__post_init__")
                    )
                {
                    deps.implicit.push(Item::Def(file, j as u32));
                }
            }
        }
        _ => {}
    }
    for list in [&mut deps.explicit, &mut deps.implicit] {
        list.retain(|&i| i != item);
        list.sort_unstable();
        list.dedup();
    }
    deps.unresolved.sort_unstable();
    deps.unresolved.dedup();
    deps
}

fn collect_refs(r: &mut Resolver, file: FileIx, refs: &Refs, class: Option<u32>, deps: &mut Deps) {
    for chain in &refs.names {
        let local = refs.local_imports.iter().rev().find(|b| b.name == chain[0]);
        let roots = match local {
            Some(binding) => r.import(file, &binding.target),
            None => r.name_in_module(file, &chain[0]),
        };
        if roots.is_empty() {
            if !is_builtin(&chain[0]) {
                deps.unresolved.push(chain.join("."));
            }
            continue;
        }
        let (found, external) = r.walk_chain(roots, &chain[1..]);
        if external {
            deps.unresolved.push(chain.join("."));
        }
        deps.explicit.extend(found);
    }
    if let Some(class) = class {
        for attr in &refs.self_attrs {
            deps.explicit
                .extend(r.class_member(file, class, attr, true));
        }
        for attr in &refs.super_attrs {
            deps.explicit
                .extend(r.class_member(file, class, attr, false));
        }
    }
}

struct Resolver<'w> {
    world: &'w dyn World,
    /// (file, name) lookups in progress, to break import cycles.
    seen: HashSet<(FileIx, String)>,
}

impl Resolver<'_> {
    /// What `name` is bound to at module level in `file`.
    fn name_in_module(&mut self, file: FileIx, name: &str) -> Vec<Target> {
        if !self.seen.insert((file, name.to_owned())) {
            return Vec::new();
        }
        let iface = self.world.interface(file);
        let mut out = Vec::new();
        for (i, d) in iface.defs.iter().enumerate() {
            if d.kind != DefKind::Method && d.qualname == name {
                out.push(Target::Item(Item::Def(file, i as u32)));
            }
        }
        for (i, g) in iface.globals.iter().enumerate() {
            if g.name == name {
                out.push(Target::Item(Item::Global(file, i as u32)));
            }
        }
        for b in iface.imports.iter().filter(|b| b.name == name) {
            let targets = self.import(file, &b.target);
            out.extend(targets);
        }
        if out.is_empty() {
            let index = self.world.index();
            let module = index.module_name(file);
            if !module.is_empty() {
                let sub = format!("{module}.{name}");
                if let Some(f) = index.lookup(&sub) {
                    out.push(Target::Module(f));
                } else if index.is_package_prefix(&sub) {
                    out.push(Target::Namespace(sub));
                }
            }
        }
        if out.is_empty() {
            for star in &iface.star_imports {
                if let Some(abs) = self.world.index().absolute(file, star)
                    && let Some(f) = self.world.index().lookup(&abs)
                {
                    let found = self.name_in_module(f, name);
                    out.extend(found);
                }
            }
        }
        self.seen.remove(&(file, name.to_owned()));
        dedup(out)
    }

    fn import(&mut self, file: FileIx, target: &ImportTarget) -> Vec<Target> {
        let index = self.world.index();
        match target {
            ImportTarget::Module(dotted) => vec![self.module(dotted)],
            ImportTarget::From(from, name) => {
                let Some(abs) = index.absolute(file, from) else {
                    return Vec::new();
                };
                match self.module(&abs) {
                    Target::Module(f) => {
                        let found = self.name_in_module(f, name);
                        if found.is_empty() {
                            vec![self.module(&format!("{abs}.{name}"))]
                        } else {
                            found
                        }
                    }
                    Target::Namespace(_) => vec![self.module(&format!("{abs}.{name}"))],
                    other => vec![other],
                }
            }
        }
    }

    fn module(&self, dotted: &str) -> Target {
        let index = self.world.index();
        match index.lookup(dotted) {
            Some(f) => Target::Module(f),
            None if index.is_package_prefix(dotted) => Target::Namespace(dotted.to_owned()),
            None => Target::External,
        }
    }

    /// Follows `.a.b` from `roots`; returns the deepest items reached and whether the chain
    /// left the repository.
    fn walk_chain(&mut self, roots: Vec<Target>, attrs: &[String]) -> (Vec<Item>, bool) {
        let mut items = Vec::new();
        let mut external = false;
        for root in roots {
            let mut current = vec![root];
            for attr in attrs {
                let mut next = Vec::new();
                for t in &current {
                    next.extend(self.member(t, attr));
                }
                if next.is_empty() {
                    break;
                }
                current = dedup(next);
            }
            for t in current {
                match t {
                    Target::Item(i) => items.push(i),
                    Target::External => external = true,
                    Target::Module(_) | Target::Namespace(_) => {}
                }
            }
        }
        (items, external)
    }

    fn member(&mut self, t: &Target, attr: &str) -> Vec<Target> {
        match t {
            Target::Module(f) => self.name_in_module(*f, attr),
            Target::Namespace(prefix) => {
                let dotted = format!("{prefix}.{attr}");
                match self.module(&dotted) {
                    Target::External => Vec::new(),
                    m => vec![m],
                }
            }
            Target::Item(Item::Def(f, ix)) => {
                let iface = self.world.interface(*f);
                if iface.defs[*ix as usize].kind == DefKind::Class {
                    self.class_member(*f, *ix, attr, true)
                        .into_iter()
                        .map(Target::Item)
                        .collect()
                } else {
                    Vec::new()
                }
            }
            Target::Item(Item::Global(..)) | Target::External => Vec::new(),
        }
    }

    /// `attr` looked up on a class (when `own`) or only on its repository bases.
    fn class_member(&mut self, file: FileIx, class: u32, attr: &str, own: bool) -> Vec<Item> {
        let mut out = Vec::new();
        let mut stack = vec![(file, class, own)];
        let mut visited = HashSet::new();
        while let Some((f, c, look_here)) = stack.pop() {
            if !visited.insert((f, c)) {
                continue;
            }
            let iface = self.world.interface(f);
            let class_def = &iface.defs[c as usize];
            if look_here {
                let want = format!("{}.{attr}", class_def.qualname);
                let found: Vec<Item> = iface
                    .defs
                    .iter()
                    .enumerate()
                    .filter(|(_, d)| d.class == Some(c) && d.qualname == want)
                    .map(|(j, _)| Item::Def(f, j as u32))
                    .collect();
                if !found.is_empty() {
                    out.extend(found);
                    continue;
                }
                // A class attribute: the class body is the definition read.
                if class_def
                    .attrs
                    .binary_search_by(|a| a.as_str().cmp(attr))
                    .is_ok()
                {
                    out.push(Item::Def(f, c));
                    continue;
                }
            }
            for base in class_def.bases.clone() {
                let roots = self.name_in_module(f, &base[0]);
                let (items, _) = self.walk_chain(roots, &base[1..]);
                for item in items {
                    if let Item::Def(bf, bix) = item
                        && self.world.interface(bf).defs[bix as usize].kind == DefKind::Class
                    {
                        stack.push((bf, bix, true));
                    }
                }
            }
        }
        out.sort_unstable();
        out.dedup();
        out
    }
}

fn dedup(mut v: Vec<Target>) -> Vec<Target> {
    let mut seen = HashSet::new();
    v.retain(|t| seen.insert(t.clone()));
    v
}

/// The names of Python 3's builtins module, which are never reported as unresolved: in byte
/// order but for the last two (a binary search finds the others).
const BUILTINS: &[&str] = &[
    "ArithmeticError",
    "AssertionError",
    "AttributeError",
    "BaseException",
    "BaseExceptionGroup",
    "BlockingIOError",
    "BrokenPipeError",
    "BufferError",
    "BytesWarning",
    "ChildProcessError",
    "ConnectionAbortedError",
    "ConnectionError",
    "ConnectionRefusedError",
    "ConnectionResetError",
    "DeprecationWarning",
    "EOFError",
    "Ellipsis",
    "EncodingWarning",
    "EnvironmentError",
    "Exception",
    "ExceptionGroup",
    "False",
    "FileExistsError",
    "FileNotFoundError",
    "FloatingPointError",
    "FutureWarning",
    "GeneratorExit",
    "IOError",
    "ImportError",
    "ImportWarning",
    "IndentationError",
    "IndexError",
    "InterruptedError",
    "IsADirectoryError",
    "KeyError",
    "KeyboardInterrupt",
    "LookupError",
    "MemoryError",
    "ModuleNotFoundError",
    "NameError",
    "None",
    "NotADirectoryError",
    "NotImplemented",
    "NotImplementedError",
    "OSError",
    "OverflowError",
    "PendingDeprecationWarning",
    "PermissionError",
    "ProcessLookupError",
    "RecursionError",
    "ReferenceError",
    "ResourceWarning",
    "RuntimeError",
    "RuntimeWarning",
    "StopAsyncIteration",
    "StopIteration",
    "SyntaxError",
    "SyntaxWarning",
    "SystemError",
    "SystemExit",
    "TabError",
    "TimeoutError",
    "True",
    "TypeError",
    "UnboundLocalError",
    "UnicodeDecodeError",
    "UnicodeEncodeError",
    "UnicodeError",
    "UnicodeTranslateError",
    "UnicodeWarning",
    "UserWarning",
    "ValueError",
    "Warning",
    "ZeroDivisionError",
    "__build_class__",
    "__debug__",
    "__doc__",
    "__import__",
    "__loader__",
    "__name__",
    "__package__",
    "__spec__",
    "__file__",
    "__builtins__",
    "abs",
    "aiter",
    "all",
    "anext",
    "any",
    "ascii",
    "bin",
    "bool",
    "breakpoint",
    "bytearray",
    "bytes",
    "callable",
    "chr",
    "classmethod",
    "compile",
    "complex",
    "copyright",
    "credits",
    "delattr",
    "dict",
    "dir",
    "divmod",
    "enumerate",
    "eval",
    "exec",
    "exit",
    "filter",
    "float",
    "format",
    "frozenset",
    "getattr",
    "globals",
    "hasattr",
    "hash",
    "help",
    "hex",
    "id",
    "input",
    "int",
    "isinstance",
    "issubclass",
    "iter",
    "len",
    "license",
    "list",
    "locals",
    "map",
    "max",
    "memoryview",
    "min",
    "next",
    "object",
    "oct",
    "open",
    "ord",
    "pow",
    "print",
    "property",
    "quit",
    "range",
    "repr",
    "reversed",
    "round",
    "set",
    "setattr",
    "slice",
    "sorted",
    "staticmethod",
    "str",
    "sum",
    "super",
    "tuple",
    "type",
    "vars",
    "zip",
];

/// Whether `name` is one of Python 3's builtins ([`BUILTINS`]).
pub fn is_builtin(name: &str) -> bool {
    BUILTINS.binary_search(&name).is_ok() || BUILTINS.contains(&name)
}

/// The closure of `start` over direct dependencies, with each item's distance (BFS order, ties
/// broken by item order). `start` itself is not in the result.
pub fn closure(start: Item, mut deps_of: impl FnMut(Item) -> Arc<Deps>) -> Vec<(Item, u32)> {
    breadth_first(start, |item| {
        let deps = deps_of(item);
        deps.explicit
            .iter()
            .chain(&deps.implicit)
            .copied()
            .collect::<Vec<_>>()
    })
}

/// The breadth-first walk every slice is: the nodes `start` reaches through `edges` (a node's
/// successors), each with its distance, level by level, each level sorted.
/// `start` itself is not in the result. `closure` walks items through their `Deps`; the
/// persisted analysis walks node numbers through stored edges (`engine::memo`), in the same
/// order because node order is item order.
pub fn breadth_first<N: Copy + Ord + std::hash::Hash, I: IntoIterator<Item = N>>(
    start: N,
    mut edges: impl FnMut(N) -> I,
) -> Vec<(N, u32)> {
    let mut seen: rustc_hash::FxHashSet<N> = rustc_hash::FxHashSet::default();
    seen.insert(start);
    let mut frontier = vec![start];
    let mut out = Vec::new();
    let mut d = 0;
    while !frontier.is_empty() {
        d += 1;
        let mut next = Vec::new();
        for n in frontier {
            for m in edges(n) {
                if seen.insert(m) {
                    next.push(m);
                }
            }
        }
        next.sort_unstable();
        out.extend(next.iter().map(|&m| (m, d)));
        frontier = next;
    }
    out
}
