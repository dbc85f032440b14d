"""Mutants of a function, made with Python's `ast` and `ast.unparse` (independent of r2e's own).

Kinds, up to `per_kind` sites each per function (sites taken in an order fixed by a hash of the
instance id, the kind and the site, so a run is reproducible; a site that gives a mutant that
does not compile, or whose text equals the original's or another mutant's, is skipped and the
next site is tried):

- flip_comparison   `<` -> `>=`, `==` -> `!=`, `in` -> `not in`, `is` -> `is not` (one operator)
- constant          an int or float literal n -> n + 1 or n - 1 (alternating by the hash)
- add_sub           `+` <-> `-` (binary and augmented)
- mul_div           `*` <-> `/`, `//` -> `*` (binary and augmented)
- and_or            `and` <-> `or`
- negate_if         `if c:` / `elif c:` -> `if not c:`
- drop_return       `return x` -> `return None` (x not already None)
- remove_statement  a statement -> `pass` (not the docstring, `pass`, `global`, `nonlocal`)
- slice_bound       `x[a:b]` -> `x[a:b + 1]`; `x[a:]` -> `x[a + 1:]`

Everything in the function is a site except decorators, annotations and the docstring (default
values are: a default is behaviour). Texts are compared after `ast.unparse`, so a mutant is
never a formatting change.
"""

import ast
import copy
import hashlib

KINDS = [
    "flip_comparison",
    "constant",
    "add_sub",
    "mul_div",
    "and_or",
    "negate_if",
    "drop_return",
    "remove_statement",
    "slice_bound",
]

NEGATED = {
    ast.Lt: ast.GtE, ast.GtE: ast.Lt, ast.Gt: ast.LtE, ast.LtE: ast.Gt,
    ast.Eq: ast.NotEq, ast.NotEq: ast.Eq, ast.In: ast.NotIn, ast.NotIn: ast.In,
    ast.Is: ast.IsNot, ast.IsNot: ast.Is,
}
ADD_SUB = {ast.Add: ast.Sub, ast.Sub: ast.Add}
MUL_DIV = {ast.Mult: ast.Div, ast.Div: ast.Mult, ast.FloorDiv: ast.Mult}


def nodes(fn):
    """The function's nodes in a fixed pre-order, without decorators, annotations, docstring."""
    skip = set()
    for d in fn.decorator_list:
        skip.add(id(d))
    if fn.returns is not None:
        skip.add(id(fn.returns))
    if docstring_stmt(fn) is not None:
        skip.add(id(fn.body[0]))
    out = []

    def visit(n):
        if id(n) in skip:
            return
        if isinstance(n, ast.arg) and n.annotation is not None:
            skip.add(id(n.annotation))
        if isinstance(n, ast.AnnAssign):
            skip.add(id(n.annotation))
        if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n is not fn:
            for d in n.decorator_list:
                skip.add(id(d))
            if n.returns is not None:
                skip.add(id(n.returns))
            if docstring_stmt(n) is not None:
                skip.add(id(n.body[0]))
        out.append(n)
        for c in ast.iter_child_nodes(n):
            visit(c)

    visit(fn)
    return out


def docstring_stmt(fn):
    b = fn.body
    if b and isinstance(b[0], ast.Expr) and isinstance(b[0].value, ast.Constant) and isinstance(b[0].value.value, str):
        return b[0]
    return None


def is_number(n):
    return isinstance(n, ast.Constant) and type(n.value) in (int, float)


def plus_one(expr):
    return ast.BinOp(left=expr, op=ast.Add(), right=ast.Constant(1))


def sites(fn):
    """Every (kind, node index, sub-site) the function offers."""
    out = []
    all_nodes = nodes(fn)
    for i, n in enumerate(all_nodes):
        if isinstance(n, ast.Compare):
            for j, op in enumerate(n.ops):
                out.append(("flip_comparison", i, j))
        if is_number(n):
            out.append(("constant", i, 0))
        if isinstance(n, (ast.BinOp, ast.AugAssign)):
            if type(n.op) in ADD_SUB:
                out.append(("add_sub", i, 0))
            if type(n.op) in MUL_DIV:
                out.append(("mul_div", i, 0))
        if isinstance(n, ast.BoolOp):
            out.append(("and_or", i, 0))
        if isinstance(n, ast.If):
            out.append(("negate_if", i, 0))
        if isinstance(n, ast.Return) and n.value is not None and not (
            isinstance(n.value, ast.Constant) and n.value.value is None
        ):
            out.append(("drop_return", i, 0))
        if isinstance(n, ast.stmt) and n is not fn and not isinstance(n, (ast.Pass, ast.Global, ast.Nonlocal)):
            out.append(("remove_statement", i, 0))
        if isinstance(n, ast.Slice) and (n.upper is not None or n.lower is not None):
            out.append(("slice_bound", i, 0))
    return out


