"""Equivalent rewrites of a function: programs that do the same thing as the original, written
differently. Every one must pass `r2e check` (a rejection is a wrong verdict).

Each kind applies at every site it finds in the function at once (one candidate per kind and
function; none when the kind has no site). All but `paren_return` are made on the AST and
rendered with `ast.unparse`; `unparsed` (the original, round-tripped through `ast.unparse`) is
their control: it separates what the rendering changes from what the rewrite changes.

Kinds, and why each is equivalent (the rules that keep it so are in the code):

- unparsed           ast.unparse(original): same AST, comments and formatting dropped
- swap_comparison    `a < b` -> `b > a` (one-operator comparisons of < <= > >= == !=), only when
                     one operand is a name or a literal, so evaluation order cannot matter
- rename_locals      local variables (not parameters, not nested function names, not `__x`)
                     renamed everywhere in the function; skipped when the function has a class
                     body, `global`/`nonlocal` of the name, or calls locals()/vars()/eval/exec/dir
- noop_pass          `pass` as the first statement after the docstring
- noop_assign        `_r2e_unused = None` as the first statement after the docstring
- docstring          the docstring replaced by another text
- augassign_expand   `x += 1` -> `x = x + 1` (a name and a numeric literal only: an in-place
                     operator on a mutable value is not equivalent)
- not_forms          `a != b` -> `not a == b`, `a not in b` -> `not a in b`, `a is not b` ->
                     `not a is b`
- ifelse_to_ternary  `if c: return a / else: return b` (or `if c: return a` then `return b`)
                     -> `return a if c else b`; `if c: x = a / else: x = b` -> `x = a if c else b`
- ternary_to_if      the reverse, for `return a if c else b` and `x = a if c else b`
- inverted_if        `if c: A / else: B` -> `if not c: B / else: A`
- hoisted_condition  `if c:` -> `_r2e_cond = c` then `if _r2e_cond:` (elif too, inside its else)
- return_temp        `return x` -> `_r2e_ret = x` then `return _r2e_ret`
- for_to_while       `for t in xs: B` -> `_it = iter(xs)` / `while True: try: t = next(_it) /
                     except StopIteration: break` / `B` (loops without `else`)
- comprehension_to_loop  `v = [e for t in xs if c]` (or `return [...]`) -> a loop appending to
                     a list (one `for`, names not used elsewhere, no lambda or nested scope inside)
- double_to_add      `x * 2` / `2 * x` -> `x + x` (x a name)
- strip_annotations  parameter and return annotations removed (functions whose decorators are
                     only staticmethod / classmethod / property)
- raise_message      `raise E("text")` -> `raise E("another text")`: equivalent under r2e's
                     policy (exception messages are not compared unless asked)
- paren_return       `return x` -> `return (x)` (on the text: formatting and comments kept)
- triple_quoted      a string literal holding a newline (not the docstring, not in an f-string)
                     written as a triple-quoted literal with real line breaks
- method_multiline_literal  for a method: its first string literal `s` in the body written as
                     `('''<line break>'''[1:] + s)` (the same string): a probe of how a
                     candidate's multi-line literal survives being re-indented into its class
- two_space_indent   the unparsed text indented by 2 spaces a level instead of 4
- crlf               the original text with CRLF line endings
- extra_import       the original with `import collections as _r2e_collections` before it (a
                     candidate may carry its own imports)
- whole_class        for a method: its whole class (from the file) with the method's def
                     replaced by its unparsed text (a method's candidate may be its class)
"""

import ast
import copy

from mutants import docstring_stmt, fresh

KINDS = [
    "unparsed",
    "swap_comparison",
    "rename_locals",
    "noop_pass",
    "noop_assign",
    "docstring",
    "augassign_expand",
    "not_forms",
    "ifelse_to_ternary",
    "ternary_to_if",
    "inverted_if",
    "hoisted_condition",
    "return_temp",
    "for_to_while",
    "comprehension_to_loop",
    "double_to_add",
    "strip_annotations",
    "raise_message",
    "paren_return",
    "triple_quoted",
    "method_multiline_literal",
    "two_space_indent",
    "crlf",
    "extra_import",
    "whole_class",
]

