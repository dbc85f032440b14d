"""Test support: does a mutant behave like the original on a harness's own inputs?

Independent of r2e_equiv: it reads the `args`/`kwargs` literals of each test of a function
harness with `ast`, calls the original and the mutant module's function on deep copies, and
compares `repr` of the outcome (return value, or exception type: a message is wording, as in
r2e's default verdict policy, docs/harness.md) and of the arguments afterwards. Prints `differs`
or `same`.

usage: same_on_inputs.py IMPORT_ROOT MODULE NAME HARNESS MUTANT_FILE
"""
import ast
import copy
import importlib
import importlib.util
import sys


def outcome(fn, args, kwargs):
    args, kwargs = copy.deepcopy(args), copy.deepcopy(kwargs)
    try:
        value = fn(*args, **kwargs)
        if hasattr(value, "__next__"):
            value = list(value)
        result = ("return", repr(value))
    except Exception as e:  # noqa: BLE001
        result = ("raise", type(e).__name__)
    return result, repr(args), repr(kwargs)


def main():
    root, module, name, harness, mutant = sys.argv[1:6]
    sys.path.insert(0, root)
    original = importlib.import_module(module)
    spec = importlib.util.spec_from_file_location(module, mutant)
    mutated = importlib.util.module_from_spec(spec)
    mutated.__package__ = original.__package__
    spec.loader.exec_module(mutated)
    tree = ast.parse(open(harness).read())
    env = {"reference": original, "candidate": original}
    for node in ast.walk(tree):
        if isinstance(node, ast.FunctionDef) and node.name.startswith("test_"):
            values = {}
            for stmt in node.body:
                if isinstance(stmt, ast.Assign) and isinstance(stmt.targets[0], ast.Name):
                    values[stmt.targets[0].id] = eval(compile(ast.Expression(stmt.value), harness, "eval"), env)
            if "args" not in values or "ctor_args" in values:
                continue
            a = outcome(getattr(original, name), values["args"], values.get("kwargs", {}))
            b = outcome(getattr(mutated, name), values["args"], values.get("kwargs", {}))
            if a != b:
                print("differs", node.name, a, b)
                return
    print("same")


main()
