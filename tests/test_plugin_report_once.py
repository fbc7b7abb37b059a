"""Each finding printed once (issue 24 item 2): a `DeadlockError` that ends a thread is the
test's lockcheck failure, not again pytest's `PytestUnhandledThreadExceptionWarning`; any other
exception in a thread still reaches pytest's warning."""

from __future__ import annotations

import pytest

#: these tests read the kernel layout (the plugin's default is the short one)
pytestmark = pytest.mark.usefixtures("kernel_report_style")

pytest_plugins = ["pytester"]

SUITE = """
    import threading, time

    def test_thread_deadlock():
        a = threading.RLock()
        b = threading.RLock()
        b_held = threading.Event()
        def worker():
            with b:
                b_held.set()
                time.sleep(0.5)
                with a:  # closes the cycle: DeadlockError in this thread
                    pass
        t = threading.Thread(target=worker, name="worker")
        with a:
            t.start()
            b_held.wait()
            with b:
                pass
        t.join()

    def test_other_thread_error_still_warns():
        t = threading.Thread(target=lambda: 1 / 0, name="divider")
        t.start()
        t.join()
"""


@pytest.mark.parametrize("ci", ["", "true"], ids=["terminal", "CI"])
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["serial", "xdist"])
def test_a_deadlock_in_a_thread_is_reported_once(pytester: pytest.Pytester, monkeypatch: pytest.MonkeyPatch,
                                                 ci: str, workers: list[str]) -> None:
    # on CI (`CI` set) and under -vv, pytest's short summary prints a failure's message
    # untruncated: the message is the headline, never the whole report again
    monkeypatch.delenv("BUILD_NUMBER", raising=False)
    monkeypatch.setenv("CI", ci) if ci else monkeypatch.delenv("CI", raising=False)
    pytester.makepyfile(test_once=SUITE)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--lockcheck",
                                           *workers, timeout=120)
    result.assert_outcomes(failed=1, passed=1, warnings=1)
    out = result.stdout.str()
    assert out.count("WARNING: deadlock detected") == 1
    [summary] = [line for line in out.splitlines() if line.startswith("FAILED test_once.py::test_thread_deadlock")]
    assert summary.startswith("FAILED test_once.py::test_thread_deadlock - lockcheck: deadlock detected")
    assert "DeadlockError ended thread worker" in out
    assert "Exception in thread divider" in out  # pytest's warning, for an exception of the program's
