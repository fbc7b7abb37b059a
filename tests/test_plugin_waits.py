"""Waits on events under locks (`--lockcheck-waits`, `lockcheck.python.dept`) and signal handlers and
finalizers as interrupt contexts (`lockcheck.python.interrupts`): issue 12's third and fourth items.

Each suite is a small pytester run in a subprocess.  Every test in it takes the deadlock-prone
order in an interleaving that does not hang (the thread that needs the lock runs first), so a
regression is a wrong outcome, never a hung run.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import inspect
import queue
import re
import signal
import threading
import weakref

import pytest

import lockcheck
from lockcheck.python import instrument as pylocks, interrupts as pyirq, dept as waits

pytest_plugins = ["pytester"]

TIMEOUT = 120

WAITS = """
    import asyncio
    import concurrent.futures
    import queue
    import threading
    import time


    def test_join_under_lock():
        lock = threading.Lock()

        def worker():
            with lock:
                pass

        t = threading.Thread(target=worker)
        t.start()
        t.join()
        with lock:
            t.join()  # had the thread not run yet: it waits for the lock this thread holds


    def test_future_under_lock():
        lock = threading.Lock()

        def job():
            with lock:
                return 42

        with concurrent.futures.ThreadPoolExecutor(1) as pool:
            fut = pool.submit(job)
            assert fut.result() == 42
            with lock:
                assert fut.result() == 42


    def test_queue_under_lock():
        lock = threading.Lock()
        q = queue.Queue()

        def producer():
            with lock:
                q.put(1)

        t = threading.Thread(target=producer)
        t.start()
        t.join()
        with lock:
            assert q.get() == 1


    def test_event_under_lock():
        lock = threading.Lock()
        done = threading.Event()

        def setter():
            with lock:
                done.set()

        t = threading.Thread(target=setter)
        t.start()
        t.join()
        with lock:
            done.wait()


    def test_condition_on_another_lock():
        outer = threading.Lock()
        cond = threading.Condition()
        woke = []

        def notifier():
            with outer:
                with cond:
                    cond.notify_all()

        def waker():  # wakes the wait below without the outer lock, so this run does not hang
            while not woke:
                with cond:
                    cond.notify_all()
                time.sleep(0.001)

        t = threading.Thread(target=notifier)
        t.start()
        t.join()
        w = threading.Thread(target=waker)
        w.start()
        with outer:
            with cond:
                cond.wait()
                woke.append(1)
        w.join()


    def test_asyncio_event_under_lock():
        async def main():
            lock = asyncio.Lock()
            ev = asyncio.Event()

            async def setter():
                async with lock:
                    ev.set()

            await asyncio.create_task(setter())
            async with lock:
                await ev.wait()

        asyncio.run(main())


    def test_asyncio_queue_under_lock():
        async def main():
            lock = asyncio.Lock()
            inbox = asyncio.Queue()

            async def producer():
                async with lock:
                    await inbox.put("msg")

            await asyncio.create_task(producer())
            async with lock:
                assert await inbox.get() == "msg"

        asyncio.run(main())


    def test_queue_join_under_lock():
        lock = threading.Lock()
        work = queue.Queue()
        work.put(1)

        def consumer():
            work.get()
            with lock:
                work.task_done()

        t = threading.Thread(target=consumer)
        t.start()
        t.join()
        with lock:
            work.join()


    def test_wait_without_a_lock_is_fine():
        lock = threading.Lock()
        q = queue.Queue()

        def producer():
            with lock:
                pass
            q.put(1)  # the lock is let go before the put: completing the wait needs no lock

        t = threading.Thread(target=producer)
        t.start()
        with lock:
            pass
        assert q.get() == 1
        t.join()
