"""Static information about a function: its definition's syntax tree, the literals of its body
and of the module-level tables it names, how it uses its parameters, calls in its doctest
examples and at its call sites, and its annotations."""

from __future__ import annotations

import ast
import datetime
import enum
import inspect
import keyword
import os
import re
import textwrap
import tokenize
import types
import typing

from . import regexgen
from .specs import UNKNOWN, dedupe, receiver_construction, spec_from_node

STR_METHODS = {
    "capitalize", "casefold", "center", "encode", "endswith", "expandtabs", "find", "format",
    "isalnum", "isalpha", "isdecimal", "isdigit", "isidentifier", "islower", "isnumeric",
    "isspace", "istitle", "isupper", "ljust", "lower", "lstrip", "partition", "removeprefix",
    "removesuffix", "rfind", "rjust", "rpartition", "rsplit", "rstrip", "split", "splitlines",
    "startswith", "strip", "swapcase", "title", "translate", "upper", "zfill",
}  # fmt: skip
DICT_METHODS = {"items", "keys", "values", "get", "setdefault", "update", "popitem"}
LIST_METHODS = {"append", "extend", "insert", "sort", "remove", "reverse"}
SEQUENCE_FUNCTIONS = {
    "len",
    "sorted",
    "sum",
    "min",
    "max",
    "enumerate",
    "reversed",
    "zip",
    "any",
    "all",
}

# Types named in `isinstance(param, ...)` that say what the parameter is.
ISINSTANCE_TYPES = {
    "int": int,
    "float": float,
    "str": str,
    "bytes": bytes,
    "list": list,
    "dict": dict,
    "tuple": tuple,
    "bool": bool,
}


def function_node(func):
    """The ast node of a function's definition (searched in its whole file), or None."""
    try:
        lines, first = inspect.getsourcelines(func)
        filename = inspect.getsourcefile(func)
    except (OSError, TypeError):
        return None
    last = first + len(lines) - 1
    tree = None
    if filename and os.path.exists(filename):
        try:
            with tokenize.open(filename) as f:
                tree = ast.parse(f.read())
        except (SyntaxError, ValueError, OSError):
            tree = None
    if tree is not None:
        best = None
        for node in ast.walk(tree):
            if (
                isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef))
                and node.name == func.__name__
                and first <= node.lineno <= last
                and (best is None or node.lineno < best.lineno)
            ):
                best = node
        if best is not None:
            return best
    try:
        module = ast.parse(textwrap.dedent("".join(lines)))
    except SyntaxError:
        return None
    for node in module.body:
        if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
            return node
    return None


def body_literals(node) -> list:
    """Constants of the function body (not its docstring, f-string pieces or annotations), in
    source order, with unary minus folded in."""
    if node is None:
        return []
    body = list(node.body)
    if (
        body
        and isinstance(body[0], ast.Expr)
        and isinstance(getattr(body[0], "value", None), ast.Constant)
        and isinstance(body[0].value.value, str)
    ):
        body = body[1:]
    skip: set = set()
    found = []

    def visit(n):
        if id(n) in skip:
            return
        if isinstance(n, ast.JoinedStr):
            return
        if isinstance(n, (ast.arg, ast.AnnAssign)) and getattr(n, "annotation", None) is not None:
            skip.add(id(n.annotation))
        if (
            isinstance(n, ast.UnaryOp)
            and isinstance(n.op, ast.USub)
            and isinstance(n.operand, ast.Constant)
        ):
            value = n.operand.value
            if type(value) in (int, float):
                found.append(-value)
                skip.add(id(n.operand))
        elif isinstance(n, ast.Constant):
            value = n.value
            if type(value) in (int, float, complex, bytes) or (
                type(value) is str and len(value) <= 100
            ):
                found.append(value)
                if type(value) is str:
                    found.extend(strftime_samples(value))
        elif (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and isinstance(n.func.value, ast.Name)
            and n.func.value.id == "re"
            and n.args
            and isinstance(n.args[0], ast.Constant)
            and isinstance(n.args[0].value, str)
        ):
            # A regular expression written in the body: strings it finds.
            samples.extend(regex_samples(n.args[0].value))
        for child in ast.iter_child_nodes(n):
            visit(child)

    samples: list = []
    for stmt in body:
        visit(stmt)
    # A date format among the defaults (`fmt="%Y-%m-%d"`): the dates it writes are inputs
    # that code parsing with it accepts, first among the strings.
    defaults = list(node.args.defaults) + [d for d in node.args.kw_defaults if d is not None]
    dates = [
        sample
        for d in defaults
        if isinstance(d, ast.Constant) and type(d.value) is str
        for sample in strftime_samples(d.value)
    ]
    return dedupe(dates + found + samples, limit=40)


