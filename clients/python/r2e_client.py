"""A client of `r2e serve`, the benchmark served as a programming-agent environment.

Standard library only (urllib), Python 3.8+. One file: copy it next to an agent, or put this
folder on `sys.path`.

    from r2e_client import Client, R2EEnv

    client = Client("http://127.0.0.1:8080", token=os.environ.get("R2E_TOKEN"))
    with client.open(client.instances()[0]["id"]) as session:
        text = session.read(session.path)
        session.write(session.path, replace_function(text, session.qualname, my_code))
        print(format_feedback(session.test()))
        print(session.submit())

Public API:

- `R2EError(status, message, retry_after=None)`: an error answer of the server (or, with
  `status` None, no answer at all: the server could not be reached).
- `Client(base_url, token=None, timeout=120, retries_on_429=0)`: `instances()`,
  `open(instance) -> Session`, `sessions()`, `openapi()`, and `request(...)` for any route.
- `Session`: `id`, `instance`, `path`, `qualname`, `closed`; `read(path)`, `write(path, text)`,
  `exec(command, timeout_s=10)`, `test()`, `submit()`, `close()`; a context manager that closes
  it.
- `R2EEnv(client)`: a gym-style wrapper, `reset(instance)`, `step(action)`, `close()`.
- Pure helpers: `replace_function(source, qualname, new_code)`, `find_function(source,
  qualname)`, `extract_code(reply)`, `format_feedback(test_result)`.
"""

from __future__ import annotations

import ast
import io
import json
import re
import textwrap
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
    "R2EEnv",
    "replace_function",
    "find_function",
    "extract_code",
    "format_feedback",
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


class Client:
    """The server at `base_url` (e.g. `http://127.0.0.1:8080`).

    `token`: sent as `Authorization: Bearer TOKEN` (a server started with `--token-env`).
    `timeout`: seconds to wait for each answer. `retries_on_429`: how many times a request
    answered 429 (too many requests) is sent again, after the `Retry-After` the server gives
    (1 s without one); 0 raises the 429 as an `R2EError` at once."""

    def __init__(
        self,
        base_url: str,
        token: Optional[str] = None,
        timeout: float = 120,
        retries_on_429: int = 0,
    ):
        self.base_url = base_url.rstrip("/")
        self.token = token
        self.timeout = timeout
        self.retries_on_429 = retries_on_429

    def __repr__(self) -> str:
        return f"Client({self.base_url!r})"

    # The one place requests are made.
    def request(
        self,
        method: str,
        route: str,
        body: Any = None,
        raw: Optional[bytes] = None,
        text: bool = False,
        timeout: Optional[float] = None,
    ) -> Any:
        """Sends `method route` (`route` starts with `/`, already quoted) and returns the answer:
        parsed JSON, or with `text=True` the body decoded as UTF-8.

        `body` is sent as JSON; `raw` as the body itself (`text/plain; charset=utf-8`). Raises
        `R2EError` on an error status or when no answer comes."""
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
        url = self.base_url + route
        retries = 0
        while True:
            req = urllib.request.Request(url, data=data, method=method, headers=headers)
            try:
                with urllib.request.urlopen(req, timeout=timeout or self.timeout) as resp:
                    payload = resp.read()
            except urllib.error.HTTPError as e:
                err = _http_error(e)
                if err.status == 429 and retries < self.retries_on_429:
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

    # Routes.
    def instances(self) -> List[Dict[str, Any]]:
        """The instances served: dicts with `id`, `repo`, `path`, `qualname`, `spec`,
        `problem` and `tests` (the number of tests)."""
        return self.request("GET", "/v1/instances")["instances"]

    def open(self, instance: str) -> "Session":
        """Opens a session on `instance` (an id): a fresh workspace with the function stubbed."""
        answer = self.request("POST", "/v1/sessions", body={"instance": instance})
        return Session(self, answer)

    def sessions(self) -> List[Dict[str, Any]]:
        """The open sessions: dicts with `session`, `instance` and `idle_seconds`."""
        return self.request("GET", "/v1/sessions")["sessions"]

    def openapi(self) -> Dict[str, Any]:
        """The server's OpenAPI description."""
        return self.request("GET", "/openapi.json")


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
    workspace) and `qualname`. `closed` turns true after `submit()` or `close()`.

    Used as a context manager, it is closed on exit (a session already gone is no error)."""

    def __init__(self, client: Client, answer: Dict[str, Any]):
        self.client = client
        self.id: str = answer["session"]
        self.instance: str = answer.get("instance", "")
        self.path: str = answer.get("path", "")
        self.qualname: str = answer.get("qualname", "")
        self.closed = False

    def __repr__(self) -> str:
        return f"Session({self.id!r}, instance={self.instance!r})"

    def _route(self, tail: str = "") -> str:
        return f"/v1/sessions/{_quote(self.id)}{tail}"

    def read(self, path: str) -> str:
        """The text of the workspace's file `path` (relative to the workspace)."""
        return self.client.request("GET", self._route("/files/" + _quote(path)), text=True)

    def write(self, path: str, text: str) -> Dict[str, Any]:
        """Writes `text` to the workspace's file `path`: `{"path", "bytes"}`."""
        return self.client.request(
            "PUT", self._route("/files/" + _quote(path)), raw=text.encode("utf-8")
        )

    def exec(self, command: str, timeout_s: float = 10) -> Dict[str, Any]:
        """Runs `command` in the workspace: `{"stdout", "stderr", "exit_code", "timed_out"}`
        (`exit_code` None when it was killed)."""
        # Wait for the server a little longer than it lets the command run.
        wait = max(self.client.timeout, float(timeout_s) + 30)
        return self.client.request(
            "POST",
            self._route("/exec"),
            body={"command": command, "timeout_s": timeout_s},
            timeout=wait,
        )

    def test(self) -> Dict[str, Any]:
        """Runs the instance's tests on the workspace: `{"passed", "total", "error", "tests"}`."""
        return self.client.request("POST", self._route("/test"))

    def submit(self) -> Dict[str, Any]:
        """Submits the workspace: `{"reward", "passed_all", "passed", "total"}`. The session is
        closed afterwards."""
        answer = self.client.request("POST", self._route("/submit"))
        self.closed = True
        return answer

    def close(self) -> None:
        """Closes the session (its workspace is removed). A session already gone is no error."""
        if self.closed:
            return
        try:
            self.client.request("DELETE", self._route())
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
# Gym-style environment
# ---------------------------------------------------------------------------------------------


