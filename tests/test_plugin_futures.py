"""The pytest plugin on what the standard library does with many locks at once, and its options
checked at start (issue 30)."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

TIMEOUT = 300

FUTURES = """
import concurrent.futures as cf

def test_wait_and_as_completed_on_many_futures():
    # _AcquireFutures takes every future's Condition at once, then lets them go oldest first
    with cf.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(pow, i, 2) for i in range({n})]
        done, not_done = cf.wait(futures)
        assert len(done) == {n} and not not_done
        assert sorted(f.result() for f in cf.as_completed(futures)) == [i * i for i in range({n})]
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", *args, timeout=TIMEOUT)


def test_wait_on_100_futures_passes_with_no_finding(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_futures=FUTURES.format(n=100))
    result = run(pytester, "--lockcheck")
    result.assert_outcomes(passed=1)
    out = result.stdout.str()
    assert "lockcheck: 0 findings" in out
    assert "MAX_LOCK_DEPTH" not in out and "held 10000 locks" not in out


def test_a_depth_past_the_limit_is_a_note_not_a_failure(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_futures=FUTURES.format(n=60))
    result = run(pytester, "--lockcheck", "--lockcheck-max-depth", "50")
    result.assert_outcomes(passed=1)
    assert "held 50 locks at once (--lockcheck-max-depth; a note, not a finding)" in result.stdout.str()


@pytest.mark.parametrize("args, says", [
    (["--lockcheck-graph", "g.png"], "cannot tell the graph format"),
    (["--lockcheck-graph", "."], "is a directory"),
    (["-o", "lockcheck_grace=-1"], "lockcheck_grace: expected a finite number"),
    (["-o", "lockcheck_grace=nan"], "lockcheck_grace: expected a finite number"),
    (["-o", "lockcheck_hang_report=nan"], "lockcheck_hang_report: expected a finite number"),
    (["--lockcheck-hang-report", "nan"], "--lockcheck-hang-report: expected a finite number"),
    (["--lockcheck-max-depth", "0"], "--lockcheck-max-depth: expected 1 or more"),
    (["-o", "lockcheck_max_depth=lots"], "lockcheck_max_depth: expected a number of locks"),
])
def test_bad_option_values_are_usage_errors_at_start(pytester: pytest.Pytester, args: list, says: str) -> None:
    pytester.makepyfile(test_one="def test_one():\n    pass\n")
    result = run(pytester, "--lockcheck", *args)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert says in result.stderr.str()
    assert "Traceback" not in result.stderr.str() + result.stdout.str()


def test_defaults_agree() -> None:
    from lockcheck.python import plugin_options, recorder

    assert plugin_options.DEFAULT_MAX_DEPTH == recorder.DEFAULT_MAX_DEPTH


def test_trace_keeps_what_was_recorded_when_the_test_calls_os_exit(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_exit="""
import os, threading

A, B = threading.Lock(), threading.Lock()

def test_first():
    with A:
        pass

def test_abba_then_exit():
    with A:
        with B:
            pass
    with B:
        with A:
            pass
    os._exit(3)
""")
    result = run(pytester, "--lockcheck", "--lockcheck-trace", "out.lt")
    assert result.ret == 3
    text = (pytester.path / "out.lt").read_text()
    assert "# context test_exit.py::test_first" in text  # flushed at the end of the first test
    assert "test_abba_then_exit" in text and text.count("acquire") >= 5  # flushed with the finding
