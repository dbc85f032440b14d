"""Tests of the client's pure helpers, of `R2EEnvBase` and of the adapters' shared check
(`check_answer`) over a fake client, and of `Client` over a tiny in-process HTTP server (no r2e
needed).

    python3 -m unittest discover -s clients/python/tests
"""

import ast
import json
import os
import sys
import threading
import time
import unittest
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

import r2e_client  # noqa: E402
from r2e_client import (  # noqa: E402
    OBS_KEYS,
    OPS,
    SOLVE_SYSTEM_PROMPT,
    Client,
    R2EEnvBase,
    R2EError,
    check_answer,
    extract_code,
    find_function,
    fit_text,
    format_feedback,
    instance_tests,
    obs_char_allowed,
    outcome_of,
    replace_function,
    solve_prompt,
)

MODULE = '''"""A module."""

import os


def helper(x):
    return x * 2


class Shape:
    """A shape."""

    sides = 0

    @property
    @other(
        1,
    )
    def area(self):
        """The area.

        In square units.
        """
        raise NotImplementedError

    def perimeter(self):
        return 0


def outer():
    def inner():
        return 1
    return inner
'''


class ReplaceFunctionTest(unittest.TestCase):
    def test_top_level_function(self):
        out = replace_function(MODULE, "helper", "def helper(x):\n    return x + 1\n")
        self.assertIn("def helper(x):\n    return x + 1\n\n\nclass Shape:", out)
        self.assertNotIn("x * 2", out)
        ast.parse(out)

    def test_method_from_first_decorator_reindented(self):
        new = "@property\ndef area(self):\n    return self.w * self.h\n"
        out = replace_function(MODULE, "Shape.area", new)
        self.assertIn(
            "    sides = 0\n\n    @property\n    def area(self):\n        return self.w * self.h\n"
            "\n    def perimeter(self):",
            out,
        )
        # The old decorators and body are gone, the rest is untouched.
        self.assertNotIn("@other", out)
        self.assertNotIn("NotImplementedError", out)
        self.assertTrue(out.startswith('"""A module."""\n\nimport os\n'))
        self.assertTrue(out.endswith("        return 1\n    return inner\n"))
        ast.parse(out)

    def test_indented_new_code_is_dedented(self):
        new = "        def area(self):\n            return 4\n"
        out = replace_function(MODULE, "Shape.area", new)
        self.assertIn("\n    def area(self):\n        return 4\n", out)

    def test_only_the_def_of_a_whole_module_is_used(self):
        reply_code = (
            "import math\n\n"
            "class Shape:\n"
            "    @property\n"
            "    def area(self):\n"
            "        return math.pi\n\n"
            "def test_area():\n"
            "    assert Shape().area\n"
        )
        out = replace_function(MODULE, "Shape.area", reply_code)
        self.assertIn("    @property\n    def area(self):\n        return math.pi\n", out)
        self.assertNotIn("test_area", out)
        self.assertNotIn("import math", out)
        ast.parse(out)

    def test_a_def_nested_elsewhere_in_the_new_code(self):
        # The def of the last name component, wherever it is.
        code = "class Other:\n    def area(self):\n        return 9\n"
        out = replace_function(MODULE, "Shape.area", code)
        self.assertIn("    def area(self):\n        return 9\n", out)
        self.assertNotIn("class Other", out)

    def test_a_whole_reply_with_a_fence(self):
        reply = "Here it is:\n```python\ndef helper(x):\n    return -x\n```\nIt negates."
        out = replace_function(MODULE, "helper", reply)
        self.assertIn("def helper(x):\n    return -x\n", out)
        self.assertNotIn("Here it is", out)

    def test_code_without_the_def_replaces_as_a_whole(self):
        out = replace_function(MODULE, "helper", "helper = lambda x: x\n")
        self.assertIn("\n\nhelper = lambda x: x\n\n\nclass Shape:", out)

    def test_multi_line_strings_keep_their_lines(self):
        code = "def area(self):\n    s = '''a\nb\n  c'''\n    return s\n"
        out = replace_function(MODULE, "Shape.area", code)
        self.assertIn("    def area(self):\n        s = '''a\nb\n  c'''\n        return s\n", out)
        tree = ast.parse(out)
        cls = next(n for n in tree.body if isinstance(n, ast.ClassDef))
        fn = next(n for n in cls.body if isinstance(n, ast.FunctionDef) and n.name == "area")
        self.assertEqual(fn.body[0].value.value, "a\nb\n  c")

    def test_nested_function_by_qualname(self):
        out = replace_function(MODULE, "outer.<locals>.inner", "def inner():\n    return 2\n")
        self.assertIn("def outer():\n    def inner():\n        return 2\n    return inner\n", out)
        self.assertEqual(out, replace_function(MODULE, "outer.inner", "def inner():\n    return 2\n"))

    def test_function_inside_an_if_block(self):
        src = "import sys\nif sys.version_info > (3,):\n    def f():\n        return 1\nelse:\n    pass\n"
        out = replace_function(src, "f", "def f():\n    return 2\n")
        self.assertEqual(out, src.replace("return 1", "return 2"))

    def test_crlf_and_no_final_newline(self):
        src = "def f():\r\n    return 1\r\n\r\nx = 1\r\n"
        out = replace_function(src, "f", "def f():\n    return 2\n")
        self.assertEqual(out, "def f():\r\n    return 2\r\n\r\nx = 1\r\n")
        self.assertEqual(replace_function("def f(): return 1", "f", "def f():\n    return 2\n"),
                         "def f():\n    return 2")

    def test_async_function(self):
        src = "async def f():\n    return 1\n"
        self.assertEqual(replace_function(src, "f", "async def f():\n    return 2\n"),
                         "async def f():\n    return 2\n")

    def test_not_found(self):
        with self.assertRaises(ValueError):
            replace_function(MODULE, "Shape.volume", "def volume(self): pass")
        with self.assertRaises(ValueError):
            replace_function(MODULE, "nothing", "def nothing(): pass")
        with self.assertRaises(ValueError):  # a class is not a function
            replace_function(MODULE, "Shape", "def Shape(): pass")
        with self.assertRaises(ValueError):
            replace_function("def (:", "f", "def f(): pass")
        with self.assertRaises(ValueError):
            replace_function(MODULE, "helper", "   \n")

    def test_find_function_lines(self):
        first, last, node = find_function(MODULE, "Shape.area")
        lines = MODULE.splitlines()
        self.assertEqual(lines[first - 1].strip(), "@property")
        self.assertEqual(lines[last - 1].strip(), "raise NotImplementedError")
        self.assertEqual(node.name, "area")


