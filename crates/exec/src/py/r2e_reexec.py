"""The re-execution of an embedded script under PYTHONHASHSEED=0, so that hash-order-dependent
code (a test parametrized over a set of strings, set iteration in the code under test) runs, and
is recorded, in the same order on every run: the explorer (`r2e_explore.py`), the capture
(`r2e_capture.py`) and a validation's first record (`r2e_batch.py`) start with `ensure_hash_seed`.

The Rust side runs them with `-I`, which ignores PYTHON* environment variables: the re-executed
command replaces `-I` by its other parts (`-s -P`) and drops PYTHON* variables itself, so it
stays as isolated while honouring the seed. Tried once (a marker variable, one per script).
"""

from __future__ import annotations

import contextlib
import os
import sys


def ensure_hash_seed(marker: str) -> None:
    """Re-executes the interpreter with PYTHONHASHSEED=0, unless hashes are already seeded or
    the environment variable `marker` says it was tried."""
    if sys.flags.hash_randomization == 0 or os.environ.get(marker) or not sys.executable:
        return
    argv = reexec_argv()
    if argv is None:
        return
    env = dict(os.environ)
    if sys.flags.ignore_environment:
        env = {k: v for k, v in env.items() if not k.startswith("PYTHON")}
    env.update({"PYTHONHASHSEED": "0", marker: "1"})
    with contextlib.suppress(OSError):
        sys.stdout.flush()
        sys.stderr.flush()
        os.execve(sys.executable, argv, env)


def reexec_argv() -> list[str] | None:
    """The original command line with -I/-E taken out of the interpreter options."""
    orig = list(getattr(sys, "orig_argv", None) or [])
    script = sys.argv[0] if sys.argv else None
    if not orig or not script or script not in orig[1:]:
        return None
    index = orig.index(script, 1)
    options, rest = orig[1:index], orig[index:]
    kept, isolated = [], False
    i = 0
    while i < len(options):
        option = options[i]
        if option in ("-X", "-W", "-c", "-m"):
            kept += options[i : i + 2]
            i += 2
            continue
        if option.startswith(("-X", "-W")) or option.startswith("--") or not option.startswith("-"):
            kept.append(option)
        else:
            flags = option[1:]
            isolated = isolated or "I" in flags
            flags = flags.replace("I", "").replace("E", "")
            if flags:
                kept.append("-" + flags)
        i += 1
    if isolated:
        kept += ["-s", "-P"]
    return [sys.executable, *kept, *rest]


def seed_randomness(seed=0) -> None:
    """Makes the randomness the code under test draws reproducible in this process: `random`'s
    global generator seeded, and `os.urandom` (which `uuid.uuid4` reads) and `random`'s
    `SystemRandom` (which `secrets` uses) served from a generator of their own, seeded too. A
    test that passes `uuid.uuid4()` to a function then passes the same value on every build,
    and what the explorer keeps of a function that draws is the same on every build. Draws still
    differ one from the next, so a function that draws is still seen to be nondeterministic.
    Only the explorer and the capture call it: the validation's and the candidates' runs keep the
    machine's randomness."""
    import random

    random.seed(seed)
    stream = random.Random(f"r2e-urandom:{seed}")

    def urandom(size: int) -> bytes:
        if size < 0:
            raise ValueError("negative argument not allowed")
        # (`randbytes` is Python 3.9's; this works back to 3.6.)
        return stream.getrandbits(size * 8).to_bytes(size, "little") if size else b""

    os.urandom = urandom
    random._urandom = urandom
