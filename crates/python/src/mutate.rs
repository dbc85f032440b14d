//! Mutants of a function: small, plausible mistakes made in its source text, each a whole
//! definition that compiles. They measure how strong a harness is (a harness should fail them)
//! and stand in for a weak model (`builtin/mutants`).
//!
//! Kinds, with up to `per_kind` sites each, chosen by a seeded hash (deterministic, and another
//! seed picks other sites): a flipped comparison (`<` → `>=`, `==` → `!=`, `in` → `not in`...),
//! a number ± 1, `+` ↔ `-` (augmented assignments too), `*` ↔ `/`, `and` ↔ `or`, a negated `if`
//! or `elif` condition, a dropped return value (`return x` → `return None`), a removed statement
//! (`pass` in its place), and a changed slice bound (`x[a:b]` → `x[a:(b) + 1]`).
//!
//! Edits are made on the text (ranges from ruff's parser), so everything else (formatting,
//! comments, the docstring) stays as written. Pure: text in, text out.

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{BoolOp, CmpOp, Expr, Number, Operator, Stmt};
use ruff_text_size::{Ranged, TextRange, TextSize};
use serde::{Deserialize, Serialize};

/// What kind of mistake a mutant makes.
#[derive(Clone, Copy, Debug, PartialEq, Eq, PartialOrd, Ord, Hash, Serialize, Deserialize)]
#[serde(rename_all = "snake_case")]
pub enum MutantKind {
    FlipComparison,
    Constant,
    AddSub,
    MulDiv,
    AndOr,
    NegateIf,
    DropReturn,
    RemoveStatement,
    SliceBound,
}

impl MutantKind {
    pub const ALL: [MutantKind; 9] = [
        MutantKind::FlipComparison,
        MutantKind::Constant,
        MutantKind::AddSub,
        MutantKind::MulDiv,
        MutantKind::AndOr,
        MutantKind::NegateIf,
        MutantKind::DropReturn,
        MutantKind::RemoveStatement,
        MutantKind::SliceBound,
    ];

    pub fn name(self) -> &'static str {
        match self {
            MutantKind::FlipComparison => "flip_comparison",
            MutantKind::Constant => "constant",
            MutantKind::AddSub => "add_sub",
            MutantKind::MulDiv => "mul_div",
            MutantKind::AndOr => "and_or",
            MutantKind::NegateIf => "negate_if",
            MutantKind::DropReturn => "drop_return",
            MutantKind::RemoveStatement => "remove_statement",
            MutantKind::SliceBound => "slice_bound",
        }
    }
}

/// One mutant: its kind, where (a line of the definition's text, 1-based), what changed, and
/// the whole mutated definition.
#[derive(Clone, Debug, PartialEq, Eq, Serialize, Deserialize)]
pub struct Mutant {
    pub kind: MutantKind,
    pub line: u32,
    pub description: String,
    pub text: String,
}

/// One possible edit: replace `range` with `with`.
struct Site {
    kind: MutantKind,
    range: TextRange,
    with: String,
}

/// The mutants of the definition in `def_text` (a `def`, with its decorators, dedented), in a
/// stable order: by kind, then by place.
pub fn mutants(def_text: &str, seed: u64, per_kind: usize) -> Vec<Mutant> {
    let Ok(parsed) = ruff_python_parser::parse_module(def_text) else {
        return Vec::new();
    };
    let Some(Stmt::FunctionDef(def)) = parsed.syntax().body.first() else {
        return Vec::new();
    };
    let body: &[Stmt] = match def.body.first() {
        Some(Stmt::Expr(e)) if e.value.is_string_literal_expr() => &def.body[1..],
        _ => &def.body,
    };
    let mut sites = Sites {
        text: def_text,
        out: Vec::new(),
    };
    for stmt in body {
        sites.visit_stmt(stmt);
    }
    let lines = crate::extract::LineIndex::new(def_text);
    let mut out = Vec::new();
    for kind in MutantKind::ALL {
        let mut of_kind: Vec<&Site> = sites.out.iter().filter(|s| s.kind == kind).collect();
        // A seeded order of the sites: the first ones that make a valid, different program.
        of_kind.sort_by_key(|s| {
            let h = blake3::hash(
                &[
                    seed.to_le_bytes().as_slice(),
                    kind.name().as_bytes(),
                    &u32::from(s.range.start()).to_le_bytes(),
                    s.with.as_bytes(),
                ]
                .concat(),
            );
            *h.as_bytes()
        });
        let mut taken: Vec<Mutant> = Vec::new();
        for site in of_kind {
            if taken.len() >= per_kind {
                break;
            }
            let (start, end) = (site.range.start().to_usize(), site.range.end().to_usize());
            let text = format!("{}{}{}", &def_text[..start], site.with, &def_text[end..]);
            if text == def_text
                || ruff_python_parser::parse_module(&text).is_err()
                || taken.iter().any(|m| m.text == text)
            {
                continue;
            }
            let (line, _) = lines.line_col(def_text, site.range.start());
            let was = def_text[start..end]
                .lines()
                .next()
                .unwrap_or_default()
                .trim();
            let now = site.with.lines().next().unwrap_or_default().trim();
            taken.push(Mutant {
                kind,
                line,
                description: format!("line {line}: `{was}` -> `{now}`"),
                text,
            });
        }
        taken.sort_by_key(|m| m.line);
        out.extend(taken);
    }
    out
}

