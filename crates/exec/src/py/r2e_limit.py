"""The one rule for the limit of a call of code under test (an explorer's call, the capture of a
repository's tests, a run of a harness, a candidate's check), and the end of what it started.

A call is over its limit when either of two clocks passes it:

- its CPU time, and
- its idle-machine time: its wall-clock time less the time its threads and processes waited for
  a CPU (the run delay, the second field of `/proc/<pid>/task/<tid>/schedstat`).

On an idle machine the second is the wall clock, so a call that waits (a sleep, a terminal,
`input()`, a socket, a child that never ends) stops at its limit like one that spins; on a busy
machine the waits for a CPU are taken off, so the verdict is the one an idle machine gives.
Both clocks sum the call's threads and processes (those it started; `Meter`), sampled every
TICK seconds, each task kept at the last values seen, so that one that ended still counts
(but for its last tick: a task living less than a tick is not seen, and its waits for a CPU
count as idle time). Without schedstat (a kernel without it), CPU time comes from
`/proc/<pid>/stat` and no waiting is taken off: the limit is the wall clock.

Every process a call started (the descendants of its process, found by their parents, this
process being a child subreaper so that none escapes by losing its parent) is killed, and
reaped, when the call ends or passes its limit (`stop_processes`).

A call's code that forks and returns in the child (`os.fork()` without an exec or an exit)
hands that child back to the caller's code: a copy of the caller, which would go on with its
work (another explorer, a second answer on the same pipe). The end of a call is where that is
caught: a process that ends a call it did not start leaves at once (`Watch.stop`, `leave_if_forked`).
"""

from __future__ import annotations

import os
import signal
import threading
import time

TICK = 0.02
_PR_SET_CHILD_SUBREAPER = 36
# The wall clock (and sleep), bound here: code under test that replaces `time.monotonic` (freezegun, a
# test's fake clock) does not move a limit.
_CLOCK, _MONOTONIC, _SLEEP = time.clock_gettime, time.CLOCK_MONOTONIC, time.sleep


def _now() -> float:
    return _CLOCK(_MONOTONIC)


def leave_if_forked(pid: int) -> None:
    """Ends this process at once, silently, unless it is `pid`: the process that made a call,
    which is the only one to go on past its end (a copy forked by the call's code is not)."""
    if os.getpid() != pid:
        os._exit(0)


def subreaper() -> None:
    """Makes this process the child subreaper of its descendants: one whose parent ends is
    reparented here, and so stays in reach of `stop_processes`."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(_PR_SET_CHILD_SUBREAPER, 1, 0, 0, 0)
    except (OSError, AttributeError):
        pass


def _has_children() -> bool:
    """Whether this process has a child (none: with it a subreaper, it has no descendant either;
    a system call, where a look at every process is hundreds)."""
    try:
        os.waitid(os.P_ALL, 0, os.WEXITED | os.WNOHANG | os.WNOWAIT)
    except ChildProcessError:
        return False
    return True


def _table() -> dict:
    """pid -> (ppid, start time, state) of every process in sight."""
    out = {}
    try:
        names = os.listdir("/proc")
    except OSError:
        return out
    for name in names:
        if not name.isdigit():
            continue
        try:
            with open(f"/proc/{name}/stat", "rb") as f:
                text = f.read()
        except OSError:
            continue
        fields = text[text.rfind(b")") + 2 :].split()
        try:
            out[int(name)] = (int(fields[1]), int(fields[19]), fields[0])
        except (IndexError, ValueError):
            continue
    return out


def identify(pids) -> frozenset:
    """The (pid, start) of each of `pids` still there."""
    table = _table()
    return frozenset((pid, table[pid][1]) for pid in pids if pid in table)


def descendants(root: int, table: dict, spare=frozenset()) -> set:
    """The (pid, start) of every descendant of `root`, but those in `spare` and those under
    them."""
    children: dict = {}
    for pid, (ppid, start, _) in table.items():
        children.setdefault(ppid, []).append((pid, start))
    out, todo = set(), [root]
    while todo:
        for key in children.get(todo.pop(), ()):
            if key not in spare and key not in out:
                out.add(key)
                todo.append(key[0])
    return out


def stop_processes(root: int | None = None, spare=frozenset(), wait: float = 5.0) -> None:
    """Kills every descendant of `root` (this process by default) but those in `spare`
    ((pid, start) pairs) and those under them, and reaps those that end up this process's
    children, until none is left (or `wait` seconds passed)."""
    root = os.getpid() if root is None else root
    me = os.getpid()
    if root == me and not _has_children():
        return
    deadline = _now() + wait
    while True:
        table = _table()
        left = descendants(root, table, spare)
        if not left:
            return
        for pid, _ in left:
            if table[pid][2] != b"Z":
                try:
                    os.kill(pid, signal.SIGKILL)
                except OSError:
                    pass
            if table[pid][0] == me:
                try:
                    os.waitpid(pid, os.WNOHANG)
                except ChildProcessError:
                    pass
        if _now() > deadline:
            return
        _SLEEP(0.001)


# This process's own tasks' schedstat files, kept open (tid -> (descriptor, its device and
# inode)) and read again from their start: the explorer's calls read them thousands of times.
# Keyed by the process that opened them (a forked child opens its own). A descriptor that no
# longer is the file (code under test closed it, and another file took its number) is
# forgotten, never read or closed. The calling thread and the watcher both read them: each
# step is one operation on the table, and a race costs at most a descriptor left open.
_OPEN: dict = {}
_OPEN_PID: list = [0]


def _is_file(entry) -> bool:
    """Whether an entry's descriptor still is the file it was opened on."""
    fd, ident = entry
    try:
        st = os.fstat(fd)
    except OSError:
        return False
    return (st.st_dev, st.st_ino) == ident


