//! Whether a module is for another platform: importing it on Linux (where every job runs, in
//! either sandbox) fails for a reason its own module-level code states. Decided from the
//! module's top-level statements only, and only when it is certain:
//!
//! - an import of a Windows-only module (`winreg`, `msvcrt`, `_winapi`, pywin32's `win32api`,
//!   ..., or `from six.moves import winreg`) that no `try` catching `ImportError` guards (an
//!   import under an `if` is guarded: its condition may not hold);
//! - a `raise` (or an `assert` that fails) at module level under a platform check
//!   (`sys.platform`, `os.name`, `platform.system()`) that holds on Linux, as in
//!   `if sys.platform != "win32": raise ImportError(...)`.
//!
//! A condition this cannot evaluate leaves the module in: a guess never drops a function.

use ruff_python_ast::{self as ast, CmpOp, Expr, Stmt};

/// Modules that exist only on Windows (the standard library's and pywin32's).
const WINDOWS_ONLY: &[&str] = &[
    "winreg",
    "_winreg",
    "msvcrt",
    "_winapi",
    "winsound",
    "_overlapped",
    "_msi",
    "msilib",
    "nt",
    "win32api",
    "win32con",
    "win32file",
    "win32gui",
    "win32process",
    "win32event",
    "win32service",
    "win32serviceutil",
    "win32com",
    "win32clipboard",
    "win32pipe",
    "win32security",
    "win32print",
    "win32job",
    "win32pdh",
    "win32ts",
    "winerror",
    "pywintypes",
    "pythoncom",
];

/// What Linux answers to the platform checks.
const SYS_PLATFORM: &str = "linux";
const OS_NAME: &str = "posix";
const PLATFORM_SYSTEM: &str = "Linux";

/// Why importing a module with these top-level statements fails on Linux, or `None` when
/// nothing says so for certain.
pub fn other_platform(body: &[Stmt]) -> Option<String> {
    for stmt in body {
        if let Some(why) = statement(stmt) {
            return Some(why);
        }
    }
    None
}

/// Why one module-level statement fails on Linux, when it certainly does.
fn statement(stmt: &Stmt) -> Option<String> {
    match stmt {
        Stmt::Import(import) => import.names.iter().find_map(|alias| {
            let name = alias.name.id.as_str();
            windows_only(name).then(|| format!("it imports `{name}`, a Windows-only module"))
        }),
        Stmt::ImportFrom(from) if from.level == 0 => {
            let module = from.module.as_ref().map_or("", |m| m.id.as_str());
            if windows_only(module) {
                return Some(format!("it imports from `{module}`, a Windows-only module"));
            }
            // `six.moves.winreg` is a lazy alias of `winreg`: importing it fails as the
            // module does.
            if matches!(module, "six.moves" | "future.moves") {
                return from.names.iter().find_map(|alias| {
                    let name = alias.name.id.as_str();
                    windows_only(name)
                        .then(|| format!("it imports `{module}.{name}`, a Windows-only module"))
                });
            }
            None
        }
        Stmt::Try(t) if !t.handlers.iter().any(catches_import_error) => {
            t.body.iter().find_map(statement)
        }
        Stmt::If(stmt_if) => {
            let mut clauses = std::iter::once((Some(&*stmt_if.test), &stmt_if.body)).chain(
                stmt_if
                    .elif_else_clauses
                    .iter()
                    .map(|c| (c.test.as_ref(), &c.body)),
            );
            // The clause that runs on Linux: the first whose test holds, once every earlier
            // one is known not to.
            let (test, body) = loop {
                let (test, body) = clauses.next()?;
                match test.map_or(Some(true), holds_on_linux) {
                    Some(true) => break (test, body),
                    Some(false) => continue,
                    None => return None,
                }
            };
            let raises = body.iter().any(|s| matches!(s, Stmt::Raise(_)));
            raises.then(|| match test {
                Some(test) if mentions_platform(test) => {
                    "it raises at import under a platform check that holds on Linux".to_owned()
                }
                _ => "it raises at import when a platform check fails on Linux".to_owned(),
            })
        }
        Stmt::Assert(a) if holds_on_linux(&a.test) == Some(false) => {
            Some("it asserts at import a platform check that fails on Linux".to_owned())
        }
        _ => None,
    }
}

