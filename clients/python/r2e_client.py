"""A client of `r2e serve`, the benchmark served as a programming-agent environment.

Standard library only (urllib), Python 3.8+. One file: copy it next to an agent, or put this
folder on `sys.path`.

    from r2e_client import Client

    client = Client("http://127.0.0.1:8080", token=os.environ.get("R2E_TOKEN"))
    with client.open(client.instances()[0]["id"]) as session:
        text = session.read(session.path)
        session.write(session.path, replace_function(text, session.qualname, my_code))
        print(format_feedback(session.test()))
        print(session.submit())

Public API:

- `R2EError(status, message, retry_after=None)`: an error answer of the server (or, with
  `status` None, no answer at all: the server could not be reached).
- `Client(base_url, token=None, timeout=120, retries_on_429=0, down_seconds=10)`:
  `instances()`, `tasks()` (bug-fix tasks), `open(instance) -> Session`, `sessions()`, `openapi()`, and `request(...)` for
  any route. `base_url` is one server's URL, or several servers' (a list, or separated by
  commas): `open` spreads the sessions over them and tries another server when one answers
  429, 5xx or not at all.
- `Session`: `id`, `instance`, `path`, `qualname`, `task`, `problem_statement` (a bug-fix
  session's), `server`, `closed`; `read(path)`, `write(path, text)`,
  `exec(command, timeout_s=10)`, `test()`, `submit()`, `close()`; a context manager that closes
  it.
- `R2EEnvBase(client, max_steps=50, max_seconds=None, kind="instance")`: the environment with
  Gymnasium's API (`kind="bugfix"` draws bug-fix tasks)
  (`reset(seed=None, options=None) -> (obs, info)`, `step(action) -> (obs, reward, terminated,
  truncated, info)`, `render()`, `close()`), standard library only. `R2EEnv` (from `r2e_gym`,
  which needs gymnasium; also reachable here as `r2e_client.R2EEnv`) is the same as a
  `gymnasium.Env` with its observation and action spaces.
- `outcome_of(op, answer)`: `pass`, `fail` or `error` of a test or submit answer;
  `fit_text(text)`: a string as an observation holds it.
- Pure helpers: `replace_function(source, qualname, new_code)`, `find_function(source,
  qualname)`, `extract_code(reply)`, `format_feedback(test_result)`.
- One answer, checked (what the verifiers and Inspect adapters share): `SOLVE_SYSTEM_PROMPT`,
  `solve_prompt(row)` and `instance_tests(row)` of an instance's row, and
  `check_answer(client, instance, reply, tests=None)`, which judges a model's reply through the
  server and returns its outcome (`pass`, `fail`, or `error` when no check could be made).
"""

from __future__ import annotations

import ast
import io
import json
import numbers
import random
import re
import textwrap
import threading
import time
import tokenize
import urllib.error
import urllib.parse
import urllib.request
from typing import Any, Dict, Iterator, List, Optional, Sequence, Tuple

__all__ = [
    "R2EError",
    "Client",
    "Session",
    "R2EEnvBase",
    "OPS",
    "OUTCOMES",
    "OBS_KEYS",
    "MAX_OBS_CHARS",
    "obs_char_allowed",
    "fit_text",
    "outcome_of",
    "replace_function",
    "find_function",
    "extract_code",
    "format_feedback",
    "SOLVE_SYSTEM_PROMPT",
    "solve_prompt",
    "instance_tests",
    "check_answer",
]


# ---------------------------------------------------------------------------------------------
# HTTP client
# ---------------------------------------------------------------------------------------------


class R2EError(Exception):
    """An error answer of the server: `status` (400, 401, 404, 409, 413, 429, 500, ...), the
    server's `message` (its `{"error": ...}`), and for a 429 `retry_after`, the seconds its
    `Retry-After` header asks to wait (None without one).

    `status` is None when no answer came: the server could not be reached or the connection
    broke (the message says why)."""

    def __init__(self, status: Optional[int], message: str, retry_after: Optional[float] = None):
        self.status = status
        self.message = message
        self.retry_after = retry_after
        where = f"HTTP {status}" if status is not None else "no answer"
        super().__init__(f"{where}: {message}")


def _retry_after(value: Optional[str]) -> Optional[float]:
    """The seconds of a `Retry-After` header (a number of seconds; an HTTP date is not parsed)."""
    if value is None:
        return None
    try:
        return max(0.0, float(value.strip()))
    except ValueError:
        return None


def _split_urls(base_url: Any) -> List[str]:
    """The servers' URLs of `Client(base_url)`: one URL, several separated by commas, or a
    list (or tuple) of URLs; without trailing `/`, each once, in the order given."""
    if isinstance(base_url, str):
        parts = base_url.split(",")
    elif isinstance(base_url, (list, tuple)):
        parts = []
        for u in base_url:
            if not isinstance(u, str):
                raise TypeError(f"a server's URL is a string, not {type(u).__name__}")
            parts.extend(u.split(","))
    else:
        raise TypeError(f"base_url is a URL, URLs separated by commas or a list of URLs, "
                        f"not {type(base_url).__name__}")
    urls: List[str] = []
    for part in parts:
        url = part.strip().rstrip("/")
        if url and url not in urls:
            urls.append(url)
    if not urls:
        raise ValueError("no server URL given")
    return urls


def _unavailable(e: R2EError) -> bool:
    """Whether an error says the server, not the request, was the trouble: no answer, a 429
    (full) or a 5xx. Another server may answer the same request."""
    return e.status is None or e.status == 429 or e.status >= 500


