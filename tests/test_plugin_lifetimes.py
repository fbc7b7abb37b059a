"""The plugin left on: held-lock lifetimes as Python has them, early tracking, and the bugs
real suites found (issue 9's "Done when"), each a small pytester suite run in a subprocess.

Every suite here is correct code: a finding in it is a false alarm, except where a test
says what the one real finding is.
"""

from __future__ import annotations

import os
import sys

import pytest

#: these tests read the kernel layout (the plugin's default is the short one)
pytestmark = pytest.mark.usefixtures("kernel_report_style")

pytest_plugins = ["pytester"]

TIMEOUT = 120


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--lockcheck", *args, timeout=TIMEOUT)


LIFETIMES = """
    import _thread
    import threading
    import time

    A = threading.Lock()
    B = threading.Lock()
    R = threading.RLock()


    def wait_for(flag):
        deadline = time.monotonic() + 30
        while not flag and time.monotonic() < deadline:
            time.sleep(0.001)


    def test_dropped_while_held():
        lock = threading.Lock()
        lock.acquire()
        del lock
        cond = threading.Condition()
        cond.acquire()
        del cond  # CPython's ConditionAsRLockTests.test_acquire_destroy


    def test_released_by_a_threading_thread():
        A.acquire()
        t = threading.Thread(target=A.release)
        t.start()
        t.join()


    def test_released_by_a_thread_module_thread():
        done = []
        A.acquire()

        def release():
            threading.current_thread()  # a _DummyThread, as CPython's test_foreign_thread makes
            A.release()
            done.append(1)

        _thread.start_new_thread(release, ())
        wait_for(done)


    def test_thread_ends_holding_a_lock_another_releases():
        t = threading.Thread(target=B.acquire)
        t.start()
        t.join()
        B.release()  # a Lock has no owner: handing it over is legal


    def test_thread_ends_holding_an_rlock_nobody_takes_again():
        rlock = threading.RLock()
        t = threading.Thread(target=rlock.acquire)
        t.start()
        t.join()


    def test_reinitialised_while_held():
        lock = threading.Lock()
        lock.acquire()
        lock._at_fork_reinit()
        with lock:
            pass


    def test_every_lock_again_in_both_nestings_of_one_order():
        # any stale entry left on a held stack by the tests above makes this "recursive locking"
        for _ in range(2):
            with R:
                with A:
                    with B:
                        pass
            with A:
                pass
            with B:
                pass
"""


def test_held_lock_lifetimes_leave_nothing_behind(pytester: pytest.Pytester) -> None:
    """Dropped while held, released by another thread (threading or _thread), a thread that ends
    holding a Lock or an RLock, re-initialised while held: none is a finding, none leaves an
    entry on a held stack that a later test trips over."""
    pytester.makepyfile(test_lifetimes=LIFETIMES)
    result = run(pytester, "-p", "no:logging")
    result.assert_outcomes(passed=7)
    result.stdout.fnmatch_lines(["lockcheck: 0 findings in *",
                                 "*note: 1 thread ended holding an RLock (reported if another thread then waits for it)",
                                 "*locks garbage-collected while held*"])
    assert result.ret == 0


def test_rlock_left_by_an_ended_thread_is_reported_when_taken(pytester: pytest.Pytester) -> None:
    """An RLock only its holder may release, held by a thread that ended: the next acquire
    would wait for ever; that acquire is the finding (lockdep's held-at-exit report)."""
    pytester.makepyfile(test_orphan="""
        import threading

        def test_orphan():
            rlock = threading.RLock()
            t = threading.Thread(target=rlock.acquire, name="leaver")
            t.start()
            t.join()
            assert not rlock.acquire(timeout=0.2)  # validated as blocking (the ini below)
    """)
    pytester.makeini("[pytest]\nlockcheck_timed_acquire = blocking\n")
    result = run(pytester, "-p", "no:logging")
    result.assert_outcomes(failed=1)
    result.stdout.fnmatch_lines(["*WARNING: leaver/* still has locks held!*",
                                 "*held-at-exit: test_orphan.rlock in test_orphan.py::test_orphan*"])
    result.stdout.no_fnmatch_line("*recursive locking*")