class ExtractCodeTest(unittest.TestCase):
    def test_last_python_block(self):
        reply = "First:\n```python\nx = 1\n```\nthen\n```py\nx = 2\n```\nand a shell one:\n```bash\nls\n```\n"
        self.assertEqual(extract_code(reply), "x = 2\n")

    def test_untagged_block(self):
        self.assertEqual(extract_code("Use:\n```\ndef f():\n    pass\n```\n"), "def f():\n    pass\n")

    def test_last_block_of_any_kind_without_a_python_one(self):
        self.assertEqual(extract_code("```\na\n```\n```text\nb\n```"), "b\n")

    def test_no_block(self):
        self.assertEqual(extract_code("  def f():\n    return 1\n\n"), "def f():\n    return 1\n")
        self.assertEqual(extract_code(""), "")

    def test_unterminated_block(self):
        self.assertEqual(extract_code("Sure.\n```python\ndef f():\n    return 1"), "def f():\n    return 1\n")

    def test_longer_fences_and_inner_backticks(self):
        reply = "````python\ns = '''\n```\n'''\n````\n"
        self.assertEqual(extract_code(reply), "s = '''\n```\n'''\n")


class FormatFeedbackTest(unittest.TestCase):
    RESULT = {
        "passed": 1,
        "total": 3,
        "error": None,
        "tests": [
            {"name": "test_ok", "outcome": "pass", "message": None, "inputs": ["f(0)"],
             "expected": ["returns 0"], "actual": ["returns 0"]},
            {"name": "test_two_calls", "outcome": "fail", "message": "the second call differs",
             "inputs": ["f(1)", {"args": [2]}], "expected": ["returns 1", 4],
             "actual": ["returns 1", None]},
            {"name": "test_raise", "outcome": "fail"},
        ],
    }

    def test_failing_tests_with_their_calls(self):
        text = format_feedback(self.RESULT)
        self.assertIn("1 of 3 tests passed.", text)
        self.assertNotIn("test_ok", text)
        self.assertIn("Test test_two_calls: fail", text)
        self.assertIn("the second call differs", text)
        self.assertIn("  call:     f(1)\n  expected: returns 1\n  actual:   returns 1\n", text)
        self.assertIn('  call:     {"args": [2]}\n  expected: 4\n  actual:   null\n', text)
        self.assertIn("Test test_raise: fail", text)

    def test_error_and_limits(self):
        text = format_feedback({"passed": 0, "total": 0, "error": "SyntaxError: bad", "tests": []})
        self.assertIn("Error: SyntaxError: bad", text)
        many = {"passed": 0, "total": 9, "tests": [{"name": f"t{i}", "outcome": "fail"} for i in range(9)]}
        text = format_feedback(many, max_tests=2)
        self.assertIn("Test t1", text)
        self.assertNotIn("Test t2", text)
        self.assertIn("7 more failing tests", text)
        self.assertLessEqual(len(format_feedback(many, max_chars=20)), 20 + len("\n[...]\n"))

    def test_no_details(self):
        text = format_feedback({"passed": 2, "total": 5, "error": None, "tests": []})
        self.assertIn("3 tests failed", text)


class FakeSession:
    def __init__(self, files, instance="i1"):
        self.id, self.instance, self.path, self.qualname = "s1", instance, "m.py", "f"
        self.files, self.closed, self.calls = files, False, []
        self.fail = {}  # op -> the R2EError it raises
        self.answers = {}  # op -> the answer it gives instead of its own

    def _maybe_fail(self, op):
        if op in self.fail:
            raise self.fail[op]

    def read(self, path):
        if path not in self.files:
            raise R2EError(404, f"no file {path}")
        return self.files[path]

    def write(self, path, text):
        self.files[path] = text
        return {"path": path, "bytes": len(text.encode())}

    def exec(self, command, timeout_s=10):
        self._maybe_fail("exec")
        self.calls.append(("exec", command, timeout_s))
        return {"stdout": "hi\n", "stderr": "", "exit_code": 0, "timed_out": False}

    def test(self):
        self._maybe_fail("test")
        if "test" in self.answers:
            return self.answers["test"]
        ok = "return x + 1" in self.files["m.py"]
        return {"passed": 2 if ok else 0, "total": 2, "error": None, "tests": []}

    def submit(self):
        self._maybe_fail("submit")
        if "submit" in self.answers:
            return self.answers["submit"]
        self.closed = True
        ok = "return x + 1" in self.files["m.py"]
        return {"reward": 1.0 if ok else 0.0, "passed_all": ok, "passed": 2 if ok else 0, "total": 2}

    def close(self):
        self.closed = True

    def __enter__(self):
        return self

    def __exit__(self, *exc):
        self.close()