class R2EEnv:
    """A gym-style environment over a `Client`: one session at a time.

    `reset(instance)` opens a session (closing the previous one) and returns the observation
    `{"instance", "path", "qualname", "spec", "problem", "file"}` (`file`: the text of the
    function's file, the stub in place). `step(action)` returns `(observation, reward, done,
    info)`; actions are dicts:

    - `{"op": "read", "path"}` -> `{"op", "path", "text"}`
    - `{"op": "write", "path", "text"}` -> `{"op", "path", "bytes"}`
    - `{"op": "exec", "command", "timeout_s"}` -> the server's answer and `op`
    - `{"op": "test"}` -> the server's answer (`passed`, `total`, `error`, `tests`) and `op`
    - `{"op": "submit"}` -> the server's answer (`reward`, `passed_all`, ...) and `op`
    - `{"op": "write_function", "code"}`: `replace_function` of the function's file with `code`
      (a bare def or a model's reply code), written -> `{"op", "path", "bytes"}`

    The reward is 0.0 except on submit (the server's reward); `done` is true after submit.
    `info["answer"]` is the server's raw answer. An error the server answers for an action
    (status 400, 404, 409 or 413: a missing file, a body too large, ...) or a `write_function`
    whose code does not fit comes back as an observation `{"op", "error", "status"}`, unless
    `raise_errors` is true; others raise `R2EError`."""

    _SOFT = (400, 404, 409, 413)

    def __init__(self, client: Client, raise_errors: bool = False):
        self.client = client
        self.raise_errors = raise_errors
        self.session: Optional[Session] = None
        self.done = False
        self._instances: Optional[Dict[str, Dict[str, Any]]] = None

    def instance_info(self, instance: str) -> Dict[str, Any]:
        """The `instances()` entry of `instance` (fetched once)."""
        if self._instances is None or instance not in self._instances:
            self._instances = {i["id"]: i for i in self.client.instances()}
        if instance not in self._instances:
            raise R2EError(404, f"no instance `{instance}` is served")
        return self._instances[instance]

    def reset(self, instance: str) -> Dict[str, Any]:
        try:
            self.close()
        except R2EError:
            pass  # the previous session is gone or the server lost it: start afresh anyway
        info = self.instance_info(instance)
        self.session = self.client.open(instance)
        self.done = False
        return {
            "instance": instance,
            "path": self.session.path,
            "qualname": self.session.qualname,
            "spec": info.get("spec"),
            "problem": info.get("problem"),
            "file": self.session.read(self.session.path),
        }

    def step(self, action: Dict[str, Any]) -> Tuple[Dict[str, Any], float, bool, Dict[str, Any]]:
        if self.session is None or self.done:
            raise RuntimeError("no open session: call reset() first")
        op = action.get("op")
        s = self.session
        try:
            if op == "read":
                text = s.read(action["path"])
                return {"op": op, "path": action["path"], "text": text}, 0.0, False, {"answer": text}
            if op == "write":
                answer = s.write(action["path"], action["text"])
                return {"op": op, **answer}, 0.0, False, {"answer": answer}
            if op == "exec":
                answer = s.exec(action["command"], action.get("timeout_s", 10))
                return {"op": op, **answer}, 0.0, False, {"answer": answer}
            if op == "test":
                answer = s.test()
                return {"op": op, **answer}, 0.0, False, {"answer": answer}
            if op == "submit":
                answer = s.submit()
                self.done = True
                self.session = None
                reward = float(answer.get("reward", 0.0))
                return {"op": op, **answer}, reward, True, {"answer": answer}
            if op == "write_function":
                current = s.read(s.path)
                try:
                    text = replace_function(current, s.qualname, action["code"])
                except ValueError as e:
                    if self.raise_errors:
                        raise
                    return {"op": op, "error": str(e), "status": None}, 0.0, False, {"error": str(e)}
                answer = s.write(s.path, text)
                return {"op": op, **answer}, 0.0, False, {"answer": answer, "text": text}
        except R2EError as e:
            if self.raise_errors or e.status not in self._SOFT:
                raise
            obs = {"op": op, "error": e.message, "status": e.status}
            return obs, 0.0, False, {"error": e.message, "status": e.status}
        raise ValueError(f"unknown action op {op!r}")

    def close(self) -> None:
        """Closes the open session, if any (a session already gone is no error)."""
        if self.session is not None:
            try:
                self.session.close()
            finally:
                self.session = None