# Kinds made on the text, not through the AST.
TEXTUAL = (
    "unparsed", "paren_return", "triple_quoted", "method_multiline_literal", "two_space_indent", "crlf",
    "extra_import", "whole_class",
)

MIRROR = {ast.Lt: ast.Gt, ast.Gt: ast.Lt, ast.LtE: ast.GtE, ast.GtE: ast.LtE, ast.Eq: ast.Eq, ast.NotEq: ast.NotEq}
POSITIVE = {ast.NotEq: ast.Eq, ast.NotIn: ast.In, ast.IsNot: ast.Is}
AUG_OPS = (ast.Add, ast.Sub, ast.Mult, ast.Div, ast.FloorDiv, ast.Mod, ast.Pow)


def simple(e):
    return isinstance(e, (ast.Name, ast.Constant))


def body_start(fn):
    return 1 if docstring_stmt(fn) is not None else 0


def walk_no_class(root):
    """ast.walk, not entering class bodies (a statement added there would be an attribute)."""
    todo = [root]
    while todo:
        n = todo.pop(0)
        if isinstance(n, ast.ClassDef):
            continue
        todo.extend(ast.iter_child_nodes(n))
        yield n


def stmt_lists(root):
    """Every statement list in the tree (bodies, orelse, finalbody, handlers' bodies)."""
    for n in walk_no_class(root):
        for field in ("body", "orelse", "finalbody"):
            v = getattr(n, field, None)
            if isinstance(v, list) and v and isinstance(v[0], ast.stmt):
                yield v
        if isinstance(n, ast.match_case):
            yield n.body


# Each rewrite takes a deep copy of the module holding the def and returns the count of sites
# it changed (0: not applicable).


def rw_swap_comparison(tree):
    count = 0
    for n in ast.walk(tree.body[0]):
        if isinstance(n, ast.Compare) and len(n.ops) == 1 and type(n.ops[0]) in MIRROR:
            if simple(n.left) or simple(n.comparators[0]):
                n.left, n.comparators = n.comparators[0], [n.left]
                n.ops = [MIRROR[type(n.ops[0])]()]
                count += 1
    return count


def rw_rename_locals(tree):
    fn = tree.body[0]
    params = {a.arg for a in ast.walk(fn.args) if isinstance(a, ast.arg)}
    declared = set()
    for n in ast.walk(fn):
        if isinstance(n, ast.ClassDef):
            return 0
        if isinstance(n, (ast.Global, ast.Nonlocal)):
            declared.update(n.names)
        if isinstance(n, ast.Call) and isinstance(n.func, ast.Name) and n.func.id in ("locals", "vars", "eval", "exec", "dir"):
            return 0
    # Names bound in the function's own scope (not in nested functions or lambdas; a
    # comprehension's walrus binds here too, its loop variables do not).
    bound = set()

    def scan(node, top):
        for c in ast.iter_child_nodes(node):
            if isinstance(c, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)):
                continue
            if isinstance(c, (ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp)):
                for w in ast.walk(c):
                    if isinstance(w, ast.NamedExpr) and isinstance(w.target, ast.Name):
                        bound.add(w.target.id)
                continue
            if isinstance(c, ast.Name) and isinstance(c.ctx, (ast.Store, ast.Del)):
                bound.add(c.id)
            if isinstance(c, ast.ExceptHandler) and c.name:
                bound.add(c.name)
            if isinstance(c, (ast.MatchAs, ast.MatchStar)) and c.name:
                bound.add(c.name)
            if isinstance(c, ast.MatchMapping) and c.rest:
                bound.add(c.rest)
            scan(c, False)

    scan(fn, True)
    # Bound by an import without `as`, or a nested def's name: left alone.
    fixed = set()
    for n in ast.walk(fn):
        if isinstance(n, (ast.Import, ast.ImportFrom)):
            for a in n.names:
                fixed.add(a.asname or a.name.split(".")[0])
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not fn:
            fixed.add(n.name)
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef, ast.Lambda)) and n is not fn:
            fixed.update(a.arg for a in ast.walk(n.args) if isinstance(a, ast.arg))
    names = sorted(b for b in bound - params - declared - fixed if not b.startswith("__"))
    if not names:
        return 0
    used = {n.id for n in ast.walk(fn) if isinstance(n, ast.Name)} | params
    new = {}
    for k, name in enumerate(names):
        candidate = f"r2e_local_{k}"
        while candidate in used:
            candidate += "_"
        new[name] = candidate
    for n in ast.walk(fn):
        if isinstance(n, ast.Name) and n.id in new:
            n.id = new[n.id]
        elif isinstance(n, ast.ExceptHandler) and n.name in new:
            n.name = new[n.name]
        elif isinstance(n, (ast.MatchAs, ast.MatchStar)) and n.name in new:
            n.name = new[n.name]
        elif isinstance(n, ast.MatchMapping) and n.rest in new:
            n.rest = new[n.rest]
        elif isinstance(n, ast.alias) and n.asname in new:
            n.asname = new[n.asname]
    return len(names)