class Client:
    """The server at `base_url` (e.g. `http://127.0.0.1:8080`), or several servers serving the
    same dataset: `base_url` a list of URLs, or URLs separated by commas
    (`"http://10.0.0.2:8080,http://10.0.0.3:8080"`). `base_urls` is the list; `base_url` its
    first, where requests go that name no server.

    With several servers, `open()` spreads the sessions: it picks the server where this client
    has the fewest sessions open or being opened (ties in turn, round robin), and when that server answers 429,
    gives no answer, answers 5xx or an `outcome` of `error`, it tries the next one, each server
    at most once per round. When every server refused and at least one answered 429, it waits
    the shortest `Retry-After` they gave (1 s without one) and tries another round, up to
    `retries_on_429` rounds; then it raises the 429 (`retry_after` set). A server that gave no
    answer or a 5xx is tried last for `down_seconds`. A `Session` stays bound to the server
    that opened it (sessions live in their server). `instances()` and `openapi()` ask the first
    server that answers; `sessions()` lists every server's.

    `token`: sent as `Authorization: Bearer TOKEN` (a server started with `--token-env`; the
    same for every server). `timeout`: seconds to wait for each answer. `retries_on_429`: how
    many times a request answered 429 (too many requests) is sent again, after the
    `Retry-After` the server gives (1 s without one); 0 raises the 429 as an `R2EError` at
    once. Thread-safe: threads may share one client."""

    def __init__(
        self,
        base_url: Any,
        token: Optional[str] = None,
        timeout: float = 120,
        retries_on_429: int = 0,
        down_seconds: float = 10.0,
    ):
        self.base_urls: List[str] = _split_urls(base_url)
        self.base_url = self.base_urls[0]
        self.token = token
        self.timeout = timeout
        self.retries_on_429 = retries_on_429
        self.down_seconds = down_seconds
        self._lock = threading.Lock()
        self._turn = 0  # round robin among the servers with as few sessions
        self._open: Dict[str, int] = {u: 0 for u in self.base_urls}
        self._down_until: Dict[str, float] = {u: 0.0 for u in self.base_urls}

    def __repr__(self) -> str:
        if len(self.base_urls) == 1:
            return f"Client({self.base_url!r})"
        return f"Client({self.base_urls!r})"

    # The one place requests are made.
    def request(
        self,
        method: str,
        route: str,
        body: Any = None,
        raw: Optional[bytes] = None,
        text: bool = False,
        timeout: Optional[float] = None,
        server: Optional[str] = None,
        retries_on_429: Optional[int] = None,
    ) -> Any:
        """Sends `method route` (`route` starts with `/`, already quoted) to `server` (a base
        URL; default `base_url`) and returns the answer: parsed JSON, or with `text=True` the
        body decoded as UTF-8.

        `body` is sent as JSON; `raw` as the body itself (`text/plain; charset=utf-8`). Raises
        `R2EError` on an error status or when no answer comes. `retries_on_429`: this request's,
        in place of the client's."""
        headers = {"Accept": "application/json"}
        data = None
        if raw is not None:
            data = raw
            headers["Content-Type"] = "text/plain; charset=utf-8"
        elif body is not None:
            data = json.dumps(body).encode("utf-8")
            headers["Content-Type"] = "application/json"
        if self.token:
            headers["Authorization"] = f"Bearer {self.token}"
        url = (server.rstrip("/") if server else self.base_url) + route
        allowed = self.retries_on_429 if retries_on_429 is None else retries_on_429
        retries = 0
        while True:
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                    payload = resp.read()
            except urllib.error.HTTPError as e:
                err = _http_error(e)
                if err.status == 429 and retries < allowed:
                    retries += 1
                    time.sleep(err.retry_after if err.retry_after is not None else 1.0)
                    continue
                raise err from None
            except (urllib.error.URLError, OSError) as e:
                # Refused, reset, timed out: no HTTP answer.
                reason = getattr(e, "reason", e)
                raise R2EError(None, f"{method} {url}: {reason}") from None
            if text:
                return payload.decode("utf-8")
            if not payload:
                return None
            try:
                return json.loads(payload.decode("utf-8"))
            except ValueError:
                raise R2EError(None, f"{method} {url}: the answer is not JSON: {payload[:200]!r}")

    # The servers.
    def _order(self) -> List[str]:
        """The servers in the order an open tries them: those not marked down first, then by
        this client's sessions open there, ties in turn."""
        with self._lock:
            n = len(self.base_urls)
            turn = self._turn
            self._turn = (turn + 1) % n
            now = time.monotonic()
            ranked = sorted(
                range(n),
                key=lambda i: (
                    self._down_until[self.base_urls[i]] > now,
                    self._open[self.base_urls[i]],
                    (i - turn) % n,
                ),
            )
            return [self.base_urls[i] for i in ranked]

    def _mark(self, server: str, error: Optional[R2EError]) -> None:
        """Notes how `server` answered: down for `down_seconds` after no answer or a 5xx."""
        with self._lock:
            if server not in self._down_until:
                return
            if error is None:
                self._down_until[server] = 0.0
            elif error.status is None or error.status >= 500:
                self._down_until[server] = time.monotonic() + self.down_seconds

    def _session_closed(self, server: str) -> None:
        with self._lock:
            if self._open.get(server, 0) > 0:
                self._open[server] -= 1

    def open_counts(self) -> Dict[str, int]:
        """The sessions this client opened and has not seen closed, by server."""
        with self._lock:
            return dict(self._open)

    def _each_server(self, what: str, fn: Any) -> Any:
        """`fn(server)` on the servers in turn until one answers; an error other than no answer,
        a 429 or a 5xx is raised at once."""
        tried: List[Tuple[str, R2EError]] = []
        for url in self._order():
            try:
                result = fn(url)
            except R2EError as e:
                if not _unavailable(e):
                    raise
                self._mark(url, e)
                tried.append((url, e))
                continue
            self._mark(url, None)
            return result
        raise _all_refused(what, tried)

    # Routes.
    def instances(self) -> List[Dict[str, Any]]:
        """The instances served: dicts with `id`, `repo`, `path`, `qualname`, `spec`,
        `problem` and `tests` (the number of tests). From the first server that answers."""
        return self._each_server(
            "GET /v1/instances",
            lambda url: self.request("GET", "/v1/instances", server=url)["instances"],
        )

    def tasks(self) -> List[Dict[str, Any]]:
        """The bug-fix tasks served (`[bugfix]`): dicts with `id`, `repo` and
        `problem_statement`; empty when the dataset has none. From the first server that
        answers."""
        return self._each_server(
            "GET /v1/instances",
            lambda url: self.request("GET", "/v1/instances", server=url).get("tasks") or [],
        )

    def open(self, instance: str) -> "Session":
        """Opens a session on `instance` (an id): a fresh workspace with the function stubbed.
        With several servers, on the one where this client has the fewest sessions open, or the
        next one that accepts it (see the class)."""
        rounds = 0
        while True:
            tried: List[Tuple[str, R2EError]] = []
            for url in self._order():
                # Counted while it is being opened, so that opens at once from several threads
                # spread too.
                with self._lock:
                    self._open[url] = self._open.get(url, 0) + 1
                try:
                    answer = self.request(
                        "POST", "/v1/sessions", body={"instance": instance}, server=url,
                        retries_on_429=0 if len(self.base_urls) > 1 else None,
                    )
                    if isinstance(answer, dict) and answer.get("outcome") == "error":
                        raise R2EError(None, f"POST {url}/v1/sessions answered outcome `error`: "
                                             f"{answer.get('error')}")
                except BaseException as e:
                    self._session_closed(url)
                    if not isinstance(e, R2EError) or not _unavailable(e):
                        raise
                    self._mark(url, e)
                    tried.append((url, e))
                    continue
                self._mark(url, None)
                return Session(self, answer, server=url)
            waits = [e.retry_after if e.retry_after is not None else 1.0
                     for _, e in tried if e.status == 429]
            # One server: `request` waited its 429s out already.
            if waits and len(self.base_urls) > 1 and rounds < self.retries_on_429:
                rounds += 1
                time.sleep(min(waits))
                continue
            raise _all_refused(f"POST /v1/sessions ({instance})", tried)

    def sessions(self, server: Optional[str] = None) -> List[Dict[str, Any]]:
        """The open sessions: dicts with `session`, `instance` and `idle_seconds`, and with
        several servers `server` (the URL of the one holding it). Every server's, or `server`'s
        alone."""
        servers = [server.rstrip("/")] if server else self.base_urls
        found: List[Dict[str, Any]] = []
        for url in servers:
            listed = self.request("GET", "/v1/sessions", server=url)["sessions"]
            if len(self.base_urls) > 1 or server:
                for entry in listed:
                    entry["server"] = url
            found.extend(listed)
        return found

    def openapi(self) -> Dict[str, Any]:
        """The server's OpenAPI description (the first server's that answers)."""
        return self._each_server(
            "GET /openapi.json", lambda url: self.request("GET", "/openapi.json", server=url)
        )


