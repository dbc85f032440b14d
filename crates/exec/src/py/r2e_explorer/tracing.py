"""Tracing arcs and running calls safely: the arc tracer, the executor with its per-call timer,
and the budget (executions and time) of one exploration."""

from __future__ import annotations

import contextlib
import inspect
import io
import os
import re
import signal
import sys

# Every limit here follows r2e_limit's one rule: CPU time or idle-machine time (the wall clock
# less the waits for a CPU), whichever is larger; what a call started ends with it.
import r2e_limit


# The modules of r2e's own that run within a traced call.
R2E_MODULES = ("r2e_equiv", "r2e_snapshot", "r2e_explorer", "r2e_explore")


class Stop(Exception):
    """The execution budget or the time limit is exhausted."""


class ArcTracer:
    """Records arcs (previous line, line) of the code objects of one function, like coverage.py:
    entering a frame is the arc (-firstlineno, line) and leaving it (line, -firstlineno).

    Only code objects from the function's file whose first line lies within the function's
    lines are traced, so nested functions, lambdas and comprehensions count too.
    """

    def __init__(self, filename: str | None, first: int, last: int):
        self.filename, self.first, self.last = filename, first, last
        self.arcs: set = set()
        self._wanted: dict = {}
        # The last exception seen passing through a traced frame (its traceback leads from
        # that frame to where it was raised) and, after `stop`, where that was.
        self._exception = None
        self.raised_at: tuple | None = None
        # While `watch_patterns` is set, the compiled regular expressions whose methods the
        # traced calls use (any code they reach: a helper's `PATTERN.match(s)` counts), by id.
        self.watch_patterns = False
        self.patterns: dict = {}

    def _profile(self, frame, event, arg):
        if event == "c_call":
            owner = getattr(arg, "__self__", None)
            if (
                type(owner) is re.Pattern
                and id(owner) not in self.patterns
                # Not r2e's own (r2e_equiv normalizes exception messages with one).
                and frame.f_globals.get("__name__", "").partition(".")[0] not in R2E_MODULES
            ):
                self.patterns[id(owner)] = owner

    def _is_wanted(self, code) -> bool:
        wanted = self._wanted.get(code)
        if wanted is None:
            wanted = (
                code.co_filename == self.filename and self.first <= code.co_firstlineno <= self.last
            )
            self._wanted[code] = wanted
        return wanted

    def _global(self, frame, event, arg):
        if event != "call" or not self._is_wanted(frame.f_code):
            return None
        arcs = self.arcs
        entry = frame.f_code.co_firstlineno
        last = -entry

        def local(frame, event, arg):
            nonlocal last
            if event == "line":
                line = frame.f_lineno
                arcs.add((last, line))
                last = line
            elif event == "return":
                arcs.add((last, -entry))
            elif event == "exception":
                self._exception = arg
            return local

        return local

    def start(self):
        self.arcs = set()
        self._exception = None
        self.raised_at = None
        if self.filename is not None:
            sys.settrace(self._global)
            if self.watch_patterns:
                sys.setprofile(self._profile)

    def stop(self) -> frozenset:
        sys.settrace(None)
        if sys.getprofile() == self._profile:
            sys.setprofile(None)
        self.raised_at = raise_site(self._exception)
        self._exception = None
        return frozenset(self.arcs)


def raise_site(exc_info) -> tuple | None:
    """(exception type's qualified name, file, line) of the innermost frame of an exception's
    traceback (an (type, value, traceback) triple), i.e. where it was raised; None without
    one."""
    if not exc_info or exc_info[2] is None:
        return None
    tb = exc_info[2]
    while tb.tb_next is not None:
        tb = tb.tb_next
    return (exc_info[0].__qualname__, tb.tb_frame.f_code.co_filename, tb.tb_lineno)


def tracer_for(func) -> ArcTracer:
    """A tracer of `func`'s lines (one that records nothing when its source is unknown)."""
    code = getattr(func, "__code__", None)
    try:
        lines, first = inspect.getsourcelines(func)
    except (OSError, TypeError):
        return ArcTracer(None, 0, -1)
    if code is None:
        return ArcTracer(None, 0, -1)
    return ArcTracer(code.co_filename, first, first + len(lines) - 1)


class NullWriter(io.TextIOBase):
    """An output stream that discards what is written."""

    def write(self, s):
        return len(s)

    def writable(self):
        return True