def _drop(tid: int, entry) -> None:
    """Forgets `entry`, closing its descriptor when it still is the file."""
    if _OPEN.get(tid) is entry:
        _OPEN.pop(tid, None)
    if _is_file(entry):
        try:
            os.close(entry[0])
        except OSError:
            pass


def _own_schedstat(tid: int) -> bytes:
    """The schedstat text of a task of this process, through a descriptor kept open (a task
    gone, or a tid taken again by a new task, is opened anew once)."""
    me = os.getpid()
    if _OPEN_PID[0] != me:
        # Inherited across a fork: the parent's tasks, not this process's.
        for key, entry in list(_OPEN.items()):
            _drop(key, entry)
        _OPEN_PID[0] = me
    entry = _OPEN.get(tid)
    if entry is not None:
        if _is_file(entry):
            try:
                text = os.pread(entry[0], 256, 0)
                if text:
                    return text
            except OSError:
                pass
        _drop(tid, entry)
    fd = os.open(f"/proc/{me}/task/{tid}/schedstat", os.O_RDONLY | os.O_CLOEXEC)
    try:
        text = os.pread(fd, 256, 0)
        st = os.fstat(fd)
    except OSError:
        os.close(fd)
        raise
    if len(_OPEN) >= 64:
        for key, old in list(_OPEN.items()):
            _drop(key, old)
    entry = (fd, (st.st_dev, st.st_ino))
    if _OPEN.setdefault(tid, entry) is not entry:
        os.close(fd)
    return text


def _task_clocks(pid: int, tid: int) -> tuple | None:
    """(CPU seconds, seconds waited for a CPU) of one task, or None when it is gone."""
    try:
        if pid == os.getpid():
            text = _own_schedstat(tid)
        else:
            with open(f"/proc/{pid}/task/{tid}/schedstat", "rb") as f:
                text = f.read()
        cpu, delay = text.split()[:2]
        return int(cpu) / 1e9, int(delay) / 1e9
    except (OSError, ValueError):
        pass
    try:
        with open(f"/proc/{pid}/task/{tid}/stat", "rb") as f:
            text = f.read()
        fields = text[text.rfind(b")") + 2 :].split()
        return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK"), 0.0
    except (OSError, ValueError, IndexError):
        return None


def _tids(pid: int) -> list:
    try:
        return [int(t) for t in os.listdir(f"/proc/{pid}/task")]
    except OSError:
        return []


