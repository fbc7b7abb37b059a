"""A wait for a lock whose holder thread has ended can never end (issue 30): the acquire raises
`DeadlockError` naming that thread, as for a cycle of waits, instead of hanging the session.

Each suite runs in a subprocess with a timeout, so a regression fails here rather than hangs.
"""

from __future__ import annotations

import pytest

#: these tests read the kernel layout (the plugin's default is the short one)
pytestmark = pytest.mark.usefixtures("kernel_report_style")

pytest_plugins = ["pytester"]

TIMEOUT = 60

ENDED = """
    import threading

    from lockcheck import DeadlockError

    def test_rlock():
        lock = threading.RLock()
        t = threading.Thread(target=lock.acquire, name="leaver")
        t.start()
        t.join()
        lock.acquire()

    def test_lock():
        lock = threading.Lock()
        t = threading.Thread(target=lock.acquire, name="quitter")
        t.start()
        t.join()
        with lock:
            pass

    def test_holder_ends_while_we_wait():
        lock = threading.RLock()
        taken = threading.Event()
        def hold():
            lock.acquire()
            taken.set()
            threading.Event().wait(0.5)  # ends while the main thread already waits
        t = threading.Thread(target=hold, name="late")
        t.start()
        taken.wait()
        lock.acquire()

    def test_lock_released_by_another_thread_is_no_deadlock():
        lock = threading.Lock()
        t = threading.Thread(target=lock.acquire, name="signaller")
        t.start()
        t.join()
        threading.Timer(0.3, lock.release).start()
        with lock:  # released by the timer thread within the grace: fine
            pass
"""


def test_a_wait_for_a_lock_held_by_an_ended_thread_raises(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ended=ENDED)
    pytester.makeini("[pytest]\nlockcheck_grace = 1.0\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--lockcheck",
                                           "-p", "no:logging", timeout=TIMEOUT)
    result.assert_outcomes(failed=3, passed=1)
    result.stdout.fnmatch_lines(["*DeadlockError*"])
    out = result.stdout.str()
    for name in ("leaver", "quitter", "late"):
        assert f"held by {name}/" in out, name
    assert "which has ended holding it" in out
    assert "FAILED test_ended.py::test_lock_released" not in out
    # the RLock's held-at-exit finding is filed once, not again as a deadlock
    assert "still has locks held!, deadlock detected" not in out