def apply(tree, kind, index, sub, sign):
    """Applies one site's edit to `tree` (a copy) in place; a short description."""
    fn = tree.body[0]
    n = nodes(fn)[index]
    if kind == "flip_comparison":
        was = n.ops[sub]
        n.ops[sub] = NEGATED[type(was)]()
        return f"{op_text(was)} -> {op_text(n.ops[sub])}"
    if kind == "constant":
        was = n.value
        n.value = was + sign
        return f"{was!r} -> {n.value!r}"
    if kind in ("add_sub", "mul_div"):
        table = ADD_SUB if kind == "add_sub" else MUL_DIV
        was = n.op
        n.op = table[type(was)]()
        return f"{op_text(was)} -> {op_text(n.op)}"
    if kind == "and_or":
        n.op = ast.Or() if isinstance(n.op, ast.And) else ast.And()
        return "and -> or" if isinstance(n.op, ast.Or) else "or -> and"
    if kind == "negate_if":
        n.test = ast.UnaryOp(op=ast.Not(), operand=n.test)
        return "if c -> if not c"
    if kind == "drop_return":
        n.value = ast.Constant(None)
        return "return x -> return None"
    if kind == "remove_statement":
        was = ast.unparse(n).splitlines()[0]
        replace_stmt(fn, n, ast.Pass())
        return f"`{was[:60]}` -> pass"
    if kind == "slice_bound":
        if n.upper is not None:
            n.upper = plus_one(n.upper)
            return "upper bound + 1"
        n.lower = plus_one(n.lower)
        return "lower bound + 1"
    raise ValueError(kind)


def replace_stmt(root, old, new):
    for parent in ast.walk(root):
        for field, value in ast.iter_fields(parent):
            if isinstance(value, list):
                for k, item in enumerate(value):
                    if item is old:
                        value[k] = new
                        return
    raise LookupError("statement not found")


OPS = {
    ast.Lt: "<", ast.GtE: ">=", ast.Gt: ">", ast.LtE: "<=", ast.Eq: "==", ast.NotEq: "!=",
    ast.In: "in", ast.NotIn: "not in", ast.Is: "is", ast.IsNot: "is not",
    ast.Add: "+", ast.Sub: "-", ast.Mult: "*", ast.Div: "/", ast.FloorDiv: "//",
}


def op_text(op):
    return OPS.get(type(op), type(op).__name__)


def compiles(text):
    try:
        compile(text, "<mutant>", "exec")
        return True
    except (SyntaxError, ValueError):
        return False


def fresh(tree):
    """A copy of a module tree (parsing its text again is ~10x faster than deepcopy)."""
    src = getattr(tree, "_r2e_text", None)
    return ast.parse(src) if src is not None else copy.deepcopy(tree)


def digest(*parts):
    return hashlib.sha256("|".join(map(str, parts)).encode()).hexdigest()


def mutants(instance_id, tree, per_kind=3):
    """The mutants of the function in `tree` (a module holding one def): a list of dicts with
    `kind`, `description`, `line` (1-based, in the dedented def) and `text`."""
    fn = tree.body[0]
    base = ast.unparse(tree)
    if not hasattr(tree, "_r2e_text"):
        tree._r2e_text = base
    seen = {base}
    out = []
    all_sites = sites(fn)
    for kind in KINDS:
        of_kind = [s for s in all_sites if s[0] == kind]
        of_kind.sort(key=lambda s: digest(instance_id, *s))
        taken = 0
        for _, index, sub in of_kind:
            if taken >= per_kind:
                break
            sign = 1 if int(digest("sign", instance_id, kind, index, sub), 16) % 2 == 0 else -1
            t = fresh(tree)
            site = nodes(t.body[0])[index]
            line, col = getattr(site, "lineno", 0), getattr(site, "col_offset", 0)
            description = apply(t, kind, index, sub, sign)
            ast.fix_missing_locations(t)
            try:
                text = ast.unparse(t) + "\n"
            except Exception:
                continue
            if text.rstrip("\n") in seen or not compiles(text):
                continue
            seen.add(text.rstrip("\n"))
            src = getattr(tree, "_r2e_text", "").splitlines()
            at = src[line - 1].strip() if 0 < line <= len(src) else ""
            out.append({"kind": kind, "line": line, "description": f"line {line} col {col}: {description}", "at": at, "text": text})
            taken += 1
    return out