# A strftime/strptime directive (`%Y`, `%d`, `%H`, ...).
STRFTIME_DIRECTIVE = re.compile(r"%[aAbBcdfHIjmMpSUwWxXyYzZ]")
STRFTIME_SAMPLE = datetime.datetime(2024, 1, 2, 3, 4, 5, 678901)


def strftime_samples(text: str) -> list:
    """For a string with date directives (a strftime/strptime format), the text a fixed
    date and time gives through it: code that parses with the format accepts it."""
    if len(text) > 100 or not STRFTIME_DIRECTIVE.search(text):
        return []
    try:
        return [STRFTIME_SAMPLE.strftime(text)]
    except (ValueError, TypeError):
        return []


def global_literals(node, globalns, limit: int = 30) -> list:
    """Scalars held by the module-level values a function body names (constant tables,
    registries): dict keys and values, elements, and attributes of objects, two levels deep.
    Keys of a lookup table are often the only inputs that reach a function's main path."""
    if node is None or not isinstance(globalns, dict):
        return []
    found: list = []
    seen_ids: set = set()

    def collect(value, depth):
        if len(found) >= limit or id(value) in seen_ids:
            return
        t = type(value)
        if t in (int, float, str, bytes) and not (t is str and len(value) > 100):
            found.append(value)
            return
        if (
            depth > 2
            or isinstance(
                value, (type, types.ModuleType, types.FunctionType, types.BuiltinFunctionType)
            )
            or callable(value)
            and not hasattr(value, "__dict__")
        ):
            return
        seen_ids.add(id(value))
        if isinstance(value, dict):
            for k, v in list(value.items())[:50]:
                collect(k, depth + 1)
                collect(v, depth + 1)
        elif isinstance(value, (list, tuple)):
            for v in value[:50]:
                collect(v, depth + 1)
        elif isinstance(value, (set, frozenset)):
            for v in sorted(value, key=repr)[:50]:
                collect(v, depth + 1)
        elif isinstance(value, enum.Enum):
            return
        elif isinstance(value, re.Pattern):
            for sample in regex_samples(value):
                collect(sample, depth + 1)
        elif not callable(value) and isinstance(getattr(value, "__dict__", None), dict):
            for v in list(vars(value).values())[:50]:
                collect(v, depth + 1)

    names = []
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Name)
            and isinstance(n.ctx, ast.Load)
            and n.id in globalns
            and n.id not in names
        ):
            names.append(n.id)
    for name in names:
        if not name.startswith("__"):
            collect(globalns[name], 0)
    return dedupe(found, limit=limit)