struct Sites<'t> {
    text: &'t str,
    out: Vec<Site>,
}

impl Sites<'_> {
    fn push(&mut self, kind: MutantKind, range: TextRange, with: String) {
        self.out.push(Site { kind, range, with });
    }

    /// The range of `token` in the gap between two operands (`from`..`to`), outside brackets,
    /// as a whole word when it is one.
    fn token_in(&self, from: TextSize, to: TextSize, token: &str) -> Option<TextRange> {
        let gap = &self.text[from.to_usize()..to.to_usize()];
        let wordy = token.chars().all(|c| c.is_ascii_alphabetic() || c == ' ');
        let mut search = 0;
        while let Some(at) = gap[search..].find(token) {
            let at = search + at;
            let before = gap[..at].chars().next_back();
            let after = gap[at + token.len()..].chars().next();
            let boundary = |c: Option<char>| !c.is_some_and(|c| c.is_alphanumeric() || c == '_');
            let bare = !gap[..at].contains('#');
            if bare && (!wordy || (boundary(before) && boundary(after))) {
                let start = from + TextSize::from(at as u32);
                return Some(TextRange::at(start, TextSize::from(token.len() as u32)));
            }
            search = at + token.len();
        }
        None
    }

    fn operator(&mut self, left: TextSize, right: TextSize, op: Operator, augmented: bool) {
        let (kind, from, to) = match op {
            Operator::Add => (MutantKind::AddSub, "+", "-"),
            Operator::Sub => (MutantKind::AddSub, "-", "+"),
            Operator::Mult => (MutantKind::MulDiv, "*", "/"),
            Operator::Div => (MutantKind::MulDiv, "/", "*"),
            _ => return,
        };
        let (from, to) = if augmented {
            (format!("{from}="), format!("{to}="))
        } else {
            (from.to_owned(), to.to_owned())
        };
        if let Some(range) = self.token_in(left, right, &from) {
            self.push(kind, range, to);
        }
    }

    fn statement(&mut self, stmt: &Stmt) {
        if !matches!(stmt, Stmt::Pass(_)) {
            self.push(MutantKind::RemoveStatement, stmt.range(), "pass".into());
        }
    }
}

fn flipped(op: CmpOp) -> CmpOp {
    match op {
        CmpOp::Eq => CmpOp::NotEq,
        CmpOp::NotEq => CmpOp::Eq,
        CmpOp::Lt => CmpOp::GtE,
        CmpOp::LtE => CmpOp::Gt,
        CmpOp::Gt => CmpOp::LtE,
        CmpOp::GtE => CmpOp::Lt,
        CmpOp::Is => CmpOp::IsNot,
        CmpOp::IsNot => CmpOp::Is,
        CmpOp::In => CmpOp::NotIn,
        CmpOp::NotIn => CmpOp::In,
    }
}

impl<'a> Visitor<'a> for Sites<'_> {
    fn visit_body(&mut self, body: &'a [Stmt]) {
        for stmt in body {
            self.statement(stmt);
        }
        visitor::walk_body(self, body);
    }

    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::If(s) => {
                let tests = std::iter::once(&*s.test)
                    .chain(s.elif_else_clauses.iter().filter_map(|c| c.test.as_ref()));
                for test in tests {
                    let text = &self.text[test.range()];
                    self.push(MutantKind::NegateIf, test.range(), format!("not ({text})"));
                }
            }
            Stmt::Return(r) => {
                if let Some(value) = &r.value
                    && !value.is_none_literal_expr()
                {
                    self.push(MutantKind::DropReturn, value.range(), "None".into());
                }
            }
            Stmt::AugAssign(a) => {
                self.operator(a.target.end(), a.value.start(), a.op, true);
            }
            _ => {}
        }
        visitor::walk_stmt(self, stmt);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Compare(c) => {
                let mut left = c.left.end();
                for (op, right) in c.ops.iter().zip(c.comparators.iter()) {
                    if let Some(range) = self.token_in(left, right.start(), op.as_str()) {
                        self.push(
                            MutantKind::FlipComparison,
                            range,
                            flipped(*op).as_str().to_owned(),
                        );
                    }
                    left = right.end();
                }
            }
            Expr::BinOp(b) => self.operator(b.left.end(), b.right.start(), b.op, false),
            Expr::BoolOp(b) => {
                let (from, to) = match b.op {
                    BoolOp::And => ("and", "or"),
                    BoolOp::Or => ("or", "and"),
                };
                for pair in b.values.windows(2) {
                    if let Some(range) = self.token_in(pair[0].end(), pair[1].start(), from) {
                        self.push(MutantKind::AndOr, range, to.into());
                    }
                }
            }
            Expr::NumberLiteral(n) => {
                let changed = match &n.value {
                    Number::Int(i) => i.as_i64().map(|v| {
                        // Up or down, by the place (a seed-independent choice).
                        let up = u32::from(n.start()) % 2 == 0;
                        (if up { v + 1 } else { v - 1 }).to_string()
                    }),
                    Number::Float(f) => Some(format!("{:?}", f + 1.0)),
                    Number::Complex { .. } => None,
                };
                if let Some(text) = changed {
                    // A negative result must stay one operand: `x - -1` is fine, `x--1` too.
                    let text = if text.starts_with('-') {
                        format!("({text})")
                    } else {
                        text
                    };
                    self.push(MutantKind::Constant, n.range(), text);
                }
            }
            Expr::Slice(s) => {
                for bound in [&s.lower, &s.upper].into_iter().flatten() {
                    let text = &self.text[bound.range()];
                    self.push(
                        MutantKind::SliceBound,
                        bound.range(),
                        format!("({text}) + 1"),
                    );
                }
            }
            _ => {}
        }
        visitor::walk_expr(self, expr);
    }
}

