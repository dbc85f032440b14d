//! Which imports a module can run without, here: those inside a `try` that catches their
//! `ImportError` (or under `with suppress(ImportError)`), those in a branch of a platform check
//! that is false on Linux (the sandbox's system: `sys.platform == "linux"`, `os.name ==
//! "posix"`, `platform.system() == "Linux"`), and those under `if TYPE_CHECKING:`. Read from the
//! syntax tree only; the checks are named as they read, rendered from the tree (blind to quotes
//! and formatting).

use ruff_python_ast::{self as ast, Expr, Stmt};
use rustc_hash::FxHashMap;

use super::summary::ImportGuard;

/// Module-level names bound to a platform check (`WINDOWS = sys.platform == "win32"`): the
/// check's value on Linux and its text.
pub type PlatformNames = FxHashMap<String, (bool, String)>;

/// The exception names whose handler catches a failed import.
const CATCHES_IMPORT: [&str; 4] = [
    "ImportError",
    "ModuleNotFoundError",
    "Exception",
    "BaseException",
];

/// Whether a handler's type catches `ImportError`: bare, one of [`CATCHES_IMPORT`] (or
/// `builtins.X`), or a tuple holding one.
pub(crate) fn catches_import_error(kind: Option<&Expr>) -> bool {
    match kind {
        None => true,
        Some(Expr::Tuple(t)) => t.elts.iter().any(|e| catches_import_error(Some(e))),
        Some(e) => last_name(e).is_some_and(|n| CATCHES_IMPORT.contains(&n)),
    }
}

/// The last name of a dotted chain (`ImportError` of `builtins.ImportError`).
fn last_name(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Name(n) => Some(n.id.as_str()),
        Expr::Attribute(a) => Some(a.attr.id.as_str()),
        _ => None,
    }
}

/// Whether the imports of a `try`'s body (and `else`) are optional: one of its handlers
/// catches `ImportError` and goes on (its last statement neither raises again nor ends the
/// program: `sys.exit(...)`, `exit()`, `quit()`, `os._exit(...)`).
pub fn try_is_optional(t: &ast::StmtTry) -> bool {
    t.handlers.iter().any(|handler| {
        let ast::ExceptHandler::ExceptHandler(h) = handler;
        catches_import_error(h.type_.as_deref()) && !h.body.last().is_some_and(ends)
    })
}

/// Whether a statement ends the module's import: a `raise`, or a call that exits.
fn ends(stmt: &Stmt) -> bool {
    match stmt {
        Stmt::Raise(_) => true,
        Stmt::Expr(e) => match &*e.value {
            Expr::Call(c) => matches!(
                dotted_text(&c.func).as_deref(),
                Some("sys.exit" | "exit" | "quit" | "os._exit" | "os.abort")
            ),
            _ => false,
        },
        _ => false,
    }
}

/// Whether a `with` suppresses `ImportError` (`with suppress(ImportError):`,
/// `contextlib.suppress(...)`).
pub fn with_is_optional(w: &ast::StmtWith) -> bool {
    w.items.iter().any(|item| match &item.context_expr {
        Expr::Call(call) => {
            last_name(&call.func) == Some("suppress")
                && call
                    .arguments
                    .args
                    .iter()
                    .any(|a| catches_import_error(Some(a)))
        }
        _ => false,
    })
}

/// What a check is, when it is one whose value here is known.
#[derive(Clone, Copy, PartialEq, Eq)]
enum Kind {
    Platform,
    TypeChecking,
}

