"""Tests of r2e_explorer.tracing: arcs, the executor's per-call timer and isolation, the budget."""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import tempfile
import time
import unittest

from r2e_test_support import TempModules

import r2e_equiv
from r2e_explorer.tracing import (
    ArcTracer,
    Budget,
    Executor,
    NullWriter,
    Stop,
    idle_seconds,
    run_delay,
    tracer_for,
)

SOURCE = """
def sign(n):
    if n < 0:
        return -1
    return 1


def squares(n):
    return [i * i for i in range(n)]


def spin():
    while True:
        pass


def swallow():
    try:
        while True:
            pass
    except BaseException:
        pass
    while True:
        pass
"""


class TracingCase(unittest.TestCase):
    @classmethod
    def setUpClass(cls):
        cls.modules = TempModules()
        cls.mod = cls.modules.add("r2e_tracing_sample", SOURCE)

    @classmethod
    def tearDownClass(cls):
        cls.modules.cleanup()

    def setUp(self):
        self.saved_handler = signal.getsignal(signal.SIGALRM)

    def tearDown(self):
        signal.setitimer(signal.ITIMER_REAL, 0, 0)
        signal.signal(signal.SIGALRM, self.saved_handler)


class ArcTracerTest(TracingCase):
    def traced(self, func, *args):
        tracer = tracer_for(func)
        tracer.start()
        try:
            func(*args)
        finally:
            arcs = tracer.stop()
        return arcs

    def test_arcs_of_each_branch_with_entry_and_exit_arcs(self):
        first = self.mod.sign.__code__.co_firstlineno
        negative = self.traced(self.mod.sign, -5)
        positive = self.traced(self.mod.sign, 5)
        self.assertEqual(
            negative, {(-first, first + 1), (first + 1, first + 2), (first + 2, -first)}
        )
        self.assertEqual(
            positive, {(-first, first + 1), (first + 1, first + 3), (first + 3, -first)}
        )
        # The same input gives the same arcs.
        self.assertEqual(self.traced(self.mod.sign, -1), negative)

    def test_nested_code_objects_are_traced_too(self):
        first = self.mod.squares.__code__.co_firstlineno
        arcs = self.traced(self.mod.squares, 3)
        # The comprehension's own frame contributes arcs from its entry (same first line).
        self.assertIn((-(first + 1), first + 1), arcs)
        self.assertGreater(len(arcs), 3)

    def test_other_code_is_not_traced(self):
        tracer = tracer_for(self.mod.sign)
        tracer.start()
        self.mod.squares(2)
        self.assertEqual(tracer.stop(), frozenset())

    def test_a_function_without_source_gives_an_inert_tracer(self):
        tracer = tracer_for(len)
        self.assertIsNone(tracer.filename)
        tracer.start()
        self.assertIsNone(sys.gettrace())
        self.assertEqual(tracer.stop(), frozenset())
        self.assertEqual(ArcTracer(None, 0, -1).stop(), frozenset())


