//! One parse of one module into a [`ModuleSummary`]: definitions in R2E's scope with their lines,
//! docstrings and filter features, module-level bindings, and every definition's references.
//!
//! Pure: text in, summary out. A file that does not parse yields a [`SyntaxError`], never a panic.

use ruff_python_ast::visitor::{self, Visitor};
use ruff_python_ast::{self as ast, Expr, ExprContext, Stmt};
use ruff_text_size::{Ranged, TextSize};

use super::docstring::cleandoc;
use super::guard::{self, PlatformNames};
use super::summary::*;

/// Why a module could not be summarized.
#[derive(Clone, Debug, PartialEq, Eq)]
pub struct SyntaxError {
    pub line: u32,
    pub column: u32,
    pub message: String,
}

impl std::fmt::Display for SyntaxError {
    fn fmt(&self, f: &mut std::fmt::Formatter<'_>) -> std::fmt::Result {
        write!(
            f,
            "syntax error at {}:{}: {}",
            self.line, self.column, self.message
        )
    }
}

/// Parses `source` and summarizes it.
pub fn summarize(source: &str) -> Result<ModuleSummary, SyntaxError> {
    let lines = LineIndex::new(source);
    let parsed = ruff_python_parser::parse_module(source).map_err(|e| {
        let (line, column) = lines.line_col(source, e.location.start());
        SyntaxError {
            line,
            column,
            message: e.error.to_string(),
        }
    })?;
    let module = parsed.syntax();
    let mut b = Builder {
        source,
        lines: &lines,
        tokens: parsed.tokens(),
        summary: ModuleSummary::default(),
        guard: None,
        platform_names: Default::default(),
    };
    b.module_body(&module.body, true);
    b.summary.layout.bytes = source.len() as u32;
    b.summary.layout.import_hash = import_hash(source, parsed.tokens(), &module.body);
    let mut calls = CallCollector {
        source,
        calls: Vec::new(),
    };
    visitor::walk_body(&mut calls, &module.body);
    b.summary.layout.calls = calls.calls;
    b.summary.layout.other_platform = super::platform::other_platform(&module.body);
    Ok(b.summary)
}

/// blake3 of the code that runs when the module is imported: every token but comments and
/// non-logical line breaks, outside the bodies of functions (a `def`'s decorators, signature
/// and defaults run at import; its body does not). Blind to comments, formatting and positions.
fn import_hash(source: &str, tokens: &ruff_python_ast::token::Tokens, body: &[Stmt]) -> [u8; 32] {
    struct Bodies(Vec<ruff_text_size::TextRange>);
    impl<'a> Visitor<'a> for Bodies {
        fn visit_stmt(&mut self, stmt: &'a Stmt) {
            match stmt {
                Stmt::FunctionDef(def) => {
                    if let (Some(first), Some(last)) = (def.body.first(), def.body.last()) {
                        self.0
                            .push(ruff_text_size::TextRange::new(first.start(), last.end()));
                    }
                }
                _ => visitor::walk_stmt(self, stmt),
            }
        }
        // No definition is inside an expression: only statements are walked.
        fn visit_expr(&mut self, _: &'a Expr) {}
    }
    let mut bodies = Bodies(Vec::new());
    visitor::walk_body(&mut bodies, body);
    let mut skip = bodies.0;
    skip.sort_by_key(|r| r.start());
    let mut next = 0;
    let outside = tokens.iter().filter(|token| {
        let at = token.start();
        while next < skip.len() && skip[next].end() <= at {
            next += 1;
        }
        next >= skip.len() || skip[next].start() > at
    });
    token_hash(source, outside, source.len() / 2)
}

/// blake3 of tokens (kind and text), comments and non-logical line breaks left out: blind to
/// positions, formatting inside brackets, and comments.
fn token_hash<'t>(
    source: &str,
    tokens: impl Iterator<Item = &'t ruff_python_ast::token::Token>,
    capacity: usize,
) -> [u8; 32] {
    use ruff_python_ast::token::TokenKind;
    let mut buf: Vec<u8> = Vec::with_capacity(capacity);
    for token in tokens {
        let kind = token.kind();
        if matches!(kind, TokenKind::Comment | TokenKind::NonLogicalNewline) {
            continue;
        }
        buf.push(kind as u8);
        if matches!(
            kind,
            TokenKind::Name
                | TokenKind::Int
                | TokenKind::Float
                | TokenKind::Complex
                | TokenKind::String
                | TokenKind::FStringMiddle
                | TokenKind::TStringMiddle
        ) {
            buf.extend_from_slice(source[token.range()].as_bytes());
            buf.push(0);
        }
    }
    *blake3::hash(&buf).as_bytes()
}

/// At most this many call sites are kept per module, and arguments longer than this are not.
const MAX_CALLS_PER_MODULE: usize = 4000;
const MAX_ARG_TEXT: usize = 240;

/// Collects the calls of a module that pass literal arguments (see `ModuleLayout::calls`).
struct CallCollector<'s> {
    source: &'s str,
    calls: Vec<CallSite>,
}