/// A check's value at run time on Linux, its kind and its text; `None` when it is not a check
/// of the platform or of `TYPE_CHECKING` (or mixes one with anything else).
fn value(expr: &Expr, names: &PlatformNames) -> Option<(bool, Kind, String)> {
    match expr {
        Expr::Name(n) if n.id.as_str() == "TYPE_CHECKING" => {
            Some((false, Kind::TypeChecking, "TYPE_CHECKING".into()))
        }
        Expr::Attribute(a) if a.attr.id.as_str() == "TYPE_CHECKING" => {
            let text = dotted_text(expr)?;
            Some((false, Kind::TypeChecking, text))
        }
        Expr::Name(n) => names
            .get(n.id.as_str())
            .map(|(v, _)| (*v, Kind::Platform, n.id.to_string())),
        Expr::UnaryOp(u) if u.op == ast::UnaryOp::Not => {
            let (v, kind, text) = value(&u.operand, names)?;
            Some((!v, kind, format!("not {}", parenthesized(&u.operand, text))))
        }
        // Three-valued: a part that is no check is unknown, and the whole is known when the
        // known parts decide it (`sys.platform == "win32" and DEBUG` is false here).
        Expr::BoolOp(b) => {
            let and = b.op == ast::BoolOp::And;
            let parts: Vec<Option<(bool, Kind, String)>> =
                b.values.iter().map(|e| value(e, names)).collect();
            let known: Vec<&(bool, Kind, String)> = parts.iter().flatten().collect();
            let decided = known.iter().any(|p| p.0 != and);
            let v = if decided {
                !and
            } else if known.len() == parts.len() {
                and
            } else {
                return None;
            };
            let kind = if known.iter().all(|p| p.1 == Kind::TypeChecking) {
                Kind::TypeChecking
            } else {
                Kind::Platform
            };
            let text = b
                .values
                .iter()
                .zip(&parts)
                .map(|(e, p)| match p {
                    Some(p) => parenthesized(e, p.2.clone()),
                    None => "...".to_owned(),
                })
                .collect::<Vec<_>>()
                .join(if and { " and " } else { " or " });
            Some((v, kind, text))
        }
        Expr::Compare(c) if c.ops.len() == 1 => {
            let (left, right, op) = (&*c.left, &c.comparators[0], c.ops[0]);
            let v = match op {
                ast::CmpOp::Eq | ast::CmpOp::NotEq => {
                    let (platform, literal) = match (platform(left), string(right)) {
                        (Some(p), Some(s)) => (p, s),
                        _ => (platform(right)?, string(left)?),
                    };
                    (platform.value == literal) == (op == ast::CmpOp::Eq)
                }
                ast::CmpOp::In | ast::CmpOp::NotIn => {
                    let found = match (platform(left), strings(right)) {
                        (Some(p), Some(list)) => list.iter().any(|s| s == p.value),
                        // `"win" in sys.platform`: a substring.
                        _ => platform(right)?.value.contains(string(left)?.as_str()),
                    };
                    found == (op == ast::CmpOp::In)
                }
                _ => return None,
            };
            let text = format!(
                "{} {} {}",
                operand_text(left)?,
                op.as_str(),
                operand_text(right)?
            );
            Some((v, Kind::Platform, text))
        }
        // `sys.platform.startswith("win")`, with a string or a tuple of them.
        Expr::Call(call)
            if call.arguments.args.len() == 1 && call.arguments.keywords.is_empty() =>
        {
            let Expr::Attribute(method) = &*call.func else {
                return None;
            };
            let p = platform(&method.value)?;
            let arg = &call.arguments.args[0];
            let prefixes = strings(arg).or_else(|| string(arg).map(|s| vec![s]))?;
            let v = match method.attr.id.as_str() {
                "startswith" => prefixes.iter().any(|s| p.value.starts_with(s.as_str())),
                "endswith" => prefixes.iter().any(|s| p.value.ends_with(s.as_str())),
                _ => return None,
            };
            Some((
                v,
                Kind::Platform,
                format!(
                    "{}.{}({})",
                    p.text,
                    method.attr.id.as_str(),
                    operand_text(arg)?
                ),
            ))
        }
        _ => None,
    }
}

/// `text` in parentheses when `expr` is a boolean operation (as a part of another).
fn parenthesized(expr: &Expr, text: String) -> String {
    if matches!(expr, Expr::BoolOp(_)) {
        format!("({text})")
    } else {
        text
    }
}

/// A value that names the platform, and its value on Linux.
struct Platform {
    value: &'static str,
    text: String,
}

/// `sys.platform` (or `platform` alone, as `from sys import platform` binds it), `os.name`,
/// `platform.system()`.
fn platform(expr: &Expr) -> Option<Platform> {
    if let Expr::Call(call) = expr {
        let chain = dotted_text(&call.func)?;
        return (chain == "platform.system"
            && call.arguments.args.is_empty()
            && call.arguments.keywords.is_empty())
        .then(|| Platform {
            value: "Linux",
            text: "platform.system()".into(),
        });
    }
    let text = dotted_text(expr)?;
    let value = match text.as_str() {
        "sys.platform" | "platform" => "linux",
        "os.name" => "posix",
        _ => return None,
    };
    Some(Platform { value, text })
}

/// A string literal's value.
fn string(expr: &Expr) -> Option<String> {
    match expr {
        Expr::StringLiteral(s) => Some(s.value.to_str().to_owned()),
        _ => None,
    }
}