def _all_refused(what: str, tried: List[Tuple[str, R2EError]]) -> R2EError:
    """The error when no server took a request: the one error of a lone server; else one that
    names each server's, with the status of a 429 among them (and the shortest `Retry-After`),
    else of the last. `tried` lists (server, error)."""
    if len(tried) == 1:
        return tried[0][1]
    full = [e for _, e in tried if e.status == 429]
    if full:
        waits = [e.retry_after for e in full if e.retry_after is not None]
        status, retry = 429, (min(waits) if waits else None)
    else:
        status, retry = tried[-1][1].status, None
    detail = "; ".join(f"{url}: {e}" for url, e in tried)
    err = R2EError(status, f"{what}: no server took it ({detail})", retry)
    err.tried = tried  # type: ignore[attr-defined]
    return err


def _http_error(e: urllib.error.HTTPError) -> R2EError:
    """The `R2EError` of an error answer: its `{"error": ...}` message, or its text."""
    try:
        payload = e.read().decode("utf-8", "replace")
    except Exception:  # a broken body: the status says enough
        payload = ""
    message = payload.strip() or (e.reason if isinstance(e.reason, str) else str(e))
    try:
        parsed = json.loads(payload)
        if isinstance(parsed, dict) and "error" in parsed:
            message = str(parsed["error"])
    except ValueError:
        pass
    retry = _retry_after(e.headers.get("Retry-After") if e.headers else None)
    return R2EError(e.code, message, retry)


def _quote(part: str) -> str:
    """A path (or id) put in a URL: every character but `/` and unreserved ones escaped."""
    return urllib.parse.quote(part, safe="/")


class Session:
    """An open session: its `id`, `instance` (id), `path` (the function's file, relative to the
    workspace), `qualname`, and `server` (the base URL of the server holding it: every request
    of the session goes there). `closed` turns true after `submit()` or `close()`.

    Used as a context manager, it is closed on exit (a session already gone is no error)."""

    def __init__(self, client: Client, answer: Dict[str, Any], server: Optional[str] = None):
        self.client = client
        self.server: str = (server or client.base_url).rstrip("/")
        self.id: str = answer["session"]
        self.instance: str = answer.get("instance", "")
        self.path: str = answer.get("path", "")
        self.qualname: str = answer.get("qualname", "")
        # A bug-fix session: its task and report (no path: finding the bug is the agent's).
        self.task: str = answer.get("task", "")
        self.problem_statement: str = answer.get("problem_statement", "")
        self._closed = False

    @property
    def closed(self) -> bool:
        return self._closed

    @closed.setter
    def closed(self, value: bool) -> None:
        if value and not self._closed:
            closed = getattr(self.client, "_session_closed", None)
            if closed is not None:
                closed(self.server)
        self._closed = bool(value)

    def __repr__(self) -> str:
        return f"Session({self.id!r}, instance={self.instance!r}, server={self.server!r})"

    def _route(self, tail: str = "") -> str:
        return f"/v1/sessions/{_quote(self.id)}{tail}"

    def _request(self, method: str, tail: str, **kwargs: Any) -> Any:
        return self.client.request(method, self._route(tail), server=self.server, **kwargs)

    def read(self, path: str) -> str:
        """The text of the workspace's file `path` (relative to the workspace)."""
        return self._request("GET", "/files/" + _quote(path), text=True)

    def write(self, path: str, text: str) -> Dict[str, Any]:
        """Writes `text` to the workspace's file `path`: `{"path", "bytes"}`."""
        return self._request("PUT", "/files/" + _quote(path), raw=text.encode("utf-8"))

    def exec(self, command: str, timeout_s: float = 10) -> Dict[str, Any]:
        """Runs `command` in the workspace: `{"stdout", "stderr", "exit_code", "timed_out"}`
        (`exit_code` None when it was killed)."""
        # Wait for the server a little longer than it lets the command run.
        wait = max(self.client.timeout, float(timeout_s) + 30)
        return self._request(
            "POST", "/exec", body={"command": command, "timeout_s": timeout_s}, timeout=wait
        )

    def test(self) -> Dict[str, Any]:
        """Runs the instance's tests on the workspace: `{"outcome", "passed", "total", "error",
        "failure_class", "tests"}`; `outcome` is `pass`, `fail` or `error` (the check could not
        judge the function: not its doing; test again)."""
        return self._request("POST", "/test")

    def submit(self) -> Dict[str, Any]:
        """Submits the workspace: `{"outcome", "reward", "passed_all", "passed", "total",
        "error"}`. The session is closed afterwards, unless the outcome is `error` (then the
        reward is None, `error` says why, and the session stays open to submit again, on the
        same server)."""
        answer = self._request("POST", "/submit")
        self.closed = answer.get("outcome") != "error"
        return answer

    def close(self) -> None:
        """Closes the session (its workspace is removed). A session already gone is no error."""
        if self.closed:
            return
        try:
            self._request("DELETE", "")
        except R2EError as e:
            if e.status != 404:
                raise
        self.closed = True

    def __enter__(self) -> "Session":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


