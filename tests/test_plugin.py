"""The pytest plugin, tested with pytester: real small suites run in a subprocess.

Each run has a timeout so a plugin bug that deadlocks can never hang CI.
"""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap

import pytest

from lockcheck.lockdep.checker import Checker
from lockcheck.events import Event
from lockcheck.python.pytest_plugin import replay_graph

#: these tests read the kernel layout (the plugin's default is the short one)
pytestmark = pytest.mark.usefixtures("kernel_report_style")

pytest_plugins = ["pytester"]

TIMEOUT = 120


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=TIMEOUT)


ABBA = """
    import threading

    A = threading.Lock()
    B = threading.Lock()

    def test_a():
        with A:
            with B:
                pass

    def test_b():
        with B:
            with A:
                pass
"""


def test_clean_suite_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_clean="""
        import concurrent.futures, logging, queue, threading

        class Account:
            def __init__(self):
                self._lock = threading.Lock()
                self.balance = 0

        BANK = threading.Lock()

        def transfer(a, b):
            with BANK:
                with a._lock:
                    a.balance -= 1
                with b._lock:
                    b.balance += 1

        def test_threads():
            a, b = Account(), Account()
            threads = [threading.Thread(target=transfer, args=(a, b)) for _ in range(8)]
            for t in threads: t.start()
            for t in threads: t.join()
            assert b.balance == 8

        def test_stdlib():
            q = queue.Queue()
            with concurrent.futures.ThreadPoolExecutor(4) as pool:
                futures = [pool.submit(q.put, i) for i in range(20)]
                concurrent.futures.wait(futures)
                assert [f.result() for f in concurrent.futures.as_completed(futures)] == [None] * 20
            assert q.qsize() == 20
            logging.getLogger("clean").warning("logging takes its locks too")

        def test_same_order_again():
            a, b = Account(), Account()
            transfer(b, a)
    """)
    result = run(pytester, "--lockcheck")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["*lockcheck: 0 findings* in * events*"])
    assert result.ret == 0


def test_abba_between_two_tests_fails_the_second(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_abba=ABBA)
    result = run(pytester, "--lockcheck")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "FAILED test_abba.py::test_b" in out
    assert "WARNING: possible circular locking dependency detected" in out
    # the chain names where each dependency was first seen: both tests' sites (Python stacks:
    # tests/test_plugin_report.py)
    result.stdout.fnmatch_lines([
        "-> #1 (test_abba.B){+.+.}:",
        "       test_abba.py:8 in test_a",
        "       by MainThread/* in test test_abba.py::test_a",
        "-> #0 (test_abba.A){+.+.}:",
        "       test_abba.py:13 in test_b",
        "       by MainThread/* in test test_abba.py::test_b",
    ])
    result.stdout.fnmatch_lines(["*(test_abba.A){+.+.}, at: test_abba.py:13"])
    result.stdout.fnmatch_lines(["*circular-dependency: test_abba.A -> test_abba.B in test_abba.py::test_b*"])


def test_rlock_reentry_passes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_rlock="""
        import threading

        class Registry:
            def __init__(self):
                self._lock = threading.RLock()
                self.items = []
            def add(self, item):
                with self._lock:
                    self.items.append(item)
            def add_many(self, items):
                with self._lock:
                    for item in items:
                        self.add(item)

        def test_reentry():
            r = Registry()
            r.add_many([1, 2, 3])
            assert r.items == [1, 2, 3]
    """)
    result = run(pytester, "--lockcheck")
    result.assert_outcomes(passed=1)
    assert result.ret == 0


def test_self_deadlock_raises_instead_of_hanging(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_self="""
        import threading
        import lockcheck.python.instrument

        def test_reacquire():
            lock = threading.Lock()
            with lock:
                lock.acquire()   # would hang forever without lockcheck

        def test_still_runs():
            assert True
    """)
    result = run(pytester, "--lockcheck", "-o", "lockcheck_grace=0.1")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "SelfDeadlockError" in out
    assert "WARNING: possible recursive locking detected" in out
    result.stdout.fnmatch_lines(["*(test_reacquire.lock){+.+.}, at: test_self.py:7"])