class FakeClient:
    def __init__(self, ids=("i1",), tasks=()):
        self.opened = []
        self.ids = ids
        self.task_ids = tasks

    def instances(self):
        return [{"id": i, "repo": "r", "path": "m.py", "qualname": "f", "spec": "Add one.",
                 "problem": "def f(x): ...", "tests": 2} for i in self.ids]

    def tasks(self):
        return [{"id": t, "repo": "r", "problem_statement": "`f(1)` returns 3, but I expected 2."}
                for t in self.task_ids]

    def open(self, instance):
        if instance in self.task_ids:
            # A bug-fix session: the broken file, no path or qualname given.
            s = FakeSession({"m.py": "def f(x):\n    return x + 2\n"}, instance)
            s.path = s.qualname = ""
        elif instance not in self.ids:
            raise R2EError(404, "no such instance")
        else:
            s = FakeSession({"m.py": "def f(x):\n    raise NotImplementedError\n"}, instance)
        self.opened.append(s)
        return s


STUB = "def f(x):\n    raise NotImplementedError\n"


class EnvTest(unittest.TestCase):
    def test_a_bug_fix_task(self):
        # Drawn only with kind="bugfix"; its report is the problem, the agent finds the file.
        client = FakeClient(ids=("i1",), tasks=("i1:bug-1",))
        env = R2EEnvBase(client, kind="bugfix")
        obs, info = env.reset(seed=3)
        self.assertEqual(info["instance"], "i1:bug-1")
        self.assertEqual((obs["path"], obs["qualname"], obs["output"]), ("", "", ""))
        self.assertIn("I expected 2", obs["problem"])
        obs, *_ = env.step({"op": "write_function", "code": "def f(x):\n    return x + 1\n"})
        self.assertIn("no function to write", obs["error"])
        env.step({"op": "write", "path": "m.py", "text": "def f(x):\n    return x + 1\n"})
        obs, reward, terminated, _, info = env.step({"op": "submit"})
        self.assertEqual((reward, terminated, info["outcome"]), (1.0, True, "pass"))
        self.assertEqual(R2EEnvBase(client).reset(seed=3)[1]["instance"], "i1")
        with self.assertRaises(ValueError):
            R2EEnvBase(client, kind="other")

    def test_episode(self):
        client = FakeClient()
        env = R2EEnvBase(client)
        obs, info = env.reset(options={"instance": "i1"})
        self.assertEqual(obs, {"instance": "i1", "path": "m.py", "qualname": "f", "spec": "Add one.",
                               "problem": "def f(x): ...", "output": STUB, "error": ""})
        self.assertEqual(set(obs), set(OBS_KEYS))
        self.assertEqual((info["instance"], info["session"], info["file"], info["tests"]), ("i1", "s1", STUB, 2))
        obs, reward, terminated, truncated, info = env.step(
            {"op": "write_function", "code": "```python\ndef f(x):\n    return x + 1\n```"})
        self.assertEqual((info["op"], reward, terminated, truncated, info["outcome"]),
                         ("write_function", 0.0, False, False, None))
        self.assertEqual(info["text"], "def f(x):\n    return x + 1\n")
        self.assertIn("bytes to m.py", obs["output"])
        obs, *_ = env.step({"op": "read", "path": "m.py"})
        self.assertEqual(obs["output"], "def f(x):\n    return x + 1\n")
        obs, _, _, _, info = env.step({"op": "exec", "command": "echo hi", "timeout_s": 3})
        self.assertEqual(info["answer"]["stdout"], "hi\n")
        self.assertIn("exit code 0\n--- stdout ---\nhi\n", obs["output"])
        self.assertEqual(client.opened[0].calls, [("exec", "echo hi", 3)])
        obs, reward, terminated, truncated, info = env.step({"op": OPS.index("test")})  # by index
        self.assertEqual((info["op"], info["outcome"], reward, terminated, truncated),
                         ("test", "pass", 0.0, False, False))
        self.assertIn("2 of 2 tests passed", obs["output"])
        obs, reward, terminated, truncated, info = env.step({"op": "submit"})
        self.assertEqual((reward, terminated, truncated, info["outcome"]), (1.0, True, False, "pass"))
        self.assertEqual(info["answer"]["reward"], 1.0)
        self.assertEqual(info["steps"], 5)
        with self.assertRaises(RuntimeError):
            env.step({"op": "test"})

    def test_a_wrong_answer_fails(self):
        env = R2EEnvBase(FakeClient())
        env.reset(options={"instance": "i1"})
        _, _, _, _, info = env.step({"op": "test"})
        self.assertEqual(info["outcome"], "fail")
        _, reward, terminated, truncated, info = env.step({"op": "submit"})
        self.assertEqual((reward, terminated, truncated, info["outcome"]), (0.0, True, False, "fail"))

    def test_errors_come_back_as_observations(self):
        env = R2EEnvBase(FakeClient())
        env.reset(options={"instance": "i1"})
        obs, reward, terminated, truncated, info = env.step({"op": "read", "path": "nope.py"})
        self.assertEqual((info["status"], reward, terminated, truncated), (404, 0.0, False, False))
        self.assertIn("no file", obs["error"])
        self.assertEqual(obs["output"], "")
        env.step({"op": "write", "path": "m.py", "text": "x = 1\n"})
        obs, _, _, truncated, _ = env.step({"op": "write_function", "code": "def f(x):\n    return 1\n"})
        self.assertIn("no function", obs["error"])  # the file no longer defines f
        self.assertFalse(truncated)
        for bad in ({"op": "dance"}, {"op": len(OPS)}, {"op": True}):
            with self.assertRaises(ValueError):
                env.step(bad)
        strict = R2EEnvBase(FakeClient(), raise_errors=True)
        strict.reset(options={"instance": "i1"})
        with self.assertRaises(R2EError):
            strict.step({"op": "read", "path": "nope.py"})

    def test_a_server_failure_is_outcome_error_and_truncates(self):
        for op, status in (("test", 500), ("submit", 503), ("submit", None), ("test", 404), ("exec", 500)):
            client = FakeClient()
            env = R2EEnvBase(client)
            env.reset(options={"instance": "i1"})
            env.step({"op": "write", "path": "m.py", "text": "def f(x):\n    return x + 1\n"})
            client.opened[0].fail[op] = R2EError(status, "the sandbox failed")
            obs, reward, terminated, truncated, info = env.step({"op": op, "command": "true"})
            self.assertEqual((reward, terminated, truncated, info["outcome"], info["status"]),
                             (0.0, False, True, "error", status), (op, status))
            self.assertEqual(obs["error"], "the sandbox failed")
            self.assertTrue(client.opened[0].closed, "the session is closed at the episode's end")
            with self.assertRaises(RuntimeError):
                env.step({"op": "test"})
        # A configuration error is no outcome: it raises.
        client = FakeClient()
        env = R2EEnvBase(client)
        env.reset(options={"instance": "i1"})
        client.opened[0].fail["test"] = R2EError(401, "no token")
        with self.assertRaises(R2EError):
            env.step({"op": "test"})

    def test_the_server_s_outcome_wins(self):
        client = FakeClient()
        env = R2EEnvBase(client)
        env.reset(options={"instance": "i1"})
        client.opened[0].answers["submit"] = {"reward": None, "passed_all": False, "passed": 0,
                                              "total": 2, "outcome": "error", "error": "disk full"}
        obs, reward, terminated, truncated, info = env.step({"op": "submit"})
        self.assertEqual((reward, terminated, truncated, info["outcome"], obs["error"]),
                         (0.0, False, True, "error", "disk full"))
        env.reset(options={"instance": "i1"})
        client.opened[1].answers["test"] = {"passed": 0, "total": 0, "error": "worker died",
                                            "tests": [], "outcome": "error"}
        obs, reward, terminated, truncated, info = env.step({"op": "test"})
        self.assertEqual((truncated, info["outcome"], obs["error"]), (True, "error", "worker died"))

    def test_step_and_time_limits_truncate(self):
        env = R2EEnvBase(FakeClient(), max_steps=2)
        env.reset(options={"instance": "i1"})
        self.assertFalse(env.step({"op": "test"})[3])
        _, _, terminated, truncated, info = env.step({"op": "test"})
        self.assertEqual((terminated, truncated, info["limit"]), (False, True, "steps"))
        env = R2EEnvBase(FakeClient(), max_seconds=0)
        env.reset(options={"instance": "i1"})
        _, _, terminated, truncated, info = env.step({"op": "read", "path": "m.py"})
        self.assertEqual((terminated, truncated, info["limit"]), (False, True, "seconds"))
        # A submission on the last step ends the episode by termination, not truncation.
        env = R2EEnvBase(FakeClient(), max_steps=1)
        env.reset(options={"instance": "i1"})
        self.assertEqual(env.step({"op": "submit"})[2:4], (True, False))

    def test_reset_draws_the_instance_with_its_seed(self):
        ids = tuple(f"i{n}" for n in range(20))
        env = R2EEnvBase(FakeClient(ids))
        first = [env.reset(seed=7)[0]["instance"]] + [env.reset()[0]["instance"] for _ in range(5)]
        again = [env.reset(seed=7)[0]["instance"]] + [env.reset()[0]["instance"] for _ in range(5)]
        self.assertEqual(first, again)
        self.assertGreater(len(set(first)), 1)
        self.assertEqual(env.reset(seed=7, options={"instance": "i3"})[0]["instance"], "i3")
        self.assertEqual(env.reset(options={})[1]["tests"], 2)

    def test_reset_closes_the_previous_session(self):
        client = FakeClient()
        env = R2EEnvBase(client)
        env.reset(options={"instance": "i1"})
        env.reset(options={"instance": "i1"})
        self.assertEqual([s.closed for s in client.opened], [True, False])
        env.close()
        self.assertTrue(client.opened[1].closed)
        env.close()  # twice is no error
        with self.assertRaises(R2EError):
            env.reset(options={"instance": "unknown"})

    def test_render(self):
        self.assertIsNone(R2EEnvBase(FakeClient()).render())
        env = R2EEnvBase(FakeClient(), render_mode="ansi")
        self.assertIsNone(env.render())
        env.reset(options={"instance": "i1"})
        self.assertIn("[i1] m.py::f (step 0)\ndef f(x)", env.render())
        with self.assertRaises(ValueError):
            R2EEnvBase(FakeClient(), render_mode="human")

    def test_the_gymnasium_env_is_loaded_on_demand(self):
        try:
            import gymnasium  # noqa: F401
        except ImportError:
            with self.assertRaisesRegex(ImportError, "needs gymnasium"):
                r2e_client.R2EEnv
        else:
            self.assertEqual(r2e_client.R2EEnv.__name__, "R2EEnv")
        with self.assertRaises(AttributeError):
            r2e_client.NoSuchName