def rw_noop_pass(tree):
    fn = tree.body[0]
    fn.body.insert(body_start(fn), ast.Pass())
    return 1


def rw_noop_assign(tree):
    fn = tree.body[0]
    fn.body.insert(body_start(fn), ast.Assign(targets=[ast.Name("_r2e_unused", ast.Store())], value=ast.Constant(None)))
    return 1


def rw_docstring(tree):
    fn = tree.body[0]
    d = docstring_stmt(fn)
    if d is None:
        return 0
    d.value.value = "A rewritten docstring: it says something else.\n\nAnd it has two paragraphs."
    return 1


def rw_augassign_expand(tree):
    count = 0
    for body in stmt_lists(tree.body[0]):
        for k, s in enumerate(body):
            if (
                isinstance(s, ast.AugAssign)
                and isinstance(s.target, ast.Name)
                and isinstance(s.op, AUG_OPS)
                and isinstance(s.value, ast.Constant)
                and type(s.value.value) in (int, float)
            ):
                body[k] = ast.Assign(
                    targets=[ast.Name(s.target.id, ast.Store())],
                    value=ast.BinOp(ast.Name(s.target.id, ast.Load()), s.op, s.value),
                )
                count += 1
    return count


class NotForms(ast.NodeTransformer):
    count = 0

    def visit_Compare(self, n):
        self.generic_visit(n)
        if len(n.ops) == 1 and type(n.ops[0]) in POSITIVE:
            self.count += 1
            return ast.UnaryOp(ast.Not(), ast.Compare(n.left, [POSITIVE[type(n.ops[0])]()], n.comparators))
        return n


def rw_not_forms(tree):
    t = NotForms()
    t.visit(tree.body[0])
    return t.count


def none_if_bare(r):
    return r.value if r.value is not None else ast.Constant(None)


def single_name_assign(s):
    return isinstance(s, ast.Assign) and len(s.targets) == 1 and isinstance(s.targets[0], ast.Name)


def rw_ifelse_to_ternary(tree):
    count = 0
    # Innermost first, so an elif chain of returns folds into nested conditional expressions.
    lists = list(stmt_lists(tree.body[0]))
    for body in reversed(lists):
        k = 0
        while k < len(body):
            s = body[k]
            if isinstance(s, ast.If) and len(s.body) == 1 and isinstance(s.body[0], ast.Return):
                if len(s.orelse) == 1 and isinstance(s.orelse[0], ast.Return):
                    body[k] = ast.Return(ast.IfExp(s.test, none_if_bare(s.body[0]), none_if_bare(s.orelse[0])))
                    count += 1
                elif not s.orelse and k + 1 < len(body) and isinstance(body[k + 1], ast.Return):
                    body[k : k + 2] = [ast.Return(ast.IfExp(s.test, none_if_bare(s.body[0]), none_if_bare(body[k + 1])))]
                    count += 1
            elif (
                isinstance(s, ast.If)
                and len(s.body) == 1
                and len(s.orelse) == 1
                and single_name_assign(s.body[0])
                and single_name_assign(s.orelse[0])
                and s.body[0].targets[0].id == s.orelse[0].targets[0].id
            ):
                body[k] = ast.Assign(
                    targets=[ast.Name(s.body[0].targets[0].id, ast.Store())],
                    value=ast.IfExp(s.test, s.body[0].value, s.orelse[0].value),
                )
                count += 1
            k += 1
    return count


