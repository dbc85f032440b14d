"""Writing the harness: a `unittest` module with one test per chosen input, each comparing the
candidate with the reference through r2e_equiv.check_function / check_method.

An entry (search.Entry) gives `call` (args, kwargs specs; or a docstring's example, run as a
program, with its `source`), `ctor_call` (a method's construction: constructor args and kwargs
specs and the set-up calls made on the instance, see specs.construction_parts; or None) and
`then` (the target returned a function, which is called on THEN_CALLS too).
"""

from __future__ import annotations

import keyword
import re

from .specs import PACKAGE_NAME, THEN_CALLS, construction_parts, render

# Names of the harness itself, which the target's local name must not take.
RESERVED = {
    "unittest",
    "r2e_equiv",
    "candidate",
    "reference",
    "args",
    "kwargs",
    "ctor_args",
    "ctor_kwargs",
    "self",
    "package",
}


def local_name(name: str, fallback: str) -> str:
    """`name` as the harness's name of the target, or `fallback` when it would clash."""
    if (
        not name.isidentifier()
        or keyword.iskeyword(name)
        or name in RESERVED
        or name.startswith("Test")
    ):
        return fallback
    return name


def harness_class_name(qualname: str) -> str:
    """`TestSlugify` for `slugify`, `TestIntervalOverlaps` for `Interval.overlaps`."""
    name = "Test" + "".join(p[:1].upper() + p[1:] for p in re.split(r"[_.]+", qualname) if p)
    return name if name.isidentifier() else "TestTarget"


def render_harness(
    module_name: str,
    qualname: str,
    method: bool,
    chosen: list,
    class_qualname: str | None = None,
    then_calls=THEN_CALLS,
) -> str:
    """The harness's source for the entries `chosen` of `module_name.qualname` (a method of a
    class when `method`). `class_qualname` is the class whose instances call the method when it
    is not the method's own (a concrete subclass, in the same module, of an abstract class that
    inherits the method unchanged). `then_calls`: the calls made of a function the target
    returns."""
    parts = qualname.split(".")
    lines = [
        f'"""Equivalence tests for {module_name}.{qualname} (written by r2e_explore)."""',
        "",
        "import unittest",
        "",
        "import r2e_equiv",
        "",
        "candidate, reference = r2e_equiv.harness_modules()",
    ]
    if not method:
        local = local_name(parts[-1], "target")
        lines += [
            f"{local} = candidate.{qualname}",
            f"reference_{local} = reference.{qualname}",
        ]
    else:
        class_qualname = class_qualname or ".".join(parts[:-1])
        local = local_name(class_qualname.split(".")[-1], "TargetClass")
        lines += [
            f"{local} = candidate.{class_qualname}",
            f"reference_{local} = reference.{class_qualname}",
        ]
    # Entries of a docstring's example have a `call` with its `source` (search.ExampleCall).
    examples = [e.call.source for e in chosen if hasattr(e.call, "source")]
    calls = [e for e in chosen if not hasattr(e.call, "source")]
    lines += ["", "", f"class {harness_class_name(qualname)}(unittest.TestCase):"]
    for i, e in enumerate(calls):
        lines.append(f"    def test_{i}(self):")
        if not method:
            lines += function_test_body(e, local, then_calls)
        else:
            lines += method_test_body(e, local, parts[-1], then_calls)
        lines.append("")
    if examples:
        # The docstring's examples run after the calls' tests, in this order (r2e_run_last):
        # what they leave behind (a shared default they use) must not reach those.
        lines += ["", f"class {harness_class_name(qualname)}Examples(unittest.TestCase):"]
        lines += ["    r2e_run_last = True", ""]
        for i, source in enumerate(examples):
            lines.append(f"    def test_{i}(self):")
            lines += example_test_body(source)
            lines.append("")
    lines += ["", 'if __name__ == "__main__":', "    unittest.main()", ""]
    if any(f"{PACKAGE_NAME}." in line for line in lines):
        # Values built by the package's own factories (`reference_package.path_graph(4)`).
        at = lines.index("candidate, reference = r2e_equiv.harness_modules()") + 1
        lines.insert(at, f"import {module_name.partition('.')[0]} as {PACKAGE_NAME}")
    return "\n".join(lines)


def example_test_body(source: str) -> list[str]:
    """The lines of a test running a docstring's example on both modules (check_example)."""
    lines = ["        example = \"\\n\".join(", "            ["]
    lines += [f"                {line!r}," for line in source.splitlines()]
    lines += [
        "            ]",
        "        )",
        "        r2e_equiv.check_example(self, candidate, reference, example)",
    ]
    return lines


def function_test_body(e, local: str, then_calls=THEN_CALLS) -> list[str]:
    """The lines of a test of a function named `local` in the harness."""
    args, kwargs = e.call
    lines = [
        f"        args = {render(tuple(args))}",
        f"        kwargs = {render(dict(kwargs))}",
    ]
    if e.then:
        # The target returned a function: it is called too, on each of these.
        lines += [
            f"        then = {render(then_calls)}",
            f"        r2e_equiv.check_function(self, {local}, reference_{local}, args, kwargs, then)",
        ]
    else:
        lines.append(
            f"        r2e_equiv.check_function(self, {local}, reference_{local}, args, kwargs)"
        )
    return lines


def method_test_body(e, local: str, method_name: str, then_calls=THEN_CALLS) -> list[str]:
    """The lines of a test of the method `method_name` of a class named `local` in the
    harness."""
    args, kwargs = e.call
    ctor_args, ctor_kwargs, setup, receiver = construction_parts(e.ctor_call)
    lines = [
        f"        ctor_args = {render(tuple(ctor_args))}",
        f"        ctor_kwargs = {render(dict(ctor_kwargs))}",
    ]
    if receiver is not None:
        # The instance the method is called on (one the project's tests used, or a factory's).
        lines.append(f"        receiver = {render(receiver)}")
    if setup:
        # Calls made on the instance before the method (a mapping filled with items).
        lines.append(f"        setup = {render(tuple(setup))}")
    lines += [
        f"        args = {render(tuple(args))}",
        f"        kwargs = {render(dict(kwargs))}",
    ]
    call = f"r2e_equiv.check_method(self, {local}, reference_{local}, ctor_args, ctor_kwargs, {method_name!r}, args, kwargs"
    if e.then:
        # The method returned a function: it is called too, on each of these.
        lines.append(f"        then = {render(then_calls)}")
        call += ", then"
    if setup:
        call += ", setup=setup"
    if receiver is not None:
        call += ", receiver=receiver"
    lines.append(f"        {call})")
    return lines