# ---------------------------------------------------------------------------------------------
# Pure helpers
# ---------------------------------------------------------------------------------------------

_FuncDef = (ast.FunctionDef, ast.AsyncFunctionDef)
# Statements whose bodies hold definitions without adding to their qualified names.
_BLOCKS = (ast.If, ast.Try, ast.With, ast.AsyncWith, ast.For, ast.AsyncFor, ast.While)
if hasattr(ast, "TryStar"):
    _BLOCKS = _BLOCKS + (ast.TryStar,)  # type: ignore[attr-defined]


def _child_blocks(stmt: ast.stmt) -> Iterator[List[ast.stmt]]:
    """The statement lists inside a block statement (`if`, `try`, `with`, `for`, `while`,
    `match`): definitions there are in the enclosing scope."""
    for field in ("body", "orelse", "finalbody"):
        stmts = getattr(stmt, field, None)
        if stmts:
            yield stmts
    for handler in getattr(stmt, "handlers", None) or []:
        yield handler.body
    for case in getattr(stmt, "cases", None) or []:  # match (3.10+)
        yield case.body


def _scope_defs(stmts: Sequence[ast.stmt]) -> Iterator[ast.stmt]:
    """The class and function definitions of a scope, in source order, including those inside
    its `if`/`try`/`with`/... blocks."""
    for stmt in stmts:
        if isinstance(stmt, _FuncDef + (ast.ClassDef,)):
            yield stmt
        elif isinstance(stmt, _BLOCKS) or type(stmt).__name__ == "Match":
            for block in _child_blocks(stmt):
                yield from _scope_defs(block)


def _find_in(stmts: Sequence[ast.stmt], parts: Sequence[str]) -> Optional[ast.stmt]:
    """The first function definition whose qualified name, from this scope, is `parts`
    (`<locals>` steps into a function's body, as Python's `__qualname__` writes it)."""
    if not parts:
        return None
    head, rest = parts[0], parts[1:]
    for node in _scope_defs(stmts):
        if node.name != head:  # type: ignore[attr-defined]
            continue
        if not rest:
            if isinstance(node, _FuncDef):
                return node
            continue
        inner = rest
        if isinstance(node, _FuncDef):
            # A function's own definitions are `f.<locals>.g`; accept `f.g` as well.
            if inner[0] == "<locals>":
                inner = inner[1:]
        found = _find_in(node.body, inner)  # type: ignore[attr-defined]
        if found is not None:
            return found
    return None


def _first_line(node: ast.stmt) -> int:
    """The 1-based line a definition starts on: its first decorator's, or its `def`'s."""
    decorators = getattr(node, "decorator_list", None) or []
    return min([node.lineno] + [d.lineno for d in decorators])


def find_function(source: str, qualname: str) -> Tuple[int, int, ast.stmt]:
    """The function `qualname` (`f`, `A.b`, `f.<locals>.g`) defined in `source`: `(first, last,
    node)`, its 1-based first line (its first decorator's) and last line, and its `ast` node.
    The first definition in source order when there are several. Raises `ValueError` when
    `source` does not parse or defines no such function."""
    try:
        tree = ast.parse(source)
    except SyntaxError as e:
        raise ValueError(f"the source does not parse: {e}") from None
    node = _find_in(tree.body, [p for p in qualname.split(".") if p])
    if node is None:
        raise ValueError(f"no function `{qualname}` is defined in the source")
    return _first_line(node), node.end_lineno or node.lineno, node  # type: ignore[return-value]


def _string_lines(code: str) -> set:
    """The 1-based numbers of the lines of `code` that start inside a string literal (the second
    and later lines of a multi-line string): their text is part of the string's value, so they
    must not be re-indented. Empty when `code` does not tokenize."""
    inside = set()
    fstring_starts: List[int] = []
    try:
        for tok in tokenize.generate_tokens(io.StringIO(code).readline):
            name = tokenize.tok_name.get(tok.type, "")
            if name == "STRING" and tok.end[0] > tok.start[0]:
                inside.update(range(tok.start[0] + 1, tok.end[0] + 1))
            elif name == "FSTRING_START":  # 3.12+: f-strings come in pieces
                fstring_starts.append(tok.start[0])
            elif name == "FSTRING_END" and fstring_starts:
                start = fstring_starts.pop()
                if tok.end[0] > start:
                    inside.update(range(start + 1, tok.end[0] + 1))
    except (tokenize.TokenError, IndentationError, SyntaxError):
        return set()
    return inside


def _reindent(code: str, indent: str) -> str:
    """`code` dedented (by its least indented line) then indented by `indent`, except the lines
    that start inside a multi-line string, which keep their text. Blank lines become empty; the
    result ends with a newline."""
    lines = code.splitlines()
    strings = _string_lines(code)
    margins = [
        len(line) - len(line.lstrip())
        for n, line in enumerate(lines, 1)
        if n not in strings and line.strip()
    ]
    margin = min(margins, default=0)
    out = []
    for n, line in enumerate(lines, 1):
        if n in strings:
            out.append(line)
        elif not line.strip():
            out.append("")
        else:
            out.append(indent + line[margin:])
    return "\n".join(out) + "\n"