def rw_ternary_to_if(tree):
    count = 0
    for body in list(stmt_lists(tree.body[0])):
        for k, s in enumerate(body):
            if isinstance(s, ast.Return) and isinstance(s.value, ast.IfExp):
                e = s.value
                body[k] = ast.If(e.test, [ast.Return(e.body)], [ast.Return(e.orelse)])
                count += 1
            elif single_name_assign(s) and isinstance(s.value, ast.IfExp):
                e, name = s.value, s.targets[0].id
                body[k] = ast.If(
                    e.test,
                    [ast.Assign([ast.Name(name, ast.Store())], e.body)],
                    [ast.Assign([ast.Name(name, ast.Store())], e.orelse)],
                )
                count += 1
    return count


def rw_inverted_if(tree):
    count = 0
    for n in ast.walk(tree.body[0]):
        if isinstance(n, ast.If) and n.orelse:
            n.test = ast.UnaryOp(ast.Not(), n.test)
            n.body, n.orelse = n.orelse, n.body
            count += 1
    return count


def rw_hoisted_condition(tree):
    count = 0
    for body in list(stmt_lists(tree.body[0])):
        k = 0
        while k < len(body):
            s = body[k]
            if isinstance(s, ast.If):
                name = f"_r2e_cond_{count}"
                body[k : k + 1] = [ast.Assign([ast.Name(name, ast.Store())], s.test), s]
                s.test = ast.Name(name, ast.Load())
                count += 1
                k += 1
            k += 1
    return count


def rw_return_temp(tree):
    count = 0
    for body in list(stmt_lists(tree.body[0])):
        k = 0
        while k < len(body):
            s = body[k]
            if isinstance(s, ast.Return) and s.value is not None:
                body[k : k + 1] = [
                    ast.Assign([ast.Name("_r2e_ret", ast.Store())], s.value),
                    ast.Return(ast.Name("_r2e_ret", ast.Load())),
                ]
                count += 1
                k += 1
            k += 1
    return count


def names_in(node):
    return {n.id for n in ast.walk(node) if isinstance(n, ast.Name)}


def rw_for_to_while(tree):
    count = 0
    for body in list(stmt_lists(tree.body[0])):
        k = 0
        while k < len(body):
            s = body[k]
            if isinstance(s, ast.For) and not s.orelse:
                it = f"_r2e_it_{count}"
                loop = ast.While(
                    test=ast.Constant(True),
                    body=[
                        ast.Try(
                            body=[ast.Assign([s.target], ast.Call(ast.Name("next", ast.Load()), [ast.Name(it, ast.Load())], []))],
                            handlers=[ast.ExceptHandler(ast.Name("StopIteration", ast.Load()), None, [ast.Break()])],
                            orelse=[],
                            finalbody=[],
                        )
                    ]
                    + s.body,
                    orelse=[],
                )
                init = ast.Assign([ast.Name(it, ast.Store())], ast.Call(ast.Name("iter", ast.Load()), [s.iter], []))
                body[k : k + 1] = [init, loop]
                count += 1
                k += 1
            k += 1
    return count


class Subst(ast.NodeTransformer):
    def __init__(self, table):
        self.table = table

    def visit_Name(self, n):
        if n.id in self.table:
            return ast.Name(self.table[n.id], n.ctx)
        return n


def comprehension_loop(comp, result, fn, count):
    """Statements building list `result` as the list comprehension `comp` does, or None."""
    if len(comp.generators) != 1 or comp.generators[0].is_async:
        return None
    g = comp.generators[0]
    inner = [comp.elt, *g.ifs]
    if any(isinstance(n, (ast.Lambda, ast.ListComp, ast.SetComp, ast.DictComp, ast.GeneratorExp, ast.NamedExpr)) for e in inner for n in ast.walk(e)):
        return None
    targets = [n.id for n in ast.walk(g.target) if isinstance(n, ast.Name)]
    if not all(isinstance(n, (ast.Name, ast.Tuple, ast.Store)) for n in ast.walk(g.target)):
        return None
    table = {t: f"_r2e_v{count}_{t}" for t in targets}
    used = names_in(fn)
    if any(v in used for v in table.values()):
        return None
    sub = Subst(table)
    target = sub.visit(copy.deepcopy(g.target))
    elt = sub.visit(copy.deepcopy(comp.elt))
    ifs = [sub.visit(copy.deepcopy(c)) for c in g.ifs]
    append = ast.Expr(ast.Call(ast.Attribute(ast.Name(result, ast.Load()), "append", ast.Load()), [elt], []))
    inner_body = [append]
    for c in reversed(ifs):
        inner_body = [ast.If(c, inner_body, [])]
    return [
        ast.Assign([ast.Name(result, ast.Store())], ast.List([], ast.Load())),
        ast.For(target, g.iter, inner_body, []),
    ]