class OutcomeAndTextTest(unittest.TestCase):
    def test_outcome_of(self):
        self.assertEqual(outcome_of("test", {"passed": 3, "total": 3}), "pass")
        self.assertEqual(outcome_of("test", {"passed": 2, "total": 3}), "fail")
        self.assertEqual(outcome_of("test", {"passed": 0, "total": 0, "error": "SyntaxError"}), "fail")
        self.assertEqual(outcome_of("test", {"passed": 3, "total": 3, "outcome": "error"}), "error")
        self.assertEqual(outcome_of("submit", {"passed_all": True, "reward": 1.0}), "pass")
        self.assertEqual(outcome_of("submit", {"passed_all": False, "reward": 0.5}), "fail")
        self.assertEqual(outcome_of("submit", {"reward": None, "outcome": "error"}), "error")
        self.assertEqual(outcome_of("submit", {"passed_all": True, "outcome": "odd"}), "pass")

    def test_fit_text(self):
        self.assertEqual(fit_text(None), "")
        plain = "déjà vu — 東京\tcol\r\n\\x1b stays"
        self.assertEqual(fit_text(plain), plain)
        self.assertEqual(fit_text("a\x1b[0mb\x00c\x85\U0001f600"), "a\\x1b[0mb\\x00c\\x85\\U0001f600")
        self.assertEqual(fit_text("\ud800"), "\\U0000d800")
        cut = fit_text("x" * 1000, 100)
        self.assertEqual(len(cut), 100)
        self.assertTrue(cut.endswith(" characters cut ...]\n"), cut)
        self.assertEqual(cut, "x" * 70 + "\n[... 930 characters cut ...]\n")
        for c in "\t\n\r a~\xa0\uffff":
            self.assertTrue(obs_char_allowed(c), repr(c))
        for c in "\x00\x0b\x7f\x9f\ud800\U00010000":
            self.assertFalse(obs_char_allowed(c), repr(c))