impl CallCollector<'_> {
    fn record(&mut self, call: &ast::ExprCall) {
        let (callee, attribute) = match &*call.func {
            Expr::Name(n) => (n.id.as_str(), false),
            Expr::Attribute(a) => (a.attr.as_str(), true),
            _ => return,
        };
        let args = &call.arguments;
        let useful = args.args.iter().any(is_input_literal)
            || args.keywords.iter().any(|k| is_input_literal(&k.value));
        if !useful || self.calls.len() >= MAX_CALLS_PER_MODULE {
            return;
        }
        let text = |e: &Expr| -> Option<String> {
            let t = &self.source[e.range()];
            (t.len() <= MAX_ARG_TEXT).then(|| t.to_owned())
        };
        let mut site = CallSite {
            callee: callee.to_owned(),
            attribute,
            args: Vec::new(),
            kwargs: Vec::new(),
        };
        for a in &args.args {
            if a.is_starred_expr() {
                return;
            }
            let Some(t) = text(a) else { return };
            site.args.push(t);
        }
        for k in &args.keywords {
            let (Some(name), Some(t)) = (&k.arg, text(&k.value)) else {
                return;
            };
            site.kwargs.push((name.to_string(), t));
        }
        self.calls.push(site);
    }
}

impl<'a> Visitor<'a> for CallCollector<'_> {
    fn visit_expr(&mut self, expr: &'a Expr) {
        if let Expr::Call(call) = expr {
            self.record(call);
        }
        visitor::walk_expr(self, expr);
    }
}

/// A literal, or a call of a dotted name whose arguments are all such (`Decimal("1.5")`,
/// `datetime.date(2020, 1, 31)`): what the explorer can rebuild as an input.
fn is_input_literal(expr: &Expr) -> bool {
    match expr {
        Expr::Call(c) => {
            dotted(&c.func).is_some()
                && c.arguments.args.iter().all(is_input_literal)
                && c.arguments
                    .keywords
                    .iter()
                    .all(|k| is_input_literal(&k.value))
        }
        Expr::Tuple(t) => t.elts.iter().all(is_input_literal),
        Expr::List(l) => l.elts.iter().all(is_input_literal),
        _ => is_literal(expr),
    }
}

/// Byte offsets of line starts; `\n`, `\r\n` and a lone `\r` each end a line, as in CPython.
pub struct LineIndex {
    starts: Vec<u32>,
}

impl LineIndex {
    pub fn new(source: &str) -> Self {
        let bytes = source.as_bytes();
        let mut starts = Vec::with_capacity(bytes.len() / 32);
        starts.push(0u32);
        for i in memchr::memchr2_iter(b'\n', b'\r', bytes) {
            if bytes[i] == b'\n' || bytes.get(i + 1) != Some(&b'\n') {
                starts.push(i as u32 + 1);
            }
        }
        LineIndex { starts }
    }

    /// The 1-based line holding byte `offset`.
    pub fn line(&self, offset: TextSize) -> u32 {
        self.starts.partition_point(|&s| s <= offset.to_u32()) as u32
    }

    /// 1-based line and column (in characters) of `offset`.
    pub fn line_col(&self, source: &str, offset: TextSize) -> (u32, u32) {
        let line = self.line(offset);
        let start = self.starts[line as usize - 1] as usize;
        let end = (offset.to_usize()).min(source.len());
        let column = source.get(start..end).map_or(0, |s| s.chars().count()) as u32 + 1;
        (line, column)
    }

    /// Byte offset where 1-based `line` starts.
    fn start_of(&self, line: u32) -> u32 {
        self.starts[line as usize - 1]
    }

    /// Byte offset just past the end of 1-based `line`, its terminator included.
    fn end_of(&self, line: u32, len: usize) -> u32 {
        self.starts
            .get(line as usize)
            .copied()
            .unwrap_or(len as u32)
    }
}

struct Builder<'s> {
    source: &'s str,
    lines: &'s LineIndex,
    tokens: &'s ruff_python_ast::token::Tokens,
    summary: ModuleSummary,
    /// Why the imports of the statements being walked are not needed here, if they are not.
    guard: Option<ImportGuard>,
    /// The module-level names bound to platform checks so far.
    platform_names: std::rc::Rc<PlatformNames>,
}

impl<'s> Builder<'s> {
    /// Walks a module body; `direct` is false under module-level `if`/`try`/`with`/loops.
    fn module_body(&mut self, body: &[Stmt], direct: bool) {
        for stmt in body {
            match stmt {
                Stmt::FunctionDef(def) => self.function(stmt, def, None, direct),
                Stmt::ClassDef(class) => self.class(stmt, class, direct),
                Stmt::Import(import) => {
                    let bindings = import_bindings(import, &self.guard);
                    self.summary.interface.imports.extend(bindings);
                }
                Stmt::ImportFrom(import) => {
                    let from = ImportFrom {
                        level: import.level,
                        module: import
                            .module
                            .as_ref()
                            .map(|m| m.id.to_string())
                            .unwrap_or_default(),
                    };
                    for alias in &import.names {
                        if alias.name.id.as_str() == "*" {
                            self.summary.interface.star_imports.push(from.clone());
                        } else {
                            let name = alias.asname.as_ref().unwrap_or(&alias.name).id.to_string();
                            self.summary.interface.imports.push(ImportBinding {
                                name,
                                target: ImportTarget::From(from.clone(), alias.name.id.to_string()),
                                guard: self.guard.clone(),
                            });
                        }
                    }
                }
                Stmt::Assign(_) | Stmt::AnnAssign(_) | Stmt::AugAssign(_) | Stmt::TypeAlias(_) => {
                    self.global(stmt);
                    if let Stmt::Assign(a) = stmt
                        && let [Expr::Name(n)] = &a.targets[..]
                        && let Some(v) = guard::platform_value(&a.value, &self.platform_names)
                    {
                        std::rc::Rc::make_mut(&mut self.platform_names).insert(n.id.to_string(), v);
                    }
                }
                Stmt::If(s) => {
                    let guards = guard::if_guards(s, &self.platform_names);
                    let bodies = std::iter::once(&s.body[..])
                        .chain(s.elif_else_clauses.iter().map(|c| &c.body[..]));
                    for (body, g) in bodies.zip(guards) {
                        self.guarded(g, |b| b.module_body(body, false));
                    }
                }
                Stmt::Try(s) => {
                    let g = guard::try_is_optional(s).then_some(ImportGuard::Optional);
                    self.guarded(g.clone(), |b| b.module_body(&s.body, false));
                    for handler in &s.handlers {
                        let ast::ExceptHandler::ExceptHandler(h) = handler;
                        self.module_body(&h.body, false);
                    }
                    // `else` runs only when the body's optional imports were found: optional too.
                    self.guarded(g, |b| b.module_body(&s.orelse, false));
                    self.module_body(&s.finalbody, false);
                }
                Stmt::With(s) => {
                    let g = guard::with_is_optional(s).then_some(ImportGuard::Optional);
                    self.guarded(g, |b| b.module_body(&s.body, false))
                }
                Stmt::For(s) => {
                    self.module_body(&s.body, false);
                    self.module_body(&s.orelse, false);
                }
                Stmt::While(s) => {
                    self.module_body(&s.body, false);
                    self.module_body(&s.orelse, false);
                }
                _ => {}
            }
        }
    }