fn windows_only(module: &str) -> bool {
    let top = module.split('.').next().unwrap_or(module);
    WINDOWS_ONLY.contains(&top)
}

/// Whether an `except` clause catches an `ImportError` (bare, `Exception`, `BaseException`,
/// `ImportError`, `ModuleNotFoundError`, or a tuple holding one).
fn catches_import_error(handler: &ast::ExceptHandler) -> bool {
    let ast::ExceptHandler::ExceptHandler(h) = handler;
    let Some(kind) = &h.type_ else {
        return true;
    };
    let catches = |e: &Expr| {
        let name = match e {
            Expr::Name(n) => n.id.as_str(),
            Expr::Attribute(a) => a.attr.id.as_str(),
            // Something computed: it may catch it.
            _ => return true,
        };
        matches!(
            name,
            "ImportError" | "ModuleNotFoundError" | "Exception" | "BaseException"
        )
    };
    match &**kind {
        Expr::Tuple(t) => t.elts.iter().any(catches),
        other => catches(other),
    }
}

/// The value a platform expression has on Linux: `sys.platform`, `os.name`,
/// `platform.system()`.
fn platform_value(expr: &Expr) -> Option<&'static str> {
    match expr {
        Expr::Attribute(a) => match (&*a.value, a.attr.id.as_str()) {
            (Expr::Name(n), "platform") if n.id.as_str() == "sys" => Some(SYS_PLATFORM),
            (Expr::Name(n), "name") if n.id.as_str() == "os" => Some(OS_NAME),
            _ => None,
        },
        Expr::Call(c) if c.arguments.is_empty() => match &*c.func {
            Expr::Attribute(a) => match (&*a.value, a.attr.id.as_str()) {
                (Expr::Name(n), "system") if n.id.as_str() == "platform" => Some(PLATFORM_SYSTEM),
                _ => None,
            },
            _ => None,
        },
        _ => None,
    }
}

fn mentions_platform(expr: &Expr) -> bool {
    match expr {
        Expr::Compare(c) => {
            platform_value(&c.left).is_some()
                || c.comparators.iter().any(|e| platform_value(e).is_some())
        }
        Expr::UnaryOp(u) => mentions_platform(&u.operand),
        Expr::BoolOp(b) => b.values.iter().any(mentions_platform),
        Expr::Call(c) => match &*c.func {
            Expr::Attribute(a) => platform_value(&a.value).is_some(),
            _ => false,
        },
        _ => false,
    }
}

/// The string constants of a literal: a string, or a tuple, list or set of strings.
fn strings(expr: &Expr) -> Option<Vec<&str>> {
    match expr {
        Expr::StringLiteral(s) => Some(vec![s.value.to_str()]),
        Expr::Tuple(ast::ExprTuple { elts, .. })
        | Expr::List(ast::ExprList { elts, .. })
        | Expr::Set(ast::ExprSet { elts, .. }) => elts
            .iter()
            .map(|e| match e {
                Expr::StringLiteral(s) => Some(s.value.to_str()),
                _ => None,
            })
            .collect(),
        _ => None,
    }
}

