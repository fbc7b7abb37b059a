"""Threads the tests leave running (issue 30): an inversion a non-daemon thread makes after the
last test is reported before the summary, not lost after it; a thread that runs on past
`lockcheck_thread_wait` is named; an idle executor's workers are not waited for."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

LATE = """
    import threading, time
    locks = {}

    def test_order():
        locks["a"] = a = threading.Lock()
        locks["b"] = b = threading.Lock()
        with a:
            with b:
                pass

    def test_late_thread():
        def late():
            time.sleep(%s)
            with locks["b"]:
                with locks["a"]:
                    pass
        threading.Thread(target=late, name="late").start()
"""


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--lockcheck", *args,
                                         timeout=120)


def test_an_inversion_made_after_the_last_test_is_reported(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_late=LATE % "0.5")
    result = _run(pytester)
    out = result.stdout.str()
    assert result.ret == 1
    result.assert_outcomes(passed=2, errors=1)
    assert "waited for 1 thread still running after the last test (late)" in out
    assert "1 finding (1 circular-dependency)" in out
    assert "1 finding made outside any test" in out


def test_a_thread_running_past_the_wait_is_named(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_late=LATE % "3")
    pytester.makeini("[pytest]\nlockcheck_thread_wait = 0.2\n")
    result = _run(pytester)
    out = result.stdout.str()
    assert "1 thread still running after 0.2 s (lockcheck_thread_wait): late" in out
    assert "what they do from now on is not checked" in out
    result.assert_outcomes(passed=2)


def test_an_idle_executor_is_not_waited_for(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_pool="""
        import concurrent.futures

        def test_pool_left_open():
            pool = concurrent.futures.ThreadPoolExecutor(2)
            assert pool.submit(lambda: 42).result() == 42
    """)
    pytester.makeini("[pytest]\nlockcheck_thread_wait = 60\n")
    result = _run(pytester)
    out = result.stdout.str()
    assert result.ret == 0
    assert "still running" not in out and "waited for" not in out


@pytest.mark.parametrize("value", ["-1", "nan", "soon"])
def test_a_bad_wait_is_a_usage_error(pytester: pytest.Pytester, value: str) -> None:
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    pytester.makeini(f"[pytest]\nlockcheck_thread_wait = {value}\n")
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "lockcheck_thread_wait" in result.stderr.str()
