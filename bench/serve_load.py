#!/usr/bin/env python3
"""Load test of `r2e serve`: many concurrent agent sessions, their latencies, their traces.

    python3 bench/serve_load.py --r2e target/release/r2e [-p pipeline.toml] [--json]
    python3 bench/serve_load.py --r2e BIN --kill-after-submits 10
    python3 bench/serve_load.py --server http://127.0.0.1:8080 [--server-pid PID] [--output out]
    sudo python3 bench/serve_load.py --r2e BIN --hosts 2 --sessions 256 [--kill-after-submits K]

With `--r2e BIN` it starts `BIN serve -p PIPELINE --addr 127.0.0.1:PORT --max-sessions 64` on a
free port and waits until `GET /v1/instances` answers; with `--server URL` it uses a running
server (which must serve PIPELINE's output, where the traces are read).

`--sessions` threads (50) each open a session on an instance (round robin over the instances
served) and do `--steps` steps (20) of: write the function's file, then run the tests. The
edits alternate between the reference (the function's file as the repository holds it) with a
unique statement inside the function's body (`_r2e_load = "TAG"`), and a wrong version (its
body replaced by that statement and `return None`); every edit is distinct code, which the
check cache has never seen. Then it submits. The reference is
read from the repository's folder: the pipeline's `[[repo]]` table named like the instance's
`repo`, or `--repo-root DIR`/NAME (default, for a repository the pipeline does not name: the
pipeline's folder/examples/NAME).

It prints, per operation (open, write, test, submit), the count and the p50/p99 latency in ms
(a 429 is waited out and counted in the operation's time); steps (a write and a test) per
second; the server's peak memory (VmHWM of its process, MiB; `--server-pid` for a running one);
and checks:

- every session's trace `<output>/traces/SID.jsonl` has its open line, its writes and tests
  (`--steps` each), the submit and a close line (reason `submitted`), with increasing `seq`;
- every submission the server acknowledged is in its trace with the same reward.

With `--kill-after-submits K`: once K submissions are acknowledged, the server is SIGKILLed;
then every acknowledged reward must be in the traces, the sessions that completed must have
whole traces; the server is started again and must serve (GET /v1/instances, a session opened
and closed), the server's workspaces (`.OUTPUT.r2e/sessions/` beside the output) must hold no orphaned workspace, and the traces of the
sessions the kill cut must end with a close line of reason `restart`.

With `--hosts N` (needs `--r2e` and root): N servers on N "hosts" of this machine. The script
makes N network namespaces (`r2eload-PID-I`), each with a veth pair to a bridge in the root
namespace and an address of its own (`--subnet` 10.77.0: the bridge .1, the hosts .2, .3, ...),
copies the pipeline's folder once per host (its repositories, output, store and cache; no
`target`, no `.git`: two servers must not share an output's store, where workspaces and traces
are, and `r2e serve` takes a lock on it), and starts `ip netns exec NS BIN serve -p
COPY/pipeline.toml --addr ADDR:PORT --token-env VAR --max-sessions M` in each (an address other
than loopback needs a token: a random one). `--max-sessions` defaults to max(64, sessions/N +
32). The sessions share one client of every server (`Client([URL, ...])`), which spreads them
(the fewest open first) and opens elsewhere on a 429, a 5xx or no answer. The table adds, per
server, the sessions opened there, its steps and its peak memory (VmHWM). The namespaces, links
and bridge are removed at the end, also after a failure, Ctrl-C or SIGTERM (and those of an
earlier run of the script that died are removed at the start); the copies are removed unless
the run failed or `--keep-hosts`.

With `--hosts N --kill-after-submits K`, the first server is SIGKILLed after K submissions are
acknowledged (on any server). Its sessions are cut (sessions live in their server): each opens
a new session, which the client places on a server that answers (waiting out 429s), and does
its steps and its submit again there; the other servers' sessions must go on untouched. Then
the checks above (the killed server restarted on its copy: no orphaned workspace, it serves,
the cut sessions' traces close with reason `restart`), and every session that was cut must
have completed on another server with a whole trace.

Every run checks that every reference edit passes all tests and every wrong edit fails some.

`--time-limit` (900 s) bounds the run: past it, sessions stop where they are (and the check
that all finished fails). Exit status: 0 when every check passes, 1 when one fails, 2 when
the run could not be set up. `--json` prints one JSON object instead of the table.
Standard library only; the client is `clients/python/r2e_client.py`.
"""

from __future__ import annotations

import argparse
import ast
import json
import math
import os
import re
import secrets
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
import time
import uuid

try:
    import tomllib
except ImportError:  # Python < 3.11: pass --output and --repo-root
    tomllib = None

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "clients", "python"))

from r2e_client import Client, R2EError, find_function  # noqa: E402

OPS = ("open", "write", "test", "submit")


class SetupError(Exception):
    """The run could not start (exit status 2)."""


# ---------------------------------------------------------------------------------------------
# The pipeline: where the output and the repositories are
# ---------------------------------------------------------------------------------------------


def read_pipeline(path: str) -> dict:
    """`{"output": DIR, "repos": {NAME: DIR}}` from a pipeline file (paths made absolute)."""
    base = os.path.dirname(os.path.abspath(path))
    if tomllib is None:
        return {"output": os.path.join(base, "out"), "repos": {}}
    with open(path, "rb") as f:
        cfg = tomllib.load(f)
    output = os.path.join(base, cfg.get("project", {}).get("output", "out"))
    repos = {}
    for repo in cfg.get("repo", []):
        if "path" not in repo:
            continue  # a git URL: its checkout is r2e's, pass --repo-root
        folder = os.path.normpath(os.path.join(base, repo["path"]))
        # r2e's default name: the folder's last component.
        name = repo.get("name") or os.path.basename(folder.rstrip("/")) or "repo"
        repos[name] = folder
    return {"output": output, "repos": repos}


# ---------------------------------------------------------------------------------------------
# The edits
# ---------------------------------------------------------------------------------------------