class Meter:
    """The two clocks of one call. `root`: the call is that process (a forked child) with its
    threads and descendants. None: the call is this process's calling thread, with the threads
    and processes that appear while it runs (not the thread that watches it: its waits for a CPU
    while the call sleeps are none of the call's)."""

    def __init__(self, root: int | None = None):
        self.root = root
        # The process that made the meter (for a call of its own, the caller).
        self.pid = os.getpid()
        self.started = _now()
        self.seen: dict = {}
        self.base: dict = {}
        if root is None:
            # What the calling thread had done before (the call's other tasks are new).
            me, tid = os.getpid(), threading.get_native_id()
            self.own = {tid}
            self.before_tids = set(_tids(me))
            self.before = descendants(me, _table()) if _has_children() else set()
            tasks = [((me, 0, tid), me, tid)]
        else:
            self.before = frozenset()
            tasks = list(self._tasks())
        # What the tasks there at the start had done before it.
        for key, pid, tid in tasks:
            clocks = _task_clocks(pid, tid)
            if clocks is not None:
                self.base[key] = clocks
        self.cpu = 0.0
        self.delay = 0.0

    def spare(self) -> frozenset:
        """The processes that were there before the call (not the call's to end)."""
        return frozenset(self.before)

    def _tasks(self):
        """(key, pid, tid) of each task of the call now."""
        me = os.getpid()
        table = _table() if self.root not in (None, me) or _has_children() else {}
        if self.root is None:
            for tid in _tids(me):
                if tid in self.own or tid not in self.before_tids:
                    yield (me, 0, tid), me, tid
            procs = descendants(me, table, self.before)
        else:
            # The root itself under one key throughout (its start time is not always read).
            procs = descendants(self.root, table) | {(self.root, 0)}
        for pid, start in procs:
            for tid in _tids(pid):
                yield (pid, start, tid), pid, tid

    def sample(self) -> float:
        """Samples every task of the call; the call's time so far (the larger clock)."""
        for key, pid, tid in self._tasks():
            clocks = _task_clocks(pid, tid)
            if clocks is None:
                continue
            base = self.base.get(key, (0.0, 0.0))
            cpu, delay = clocks[0] - base[0], clocks[1] - base[1]
            old = self.seen.get(key, (0.0, 0.0))
            self.seen[key] = (max(cpu, old[0]), max(delay, old[1]))
        self.cpu = sum(c for c, _ in self.seen.values())
        self.delay = sum(d for _, d in self.seen.values())
        return self.seconds()

    def seconds(self) -> float:
        """The call's time at the last sample: the larger of its CPU time and its idle-machine
        time."""
        idle = _now() - self.started - self.delay
        return max(self.cpu, idle)


class Watch:
    """Watches calls of this process's main thread, one at a time, from a thread of its own: a
    call past its limit gets `signum` (the caller's handler raises in it), again every
    `interval` seconds while it runs on (code that swallows the first exception is interrupted
    again), and its processes are killed.

    The thread looks every tick (TICK, or a twentieth of a shorter call's limit) at the call
    under way; starting and ending a call wakes no thread (a call of the explorer lasts less
    than a millisecond, and it makes thousands). Whether a call passed its limit is decided
    when it ends (`stop`), by its own sample: a look that comes a tick late only stops a call
    that is over later, it never changes the verdict."""

    def __init__(self, signum=signal.SIGALRM):
        self.signum = signum
        # Held while a call ends, and while the thread signals one: no signal reaches past the
        # end of a call (into the next).
        self.lock = threading.Lock()
        self.call = None
        self.tid = None
        ready = threading.Event()
        self.thread = threading.Thread(
            target=self._loop, args=(ready,), name="r2e-limit", daemon=True
        )
        self.thread.start()
        ready.wait()

    def start(self, seconds: float, interval: float) -> Meter:
        """Starts watching a call of the calling (main) thread with a limit of `seconds`."""
        meter = Meter()
        meter.limit = seconds
        meter.interval = max(interval, TICK)
        meter.tick = min(TICK, max(seconds / 20, 0.002))
        meter.over = False
        meter.fired = 0.0
        self.call = meter
        return meter

    def stop(self, meter: Meter) -> float:
        """Ends the call: no more signals, its processes killed; its time (`meter.over` says
        whether it passed the limit). A copy of the caller forked by the call's code ends here
        (before the lock, which the fork may have copied held)."""
        leave_if_forked(meter.pid)
        with self.lock:
            self.call = None
        seconds = meter.sample()
        if seconds > meter.limit:
            meter.over = True
        stop_processes(spare=meter.spare())
        return seconds

    def _loop(self, ready):
        import sys

        sys.settrace(None)
        sys.setprofile(None)
        self.tid = threading.get_native_id()
        ready.set()
        main = threading.main_thread().ident
        while True:
            meter = self.call
            _SLEEP(TICK if meter is None else meter.tick)
            # A call that ends before its first tick costs no look.
            if meter is None or self.call is not meter or _now() - meter.started < meter.tick:
                continue
            seconds = meter.sample()
            now = _now()
            if seconds > meter.limit and now - meter.fired >= meter.interval:
                with self.lock:
                    if self.call is not meter:
                        continue
                    first = not meter.over
                    meter.over = True
                    meter.fired = now
                    signal.pthread_kill(main, self.signum)
                    if first:
                        stop_processes(spare=meter.spare())


_WATCH: list = []


def watch() -> Watch:
    """This process's watcher (started on first use; this process becomes a subreaper)."""
    if not _WATCH:
        subreaper()
        _WATCH.append(Watch())
    return _WATCH[0]