    /// Runs `walk` with `guard` as the reason imports are not needed, unless an enclosing
    /// statement already gave one (the outermost reason is kept).
    fn guarded(&mut self, guard: Option<ImportGuard>, walk: impl FnOnce(&mut Self)) {
        if guard.is_none() || self.guard.is_some() {
            return walk(self);
        }
        self.guard = guard;
        walk(self);
        self.guard = None;
    }

    /// A collector of references for a definition's code walked now.
    fn collector<'a>(&self, receiver: Option<&'a str>) -> RefCollector<'a> {
        let mut refs = RefCollector::new(receiver);
        refs.guard = self.guard.clone();
        refs.platform_names = self.platform_names.clone();
        refs
    }

    fn global(&mut self, stmt: &Stmt) {
        let (targets, value): (Vec<&Expr>, Option<&Expr>) = match stmt {
            Stmt::Assign(s) => (s.targets.iter().collect(), Some(&s.value)),
            Stmt::AnnAssign(s) => (vec![&s.target], s.value.as_deref()),
            Stmt::AugAssign(s) => (vec![&s.target], Some(&s.value)),
            Stmt::TypeAlias(s) => (vec![&s.name], Some(&s.value)),
            _ => return,
        };
        let mut names = Vec::new();
        for target in targets {
            collect_target_names(target, &mut names);
        }
        if names.is_empty() {
            return;
        }
        let mut refs = RefCollector::new(None);
        if let Some(value) = value {
            refs.visit_expr(value);
        }
        if let Stmt::AnnAssign(s) = stmt {
            refs.visit_expr(&s.annotation);
        }
        let refs = refs.finish();
        let chunk = self.chunk_of_lines(
            self.lines.line(stmt.start()),
            self.lines.line(end_offset(stmt.range())),
        );
        for name in names {
            self.summary.interface.globals.push(GlobalInterface {
                name,
                refs: refs.clone(),
            });
            self.summary.layout.globals.push(chunk);
        }
    }

    fn class(&mut self, stmt: &Stmt, class: &ast::StmtClassDef, direct: bool) {
        let index = self.summary.interface.defs.len() as u32;
        let name = class.name.id.to_string();
        let start_line = self.keyword_line(class.range(), &class.decorator_list, "class");
        let first_line = first_line(self.lines, class.range(), &class.decorator_list);
        let end_line = self.lines.line(end_offset(class.range()));
        let chunk = self.chunk_of_lines(first_line, end_line);
        let body_line = class
            .body
            .first()
            .map(|s| self.lines.line(s.start()))
            .unwrap_or(end_line);
        let header = if body_line > start_line {
            self.chunk_of_lines(first_line, body_line - 1)
        } else {
            chunk
        };

        let mut refs = self.collector(None);
        let mut bases = Vec::new();
        if let Some(arguments) = &class.arguments {
            for base in arguments.args.iter() {
                if let Some(chain) = dotted(base) {
                    bases.push(chain);
                }
            }
            refs.visit_arguments(arguments);
        }
        for decorator in &class.decorator_list {
            refs.visit_decorator(decorator);
        }
        let mut attrs = Vec::new();
        let mut attr_names = Vec::new();
        for stmt in &class.body {
            match stmt {
                Stmt::Assign(a) => a
                    .targets
                    .iter()
                    .for_each(|t| collect_target_names(t, &mut attr_names)),
                Stmt::AnnAssign(a) => collect_target_names(&a.target, &mut attr_names),
                Stmt::AugAssign(a) => collect_target_names(&a.target, &mut attr_names),
                _ => {}
            }
            if !matches!(stmt, Stmt::FunctionDef(_)) {
                refs.visit_stmt(stmt);
                if body_line > start_line {
                    attrs.push(self.chunk_of_lines(
                        self.lines.line(stmt.start()),
                        self.lines.line(end_offset(stmt.range())),
                    ));
                }
            }
        }
        // A class's own code is its header and the statements of its body that are not methods:
        // editing one method does not change the class that the other methods' slices hold.
        let mut ranges = Vec::new();
        let header_end = class.body.first().map_or(stmt.end(), |s| s.start());
        ranges.push(ruff_text_size::TextRange::new(stmt.start(), header_end));
        for member in &class.body {
            if !matches!(member, Stmt::FunctionDef(_)) {
                ranges.push(member.range());
            }
        }
        let code_hash = self.code_hash_of(&ranges);
        self.summary.interface.defs.push(DefInterface {
            qualname: name.clone(),
            kind: DefKind::Class,
            class: None,
            bases,
            attrs: {
                attr_names.sort_unstable();
                attr_names.dedup();
                attr_names
            },
            refs: refs.finish(),
        });
        self.summary.layout.defs.push(DefLayout {
            in_scope: false,
            is_async: false,
            start_line,
            end_line,
            chunk,
            header,
            attrs: merge_chunks(attrs),
            docstring: docstring(&class.body),
            code_hash,
            features: Features {
                decorators: class
                    .decorator_list
                    .iter()
                    .map(|d| decorator_name(&d.expression))
                    .collect(),
                lines: end_line - start_line + 1,
                ..Features::default()
            },
        });
        for member in &class.body {
            if let Stmt::FunctionDef(def) = member {
                self.function(member, def, Some((index, &name)), direct);
            }
        }
    }

    fn function<'a>(
        &mut self,
        stmt: &'a Stmt,
        def: &'a ast::StmtFunctionDef,
        class: Option<(u32, &str)>,
        in_scope: bool,
    ) {
        let qualname = match class {
            Some((_, class_name)) => format!("{class_name}.{}", def.name.id),
            None => def.name.id.to_string(),
        };
        let start_line = self.keyword_line(def.range(), &def.decorator_list, "def");
        let first_line = first_line(self.lines, def.range(), &def.decorator_list);
        let end_line = self.lines.line(end_offset(def.range()));
        let chunk = self.chunk_of_lines(first_line, end_line);
        let decorators: Vec<String> = def
            .decorator_list
            .iter()
            .map(|d| decorator_name(&d.expression))
            .collect();
        let is_static = decorators.iter().any(|d| d == "staticmethod");

        let params = &def.parameters;
        let positional: Vec<&ast::ParameterWithDefault> = params
            .posonlyargs
            .iter()
            .chain(params.args.iter())
            .collect();
        let receiver = match class {
            Some(_) if !is_static => positional.first().map(|p| p.parameter.name.id.as_str()),
            _ => None,
        };
        let total = positional.len()
            + params.kwonlyargs.len()
            + usize::from(params.vararg.is_some())
            + usize::from(params.kwarg.is_some());
        let params_count = total - usize::from(receiver.is_some());

        // One walk of the parameters and the body collects both the names the function binds
        // (parameters and every name bound anywhere in the body) and the chains it reads; the
        // chains rooted at a bound name are dropped when it ends.
        let mut refs = self.collector(receiver);
        for decorator in &def.decorator_list {
            refs.visit_decorator(decorator);
        }
        if let Some(returns) = &def.returns {
            refs.visit_annotation(returns);
        }
        refs.binding = true;
        refs.visit_parameters(params);
        visitor::walk_body(&mut refs, &def.body);

        let mut returns = ReturnCounter::default();
        visitor::walk_body(&mut returns, &def.body);

        let docstring = docstring(&def.body);
        let has_docstring = docstring.is_some() || is_docstring_stmt(def.body.first());
        let body_statements = def.body.len() - usize::from(has_docstring);
        let doc_lines = def.body.first().filter(|_| has_docstring).map(|stmt| {
            (
                self.lines.line(stmt.start()),
                self.lines.line(end_offset(stmt.range())),
            )
        });
        let code_lines = self.code_lines(start_line, end_line, doc_lines);
        self.summary.interface.defs.push(DefInterface {
            qualname,
            kind: if class.is_some() {
                DefKind::Method
            } else {
                DefKind::Function
            },
            class: class.map(|(i, _)| i),
            bases: Vec::new(),
            attrs: Vec::new(),
            refs: refs.finish(),
        });
        self.summary.layout.defs.push(DefLayout {
            in_scope,
            is_async: def.is_async,
            start_line,
            end_line,
            chunk,
            header: Chunk::default(),
            attrs: Vec::new(),
            docstring,
            code_hash: self.code_hash(stmt.range()),
            features: Features {
                params: params_count as u32,
                value_returns: returns.value,
                literal_returns: returns.literal,
                body_statements: body_statements as u32,
                lines: code_lines,
                decorators,
            },
        });
    }

    /// The line of the `def`/`class` keyword, after any decorators.
    fn keyword_line(
        &self,
        range: ruff_text_size::TextRange,
        decorators: &[ast::Decorator],
        keyword: &str,
    ) -> u32 {
        let from = decorators
            .last()
            .map_or(range.start(), |d| d.end())
            .to_usize();
        let bytes = self.source.as_bytes();
        let mut i = from;
        while i < range.end().to_usize() {
            match bytes[i] {
                b' ' | b'\t' | b'\x0c' | b'\r' | b'\n' | b'\\' => i += 1,
                b'#' => {
                    while i < bytes.len() && bytes[i] != b'\n' && bytes[i] != b'\r' {
                        i += 1;
                    }
                }
                _ if self.source[i..].starts_with("async")
                    && !self.source[i..].starts_with(keyword) =>
                {
                    i += 5
                }
                _ => break,
            }
        }
        self.lines.line(TextSize::new(i as u32))
    }

    /// blake3 of the definition's tokens ([`token_hash`]).
    fn code_hash(&self, range: ruff_text_size::TextRange) -> [u8; 32] {
        self.code_hash_of(&[range])
    }

    fn code_hash_of(&self, ranges: &[ruff_text_size::TextRange]) -> [u8; 32] {
        token_hash(
            self.source,
            ranges.iter().flat_map(|&r| self.tokens.in_range(r)),
            ranges.iter().map(|r| r.len().to_usize()).sum(),
        )
    }

    /// Lines of code among `first..=last`: not blank, not only a comment, and not in `skip`
    /// (the docstring's lines).
    fn code_lines(&self, first: u32, last: u32, skip: Option<(u32, u32)>) -> u32 {
        let chunk = self.chunk_of_lines(first, last);
        let text = &self.source[chunk.start as usize..chunk.end as usize];
        // `str::lines` with `trim`, a byte at a time where the line starts in ASCII.
        let is_code = |line: &str| match line
            .bytes()
            .find(|b| !matches!(b, b' ' | b'\t' | b'\r' | b'\x0b' | b'\x0c'))
        {
            None | Some(b'#') => false,
            Some(b) if b < 0x80 => true,
            Some(_) => {
                let t = line.trim();
                !t.is_empty() && !t.starts_with('#')
            }
        };
        text.lines()
            .zip(first..)
            .filter(|&(line, n)| !skip.is_some_and(|(a, b)| (a..=b).contains(&n)) && is_code(line))
            .count() as u32
    }

    /// Whole lines `first..=last`.
    fn chunk_of_lines(&self, first: u32, last: u32) -> Chunk {
        let start = self.lines.start_of(first);
        let end = self.lines.end_of(last, self.source.len());
        Chunk { start, end }
    }
}