class Edits:
    """The two kinds of edits of one function's file (the reference text `source`), each made
    unique by a tag: the reference with a statement inside the body, and a wrong body."""

    def __init__(self, source: str, qualname: str):
        self.source = source
        self.lines = source.splitlines(keepends=True)
        first, last, node = find_function(source, qualname)  # ValueError when absent
        self.first, self.last = first, last
        body = node.body[0]
        self.body_line = body.lineno
        # Where the reference's tag goes: before the first statement after the docstring (a
        # statement before it would take the docstring's place).
        docstring = (
            isinstance(body, ast.Expr)
            and isinstance(body.value, ast.Constant)
            and isinstance(body.value.value, str)
        )
        self.tag_line = node.body[1].lineno if docstring and len(node.body) > 1 else body.lineno
        line = self.lines[body.lineno - 1]
        # `col_offset` counts UTF-8 bytes.
        prefix = line.encode("utf-8")[: body.col_offset].decode("utf-8", "replace")
        # Whether the body starts a line of its own (not `def f(): return 1`).
        self.own_line = prefix.strip() == ""
        def_line = self.lines[first - 1]
        def_indent = def_line[: len(def_line) - len(def_line.lstrip(" \t"))]
        self.header_prefix = prefix
        self.body_indent = prefix if self.own_line else def_indent + "    "
        self.newline = "\r\n" if line.endswith("\r\n") else "\n"

    def reference(self, tag: str) -> str:
        """The reference with a statement `_r2e_load = "tag"` in its body (before its first
        statement after the docstring), so that every edit is code of its own: a comment alone
        would be the same candidate to the check cache. A body on the `def` line gets a comment
        at its end instead."""
        lines = list(self.lines)
        if self.own_line:
            lines.insert(self.tag_line - 1, f"{self.body_indent}_r2e_load = {tag!r}{self.newline}")
        else:
            end = lines[self.last - 1]
            stripped = end.rstrip("\r\n")
            lines[self.last - 1] = f"{stripped}  # {tag}{end[len(stripped):]}"
        return "".join(lines)

    def wrong(self, tag: str) -> str:
        """The function with its body replaced by `_r2e_load = "tag"` and `return None`."""
        nl, ind = self.newline, self.body_indent
        body = [f"{ind}_r2e_load = {tag!r}{nl}", f"{ind}return None{nl}"]
        head = self.lines[: self.body_line - 1]
        if not self.own_line:
            head.append(self.header_prefix.rstrip() + nl)
        return "".join(head + body + self.lines[self.last :])


# ---------------------------------------------------------------------------------------------
# The server
# ---------------------------------------------------------------------------------------------


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _stop_with_parent() -> None:
    """In a started server, before its exec: SIGTERM when this script dies (even by SIGKILL),
    so that no server outlives a run."""
    try:
        import ctypes

        ctypes.CDLL(None, use_errno=True).prctl(1, signal.SIGTERM, 0, 0, 0)  # PR_SET_PDEATHSIG
    except Exception:
        pass


class Server:
    """`BIN serve` started by this script, its stderr and stdout in a log file. With `netns`, in
    that network namespace (`ip netns exec NS BIN serve ...`, which execs the server: the
    process is the server's) on `host:port`; else on a free loopback port. `output`: the
    output it serves (where its traces and workspaces are)."""

    def __init__(self, binary: str, pipeline: str, max_sessions: int, token_env: str | None,
                 token: str | None, output: str = "", netns: str | None = None,
                 host: str = "127.0.0.1", port: int | None = None, name: str = "server"):
        self.binary, self.pipeline = binary, pipeline
        self.max_sessions, self.token_env, self.token = max_sessions, token_env, token
        self.output, self.netns, self.host, self.port, self.name = output, netns, host, port, name
        self.proc: subprocess.Popen | None = None
        self.url = ""
        fd, self.log_path = tempfile.mkstemp(prefix=f"r2e-serve-{name}-", suffix=".log")
        os.close(fd)

    def start(self, ready_within: float) -> None:
        port = self.port or free_port()
        self.url = f"http://{self.host}:{port}"
        cmd = [self.binary, "serve", "-p", self.pipeline, "--addr", f"{self.host}:{port}",
               "--max-sessions", str(self.max_sessions)]
        if self.netns:
            cmd = ["ip", "netns", "exec", self.netns] + cmd
        env = dict(os.environ)
        if self.token_env:
            cmd += ["--token-env", self.token_env]
            env[self.token_env] = self.token or ""
        log = open(self.log_path, "ab")
        log.write(f"$ {' '.join(cmd)}\n".encode())
        log.flush()
        self.proc = subprocess.Popen(cmd, stdout=log, stderr=log, stdin=subprocess.DEVNULL, env=env,
                                     preexec_fn=_stop_with_parent)
        log.close()
        # Ready when the instances are served.
        client = Client(self.url, token=self.token, timeout=10)
        deadline = time.monotonic() + ready_within
        while True:
            if self.proc.poll() is not None:
                raise SetupError(f"the server exited with {self.proc.returncode}:\n{self.log_tail()}")
            try:
                client.instances()
                return
            except R2EError as e:
                if e.status is not None and e.status != 503:
                    raise SetupError(f"GET /v1/instances answered {e}\n{self.log_tail()}")
            if time.monotonic() > deadline:
                self.stop()
                raise SetupError(f"the server was not ready within {ready_within:.0f} s:\n"
                                 f"{self.log_tail()}")
            time.sleep(0.1)

    @property
    def pid(self) -> int | None:
        return self.proc.pid if self.proc else None

    def alive(self) -> bool:
        return self.proc is not None and self.proc.poll() is None

    def kill(self) -> None:
        """SIGKILL: no chance to clean up (what a crash or an OOM kill leaves)."""
        if self.alive():
            os.kill(self.proc.pid, signal.SIGKILL)
            self.proc.wait()

    def stop(self) -> None:
        if self.alive():
            self.proc.terminate()
            try:
                self.proc.wait(timeout=15)
            except subprocess.TimeoutExpired:
                self.kill()

    def log_tail(self, chars: int = 3000) -> str:
        try:
            with open(self.log_path, encoding="utf-8", errors="replace") as f:
                return f.read()[-chars:]
        except OSError:
            return ""


# ---------------------------------------------------------------------------------------------
# Hosts: network namespaces with their own addresses, each with its own copy of the project
# ---------------------------------------------------------------------------------------------