def usage_hints(node, name: str) -> list:
    """Types suggested by how an unannotated parameter is used: "callable" (it is called),
    str, dict, list, "seq", "unpacked" (its items are passed as arguments, `f(*p)`), int,
    float..., ("items", T) (a sequence of T: `isinstance(p[0], T)`), ("class", NAME) (another
    class it is tested against: `isinstance(p, Duration)`) (most telling first)."""
    if node is None:
        return []
    hints = []

    def is_param(n):
        return isinstance(n, ast.Name) and n.id == name

    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and is_param(n.value):
            if n.attr in STR_METHODS:
                hints.append(str)
            elif n.attr in DICT_METHODS:
                hints.append(dict)
            elif n.attr in LIST_METHODS:
                hints.append(list)
        elif isinstance(n, ast.Compare):
            operands = [n.left, *n.comparators]
            if any(is_param(o) for o in operands):
                for o in operands:
                    if isinstance(o, ast.Constant) and type(o.value) in (int, float, str, bytes):
                        hints.append(type(o.value))
        elif isinstance(n, ast.BinOp) and (is_param(n.left) or is_param(n.right)):
            other = n.right if is_param(n.left) else n.left
            if isinstance(other, ast.Constant) and type(other.value) in (int, float, str):
                if not (isinstance(n.op, ast.Mod) and type(other.value) is str):
                    hints.append(type(other.value))
        elif isinstance(n, ast.Call) and is_param(n.func):
            hints.append("callable")
        elif isinstance(n, ast.Call) and isinstance(n.func, ast.Name):
            if n.func.id in SEQUENCE_FUNCTIONS and any(is_param(a) for a in n.args):
                hints.append("seq")
            elif n.func.id == "range" and any(is_param(a) for a in n.args):
                hints.append(int)
            elif n.func.id == "isinstance" and len(n.args) == 2:
                names = n.args[1].elts if isinstance(n.args[1], ast.Tuple) else [n.args[1]]
                types_named = [
                    ISINSTANCE_TYPES[t.id]
                    for t in names
                    if isinstance(t, ast.Name) and t.id in ISINSTANCE_TYPES
                ]
                if is_param(n.args[0]):
                    hints += types_named
                    # Other classes (the repository's, the standard library's): by name, for
                    # the pools to resolve and construct (`isinstance(tdt, Duration)`).
                    hints += [
                        ("class", t.id)
                        for t in names
                        if isinstance(t, ast.Name) and t.id not in ISINSTANCE_TYPES
                    ]
                elif isinstance(n.args[0], ast.Subscript) and is_param(n.args[0].value):
                    # `isinstance(p[0], dict)`: p is a sequence of such values.
                    hints += [("items", t) for t in types_named]
        elif isinstance(n, (ast.For, ast.comprehension)) and is_param(n.iter):
            hints.append("seq")
        elif isinstance(n, ast.Subscript) and is_param(n.value):
            hints.append("seq")
        if isinstance(n, ast.Call) and any(
            isinstance(a, ast.Starred) and is_param(a.value) for a in n.args
        ):
            # `f(*p)`: p's items are arguments (`zip(*rows)`): often sequences themselves.
            hints.append("unpacked")
    ordered = []
    for h in hints:
        if h not in ordered:
            ordered.append(h)
    # Being called and methods of a specific type say more than comparisons or subscripts.
    ordered.sort(key=lambda h: 0 if h in ("callable", str, dict, list) or type(h) is tuple else 1)
    return ordered


# Attributes of builtin values: a parameter used through these says nothing about the project's
# own classes.
BUILTIN_ATTRIBUTES = frozenset(
    a
    for t in (str, bytes, int, float, complex, list, tuple, dict, set, frozenset, object)
    for a in dir(t)
)


def attribute_names(node, name: str, owner=None) -> list[str]:
    """The attributes the function reads or calls on parameter `name` (`G.nodes`,
    `G.add_edge(...)`) that no builtin value has, sorted: the interface the argument must
    offer. Empty when the parameter is assigned to in the body (another value by then). For a
    constructor (`owner`: its class's syntax tree), a parameter it keeps (`self.G = G`) counts
    the attributes the class's methods use on what it was kept as (`self.G.nodes`)."""
    if node is None:
        return []
    found, kept = set(), set()
    for n in ast.walk(node):
        if isinstance(n, ast.Attribute) and isinstance(n.value, ast.Name) and n.value.id == name:
            if n.attr not in BUILTIN_ATTRIBUTES:
                found.add(n.attr)
        elif isinstance(n, ast.Name) and n.id == name and isinstance(n.ctx, ast.Store):
            return []
        elif (
            isinstance(n, ast.Assign)
            and isinstance(n.value, ast.Name)
            and n.value.id == name
            and owner is not None
        ):
            kept |= {
                t.attr
                for t in n.targets
                if isinstance(t, ast.Attribute)
                and isinstance(t.value, ast.Name)
                and t.value.id == "self"
            }
    if kept:
        for n in ast.walk(owner):
            if (
                isinstance(n, ast.Attribute)
                and isinstance(n.value, ast.Attribute)
                and n.value.attr in kept
                and isinstance(n.value.value, ast.Name)
                and n.value.value.id == "self"
                and n.attr not in BUILTIN_ATTRIBUTES
            ):
                found.add(n.attr)
    return sorted(found)


