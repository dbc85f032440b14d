"""Writes a generated Python repository with N candidate functions, for bench/slicing.sh.

    python3 bench/gen_repo.py DIR N [--per-file 100] [--seed 0]

The repository is a package `gen` of N / per-file modules. Each function has a docstring, two
parameters, two statements and a `return` of a value (so every default filter keeps it), and
calls two definitions of the repository: the previous function of its own module (chains of
10, as helpers within a module often are) and a random function of the previous module of its group of
8 modules, imported at module level. A group's first module calls no other module; a chain's
first function there reads a module-level constant. The shape
is fixed by N, per-file and the seed, so two runs write the same bytes.
"""

from __future__ import annotations

import os
import random
import sys


GROUP = 8
CHAIN = 10


def main() -> None:
    args = sys.argv[1:]
    per_file, seed = 100, 0
    if "--per-file" in args:
        i = args.index("--per-file")
        per_file = int(args[i + 1])
        del args[i : i + 2]
    if "--seed" in args:
        i = args.index("--seed")
        seed = int(args[i + 1])
        del args[i : i + 2]
    root, n = args[0], int(args[1])
    rng = random.Random(seed)
    modules = max(1, (n + per_file - 1) // per_file)
    pkg = os.path.join(root, "gen")
    os.makedirs(pkg, exist_ok=True)
    with open(os.path.join(pkg, "__init__.py"), "w") as f:
        f.write('"""A generated package."""\n')
    written = 0
    for m in range(modules):
        count = min(per_file, n - written)
        # The previous module of its group of 8, so that closures reach across modules while
        # their size stays bounded (at most 8 modules' worth) as N grows: the work of slicing
        # grows with N, and the time per closure entry should not.
        other = m - 1 if m % GROUP else None
        lines = ['"""Module %d of a generated repository."""\n' % m]
        if other is not None:
            lines.append(f"from gen import m{other}\n")
        lines.append(f"\nSCALE_{m} = {m + 1}\n")
        for i in range(count):
            calls = []
            if i % CHAIN:
                calls.append(f"f{m}_{i - 1}(x, y)")
            if other is not None:
                j = rng.randrange(per_file)
                calls.append(f"m{other}.f{other}_{j}(y, x)")
            if not calls:
                calls.append(f"SCALE_{m}")
            lines.append(
                f"\n\ndef f{m}_{i}(x, y):\n"
                f'    """Combine x and y, step {i} of module {m}."""\n'
                f"    z = x * {i + 1} + y\n"
                f"    return z + {' + '.join(calls)}\n"
            )
        with open(os.path.join(pkg, f"m{m}.py"), "w") as f:
            f.write("".join(lines))
        written += count


if __name__ == "__main__":
    main()