"""

#: each test's event class: (kind, its name's end) -- Python 3.10 has no co_qualname, so a
#: nested function's locals are named after the function alone there (as lock classes are)
WAIT_TESTS = {"join": ("Thread", "test_join_under_lock.t"),
              "future": ("Future", "test_future_under_lock.fut"),
              "queue": ("Queue", "test_queue_under_lock.q"),
              "event": ("Event", "test_event_under_lock.done"),
              "condition": ("Condition", "test_condition_on_another_lock.cond"),
              "asyncio_event": ("asyncio.Event", "main.ev"),
              "asyncio_queue": ("asyncio.Queue", "main.inbox"),
              "queue_join": ("Queue.join", "test_queue_join_under_lock.work")}


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--lockcheck", *args, timeout=TIMEOUT)


@pytest.mark.slow
@pytest.mark.usefixtures("kernel_report_style")  # reads the kernel layout
def test_join_future_queue_event_condition_asyncio_cycles_found_with_waits_only(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_waits=WAITS)
    without = run(pytester)
    without.assert_outcomes(passed=9)
    assert "circular" not in without.stdout.str()

    result = run(pytester, "--lockcheck-waits")
    out = result.stdout.str()
    result.assert_outcomes(passed=1, failed=8)
    assert result.ret == 1
    for test, (kind, name) in WAIT_TESTS.items():
        headline = next(line for line in out.splitlines() if line.strip().startswith("circular-dependency: ")
                        and (f"::test_{test}_under" in line or f"::test_{test}_on" in line))
        assert re.search(rf"circular-dependency: {re.escape(kind)}\((\w+\.)*{re.escape(name)}\) -> ", headline), \
            (test, headline)
    # the kernel's layout, extended by the wait
    assert "waits for completion of Thread(test_join_under_lock.t) at test_waits.py:19, holding " \
           "test_join_under_lock.lock" in out
    assert "completing Queue(test_queue_under_lock.q) needs test_queue_under_lock.lock: Thread-" in out
    assert "holds it when it signals the event (taken at test_waits.py:" in out
    assert "wait_for_completion(Future(test_future_under_lock.fut));" in out
    assert "completing(Future(test_future_under_lock.fut));" in out
    assert "(Thread(test_join_under_lock.t): the end of the thread made at test_waits.py:15)" in out
    assert "Do not wait for Queue(test_queue_under_lock.q) while holding a lock" in out


def test_waits_ini_option(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_waits=WAITS)
    pytester.makeini("[pytest]\nlockcheck_waits = true\n")
    result = run(pytester, "-k", "test_queue_under_lock or without")
    result.assert_outcomes(passed=1, failed=1)
    assert "circular-dependency: Queue(test_queue_under_lock.q) -> test_queue_under_lock.lock in " \
           "test_waits.py::test_queue_under_lock" in result.stdout.str()


SIGNALS = """
    import gc
    import os
    import signal
    import threading

    import pytest

    from lockcheck.python.tracked import SelfDeadlockError


    def test_handler_takes_the_lock_the_interrupted_code_holds():
        lock = threading.Lock()

        def handler(signum, frame):
            with lock:
                pass

        old = signal.signal(signal.SIGUSR1, handler)
        try:
            with lock:
                # without lockcheck this never returns: the handler waits for its own thread
                with pytest.raises(SelfDeadlockError):
                    os.kill(os.getpid(), signal.SIGUSR1)
                    for _ in range(1000):
                        pass
        finally:
            signal.signal(signal.SIGUSR1, old)


    def test_handler_lock_also_taken_by_the_main_thread():
        log_lock = threading.Lock()

        def handler(signum, frame):
            with log_lock:
                pass

        old = signal.signal(signal.SIGUSR2, handler)
        try:
            os.kill(os.getpid(), signal.SIGUSR2)
            with log_lock:  # the signal did not come now; it could have
                pass
        finally:
            signal.signal(signal.SIGUSR2, old)


    def test_handler_lock_taken_by_other_threads_only_is_fine():
        counter_lock = threading.Lock()

        def handler(signum, frame):
            with counter_lock:
                pass

        old = signal.signal(signal.SIGUSR2, handler)
        try:
            os.kill(os.getpid(), signal.SIGUSR2)

            def other():
                with counter_lock:  # a handler only runs in the main thread: it would wait, not hang
                    pass

            t = threading.Thread(target=other)
            t.start()
            t.join()
        finally:
            signal.signal(signal.SIGUSR2, old)


    def test_finalizer_takes_a_lock():
        registry_lock = threading.Lock()

        class Resource:
            def __del__(self):
                with registry_lock:
                    pass

        with registry_lock:
            pass
        res = Resource()
        del res


    def test_getsignal_gives_back_the_handler():
        def handler(signum, frame):
            pass

        old = signal.signal(signal.SIGUSR1, handler)
        try:
            assert signal.getsignal(signal.SIGUSR1) is handler
            assert signal.signal(signal.SIGUSR1, old) is handler
        finally:
            signal.signal(signal.SIGUSR1, old)