def class_node(cls):
    """The syntax tree of a class's definition, or None."""
    try:
        source = textwrap.dedent(inspect.getsource(cls))
        tree = ast.parse(source)
    except (OSError, TypeError, SyntaxError, IndentationError):
        return None
    return next((n for n in tree.body if isinstance(n, ast.ClassDef)), None)


def compared_names(node, name: str) -> list[str]:
    """The names a parameter is compared with by identity, equality or membership (`p is
    MISSING`, `p == int`, `p in (str, bytes)`), in source order: the values its branches tell
    apart."""
    if node is None:
        return []
    found: list[str] = []
    ops = (ast.Is, ast.IsNot, ast.Eq, ast.NotEq, ast.In, ast.NotIn)
    for n in ast.walk(node):
        if not isinstance(n, ast.Compare) or not all(isinstance(op, ops) for op in n.ops):
            continue
        operands = [n.left, *n.comparators]
        if not any(isinstance(o, ast.Name) and o.id == name for o in operands):
            continue
        for o in operands:
            names = o.elts if isinstance(o, (ast.Tuple, ast.List, ast.Set)) else [o]
            for x in names:
                if isinstance(x, ast.Name) and x.id != name and x.id not in found:
                    found.append(x.id)
    return found


def keyword_names(node, name: str) -> list[str]:
    """The keys the body reads from the `**name` parameter, in source order:
    `name.get("k")`, `name.pop("k")`, `name.setdefault("k")`, `name["k"]`, `"k" in name`."""
    if node is None:
        return []
    found: list[str] = []

    def add(key):
        if isinstance(key, ast.Constant) and isinstance(key.value, str):
            # `class` is a name, but no keyword argument can be written with it.
            if (
                key.value.isidentifier()
                and not keyword.iskeyword(key.value)
                and key.value not in found
            ):
                found.append(key.value)

    def is_param(n):
        return isinstance(n, ast.Name) and n.id == name

    for n in ast.walk(node):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Attribute)
            and is_param(n.func.value)
            and n.func.attr in ("get", "pop", "setdefault")
            and n.args
        ):
            add(n.args[0])
        elif isinstance(n, ast.Subscript) and is_param(n.value):
            add(n.slice)
        elif (
            isinstance(n, ast.Compare)
            and len(n.ops) == 1
            and isinstance(n.ops[0], (ast.In, ast.NotIn))
            and is_param(n.comparators[0])
        ):
            add(n.left)
    return found


def call_arity(node, name: str) -> int | None:
    """How many positional arguments the function body passes when it calls the parameter
    `name` (the first such call without `*args`), or None when it never does so."""
    if node is None:
        return None
    for n in ast.walk(node):
        if (
            isinstance(n, ast.Call)
            and isinstance(n.func, ast.Name)
            and n.func.id == name
            and not any(isinstance(a, ast.Starred) for a in n.args)
            and not any(k.arg is None for k in n.keywords)
        ):
            return len(n.args)
    return None