def test_lock_left_held_by_a_test_does_not_follow_the_session(pytester: pytest.Pytester) -> None:
    """A test that leaves a lock held (readerwriterlock's failing tests do): dropped at the
    test's end and listed, so later tests' locks do not depend on it."""
    pytester.makepyfile(test_leak="""
        import threading

        LEAKED = threading.Lock()
        OTHER = threading.Lock()

        def test_leaks():
            LEAKED.acquire()  # never released here

        def test_later_in_one_order():
            with OTHER:
                pass

        def test_later_in_the_other():
            LEAKED.release()  # released at last, by a later test: no event, no imbalance
            with OTHER:
                with LEAKED:
                    pass
    """)
    result = run(pytester, "-p", "no:logging")
    result.assert_outcomes(passed=3)
    result.stdout.fnmatch_lines(["lockcheck: 0 findings in *",
                                 "*1 lock left held at the end of the test that took it*test_leak.LEAKED "
                                 "(test_leak.py::test_leaks)*"])


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_fork_with_a_lock_held_by_another_thread(pytester: pytest.Pytester) -> None:
    """The child keeps only the forking thread's stack: a lock another thread held at the fork
    is a finding of its own when the child takes it (never recursive locking), reported in the
    test that forked; a child that does not touch it, or a lock re-initialised by a fork
    handler (logging's), is nothing."""
    pytester.makepyfile(test_fork="""
        import logging
        import os
        import threading

        HELD = threading.Lock()
        MINE = threading.Lock()


        def fork_while_held(lock, child):
            ready, done = threading.Event(), threading.Event()

            def holder():
                with lock:
                    ready.set()
                    done.wait(30)

            t = threading.Thread(target=holder, name="holder")
            t.start()
            ready.wait(30)
            with MINE:
                pid = os.fork()
                if pid == 0:
                    try:
                        child()
                    finally:
                        os._exit(0)
            os.waitpid(pid, 0)
            done.set()
            t.join()


        def take_it_in_a_thread():
            t = threading.Thread(target=HELD.acquire, daemon=True)
            t.start()
            t.join(2)  # it would wait for ever (the time is for a loaded machine to start the thread)


        def test_child_takes_the_held_lock():
            fork_while_held(HELD, take_it_in_a_thread)


        def test_child_leaves_it_alone():
            def child():
                MINE.release()  # the forking thread's own hold goes on in the child: its own to release
                with MINE:
                    pass
                MINE.acquire()  # as the parent's `with` expects
            fork_while_held(HELD, child)


        def test_logging_reinitialises_its_locks():
            handler = logging.StreamHandler()
            logger = logging.getLogger("forked")
            logger.addHandler(handler)
            logger.propagate = False

            def child():
                logger.warning("from the child")  # takes the handler lock logging re-initialised

            fork_while_held(handler.lock, child)
            logger.removeHandler(handler)
    """)
    result = run(pytester, "-p", "no:logging")
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["*FAILED test_fork.py::test_child_takes_the_held_lock*"])
    result.stdout.fnmatch_lines(["*WARNING: lock held by another thread at fork*",
                                 "*but holder/* held it when the process forked*"])
    result.stdout.no_fnmatch_line("*recursive locking*")


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_multiprocessing_child_started_while_holding_a_lock(pytester: pytest.Pytester) -> None:
    """A pool that starts its worker processes (start method fork) while it holds its own lock
    (pebble's ProcessPool does): the child runs the worker and exits, its parent's `with` never
    resumes there, so that hold is not the child's -- a pool the worker makes is no nesting of
    one class -- but the lock stays locked in the child, so taking it is held-at-fork."""
    pytester.makepyfile(test_pool="""
        import multiprocessing
        import threading


        class Pool:
            def __init__(self):
                self.mutex = threading.Lock()

            def run(self, target, *args):
                with self.mutex:  # a worker started under the pool's lock
                    proc = multiprocessing.get_context("fork").Process(target=target, args=args)
                    proc.start()
                proc.join(3)
                if proc.exitcode is None:  # hung, as it would for ever
                    proc.kill()
                    proc.join()
                return proc.exitcode


        def worker_with_a_pool_of_its_own():
            with Pool().mutex:
                pass


        def worker_taking_the_parents_lock(pool):
            with pool.mutex:
                pass


        def test_worker_makes_a_pool():
            assert Pool().run(worker_with_a_pool_of_its_own) == 0


        def test_worker_takes_the_lock_held_at_the_fork():
            pool = Pool()
            assert pool.run(worker_taking_the_parents_lock, pool) != 0
    """)
    result = run(pytester, "-p", "no:logging")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*FAILED test_pool.py::test_worker_takes_the_lock_held_at_the_fork*"])
    result.stdout.fnmatch_lines(["*WARNING: lock held by another thread at fork*",
                                 "*but MainThread/* held it when it started this process*",
                                 "*MainThread/* held Pool.mutex (taken at test_pool.py:10*) when it started this process*"])
    result.stdout.no_fnmatch_line("*recursive locking*")