/// The values of a tuple, list or set of string literals.
fn strings(expr: &Expr) -> Option<Vec<String>> {
    let elts = match expr {
        Expr::Tuple(t) => &t.elts,
        Expr::List(l) => &l.elts,
        Expr::Set(s) => &s.elts,
        _ => return None,
    };
    elts.iter().map(string).collect()
}

/// A comparison's operand as written: a platform value, a string or a container of strings.
fn operand_text(expr: &Expr) -> Option<String> {
    if let Some(p) = platform(expr) {
        return Some(p.text);
    }
    if let Some(s) = string(expr) {
        return Some(format!("{s:?}"));
    }
    let list = strings(expr)?;
    let inner = list
        .iter()
        .map(|s| format!("{s:?}"))
        .collect::<Vec<_>>()
        .join(", ");
    Some(match expr {
        Expr::Tuple(_) if list.len() == 1 => format!("({inner},)"),
        Expr::Tuple(_) => format!("({inner})"),
        Expr::List(_) => format!("[{inner}]"),
        _ => format!("{{{inner}}}"),
    })
}

/// `a.b.c` of a chain of names.
fn dotted_text(expr: &Expr) -> Option<String> {
    match expr {
        Expr::Name(n) => Some(n.id.to_string()),
        Expr::Attribute(a) => Some(format!("{}.{}", dotted_text(&a.value)?, a.attr.id.as_str())),
        _ => None,
    }
}

/// The value on Linux of a module-level assignment's value, when it is a platform check:
/// recorded for `if NAME:`.
pub fn platform_value(expr: &Expr, names: &PlatformNames) -> Option<(bool, String)> {
    match value(expr, names)? {
        (v, Kind::Platform, text) => Some((v, text)),
        (_, Kind::TypeChecking, _) => None,
    }
}

/// The guard of each branch of an `if` (its body, then each `elif`/`else`), for the branches
/// that never run here: their own check is false on Linux (or is `TYPE_CHECKING`), or an
/// earlier check is true on Linux, so that it is the `else` of another platform. `None` for a
/// branch that may run.
pub fn if_guards(s: &ast::StmtIf, names: &PlatformNames) -> Vec<Option<ImportGuard>> {
    let tests =
        std::iter::once(Some(&*s.test)).chain(s.elif_else_clauses.iter().map(|c| c.test.as_ref()));
    let mut out = Vec::new();
    // A check before this branch that is true here: the branch never runs.
    let mut taken: Option<(Kind, String)> = None;
    for test in tests {
        if let Some((kind, text)) = &taken {
            out.push(Some(guard(*kind, format!("else of `if {text}`"))));
            continue;
        }
        match test.and_then(|t| value(t, names)) {
            Some((false, kind, text)) => out.push(Some(guard(kind, format!("if {text}")))),
            Some((true, kind, text)) => {
                taken = Some((kind, text));
                out.push(None);
            }
            None => out.push(None),
        }
    }
    out
}