class ExecutorTest(TracingCase):
    def test_ok_with_arcs(self):
        executor = Executor(r2e_equiv, 1.0)
        tracer = tracer_for(self.mod.sign)
        status, result, arcs = executor.run(lambda: (-3,), lambda a: self.mod.sign(*a), tracer)
        self.assertEqual((status, result), ("ok", -1))
        self.assertEqual(len(arcs), 3)
        self.assertEqual(executor.executions, 1)
        self.assertIsNone(sys.gettrace())

    def test_a_failing_prepare_is_an_invalid_input(self):
        executor = Executor(r2e_equiv, 1.0)
        status, exc, arcs = executor.run(lambda: 1 / 0, lambda built: built)
        self.assertEqual(status, "invalid")
        self.assertIsInstance(exc, ZeroDivisionError)
        self.assertIsNone(arcs)

    def test_an_exception_of_the_action_propagates(self):
        executor = Executor(r2e_equiv, 1.0)
        with self.assertRaises(KeyError):
            executor.run(lambda: {}, lambda d: d["missing"])

    def test_a_call_past_its_timeout_is_abandoned(self):
        executor = Executor(r2e_equiv, 0.05)
        started = time.monotonic()
        self.assertEqual(
            executor.run(lambda: None, lambda _: self.mod.spin()), ("timeout", None, None)
        )
        # Code swallowing the first Timeout is interrupted again.
        self.assertEqual(
            executor.run(lambda: None, lambda _: self.mod.swallow()), ("timeout", None, None)
        )
        self.assertLess(time.monotonic() - started, 5)
        self.assertEqual((executor.executions, executor.timeouts), (2, 2))
        # The timer is off afterwards.
        self.assertEqual(signal.getitimer(signal.ITIMER_REAL), (0.0, 0.0))
        self.assertEqual(executor.run(lambda: 2, lambda x: x * 2), ("ok", 4, frozenset()))

    def test_output_stdin_and_working_directory_are_isolated(self):
        executor = Executor(r2e_equiv, 1.0)
        cwd = os.getcwd()
        stdout, stdin = sys.stdout, sys.stdin

        def action(_):
            print("noise")
            print("more noise", file=sys.stderr)
            os.chdir(tempfile.gettempdir())
            return input()

        with self.assertRaises(EOFError):
            executor.run(lambda: None, action)
        self.assertEqual(os.getcwd(), cwd)
        self.assertIs(sys.stdout, stdout)
        self.assertIs(sys.stdin, stdin)

    def test_the_alarm_handler_is_reinstalled_for_every_run(self):
        executor = Executor(r2e_equiv, 0.05)
        signal.signal(signal.SIGALRM, signal.SIG_IGN)  # as code under test might
        self.assertEqual(executor.run(lambda: None, lambda _: self.mod.spin())[0], "timeout")

    def test_arm_and_disarm(self):
        executor = Executor(r2e_equiv, 1.0)
        executor.arm(0.05, 0.05)
        with self.assertRaises(r2e_equiv.Timeout):
            try:
                self.mod.spin()
            finally:
                executor.disarm()
        self.assertEqual(signal.getitimer(signal.ITIMER_REAL), (0.0, 0.0))

    def test_null_writer(self):
        writer = NullWriter()
        self.assertTrue(writer.writable())
        self.assertEqual(writer.write("abc"), 3)


class BudgetTest(TracingCase):
    def test_executions_and_the_reserve(self):
        executor = Executor(r2e_equiv, 1.0)
        budget = Budget(executor, executions=5, reserve=2, time_limit=60)
        executor.executions = 2
        budget.check()
        executor.executions = 3
        self.assertRaises(Stop, budget.check)
        # The reserve is for the end.
        budget.check(final=True)
        executor.executions = 5
        self.assertRaises(Stop, budget.check, final=True)
        self.assertFalse(budget.time_limit_hit)

    def test_time_limit(self):
        budget = Budget(Executor(r2e_equiv, 1.0), executions=100, reserve=0, time_limit=0.0)
        time.sleep(0.01)
        self.assertRaises(Stop, budget.check)
        self.assertTrue(budget.time_limit_hit)


class IdleClockTest(unittest.TestCase):
    def test_the_idle_machine_clock_leaves_out_the_time_waited_for_a_cpu(self):
        """With twice as many busy loops as cores, a thread that spins and sleeps waits for a
        CPU (its run delay grows); the idle-machine clock counts its CPU time and its sleep,
        not that wait."""
        cores = os.cpu_count() or 1
        hogs = [
            subprocess.Popen([sys.executable, "-c", "while True: pass"])
            for _ in range(2 * cores)
        ]
        try:
            time.sleep(0.2)
            idle, wall, cpu = idle_seconds(), time.monotonic(), time.thread_time()
            while time.thread_time() - cpu < 0.2:
                pass
            time.sleep(0.2)
            idle = idle_seconds() - idle
            wall = time.monotonic() - wall
            cpu = time.thread_time() - cpu
        finally:
            for hog in hogs:
                hog.kill()
                hog.wait()
        self.assertGreater(run_delay(), 0.0, "the kernel keeps no schedstat")
        self.assertGreater(wall - idle, 0.1, (wall, idle, cpu))
        self.assertGreater(idle, cpu + 0.2 - 0.02, (wall, idle, cpu))
        self.assertLess(idle, cpu + 0.2 + 0.15, (wall, idle, cpu))


if __name__ == "__main__":
    unittest.main()