def _candidate_def(new_code: str, qualname: str) -> str:
    """The part of `new_code` that replaces the function: the definition of its last name
    component (decorators included) when `new_code` holds one (the whole qualified name first,
    then one at module level, then one anywhere), else all of `new_code`. A whole model reply
    that does not parse but holds a fenced block is read as its code (`extract_code`)."""
    tries = [new_code, textwrap.dedent(new_code)]
    if "```" in new_code:
        tries.append(extract_code(new_code))
    for code in tries:
        try:
            tree = ast.parse(code)
        except SyntaxError:
            continue
        name = qualname.split(".")[-1]
        node = _find_in(tree.body, [p for p in qualname.split(".") if p])
        if node is None:
            node = next(
                (n for n in _scope_defs(tree.body) if isinstance(n, _FuncDef) and n.name == name),
                None,
            )
        if node is None:
            defs = [n for n in ast.walk(tree) if isinstance(n, _FuncDef) and n.name == name]
            node = min(defs, key=lambda n: n.lineno, default=None)
        if node is None:
            return code
        lines = code.splitlines()
        return "\n".join(lines[_first_line(node) - 1 : node.end_lineno])
    return new_code


def replace_function(source: str, qualname: str, new_code: str) -> str:
    """`source` with the function `qualname` (`f`, `A.b`) replaced by `new_code`.

    The original's lines, from its first decorator to its last line, are replaced by `new_code`
    dedented then indented like the original's first line (lines inside multi-line strings are
    kept as written). When `new_code` defines a function of the same name (e.g. a model's reply
    holding imports, helpers, a whole class or a test), only that definition, with its
    decorators, is used; a whole reply that does not parse is read as its fenced code block
    (`extract_code`). The rest of `source` (line endings included) is unchanged. Raises
    `ValueError` when `source` defines no such function (or does not parse)."""
    if not new_code.strip():
        raise ValueError("the new code is empty")
    first, last, _ = find_function(source, qualname)
    lines = source.splitlines(keepends=True)
    original = lines[first - 1]
    indent = original[: len(original) - len(original.lstrip(" \t"))]
    newline = "\r\n" if original.endswith("\r\n") else "\n"
    block = _reindent(_candidate_def(new_code, qualname), indent)
    if newline != "\n":
        block = block.replace("\n", newline)
    # A last line without its newline (the end of the file) gets one only if it had one.
    after = "".join(lines[last:])
    if not after and not lines[last - 1].endswith(("\n", "\r")):
        block = block.rstrip("\r\n")
    return "".join(lines[: first - 1]) + block + after


_FENCE_OPEN = re.compile(r"^[ \t]*(`{3,})[ \t]*([A-Za-z0-9_+.\-]*)[^\n`]*$")


def extract_code(reply: str) -> str:
    """The code of a model's reply: its last fenced block tagged `python` (or `py`,
    `python3`), else its last fenced block of any kind, else the whole reply (stripped). A
    block left open at the end of the reply (a cut-off answer) runs to the end."""
    blocks: List[Tuple[str, str]] = []  # (language, code)
    lines = reply.splitlines()
    i = 0
    while i < len(lines):
        m = _FENCE_OPEN.match(lines[i])
        if not m:
            i += 1
            continue
        fence, lang = m.group(1), m.group(2).lower()
        close = re.compile(r"^[ \t]*`{%d,}[ \t]*$" % len(fence))
        j = i + 1
        while j < len(lines) and not close.match(lines[j]):
            j += 1
        blocks.append((lang, "\n".join(lines[i + 1 : j])))
        i = j + 1
    python = [code for lang, code in blocks if lang in ("python", "py", "python3")]
    if python:
        return python[-1].strip("\n") + "\n"
    if blocks:
        return blocks[-1][1].strip("\n") + "\n"
    return reply.strip() + "\n" if reply.strip() else ""


def _show(value: Any) -> str:
    """A value of a test's calls as text: strings as they are, the rest as JSON."""
    if isinstance(value, str):
        return value
    try:
        return json.dumps(value, ensure_ascii=False)
    except (TypeError, ValueError):
        return repr(value)


def format_feedback(test_result: Dict[str, Any], max_tests: int = 5, max_chars: int = 6000) -> str:
    """A readable account of a `Session.test()` answer, for a person or a model: the count,
    why nothing ran (its `error`), and for each failing test (at most `max_tests`) its name,
    message and every call with the expected and the actual outcome. Cut at `max_chars`."""
    passed = test_result.get("passed", 0)
    total = test_result.get("total", 0)
    out = [f"{passed} of {total} tests passed."]
    if test_result.get("error"):
        out.append(f"Error: {test_result['error']}")
    tests = test_result.get("tests") or []
    failing = [t for t in tests if t.get("outcome") != "pass"]
    for t in failing[:max_tests]:
        out.append(f"Test {t.get('name', '?')}: {t.get('outcome', 'fail')}")
        if t.get("message"):
            out.append("  " + str(t["message"]).rstrip().replace("\n", "\n  "))
        inputs = t.get("inputs") or []
        expected = t.get("expected") or []
        actual = t.get("actual") or []
        for k in range(max(len(inputs), len(expected), len(actual))):
            if k < len(inputs):
                out.append(f"  call:     {_show(inputs[k])}")
            if k < len(expected):
                out.append(f"  expected: {_show(expected[k])}")
            if k < len(actual):
                out.append(f"  actual:   {_show(actual[k])}")
    if len(failing) > max_tests:
        out.append(f"... and {len(failing) - max_tests} more failing tests.")
    if not failing and passed < total and not test_result.get("error"):
        out.append(f"{total - passed} tests failed (the server gives no details).")
    text = "\n".join(out) + "\n"
    if len(text) > max_chars:
        text = text[:max_chars] + "\n[...]\n"
    return text


# ---------------------------------------------------------------------------------------------
# Gymnasium-style environment (the standard-library part; `r2e_gym.R2EEnv` is the gymnasium.Env)
# ---------------------------------------------------------------------------------------------

OPS: Tuple[str, ...] = ("read", "write", "exec", "test", "submit", "write_function")
"""The actions' ops; an action's `op` is one of them or its index (`r2e_gym`'s `Discrete`)."""

