#!/usr/bin/env python3
"""Validates many harnesses in one process: a warm worker.

    python r2e_batch.py REQUEST.json OUT.json

REQUEST.json: {"jobs": [<r2e_runner request>, ...], "runs": 2, "first_run": 0, "timeout":
seconds per run, "memory_mib": each run's memory limit (optional)}.
The worker imports coverage and every target module once (not for jobs in candidate mode: their
processes must never hold the original), then runs each harness `runs` times, each time in a
child forked from this warm parent, numbered from `first_run`: run 0 in the tests' natural order
(and with coverage, when asked), run n shuffled with seed n. Nothing of the function under test has run in
the parent, so each child is a fresh process as far as the harness is concerned; the imports are
paid once. A child that runs past `timeout` seconds of CPU time (or WALL_FACTOR times as long of
wall-clock time) is killed and reported as {"status": "timeout"}.
Each child works in a folder of its own, with its own copies of its harness and candidate (read by
the parent before any child ran): what one run deletes or writes in its working folder reaches no
other run.

OUT.json: {"results": [[<r2e_runner result>, ...runs], ...jobs]}.

    python r2e_batch.py --serve IN.fifo OUT.fifo IDLE_SECONDS

A worker that lives across requests (`r2e serve`'s checks): it reads lines `REQUEST.json
OUT.json` from IN.fifo, answers each as above, and writes the line `done` to OUT.fifo (and
`ready` once, when it has started and imported what every run needs). Each
request is answered as a worker of its own would answer it (its runs' folders are numbered from
0 again). It stops at the end of IN.fifo, or after IDLE_SECONDS without a request.
"""

from __future__ import annotations

import importlib
import json
import os
import select
import signal
import sys
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import r2e_runner  # noqa: E402


def _warm(jobs: list[dict]):
    """Imports what every child needs and prepares the coverage measurer; failures are left for
    the children to report. Returns the measurer, or None."""
    # What every run imports: the runner's and the equivalence helper's own modules.
    import unittest  # noqa: F401

    import r2e_equiv

    r2e_equiv.use_project_layer()
    prepared = None
    sources = sorted({r2e_runner.resolve(job, "source_file") for job in jobs if job.get("coverage")} - {None})
    if sources:
        try:
            prepared = r2e_runner.Coverage(sources)
        except BaseException:  # noqa: BLE001 - each run sets coverage up itself, or reports why not
            prepared = None
    import r2e_snapshot  # noqa: F401

    for job in jobs:
        # A candidate's process must never hold the original: nothing of the repository is
        # imported ahead of its child.
        if job.get("mode") == "candidate":
            continue
        root = os.path.normpath(os.path.join(HERE, job["repo_root"]))
        # The job's import root comes first, as in a runner of its own, even when an earlier
        # job put it last (as one of its extra roots): behind the environment's packages, a
        # copy of the project that a dependency installed would be imported in its place.
        if root in sys.path:
            sys.path.remove(root)
        sys.path.insert(0, root)
        for extra in job.get("extra_roots") or []:
            extra = os.path.normpath(os.path.join(HERE, extra))
            if extra not in sys.path:
                sys.path.append(extra)
        try:
            importlib.import_module(job["module"])
        except BaseException:  # noqa: BLE001 - the child reports it
            pass
    return prepared


def _limit_memory(memory_mib) -> None:
    """Each child's own memory limit, a little under the job's (which the parent shares): a child
    that eats memory meets MemoryError, and is not killed for it in place of its siblings."""
    if not memory_mib:
        return
    import resource

    limit = int(memory_mib) * 1024 * 1024 * 9 // 10
    try:
        resource.setrlimit(resource.RLIMIT_DATA, (limit, limit))
    except (ValueError, OSError):
        pass


# A run's limit is `timeout` seconds of its CPU time (RLIMIT_CPU: what the harness did, whatever
# else the machine runs), with a wall-clock backstop WALL_FACTOR times as long (plus
# WALL_SLACK seconds) for a run that waits instead of computing: a machine up to WALL_FACTOR
# times oversubscribed times a run out where an idle one does.
WALL_FACTOR = 3.0
WALL_SLACK = 5.0


def _limit_cpu(timeout: float) -> None:
    """The child's CPU-time limit: SIGXCPU at `timeout` seconds (rounded up), SIGKILL a second
    later."""
    import math
    import resource

    soft = max(1, math.ceil(timeout))
    try:
        resource.setrlimit(resource.RLIMIT_CPU, (soft, soft + 1))
    except (ValueError, OSError):
        pass


_RUNS = iter(range(1 << 62))

FILES = ("harness_file", "candidate_file")