class SolveTest(unittest.TestCase):
    """What the single-turn adapters (`r2e_verifiers`, `r2e_inspect`) share: the prompt, the
    number of tests, and the check over a fake client."""

    ROW = {"id": "i1", "repo": "r", "path": "pkg/shapes.py", "qualname": "Shape.area",
           "spec": "The area, in square units.\n",
           "problem": "class Shape:\n    def area(self): ...\n", "tests": 3}

    def test_solve_prompt(self):
        self.assertEqual(solve_prompt(self.ROW), "\n".join([
            "Implement the function `Shape.area` in the file `pkg/shapes.py`.",
            "",
            "Specification:",
            "The area, in square units.",
            "",
            "The code it lives in, with the function's body removed:",
            "```python",
            "class Shape:",
            "    def area(self): ...",
            "```",
            "",
            "Reply with the complete function `area` in one ```python block. Do not change its "
            "signature.",
        ]))
        self.assertIn("```python", SOLVE_SYSTEM_PROMPT)

    def test_solve_prompt_without_spec_or_problem(self):
        row = {"path": "m.py", "qualname": "f", "spec": None}
        prompt = solve_prompt(row)
        self.assertIn("Specification:\n(none: see the docstring below)\n", prompt)
        self.assertNotIn("body removed", prompt)
        self.assertNotIn("```python\n", prompt)
        self.assertTrue(prompt.endswith("function `f` in one ```python block. Do not change its "
                                        "signature."), prompt)

    def test_instance_tests(self):
        self.assertEqual(instance_tests({"tests": 3}), 3)  # the server's count
        self.assertEqual(instance_tests({"tests": ["t1", "t2"]}), 2)  # dataset.jsonl's list
        self.assertEqual(instance_tests({"tests": []}), 0)
        self.assertIsNone(instance_tests({}))
        self.assertIsNone(instance_tests({"tests": None}))
        self.assertIsNone(instance_tests({"tests": "3"}))

    def test_check_answer_passes_and_fails(self):
        client = FakeClient()
        good = check_answer(client, "i1", "Here:\n```python\ndef f(x):\n    return x + 1\n```\n", 2)
        self.assertEqual(good, {"instance": "i1", "outcome": "pass", "passed": 2, "total": 2,
                                "reward": 1.0, "session": "s1", "error": None, "status": None})
        self.assertEqual(client.opened[0].files["m.py"], "def f(x):\n    return x + 1\n")
        bad = check_answer(client, "i1", "```python\ndef f(x):\n    return x\n```", 2)
        self.assertEqual((bad["outcome"], bad["passed"], bad["reward"]), ("fail", 0, 0.0))
        self.assertTrue(all(s.closed for s in client.opened))

    def test_check_answer_of_a_reply_without_a_function(self):
        for reply in ("", None, "  \n"):
            client = FakeClient()
            result = check_answer(client, "i1", reply, 2)
            self.assertEqual(result["outcome"], "fail", reply)
            self.assertEqual((result["passed"], result["total"], result["reward"]), (0, 2, None))
            self.assertEqual(result["session"], "s1")
            self.assertIn("no function in the reply", result["error"])
            self.assertIsNone(result["status"])
            [session] = client.opened
            self.assertEqual(session.files["m.py"], STUB)  # nothing written, nothing submitted
            self.assertTrue(session.closed)

    def test_check_answer_that_could_not_be_made_is_an_error(self):
        result = check_answer(FakeClient(), "nope", "def f(x):\n    return x + 1\n", 4)
        self.assertEqual(result, {"instance": "nope", "outcome": "error", "passed": None,
                                  "total": 4, "reward": None, "session": None,
                                  "error": "no such instance", "status": 404})

        class ErringClient(FakeClient):
            def open(self, instance):
                s = super().open(instance)
                s.answers["submit"] = {"outcome": "error", "reward": None}
                return s

        result = check_answer(ErringClient(), "i1", "def f(x):\n    return x + 1\n", 2)
        self.assertEqual((result["outcome"], result["total"], result["status"]), ("error", 2, None))
        self.assertEqual(result["error"], "the server could not judge the submission")