"""


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="needs SIGUSR1")
@pytest.mark.usefixtures("kernel_report_style")  # reads the kernel layout
def test_signal_handlers_and_finalizers_are_interrupt_contexts(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_signals=SIGNALS)
    pytester.makeini("[pytest]\nlockcheck_grace = 0.2\n")
    result = run(pytester)
    out = result.stdout.str()
    result.assert_outcomes(passed=2, failed=3)
    lines = [line.strip() for line in out.splitlines() if line.strip().startswith("inconsistent-lock-state: ")]
    by_test = {line.split("::", 1)[1].split(" ", 1)[0]: line for line in lines}
    assert set(by_test) == {"test_handler_takes_the_lock_the_interrupted_code_holds",
                            "test_handler_lock_also_taken_by_the_main_thread", "test_finalizer_takes_a_lock"}
    assert "inconsistent {SOFTIRQ-ON-W} -> {IN-SOFTIRQ-W} usage." in out
    assert "inconsistent {IN-SOFTIRQ-W} -> {SOFTIRQ-ON-W} usage." in out
    assert "inconsistent {HARDIRQ-ON-W} -> {IN-HARDIRQ-W} usage." in out
    assert "In a Python program SOFTIRQ is a signal handler" in out
    assert "In a Python program HARDIRQ is a finalizer" in out

    off = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--lockcheck", "-o", "lockcheck_interrupts=false",
                                        "-k", "main_thread or finalizer", timeout=TIMEOUT)
    off.assert_outcomes(passed=2)


# -- in-process: the patches are transparent and undone -------------------------------------------


def _patched_attrs() -> list[tuple[object, str]]:
    return [(threading.Thread, "join"), (threading.Thread, "__init__"), (concurrent.futures.Future, "result"),
            (concurrent.futures, "wait"), (queue.Queue, "get"), (queue.Queue, "put"), (threading.Event, "wait"),
            (asyncio.Event, "wait"), (asyncio.Queue, "get")]


def test_waits_patches_keep_signatures_and_are_undone() -> None:
    before = {(owner, attr): inspect.getattr_static(owner, attr) for owner, attr in _patched_attrs()}
    signatures = {key: inspect.signature(value) for key, value in before.items()}
    rec = pylocks.Recorder()
    with pylocks.instrument(rec):
        waits.start(rec)
        try:
            for (owner, attr), original in before.items():
                now = inspect.getattr_static(owner, attr)
                assert now is not original
                assert inspect.signature(now) == signatures[owner, attr]
                assert now.__name__ == original.__name__
            assert inspect.iscoroutinefunction(asyncio.Event.wait)
            q: queue.Queue = queue.Queue()
            with pytest.raises(queue.Empty):
                q.get(timeout=0.01)
            with pytest.raises(queue.Empty):
                q.get(block=False)
            with concurrent.futures.ThreadPoolExecutor(1) as pool:
                fut = pool.submit(lambda: 1 / 0)
                with pytest.raises(ZeroDivisionError):
                    fut.result()
                assert isinstance(fut.exception(), ZeroDivisionError)
            t = threading.Thread(target=lambda: None)
            with pytest.raises(RuntimeError, match="before it is started"):
                t.join()
            with pytest.raises(TypeError, match=r"get\(\) got an unexpected keyword argument 'wait'"):
                q.get(wait=True)  # the original's own error
        finally:
            waits.stop()
    for (owner, attr), original in before.items():
        assert inspect.getattr_static(owner, attr) is original
    assert rec.findings == []


def test_pyirq_restores_handlers_and_finalizers() -> None:
    def handler(signum: int, frame: object) -> None:
        pass

    old = signal.getsignal(signal.SIGUSR1)
    rec = pylocks.Recorder()
    with pylocks.instrument(rec):
        pyirq.start(rec)
        try:
            signal.signal(signal.SIGUSR1, handler)
            installed = signal.signal.__wrapped__(signal.SIGUSR1, signal.getsignal(signal.SIGUSR1))  # type: ignore

            class Finalized:
                def __del__(self) -> None:
                    pass

            own_del = Finalized.__dict__["__del__"]
        finally:
            pyirq.stop(rec)
    try:
        assert installed is not handler  # what the OS calls runs the handler as an interrupt
        assert signal.getsignal(signal.SIGUSR1) is handler  # and is the program's own handler again
        assert Finalized.__dict__["__del__"] is own_del.__wrapped__
        assert weakref.finalize.__call__.__name__ == "__call__"
        assert not hasattr(weakref.finalize.__call__, "__wrapped__")
    finally:
        signal.signal(signal.SIGUSR1, old)


def test_a_collection_that_takes_no_lock_records_no_event() -> None:
    import gc

    rec = pylocks.Recorder()
    with pylocks.instrument(rec):
        pyirq.start(rec)
        try:
            lock = threading.Lock()
            with lock:
                pass
            before = rec.checker.stats.events
            gc.collect()
            gc.collect()
            with lock:
                pass
        finally:
            pyirq.stop(rec)
    assert rec.checker.stats.events == before + 2


# -- the README's examples are real output ------------------------------------------------------

README_SECTION = "## Waits on events, signal handlers and finalizers"


def _readme_examples() -> tuple[dict[str, str], list[str]]:
    """The section's test files (`py` blocks, named by their first line) and shown outputs (`text`)."""
    import re
    from pathlib import Path

    text = (Path(__file__).resolve().parent.parent / "docs" / "pytest-plugin.md").read_text()
    section = text.split(README_SECTION, 1)[1].split("\n## ", 1)[0].split("\n### ", 1)[0]
    files = {}
    for block in re.findall(r"^```py\n(.*?)^```", section, re.M | re.S):
        first, _, source = block.partition("\n")
        files[first.removeprefix("# ").strip()] = source
    return files, re.findall(r"^```text\n(.*?)^```", section, re.M | re.S)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(signal, "SIGUSR1"), reason="needs SIGUSR1")