def _read_files(jobs: list[dict]) -> dict:
    """The text of every job's harness and candidate, by path, read before any child runs."""
    texts = {}
    for job in jobs:
        for key in FILES:
            path = r2e_runner.resolve(job, key)
            if path and path not in texts:
                try:
                    with open(path, encoding="utf-8") as f:
                        texts[path] = f.read()
                except OSError:
                    pass
    return texts


def _own_folder(job: dict, texts: dict) -> tuple[dict, str]:
    """A fresh working folder for one run, with copies of the job's files; the job pointing at
    them."""
    work = os.path.join(HERE, f"run-{next(_RUNS)}")
    os.makedirs(work, exist_ok=True)
    job = dict(job)
    for key in FILES:
        path = r2e_runner.resolve(job, key)
        if path in texts:
            copy = os.path.join(work, os.path.basename(path))
            with open(copy, "w", encoding="utf-8") as f:
                f.write(texts[path])
            job[key] = copy
    return job, work


def _run_in_child(job: dict, timeout: float, prepared=None, memory_mib=None, texts=None) -> dict:
    work = None
    if texts is not None:
        try:
            job, work = _own_folder(job, texts)
        except OSError:
            work = None
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        os.close(read_end)
        _limit_memory(memory_mib)
        _limit_cpu(timeout)
        try:
            if work is not None:
                os.chdir(work)
            result = r2e_runner.run(job, prepared)
        except BaseException as exc:  # noqa: BLE001
            result = r2e_runner.empty_result("error", f"runner crashed: {type(exc).__name__}: {exc}")
        data = json.dumps(result).encode()
        with os.fdopen(write_end, "wb") as out:
            out.write(data)
        os._exit(0)
    os.close(write_end)
    chunks = []
    deadline = time.monotonic() + timeout * WALL_FACTOR + WALL_SLACK
    timed_out = False
    with os.fdopen(read_end, "rb") as pipe:
        while True:
            left = deadline - time.monotonic()
            if left <= 0:
                timed_out = True
                break
            ready, _, _ = select.select([pipe], [], [], left)
            if not ready:
                continue
            chunk = os.read(pipe.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status, usage = os.wait4(pid, 0)
    # Past its CPU limit: SIGXCPU, or the SIGKILL a second later for a run that ignored it.
    over_cpu = os.WIFSIGNALED(status) and (
        os.WTERMSIG(status) == signal.SIGXCPU
        or (os.WTERMSIG(status) == signal.SIGKILL and usage.ru_utime + usage.ru_stime >= timeout)
    )
    if work is not None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    if timed_out or over_cpu:
        return r2e_runner.empty_result("timeout", f"the harness ran past {timeout:.0f}s")
    try:
        return json.loads(b"".join(chunks))
    except ValueError:
        how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
        return r2e_runner.empty_result("crash", f"the harness process died ({how})")


def answer(request_path: str, out_path: str) -> None:
    """Answers one request file into `out_path`."""
    global _RUNS
    _RUNS = iter(range(1 << 62))
    with open(request_path) as f:
        request = json.load(f)
    jobs = request["jobs"]
    prepared = _warm(jobs)
    timeout = float(request.get("timeout", 60))
    runs = int(request.get("runs", 2))
    first = int(request.get("first_run", 0))
    memory_mib = request.get("memory_mib")
    texts = _read_files(jobs)
    # Coverage is measured in the first run only; the later runs check that the tests come out
    # the same, and cost a third as much without the tracer.
    results = [
        [
            _run_in_child(
                dict(job, order_seed=n) if n == 0 else dict(job, coverage=False, order_seed=n),
                timeout,
                prepared,
                memory_mib,
                texts,
            )
            for n in range(first, first + runs)
        ]
        for job in jobs
    ]
    with open(out_path, "w") as f:
        json.dump({"results": results}, f)


def serve(in_fifo: str, out_fifo: str, idle: float) -> int:
    """Answers the requests named on `in_fifo`, one line each, until its end or `idle` seconds
    without one."""
    inp = os.open(in_fifo, os.O_RDONLY)
    out = os.open(out_fifo, os.O_WRONLY)
    _warm([])
    os.write(out, b"ready\n")
    pending = b""
    while True:
        while b"\n" not in pending:
            ready, _, _ = select.select([inp], [], [], idle)
            if not ready:
                return 0
            chunk = os.read(inp, 1 << 16)
            if not chunk:
                return 0
            pending += chunk
        line, pending = pending.split(b"\n", 1)
        request_path, out_path = line.decode().split(" ", 1)
        answer(request_path, out_path)
        os.write(out, b"done\n")


def main(argv: list[str]) -> int:
    if argv[1] == "--serve":
        return serve(argv[2], argv[3], float(argv[4]))
    answer(argv[1], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