#[cfg(test)]
mod tests {
    use super::*;

    const DEF: &str = r#"@decorator
def clip(items, lo=0, hi=10, strict=False):
    """Keep the items in [lo, hi]."""
    out = []
    for x in items[1:]:
        if x < lo or x >= hi:
            continue
        elif strict and x == hi - 1:
            out.append(x * 2)
        total = x + 3
        total -= 1.5
    return out[:hi]
"#;

    fn of(kind: MutantKind, all: &[Mutant]) -> Vec<String> {
        all.iter()
            .filter(|m| m.kind == kind)
            .map(|m| m.description.clone())
            .collect()
    }

    #[test]
    fn every_kind_is_made_and_each_mutant_is_a_whole_valid_definition() {
        let all = mutants(DEF, 0, 3);
        for kind in MutantKind::ALL {
            assert!(
                all.iter().any(|m| m.kind == kind),
                "no {} mutant",
                kind.name()
            );
        }
        for m in &all {
            assert!(m.text.starts_with("@decorator\ndef clip("), "{}", m.text);
            assert!(m.text.contains("\"\"\"Keep the items in [lo, hi].\"\"\""));
            assert!(
                ruff_python_parser::parse_module(&m.text).is_ok(),
                "{}",
                m.text
            );
            assert_ne!(m.text, DEF);
        }
        assert!(of(MutantKind::FlipComparison, &all).contains(&"line 6: `<` -> `>=`".to_owned()));
        assert!(
            of(MutantKind::AndOr, &all)
                .iter()
                .any(|d| d.contains("`or` -> `and`"))
        );
        assert!(
            of(MutantKind::NegateIf, &all)
                .iter()
                .any(|d| d.contains("`x < lo or x >= hi` -> `not (x < lo or x >= hi)`"))
        );
        assert!(
            of(MutantKind::DropReturn, &all).contains(&"line 12: `out[:hi]` -> `None`".to_owned())
        );
        assert!(
            of(MutantKind::SliceBound, &all)
                .iter()
                .any(|d| d.contains("`hi` -> `(hi) + 1`"))
        );
        assert!(
            of(MutantKind::AddSub, &all)
                .iter()
                .any(|d| d.contains("`-=` -> `+=`"))
        );
        assert!(
            of(MutantKind::MulDiv, &all)
                .iter()
                .any(|d| d.contains("`*` -> `/`"))
        );
        // The docstring and the decorator are never mutated; parameters' defaults neither.
        assert!(all.iter().all(|m| m.line > 3));
    }

    #[test]
    fn sites_are_chosen_by_the_seed_and_bounded_per_kind() {
        let a = mutants(DEF, 1, 2);
        assert_eq!(a, mutants(DEF, 1, 2), "deterministic");
        for kind in MutantKind::ALL {
            assert!(a.iter().filter(|m| m.kind == kind).count() <= 2);
        }
        let all_sites = mutants(DEF, 1, 100);
        let removable = all_sites
            .iter()
            .filter(|m| m.kind == MutantKind::RemoveStatement)
            .count();
        assert!(removable > 2, "{removable}");
        let other: Vec<Vec<String>> = (2..12)
            .map(|seed| of(MutantKind::RemoveStatement, &mutants(DEF, seed, 2)))
            .collect();
        assert!(
            other
                .iter()
                .any(|o| *o != of(MutantKind::RemoveStatement, &a)),
            "another seed picks other sites"
        );
    }

    #[test]
    fn methods_and_broken_text() {
        let method = "def size(self):\n    return self.n * 2\n";
        let all = mutants(method, 0, 3);
        assert!(
            all.iter()
                .any(|m| m.text == "def size(self):\n    return self.n / 2\n")
        );
        assert!(
            all.iter()
                .any(|m| m.text == "def size(self):\n    return None\n")
        );
        assert!(mutants("def broken(:\n", 0, 3).is_empty());
        assert!(mutants("x = 1\n", 0, 3).is_empty());
    }
}