fn guard(kind: Kind, text: String) -> ImportGuard {
    match kind {
        Kind::Platform => ImportGuard::Platform(text),
        Kind::TypeChecking => ImportGuard::TypeChecking,
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    fn first_if(source: &str) -> Vec<Option<ImportGuard>> {
        let parsed = ruff_python_parser::parse_module(source).unwrap();
        let mut names = PlatformNames::default();
        for stmt in &parsed.syntax().body {
            match stmt {
                Stmt::Assign(a) => {
                    if let (Some(Expr::Name(n)), Some(v)) =
                        (a.targets.first(), platform_value(&a.value, &names))
                    {
                        names.insert(n.id.to_string(), v);
                    }
                }
                Stmt::If(s) => return if_guards(s, &names),
                _ => {}
            }
        }
        panic!("no if")
    }

    fn platform(text: &str) -> Option<ImportGuard> {
        Some(ImportGuard::Platform(text.into()))
    }

    /// Each branch that never runs on Linux is named by its check, as written (quotes and
    /// spacing normalized); one that may run has no guard.
    #[test]
    fn a_handler_that_exits_keeps_the_import_required() {
        let optional = |source: &str| {
            let parsed = ruff_python_parser::parse_module(source).unwrap();
            match &parsed.syntax().body[0] {
                Stmt::Try(t) => try_is_optional(t),
                other => panic!("not a try: {other:?}"),
            }
        };
        assert!(optional(
            "try:\n    import a\nexcept ImportError:\n    a = None\n"
        ));
        for handler in ["raise", "sys.exit(1)", "exit()", "quit()", "os._exit(2)"] {
            let source = format!(
                "try:\n    import a\nexcept ImportError:\n    print('no a')\n    {handler}\n"
            );
            assert!(!optional(&source), "{handler}");
        }
    }

    #[test]
    fn platform_checks_are_read_for_linux() {
        let cases: &[(&str, Vec<Option<ImportGuard>>)] = &[
            (
                "if sys.platform == 'win32':\n    pass\nelse:\n    pass\n",
                vec![platform("if sys.platform == \"win32\""), None],
            ),
            (
                "if sys.platform.startswith(\"win\"):\n    pass\n",
                vec![platform("if sys.platform.startswith(\"win\")")],
            ),
            (
                "if os.name == 'nt':\n    pass\nelif sys.platform == 'darwin':\n    pass\nelse:\n    pass\n",
                vec![
                    platform("if os.name == \"nt\""),
                    platform("if sys.platform == \"darwin\""),
                    None,
                ],
            ),
            (
                "if platform.system() == 'Windows':\n    pass\n",
                vec![platform("if platform.system() == \"Windows\"")],
            ),
            (
                "if os.name != 'nt':\n    pass\nelse:\n    pass\n",
                vec![None, platform("else of `if os.name != \"nt\"`")],
            ),
            (
                "if sys.platform in ('win32', 'cygwin'):\n    pass\n",
                vec![platform("if sys.platform in (\"win32\", \"cygwin\")")],
            ),
            (
                "if not sys.platform.startswith('linux'):\n    pass\n",
                vec![platform("if not sys.platform.startswith(\"linux\")")],
            ),
            (
                "WINDOWS = sys.platform == 'win32'\nif WINDOWS:\n    pass\n",
                vec![platform("if WINDOWS")],
            ),
            (
                "if TYPE_CHECKING:\n    pass\nelse:\n    pass\n",
                vec![Some(ImportGuard::TypeChecking), None],
            ),
            (
                "if typing.TYPE_CHECKING:\n    pass\n",
                vec![Some(ImportGuard::TypeChecking)],
            ),
            // Not a platform check, or one mixed with another condition: may run.
            ("if DEBUG:\n    pass\nelse:\n    pass\n", vec![None, None]),
            (
                "if sys.platform == 'win32' and DEBUG:\n    pass\n",
                vec![platform("if sys.platform == \"win32\" and ...")],
            ),
            (
                "if sys.platform == 'win32' or DEBUG:\n    pass\n",
                vec![None],
            ),
            ("if sys.version_info < (3, 8):\n    pass\n", vec![None]),
        ];
        for (source, want) in cases {
            assert_eq!(&first_if(source), want, "{source}");
        }
    }

    fn first_try(source: &str) -> bool {
        let parsed = ruff_python_parser::parse_module(source).unwrap();
        match &parsed.syntax().body[0] {
            Stmt::Try(t) => try_is_optional(t),
            Stmt::With(w) => with_is_optional(w),
            _ => panic!("no try"),
        }
    }

    /// A `try` makes its imports optional when a handler catches their failure and goes on.
    #[test]
    fn a_try_that_catches_import_errors_and_goes_on_makes_them_optional() {
        for (source, optional) in [
            (
                "try:\n    import a\nexcept ImportError:\n    a = None\n",
                true,
            ),
            (
                "try:\n    import a\nexcept ModuleNotFoundError:\n    pass\n",
                true,
            ),
            (
                "try:\n    import a\nexcept (OSError, ImportError):\n    pass\n",
                true,
            ),
            ("try:\n    import a\nexcept:\n    pass\n", true),
            ("try:\n    import a\nexcept Exception:\n    pass\n", true),
            (
                "try:\n    import a\nexcept builtins.ImportError:\n    pass\n",
                true,
            ),
            ("with suppress(ImportError):\n    import a\n", true),
            (
                "with contextlib.suppress(ModuleNotFoundError):\n    import a\n",
                true,
            ),
            // A handler that raises again: the import is required.
            (
                "try:\n    import a\nexcept ImportError as e:\n    raise RuntimeError('install a') from e\n",
                false,
            ),
            ("try:\n    import a\nexcept ValueError:\n    pass\n", false),
            ("try:\n    import a\nfinally:\n    pass\n", false),
            ("with open('f'):\n    import a\n", false),
        ] {
            assert_eq!(first_try(source), optional, "{source}");
        }
    }
}