/// The offset of the last byte of a range (its end is exclusive).
fn end_offset(range: ruff_text_size::TextRange) -> TextSize {
    if range.is_empty() {
        range.start()
    } else {
        range.end() - TextSize::new(1)
    }
}

/// The first line of a definition: its first decorator's, or its own.
fn first_line(
    lines: &LineIndex,
    range: ruff_text_size::TextRange,
    decorators: &[ast::Decorator],
) -> u32 {
    let start = decorators
        .first()
        .map_or(range.start(), |d| d.start().min(range.start()));
    lines.line(start)
}

/// Joins adjacent chunks so that a class's attributes render as few runs as possible.
fn merge_chunks(chunks: Vec<Chunk>) -> Vec<Chunk> {
    let mut out: Vec<Chunk> = Vec::new();
    for c in chunks {
        match out.last_mut() {
            Some(last) if last.end == c.start => {
                last.end = c.end;
            }
            Some(last) if c.end <= last.end => {}
            _ => out.push(c),
        }
    }
    out
}

fn import_bindings(import: &ast::StmtImport, guard: &Option<ImportGuard>) -> Vec<ImportBinding> {
    import
        .names
        .iter()
        .map(|alias| {
            let full = alias.name.id.to_string();
            match &alias.asname {
                Some(asname) => ImportBinding {
                    name: asname.id.to_string(),
                    target: ImportTarget::Module(full),
                    guard: guard.clone(),
                },
                None => {
                    let root = full.split('.').next().unwrap_or_default().to_owned();
                    ImportBinding {
                        name: root.clone(),
                        target: ImportTarget::Module(root),
                        guard: guard.clone(),
                    }
                }
            }
        })
        .collect()
}