def test_readme_waits_and_interrupts_examples_print_what_the_readme_shows(pytester: pytest.Pytester) -> None:
    files, shown = _readme_examples()
    assert sorted(files) == ["test_future.py", "test_join.py", "test_queue.py", "test_signal.py"]
    assert len(shown) == 4
    for name, source in files.items():
        pytester.path.joinpath(name).write_text(source)
    without = run(pytester, *files)
    without.assert_outcomes(passed=3, failed=1)  # only the signal handler's finding needs no option
    result = run(pytester, "--lockcheck-waits", *files)
    result.assert_outcomes(failed=4)
    import re

    def same_instances(text: str) -> str:  # lock instances are numbered in creation order
        return re.sub(r"\b0x[0-9a-f]+\b", "0x?", text)

    out = same_instances(result.stdout.str())
    for block in shown:
        assert same_instances(block) in out, block


def test_waits_inside_the_library_are_not_the_programs() -> None:
    """An Event's and a Queue's own Conditions are theirs: a real blocking wait under a lock
    adds one dependency, on the Event or Queue, and none on their inner Condition."""
    rec = pylocks.Recorder()
    with pylocks.instrument(rec):
        waits.start(rec)
        try:
            held = threading.Lock()
            ready = threading.Event()
            jobs: queue.Queue = queue.Queue()

            def later() -> None:
                ready.set()
                jobs.put(1)

            timer = threading.Timer(0.05, later)  # a Thread made by threading itself: no class
            timer.start()
            with held:
                ready.wait()
                assert jobs.get() == 1
            timer.join()
        finally:
            waits.stop()
    succ = rec.checker.graph.nx.succ
    lock_class = lockcheck.class_of(held)
    assert sorted(succ[lock_class]) == [f"Event({lock_class[:-5]}.ready)", f"Queue({lock_class[:-5]}.jobs)"], \
        (lock_class, sorted(succ))
    assert not [cls for cls in succ if cls.startswith(("Condition(", "Thread("))]
    assert rec.findings == []