/// Whether a platform check holds on Linux: `Some` only for a check this can evaluate
/// (comparisons of a platform value with string literals, `.startswith(...)`, `not`, `and`,
/// `or`).
pub fn holds_on_linux(expr: &Expr) -> Option<bool> {
    match expr {
        Expr::Compare(c) if c.ops.len() == 1 => {
            let (op, right) = (c.ops[0], &c.comparators[0]);
            let (value, literal) = match (platform_value(&c.left), platform_value(right)) {
                (Some(v), None) => (v, right),
                (None, Some(v)) if matches!(op, CmpOp::Eq | CmpOp::NotEq) => (v, &*c.left),
                _ => return None,
            };
            let options = strings(literal)?;
            match op {
                CmpOp::Eq if options.len() == 1 => Some(value == options[0]),
                CmpOp::NotEq if options.len() == 1 => Some(value != options[0]),
                CmpOp::In if !matches!(literal, Expr::StringLiteral(_)) => {
                    Some(options.contains(&value))
                }
                CmpOp::NotIn if !matches!(literal, Expr::StringLiteral(_)) => {
                    Some(!options.contains(&value))
                }
                _ => None,
            }
        }
        Expr::Call(c) => {
            let Expr::Attribute(a) = &*c.func else {
                return None;
            };
            let value = platform_value(&a.value)?;
            if a.attr.id.as_str() != "startswith"
                || c.arguments.args.len() != 1
                || !c.arguments.keywords.is_empty()
            {
                return None;
            }
            let prefixes = strings(&c.arguments.args[0])?;
            Some(prefixes.iter().any(|p| value.starts_with(p)))
        }
        Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => holds_on_linux(&u.operand).map(|b| !b),
        Expr::BoolOp(b) => {
            let values: Vec<Option<bool>> = b.values.iter().map(holds_on_linux).collect();
            match b.op {
                ast::BoolOp::And if values.contains(&Some(false)) => Some(false),
                ast::BoolOp::Or if values.contains(&Some(true)) => Some(true),
                _ if values.iter().all(Option::is_some) => Some(matches!(b.op, ast::BoolOp::And)),
                _ => None,
            }
        }
        _ => None,
    }
}

#[cfg(test)]
mod tests {
    use super::other_platform;

    fn why(source: &str) -> Option<String> {
        let parsed = ruff_python_parser::parse_module(source).unwrap();
        other_platform(&parsed.syntax().body)
    }

    #[test]
    fn windows_only_imports_at_module_level() {
        assert!(why("import winreg\n").is_some());
        assert!(why("import os, msvcrt\n").is_some());
        assert!(why("from win32com.client import Dispatch\n").is_some());
        assert!(why("import datetime\nfrom six.moves import winreg\n").is_some());
        assert!(why("try:\n    import _winapi\nexcept ValueError:\n    pass\n").is_some());
        // Guarded: caught, or under a condition.
        assert_eq!(
            why("try:\n    import winreg\nexcept ImportError:\n    winreg = None\n"),
            None
        );
        assert_eq!(why("try:\n    import winreg\nexcept:\n    pass\n"), None);
        assert_eq!(
            why("if sys.platform == 'win32':\n    import winreg\n"),
            None
        );
        assert_eq!(why("def f():\n    import winreg\n"), None);
        assert_eq!(why("import os\nfrom six.moves import range\n"), None);
    }

    #[test]
    fn platform_checks_that_raise_on_linux() {
        assert!(
            why("import sys\nif sys.platform != 'win32':\n    raise ImportError('windows')\n")
                .is_some()
        );
        assert!(why("import os\nif os.name != 'nt':\n    raise ImportError\n").is_some());
        assert!(
            why("import sys\nif not sys.platform.startswith('win'):\n    raise ImportError\n")
                .is_some()
        );
        assert!(
            why(
                "import sys\nif sys.platform == 'win32':\n    pass\nelse:\n    raise RuntimeError\n"
            )
            .is_some()
        );
        assert!(why("import sys\nif sys.platform in ('win32', 'cygwin'):\n    x = 1\nelif sys.platform == 'darwin':\n    x = 2\nelse:\n    raise OSError\n").is_some());
        assert!(why("import platform\nassert platform.system() == 'Windows'\n").is_some());
        // Checks that do not hold on Linux, or cannot be evaluated.
        assert_eq!(
            why("import sys\nif sys.platform == 'win32':\n    raise ImportError\n"),
            None
        );
        assert_eq!(
            why("import sys\nif sys.platform == 'darwin' and X:\n    raise ImportError\n"),
            None
        );
        assert_eq!(why("import sys\nif X:\n    raise ImportError\n"), None);
        assert_eq!(
            why("import sys\nif sys.platform.startswith('linux'):\n    x = 1\n"),
            None
        );
        assert_eq!(
            why("import sys\nif sys.version_info < (3,):\n    raise ImportError\n"),
            None
        );
    }
}