def test_signal_lock_released_by_another_thread_is_fine(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_signal="""
        import threading, time

        def test_signal():
            done = threading.Lock()
            done.acquire()
            def worker():
                time.sleep(0.05)
                done.release()       # released by a thread that does not hold it
            threading.Thread(target=worker).start()
            done.acquire()           # waits for the signal
            done.release()
    """)
    result = run(pytester, "--lockcheck", "-o", "lockcheck_grace=5")
    result.assert_outcomes(passed=1)


def test_same_class_nesting_reported_but_program_goes_on(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nest="""
        import threading
        import lockcheck

        class Node:
            def __init__(self):
                self.lock = threading.Lock()

        def test_unannotated():
            parent, child = Node(), Node()
            with parent.lock:
                with child.lock:
                    print("the program went on")

        def test_annotated():
            parent, child = Node(), Node()
            with parent.lock:
                with lockcheck.nested(child.lock, 1):
                    pass
    """)
    result = run(pytester, "--lockcheck")
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "FAILED test_nest.py::test_unannotated" in out
    assert "WARNING: possible recursive locking detected" in out
    assert "the program went on" in out
    assert "SelfDeadlockError" not in out


def test_condition_wait_notify_is_clean(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_cond="""
        import threading

        class Box:
            def __init__(self, lock=None):
                self.cond = threading.Condition(lock)
                self.items = []
            def put(self, item):
                with self.cond:
                    self.items.append(item)
                    self.cond.notify()
            def get(self):
                with self.cond:
                    self.cond.wait_for(lambda: self.items, timeout=10)
                    return self.items.pop(0)

        def run(box):
            outer = threading.Lock()
            def producer():
                for i in range(50):
                    with outer:
                        box.put(i)
            t = threading.Thread(target=producer)
            t.start()
            got = [box.get() for _ in range(50)]
            t.join()
            assert got == list(range(50))

        def test_rlock_condition():
            run(Box())

        def test_lock_condition():
            run(Box(threading.Lock()))
    """)
    result = run(pytester, "--lockcheck")
    result.assert_outcomes(passed=2)
    assert result.ret == 0


def test_asyncio_abba_between_tasks(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_aio="""
        import asyncio

        async def scenario():
            a = asyncio.Lock()
            b = asyncio.Lock()
            async def one():
                async with a:
                    async with b:
                        pass
            async def two():
                await asyncio.sleep(0.01)
                async with b:
                    async with a:
                        pass
            await asyncio.gather(one(), two())

        def test_abba_tasks():
            asyncio.run(scenario())
    """)
    result = run(pytester, "--lockcheck")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    assert "WARNING: possible circular locking dependency detected" in out
    result.stdout.fnmatch_lines(["Task-*/a* [[]test_aio.py::test_abba_tasks[]] is trying to acquire lock:"])


def test_inert_when_not_enabled(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_abba=ABBA + """
    def test_factories_untouched():
        import _thread
        # the originals, whether Lock is a function (<= 3.12) or a class (3.13+)
        assert threading.Lock.__module__ == "_thread" and not hasattr(threading.Lock, "_lc_kinds")
        assert type(A) is type(_thread.allocate_lock())
""")
    result = run(pytester)
    result.assert_outcomes(passed=3)
    assert "lockcheck" not in result.stdout.str()


