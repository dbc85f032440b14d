"""The original text of an instance's function, as a candidate for `r2e check`.

An instance (dataset.jsonl) names its file (`path`, relative to its repository) and `qualname`;
functions.jsonl gives the `def` line (`start_line`) and the last line (`end_line`). The text is
the whole lines from the first decorator to `end_line`, dedented the way r2e's splice dedents a
candidate (the smallest indentation of the non-blank lines is removed from every line), so a
method's `def` stands at column 0. `r2e check` re-indents it in place (src/stages/splice.rs).
"""

import ast
import functools
import os


def dedent(text):
    """r2e's `python::dedent`: strip the smallest indentation of the non-blank lines."""
    lines = text.splitlines()
    margins = [len(l) - len(l.lstrip()) for l in lines if l.strip()]
    margin = min(margins) if margins else 0
    out = [l[margin:] if len(l) >= margin else l.lstrip() for l in lines]
    return "\n".join(out) + "\n"


class Original:
    """One instance's function: where it is and its text."""

    def __init__(self, instance, function, root):
        self.id = instance["id"]
        self.repo = instance["repo"]
        self.path = instance["path"]
        self.qualname = instance["qualname"]
        self.root = root
        self.file = os.path.join(root, self.path)
        self.file_text, module = parsed(self.file)
        lines = self.file_text.splitlines(keepends=True)
        def_line, end_line = function["start_line"], function["end_line"]
        node = find_def(module, self.qualname, def_line)
        if node is None:
            raise LookupError(f"{self.id}: no def of {self.qualname} at line {def_line} in {self.file}")
        first = min([def_line] + [d.lineno for d in node.decorator_list])
        self.first_line, self.end_line = first, end_line
        chunk = "".join(lines[first - 1 : end_line])
        self.indent = chunk[: len(chunk) - len(chunk.lstrip(" \t"))]
        self.text = dedent(chunk)
        self.tree = ast.parse(self.text)
        self.tree._r2e_text = self.text  # mutants.fresh re-parses it
        fn = self.tree.body[0]
        assert isinstance(fn, (ast.FunctionDef, ast.AsyncFunctionDef)), self.id


@functools.lru_cache(maxsize=64)
def parsed(path):
    """A file's text and its AST (read once)."""
    with open(path, encoding="utf-8") as f:
        text = f.read()
    return text, ast.parse(text)


def find_def(module, qualname, def_line):
    """The FunctionDef of `qualname` (`f` or `Class.f`) whose `def` is on `def_line`."""
    parts = qualname.split(".")
    scopes = [module.body]
    if len(parts) == 2:
        scopes = [n.body for n in module.body if isinstance(n, ast.ClassDef) and n.name == parts[0]]
    for body in scopes:
        for n in body:
            if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)) and n.name == parts[-1] and n.lineno == def_line:
                return n
    return None