class _Handler(BaseHTTPRequestHandler):
    """A few canned answers, like the server's."""

    protocol_version = "HTTP/1.1"
    seen = []
    busy = {"left": 0}

    def log_message(self, *args):
        pass

    def _send(self, status, body, headers=(), text=False):
        data = body.encode() if text else json.dumps(body).encode()
        self.send_response(status)
        self.send_header("Content-Type", "text/plain" if text else "application/json")
        self.send_header("Content-Length", str(len(data)))
        for k, v in headers:
            self.send_header(k, v)
        self.end_headers()
        self.wfile.write(data)

    def _handle(self):
        length = int(self.headers.get("Content-Length") or 0)
        body = self.rfile.read(length) if length else b""
        _Handler.seen.append((self.command, self.path, self.headers.get("Authorization"),
                              self.headers.get("Content-Type"), body))
        if self.headers.get("Authorization") != "Bearer tok":
            return self._send(401, {"error": "a token is needed"})
        if self.path == "/v1/instances":
            if _Handler.busy["left"] > 0:
                _Handler.busy["left"] -= 1
                return self._send(429, {"error": "too many requests"}, [("Retry-After", "0")])
            return self._send(200, {"instances": [{"id": "a:b.py:f", "tests": 1}]})
        if self.path == "/v1/sessions" and self.command == "POST":
            return self._send(200, {"session": "S1", "instance": json.loads(body)["instance"],
                                    "path": "b.py", "qualname": "f"})
        if self.path == "/v1/sessions/S1/files/dir/my%20file.py":
            if self.command == "GET":
                return self._send(200, "print('hi')\n", text=True)
            return self._send(200, {"path": "dir/my file.py", "bytes": len(body)})
        if self.path == "/v1/sessions/S1/submit":
            return self._send(200, {"reward": 0.5, "passed_all": False, "passed": 1, "total": 2})
        if self.path == "/v1/sessions/S1" and self.command == "DELETE":
            return self._send(404, {"error": "no such session"})
        return self._send(400, {"error": f"bad route {self.path}"})

    do_GET = do_POST = do_PUT = do_DELETE = _handle


class ClientOverHttpTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.httpd = ThreadingHTTPServer(("127.0.0.1", 0), _Handler)
        cls.thread = threading.Thread(target=cls.httpd.serve_forever, daemon=True)
        cls.thread.start()
        cls.url = f"http://127.0.0.1:{cls.httpd.server_address[1]}"

    @classmethod
    def tearDownClass(cls):
        cls.httpd.shutdown()
        cls.httpd.server_close()

    def test_routes(self):
        client = Client(self.url + "/", token="tok")
        self.assertEqual(client.instances()[0]["id"], "a:b.py:f")
        with client.open("a:b.py:f") as s:
            self.assertEqual((s.id, s.path, s.qualname), ("S1", "b.py", "f"))
            self.assertEqual(s.read("dir/my file.py"), "print('hi')\n")
            self.assertEqual(s.write("dir/my file.py", "x = 'é'\n")["bytes"], 9)
            method, path, auth, ctype, body = _Handler.seen[-1]
            self.assertEqual((method, auth, body), ("PUT", "Bearer tok", "x = 'é'\n".encode()))
            self.assertTrue(ctype.startswith("text/plain"))
        # Leaving the block closed it: a 404 on DELETE is no error.
        self.assertTrue(s.closed)
        self.assertEqual(_Handler.seen[-1][0], "DELETE")

    def test_submit_closes(self):
        s = Client(self.url, token="tok").open("x")
        self.assertEqual(s.submit()["reward"], 0.5)
        n = len(_Handler.seen)
        s.close()  # nothing sent: already closed
        self.assertEqual(len(_Handler.seen), n)

    def test_errors(self):
        with self.assertRaises(R2EError) as e:
            Client(self.url).instances()
        self.assertEqual((e.exception.status, e.exception.message), (401, "a token is needed"))
        with self.assertRaises(R2EError) as e:
            Client(self.url, token="tok").request("GET", "/nowhere")
        self.assertEqual(e.exception.status, 400)
        with self.assertRaises(R2EError) as e:
            Client("http://127.0.0.1:9", timeout=5).instances()
        self.assertIsNone(e.exception.status)

    def test_429(self):
        _Handler.busy["left"] = 1
        with self.assertRaises(R2EError) as e:
            Client(self.url, token="tok").instances()
        self.assertEqual((e.exception.status, e.exception.retry_after), (429, 0.0))
        _Handler.busy["left"] = 2
        self.assertEqual(len(Client(self.url, token="tok", retries_on_429=2).instances()), 1)
        _Handler.busy["left"] = 0