def test_enabled_by_ini_and_skip_marker(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nlockcheck = true\n")
    pytester.makepyfile(test_mark="""
        import threading
        import pytest

        A = threading.Lock()
        B = threading.Lock()

        def test_a():
            with A:
                with B:
                    pass

        @pytest.mark.lockcheck(skip=True)
        def test_b_not_checked():
            with B:
                with A:
                    pass

        def test_factories_patched():
            from lockcheck.python.tracked import TrackedLock
            assert type(threading.Lock()) is TrackedLock
    """)
    result = run(pytester)
    result.assert_outcomes(passed=3)
    assert result.ret == 0


def test_ini_suppression(pytester: pytest.Pytester) -> None:
    pytester.makeini("[pytest]\nlockcheck_suppress =\n    circular-dependency test_abba.*\n")
    pytester.makepyfile(test_abba=ABBA)
    result = run(pytester, "--lockcheck")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*lockcheck: 0 findings, 1 suppressed*"])


@pytest.mark.slow
def test_xdist_workers_graphs_are_merged(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(shared_locks="""
        import threading
        A = threading.Lock()
        B = threading.Lock()
    """)
    pytester.makepyfile(test_one="""
        from shared_locks import A, B
        def test_a():
            with A:
                with B:
                    pass
    """, test_two="""
        from shared_locks import A, B
        def test_b():
            with B:
                with A:
                    pass
    """)
    result = run(pytester, "--lockcheck", "-p", "xdist", "-n", "2", "--dist", "loadfile", "-v")
    out = result.stdout.str()
    assert result.ret == 1
    assert "WARNING: possible circular locking dependency detected" in out
    assert "test_one.py::test_a" in out and "test_two.py::test_b" in out
    if "across workers" in out:
        # the usual case: one file per worker, neither worker saw a cycle on its own; the session
        # fails with one error named lockcheck (tests/test_plugin_report.py)
        result.assert_outcomes(passed=2, errors=1)
        result.stdout.fnmatch_lines(["*circular-dependency: * (across workers)"])
        result.stdout.fnmatch_lines(["*by gw?:MainThread/* in test test_one.py::test_a"])
    else:  # both files ran on one worker: the second test failed there
        result.assert_outcomes(passed=1, failed=1)


def test_replay_graph_finds_cycles_across_graphs() -> None:
    one, two = Checker(), Checker()
    for checker, (first, second) in ((one, ("A", "B")), (two, ("B", "A"))):
        for op, lock in (("acquire", first), ("acquire", second), ("release", second), ("release", first)):
            assert not checker.feed(Event("T", op, lock, at=f"{lock}.py:1", file="t.py", line=1))
    merged = Checker()
    assert replay_graph(merged, one.graph) == []
    found = replay_graph(merged, two.graph)
    assert [f.kind for f in found] == ["circular-dependency"]
    assert sorted(found[0].cycle) == ["A", "B"]


def test_trace_reproduces_the_verdict_offline(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_abba=ABBA + """
    class Node:
        def __init__(self):
            self.lock = threading.Lock()

    def test_nested_nodes():
        parent, child = Node(), Node()
        with parent.lock:
            with child.lock:
                pass
""")
    trace = pytester.path / "run.lt"
    graph = pytester.path / "run.json"
    result = run(pytester, "--lockcheck", f"--lockcheck-trace={trace}", f"--lockcheck-graph={graph}")
    result.assert_outcomes(passed=1, failed=2)
    saved = json.loads(graph.read_text())
    plugin_findings = sorted((f["kind"], f["lock"], f["held"]) for f in saved["findings"])
    assert [kind for kind, _, _ in plugin_findings] == ["circular-dependency", "recursive-locking"]
    cli = subprocess.run([sys.executable, "-m", "lockcheck", "check", "--format", "json", str(trace)],
                         capture_output=True, text=True, timeout=TIMEOUT, cwd=pytester.path)
    assert cli.returncode == 1, cli.stderr
    doc = json.loads(cli.stdout)
    cli_findings = sorted((f["kind"], f["lock"], f["held"]) for f in doc["findings"])
    assert cli_findings == plugin_findings
    text = subprocess.run([sys.executable, "-m", "lockcheck", "check", str(trace)], capture_output=True,
                          text=True, timeout=TIMEOUT, cwd=pytester.path)
    assert "WARNING: possible circular locking dependency detected" in text.stdout
    assert textwrap.dedent("# context test_abba.py::test_b") in trace.read_text()
