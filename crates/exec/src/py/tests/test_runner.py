"""Tests of r2e_runner.py on hand-written harnesses (independent of the explorer)."""

from __future__ import annotations

import json
import os
import select
import shutil
import subprocess
import sys
import textwrap
import unittest

from r2e_test_support import BATCH, PY_DIR, SampleRepo, read_text

HEADER = """
import unittest

import r2e_equiv

candidate, reference = r2e_equiv.harness_modules()
classify = candidate.classify
reference_classify = reference.classify
flat = candidate.flat
reference_flat = reference.flat


class TestClassify(unittest.TestCase):
"""


INTERVAL_HARNESS = """
import unittest

import r2e_equiv

candidate, reference = r2e_equiv.harness_modules()
Interval = candidate.Interval
reference_Interval = reference.Interval


class TestOverlaps(unittest.TestCase):
    def test_0(self):
        r2e_equiv.check_method(self, Interval, reference_Interval, (0, 5), {}, 'overlaps', (reference_Interval(3, 9),), {})

    def test_1(self):
        r2e_equiv.check_method(self, Interval, reference_Interval, (0, 5), {}, 'overlaps', (7,), {})

    def test_2(self):
        # Called directly, as model-written harnesses do.
        self.assertFalse(reference_Interval(0, 1).overlaps(other=reference_Interval(2, 3)))
"""

DEPTH_HARNESS = """
import unittest

import r2e_equiv

candidate, reference = r2e_equiv.harness_modules()
depth = candidate.depth
reference_depth = reference.depth


def nested(n):
    value = []
    for _ in range(n):
        value = [value]
    return value


class TestDepth(unittest.TestCase):
    def test_0(self):
        r2e_equiv.check_function(self, depth, reference_depth, ([[1, [2]], []],), {})

    def test_1(self):
        self.assertEqual(reference_depth(5), 0)
        self.assertEqual(reference_depth(5), 0)

    def test_2(self):
        # Deep enough that one more frame per level would hit the recursion limit.
        self.assertEqual(reference_depth(nested(400)), 401)
"""

NO_CALLS = {"examples": [], "types": {"args": {}, "returns": []}}


def calls_of(out: dict) -> dict:
    return {"examples": out["examples"], "types": out["types"]}


def unordered(calls: dict) -> tuple:
    """Calls and types regardless of the order they were seen in."""
    examples = sorted(json.dumps(e, sort_keys=True) for e in calls["examples"])
    types = json.dumps(
        {k: sorted(v) if isinstance(v, list) else v for k, v in calls["types"].items()},
        sort_keys=True,
        default=sorted,
    )
    return examples, types


def classify_harness(inputs) -> str:
    body = ""
    for i, n in enumerate(inputs):
        body += (
            f"    def test_{i}(self):\n"
            f"        args = ({n!r},)\n"
            f"        kwargs = {{}}\n"
            f"        r2e_equiv.check_function(self, classify, reference_classify, args, kwargs)\n\n"
        )
    return HEADER + body