def rw_comprehension_to_loop(tree):
    fn = tree.body[0]
    count = 0
    for body in list(stmt_lists(fn)):
        k = 0
        while k < len(body):
            s = body[k]
            new = None
            if single_name_assign(s) and isinstance(s.value, ast.ListComp):
                tmp = f"_r2e_list_{count}"
                new = comprehension_loop(s.value, tmp, fn, count)
                if new:
                    new.append(ast.Assign([ast.Name(s.targets[0].id, ast.Store())], ast.Name(tmp, ast.Load())))
            elif isinstance(s, ast.Return) and isinstance(s.value, ast.ListComp):
                tmp = f"_r2e_list_{count}"
                new = comprehension_loop(s.value, tmp, fn, count)
                if new:
                    new.append(ast.Return(ast.Name(tmp, ast.Load())))
            if new:
                body[k : k + 1] = new
                count += 1
                k += len(new) - 1
            k += 1
    return count


class DoubleToAdd(ast.NodeTransformer):
    count = 0

    def visit_BinOp(self, n):
        self.generic_visit(n)
        if isinstance(n.op, ast.Mult):
            two = lambda e: isinstance(e, ast.Constant) and type(e.value) is int and e.value == 2
            for a, b in ((n.left, n.right), (n.right, n.left)):
                if isinstance(a, ast.Name) and two(b):
                    self.count += 1
                    return ast.BinOp(ast.Name(a.id, ast.Load()), ast.Add(), ast.Name(a.id, ast.Load()))
        return n


def rw_double_to_add(tree):
    t = DoubleToAdd()
    t.visit(tree.body[0])
    return t.count


PLAIN_DECORATORS = {"staticmethod", "classmethod", "property"}


def rw_strip_annotations(tree):
    fn = tree.body[0]
    if any(not (isinstance(d, ast.Name) and d.id in PLAIN_DECORATORS) for d in fn.decorator_list):
        return 0
    count = 0
    for a in ast.walk(fn.args):
        if isinstance(a, ast.arg) and a.annotation is not None:
            a.annotation = None
            count += 1
    if fn.returns is not None:
        fn.returns = None
        count += 1
    return count


def rw_raise_message(tree):
    count = 0
    for n in ast.walk(tree.body[0]):
        if isinstance(n, ast.Raise) and isinstance(n.exc, ast.Call) and n.exc.args:
            first = n.exc.args[0]
            if isinstance(first, ast.JoinedStr) or (isinstance(first, ast.Constant) and isinstance(first.value, str)):
                n.exc.args[0] = ast.Constant("r2e: a message written another way")
                count += 1
    return count


def paren_return(text, tree):
    """`return x` -> `return (x)` on the text itself (positions from `tree`, parsed from it)."""
    lines = text.splitlines(keepends=True)
    starts = [0]
    for l in lines:
        starts.append(starts[-1] + len(l.encode("utf-8")))
    data = text.encode("utf-8")
    edits = []
    for n in ast.walk(tree):
        if isinstance(n, ast.Return) and n.value is not None:
            v = n.value
            a = starts[v.lineno - 1] + v.col_offset
            b = starts[v.end_lineno - 1] + v.end_col_offset
            edits.append((a, b))
    if not edits:
        return None
    for a, b in sorted(edits, reverse=True):
        data = data[:a] + b"(" + data[a:b] + b")" + data[b:]
    return data.decode("utf-8"), len(edits)


REWRITES = {name: globals()[f"rw_{name}"] for name in KINDS if f"rw_{name}" in globals()}


def string_sites(fn):
    """String constants of the body: not the docstring, not inside an f-string, decorator or
    annotation; in source order."""
    skip = set()
    d = docstring_stmt(fn)
    if d is not None:
        skip.add(id(d.value))
    for n in ast.walk(fn):
        if isinstance(n, ast.JoinedStr):
            skip.update(id(c) for c in ast.walk(n))
    out = []
    for stmt in fn.body:
        for n in ast.walk(stmt):
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in skip:
                out.append(n)
    out.sort(key=lambda n: (n.lineno, n.col_offset))
    return out