fn is_docstring_stmt(stmt: Option<&Stmt>) -> bool {
    matches!(stmt, Some(Stmt::Expr(e)) if matches!(&*e.value, Expr::StringLiteral(_)))
}

/// `ast.get_docstring(node, clean=True)`.
fn docstring(body: &[Stmt]) -> Option<String> {
    match body.first() {
        Some(Stmt::Expr(e)) => match &*e.value {
            Expr::StringLiteral(s) => Some(cleandoc(s.value.to_str())),
            _ => None,
        },
        _ => None,
    }
}

/// The dotted chain of a `Name` or `Attribute` expression, like `os.path.join`.
fn dotted(expr: &Expr) -> Option<Vec<String>> {
    Some(dotted_names(expr)?.into_iter().map(str::to_owned).collect())
}

/// [`dotted`], borrowing the names from the tree.
fn dotted_names(expr: &Expr) -> Option<Vec<&str>> {
    match expr {
        Expr::Name(n) => Some(vec![n.id.as_str()]),
        Expr::Attribute(a) => {
            let mut chain = dotted_names(&a.value)?;
            chain.push(a.attr.id.as_str());
            Some(chain)
        }
        _ => None,
    }
}

/// A decorator as the filters see it: its dotted name, or the callee's for `@f(...)`.
fn decorator_name(expr: &Expr) -> String {
    let callee = match expr {
        Expr::Call(c) => &*c.func,
        other => other,
    };
    dotted(callee).map_or_else(|| "<expression>".to_owned(), |c| c.join("."))
}

fn collect_target_names(target: &Expr, out: &mut Vec<String>) {
    match target {
        Expr::Name(n) => out.push(n.id.to_string()),
        Expr::Tuple(t) => t.elts.iter().for_each(|e| collect_target_names(e, out)),
        Expr::List(l) => l.elts.iter().for_each(|e| collect_target_names(e, out)),
        Expr::Starred(s) => collect_target_names(&s.value, out),
        _ => {}
    }
}