APP = """
    from threading import Lock

    FIRST = Lock()
    SECOND = Lock()


    def forward():
        with FIRST:
            with SECOND:
                pass


    def backward():
        with SECOND:
            with FIRST:
                pass
"""


def test_locks_made_when_conftest_imports_the_app_are_tracked(pytester: pytest.Pytester) -> None:
    """conftest.py imports the application, which does `from threading import Lock` and makes
    its locks at import: tracking has begun by then, so the AB-BA in it is found."""
    pytester.makepyfile(app=APP)
    pytester.makeconftest("import app\n")
    pytester.makepyfile(test_app="""
        import app

        def test_forward():
            app.forward()

        def test_backward():
            app.backward()
    """)
    result = run(pytester, "-p", "no:logging")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines(["*circular-dependency: app.FIRST -> app.SECOND in test_app.py::test_backward*"])


def test_locks_made_before_tracking_began_are_listed_and_wrapped(pytester: pytest.Pytester) -> None:
    """A plugin loaded before lockcheck (`-p`) made locks at its import: the ones in module
    globals and class attributes are wrapped (and so checked), the rest named as not tracked."""
    pytester.makepyfile(early_app="""
        import threading

        GLOBAL = threading.Lock()
        COND = threading.Condition()


        class Registry:
            lock = threading.RLock()


        def forward():
            with GLOBAL:
                with Registry.lock:
                    pass


        def backward():
            with Registry.lock:
                with GLOBAL:
                    pass
    """)
    pytester.makepyfile(test_early="""
        import early_app

        def test_forward():
            early_app.forward()

        def test_backward():
            early_app.backward()
    """)
    result = run(pytester, "-p", "early_app", "-p", "no:logging")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*circular-dependency: *early_app.*early_app.* in test_early.py::test_backward*",
        "lockcheck: * existed before tracking began*",
        "*tracked from then on (wrapped): *early_app.GLOBAL (early_app.py)*early_app.Registry.lock (early_app.py)*",
        "*NOT tracked (a Condition or Semaphore made before tracking began): early_app.COND (early_app.py)*",
    ])


def test_a_run_that_observed_nothing_says_so(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_nothing="def test_no_locks():\n    assert 1 + 1 == 2\n")
    result = run(pytester, "-p", "no:logging")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["lockcheck: 0 findings in 0 events*",
                                 "lockcheck: WARNING: no lock operation was observed: nothing was checked.*"])


# -- the plugin bugs that real suites showed ---------------------------------------------


def test_contended_condition_wait_is_no_recursion(pytester: pytest.Pytester) -> None:
    """A waiter woken while another thread holds the Condition's RLock re-takes it only once
    that thread releases it: the release is that thread's own (fasteners' 8-thread test)."""
    pytester.makepyfile(test_cond="""
        import threading
        import time

        def test_contended_wait():
            cond = threading.Condition()
            waiting, woken = threading.Event(), []

            def waiter():
                with cond:
                    waiting.set()
                    cond.wait(30)
                    woken.append(1)

            t = threading.Thread(target=waiter)
            t.start()
            waiting.wait(30)
            with cond:  # the waiter is inside wait(): its lock is released
                cond.notify()
                time.sleep(0.2)  # the waiter wakes and blocks in _acquire_restore on us
            t.join(30)
            assert woken
            for _ in range(3):
                with cond:
                    with cond:
                        pass

        def test_many_waiters():
            cond = threading.Condition()
            items = []

            def consumer():
                for _ in range(50):
                    with cond:
                        while not items:
                            cond.wait(0.01)
                        items.pop()

            threads = [threading.Thread(target=consumer) for _ in range(8)]
            for t in threads:
                t.start()
            for _ in range(400):
                with cond:
                    items.append(1)
                    cond.notify()
            for t in threads:
                t.join(60)
    """)
    result = run(pytester, "-p", "no:logging")
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["lockcheck: 0 findings in *"])