def test_asyncio_signals_outside_a_running_loop_behave_as_without_lockcheck() -> None:
    rec = pylocks.Recorder()
    with pylocks.instrument(rec):
        waits.start(rec)
        try:
            lock = threading.Lock()
            inbox: asyncio.Queue = asyncio.Queue()
            done = asyncio.Event()
            with lock:  # synchronous code, no loop running: the thread is the context
                inbox.put_nowait(1)
                done.set()

            async def main() -> int:
                await done.wait()
                return await inbox.get()

            assert asyncio.run(main()) == 1
        finally:
            waits.stop()
    assert rec.findings == []
    # the signals under the lock were recorded for the thread: event -> lock
    succ = rec.checker.graph.nx.succ
    lock_class = lockcheck.class_of(lock)
    stem = lock_class[:-len(".lock")]
    assert set(succ[f"asyncio.Event({stem}.done)"]) == {lock_class}, (lock_class, sorted(succ))
    assert set(succ[f"asyncio.Queue({stem}.inbox)"]) == {lock_class}


class _DefinedBeforeTracking:
    """A class whose `__del__` is not wrapped (defined at import): only a collection shows it."""

    lock: object = None

    def __init__(self) -> None:
        self.cycle = self

    def __del__(self) -> None:
        with type(self).lock:  # type: ignore[attr-defined]
            pass


@pytest.mark.parametrize("how", ["weakref.finalize", "gc"])
def test_finalizers_run_as_hardirqs(how: str) -> None:
    import gc

    rec = pylocks.Recorder()
    with pylocks.instrument(rec):
        pyirq.start(rec)
        try:
            registry_lock = threading.Lock()
            with registry_lock:
                pass

            def unregister() -> None:
                with registry_lock:
                    pass

            if how == "weakref.finalize":
                class Handle:
                    pass

                handle = Handle()
                weakref.finalize(handle, unregister)
                del handle
            else:
                _DefinedBeforeTracking.lock = registry_lock
                gc.disable()
                try:
                    _DefinedBeforeTracking()
                    gc.collect()
                finally:
                    gc.enable()
            rec.drain()
        finally:
            pyirq.stop(rec)
    found = [(f.kind, f.lock, f.details.get("new_bit")) for f, _ in rec.findings]
    assert found == [("inconsistent-lock-state", "test_finalizers_run_as_hardirqs.registry_lock", "IN-HARDIRQ-W")]


def test_event_classes_of_other_processes_are_known_by_name() -> None:
    """An xdist controller renders cycles of its workers' graphs: their event classes are not
    in its own table, their names say what they are."""
    assert waits.is_event("Queue.join(worker_mod.jobs)") and waits.is_event("asyncio.Event(main.ev)")
    assert waits.describe("Thread(test_x.t)") == "the end of the thread made at its creation site"
    assert waits.describe("Queue.join(m.q)") == "task_done() of every item of the queue made at its creation site"
    assert not waits.is_event("Cache._lock") and waits.describe("test_x.py:12") is None


def test_the_resource_trackers_finalizer_lock_is_accepted_by_default() -> None:
    """The stdlib's own irq-unsafe use: a SemLock finalizer (the garbage collector: a hardirq here)
    unregisters under `ResourceTracker._lock`, which plain code takes too -- a default suppression
    (CPython 3.13's test_logging failed on it); the same pattern on a lock of the program is
    reported (`test_finalizers_run_as_hardirqs`)."""
    from multiprocessing import resource_tracker

    rec = pylocks.Recorder()
    with pylocks.instrument(rec):
        pyirq.start(rec)
        try:
            tracker = resource_tracker.ResourceTracker()
            with tracker._lock:  # ensure_running's plain use
                pass

            def unregister() -> None:
                with tracker._lock:
                    pass

            class Handle:
                pass

            handle = Handle()
            weakref.finalize(handle, unregister)
            del handle
            rec.drain()
        finally:
            pyirq.stop(rec)
    assert rec.findings == []
    suppressed = [(f.kind, f.lock) for f, _ in rec.suppressed_findings]
    assert suppressed == [("inconsistent-lock-state", "ResourceTracker._lock")]  # matched by its qualified name