fn is_literal(expr: &Expr) -> bool {
    match expr {
        Expr::StringLiteral(_)
        | Expr::BytesLiteral(_)
        | Expr::NumberLiteral(_)
        | Expr::BooleanLiteral(_)
        | Expr::NoneLiteral(_)
        | Expr::EllipsisLiteral(_) => true,
        Expr::UnaryOp(u) => is_literal(&u.operand),
        Expr::Tuple(t) => t.elts.iter().all(is_literal),
        Expr::List(l) => l.elts.iter().all(is_literal),
        Expr::Set(s) => s.elts.iter().all(is_literal),
        Expr::Dict(d) => d
            .items
            .iter()
            .all(|i| i.key.as_ref().is_none_or(is_literal) && is_literal(&i.value)),
        _ => false,
    }
}

/// Collects the dotted chains a piece of code reads whose root is not a local name. With
/// `binding` on (a function's parameters and body), it also collects the names the code binds:
/// parameters, assignment targets, nested definitions, handler names, pattern captures (imports
/// are not locals here: it resolves them itself); and its `global` declarations. Chains are kept
/// as references into the tree until [`RefCollector::finish`], which drops those rooted at a
/// local: no name is copied before it is known to be a reference.
struct RefCollector<'a> {
    receiver: Option<&'a str>,
    binding: bool,
    locals: rustc_hash::FxHashSet<&'a str>,
    globals: Vec<&'a str>,
    chains: Vec<&'a Expr>,
    refs: Refs,
    /// Why the imports of the statements being walked are not needed here, if they are not.
    guard: Option<ImportGuard>,
    /// The module-level names bound to platform checks.
    platform_names: std::rc::Rc<PlatformNames>,
}

impl<'a> RefCollector<'a> {
    fn new(receiver: Option<&'a str>) -> Self {
        RefCollector {
            receiver,
            binding: false,
            locals: Default::default(),
            globals: Vec::new(),
            chains: Vec::new(),
            refs: Refs::default(),
            guard: None,
            platform_names: Default::default(),
        }
    }

    /// Walks `body` with `guard` as the reason its imports are not needed (unless an
    /// enclosing statement gave one).
    fn guarded_body(&mut self, guard: Option<ImportGuard>, body: &'a [Stmt]) {
        if guard.is_none() || self.guard.is_some() {
            return visitor::walk_body(self, body);
        }
        self.guard = guard;
        visitor::walk_body(self, body);
        self.guard = None;
    }

    fn bind(&mut self, name: &'a str) {
        if self.binding {
            self.locals.insert(name);
        }
    }

    fn finish(mut self) -> Refs {
        for global in &self.globals {
            self.locals.remove(global);
        }
        let locals = &self.locals;
        // Sorted and deduplicated as borrowed names (in the same order as owned ones), so that
        // a name read many times is copied once.
        let mut names: Vec<Vec<&str>> = self
            .chains
            .iter()
            .filter(|&&expr| chain_root(expr).is_some_and(|root| !locals.contains(root)))
            .filter_map(|&expr| dotted_names(expr))
            .collect();
        names.sort_unstable();
        names.dedup();
        self.refs.names = names
            .into_iter()
            .map(|chain| chain.into_iter().map(str::to_owned).collect())
            .collect();
        for list in [&mut self.refs.self_attrs, &mut self.refs.super_attrs] {
            list.sort_unstable();
            list.dedup();
        }
        self.refs
    }

    /// A chain read (a `Name`, or an `Attribute` over names only).
    fn chain(&mut self, expr: &'a Expr) {
        if let Some(receiver) = self.receiver
            && chain_root(expr) == Some(receiver)
        {
            // `self.x.y` reads `x` on the receiver; `self` alone reads nothing of it.
            if let Some(attr) = receiver_attr(expr) {
                self.refs.self_attrs.push(attr.to_owned());
            }
            return;
        }
        self.chains.push(expr);
    }
}

/// The name at the root of a dotted chain (`os` of `os.path.join`); `None` when the chain
/// stands on anything but a name.
fn chain_root(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Name(n) => Some(n.id.as_str()),
        Expr::Attribute(a) => chain_root(&a.value),
        _ => None,
    }
}

/// The attribute right after a chain's root (`x` of `self.x.y`).
fn receiver_attr(expr: &Expr) -> Option<&str> {
    match expr {
        Expr::Attribute(a) => match &*a.value {
            Expr::Name(_) => Some(a.attr.id.as_str()),
            inner => receiver_attr(inner),
        },
        _ => None,
    }
}