def docstring_calls(docs, target_names, class_name, reference):
    """Calls found in doctest examples: a list of (ctor_call or None, call), where a call is
    (args, kwargs) of specs, with UNKNOWN for arguments that could not be converted; and a list of
    constructor calls of `class_name`."""
    calls, ctors = [], []
    for doc in docs:
        if not doc:
            continue
        session_vars: dict = {}
        # Specs of the session's names assigned a rebuildable value (`G = nx.path_graph(4)`).
        values: dict = {}
        for source in doctest_sources(doc):
            try:
                tree = ast.parse(source)
            except SyntaxError:
                continue
            for stmt in tree.body:
                if (
                    isinstance(stmt, ast.Assign)
                    and len(stmt.targets) == 1
                    and isinstance(stmt.targets[0], ast.Name)
                ):
                    # `>>> G = nx.path_graph(4)`: a value later calls may pass as `G`.
                    try:
                        values[stmt.targets[0].id] = spec_from_node(stmt.value, reference)
                    except ValueError:
                        values.pop(stmt.targets[0].id, None)
                for node in ast.walk(stmt):
                    if not isinstance(node, ast.Call):
                        continue
                    func = node.func
                    if class_name and isinstance(func, ast.Name) and func.id == class_name:
                        ctor = _call_specs(node, reference)
                        if ctor is not None:
                            ctors.append(ctor)
                            if isinstance(stmt, ast.Assign) and stmt.value is node:
                                for t in stmt.targets:
                                    if isinstance(t, ast.Name):
                                        session_vars[t.id] = ctor
                        continue
                    name = (
                        func.id
                        if isinstance(func, ast.Name)
                        else func.attr
                        if isinstance(func, ast.Attribute)
                        else None
                    )
                    if name not in target_names:
                        continue
                    call = _call_specs(node, reference, values)
                    if call is None:
                        continue
                    ctor = None
                    if class_name and isinstance(func, ast.Attribute):
                        receiver = func.value
                        if (
                            isinstance(receiver, ast.Call)
                            and isinstance(receiver.func, ast.Name)
                            and receiver.func.id == class_name
                        ):
                            ctor = _call_specs(receiver, reference)
                        elif isinstance(receiver, ast.Name):
                            ctor = session_vars.get(receiver.id)
                            if ctor is None and receiver.id in values:
                                # `md = create_markdown()` then `md.render(...)`: the instance a
                                # factory of the project built (the explorer checks its class).
                                ctor = receiver_construction(values[receiver.id])
                        elif isinstance(receiver, ast.Call):
                            # `Parser.from_text("...").parse()`: an alternate constructor's.
                            try:
                                ctor = receiver_construction(spec_from_node(receiver, reference))
                            except ValueError:
                                ctor = None
                    calls.append((ctor, call))
    return calls, ctors


# Examples run as programs: at most this many per function, each at most this long.
MAX_EXAMPLES = 4
MAX_EXAMPLE_CHARS = 3000


def example_programs(docs, name: str, method: bool) -> list:
    """The code of a docstring's examples that use `name` (a method's as `.name(`), as whole
    programs: a `>>>` session (its statements in order), a reST literal block (the indented
    lines after a line ending in `::`, as pyparsing writes `Example::`) and a Markdown code
    fence. A block that does not parse as Python (the output shown after `prints::`), that
    imports anything, or that is only calls with literal arguments (inputs already, found by
    docstring_calls), is left out."""
    use = re.compile(r"\." + re.escape(name) + r"\s*\(" if method else r"\b" + re.escape(name) + r"\s*\(")
    found = []
    for doc in docs:
        if not doc:
            continue
        session = "\n".join(doctest_sources(doc))
        for block in [session] + literal_blocks(doc):
            if len(found) >= MAX_EXAMPLES:
                return found
            block = block.strip("\n")
            if not block or len(block) > MAX_EXAMPLE_CHARS or not use.search(block):
                continue
            try:
                tree = ast.parse(block)
            except (SyntaxError, ValueError):
                continue
            if any(isinstance(n, (ast.Import, ast.ImportFrom)) for n in ast.walk(tree)):
                continue
            if all(_literal_call(stmt) for stmt in tree.body):
                continue  # calls with literal arguments only: inputs already (docstring_calls)
            if block not in found:
                found.append(block)
    return found