def test_manager_under_spawn_pickles_the_patched_types(pytester: pytest.Pytester) -> None:
    """multiprocessing.Manager() under spawn/forkserver pickles threading's lock types by name."""
    pytester.makepyfile(test_manager="""
        import multiprocessing

        def test_spawn_manager():
            with multiprocessing.get_context("spawn").Manager() as manager:
                lock, sem = manager.Lock(), manager.BoundedSemaphore(2)
                with lock:
                    pass
                with sem:
                    pass
                cond = manager.Condition()
                with cond:
                    cond.notify_all()
    """)
    result = run(pytester, "-p", "no:logging")
    result.assert_outcomes(passed=1)


@pytest.mark.skipif(sys.version_info < (3, 11), reason="Python 3.10 records no columns: one class per line there")
def test_two_locks_made_on_one_line_are_two_classes(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_line="""
        import threading

        def test_pair():
            outer, inner = threading.Lock(), threading.Lock()
            for _ in range(2):
                with outer:
                    with inner:
                        pass
    """)
    result = run(pytester, "-p", "no:logging", "--lockcheck-graph=g.json")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["lockcheck: 0 findings in * 2 lock classes, 1 dependency*"])
    graph = (pytester.path / "g.json").read_text()
    assert "test_pair.outer" in graph and "test_pair.inner" in graph


def test_memory_handler_flushing_to_its_target_is_clean(pytester: pytest.Pytester) -> None:
    """logging's MemoryHandler holds its lock while its target handles the records: one lock
    class per handler type makes that an ordinary dependency, not recursive locking."""
    pytester.makepyfile(test_memory="""
        import io
        import logging
        import logging.handlers

        def test_buffer_then_flush():
            target = logging.StreamHandler(io.StringIO())
            memory = logging.handlers.MemoryHandler(3, flushLevel=logging.ERROR, target=target)
            logger = logging.getLogger("buffered")
            logger.propagate = False
            logger.addHandler(memory)
            for n in range(7):
                logger.warning("record %d", n)
            logger.error("flush now")
            memory.close()
            logger.removeHandler(memory)
            assert target.stream.getvalue().count("record") == 7
    """)
    result = run(pytester, "-p", "no:logging")
    result.assert_outcomes(passed=1)
    result.stdout.fnmatch_lines(["lockcheck: 0 findings in *"])


def test_only_the_stdlibs_own_logging_inversion_is_accepted(pytester: pytest.Pytester) -> None:
    """dictConfig holds logging's module lock while it takes each old handler's lock.  The
    stdlib's FileHandler.close takes them the other way round (accepted by default: no program
    can change it); a third-party handler whose emit() logs does the same in its own code
    (opentelemetry-sdk's LoggingHandler did), a real deadlock with a thread that reconfigures
    logging -- reported, even though its class name ends in Handler.lock."""
    pytester.makepyfile(test_handlers="""
        import logging
        import logging.config

        CONFIG = {"version": 1, "disable_existing_loggers": False}


        class AuditHandler(logging.Handler):
            def emit(self, record):
                logging.getLogger("audit.inner")  # logging's module lock, under this handler's lock


        def test_file_handler_closed_then_logging_reconfigured(tmp_path):
            handler = logging.FileHandler(tmp_path / "app.log")
            handler.close()  # its lock, then the module lock (Handler.close)
            logging.config.dictConfig(CONFIG)  # the module lock, then each old handler's
            del handler


        def test_handler_that_logs_then_logging_reconfigured():
            handler = AuditHandler()
            logger = logging.getLogger("app")
            logger.addHandler(handler)
            try:
                logger.warning("audited")
                logging.config.dictConfig(CONFIG)
            finally:
                logger.removeHandler(handler)
    """)
    result = run(pytester, "-p", "no:logging")
    result.assert_outcomes(passed=1, failed=1)
    result.stdout.fnmatch_lines([
        "*FAILED test_handlers.py::test_handler_that_logs_then_logging_reconfigured*"])
    result.stdout.fnmatch_lines(["lockcheck: 1 finding (1 circular-dependency), 1 suppressed in *",
                                 "  circular-dependency: *AuditHandler.lock*"])