class Executor:
    """Runs calls with a per-call limit (r2e_limit: past it, SIGALRM raises r2e_equiv.Timeout,
    and the processes the call started are killed; they are killed when it ends too), output
    suppressed, an empty stdin, and the working directory restored; counts executions.
    `last_seconds` is the time (r2e_limit's clock) of the last call."""

    def __init__(self, equiv, timeout: float):
        self.equiv = equiv
        self.timeout = max(float(timeout), 0.001)
        self.executions = 0
        self.timeouts = 0
        self.last_seconds = 0.0
        self._armed = False
        self._meter = None
        self._install()

    def _install(self):
        signal.signal(signal.SIGALRM, self._on_alarm)

    def _on_alarm(self, signum, frame):
        if self._armed:
            raise self.equiv.Timeout()

    def arm(self, seconds: float, interval: float):
        """Starts the limit: r2e_equiv.Timeout is raised after `seconds` (r2e_limit's clock),
        then every `interval` seconds (so that code swallowing the first Timeout is interrupted
        again)."""
        self._meter = r2e_limit.watch().start(seconds, interval)
        self._armed = True

    def disarm(self) -> bool:
        """Ends the limit, and every process the call started; whether it was passed."""
        self._armed = False
        meter, self._meter = self._meter, None
        if meter is None:
            return False
        self.last_seconds = r2e_limit.watch().stop(meter)
        return meter.over

    def run(self, prepare, action, tracer=None, timeout=None):
        """Returns ("ok", result, arcs), ("invalid", exception, None) when `prepare` (building
        the inputs) raised, or ("timeout", None, None). `timeout` (seconds) replaces the
        per-call timeout for this call."""
        self.executions += 1
        timeout = self.timeout if timeout is None else max(float(timeout), 0.001)
        # Reinstalled every time: the code under test may have replaced them.
        self._install()
        try:
            cwd = os.getcwd()
        except OSError:
            cwd = None
        null = NullWriter()
        saved_stdin = sys.stdin
        arcs = frozenset()
        try:
            with contextlib.redirect_stdout(null), contextlib.redirect_stderr(null):
                sys.stdin = io.StringIO("")
                # Re-fires every 50 ms so that code swallowing the first Timeout (a bare
                # `except:`) is interrupted again.
                self.arm(timeout, min(timeout, 0.05))
                over = False
                try:
                    try:
                        prepared = prepare()
                    except (self.equiv.Timeout, KeyboardInterrupt):
                        raise
                    except BaseException as exc:  # noqa: BLE001 - invalid input
                        outcome = ("invalid", exc, None)
                    else:
                        if tracer is not None:
                            tracer.start()
                        try:
                            outcome = ("ok", action(prepared), None)
                        finally:
                            if tracer is not None:
                                arcs = tracer.stop()
                finally:
                    over = self.disarm()
            # Past the limit is a timeout, whether or not the call noticed.
            if over:
                raise self.equiv.Timeout()
            return outcome if outcome[0] != "ok" else ("ok", outcome[1], arcs)
        except self.equiv.Timeout:
            self.disarm()
            self.timeouts += 1
            return ("timeout", None, None)
        finally:
            self.disarm()
            sys.settrace(None)
            if tracer is not None and sys.getprofile() == tracer._profile:
                sys.setprofile(None)
            sys.stdin = saved_stdin
            with contextlib.suppress(OSError):
                if cwd is not None and os.getcwd() != cwd:
                    os.chdir(cwd)


class Budget:
    """The bounds of one exploration: `executions` calls of the executor, of which `reserve`
    are kept back for the end (`check(final=True)` may use them), and a safety time limit in
    seconds on r2e_limit's clock, this whole process's (`time_limit_hit` records that it
    fired)."""

    def __init__(self, executor: Executor, executions: int, reserve: int, time_limit: float):
        self.executor = executor
        self.executions = executions
        self.reserve = reserve
        self.time_limit = time_limit
        self.meter = r2e_limit.Meter(os.getpid())
        self.time_limit_hit = False
        self._sampled_at = None
        self._seconds = 0.0

    def elapsed(self) -> float:
        """Seconds since the start (r2e_limit's clock), sampled once a tick (r2e_limit.TICK)
        at most: `check` runs before every execution, and a sample reads every task's
        clocks. The limit is only a safety stop; a tick late it stops the same."""
        now = r2e_limit._now()
        if self._sampled_at is None or now - self._sampled_at >= r2e_limit.TICK:
            self._sampled_at = now
            self._seconds = self.meter.sample()
        return self._seconds

    def check(self, final=False):
        """Raises Stop when the time limit or the budget is exhausted."""
        if self.elapsed() > self.time_limit:
            self.time_limit_hit = True
            raise Stop()
        limit = self.executions if final else self.executions - self.reserve
        if self.executor.executions >= limit:
            raise Stop()