class _Tiny:
    """A tiny server on loopback in a thread, like `r2e serve` in what a session needs: `mode`
    says how it answers an open (`ok`, `429`, `500`, `drop`: the connection closed without an
    answer, `error`: 200 with outcome `error`); every request is noted in `seen`."""

    def __init__(self, name):
        self.name, self.mode, self.seen, self.count = name, "ok", [], 0
        self.delay = 0.0  # seconds an open takes
        lock = threading.Lock()
        self.submit_outcome = "pass"
        tiny = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"

            def log_message(self, *args):
                pass

            def _send(self, status, body, headers=()):
                data = json.dumps(body).encode()
                self.send_response(status)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(data)))
                for k, v in headers:
                    self.send_header(k, v)
                self.end_headers()
                self.wfile.write(data)

            def _handle(self):
                length = int(self.headers.get("Content-Length") or 0)
                body = self.rfile.read(length) if length else b""
                tiny.seen.append((self.command, self.path))
                if self.path == "/v1/instances":
                    if tiny.mode == "drop":
                        self.close_connection = True
                        return
                    if tiny.mode == "500":
                        return self._send(500, {"error": "broken"})
                    return self._send(200, {"instances": [{"id": "i", "from": tiny.name}]})
                if self.path == "/v1/sessions" and self.command == "POST":
                    if tiny.mode == "drop":
                        self.close_connection = True  # no answer at all
                        return
                    if tiny.mode == "429":
                        return self._send(429, {"error": "full"}, [("Retry-After", "0")])
                    if tiny.mode == "500":
                        return self._send(500, {"error": "broken"})
                    if tiny.mode == "error":
                        return self._send(200, {"outcome": "error", "error": "no sandbox"})
                    if tiny.mode == "404":
                        return self._send(404, {"error": "no instance"})
                    time.sleep(tiny.delay)
                    with lock:
                        tiny.count += 1
                        sid = f"{tiny.name}{tiny.count}"
                    return self._send(201, {"session": sid, "instance": json.loads(body)["instance"],
                                            "path": "m.py", "qualname": "f"})
                if self.path == "/v1/sessions" and self.command == "GET":
                    return self._send(200, {"sessions": [{"session": f"{tiny.name}1"}]})
                parts = self.path.split("/")  # /v1/sessions/SID[/...]
                if len(parts) >= 4 and parts[3].startswith(tiny.name):
                    if parts[-1] == "submit":
                        if tiny.submit_outcome == "error":
                            return self._send(200, {"outcome": "error", "reward": None,
                                                    "error": "the worker crashed"})
                        return self._send(200, {"outcome": "pass", "reward": 1.0})
                    if self.command == "PUT":
                        return self._send(200, {"path": "m.py", "bytes": len(body)})
                    if self.command == "DELETE":
                        return self._send(200, {"session": parts[3], "closed": True})
                return self._send(404, {"error": f"no session here: {self.path}"})

            do_GET = do_POST = do_PUT = do_DELETE = _handle

        self.httpd = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.thread = threading.Thread(target=self.httpd.serve_forever, args=(0.05,), daemon=True)
        self.thread.start()
        self.url = f"http://127.0.0.1:{self.httpd.server_address[1]}"

    def opens(self):
        return sum(1 for m, p in self.seen if m == "POST" and p == "/v1/sessions")

    def stop(self):
        self.httpd.shutdown()
        self.httpd.server_close()


