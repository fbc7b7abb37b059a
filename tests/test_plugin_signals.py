"""The plugin's own state under signals, threads and fork (issue 15): recording never waits on
itself, a forked child never hangs on the recorder's lock, each process writes its own trace.

The heavy cases run in a fresh interpreter with a timeout, so a regression is a failure and
never a hung test run.
"""

from __future__ import annotations

import _thread
import os
import signal
import subprocess
import sys
import textwrap
import threading

import pytest

from lockcheck.python import instrument as pylocks
from lockcheck.readers.lt import parse

#: these tests read the kernel layout (the plugin's default is the short one)
pytestmark = pytest.mark.usefixtures("kernel_report_style")

pytest_plugins = ["pytester"]

TIMEOUT = 120


def run_script(tmp_path, code: str) -> subprocess.CompletedProcess:
    """`code` run as a script of its own (a file: lock classes are named from its source lines)."""
    script = tmp_path / "script.py"
    script.write_text(textwrap.dedent(code))
    return subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=TIMEOUT,
                          cwd=str(tmp_path))


@pytest.mark.skipif(not hasattr(signal, "setitimer"), reason="needs interval timers")
def test_a_signal_handler_taking_a_lock_while_the_recorder_runs_never_waits(tmp_path) -> None:
    """An interval timer fires every millisecond while the main thread takes locks (so it is
    inside the recorder much of the time); the handler takes a lock too.  Its events are recorded
    once the interrupted one is done: no hang, no RecursionError, every event counted."""
    result = run_script(tmp_path, """
        import signal, threading
        from lockcheck.python import instrument as pylocks

        with pylocks.instrument() as rec:
            in_handler = threading.RLock()  # handlers may nest: a Lock could self-deadlock
            a, b = threading.Lock(), threading.RLock()
            fired = []

            def handler(signum, frame):
                with in_handler:
                    fired.append(1)

            signal.signal(signal.SIGALRM, handler)
            signal.setitimer(signal.ITIMER_REAL, 0.001, 0.001)
            try:
                for _ in range(200000):
                    with a:
                        with b:
                            pass
                    if len(fired) > 200:
                        break
            finally:
                signal.setitimer(signal.ITIMER_REAL, 0, 0)
            rec.drain()
            print("fired", len(fired))
            print("handler-class", any(c.endswith("in_handler") for c in rec.checker.graph.nx.nodes))
            print("findings", [f.kind for f, _ in rec.findings])
            print("pending", len(rec._pending))
    """)
    assert result.returncode == 0, result.stderr
    assert "Traceback" not in result.stderr
    lines = dict(line.split(" ", 1) for line in result.stdout.splitlines())
    assert int(lines["fired"]) > 0
    assert lines["handler-class"] == "True"  # the handler's events reached the checker
    assert lines["findings"] == "[]"
    assert lines["pending"] == "0"


