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

use ruff_python_ast::{self as ast, Expr, Stmt};

use crate::guard;

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
            let (check, body) = loop {
                let (test, body) = clauses.next()?;
                match test.map(holds_on_linux) {
                    None => break (None, body),
                    Some(Some((true, text))) => break (Some(text), body),
                    Some(Some((false, _))) => continue,
                    Some(None) => return None,
                }
            };
            let raises = body.iter().any(|s| matches!(s, Stmt::Raise(_)));
            raises.then(|| match check {
                Some(text) => format!("it raises at import under `{text}`, which holds on Linux"),
                None => "it raises at import when a platform check fails on Linux".to_owned(),
            })
        }
        Stmt::Assert(a) => match holds_on_linux(&a.test) {
            Some((false, text)) => Some(format!("it asserts `{text}` at import, false on Linux")),
            _ => None,
        },
        _ => None,
    }
}

fn windows_only(module: &str) -> bool {
    let top = module.split('.').next().unwrap_or(module);
    WINDOWS_ONLY.contains(&top)
}

/// Whether an `except` clause may catch an `ImportError`: [`guard`]'s reading, and a handler
/// whose type is computed (it may catch it: a guess never drops a function).
fn catches_import_error(handler: &ast::ExceptHandler) -> bool {
    let ast::ExceptHandler::ExceptHandler(h) = handler;
    match h.type_.as_deref() {
        Some(e @ (Expr::Name(_) | Expr::Attribute(_) | Expr::Tuple(_))) => {
            guard::catches_import_error(Some(e))
        }
        None => true,
        Some(_) => true,
    }
}

/// Whether a platform check holds on Linux, and its text: `Some` only for a check
/// [`guard::platform_value`] can evaluate (the one reading of platform checks, shared with
/// the imports' guards).
fn holds_on_linux(expr: &Expr) -> Option<(bool, String)> {
    guard::platform_value(expr, &guard::PlatformNames::default())
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