def _literal_call(stmt) -> bool:
    """Whether a statement is a call whose arguments are all literals (`sign(-4)`)."""
    if not isinstance(stmt, ast.Expr) or not isinstance(stmt.value, ast.Call):
        return False
    call = stmt.value
    try:
        for arg in list(call.args) + [k.value for k in call.keywords]:
            ast.literal_eval(arg)
    except (ValueError, TypeError, SyntaxError, MemoryError, RecursionError):
        return False
    return True


def literal_blocks(doc: str) -> list:
    """The code blocks of a docstring that are not doctests: the indented lines after a line
    ending in `::` (reST), and the lines inside a ``` fence (Markdown), each dedented."""
    lines = doc.splitlines()
    blocks = []
    i = 0
    while i < len(lines):
        line = lines[i]
        stripped = line.strip()
        if stripped.startswith("```"):
            body = []
            i += 1
            while i < len(lines) and not lines[i].strip().startswith("```"):
                body.append(lines[i])
                i += 1
            blocks.append(textwrap.dedent("\n".join(body)))
        elif stripped.endswith("::") and not stripped.startswith(">>>"):
            indent = len(line) - len(line.lstrip())
            body = []
            j = i + 1
            while j < len(lines) and (
                not lines[j].strip() or len(lines[j]) - len(lines[j].lstrip()) > indent
            ):
                body.append(lines[j])
                j += 1
            if any(b.strip() for b in body):
                blocks.append(textwrap.dedent("\n".join(body)))
            i = j - 1
        i += 1
    return blocks


def doctest_sources(doc: str):
    """The source of each `>>>` example (with its `...` continuation lines)."""
    current = None
    for raw in doc.splitlines():
        line = raw.strip()
        if line.startswith(">>>"):
            if current is not None:
                yield "\n".join(current)
            current = [line[4:] if len(line) > 3 else ""]
        elif line.startswith("...") and current is not None:
            current.append(line[4:] if len(line) > 3 else "")
        else:
            if current is not None:
                yield "\n".join(current)
            current = None
    if current is not None:
        yield "\n".join(current)


def _call_specs(node: ast.Call, reference, values=None):
    """(args, kwargs) specs of a call's arguments; a name the session assigned a rebuildable
    value (`values`) stands for it."""
    if any(isinstance(a, ast.Starred) for a in node.args) or any(
        k.arg is None for k in node.keywords
    ):
        return None

    def convert(expr):
        if isinstance(expr, ast.Name) and values and expr.id in values:
            return values[expr.id]
        try:
            return spec_from_node(expr, reference)
        except ValueError:
            return UNKNOWN

    args = [convert(a) for a in node.args]
    kwargs = {k.arg: convert(k.value) for k in node.keywords}
    return (args, kwargs)


def type_hints(func) -> dict:
    """A function's annotations, evaluated when possible (else as written)."""
    try:
        return typing.get_type_hints(func)
    except Exception:
        return dict(getattr(func, "__annotations__", None) or {})


def call_site_specs(site: dict, reference):
    """(args, kwargs) specs from a call site's argument source texts; unconvertible arguments
    are UNKNOWN (they take base values)."""

    def convert(text):
        try:
            return spec_from_node(ast.parse(str(text).strip(), mode="eval").body, reference)
        except (SyntaxError, ValueError, RecursionError, MemoryError):
            return UNKNOWN

    try:
        args = [convert(t) for t in site.get("args") or []]
        kwargs = {str(k): convert(t) for k, t in (site.get("kwargs") or {}).items()}
    except AttributeError:
        return None
    return (args, kwargs)


def regex_samples(pattern, count: int = 3) -> list:
    """Up to `count` strings in which a regular expression (compiled or text) finds a match
    (`regexgen.examples`)."""
    return regexgen.examples(pattern, count=count)
