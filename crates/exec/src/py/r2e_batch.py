#!/usr/bin/env python3
"""Validates many harnesses in one process: a warm worker.

    python r2e_batch.py REQUEST.json OUT.json

REQUEST.json: {"jobs": [<r2e_runner request>, ...], "runs": 2, "first_run": 0, "timeout":
seconds per run, "memory_mib": each run's memory limit (optional)}.
The worker imports coverage and every target module once (not for jobs in candidate mode: their
processes must never hold the original), then runs each harness `runs` times, each time in a
child forked from this warm parent, numbered from `first_run`: run 0 in the tests' natural order
(and with coverage, when asked; a worker of record jobs from run 0 re-executes itself under
PYTHONHASHSEED=0 first, `r2e_reexec.py`, so that what is recorded is the same on every build),
run n shuffled with seed n. Nothing of the function under test has run in
the parent, so each child is a fresh process as far as the harness is concerned; the imports are
paid once. A child that runs past `timeout` seconds (r2e_limit's one rule: CPU time or
idle-machine time, whichever is larger, of the child and every process it started) is killed with
them and reported as {"status": "timeout"}; one that answers kills what it started first.
Each child works in a folder of its own, with its own copies of its harness and candidate (read by
the parent before any child ran): what one run deletes or writes in its working folder reaches no
other run.

A job may name files its child must not see ("hide": the module's own file, for a candidate):
the child makes a mount namespace of its own (in a user namespace of its own) where each shows an
empty, read-only file, then enters a further user namespace that has no power over those mounts,
so that its code cannot undo them. The parent is not dumpable, so that no child reads the files
through `/proc/<parent>/root`. One worker thus serves the candidates of every module of an
environment. A child that cannot hide them runs nothing and answers {"status": "unhidden"}.
Such a child also runs its job in a PID namespace of its own, where the job cannot signal this
worker: a job that kills the parent it sees is a crash, "the candidate killed its worker"
(`_keep`).

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

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import r2e_limit  # noqa: E402
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


_RUNS = iter(range(1 << 62))

# Linux's flags for unshare(2), mount(2) and prctl(2), and statvfs(3)'s for a mount's own.
_CLONE_NEWNS = 0x00020000
_CLONE_NEWUSER = 0x10000000
_MS_RDONLY, _MS_NOSUID, _MS_NODEV, _MS_NOEXEC = 1, 2, 4, 8
_MS_REMOUNT, _MS_BIND, _MS_NOATIME, _MS_NODIRATIME = 32, 4096, 1024, 2048
_MS_REC, _MS_PRIVATE, _MS_RELATIME = 16384, 1 << 18, 1 << 21
_ST_RELATIME = 4096
_PR_SET_DUMPABLE = 4
_LIBC = None


def _libc():
    global _LIBC
    if _LIBC is None:
        import ctypes

        _LIBC = ctypes.CDLL(None, use_errno=True)
    return _LIBC


def _call(result: int, what: str) -> None:
    if result != 0:
        import ctypes

        errno = ctypes.get_errno()
        raise OSError(errno, f"{what}: {os.strerror(errno)}")


def _own_user_namespace(flags: int) -> None:
    """Enters a new user namespace (and whatever else `flags` asks), as the same user."""
    uid, gid = os.geteuid(), os.getegid()
    _call(_libc().unshare(_CLONE_NEWUSER | flags), "unshare")
    for name, text in (("setgroups", "deny"), ("uid_map", f"{uid} {uid} 1"), ("gid_map", f"{gid} {gid} 1")):
        with open(f"/proc/self/{name}", "w") as f:
            f.write(text)


def _read_only(path: str) -> None:
    """Makes the bind mount at `path` read-only, keeping the flags the mount under it is locked
    with."""
    flags = os.statvfs(path).f_flag
    keep = flags & (_MS_NOSUID | _MS_NODEV | _MS_NOEXEC | _MS_NOATIME | _MS_NODIRATIME)
    keep |= _MS_RELATIME if flags & _ST_RELATIME else 0
    _call(
        _libc().mount(None, os.fsencode(path), None, _MS_REMOUNT | _MS_BIND | _MS_RDONLY | keep, None),
        f"making {path} read-only",
    )


def _bytecode_of(paths: list) -> list:
    """The files under PYCACHE holding bytecode of `paths`, under whatever name the import path
    found them (compared by their real paths: a folder reached through a link names the same
    module otherwise)."""
    real = {os.path.realpath(p) for p in paths}
    tail = f".{sys.implementation.cache_tag}.pyc"
    found = []
    for folder, _, files in os.walk(PYCACHE):
        for name in files:
            if not name.endswith(tail):
                continue
            source = os.path.join(folder[len(PYCACHE) :] or os.sep, name[: -len(tail)] + ".py")
            if os.path.realpath(source) in real:
                found.append(os.path.join(folder, name))
    return found


def _hide(paths: list[str], folder: str) -> None:
    """Hides `paths` from this process and its children, for good (see the module's text), and
    their bytecode under PYCACHE, which it makes read-only. A hidden file shows an empty file
    of this child's own, made in `folder` (a regular file: a hidden module stays importable
    when its candidate is loaded in its place; an empty bytecode file is ignored)."""
    libc = _libc()
    sys.pycache_prefix = PYCACHE
    paths = list(paths) + _bytecode_of(paths)
    empty = os.path.join(folder, f".r2e-empty-{os.getpid()}")
    open(empty, "w").close()
    # Dumpable again, to write its own namespace's maps (a non-dumpable process's /proc files
    # are root's); what it holds is its own.
    libc.prctl(_PR_SET_DUMPABLE, 1, 0, 0, 0)
    _own_user_namespace(_CLONE_NEWNS)
    _call(libc.mount(None, b"/", None, _MS_REC | _MS_PRIVATE, None), "making mounts private")
    for path in paths:
        target = os.fsencode(path)
        if os.path.isdir(path):
            _call(
                libc.mount(b"tmpfs", target, b"tmpfs", _MS_RDONLY | _MS_NOSUID | _MS_NODEV, b"size=4k"),
                f"hiding {path}",
            )
            continue
        if not os.path.exists(path):
            continue
        _call(libc.mount(os.fsencode(empty), target, None, _MS_BIND, None), f"hiding {path}")
        _read_only(path)
    # The children's bytecode, read-only: no child leaves bytecode for the next ones to run.
    os.makedirs(PYCACHE, exist_ok=True)
    _call(libc.mount(os.fsencode(PYCACHE), os.fsencode(PYCACHE), None, _MS_BIND | _MS_REC, None), "binding pycache")
    _read_only(PYCACHE)
    # No power over those mounts from here on.
    _own_user_namespace(0)

FILES = ("harness_file", "candidate_file")


# Bytecode for the children (when each child hides its own module's files): sandboxed code writes
# no bytecode, and a candidate's job sees no `__pycache__`, so each child would compile every
# module its harness imports. A child names the modules it compiled; a process forked for the
# purpose (never this one, which must hold nothing of a hidden module, nor leave it in memory
# its children inherit) writes their bytecode under `pycache/` here, Python's
# `sys.pycache_prefix`, which the next children read. Each child sees that folder read-only, and
# its own module's bytecode hidden like its source.
PYCACHE = os.path.join(HERE, "pycache")
# At most this many files compiled per worker: a bound on the folder.
_PYCACHE_CAP = 5000
_COMPILED: set = set()


def _compile_for_children(paths: list) -> None:
    """Writes the bytecode of `paths` (files of the environment, never a run's own files)
    under PYCACHE, in a process of its own."""
    todo = []
    for path in paths:
        if not isinstance(path, str) or not path.endswith(".py") or path in _COMPILED:
            continue
        if path.startswith(HERE + os.sep) or len(_COMPILED) >= _PYCACHE_CAP:
            continue
        _COMPILED.add(path)
        todo.append(path)
    if not todo:
        return
    pid = os.fork()
    if pid == 0:
        try:
            import py_compile

            sys.pycache_prefix = PYCACHE
            for path in todo:
                try:
                    py_compile.compile(path, doraise=False, quiet=2)
                except BaseException:  # noqa: BLE001 - the children compile it themselves
                    pass
        finally:
            os._exit(0)
    os.waitpid(pid, 0)


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


def _compiled_here(known: set) -> list:
    """The files of the modules this process imported from source (no bytecode read) but
    those named in `known`."""
    out = []
    for name, module in list(sys.modules.items()):
        if name in known:
            continue
        spec = getattr(module, "__spec__", None)
        origin = getattr(spec, "origin", None)
        cached = getattr(spec, "cached", None)
        if origin and origin.endswith(".py") and not (cached and os.path.exists(cached)):
            out.append(origin)
    return out


def _run_job(job: dict, prepared, work, isolate: bool) -> dict:
    """A child's run of its job: the runner's result."""
    try:
        if work is not None:
            os.chdir(work)
        known = set(sys.modules)
        result = r2e_runner.run(job, prepared)
        if isolate:
            result["compiled"] = _compiled_here(known)
    except BaseException as exc:  # noqa: BLE001
        result = r2e_runner.empty_result("error", f"runner crashed: {type(exc).__name__}: {exc}")
    return result


# A candidate cannot signal its worker. A child that hides files (in user namespaces of its own,
# `_hide`) also makes a PID namespace, where the candidate runs under two processes of ours:
# the namespace's init (`_init`: its own session, immune to the signals of the processes in
# its namespace, the kernel's rule for an init), and under it the candidate's parent (its
# `os.getppid()`, the "worker" it sees). The real worker, and this child, are in no namespace the
# candidate can name a process of, nor in its process group. So a worker that dies is never the
# candidate's doing (an error, as before), and a candidate that kills the parent it sees (any
# signal it dies of) did so itself: its run is a crash, "the candidate killed its worker".
_CLONE_NEWPID = 0x20000000
_PR_SET_PDEATHSIG = 1
KILLED_ITS_WORKER = "the candidate killed its worker"


def _own_pid_namespace() -> bool:
    """Whether this process's next children are in a PID namespace of their own."""
    try:
        _call(_libc().unshare(_CLONE_NEWPID), "unshare")
    except OSError:
        return False
    return True


def _code_of(status: int) -> int:
    """A wait status as an exit code: the code, or 128 plus the signal."""
    return 128 + os.WTERMSIG(status) if os.WIFSIGNALED(status) else os.WEXITSTATUS(status)


def _keep(run, out_fd: int) -> None:
    """Runs `run` under `_init`, the first process of this process's new PID namespace, which
    writes the run's answer to `out_fd`; this process then ends as the run did (its signal, or
    its exit code). Never returns."""
    try:
        pid = os.fork()
        if pid == 0:
            try:
                _init(run, out_fd)
            finally:
                os._exit(70)
        os.close(out_fd)
        _, status = os.waitpid(pid, 0)
        code = _code_of(status)
        if code > 128:
            # The run died of a signal: so does this process, for the worker to see it (and,
            # through `wait4`, the CPU time of every process under it, each reaped).
            sig = code - 128
            try:
                signal.signal(sig, signal.SIG_DFL)
                os.kill(os.getpid(), sig)
            except (OSError, ValueError):
                pass
        os._exit(code)
    finally:
        os._exit(70)


def _init(run, out_fd: int) -> None:
    """The PID namespace's first process: runs `run` in a grandchild under a parent of its own,
    and writes the grandchild's answer to `out_fd`, or, when that parent was killed, a crash:
    the candidate killed it. Ends with the run's exit code (128 plus its signal)."""
    os.setsid()
    # Gone with the child that made the namespace (killed by the worker at its limit): every
    # process of the namespace goes with it.
    _libc().prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
    read_end, write_end = os.pipe()
    parent = os.fork()
    if parent == 0:
        os.close(out_fd)
        os.close(read_end)
        pid = os.fork()
        if pid == 0:
            me = os.getpid()
            result = run()
            r2e_limit.leave_if_forked(me)
            data = r2e_runner.json_text(result).encode()
            with os.fdopen(write_end, "wb") as out:
                out.write(data)
            os._exit(0)
        os.close(write_end)
        _, status = os.waitpid(pid, 0)
        os._exit(_code_of(status))
    os.close(write_end)
    # A signal this process has a handler for (Python's own SIGINT, any the worker set) would
    # reach it from the namespace; ignored, it is dropped, as the others are.
    for sig in signal.valid_signals():
        try:
            if signal.getsignal(sig) not in (signal.SIG_DFL, signal.SIG_IGN, None):
                signal.signal(sig, signal.SIG_IGN)
        except (OSError, ValueError):
            pass
    data, status = _read_until_exit(read_end, parent)
    if os.WIFSIGNALED(status):
        how = f"signal {os.WTERMSIG(status)}"
        data = r2e_runner.json_text(r2e_runner.empty_result("crash", f"{KILLED_ITS_WORKER} ({how})")).encode()
    if data:
        with os.fdopen(out_fd, "wb") as out:
            out.write(data)
        os._exit(0)
    os._exit(_code_of(status))


def _read_until_exit(fd: int, pid: int) -> tuple[bytes, int]:
    """What is written to `fd` until the child `pid` ends (and what it left in the pipe), and
    its wait status."""
    chunks = []
    try:
        watch = os.pidfd_open(pid)
    except (AttributeError, OSError):
        watch = None
    status = None
    while status is None:
        fds = [fd] if watch is None else [fd, watch]
        ready, _, _ = select.select(fds, [], [], 0.01 if watch is None else None)
        if fd in ready:
            chunk = os.read(fd, 1 << 16)
            if chunk:
                chunks.append(chunk)
            else:
                status = os.waitpid(pid, 0)[1]
                break
        done, got = os.waitpid(pid, os.WNOHANG)
        if done:
            status = got
    # Its answer was whole in the pipe when it ended (a process it left may still hold the pipe).
    os.set_blocking(fd, False)
    try:
        while True:
            chunk = os.read(fd, 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    except BlockingIOError:
        pass
    return b"".join(chunks), status


def _run_in_child(
    job: dict, timeout: float, prepared=None, memory_mib=None, texts=None, isolate=False, learn=False
) -> dict:
    """Runs a job in a forked child. With `isolate` (some job of the request hides files), the
    child hides its job's files and sees the children's bytecode read-only, whatever its job
    hides; with `learn` too (more children are to come), what it compiled is compiled for
    them."""
    hide = job.get("hide") or []
    work = None
    if texts is not None:
        try:
            job, work = _own_folder(job, texts)
        except OSError:
            work = None
    _reap(block=False)
    read_end, write_end = os.pipe()
    pid = os.fork()
    if pid == 0:
        me = os.getpid()
        os.close(read_end)
        # What the run starts stays in its reach when its parent ends.
        r2e_limit.subreaper()
        try:
            if isolate:
                _hide(hide, work or HERE)
            hidden = True
        except BaseException as exc:  # noqa: BLE001 - nothing of the job runs
            hidden = False
            result = r2e_runner.empty_result("unhidden", f"the worker could not hide the module's file: {exc}")
        if hidden:
            _limit_memory(memory_mib)
            if isolate and _own_pid_namespace():
                _keep(lambda: _run_job(job, prepared, work, isolate), write_end)
            result = _run_job(job, prepared, work, isolate)
            # Only the child this worker forked answers, never a copy the code under test
            # forked and returned in.
            r2e_limit.leave_if_forked(me)
        # The run is over: what it started ends before it answers (in a PID namespace of its
        # own, `_keep`, the namespace's end takes it down).
        r2e_limit.stop_processes()
        data = r2e_runner.json_text(result).encode()
        with os.fdopen(write_end, "wb") as out:
            out.write(data)
        os._exit(0)
    os.close(write_end)
    chunks = []
    meter = r2e_limit.Meter(pid)
    timed_out = False
    with os.fdopen(read_end, "rb") as pipe:
        while True:
            if meter.sample() > timeout:
                timed_out = True
                break
            ready, _, _ = select.select([pipe], [], [], r2e_limit.TICK)
            if not ready:
                continue
            chunk = os.read(pipe.fileno(), 1 << 16)
            if not chunk:
                break
            chunks.append(chunk)
    if not timed_out:
        try:
            result = json.loads(b"".join(chunks))
        except ValueError:
            result = None
        if isinstance(result, dict):
            # It answered, and is exiting (tearing down its namespaces takes a while): the
            # next child need not wait for that.
            _EXITING.append(pid)
            if work is not None:
                import shutil

                shutil.rmtree(work, ignore_errors=True)
            compiled = result.pop("compiled", None)
            if compiled and learn:
                _compile_for_children(compiled)
            return result
    if timed_out:
        os.kill(pid, signal.SIGKILL)
    _, status = os.waitpid(pid, 0)
    # What it started and left behind (now this process's children: it is their subreaper)
    # ends with it.
    r2e_limit.stop_processes(spare=r2e_limit.identify(_EXITING))
    if work is not None:
        import shutil

        shutil.rmtree(work, ignore_errors=True)
    if timed_out:
        return r2e_runner.empty_result("timeout", f"the harness ran past {timeout:.0f}s")
    how = f"signal {os.WTERMSIG(status)}" if os.WIFSIGNALED(status) else f"exit {os.WEXITSTATUS(status)}"
    return r2e_runner.empty_result("crash", f"the harness process died ({how})")


# Children that answered and are exiting: reaped before each fork when gone, and at the end of
# a request for good (one still running after its answer is killed: what it does no longer
# counts).
_EXITING: list = []


def _reap(block: bool) -> None:
    for pid in list(_EXITING):
        if block:
            try:
                os.kill(pid, signal.SIGKILL)
            except OSError:
                pass
        try:
            done, _ = os.waitpid(pid, 0 if block else os.WNOHANG)
        except ChildProcessError:
            done = pid
        if done:
            _EXITING.remove(pid)


def answer(request_path: str, out_path: str, serving: bool = False) -> None:
    """Answers one request file into `out_path` (`serving`: more requests may come)."""
    global _RUNS
    _RUNS = iter(range(1 << 62))
    with open(request_path) as f:
        request = json.load(f)
    jobs = request["jobs"]
    isolate = any(job.get("hide") for job in jobs)
    if isolate:
        # No child reads what it hides through this process's root (`/proc/<pid>/root`). (The
        # C library is loaded here once, not in each child.)
        _libc().prctl(_PR_SET_DUMPABLE, 0, 0, 0, 0)
    r2e_limit.subreaper()
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
                isolate,
                learn=serving or (i, n) != (len(jobs) - 1, first + runs - 1),
            )
            for n in range(first, first + runs)
        ]
        for i, job in enumerate(jobs)
    ]
    _reap(block=True)
    with open(out_path, "w") as f:
        f.write(r2e_runner.json_text({"results": results}))


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
        answer(request_path, out_path, serving=True)
        os.write(out, b"done\n")


def _seeds_hashes(request_path: str) -> bool:
    """Whether this worker records the expected outcomes: run 0 of record jobs only. It runs
    under PYTHONHASHSEED=0, as the explorer that wrote the harness did, so that what it records
    (a set's order in a call's text, in a value's repr) is the same on every build; the later
    runs and the candidates keep hash seeds of their own, and catch what depends on one."""
    try:
        with open(request_path) as f:
            request = json.load(f)
        jobs = request.get("jobs") or []
        return int(request.get("first_run", 0)) == 0 and all(
            job.get("mode") == "record" for job in jobs
        )
    except (OSError, ValueError, TypeError, AttributeError):
        return False


def main(argv: list[str]) -> int:
    if argv[1] == "--serve":
        return serve(argv[2], argv[3], float(argv[4]))
    if _seeds_hashes(argv[1]):
        import r2e_reexec

        r2e_reexec.ensure_hash_seed("R2E_BATCH_REEXECUTED")
    answer(argv[1], argv[2])
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