def ip(*args: str, check: bool = True) -> subprocess.CompletedProcess:
    """`ip ARGS`; a failure raises `SetupError` (unless `check` is false)."""
    got = subprocess.run(["ip", *args], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    if check and got.returncode != 0:
        raise SetupError(f"`ip {' '.join(args)}` failed: {got.stderr.strip()}")
    return got


def pid_alive(pid: int) -> bool:
    return os.path.exists(f"/proc/{pid}")


class Hosts:
    """`n` hosts on this machine: network namespaces `r2eload-PID-I`, each with a veth pair to
    the bridge `r2ePIDb` in the root namespace, addresses SUBNET.2, SUBNET.3, ... (the bridge
    is SUBNET.1/24); and for each a copy of the pipeline's folder (its repositories, output and
    store, cache), so that no two servers share an output, a store (workspaces, traces) or a
    cache. `cleanup()` removes them all; what a dead run of this script left (a namespace or a
    link named after a pid that no longer runs) is removed at `setup()`."""

    def __init__(self, n: int, subnet: str, folder: str | None, keep: bool):
        self.n, self.subnet, self.keep = n, subnet, keep
        self.tag = str(os.getpid())
        self.bridge = f"r2e{self.tag}b"
        self.netns = [f"r2eload-{self.tag}-{i}" for i in range(n)]
        self.links = [f"r2e{self.tag}h{i}" for i in range(n)]
        self.addrs = [f"{subnet}.{i + 2}" for i in range(n)]
        self.made_folder = folder is None
        self.folder = folder or tempfile.mkdtemp(prefix="r2e-load-hosts-")
        self.made: list[tuple[str, str]] = []  # ("netns" | "link", name), to remove

    @staticmethod
    def remove_stale() -> list[str]:
        """Removes the namespaces and links of runs of this script that are no longer running."""
        removed = []
        for line in ip("netns", "list", check=False).stdout.splitlines():
            m = re.match(r"(r2eload-(\d+)-\d+)\b", line.strip())
            if m and not pid_alive(int(m.group(2))):
                # A server that outlived its run (the run's own processes, by their ids).
                for pid in ip("netns", "pids", m.group(1), check=False).stdout.split():
                    try:
                        os.kill(int(pid), signal.SIGKILL)
                    except (ValueError, OSError):
                        pass
                ip("netns", "del", m.group(1), check=False)
                removed.append(m.group(1))
        for line in ip("-o", "link", "show", check=False).stdout.splitlines():
            m = re.match(r"\d+:\s+(r2e(\d+)[bhp]\d*)[@:]", line)
            if m and not pid_alive(int(m.group(2))):
                ip("link", "del", m.group(1), check=False)
                removed.append(m.group(1))
        return removed

    def setup(self) -> None:
        if os.geteuid() != 0:
            raise SetupError("--hosts makes network namespaces: run as root")
        if shutil.which("ip") is None:
            raise SetupError("--hosts needs `ip` (iproute2)")
        Hosts.remove_stale()
        taken = ip("-o", "-4", "addr", "show").stdout
        if re.search(rf"inet {re.escape(self.subnet)}\.\d+/", taken):
            raise SetupError(f"the subnet {self.subnet}.0/24 is in use on this machine "
                             "(pass another with --subnet)")
        ip("link", "add", self.bridge, "type", "bridge")
        self.made.append(("link", self.bridge))
        ip("addr", "add", f"{self.subnet}.1/24", "dev", self.bridge)
        ip("link", "set", self.bridge, "up")
        for i, (ns, link, addr) in enumerate(zip(self.netns, self.links, self.addrs)):
            ip("netns", "add", ns)
            self.made.append(("netns", ns))
            peer = f"r2e{self.tag}p{i}"
            ip("link", "add", link, "type", "veth", "peer", "name", peer)
            self.made.append(("link", link))
            ip("link", "set", peer, "netns", ns)
            ip("link", "set", link, "master", self.bridge)
            ip("link", "set", link, "up")
            ip("-n", ns, "link", "set", peer, "name", "eth0")
            ip("-n", ns, "addr", "add", f"{addr}/24", "dev", "eth0")
            ip("-n", ns, "link", "set", "eth0", "up")
            ip("-n", ns, "link", "set", "lo", "up")

    def copy_project(self, i: int, pipeline_dir: str) -> str:
        """A copy of the pipeline's folder for host `i` (no `target`, `.git`, nor any store's
        `sessions`, `traces` and locks): its path."""
        dest = os.path.join(self.folder, f"host{i}")
        src = os.path.abspath(pipeline_dir)

        def ignore(folder: str, names: list[str]) -> list[str]:
            out = []
            if os.path.abspath(folder) == src:
                out += [n for n in names if n in ("target", ".git")]
            if os.path.basename(folder).startswith(".") and folder.endswith(".r2e"):
                out += [n for n in names if n in ("sessions", "traces", "serve.lock", "lock")]
            return out

        shutil.copytree(src, dest, symlinks=True, ignore=ignore)
        return dest

    def cleanup(self) -> list[str]:
        """Removes the namespaces, the links and (unless kept) the copies; returns what failed."""
        failed = []
        for kind, name in reversed(self.made):
            got = ip("netns", "del", name, check=False) if kind == "netns" else \
                ip("link", "del", name, check=False)
            # A veth goes with its namespace's end.
            if got.returncode != 0 and "Cannot find device" not in got.stderr:
                failed.append(f"{kind} {name}: {got.stderr.strip()}")
        self.made = []
        if not self.keep and self.made_folder:
            shutil.rmtree(self.folder, ignore_errors=True)
        return failed


def peak_mib(pid: int | None) -> float | None:
    """The peak resident memory (VmHWM) of process `pid`, in MiB; None when unknown."""
    if not pid:
        return None
    try:
        with open(f"/proc/{pid}/status") as f:
            for line in f:
                if line.startswith("VmHWM:"):
                    return int(line.split()[1]) / 1024.0  # kB
    except (OSError, ValueError, IndexError):
        pass
    return None


# ---------------------------------------------------------------------------------------------
# The load
# ---------------------------------------------------------------------------------------------


class Cut(Exception):
    """The session's server was killed (the session cannot go on there)."""


class Run:
    """What the sessions share: the stop conditions, the acknowledged submissions, the kill.

    `servers`: those this script started (none with `--server`); `target`: the one the kill
    run kills (the first). `outputs`: each server's output by URL (where its traces are)."""

    def __init__(self, args, deadline: float, servers: list[Server], outputs: dict[str, str]):
        self.args = args
        self.deadline = deadline
        self.servers = servers
        self.target = servers[0] if servers else None
        self.outputs = outputs
        self.several = len(outputs) > 1
        self.lock = threading.Lock()
        self.acked_submits = 0
        self.killed = threading.Event()
        self.killed_url: str | None = None
        self.peak_before_kill: float | None = None
        self.retries_429 = 0

    def output_of(self, url: str | None) -> str:
        if url in self.outputs:
            return self.outputs[url]
        return next(iter(self.outputs.values()))

    def cut(self, url: str | None) -> bool:
        """Whether the server of a session at `url` was killed: with one server, any session's
        (`url` None: not yet opened); with several, only that server's sessions'."""
        if not self.killed.is_set():
            return False
        return not self.several or (url is not None and url == self.killed_url)

    def past_deadline(self) -> bool:
        return time.monotonic() > self.deadline

    def acknowledge_submit(self) -> None:
        """Counts an acknowledged submission; the K-th kills the target server (under the lock,
        so that exactly one thread does)."""
        with self.lock:
            self.acked_submits += 1
            k = self.args.kill_after_submits
            if k and self.acked_submits == k and self.target is not None:
                self.peak_before_kill = peak_mib(self.target.pid)
                self.killed_url = self.target.url
                self.killed.set()
                self.target.kill()


class SessionLoad:
    """One session's work and what it observed. With several servers, a session cut by the
    kill opens a new one (the client places it on a server that answers) and does its steps
    again; `cut` lists the sessions it lost that way."""

    def __init__(self, index: int, instance: dict, edits: Edits, run: Run, client: Client):
        self.index, self.instance, self.edits, self.run, self.client = index, instance, edits, run, client
        self.sid: str | None = None
        self.server: str | None = None  # the URL of the server holding `sid`
        self.state = "pending"  # -> done | killed | timeout | error
        self.error: str | None = None
        self.acked = {"write": 0, "test": 0}  # of the session `sid`
        self.tests_done = 0  # every session's
        self.tests_by_server: dict[str, int] = {}
        self.reward: float | None = None  # the acknowledged submission's
        self.times: dict[str, list[float]] = {op: [] for op in OPS}
        self.errors: dict[str, int] = {op: 0 for op in OPS}
        # (edit kind, passed all) of each test run.
        self.outcomes: list[tuple[str, bool]] = []
        # (sid, server URL, acknowledged writes and tests) of each session the kill cut.
        self.cut: list[tuple[str, str, dict]] = []

    def call(self, op: str, fn):
        """`fn()` timed as `op`; a 429 is waited out (its time counts) until the run stops."""
        started = time.perf_counter()
        while True:
            try:
                result = fn()
                break
            except R2EError as e:
                if e.status == 429 and not self.run.past_deadline() and not self.run.cut(self.server):
                    with self.run.lock:
                        self.run.retries_429 += 1
                    time.sleep(e.retry_after if e.retry_after is not None else 0.5)
                    continue
                if not self.run.cut(self.server):
                    self.errors[op] += 1
                raise
        self.times[op].append((time.perf_counter() - started) * 1000.0)
        return result

    def __call__(self) -> None:
        while True:
            try:
                self.work()
                return
            except (R2EError, Cut) as e:
                if not self.run.cut(self.server):
                    self.state, self.error = "error", str(e)
                    return
                self.state = "killed"
                if not self.run.several or self.cut or self.run.past_deadline():
                    return
                # Its server is gone: a new session, on a server that answers.
                self.cut.append((self.sid, self.server, dict(self.acked)))
            except Exception as e:  # a bug here: report it, do not hang the run
                self.state, self.error = "error", f"{type(e).__name__}: {e}"
                return

    def stop_if_needed(self, session) -> bool:
        """Raises `Cut` when the session's server was killed; closes the session and returns
        True past the deadline."""
        if self.run.cut(self.server):
            raise Cut(f"{self.server} was killed")
        if self.run.past_deadline():
            self.state = "timeout"
            try:
                session.close()
            except R2EError:
                pass
            return True
        return False

    def work(self) -> None:
        self.sid = self.server = None
        self.acked = {"write": 0, "test": 0}
        session = self.call("open", lambda: self.client.open(self.instance["id"]))
        self.sid, self.server = session.id, session.server
        path = session.path or self.instance["path"]
        for step in range(self.run.args.steps):
            if self.stop_if_needed(session):
                return
            tag = f"r2e-load s{self.index} step{step} {uuid.uuid4().hex}"
            kind = "reference" if (step + self.index) % 2 == 0 else "wrong"
            text = self.edits.reference(tag) if kind == "reference" else self.edits.wrong(tag)
            self.call("write", lambda: session.write(path, text))
            self.acked["write"] += 1
            result = self.call("test", session.test)
            self.acked["test"] += 1
            self.tests_done += 1
            self.tests_by_server[self.server] = self.tests_by_server.get(self.server, 0) + 1
            passed_all = not result.get("error") and result.get("passed") == result.get("total")
            self.outcomes.append((kind, bool(passed_all)))
        if self.stop_if_needed(session):
            return
        answer = self.call("submit", session.submit)
        self.reward = float(answer["reward"])
        self.state = "done"
        self.run.acknowledge_submit()


# ---------------------------------------------------------------------------------------------
# Traces
# ---------------------------------------------------------------------------------------------


def read_trace(output: str, sid: str):
    """The trace's events and its count of lines that are not JSON; None when it is missing."""
    path = os.path.join(output, "traces", f"{sid}.jsonl")
    try:
        with open(path, encoding="utf-8", errors="replace") as f:
            raw = f.read().splitlines()
    except OSError:
        return None
    events, bad = [], 0
    for line in raw:
        if not line.strip():
            continue
        try:
            events.append(json.loads(line))
        except ValueError:
            bad += 1
    return events, bad


def trace_reward(events) -> float | None:
    for e in events:
        if e.get("event") == "action" and e.get("op") == "submit":
            obs = e.get("observation") or {}
            if "reward" in obs:
                return float(obs["reward"])
    return None


def whole_trace_problems(s: SessionLoad, output: str, steps: int,
                         reasons: tuple = ("submitted",)) -> list[str]:
    """What a completed session's trace lacks (empty: it is whole). `reasons`: the close
    reasons accepted (after a kill, a close line the server had not written yet when it died is
    written at the restart, reason `restart`)."""
    got = read_trace(output, s.sid)
    if got is None:
        return [f"{s.sid}: no trace"]
    events, bad = got
    problems = []
    if bad:
        problems.append(f"{s.sid}: {bad} trace lines are not JSON")
    if not events or events[0].get("event") != "open" or events[0].get("session") != s.sid:
        problems.append(f"{s.sid}: the first line is not its open line")
    actions = [e for e in events if e.get("event") == "action"]
    counts = {op: sum(1 for a in actions if a.get("op") == op) for op in ("write", "test", "submit")}
    if counts["write"] != steps or counts["test"] != steps:
        problems.append(f"{s.sid}: {counts['write']} writes and {counts['test']} tests traced, "
                        f"{steps} of each done")
    if counts["submit"] != 1:
        problems.append(f"{s.sid}: {counts['submit']} submits traced")
    seqs = [a.get("seq") for a in actions]
    if any(not isinstance(q, int) for q in seqs) or any(b <= a for a, b in zip(seqs, seqs[1:])):
        problems.append(f"{s.sid}: the actions' seq do not increase")
    last = events[-1] if events else {}
    if last.get("event") != "close" or last.get("reason") not in reasons:
        problems.append(f"{s.sid}: the last line is not a close line of reason "
                        f"{' or '.join(reasons)} ({json.dumps(last)[:120]})")
    return problems


def reward_problems(sessions: list[SessionLoad], output_of) -> list[str]:
    """What is wrong with the acknowledged rewards' traces; `output_of(url)`: the output of the
    server at `url`."""
    problems = []
    for s in sessions:
        if s.reward is None:
            continue
        got = read_trace(output_of(s.server), s.sid)
        traced = trace_reward(got[0]) if got else None
        if traced is None:
            problems.append(f"{s.sid}: reward {s.reward} acknowledged, no submit in its trace")
        elif abs(traced - s.reward) > 1e-9:
            problems.append(f"{s.sid}: reward {s.reward} acknowledged, {traced} in its trace")
    return problems


def settle(check, seconds: float = 5.0) -> list[str]:
    """`check()` until it finds no problem or `seconds` pass (a trace's last lines may be
    written just after the answer)."""
    deadline = time.monotonic() + seconds
    while True:
        problems = check()
        if not problems or time.monotonic() > deadline:
            return problems
        time.sleep(0.2)


def sessions_folder(output: str) -> str:
    """Where the server keeps its workspaces: the output's store `.NAME.r2e/sessions`, beside
    the output (whose generations builds replace)."""
    output = output.rstrip(os.sep)
    return os.path.join(os.path.dirname(output), "." + os.path.basename(output) + ".r2e", "sessions")


def session_dirs(output: str) -> list[str]:
    try:
        return sorted(os.listdir(sessions_folder(output)))
    except FileNotFoundError:
        return []


# ---------------------------------------------------------------------------------------------
# Reporting
# ---------------------------------------------------------------------------------------------


def percentile(values: list[float], q: float) -> float | None:
    """The nearest-rank percentile `q` (0..100) of `values`."""
    if not values:
        return None
    ordered = sorted(values)
    rank = max(1, -(-len(ordered) * q // 100))  # ceil
    return ordered[int(rank) - 1]


def rounded(x, digits=1):
    return None if x is None else round(x, digits)


def print_table(report: dict) -> None:
    out = []
    servers = report["servers"]
    where = ", ".join(x["url"] for x in servers)
    out.append(f"{'server' if len(servers) == 1 else f'{len(servers)} servers'} {where}: "
               f"{report['sessions']} sessions x {report['steps']} steps")
    out.append("")
    out.append(f"{'op':<8}{'count':>8}{'errors':>8}{'p50 ms':>10}{'p99 ms':>10}{'max ms':>10}")
    for op, row in report["ops"].items():
        cell = lambda v: f"{v:>10.1f}" if v is not None else f"{'-':>10}"
        out.append(f"{op:<8}{row['count']:>8}{row['errors']:>8}"
                   f"{cell(row['p50_ms'])}{cell(row['p99_ms'])}{cell(row['max_ms'])}")
    out.append("")
    st = report["states"]
    out.append("sessions: " + ", ".join(f"{n} {k}" for k, n in st.items() if n))
    out.append(f"steps: {report['steps_total']} in {report['wall_s']:.1f} s = "
               f"{report['steps_per_s']:.2f} steps/s (a step: a write and a test)")
    out.append(f"429 answers waited out: {report['retries_429']}")
    mib = lambda m: "unknown" if m is None else f"{m:.1f} MiB"
    if len(servers) == 1:
        out.append(f"server peak memory (VmHWM): {mib(servers[0]['peak_mem_mib'])}")
    else:
        for x in servers:
            host = f" (netns {x['netns']})" if x.get("netns") else ""
            out.append(f"server {x['url']}{host}: {x['sessions_opened']} sessions opened, "
                       f"{x['steps']} steps, peak memory (VmHWM) {mib(x['peak_mem_mib'])}"
                       + (", killed" if x.get("killed") else ""))
    e = report["edits"]
    out.append(f"reference edits passing all tests: {e['reference_pass']}/{e['reference_total']}; "
               f"wrong edits failing: {e['wrong_fail']}/{e['wrong_total']}")
    r = report["rewards"]
    out.append(f"submissions acknowledged: {r['acknowledged']} (reward 1.0: {r['full']}, "
               f"mean reward {r['mean']})")
    if report.get("kill"):
        k = report["kill"]
        out.append(f"{k.get('server') or 'the server'} killed after {k['after_submits']} "
                   f"acknowledged submissions; {k['cut_sessions']} sessions cut"
                   + (f" ({k['reopened']} opened again on another server)"
                      if k.get("reopened") is not None else "")
                   + f"; restarted in {k['restart_s']} s")
    out.append("")
    out.append("checks:")
    for c in report["checks"]:
        out.append(f"  {'PASS' if c['ok'] else 'FAIL'}  {c['name']}"
                   + (f": {c['detail']}" if c.get("detail") else ""))
    for w in report["warnings"]:
        out.append(f"  warning: {w}")
    out.append("")
    out.append("OK" if report["ok"] else "FAILED")
    print("\n".join(out))


# ---------------------------------------------------------------------------------------------
# Main
# ---------------------------------------------------------------------------------------------


def main(argv=None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    where = p.add_mutually_exclusive_group(required=True)
    where.add_argument("--r2e", metavar="BIN", help="start `BIN serve` (on a free port)")
    where.add_argument("--server", metavar="URL",
                       help="use a running server (or several: URLs separated by commas, "
                            "serving the same output)")
    p.add_argument("-p", "--pipeline", default=os.path.join(HERE, "..", "pipeline.toml"),
                   help="the pipeline served (default: the repository's pipeline.toml)")
    p.add_argument("--output", help="the pipeline's output (default: from the pipeline)")
    p.add_argument("--repo-root", help="the repositories' folder: DIR/NAME (default: the "
                                       "pipeline's [[repo]] paths, else its folder/examples)")
    p.add_argument("--token-env", help="the variable holding the token (a started server gets "
                                       "a random one when it is unset)")
    p.add_argument("--server-pid", type=int, help="a running server's pid, for its peak memory")
    p.add_argument("--sessions", type=int, default=50)
    p.add_argument("--steps", type=int, default=20)
    p.add_argument("--max-sessions", type=int, default=None,
                   help="each started server's limit (default 64; with --hosts N, "
                        "max(64, sessions/N + 32))")
    p.add_argument("--time-limit", type=float, default=900, help="seconds for the whole run")
    p.add_argument("--kill-after-submits", type=int, default=0, metavar="K",
                   help="SIGKILL the (first) server after K acknowledged submissions (0: never)")
    p.add_argument("--hosts", type=int, default=0, metavar="N",
                   help="with --r2e: N servers, each in a network namespace of its own (a host "
                        "with its own address) on its own copy of the project (needs root)")
    p.add_argument("--subnet", default="10.77.0",
                   help="the hosts' /24 (SUBNET.1 the bridge, SUBNET.2.. the hosts)")
    p.add_argument("--port", type=int, default=8080, help="the hosts' servers' port")
    p.add_argument("--hosts-dir", help="where the hosts' copies of the project go (default: a "
                                       "temporary folder, removed unless the run fails)")
    p.add_argument("--keep-hosts", action="store_true",
                   help="keep the hosts' copies (their traces) after a run that passed")
    p.add_argument("--json", action="store_true", help="one JSON object instead of the table")
    args = p.parse_args(argv)
    if args.kill_after_submits and not args.r2e:
        p.error("--kill-after-submits needs --r2e (a server this script started)")
    if args.hosts and not args.r2e:
        p.error("--hosts needs --r2e (the servers this script starts)")
    if args.hosts < 0 or args.sessions < 1 or args.steps < 0:
        p.error("--hosts, --sessions and --steps must be positive")
    if args.max_sessions is None:
        args.max_sessions = max(64, math.ceil(args.sessions / args.hosts) + 32) if args.hosts else 64
    try:
        return run(args)
    except SetupError as e:
        print(f"serve_load: {e}", file=sys.stderr)
        return 2


def _terminated(signum, frame):
    # SIGTERM ends the run like Ctrl-C: the `finally` blocks stop the servers and remove the hosts.
    raise SystemExit(128 + signum)


def run(args) -> int:
    started = time.monotonic()
    deadline = started + args.time_limit
    pipeline = read_pipeline(args.pipeline)
    output = os.path.abspath(args.output or pipeline["output"])
    pipeline_dir = os.path.dirname(os.path.abspath(args.pipeline))

    if args.hosts and not args.token_env:
        # A server on an address other than loopback needs a token.
        args.token_env = "R2E_LOAD_TOKEN"
        os.environ.pop(args.token_env, None)
    token = os.environ.get(args.token_env) if args.token_env else None
    if args.token_env and not token:
        if args.server:
            raise SetupError(f"--token-env {args.token_env}: the variable is not set")
        token = secrets.token_hex(16)

    binary = None
    if args.r2e:
        binary = os.path.abspath(args.r2e) if os.sep in args.r2e else args.r2e
    servers: list[Server] = []
    hosts = None
    status = 2
    previous = signal.signal(signal.SIGTERM, _terminated)
    try:
        if args.hosts:
            rel_output = os.path.relpath(output, pipeline_dir)
            if rel_output.startswith(os.pardir):
                raise SetupError(f"--hosts copies the pipeline's folder {pipeline_dir}: the output "
                                 f"{output} must be inside it")
            hosts = Hosts(args.hosts, args.subnet, args.hosts_dir, args.keep_hosts)
            hosts.setup()
            for i in range(args.hosts):
                copy = hosts.copy_project(i, pipeline_dir)
                servers.append(Server(
                    binary, os.path.join(copy, os.path.basename(args.pipeline)),
                    args.max_sessions, args.token_env, token,
                    output=os.path.join(copy, rel_output), netns=hosts.netns[i],
                    host=hosts.addrs[i], port=args.port, name=f"host{i}"))
        elif args.r2e:
            servers.append(Server(binary, os.path.abspath(args.pipeline), args.max_sessions,
                                  args.token_env, token, output=output))
        for server in servers:
            server.start(ready_within=max(10.0, deadline - time.monotonic()))
        if servers:
            outputs = {server.url: server.output for server in servers}
        else:
            outputs = {url: output for url in Client(args.server).base_urls}
        status = load(args, servers, outputs, token, pipeline, pipeline_dir, deadline)
        return status
    finally:
        for server in servers:
            server.stop()
            if status == 0:  # the log is kept (its path reported) only when something failed
                try:
                    os.remove(server.log_path)
                except OSError:
                    pass
        if hosts is not None:
            hosts.keep = hosts.keep or status != 0
            for problem in hosts.cleanup():
                print(f"serve_load: could not remove {problem}", file=sys.stderr)
            if hosts.keep:
                print(f"serve_load: the hosts' copies (outputs, traces) are kept in {hosts.folder}",
                      file=sys.stderr)
        signal.signal(signal.SIGTERM, previous)


def load(args, servers, outputs, token, pipeline, pipeline_dir, deadline) -> int:
    urls = list(outputs)
    client = Client(urls, token=token, timeout=60)
    try:
        instances = client.instances()
    except R2EError as e:
        raise SetupError(f"GET /v1/instances: {e}")
    if not instances:
        raise SetupError("the server serves no instance")

    # Each instance's reference file, and its edits.
    edits: dict[str, Edits] = {}
    for inst in instances:
        if args.repo_root:
            folder = os.path.join(args.repo_root, inst["repo"])
        else:
            folder = pipeline["repos"].get(inst["repo"]) or os.path.join(
                pipeline_dir, "examples", inst["repo"])
        path = os.path.join(folder, inst["path"])
        try:
            with open(path, encoding="utf-8") as f:
                edits[inst["id"]] = Edits(f.read(), inst["qualname"])
        except (OSError, ValueError) as e:
            raise SetupError(f"instance {inst['id']}: no reference in {path}: {e}")

    run_state = Run(args, deadline, servers, outputs)
    # One client for every session thread: with several servers, it spreads the sessions over
    # them (the fewest open first) and opens elsewhere when one refuses or is gone.
    shared = Client(urls, token=token, timeout=max(30.0, args.time_limit))
    loads = []
    for i in range(args.sessions):
        inst = instances[i % len(instances)]
        loads.append(SessionLoad(i, inst, edits[inst["id"]], run_state, shared))

    # The load.
    threads = [threading.Thread(target=s, name=f"session-{s.index}", daemon=True) for s in loads]
    t0 = time.monotonic()
    for t in threads:
        t.start()
    for t in threads:
        t.join(timeout=max(0.0, deadline + 30 - time.monotonic()))
    wall = time.monotonic() - t0
    for s in loads:
        if s.state == "pending":  # still running past the limit
            s.state = "timeout"

    checks: list[dict] = []
    warnings: list[str] = []

    def check(name: str, problems: list[str], summary: str = "") -> None:
        detail = summary
        if problems:
            detail = (summary + "; " if summary else "") + "; ".join(problems[:5])
            if len(problems) > 5:
                detail += f"; ... {len(problems) - 5} more"
        checks.append({"name": name, "ok": not problems, "detail": detail})

    # Each server's peak memory, now (the killed one's, just before the kill).
    peaks = {}
    for server in servers:
        peaks[server.url] = (run_state.peak_before_kill if server.url == run_state.killed_url
                             else peak_mib(server.pid))
    if not servers and args.server_pid:
        peaks[urls[0]] = peak_mib(args.server_pid)

    done = [s for s in loads if s.state == "done"]
    errored = [s for s in loads if s.state == "error"]
    timed_out = [s for s in loads if s.state == "timeout"]
    check("no session failed", [f"session {s.index} ({s.server} {s.sid}): {s.error}"
                                for s in errored])
    check("finished within the time limit",
          [f"{len(timed_out)} sessions were stopped at --time-limit"] if timed_out else [])
    # Right after the load (and the kill): every acknowledged reward is traced.
    check("acknowledged rewards in the traces",
          settle(lambda: reward_problems(loads, run_state.output_of)),
          f"{sum(1 for s in loads if s.reward is not None)} acknowledged")
    if len(urls) > 1:
        first = {}
        for s in loads:
            where = s.cut[0][1] if s.cut else s.server
            if where:
                first[where] = first.get(where, 0) + 1
        check("the sessions spread over every server",
              [f"{u}: no session" for u in urls if not first.get(u)],
              ", ".join(f"{u}: {first.get(u, 0)}" for u in urls) + " first opened")

    def whole_traces():
        def reasons(s):
            # A close the killed server had not written when it died is written at its restart.
            if run_state.killed.is_set() and (not run_state.several
                                              or s.server == run_state.killed_url):
                return ("submitted", "restart")
            return ("submitted",)
        check("whole traces of the completed sessions",
              settle(lambda: [p for s in done
                              for p in whole_trace_problems(s, run_state.output_of(s.server),
                                                            args.steps, reasons(s))]),
              f"{len(done)} sessions")

    kill = None
    survivors = urls
    if args.kill_after_submits:
        kill = verify_restart(args, run_state, client, loads, deadline, check, warnings)
        whole_traces()
        survivors = [u for u in urls if u != run_state.killed_url] if run_state.several else []
        if run_state.several:
            reopened = [s for s in loads if s.cut]
            check("the sessions cut by the kill completed on another server",
                  [f"session {s.index} ({s.sid}): {s.state}" for s in reopened
                   if s.state != "done" or s.server == run_state.killed_url],
                  f"{len(reopened)} opened again")
    else:
        whole_traces()
    # What the servers that were not killed still hold of the load's sessions.
    ours = {s.sid for s in loads if s.sid}
    for url in survivors:
        try:
            still = [x["session"] for x in client.sessions(server=url) if x.get("session") in ours]
        except R2EError as e:
            still = [f"(GET /v1/sessions: {e})"]
        if still:
            warnings.append(f"{url}: {len(still)} of the load's sessions are still listed as open")
        out_dir = run_state.output_of(url)
        left = [d for d in session_dirs(out_dir) if d in ours]
        if left:
            warnings.append(f"{len(left)} finished sessions still have a workspace in "
                            f"{sessions_folder(out_dir)}")

    # The report.
    ops = {}
    for op in OPS:
        times = [t for s in loads for t in s.times[op]]
        ops[op] = {
            "count": len(times),
            "errors": sum(s.errors[op] for s in loads),
            "p50_ms": rounded(percentile(times, 50)),
            "p99_ms": rounded(percentile(times, 99)),
            "max_ms": rounded(max(times) if times else None),
        }
    steps_total = sum(s.tests_done for s in loads)
    outcomes = [o for s in loads for o in s.outcomes]
    rewards = [s.reward for s in loads if s.reward is not None]
    states = {k: sum(1 for s in loads if s.state == k)
              for k in ("done", "killed", "timeout", "error")}
    by_name = {server.url: server for server in servers}
    server_rows = []
    for url in urls:
        server = by_name.get(url)
        server_rows.append({
            "url": url,
            "netns": server.netns if server else None,
            "output": run_state.output_of(url),
            "sessions_opened": sum(1 for s in loads for sid, where, _ in s.cut if where == url)
            + sum(1 for s in loads if s.sid and s.server == url),
            "steps": sum(s.tests_by_server.get(url, 0) for s in loads),
            "peak_mem_mib": rounded(peaks.get(url)),
            "killed": url == run_state.killed_url,
        })
    known = [x["peak_mem_mib"] for x in server_rows if x["peak_mem_mib"] is not None]
    report = {
        "server": ",".join(urls),
        "servers": server_rows,
        "hosts": args.hosts,
        "sessions": args.sessions,
        "steps": args.steps,
        "max_sessions": args.max_sessions if servers else None,
        "instances": len(instances),
        "ops": ops,
        "states": states,
        "steps_total": steps_total,
        "wall_s": round(wall, 3),
        "steps_per_s": round(steps_total / wall, 3) if wall > 0 else 0.0,
        "retries_429": run_state.retries_429,
        "peak_mem_mib": max(known) if known else None,  # the largest server's
        "edits": {
            "reference_total": sum(1 for k, _ in outcomes if k == "reference"),
            "reference_pass": sum(1 for k, ok in outcomes if k == "reference" and ok),
            "wrong_total": sum(1 for k, _ in outcomes if k == "wrong"),
            "wrong_fail": sum(1 for k, ok in outcomes if k == "wrong" and not ok),
        },
        "rewards": {
            "acknowledged": len(rewards),
            "full": sum(1 for r in rewards if r >= 1.0),
            "mean": round(sum(rewards) / len(rewards), 4) if rewards else None,
        },
        "kill": kill,
        "checks": checks,
        "warnings": warnings,
        "ok": all(c["ok"] for c in checks),
    }
    e = report["edits"]
    check("every reference edit passes, every wrong edit fails",
          ([f"{e['reference_total'] - e['reference_pass']} runs of the reference (with a tag "
            "statement) did not pass all tests"] if e["reference_pass"] < e["reference_total"]
           else [])
          + ([f"{e['wrong_total'] - e['wrong_fail']} runs of a wrong body passed all tests"]
             if e["wrong_fail"] < e["wrong_total"] else []),
          f"{e['reference_pass']}/{e['reference_total']} and {e['wrong_fail']}/{e['wrong_total']}")
    report["ok"] = all(c["ok"] for c in checks)
    if not report["ok"]:
        for server in servers:
            warnings.append(f"{server.name}'s log: {server.log_path}")
    if args.json:
        print(json.dumps(report, indent=None))
    else:
        print_table(report)
    return 0 if report["ok"] else 1


def verify_restart(args, run_state, client, loads, deadline, check, warnings) -> dict:
    """After the kill: the cut sessions' traces, a restart, its service and its clean-up."""
    k = args.kill_after_submits
    server = run_state.target
    killed = run_state.killed.is_set() and server is not None and not server.alive()
    check(f"the server {server.url if server else ''} was killed after {k} acknowledged "
          "submissions",
          [] if killed else [f"only {sum(1 for s in loads if s.reward is not None)} submissions "
                             "were acknowledged"])
    reopened = sum(1 for s in loads if s.cut) if run_state.several else None
    if not killed:
        return {"server": None, "after_submits": k, "cut_sessions": 0, "reopened": reopened,
                "restart_s": None}
    output = server.output
    # Sessions that were open when the server died (a submit in flight may have landed):
    # (sid, acknowledged writes and tests).
    cut = [(sid, acked) for s in loads for sid, _, acked in s.cut]
    cut += [(s.sid, s.acked) for s in loads if s.state == "killed" and s.sid]

    # What the cut sessions acknowledged should be traced (a warning: only rewards are owed).
    for sid, acked in cut:
        got = read_trace(output, sid)
        if got is None:
            warnings.append(f"{sid}: a session cut by the kill has no trace")
            continue
        actions = [e for e in got[0] if e.get("event") == "action"]
        for op in ("write", "test"):
            traced = sum(1 for a in actions if a.get("op") == op)
            if traced < acked[op]:
                warnings.append(f"{sid}: {acked[op]} {op}s acknowledged, {traced} traced")

    # The restart.
    t = time.monotonic()
    try:
        server.start(ready_within=max(60.0, deadline - time.monotonic()))
    except SetupError as e:
        check("the restarted server serves", [str(e)])
        return {"server": run_state.killed_url, "after_submits": k, "cut_sessions": len(cut),
                "reopened": reopened, "restart_s": None}
    restart_s = round(time.monotonic() - t, 3)
    alone = Client(server.url, token=client.token, timeout=60)

    # Leftover workspaces are removed at startup.
    check("no orphaned workspace after the restart",
          settle(lambda: [os.path.join(sessions_folder(output), d) for d in session_dirs(output)]))

    problems = []
    try:
        if not alone.instances():
            problems.append("GET /v1/instances lists no instance")
        else:
            session = alone.open(alone.instances()[0]["id"])
            session.close()
            left = settle(lambda: [d for d in session_dirs(output) if d == session.id])
            if left:
                problems.append(f"the closed session {session.id} keeps its workspace")
    except R2EError as e:
        problems.append(str(e))
    check("the restarted server serves (instances, a session opened and closed)", problems)

    # The cut sessions' traces end with a close of reason `restart` (or, for a submit that
    # landed without its answer, `submitted`).
    def cut_problems():
        out = []
        for sid, _ in cut:
            got = read_trace(output, sid)
            if got is None:
                out.append(f"{sid}: no trace")
                continue
            events = got[0]
            last = events[-1] if events else {}
            submitted = trace_reward(events) is not None
            ok_reasons = ("restart", "submitted") if submitted else ("restart",)
            if last.get("event") != "close" or last.get("reason") not in ok_reasons:
                out.append(f"{sid}: ends with {json.dumps(last)[:120]}")
        return out

    check("the cut sessions' traces end with a close of reason `restart`", settle(cut_problems),
          f"{len(cut)} sessions cut")
    return {"server": run_state.killed_url, "after_submits": k, "cut_sessions": len(cut),
            "reopened": reopened, "restart_s": restart_s, "restarted_at": server.url,
            "restart_peak_mem_mib": rounded(peak_mib(server.pid))}


if __name__ == "__main__":
    sys.exit(main())