class SeveralServersTest(unittest.TestCase):
    def setUp(self):
        self.a, self.b = _Tiny("A"), _Tiny("B")

    def tearDown(self):
        self.a.stop()
        self.b.stop()

    def test_the_forms_of_base_url(self):
        one = Client("http://h:1/")
        self.assertEqual((one.base_urls, one.base_url, repr(one)),
                         (["http://h:1"], "http://h:1", "Client('http://h:1')"))
        two = Client(" http://h:1/, http://h:2 ,")
        self.assertEqual((two.base_urls, two.base_url), (["http://h:1", "http://h:2"], "http://h:1"))
        self.assertEqual(Client(["http://h:1", "http://h:2/", "http://h:1"]).base_urls,
                         ["http://h:1", "http://h:2"])
        with self.assertRaises(ValueError):
            Client(" , ")
        with self.assertRaises(TypeError):
            Client(8080)

    def test_sessions_are_spread_and_stay_on_their_server(self):
        client = Client([self.a.url, self.b.url])
        sessions = [client.open("i") for _ in range(6)]
        self.assertEqual([s.server for s in sessions], [self.a.url, self.b.url] * 3)
        self.assertEqual([s.id for s in sessions], ["A1", "B1", "A2", "B2", "A3", "B3"])
        self.assertEqual(client.open_counts(), {self.a.url: 3, self.b.url: 3})
        # Each session's requests go to its server alone.
        sessions[1].write("m.py", "x = 1\n")
        self.assertEqual(self.b.seen[-1], ("PUT", "/v1/sessions/B1/files/m.py"))
        self.assertNotIn("PUT", [m for m, _ in self.a.seen])
        # Fewest open sessions first: after two closes on B, the next two go to B.
        sessions[1].close()
        self.assertEqual(sessions[3].submit()["reward"], 1.0)
        self.assertEqual(client.open_counts(), {self.a.url: 3, self.b.url: 1})
        self.assertEqual([client.open("i").server for _ in range(3)],
                         [self.b.url, self.b.url, self.a.url])
        # Every server's sessions, each with its server.
        self.assertEqual([(x["session"], x["server"]) for x in client.sessions()],
                         [("A1", self.a.url), ("B1", self.b.url)])

    def test_opens_at_once_from_threads_spread_evenly(self):
        self.a.delay = self.b.delay = 0.05
        client = Client([self.a.url, self.b.url])
        got = []
        threads = [threading.Thread(target=lambda: got.append(client.open("i").server))
                   for _ in range(20)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        self.assertEqual((got.count(self.a.url), got.count(self.b.url)), (10, 10))
        self.assertEqual(client.open_counts(), {self.a.url: 10, self.b.url: 10})

    def test_a_full_server_is_passed_over(self):
        self.a.mode = "429"
        client = Client(f"{self.a.url},{self.b.url}")
        sessions = [client.open("i") for _ in range(4)]
        self.assertEqual({s.server for s in sessions}, {self.b.url})
        self.assertEqual(client.open_counts(), {self.a.url: 0, self.b.url: 4})
        # A full server is asked again (it is not down): tried at most once per open.
        self.assertEqual(self.a.opens(), 4)
        self.assertEqual(self.b.opens(), 4)

    def test_a_server_that_does_not_answer_is_passed_over_then_tried_last(self):
        for mode in ("drop", "500", "error"):
            with self.subTest(mode=mode):
                self.a.mode, self.a.seen, self.b.seen = mode, [], []
                client = Client([self.a.url, self.b.url], timeout=5)
                sessions = [client.open("i") for _ in range(4)]
                self.assertEqual({s.server for s in sessions}, {self.b.url})
                # Tried once, then last for `down_seconds`: B took the rest at once.
                self.assertEqual((self.a.opens(), self.b.opens()), (1, 4))
                self.assertEqual(client.instances()[0]["from"], "B")

    def test_a_server_gone_for_good(self):
        port = self.a.httpd.server_address[1]
        self.a.stop()  # nothing listens there: refused
        client = Client([f"http://127.0.0.1:{port}", self.b.url], timeout=5, down_seconds=0)
        self.assertEqual([client.open("i").server for _ in range(3)], [self.b.url] * 3)
        self.assertEqual(client.instances()[0]["from"], "B")
        self.a = _Tiny("A")  # for tearDown

    def test_when_every_server_refuses(self):
        self.a.mode = self.b.mode = "429"
        with self.assertRaises(R2EError) as e:
            Client([self.a.url, self.b.url]).open("i")
        self.assertEqual((e.exception.status, e.exception.retry_after), (429, 0.0))
        self.assertIn(self.a.url, e.exception.message)
        self.assertIn(self.b.url, e.exception.message)
        self.assertEqual((self.a.opens(), self.b.opens()), (1, 1))
        # Rounds after the Retry-After: each server once per round.
        with self.assertRaises(R2EError) as e:
            Client([self.a.url, self.b.url], retries_on_429=2).open("i")
        self.assertEqual(e.exception.status, 429)
        self.assertEqual((self.a.opens(), self.b.opens()), (4, 4))
        # A full server and a dead one: the 429 is what is raised (it can be waited out).
        self.b.mode = "drop"
        with self.assertRaises(R2EError) as e:
            Client([self.a.url, self.b.url], timeout=5).open("i")
        self.assertEqual(e.exception.status, 429)
        # Every server dead: no answer (status None), at once.
        self.a.mode = "drop"
        with self.assertRaises(R2EError) as e:
            Client([self.a.url, self.b.url], timeout=5, retries_on_429=3).open("i")
        self.assertIsNone(e.exception.status)

    def test_a_room_freed_between_rounds(self):
        self.a.mode = self.b.mode = "429"
        client = Client([self.a.url, self.b.url], retries_on_429=5)
        # The first round refused; A frees a room before the second.
        original = client.request

        def request(*args, **kwargs):
            if self.a.opens() + self.b.opens() == 2:
                self.a.mode = "ok"
            return original(*args, **kwargs)

        client.request = request
        self.assertEqual(client.open("i").server, self.a.url)

    def test_an_error_of_the_request_is_not_retried_elsewhere(self):
        self.a.mode = self.b.mode = "404"
        with self.assertRaises(R2EError) as e:
            Client([self.a.url, self.b.url]).open("nowhere")
        self.assertEqual(e.exception.status, 404)
        self.assertEqual(self.a.opens() + self.b.opens(), 1)

    def test_a_submit_of_outcome_error_keeps_the_session_on_its_server(self):
        client = Client([self.a.url, self.b.url])
        client.open("i")
        s = client.open("i")
        self.assertEqual(s.server, self.b.url)
        self.b.submit_outcome = "error"
        self.assertEqual(s.submit()["outcome"], "error")
        self.assertFalse(s.closed)
        self.assertEqual(client.open_counts()[self.b.url], 1)
        self.b.submit_outcome = "pass"
        self.assertEqual(s.submit()["reward"], 1.0)  # again, on B
        self.assertTrue(s.closed)
        self.assertEqual([p for m, p in self.b.seen if p.endswith("/submit")],
                         ["/v1/sessions/B1/submit"] * 2)
        self.assertFalse([p for m, p in self.a.seen if p.endswith("/submit")])
        self.assertEqual(client.open_counts(), {self.a.url: 1, self.b.url: 0})


if __name__ == "__main__":
    unittest.main()