impl<'a> Visitor<'a> for RefCollector<'a> {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::Import(import) => self
                .refs
                .local_imports
                .extend(import_bindings(import, &self.guard)),
            Stmt::ImportFrom(import) => {
                let from = ImportFrom {
                    level: import.level,
                    module: import
                        .module
                        .as_ref()
                        .map(|m| m.id.to_string())
                        .unwrap_or_default(),
                };
                for alias in &import.names {
                    if alias.name.id.as_str() != "*" {
                        let name = alias.asname.as_ref().unwrap_or(&alias.name).id.to_string();
                        self.refs.local_imports.push(ImportBinding {
                            name,
                            target: ImportTarget::From(from.clone(), alias.name.id.to_string()),
                            guard: self.guard.clone(),
                        });
                    }
                }
            }
            Stmt::FunctionDef(f) => self.bind(f.name.id.as_str()),
            Stmt::ClassDef(c) => self.bind(c.name.id.as_str()),
            Stmt::Global(g) if self.binding => {
                self.globals.extend(g.names.iter().map(|n| n.id.as_str()))
            }
            Stmt::Try(t) => {
                for handler in &t.handlers {
                    let ast::ExceptHandler::ExceptHandler(h) = handler;
                    if let Some(name) = &h.name {
                        self.bind(name.id.as_str());
                    }
                }
                if guard::try_is_optional(t) {
                    self.guarded_body(Some(ImportGuard::Optional), &t.body);
                    for handler in &t.handlers {
                        self.visit_except_handler(handler);
                    }
                    // `else` runs only when the body's optional imports were found: optional too.
                    self.guarded_body(Some(ImportGuard::Optional), &t.orelse);
                    visitor::walk_body(self, &t.finalbody);
                    return;
                }
            }
            Stmt::If(s) => {
                let guards = guard::if_guards(s, &self.platform_names);
                if guards.iter().any(Option::is_some) {
                    self.visit_expr(&s.test);
                    let mut guards = guards.into_iter();
                    self.guarded_body(guards.next().flatten(), &s.body);
                    for (clause, g) in s.elif_else_clauses.iter().zip(guards) {
                        if let Some(test) = &clause.test {
                            self.visit_expr(test);
                        }
                        self.guarded_body(g, &clause.body);
                    }
                    return;
                }
            }
            Stmt::With(w) if guard::with_is_optional(w) => {
                for item in &w.items {
                    self.visit_with_item(item);
                }
                self.guarded_body(Some(ImportGuard::Optional), &w.body);
                return;
            }
            _ => {}
        }
        visitor::walk_stmt(self, stmt);
    }

    fn visit_expr(&mut self, expr: &'a Expr) {
        match expr {
            Expr::Name(n) => match n.ctx {
                ExprContext::Load => self.chain(expr),
                ExprContext::Store | ExprContext::Del => self.bind(n.id.as_str()),
                ExprContext::Invalid => {}
            },
            Expr::Attribute(a) if a.ctx == ExprContext::Load => {
                if chain_root(expr).is_some() {
                    self.chain(expr);
                    return;
                }
                if let Expr::Call(call) = &*a.value
                    && matches!(&*call.func, Expr::Name(n) if n.id.as_str() == "super")
                {
                    self.refs.super_attrs.push(a.attr.id.to_string());
                }
                visitor::walk_expr(self, expr);
            }
            _ => visitor::walk_expr(self, expr),
        }
    }

    fn visit_parameter(&mut self, parameter: &'a ast::Parameter) {
        self.bind(parameter.name.id.as_str());
        visitor::walk_parameter(self, parameter);
    }

    fn visit_pattern(&mut self, pattern: &'a ast::Pattern) {
        match pattern {
            ast::Pattern::MatchAs(ast::PatternMatchAs { name, .. })
            | ast::Pattern::MatchStar(ast::PatternMatchStar { name, .. }) => {
                if let Some(name) = name {
                    self.bind(name.id.as_str());
                }
            }
            ast::Pattern::MatchMapping(p) => {
                if let Some(rest) = &p.rest {
                    self.bind(rest.id.as_str());
                }
            }
            _ => {}
        }
        visitor::walk_pattern(self, pattern);
    }
}

/// Counts a function's own `return <value>` statements, and those returning literals.
#[derive(Default)]
struct ReturnCounter {
    value: u32,
    literal: u32,
}

impl<'a> Visitor<'a> for ReturnCounter {
    fn visit_stmt(&mut self, stmt: &'a Stmt) {
        match stmt {
            Stmt::FunctionDef(_) | Stmt::ClassDef(_) => {}
            Stmt::Return(r) => {
                if let Some(value) = &r.value {
                    self.value += 1;
                    self.literal += u32::from(is_literal(value));
                }
            }
            _ => visitor::walk_stmt(self, stmt),
        }
    }
    fn visit_expr(&mut self, _expr: &'a Expr) {}
}

#[cfg(test)]
mod tests {
    use super::*;

    fn names(refs: &Refs) -> Vec<String> {
        refs.names.iter().map(|c| c.join(".")).collect()
    }

    /// What a definition reads: every way a name can be bound in its parameters or body hides
    /// it; `global` makes it a reference again; a name bound only in a decorator (a lambda's
    /// parameter, a walrus) runs in the enclosing scope and stays one.
    #[test]
    fn references_are_the_names_read_that_the_definition_does_not_bind() {
        let source = r#"
import os

@register(key=lambda item: item.name, flag=(w := 1))
def f(a, b=default_b, *args, c: Annotated = None, **kw) -> Result:
    global counter
    counter += 1
    x = helper(a)
    for i, (j, k) in enumerate(items):
        pass
    with open(path) as fh:
        pass
    try:
        pass
    except Error as err:
        log(err)
    match a:
        case Point(x=px, y=py) | [first, *rest]:
            use(px, rest, first, py)
        case {"k": v, **others}:
            use(v, others)
        case str() as s:
            use(s)
    def inner(p, q=outer_default):
        return p + q + free_inner
    class Local(Base):
        pass
    squares = [n * n for n in numbers if n > limit]
    lam = lambda z: z + zfree
    del x
    import json as j2
    from pkg.sub import thing as th
    value = os.path.join(a, os.sep)
    return item, counter, th(j2), Local, inner, v, kw, args, c, b, fh, err, squares, lam, value, w

class C(B):
    attr = compute()
    def m(self, y):
        self.a.b = y
        z = self.c.d(self.e)
        super().init(y)
        super().init2
        return self, z
    @staticmethod
    def s(self):
        return self.x
"#;
        let summary = summarize(source).unwrap();
        let defs = &summary.interface.defs;
        let f = &defs[0].refs;
        assert_eq!(
            names(f),
            [
                "Annotated",
                "Base",
                "Error",
                "Point",
                "Result",
                "counter",
                "default_b",
                "enumerate",
                "free_inner",
                "helper",
                "item",
                "item.name",
                "items",
                "j2",
                "limit",
                "log",
                "numbers",
                "open",
                "os.path.join",
                "os.sep",
                "outer_default",
                "path",
                "register",
                "str",
                "th",
                "use",
                "w",
                "zfree",
            ]
        );
        assert!(f.self_attrs.is_empty() && f.super_attrs.is_empty());
        assert_eq!(
            f.local_imports,
            [
                ImportBinding {
                    name: "j2".into(),
                    target: ImportTarget::Module("json".into()),
                    guard: None,
                },
                ImportBinding {
                    name: "th".into(),
                    target: ImportTarget::From(
                        ImportFrom {
                            level: 0,
                            module: "pkg.sub".into()
                        },
                        "thing".into()
                    ),
                    guard: None,
                },
            ]
        );
        let (class, m, s) = (&defs[1], &defs[2].refs, &defs[3].refs);
        assert_eq!(names(&class.refs), ["B", "compute"]);
        assert_eq!(names(m), ["super"]);
        assert_eq!(m.self_attrs, ["a", "c", "e"]);
        assert_eq!(m.super_attrs, ["init", "init2"]);
        // A static method has no receiver: its first parameter is a local like any other.
        assert_eq!(names(s), ["staticmethod"]);
        assert!(s.self_attrs.is_empty());
    }