def triple_literal(value):
    out = []
    for ch in value:
        if ch == "\n":
            out.append(ch)
        elif ch in '\\"':
            out.append("\\" + ch)
        elif ch.isprintable():
            out.append(ch)
        else:
            out.append(repr(ch)[1:-1])
    return '"""' + "".join(out) + '"""'


def with_placeholders(tree, pick, render):
    """Unparses `tree` with the string constants `pick` chooses rendered by `render` (text)."""
    t = fresh(tree)
    chosen = pick(string_sites(t.body[0]))
    if not chosen:
        return None
    marks = {}
    for k, n in enumerate(chosen):
        mark = f"R2E_PLACEHOLDER_{k}_"
        marks[repr(mark)] = render(n.value)
        n.value = mark
    text = ast.unparse(t) + "\n"
    for mark, new in marks.items():
        if text.count(mark) != 1:
            return None
        text = text.replace(mark, new)
    return text


def triple_quoted(tree):
    return with_placeholders(tree, lambda sites: [n for n in sites if "\n" in n.value], triple_literal)


def method_multiline_literal(tree, original):
    if original is None or "." not in original.qualname:
        return None
    return with_placeholders(tree, lambda sites: sites[:1], lambda v: '("""\n"""[1:] + ' + repr(v) + ")")


def two_space_indent(base):
    out = []
    for line in base.splitlines(keepends=True):
        stripped = line.lstrip(" ")
        out.append(" " * ((len(line) - len(stripped)) // 2) + stripped)
    return "".join(out)


def whole_class(original, base):
    """A method's whole class from its file, the method's def replaced by `base`."""
    if original is None or "." not in original.qualname:
        return None
    from source import dedent, find_def, parsed

    file_text, module = parsed(original.file)
    cls_name = original.qualname.split(".")[0]
    cls = [n for n in module.body if isinstance(n, ast.ClassDef) and n.name == cls_name]
    if len(cls) != 1:
        return None
    cls = cls[0]
    lines = file_text.splitlines(keepends=True)
    first = min([cls.lineno] + [d.lineno for d in cls.decorator_list])
    before = "".join(lines[first - 1 : original.first_line - 1])
    after = "".join(lines[original.end_line : cls.end_lineno])
    method = "".join((original.indent + l if l.strip() else "\n") for l in base.splitlines(keepends=True))
    return dedent(before + method + after)


def rewrites(text, tree, original=None):
    """The equivalent rewrites of the def in `text` (parsed as `tree`): dicts with `kind`,
    `sites` and `text`. Kinds with no site are left out. `original` (a source.Original) gives
    the file, for `whole_class`."""
    out = []
    base = ast.unparse(tree) + "\n"
    if not hasattr(tree, "_r2e_text"):
        tree._r2e_text = base
    out.append({"kind": "unparsed", "sites": 1, "text": base})
    for kind in KINDS:
        if kind in TEXTUAL:
            continue
        t = fresh(tree)
        n = REWRITES[kind](t)
        if not n:
            continue
        ast.fix_missing_locations(t)
        try:
            new = ast.unparse(t) + "\n"
            compile(new, "<rewrite>", "exec")
        except Exception:
            continue
        if new == base:
            continue
        out.append({"kind": kind, "sites": n, "text": new})
    p = paren_return(text, tree)
    if p is not None:
        new, n = p
        try:
            compile(new, "<rewrite>", "exec")
            out.append({"kind": "paren_return", "sites": n, "text": new})
        except SyntaxError:
            pass
    textual = {
        "triple_quoted": triple_quoted(tree),
        "method_multiline_literal": method_multiline_literal(tree, original),
        "two_space_indent": two_space_indent(base),
        "crlf": text.replace("\n", "\r\n"),
        "extra_import": "import collections as _r2e_collections\n\n" + text,
        "whole_class": whole_class(original, base),
    }
    for kind, new in textual.items():
        if new is None:
            continue
        try:
            compile(new, "<rewrite>", "exec")
        except SyntaxError:
            continue
        out.append({"kind": kind, "sites": 1, "text": new})
    return out