class RunnerTest(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.sample = SampleRepo()
        cls.source = read_text(cls.sample.core)
        cls.harness = classify_harness([0, 5, -3, 20])

    @classmethod
    def tearDownClass(cls):
        cls.sample.cleanup()

    def test_reference_passes_with_full_coverage(self):
        out = self.sample.run_harness(self.harness, "classify", name="original")
        self.assertEqual(out["status"], "ok")
        self.assertIsNone(out["error"])
        self.assertEqual(
            [t["name"].split(".")[-1] for t in out["tests"]], ["test_0", "test_1", "test_2", "test_3"]
        )
        self.assertEqual([t["outcome"] for t in out["tests"]], ["pass"] * 4)
        self.assertEqual([t["message"] for t in out["tests"]], [None] * 4)
        self.assertEqual([t["returned_normally"] for t in out["tests"]], [True, True, False, True])
        cov = out["coverage"]
        # Statements of the body (not the def line, which runs at import): 3 conditions, the
        # raise and 3 returns; 3 two-way branches.
        self.assertEqual(
            cov,
            {
                "lines_total": 7,
                "lines_covered": 7,
                "branches_total": 6,
                "branches_covered": 6,
                "missing_lines": [],
                "partial_lines": [],
            },
        )

    def test_identical_candidate_file_passes(self):
        out = self.sample.run_harness(
            self.harness, "classify", candidate_source=self.source, name="identical"
        )
        self.assertEqual([t["outcome"] for t in out["tests"]], ["pass"] * 4)

    def test_record_mode_records_the_originals_calls(self):
        out = self.sample.run_harness(
            self.harness, "classify", name="record", mode="record", coverage=False
        )
        self.assertEqual(out["status"], "ok", out)
        records = [t["records"] for t in out["tests"]]
        self.assertEqual(
            [[r["call"] for r in rs] for rs in records],
            [["classify(0)"], ["classify(5)"], ["classify(-3)"], ["classify(20)"]],
        )
        self.assertEqual(records[0][0]["outcome"], {"return": {"str": "zero"}})
        self.assertEqual(
            records[2][0]["outcome"],
            {"raise": {"type": "ValueError", "message": "negative: -3"}},
        )
        self.assertEqual(records[1][0]["args"], [{"int": "5"}])
        self.assertEqual([t["returned_normally"] for t in out["tests"]], [True, True, False, True])

    def test_candidate_mode_holds_the_candidate_only(self):
        # The candidate is imported under the module's name with the original's __file__; the
        # original's code never runs (its marker is absent) and each check records the
        # candidate's calls and passes: the verdict is r2e's, outside this process.
        flipped = self.source.replace('return "zero"', 'return "ZERO"') + "\nCANDIDATE = True\n"
        harness = self.harness + (
            "    def test_module(self):\n"
            "        self.assertTrue(candidate.CANDIDATE)\n"
            "        self.assertIs(candidate, reference)\n"
            f"        self.assertEqual(candidate.__file__, {self.sample.core!r})\n"
        )
        out = self.sample.run_harness(
            harness,
            "classify",
            candidate_source=flipped,
            name="candmode",
            mode="candidate",
            coverage=False,
        )
        self.assertEqual(out["status"], "ok", out)
        self.assertEqual([t["outcome"] for t in out["tests"]], ["pass"] * 5, out["tests"])
        self.assertEqual(out["tests"][0]["records"][0]["outcome"], {"return": {"str": "ZERO"}})
        self.assertEqual(out["tests"][4]["records"], [])

    def test_each_child_hides_its_own_module_for_good(self):
        # One worker, two candidate jobs (two runs each): the first hides its module's file from its child
        # alone; that child sees an empty file, cannot read it through any process's
        # `/proc/<pid>/root` (the worker's, or any other's), cannot unmount what covers it, and cannot write the bytecode the
        # next children read. The second job hides nothing, and its child sees the file whole
        # (nothing of the first child's hiding reached the worker), and cannot write the
        # bytecode either.
        probe = textwrap.dedent(
            f"""
            def classify(n):
                import ctypes, os
                core = {self.sample.core!r}
                seen = []
                try:
                    with open(core) as f:
                        seen.append("file:%d" % len(f.read()))
                except Exception as e:
                    seen.append("file:" + type(e).__name__)
                # Through every process's root (the worker's among them): the most it read.
                most = 0
                for pid in [p for p in os.listdir("/proc") if p.isdigit()]:
                    try:
                        with open("/proc/%s/root%s" % (pid, core)) as f:
                            most = max(most, len(f.read()))
                    except Exception:
                        pass
                seen.append("proc:%d" % most)
                libc = ctypes.CDLL(None, use_errno=True)
                seen.append("umount:%d" % libc.umount2(core.encode(), 2))
                try:
                    with open(core) as f:
                        seen.append("after:%d" % len(f.read()))
                except Exception as e:
                    seen.append("after:" + type(e).__name__)
                pycache = os.path.join(os.path.dirname(os.path.abspath(__file__)), "pycache")
                try:
                    with open(os.path.join(os.getcwd(), "..", "pycache", "planted.pyc"), "w") as f:
                        f.write("x")
                    seen.append("pycache:written")
                except Exception as e:
                    seen.append("pycache:" + type(e).__name__)
                return ";".join(seen)
            """
        )
        candidate = self.source + "\n" + probe
        harness = classify_harness([0])
        scratch = self.sample.scratch("perchild")
        shutil.copy(BATCH, scratch)
        hiding = self.sample.runner_request(
            harness, "classify", candidate_source=candidate, coverage=False, name="perchild_hide",
            mode="candidate", hide=[self.sample.core],
        )
        open_ = self.sample.runner_request(
            harness, "classify", candidate_source=candidate, coverage=False, name="perchild_open",
            mode="candidate",
        )
        req_path, out_path = self.sample.path("perchild.json"), self.sample.path("perchild.out.json")
        with open(req_path, "w", encoding="utf-8") as f:
            json.dump({"jobs": [hiding, open_], "runs": 2, "timeout": 60}, f)
        subprocess.run(
            [sys.executable, os.path.join(scratch, "r2e_batch.py"), req_path, out_path],
            check=True, timeout=120, cwd=self.sample.root,
            env=dict(os.environ, PYTHONDONTWRITEBYTECODE="1"),
        )
        with open(out_path, encoding="utf-8") as f:
            results = json.load(f)["results"]
        # Two runs of each job, each in a child of its own: both see the same.
        runs = [[run["tests"][0]["records"][0]["outcome"]["return"]["str"] for run in r] for r in results]
        self.assertEqual([len(set(r)) for r in runs], [1, 1], runs)
        seen = [r[0] for r in runs]
        size = len(self.source.encode())
        self.assertEqual(
            seen[0], "file:0;proc:0;umount:-1;after:0;pycache:OSError", results[0]
        )
        self.assertEqual(seen[1].split(";")[0], f"file:{size}", results[1])
        self.assertEqual(seen[1].split(";")[-1], "pycache:OSError", results[1])
        # The worker compiled, for its next children, the modules the first child compiled:
        # never into the repository, only under its own folder.
        self.assertFalse(os.path.exists(os.path.join(scratch, "pycache", "planted.pyc")))
        compiled = [
            os.path.relpath(os.path.join(d, f), os.path.join(scratch, "pycache"))
            for d, _, files in os.walk(os.path.join(scratch, "pycache"))
            for f in files
        ]
        self.assertIn(
            os.path.relpath(self.sample.core, "/")[: -len(".py")] + f".{sys.implementation.cache_tag}.pyc",
            compiled,
        )
        self.assertFalse(os.path.exists(os.path.join(self.sample.repo, "samplepkg", "__pycache__")))

    def test_a_hidden_modules_bytecode_is_found_under_any_name_of_it(self):
        # The bytecode a child must not see is found by the module's real path, whatever name
        # the import path gave it (here, a folder reached through a symbolic link).
        import tempfile

        sys.path.insert(0, PY_DIR)
        try:
            import r2e_batch
        finally:
            sys.path.remove(PY_DIR)
        with tempfile.TemporaryDirectory() as tmp:
            real = os.path.join(tmp, "real")
            os.makedirs(real)
            self.sample.write(os.path.join(real, "a.py"), "X = 1\n")
            self.sample.write(os.path.join(real, "b.py"), "Y = 1\n")
            os.symlink(real, os.path.join(tmp, "link"))
            pycache = os.path.join(tmp, "pycache")
            tag = sys.implementation.cache_tag
            found = []
            for folder in ("link", "real"):
                for name in ("a", "b"):
                    pyc = os.path.join(pycache + tmp, folder, f"{name}.{tag}.pyc")
                    os.makedirs(os.path.dirname(pyc), exist_ok=True)
                    self.sample.write(pyc, "")
                    if name == "a":
                        found.append(pyc)
            saved, r2e_batch.PYCACHE = r2e_batch.PYCACHE, pycache
            try:
                self.assertEqual(sorted(r2e_batch._bytecode_of([os.path.join(real, "a.py")])), sorted(found))
            finally:
                r2e_batch.PYCACHE = saved

    def test_a_shuffled_run_reports_in_natural_order(self):
        out = self.sample.run_harness(
            self.harness, "classify", name="shuffled", mode="record", coverage=False, order_seed=7
        )
        # They ran in another order (the calls seen first come first)...
        ran = [e["call"] for e in out["examples"]]
        self.assertEqual(sorted(ran), sorted(["classify(0)", "classify(5)", "classify(-3)", "classify(20)"]))
        self.assertNotEqual(ran, ["classify(0)", "classify(5)", "classify(-3)", "classify(20)"])
        # ...and are reported in natural order.
        self.assertEqual(
            [t["name"].split(".")[-1] for t in out["tests"]], ["test_0", "test_1", "test_2", "test_3"]
        )

    def test_examples_run_after_the_calls_in_every_order(self):
        # The examples' class (r2e_run_last) runs after the others, shuffled or not, in its own
        # natural order; each example is recorded in record mode and checked in candidate mode.
        harness = self.harness + (
            "\n\nclass TestClassifyExamples(unittest.TestCase):\n"
            "    r2e_run_last = True\n\n"
            "    def test_0(self):\n"
            "        example = 'print(classify(7))\\nclassify(0)'\n"
            "        r2e_equiv.check_example(self, candidate, reference, example)\n\n"
            "    def test_1(self):\n"
            "        example = 'classify(50)'\n"
            "        r2e_equiv.check_example(self, candidate, reference, example)\n"
        )
        for seed in (None, 3, 7, 11):
            out = self.sample.run_harness(
                harness, "classify", name=f"ex{seed}", mode="record", coverage=False, order_seed=seed
            )
            self.assertEqual(out["status"], "ok", out)
            # The reference's first 5 calls are recorded: the 4 calls' tests, then the example.
            ran = [e["call"] for e in out["examples"]]
            self.assertEqual(sorted(ran[:4]), ["classify(-3)", "classify(0)", "classify(20)", "classify(5)"])
            self.assertEqual(ran[4], "classify(7)", ran)
        def shown(outcome):
            """(printed, values) of an example's recorded outcome."""
            items = dict(
                (k["str"], v) for k, v in outcome["return"]["dict"]["items"]
            )
            return items["printed"]["str"], [v["str"] for v in items["values"]["seq"]["items"]]

        records = {t["name"]: t["records"] for t in out["tests"]}
        self.assertEqual(shown(records["TestClassifyExamples.test_0"][0]["outcome"]), ("small\n", ["zero"]))
        wrong = read_text(self.sample.core).replace('return "zero"', 'return "nothing"')
        out = self.sample.run_harness(
            harness, "classify", candidate_source=wrong, name="exwrong", mode="candidate", coverage=False
        )
        records = {t["name"]: t["records"] for t in out["tests"]}
        self.assertEqual(shown(records["TestClassifyExamples.test_0"][0]["outcome"]), ("small\n", ["nothing"]))

    def test_flipped_comparison_fails(self):
        flipped = self.source.replace("if n < 0:", "if n <= 0:")
        self.assertNotEqual(flipped, self.source)
        out = self.sample.run_harness(
            self.harness, "classify", candidate_source=flipped, name="flipped"
        )
        self.assertEqual(out["status"], "ok")
        outcomes = {t["name"].split(".")[-1]: t for t in out["tests"]}
        self.assertEqual(outcomes["test_0"]["outcome"], "fail")
        message = outcomes["test_0"]["message"]
        self.assertIn("candidate: raise ValueError: negative: 0", message)
        self.assertIn("reference: return 'zero'", message)
        # Only the reference's calls are recorded, not the candidate's.
        self.assertEqual(
            out["examples"][0], {"call": "classify(0)", "outcome": "returns 'zero'"}
        )
        self.assertTrue(outcomes["test_0"]["returned_normally"])
        for name in ("test_1", "test_2", "test_3"):
            self.assertEqual(outcomes[name]["outcome"], "pass")

        upper = self.source.replace("elif n < 10:", "elif n > 10:")
        out = self.sample.run_harness(
            self.harness, "classify", candidate_source=upper, name="flipped_upper"
        )
        self.assertIn("fail", [t["outcome"] for t in out["tests"]])

    def test_partial_coverage(self):
        out = self.sample.run_harness(classify_harness([5]), "classify", name="partial")
        cov = out["coverage"]
        self.assertEqual(cov["branches_total"], 6)
        self.assertLess(cov["branches_covered"], cov["branches_total"])
        self.assertLess(cov["lines_covered"], cov["lines_total"])
        # classify(5): the raise and the other returns never ran; the first three conditions
        # each took one exit only, the last never ran.
        self.assertEqual(len(cov["missing_lines"]), cov["lines_total"] - cov["lines_covered"])
        self.assertEqual(len(cov["partial_lines"]), 3)

    def test_function_without_branches(self):
        harness = HEADER + (
            "    def test_0(self):\n"
            "        r2e_equiv.check_function(self, flat, reference_flat, (2,), {})\n"
        )
        out = self.sample.run_harness(harness, "flat", name="flat")
        self.assertEqual(out["tests"][0]["outcome"], "pass")
        self.assertEqual(out["coverage"]["branches_total"], 0)
        self.assertEqual(out["coverage"]["branches_covered"], 0)
        self.assertEqual(out["coverage"]["lines_total"], out["coverage"]["lines_covered"])

    def test_warm_worker_measures_what_a_fresh_runner_measures(self):
        harnesses = {
            "full": (classify_harness([0, 5, -3, 20]), "classify"),
            "partial": (classify_harness([5]), "classify"),
            "mixed": (classify_harness([20, -1]), "classify"),
            "method": (INTERVAL_HARNESS, "Interval.overlaps"),
            "recursive": (DEPTH_HARNESS, "depth"),
        }
        requests = [
            self.sample.runner_request(h, q, name=f"warm_{n}") for n, (h, q) in harnesses.items()
        ]
        fresh = [
            self.sample.run_harness(h, q, name=f"fresh_{n}") for n, (h, q) in harnesses.items()
        ]
        batch = self.sample.run_batch(requests)
        self.assertEqual(len(batch), len(harnesses))
        for runs, alone in zip(batch, fresh):
            self.assertEqual(len(runs), 2)
            # The first run measures coverage, exactly as a runner of its own does; the second
            # runs the tests shuffled and only checks that they come out the same, reported in
            # natural order. Both see the same calls (in another order).
            self.assertEqual(runs[0], alone)
            self.assertIsNone(runs[1]["coverage"])
            self.assertEqual(runs[1]["tests"], alone["tests"])
            self.assertEqual(unordered(calls_of(runs[1])), unordered(calls_of(alone)))
            self.assertNotEqual(alone["examples"], [])
        self.assertNotEqual(fresh[0]["coverage"], fresh[1]["coverage"])

    def test_a_job_imports_from_its_own_root_first_whatever_the_jobs_before_it(self):
        # An earlier job of the worker puts the repository's root last (one of its extra roots),
        # behind another copy of the package (as an environment that installed a dependency's
        # version of the project holds): the next job, whose import root that is, must still
        # import the repository's own module, as a runner of its own does.
        shadow = self.sample.path("shadow_site")
        os.makedirs(os.path.join(shadow, "samplepkg"), exist_ok=True)
        self.sample.write(os.path.join(shadow, "samplepkg", "__init__.py"), "")
        self.sample.write(
            os.path.join(shadow, "samplepkg", "core.py"), "def classify(n):\n    return 'shadow'\n"
        )
        tools = self.sample.path("tools")
        os.makedirs(tools, exist_ok=True)
        self.sample.write(os.path.join(tools, "tool.py"), "def main():\n    return 1\n")
        harness = classify_harness([0, 5])
        first = self.sample.runner_request(
            harness,
            "classify",
            name="rooted_first",
            coverage=False,
            repo_root=tools,
            module="tool",
            extra_roots=[shadow, self.sample.repo],
        )
        second = self.sample.runner_request(harness, "classify", name="rooted_second", coverage=False)
        alone = self.sample.run_harness(harness, "classify", name="rooted_alone", coverage=False)
        batch = self.sample.run_batch([first, second], runs=1)
        self.assertEqual(batch[1][0]["tests"], alone["tests"])
        self.assertEqual(calls_of(batch[1][0]), calls_of(alone))
        self.assertNotIn("shadow", json.dumps(calls_of(batch[1][0])))

    def test_a_worker_serving_requests_answers_each_as_a_worker_of_its_own(self):
        # `r2e serve` keeps a worker across requests: each answer must be the one a worker
        # started for that request alone gives (the same file names, the same verdicts), and
        # the worker stops at the end of its input.
        harness = classify_harness([0, 5, -3, 20])
        source = read_text(self.sample.core)
        wrong_source = source.replace('return "small"', 'return "tiny"')
        self.assertNotEqual(wrong_source, source)
        requests = [
            self.sample.runner_request(
                harness,
                "classify",
                candidate_source=source,
                coverage=False,
                name=f"served_{n}",
                mode="candidate",
            )
            for n, source in enumerate([source, wrong_source, source])
        ]
        alone = [
            self.sample.run_batch([r], runs=1, name=f"served_alone_{n}")
            for n, r in enumerate(requests)
        ]
        # The wrong candidate's recorded outcomes differ (the host judges them).
        self.assertNotEqual(alone[0][0][0]["tests"], alone[1][0][0]["tests"])
        self.assertEqual(alone[0], alone[2])
        in_fifo, out_fifo = self.sample.path("served.in"), self.sample.path("served.out")
        os.mkfifo(in_fifo)
        os.mkfifo(out_fifo)
        env = dict(os.environ, PYTHONDONTWRITEBYTECODE="1")
        worker = subprocess.Popen(
            [sys.executable, BATCH, "--serve", in_fifo, out_fifo, "60"],
            cwd=self.sample.root,
            env=env,
        )
        to = os.open(in_fifo, os.O_RDWR)
        back = os.open(out_fifo, os.O_RDWR)
        ready, _, _ = select.select([back], [], [], 120)
        self.assertTrue(ready, "the serving worker did not start")
        self.assertEqual(os.read(back, 64), b"ready\n")
        try:
            for n, request in enumerate(requests):
                req_path = self.sample.path(f"served_{n}.request.json")
                out_path = self.sample.path(f"served_{n}.out.json")
                with open(req_path, "w", encoding="utf-8") as f:
                    json.dump({"jobs": [request], "runs": 1, "timeout": 60}, f)
                os.write(to, f"{req_path} {out_path}\n".encode())
                ready, _, _ = select.select([back], [], [], 120)
                self.assertTrue(ready, "the serving worker did not answer")
                self.assertEqual(os.read(back, 64), b"done\n")
                with open(out_path, encoding="utf-8") as f:
                    self.assertEqual(json.load(f)["results"], alone[n])
        finally:
            os.close(to)
        self.assertEqual(worker.wait(timeout=60), 0)
        os.close(back)

    def test_reference_calls_are_recorded(self):
        harness = classify_harness([0, 5, -3, 5, 20, 7, 8])
        expected = {
            "examples": [
                {"call": "classify(0)", "outcome": "returns 'zero'"},
                {"call": "classify(5)", "outcome": "returns 'small'"},
                {"call": "classify(-3)", "outcome": "raises ValueError: negative: -3"},
                {"call": "classify(20)", "outcome": "returns 'large'"},
                {"call": "classify(7)", "outcome": "returns 'small'"},
            ],
            "types": {"args": {"n": ["int"]}, "returns": ["str"]},
        }
        out = self.sample.run_harness(harness, "classify", name="examples")
        self.assertEqual([t["outcome"] for t in out["tests"]], ["pass"] * 7)
        self.assertEqual(calls_of(out), expected)
        # The same without coverage, and with an identical candidate file (then only the
        # reference side is wrapped); the verdicts do not change.
        out = self.sample.run_harness(harness, "classify", coverage=False, name="examples_nocov")
        self.assertEqual(calls_of(out), expected)
        out = self.sample.run_harness(
            harness, "classify", candidate_source=self.source, name="examples_cand"
        )
        self.assertEqual([t["outcome"] for t in out["tests"]], ["pass"] * 7)
        self.assertEqual(calls_of(out), expected)

    def test_method_calls_are_recorded_without_self(self):
        out = self.sample.run_harness(INTERVAL_HARNESS, "Interval.overlaps", name="method")
        self.assertEqual([t["outcome"] for t in out["tests"]], ["pass"] * 3)
        self.assertEqual(
            out["examples"],
            [
                {
                    "call": "self.overlaps(<samplepkg.core.Interval object at 0x?>)",
                    "outcome": "returns True",
                },
                {"call": "self.overlaps(7)", "outcome": "raises TypeError: not an interval"},
                {
                    "call": "self.overlaps(other=<samplepkg.core.Interval object at 0x?>)",
                    "outcome": "returns False",
                },
            ],
        )
        self.assertEqual(
            out["types"], {"args": {"other": ["Interval", "int"]}, "returns": ["bool"]}
        )
        self.assertEqual(out["coverage"]["lines_covered"], out["coverage"]["lines_total"])

    def test_recursive_calls_record_only_the_outermost(self):
        out = self.sample.run_harness(DEPTH_HARNESS, "depth", name="depth")
        self.assertEqual([t["outcome"] for t in out["tests"]], ["pass"] * 3, out["tests"])
        self.assertEqual(
            [e["call"] for e in out["examples"]],
            ["depth([[1, [2]], []])", "depth(5)", "depth([[[[[[[...]]]]]]])"],
        )
        self.assertEqual([e["outcome"] for e in out["examples"]], ["returns 3", "returns 0", "returns 401"])
        self.assertEqual(out["types"], {"args": {"items": ["int", "list"]}, "returns": ["int"]})
        self.assertEqual(out["coverage"]["branches_covered"], out["coverage"]["branches_total"])

    def test_coverage_can_be_skipped(self):
        out = self.sample.run_harness(self.harness, "classify", coverage=False, name="nocov")
        self.assertEqual(out["status"], "ok")
        self.assertIsNone(out["coverage"])

    def test_harness_import_errors_are_reported(self):
        out = self.sample.run_harness(
            "import does_not_exist_anywhere\n" + self.harness, "classify", name="badimport"
        )
        self.assertEqual(out["status"], "error")
        self.assertTrue(
            out["error"].startswith("harness import failed: ModuleNotFoundError:"), out["error"]
        )
        self.assertEqual(out["tests"], [])
        self.assertIsNone(out["coverage"])
        self.assertEqual(calls_of(out), NO_CALLS)
        # A candidate that does not compile breaks the harness's import too.
        out = self.sample.run_harness(
            self.harness, "classify", candidate_source="def classify(:\n", name="badcandidate"
        )
        self.assertEqual(out["status"], "error")
        self.assertTrue(
            out["error"].startswith("harness import failed: SyntaxError:"), out["error"]
        )

    def test_relative_paths_resolve_against_the_runner_folder(self):
        # As the Rust side does it: scripts, harness and candidate in one scratch folder, the
        # request naming the latter two relative to it, `python -I`, another working directory.
        scratch = self.sample.scratch("scratch_runner")
        self.sample.write(os.path.join(scratch, "harness.py"), self.harness)
        flipped = self.source.replace("if n < 0:", "if n <= 0:")
        self.sample.write(os.path.join(scratch, "candidate.py"), flipped)
        start, end = self.sample.function_range("classify")
        request = {
            "repo_root": self.sample.repo,
            "module": "samplepkg.core",
            "qualname": "classify",
            "harness_file": "harness.py",
            "source_file": self.sample.core,
            "start_line": start,
            "end_line": end,
            "candidate_file": "candidate.py",
            "coverage": False,
        }
        script = os.path.join(scratch, "r2e_runner.py")
        out = self.sample._run_script(script, request, "relative", 120, python_args=("-I",))
        self.assertEqual(out["status"], "ok", out["error"])
        self.assertEqual([t["outcome"] for t in out["tests"]], ["fail", "pass", "pass", "pass"])

    def test_errors_and_natural_order(self):
        harness = classify_harness(list(range(11))) + (
            "    def test_11(self):\n" "        raise ZeroDivisionError('boom')\n"
        )
        out = self.sample.run_harness(harness, "classify", name="many")
        self.assertEqual([t["name"] for t in out["tests"]], [f"TestClassify.test_{i}" for i in range(12)])
        last = out["tests"][-1]
        self.assertEqual(last["outcome"], "error")
        self.assertIn("ZeroDivisionError: boom", last["message"])
        self.assertFalse(last["returned_normally"])

    def test_the_first_record_is_the_same_under_any_hash_seed(self):
        # A set of strings and an int (unsortable: its text follows the set's iteration order,
        # which the hash seed decides) in a call's text and in what the function returns.
        words = ["apple", "berry", "cherry", "date", "elder", "fig", "grape", "kiwi"]
        harness = HEADER.replace(
            "class TestClassify", "first_of = candidate.first_of\nreference_first_of = "
            "reference.first_of\n\n\nclass TestClassify"
        ) + (
            "    def test_0(self):\n"
            f"        args = ({{1, *{words!r}}},)\n"
            "        r2e_equiv.check_function(self, first_of, reference_first_of, args, {})\n"
        )
        env = {k: v for k, v in os.environ.items() if k != "PYTHONHASHSEED"}
        calls = []
        for i, (args, seed) in enumerate([((), "0"), (("-I",), None), (("-I",), None), (("-I",), None)]):
            request = self.sample.runner_request(
                harness, "first_of", coverage=False, name=f"seeded_{i}", mode="record"
            )
            out = self.sample._run_script(
                BATCH, {"jobs": [request], "runs": 1, "first_run": 0, "timeout": 60},
                f"seeded_{i}", 120, python_args=args,
                env=dict(env, PYTHONHASHSEED=seed) if seed else env,
            )
            calls.append(out["results"][0][0]["tests"][0]["records"][0]["call"])
        # The first under PYTHONHASHSEED=0 itself, the others as the Rust side runs them.
        self.assertEqual(calls[1:], calls[:1] * 3)
        self.assertTrue(calls[0].startswith("first_of({"), calls)


class AnswerTextTest(unittest.TestCase):
    """Issue 52: a string with a lone surrogate (code under test may return one) made a whole
    answer unreadable for r2e, which reads answers as UTF-8; it is written as its escape's
    text, and everything else as `json.dumps` writes it."""

    def test_a_lone_surrogate_is_written_as_text_and_the_answer_is_utf8(self):
        import r2e_runner

        value = {
            "lone": "x\ud800y",
            "low": "\udc00",
            "pair": "\U0001F600",
            "text": "back\\ud800slash",
            "nested": [{"k": "\udbff"}],
        }
        text = r2e_runner.json_text(value)
        text.encode("utf-8")
        back = json.loads(text)
        # Every string of the answer is UTF-8, as r2e reads it.
        json.dumps(back, ensure_ascii=False).encode("utf-8")
        self.assertEqual(back["lone"], "x\\ud800y")
        self.assertEqual(back["low"], "\\udc00")
        self.assertEqual(back["pair"], "\U0001F600")
        self.assertEqual(back["text"], "back\\ud800slash")
        self.assertEqual(back["nested"][0]["k"], "\\udbff")
        # Without surrogates it is json.dumps's text.
        plain = {"a": "é\\x", "b": [1, 2.5, None]}
        self.assertEqual(r2e_runner.json_text(plain), json.dumps(plain))
        with self.assertRaises(UnicodeEncodeError):
            json.dumps(json.loads(json.dumps(value)), ensure_ascii=False).encode("utf-8")


if __name__ == "__main__":
    unittest.main()