    /// Each import is marked with why its module runs without it here, at module level and
    /// inside functions and classes alike: a `try` that catches its failure, a branch of
    /// another platform (a function defined there included), `TYPE_CHECKING`. The imports of a
    /// handler, of a branch that may run and of a `try` that raises again are required.
    #[test]
    fn imports_are_marked_with_why_they_are_not_needed() {
        let source = r#"
import sys, os
try:
    import icu
    from icu_extras import thing
except ImportError:
    import fallback_mod
    icu = None
else:
    import after_icu
finally:
    import always_mod
if sys.platform == "win32":
    import winreg_helper
    def win_only():
        import win_inner
        return win_inner
elif os.name == "posix":
    import posix_mod
else:
    import other_mod
if TYPE_CHECKING:
    from typing_only import T
with suppress(ImportError):
    import suppressed
try:
    import needed
except ImportError as e:
    raise RuntimeError("install needed") from e

def f():
    try:
        import local_optional
    except (ImportError, AttributeError):
        return None
    if sys.platform.startswith("win"):
        import local_win
    import local_required
    return local_optional, local_win, local_required

class C:
    if os.name == "nt":
        import class_win
"#;
        let summary = summarize(source).unwrap();
        let guard_of = |bindings: &[ImportBinding]| -> Vec<(String, Option<ImportGuard>)> {
            bindings
                .iter()
                .map(|b| {
                    let module = match &b.target {
                        ImportTarget::Module(m) => m.clone(),
                        ImportTarget::From(from, _) => from.module.clone(),
                    };
                    (module, b.guard.clone())
                })
                .collect()
        };
        let win = || Some(ImportGuard::Platform("if sys.platform == \"win32\"".into()));
        let optional = || Some(ImportGuard::Optional);
        assert_eq!(
            guard_of(&summary.interface.imports),
            [
                ("sys".to_owned(), None),
                ("os".to_owned(), None),
                ("icu".to_owned(), optional()),
                ("icu_extras".to_owned(), optional()),
                ("fallback_mod".to_owned(), None),
                ("after_icu".to_owned(), optional()),
                ("always_mod".to_owned(), None),
                ("winreg_helper".to_owned(), win()),
                ("posix_mod".to_owned(), None),
                (
                    "other_mod".to_owned(),
                    Some(ImportGuard::Platform(
                        "else of `if os.name == \"posix\"`".into()
                    ))
                ),
                ("typing_only".to_owned(), Some(ImportGuard::TypeChecking)),
                ("suppressed".to_owned(), optional()),
                ("needed".to_owned(), None),
            ]
        );
        let def = |name: &str| {
            let d = summary
                .interface
                .defs
                .iter()
                .find(|d| d.qualname == name)
                .unwrap();
            guard_of(&d.refs.local_imports)
        };
        assert_eq!(def("win_only"), [("win_inner".to_owned(), win())]);
        assert_eq!(
            def("f"),
            [
                ("local_optional".to_owned(), optional()),
                (
                    "local_win".to_owned(),
                    Some(ImportGuard::Platform(
                        "if sys.platform.startswith(\"win\")".into()
                    ))
                ),
                ("local_required".to_owned(), None),
            ]
        );
        assert_eq!(
            def("C"),
            [(
                "class_win".to_owned(),
                Some(ImportGuard::Platform("if os.name == \"nt\"".into()))
            )]
        );
    }

    /// Lines of code: not blank and not only a comment, the docstring's left out, whitespace
    /// as `str::trim` sees it (a no-break space too).
    #[test]
    fn lines_of_code_skip_blanks_comments_and_the_docstring() {
        let source = "def g():\n    \"\"\"Doc.\n\n    More.\"\"\"\n\n    # a comment\n    text = \"\"\"\n\u{a0}# not code by the count\n\u{a0}code\n\x0c\n    \"\"\"\n    return text  # trailing\n";
        let summary = summarize(source).unwrap();
        assert_eq!(summary.layout.defs[0].features.lines, 5);
    }
}