OUTCOMES: Tuple[str, ...] = ("pass", "fail", "error")
"""The outcomes of a test or a submission: `error` is not the candidate's doing (the sandbox or a
worker crashed, the disk is full, the server is gone)."""

OBS_KEYS: Tuple[str, ...] = ("instance", "path", "qualname", "spec", "problem", "output", "error")
"""The keys of every observation, each a string."""

MAX_OBS_CHARS = 1 << 21
"""The longest string of an observation: longer ones are cut (`fit_text`)."""

# Statuses the server answers for an action the agent got wrong (a missing file, a path outside
# the workspace, a body too large): an observation with the error, not the end of the episode.
_SOFT = (400, 404, 409, 413)


def obs_char_allowed(c: str) -> bool:
    """Whether the character `c` appears as itself in an observation: tab, newline, carriage
    return and every character of Unicode's Basic Multilingual Plane but the control characters
    and the surrogates. Others are escaped (`fit_text`)."""
    n = ord(c)
    if n < 0x20:
        return c in "\t\n\r"
    if 0x7F <= n < 0xA0 or 0xD800 <= n < 0xE000:
        return False
    return n <= 0xFFFF


def fit_text(text: Optional[str], max_chars: int = MAX_OBS_CHARS) -> str:
    """`text` as an observation's string: each character outside `obs_char_allowed` written as
    its escape (`\\x1b`, `\\U0001f600`), and the whole cut to `max_chars` with a last line
    saying how much was left out. None is the empty string. The exact text is in the step's
    `info`."""
    if not text:
        return ""
    if not all(obs_char_allowed(c) for c in text):
        text = "".join(
            c if obs_char_allowed(c) else ("\\x%02x" % ord(c) if ord(c) < 0x100 else "\\U%08x" % ord(c))
            for c in text
        )
    if len(text) > max_chars:
        note = "\n[... %d characters cut ...]\n"
        keep = max_chars - len(note % len(text))
        while keep + len(note % (len(text) - keep)) < max_chars:
            keep += 1  # the count has fewer digits than the length
        text = text[:keep] + note % (len(text) - keep)
    return text


def outcome_of(op: str, answer: Dict[str, Any]) -> str:
    """The outcome (`pass`, `fail` or `error`) of a `test` or `submit` answer: the server's
    `outcome` when it gives one; else, for a test, `pass` when every test ran and passed, and
    for a submission `pass` when it passed all tests."""
    given = answer.get("outcome")
    if given in OUTCOMES:
        return given
    if op == "test":
        total = answer.get("total") or 0
        return "pass" if total > 0 and answer.get("passed") == total else "fail"
    return "pass" if answer.get("passed_all") else "fail"


def _exec_text(answer: Dict[str, Any]) -> str:
    """An `exec` answer as text: the exit code (or why it ended), stdout, stderr."""
    if answer.get("timed_out"):
        head = "timed out"
    elif answer.get("exit_code") is None:
        head = "killed" + (f" ({answer['limit']})" if answer.get("limit") else "")
    else:
        head = f"exit code {answer['exit_code']}"
    return f"{head}\n--- stdout ---\n{answer.get('stdout') or ''}\n--- stderr ---\n{answer.get('stderr') or ''}"


