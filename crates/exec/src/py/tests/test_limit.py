"""Tests of r2e_limit.py's one rule, where it is used: a call that waits (a child that sleeps, an
editor that waits for its input, a sleep) ends at its limit as a timeout, and nothing it started
outlives it, in the explorer's executor and in the warm worker's runs."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import time
import unittest

from r2e_test_support import BATCH, PY_DIR, SampleRepo, read_text

# Calls that wait, each writing the pids of what it started to PIDS (one a line).
WAITERS = textwrap.dedent(
    """
    import os, subprocess, time

    PIDS = os.environ["R2E_TEST_PIDS"]

    def note(*pids):
        with open(PIDS, "a") as f:
            f.write("".join("%d\\n" % p for p in pids))

    def child_sleeps():
        p = subprocess.Popen(["sleep", "1000"])
        note(p.pid)
        p.wait()

    def editor_waits():
        # click.edit's way: an editor (here a shell) that waits for input that never comes,
        # having started a helper of its own in a session of its own.
        p = subprocess.Popen(
            ["sh", "-c", 'setsid sleep 999 & echo $! >> "$R2E_TEST_PIDS"; exec cat'],
            stdin=subprocess.PIPE,
        )
        note(p.pid)
        p.wait()

    def sleeps():
        time.sleep(1.5)

    def forks_and_returns():
        # Both copies come back into the caller's code.
        os.fork()
        return "returned"

    def spins(seconds):
        t = time.process_time()
        while time.process_time() - t < seconds:
            pass
        return "done"
    """
)

EXECUTOR_SCRIPT = textwrap.dedent(
    """
    import json, sys, time
    sys.path[0:0] = [sys.argv[1], sys.argv[2]]
    import r2e_equiv, waiters
    from r2e_explorer.tracing import Executor

    executor = Executor(r2e_equiv, 1.0)
    out = {}
    for name, call in [
        ("child_sleeps", waiters.child_sleeps),
        ("editor_waits", waiters.editor_waits),
        ("sleeps", waiters.sleeps),
        ("spins_short", lambda: waiters.spins(0.3)),
        ("spins_long", lambda: waiters.spins(1.5)),
    ]:
        started = time.monotonic()
        status, _, _ = executor.run(lambda: None, lambda _: call())
        out[name] = [status, time.monotonic() - started]
    print(json.dumps(out))
    """
)


def harness_of(tests: str) -> str:
    """A harness of classify whose TestClassify holds `tests` (its methods, at column 0)."""
    return textwrap.dedent(
        """
        import unittest

        import r2e_equiv

        candidate, reference = r2e_equiv.harness_modules()


        class TestClassify(unittest.TestCase):
        """
    ) + textwrap.indent(textwrap.dedent(tests), "    ")


def alive(pid: int) -> bool:
    """Whether `pid` is in the process table (a zombie counts)."""
    return os.path.exists(f"/proc/{pid}")


class ClocksTest(unittest.TestCase):
    def test_a_descriptor_the_code_took_over_is_left_to_it(self):
        # The limit keeps this process's schedstat files open; code under test may close every
        # descriptor and open its own files, which then take those numbers. Such a file is
        # neither read as a clock nor closed.
        import threading

        import r2e_limit

        me, tid = os.getpid(), threading.get_native_id()
        self.assertIsNotNone(r2e_limit._task_clocks(me, tid))
        fd, _ = r2e_limit._OPEN[tid]
        os.close(fd)
        r, w = os.pipe()
        self.addCleanup(os.close, w)
        self.assertEqual(r, fd)
        spent = time.process_time()
        while time.process_time() - spent < 0.05:
            pass
        clocks = r2e_limit._task_clocks(me, tid)
        self.assertIsNotNone(clocks)
        self.assertGreater(clocks[0], 0.04)
        os.write(w, b"x")
        self.assertEqual(os.read(r, 1), b"x")
        os.close(r)
        self.assertNotEqual(r2e_limit._OPEN[tid][0], r)


class LimitTest(unittest.TestCase):
    def setUp(self):
        self.sample = SampleRepo()
        self.pids = self.sample.path("pids.txt")
        open(self.pids, "w").close()
        self.env = dict(os.environ, R2E_TEST_PIDS=self.pids, PYTHONDONTWRITEBYTECODE="1")

    def tearDown(self):
        self.sample.cleanup()

    def run_batch(self, jobs: list, timeout: float) -> list:
        """The warm worker's results for `jobs`, one run each."""
        request = self.sample.path("batch.json")
        out = self.sample.path("batch.out.json")
        with open(request, "w", encoding="utf-8") as f:
            json.dump({"jobs": jobs, "runs": 1, "timeout": timeout}, f)
        subprocess.run(
            [sys.executable, BATCH, request, out],
            check=True, timeout=60, cwd=self.sample.root, env=self.env,
        )
        with open(out, encoding="utf-8") as f:
            return json.load(f)["results"]

    def started(self) -> list[int]:
        return [int(line) for line in read_text(self.pids).split()]

    def test_an_explorer_call_that_waits_ends_at_its_limit_and_takes_its_processes_along(self):
        folder = self.sample.path("mods")
        os.makedirs(folder)
        SampleRepo.write(os.path.join(folder, "waiters.py"), WAITERS)
        script = self.sample.path("executor.py")
        SampleRepo.write(script, EXECUTOR_SCRIPT)
        done = subprocess.run(
            [sys.executable, script, folder, PY_DIR],
            capture_output=True, text=True, timeout=60, env=self.env,
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        out = json.loads(done.stdout)
        statuses = {name: status for name, (status, _) in out.items()}
        self.assertEqual(
            statuses,
            {
                "child_sleeps": "timeout",
                "editor_waits": "timeout",
                "sleeps": "timeout",
                "spins_short": "ok",
                "spins_long": "timeout",
            },
            out,
        )
        # At its limit (1 s, on an idle machine), not at a backstop three times as long.
        for name in ("child_sleeps", "editor_waits", "sleeps"):
            self.assertLess(out[name][1], 2.5, out)
        started = self.started()
        self.assertEqual(len(started), 3, started)
        self.assertEqual([p for p in started if alive(p)], [])

    def test_a_run_that_waits_ends_at_its_limit_and_takes_its_processes_along(self):
        source = read_text(self.sample.core)
        harness = harness_of(
            """
            def test_0(self):
                candidate.classify(0)
            """
        )
        jobs = []
        for name in ("child_sleeps", "editor_waits"):
            candidate = source + "\n" + WAITERS + f"\n\ndef classify(n):\n    return {name}()\n"
            jobs.append(
                self.sample.runner_request(
                    harness, "classify", candidate_source=candidate, coverage=False, name=name,
                    mode="candidate",
                )
            )
        started = time.monotonic()
        results = self.run_batch(jobs, 1)
        seconds = time.monotonic() - started
        self.assertEqual([r[0]["status"] for r in results], ["timeout", "timeout"], results)
        self.assertLess(seconds, 6.0)
        started = self.started()
        self.assertEqual(len(started), 3, started)
        self.assertEqual([p for p in started if alive(p)], [])

    def test_a_copy_forked_by_an_explorer_call_never_goes_on_with_the_exploration(self):
        folder = self.sample.path("mods")
        os.makedirs(folder)
        SampleRepo.write(os.path.join(folder, "waiters.py"), WAITERS)
        script = self.sample.path("forks.py")
        SampleRepo.write(
            script,
            textwrap.dedent(
                """
                import os, sys
                sys.path[0:0] = [sys.argv[1], sys.argv[2]]
                import r2e_equiv, waiters
                from r2e_explorer.tracing import Executor

                executor = Executor(r2e_equiv, 5.0)
                for _ in range(3):
                    status, value, _ = executor.run(lambda: None, lambda _: waiters.forks_and_returns())
                    # What goes on after the call: one process, the explorer's own.
                    with open(os.environ["R2E_TEST_PIDS"], "a") as f:
                        f.write("%d %s %s\\n" % (os.getpid(), status, value))
                """
            ),
        )
        done = subprocess.run(
            [sys.executable, script, folder, PY_DIR],
            capture_output=True, text=True, timeout=60, env=self.env,
        )
        self.assertEqual(done.returncode, 0, done.stderr)
        lines = read_text(self.pids).splitlines()
        self.assertEqual(lines, [f"{lines[0].split()[0]} ok returned"] * 3, lines)

    def test_a_copy_forked_by_a_candidate_never_answers_for_its_run(self):
        source = read_text(self.sample.core)
        harness = harness_of(
            """
            def test_0(self):
                self.assertEqual(candidate.classify(0), reference.classify(0))

            def test_1(self):
                self.assertEqual(candidate.classify(5), reference.classify(5))
            """
        )
        # The reference's classify, behind a fork whose child returns too (and would run the
        # rest of the harness and answer on the worker's pipe).
        candidate = source + textwrap.dedent(
            """

            _classify = classify


            def classify(n):
                import os

                # The copy goes on first: the caller waits for it to end.
                pid = os.fork()
                if pid:
                    os.waitpid(pid, 0)
                return _classify(n)
            """
        )
        for isolate in (False, True):
            job = self.sample.runner_request(
                harness, "classify", candidate_source=candidate, coverage=False,
                name=f"forks-{isolate}", mode="candidate",
                hide=[self.sample.core] if isolate else [],
            )
            results = self.run_batch([job], 20)
            self.assertEqual([r[0]["status"] for r in results], ["ok"], results)
            self.assertEqual([t["outcome"] for t in results[0][0]["tests"]], ["pass", "pass"], results)


if __name__ == "__main__":
    unittest.main()