def test_a_recorder_interrupted_inside_its_lock_queues_instead_of_waiting() -> None:
    """The same thread re-entering the recorder (what a signal handler or a `__del__` does)
    while it holds the feed lock: the event is queued and applied by the next feed."""
    with pylocks.instrument() as rec:
        outer = threading.Lock()
        inner = threading.Lock()
        rec._busy.add(_thread.get_ident())  # as if interrupted inside feed()
        try:
            with inner:  # would block for ever on the feed lock if it were taken
                pass
        finally:
            rec._busy.discard(_thread.get_ident())
        assert len(rec._pending) == 2
        with outer:
            pass
        assert not rec._pending
    assert rec.checker.stats.events >= 4
    assert rec.findings == []


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_fork_under_heavy_thread_switching_never_hangs_a_child(tmp_path) -> None:
    """300 children forked while four threads hammer tracked locks with the switch interval
    at 1 µs: the recorder's lock may be held by another thread at any fork; no child hangs."""
    result = run_script(tmp_path, """
        import os, sys, threading, time
        from lockcheck.python import instrument as pylocks

        sys.setswitchinterval(1e-6)
        with pylocks.instrument() as rec:
            locks = [threading.Lock() for _ in range(3)]
            rlock = threading.RLock()
            stop = threading.Event()

            def hammer(n):
                while not stop.is_set():
                    with locks[n % 3]:
                        with rlock:
                            pass

            threads = [threading.Thread(target=hammer, args=(n,)) for n in range(4)]
            for t in threads:
                t.start()
            hung = 0
            for _ in range(300):
                pid = os.fork()
                if pid == 0:
                    # the recorder, its lock and the checker, in the child (not the hammered locks:
                    # another thread may hold one at the fork, and then the child would hang
                    # without lockcheck too)
                    extra = threading.Lock()
                    with extra:
                        pass
                    os._exit(0)
                deadline = time.monotonic() + 10
                while True:
                    done, _ = os.waitpid(pid, os.WNOHANG)
                    if done:
                        break
                    if time.monotonic() > deadline:
                        hung += 1
                        os.kill(pid, 9)
                        os.waitpid(pid, 0)
                        break
                    time.sleep(0.0005)
            stop.set()
            for t in threads:
                t.join()
        sys.setswitchinterval(0.005)
        print("hung", hung)
        print("findings", [f.kind for f, _ in rec.findings])
    """)
    assert result.returncode == 0, result.stderr
    assert "hung 0" in result.stdout
    assert "findings []" in result.stdout


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
@pytest.mark.parametrize("name", ["locks.lt", "locks.lt.gz"])
def test_forked_children_write_their_own_traces_merged_at_the_end(pytester: pytest.Pytester, name: str) -> None:
    """Each child writes `TRACE.pidN` (line by line: os._exit flushes nothing); at the end the
    parent appends it with the child's tasks renamed `pidN:...`, so the replay is the live verdict."""
    pytester.makepyfile(test_children="""
        import os
        import threading

        A = threading.Lock()
        B = threading.Lock()

        def test_children_take_locks_in_the_parents_order():
            with A:
                for _ in range(3):
                    pid = os.fork()
                    if pid == 0:
                        with B:  # under A, which the forking thread held: A -> B, as the parent
                            pass
                        os._exit(0)
                    os.waitpid(pid, 0)
                with B:
                    pass
    """)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:logging", "--lockcheck",
                                           f"--lockcheck-trace={name}", timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    assert sorted(p.name for p in pytester.path.iterdir() if p.name.startswith("locks.")) == [name]
    from lockcheck.readers.source import open_lines

    _, lines = open_lines(str(pytester.path / name))
    events = list(parse(lines))
    child_tasks = {ev.task.split(":", 1)[0] for ev in events if ev.task.startswith("pid")}
    assert len(child_tasks) == 3
    replay = subprocess.run([sys.executable, "-m", "lockcheck", "check", str(pytester.path / name)],
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert replay.returncode == 0, replay.stdout + replay.stderr


def test_tracked_locks_pass_for_the_real_types() -> None:
    """What a program can observe of a lock is what it observes without lockcheck."""
    import copy
    import pickle

    raw_lock, raw_rlock = threading.Lock(), threading.RLock()
    raw_sem = threading.Semaphore(3)

    def observe(lock):
        out = [isinstance(lock, _thread.LockType), type(lock).__module__, type(lock).__name__]
        for attempt in (lambda: type(lock)(), lambda: pickle.dumps(lock), lambda: copy.copy(lock)):
            try:
                attempt()
                out.append("ok")
            except TypeError as err:
                out.append(str(err))
        return out

    expected = [observe(raw_lock), observe(raw_rlock)]
    names = {name: (getattr(threading, name).__module__, getattr(threading, name).__name__)
             for name in ("Lock", "RLock", "Condition", "Semaphore", "BoundedSemaphore")}
    with pylocks.instrument():
        lock, rlock = threading.Lock(), threading.RLock()
        assert type(lock) is not type(raw_lock)
        assert [observe(lock), observe(rlock)] == expected
        sem = threading.Semaphore(3)
        assert repr(sem).split(" at ")[0] == repr(raw_sem).split(" at ")[0]
        for name in names:
            # threading.__all__ checks (CPython's MiscTestCase) go by each name's __module__
            assert getattr(threading, name).__module__ in ("threading", "_thread")
        assert repr(lock).split(" object")[0] == repr(raw_lock).split(" object")[0]
        with pytest.raises(RuntimeError, match="release unlocked lock"):
            lock.release()
        with pytest.raises(ValueError, match="can't specify a timeout for a non-blocking call"):
            lock.acquire(False, 1)
        assert lock.acquire(blocking=True, timeout=1) and lock.locked()
        lock.release()