class R2EEnvBase:
    """The environment of `r2e serve` with Gymnasium's API, standard library only: no declared
    spaces, and a `random.Random` where `r2e_gym.R2EEnv` (the `gymnasium.Env`, which adds the
    spaces) uses gymnasium's `np_random`. One session at a time.

    `R2EEnvBase(client, max_steps=50, max_seconds=None, exec_timeout_s=10, raise_errors=False,
    render_mode=None)`; `client` is a `Client` or what `Client` takes (a server's URL, or
    several).

    `reset(seed=None, options=None) -> (obs, info)` opens a session (closing the previous one) on
    `options["instance"]`, else on one of the served instances (with `kind="bugfix"`, one of the
    served bug-fix tasks) chosen with the environment's random generator (seeded by `seed`).
    `info`: `instance`, `session`, `path`, `qualname`, `spec`, `problem`, `tests` and `file` (the
    exact text of the function's file). A bug-fix task's id opens a bug-fix session: its
    `problem` is the task's report, and `path`, `qualname` and `file` are empty (where the bug
    is, is for the agent to find; `write_function` has no function to write).

    Observations are dicts of strings (`OBS_KEYS`): the instance's `instance`, `path`,
    `qualname`, `spec`, `problem`, the action's `output` (the function's file after a reset) and
    its `error` ("" when none), each passed through `fit_text`.

    `step(action) -> (obs, reward, terminated, truncated, info)`; an action is a dict with an
    `op` (a name of `OPS`, or its index) and the fields it uses:

    - `read`: `path` -> `output`: the file's text
    - `write`: `path`, `text` -> `output`: the bytes written
    - `exec`: `command` (and `timeout_s`, else `exec_timeout_s`) -> `output`: the exit code,
      stdout and stderr
    - `test` -> `output`: `format_feedback` of the tests' results
    - `submit` -> `output`: the reward and the count; `terminated` is true
    - `write_function`: `code` -> the function replaced in its file by `code` (a bare def or a
      model's reply, `replace_function`), written

    `info`: `op`, `outcome` (`pass`, `fail` or `error` after `test` and `submit`, `error` when the
    server failed; None otherwise), `answer` (the server's exact answer; None when none came),
    `steps`; with `status` and `error` after an error. The reward is 0.0 except on a judged
    submission (the server's reward). `truncated` is true after `max_steps` steps, after
    `max_seconds` seconds from the reset, and on outcome `error`, whose reward is 0.0: a trainer
    masks those episodes. An error the agent caused (status 400, 404, 409 or 413 on `read`,
    `write`, `exec`; code that does not fit in `write_function`) is an observation with `error`,
    and the episode goes on. With `raise_errors=True`, every error raises (`R2EError` or
    `ValueError`) instead. A 401, 403 or 429 always raises, and so does `reset` when it fails.
    """

    metadata: Dict[str, Any] = {"render_modes": ["ansi"], "render_fps": 4}

    def __init__(
        self,
        client: Any,
        max_steps: int = 50,
        max_seconds: Optional[float] = None,
        exec_timeout_s: float = 10,
        raise_errors: bool = False,
        render_mode: Optional[str] = None,
        kind: str = "instance",
    ):
        if kind not in ("instance", "bugfix"):
            raise ValueError(f"kind {kind!r} is not 'instance' or 'bugfix'")
        self.kind = kind
        if isinstance(client, (str, list, tuple)):
            client = Client(client)
        if render_mode is not None and render_mode not in self.metadata["render_modes"]:
            raise ValueError(f"render_mode {render_mode!r} is not one of {self.metadata['render_modes']}")
        if max_steps < 1:
            raise ValueError("max_steps must be at least 1")
        self.client = client
        self.max_steps = max_steps
        self.max_seconds = max_seconds
        self.exec_timeout_s = exec_timeout_s
        self.raise_errors = raise_errors
        self.render_mode = render_mode
        self.session: Optional[Session] = None
        self._over = True
        self._steps = 0
        self._started = 0.0
        self._static: Dict[str, str] = {}
        self._last: Optional[Dict[str, str]] = None
        self._instances: Optional[Dict[str, Dict[str, Any]]] = None
        self._rng = random.Random()

    # The random generator: `r2e_gym.R2EEnv` replaces these two with gymnasium's.
    def _seed(self, seed: Optional[int]) -> None:
        if seed is not None:
            self._rng.seed(seed)

    def _choose(self, n: int) -> int:
        return self._rng.randrange(n)

    def _load_instances(self) -> None:
        """The served instances and bug-fix tasks (a task's report as its `problem`), by id."""
        self._instances = {i["id"]: i for i in self.client.instances()}
        for t in self.client.tasks():
            self._instances[t["id"]] = {**t, "problem": t.get("problem_statement"), "task": True}

    def instance_info(self, instance: str) -> Dict[str, Any]:
        """The `instances()` entry of `instance`, or of a bug-fix task (its report as
        `problem`); fetched once."""
        if self._instances is None or instance not in self._instances:
            self._load_instances()
        if instance not in self._instances:
            raise R2EError(404, f"no instance `{instance}` is served")
        return self._instances[instance]

    def reset(
        self, *, seed: Optional[int] = None, options: Optional[Dict[str, Any]] = None
    ) -> Tuple[Dict[str, str], Dict[str, Any]]:
        self._seed(seed)
        try:
            self.close()
        except R2EError:
            pass  # the previous session is gone or the server lost it: start afresh anyway
        instance = (options or {}).get("instance")
        if instance is None:
            if self._instances is None:
                self._load_instances()
            want_task = self.kind == "bugfix"
            ids = sorted(k for k, v in self._instances.items() if bool(v.get("task")) == want_task)
            if not ids:
                raise R2EError(404, f"the server serves no {'bug-fix task' if want_task else 'instance'}")
            instance = ids[self._choose(len(ids))]
        entry = self.instance_info(instance)
        self.session = self.client.open(instance)
        file = self.session.read(self.session.path) if self.session.path else ""
        self._over = False
        self._steps = 0
        self._started = time.monotonic()
        self._static = {
            "instance": instance,
            "path": self.session.path,
            "qualname": self.session.qualname,
            "spec": entry.get("spec") or "",
            "problem": entry.get("problem") or "",
        }
        info = {
            "instance": instance,
            "session": self.session.id,
            "path": self.session.path,
            "qualname": self.session.qualname,
            "spec": entry.get("spec"),
            "problem": entry.get("problem"),
            "tests": entry.get("tests"),
            "file": file,
        }
        return self._observe(file, ""), info

    def _observe(self, output: str, error: str) -> Dict[str, str]:
        obs = {k: fit_text(v) for k, v in self._static.items()}
        obs["output"] = fit_text(output)
        obs["error"] = fit_text(error)
        self._last = obs
        return dict(obs)

    def step(
        self, action: Dict[str, Any]
    ) -> Tuple[Dict[str, str], float, bool, bool, Dict[str, Any]]:
        if self.session is None or self._over:
            raise RuntimeError("the episode is over (or never began): call reset()")
        op = action.get("op")
        if isinstance(op, numbers.Integral) and not isinstance(op, bool) and 0 <= op < len(OPS):
            op = OPS[int(op)]
        if op not in OPS:
            raise ValueError(f"unknown action op {op!r} (one of {OPS} or its index)")
        s = self.session
        self._steps += 1
        reward, terminated, truncated = 0.0, False, False
        output, error = "", ""
        info: Dict[str, Any] = {"op": op, "outcome": None, "answer": None, "steps": self._steps}
        try:
            if op == "read":
                output = s.read(str(action["path"]))
                info["answer"] = output
            elif op == "write":
                answer = s.write(str(action["path"]), str(action.get("text", "")))
                info["answer"] = answer
                output = f"Wrote {answer.get('bytes')} bytes to {answer.get('path')}."
            elif op == "exec":
                answer = s.exec(str(action["command"]), action.get("timeout_s", self.exec_timeout_s))
                info["answer"] = answer
                output = _exec_text(answer)
            elif op == "test":
                answer = s.test()
                info["answer"] = answer
                info["outcome"] = outcome_of(op, answer)
                output = format_feedback(answer)
                if info["outcome"] == "error":
                    error = str(answer.get("error") or "the server could not run the tests")
                    truncated = True
            elif op == "submit":
                answer = s.submit()
                info["answer"] = answer
                info["outcome"] = outcome_of(op, answer)
                if info["outcome"] == "error":
                    error = str(answer.get("error") or "the server could not judge the submission")
                    truncated = True
                else:
                    reward = float(answer.get("reward") or 0.0)
                    terminated = True
                output = (
                    f"Submitted: reward {reward}, {answer.get('passed')} of {answer.get('total')} "
                    f"tests passed ({info['outcome']})."
                )
            elif not s.path:  # write_function, in a bug-fix session
                error = "a bug-fix session has no function to write: find the bug, and `write` its file"
                if self.raise_errors:
                    raise ValueError(error)
                info.update(status=None, error=error)
            else:  # write_function
                current = s.read(s.path)
                try:
                    text = replace_function(current, s.qualname, str(action["code"]))
                except ValueError as e:
                    if self.raise_errors:
                        raise
                    error = str(e)
                    info.update(status=None, error=error)
                else:
                    answer = s.write(s.path, text)
                    info["answer"] = answer
                    info["text"] = text
                    output = f"Wrote {answer.get('bytes')} bytes to {answer.get('path')}."
        except R2EError as e:
            if self.raise_errors or e.status in (401, 403, 429):
                raise
            error = e.message
            info.update(status=e.status, error=e.message)
            if e.status in _SOFT and op not in ("test", "submit"):
                pass  # the agent's mistake: it sees the error and goes on
            elif e.status is None or e.status >= 500 or e.status in _SOFT:
                # Not the candidate's doing (a 404 on test or submit: the session is gone).
                info["outcome"] = "error"
                truncated = True
            else:
                raise
        if not (terminated or truncated):
            if self._steps >= self.max_steps:
                truncated = True
                info["limit"] = "steps"
            elif (
                self.max_seconds is not None
                and time.monotonic() - self._started >= self.max_seconds
            ):
                truncated = True
                info["limit"] = "seconds"
        if terminated or truncated:
            self._over = True
            try:
                self.close()  # a submitted session is closed already
            except R2EError:
                pass
        return self._observe(output, error), reward, terminated, truncated, info

    def render(self) -> Optional[str]:
        """With `render_mode="ansi"`, the last observation as text (None before a reset)."""
        if self.render_mode != "ansi" or self._last is None:
            return None
        o = self._last
        text = f"[{o['instance']}] {o['path']}::{o['qualname']} (step {self._steps})\n{o['output']}"
        if o["error"]:
            text += f"\nerror: {o['error']}"
        return text

    def close(self) -> None:
        """Closes the open session, if any (a session already gone is no error). Calling it
        again does nothing."""
        if self.session is not None:
            try:
                self.session.close()
            finally:
                self.session = None


# ---------------------------------------------------------------------------------------------
# One answer, checked: what the single-turn adapters share (`r2e_verifiers`, `r2e_inspect`)
# ---------------------------------------------------------------------------------------------

SOLVE_SYSTEM_PROMPT = (
    "You are an expert Python programmer. You implement one function of a repository so that it "
    "meets its specification. Answer with the complete function (its decorators, def line, "
    "docstring and body) in a single ```python code block."
)
"""The system prompt of a single-turn task: the model answers with the whole function."""


def solve_prompt(row: Dict[str, Any]) -> str:
    """The task's prompt for an instance (a `GET /v1/instances` entry or a `dataset.jsonl`
    line): the function's path and name, its spec, and the code around it with the function's
    body removed (the instance's `problem`, its signature and spec in place)."""
    name = row["qualname"].split(".")[-1]
    parts = [
        f"Implement the function `{row['qualname']}` in the file `{row['path']}`.",
        "",
        "Specification:",
        (row.get("spec") or "(none: see the docstring below)").rstrip("\n"),
    ]
    if row.get("problem"):
        parts += [
            "",
            "The code it lives in, with the function's body removed:",
            "```python",
            row["problem"].rstrip("\n"),
            "```",
        ]
    parts += [
        "",
        f"Reply with the complete function `{name}` in one ```python block. Do not change its "
        "signature.",
    ]
    return "\n".join(parts)


def instance_tests(row: Dict[str, Any]) -> Optional[int]:
    """The number of tests of an instance (a `GET /v1/instances` entry or a `dataset.jsonl`
    line): an integer on the server, a list in the file; None when the row gives neither."""
    tests = row.get("tests")
    if isinstance(tests, list):
        return len(tests)
    return tests if isinstance(tests, int) else None


def check_answer(
    client: Client, instance: str, reply: str, tests: Optional[int] = None
) -> Dict[str, Any]:
    """Judges a model's `reply` on `instance` through `r2e serve` (blocking): opens a session,
    writes the function taken from the reply (`extract_code`) in place of the stub
    (`replace_function`), submits. `tests` is the instance's number of tests
    (`instance_tests`), the `total` when the server gives none. Returns `{"instance",
    "outcome", "passed", "total", "reward", "session", "error", "status"}`, its `outcome`
    `pass`, `fail` (a reply without the function is one: `passed` 0 of `tests`) or `error` (the
    check could not be made: the server's outcome `error`, no answer, or an error status;
    `status` is the HTTP status, None when no answer came). It raises no `R2EError`: each
    adapter turns the outcome `error` into its library's error."""
    result: Dict[str, Any] = {
        "instance": instance, "outcome": None, "passed": None, "total": tests,
        "reward": None, "session": None, "error": None, "status": None,
    }
    code = extract_code(reply or "")
    try:
        with client.open(instance) as session:
            result["session"] = session.id
            stub = session.read(session.path)
            try:
                text = replace_function(stub, session.qualname, code)
            except ValueError as e:
                # The reply holds no usable function: the candidate's doing.
                result.update(outcome="fail", passed=0, error=f"no function in the reply: {e}")
                return result
            try:
                session.write(session.path, text)
            except R2EError as e:
                if e.status != 413:
                    raise
                # Too large a file: the candidate's doing as well.
                result.update(outcome="fail", passed=0, error=e.message, status=e.status)
                return result
            answer = session.submit()
    except R2EError as e:
        result.update(outcome="error", error=e.message, status=e.status)
        return result
    outcome = outcome_of("submit", answer)
    result.update(
        outcome=outcome,
        passed=answer.get("passed"),
        total=answer.get("total", tests),
        reward=answer.get("reward"),
        error=answer.get("error"),
    )
    if outcome == "error" and not result["error"]:
        result["error"] = "the server could not judge the submission"
    return result


def __getattr__(name: str) -> Any:
    """`R2EEnv`, the `gymnasium.Env`, from `r2e_gym` (imported on first use: it needs
    gymnasium and numpy; everything else here is the standard library)."""
    if name == "R2EEnv":
        try:
            from r2e_gym import R2EEnv
        except ImportError as e:
            raise ImportError(
                f"r2e_client.R2EEnv is r2e_gym.R2EEnv, a gymnasium.Env: it needs gymnasium ({e}); "
                "R2EEnvBase is the same environment without it"
            ) from e
        return R2EEnv
    raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
