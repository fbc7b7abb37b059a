"""`lockcheck check` on a trace the plugin recorded gives the plugin's own findings (issue 24,
"replay = plugin"): the standard library's lock orders the plugin accepts by default are
accepted on replay too (the trace carries the rules and the qualified class names they match),
and each finding names the test that made it."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

TIMEOUT = 120

SUITE = """
    import logging
    import logging.config
    import threading

    A = threading.Lock()
    B = threading.Lock()


    def test_file_handler_closed_then_logging_reconfigured(tmp_path):
        handler = logging.FileHandler(tmp_path / "app.log")
        handler.close()  # its lock, then logging's module lock (Handler.close)
        logging.config.dictConfig({"version": 1, "disable_existing_loggers": False})  # the other way
        del handler


    def test_ab():
        with A:
            with B:
                pass


    def test_ba():
        with B:
            with A:
                pass
"""

CLEAN = """
    import logging
    import logging.config
    import threading

    A = threading.Lock()
    B = threading.Lock()


    def test_file_handler_closed_then_logging_reconfigured(tmp_path):
        handler = logging.FileHandler(tmp_path / "app.log")
        handler.close()
        logging.config.dictConfig({"version": 1, "disable_existing_loggers": False})
        del handler


    def test_ab_twice():
        for _ in range(2):
            with A:
                with B:
                    pass
"""


def record(pytester: pytest.Pytester, source: str) -> tuple[pytest.RunResult, str]:
    pytester.makepyfile(test_suite=source)
    trace = str(pytester.path / "run.lt")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:logging", "--lockcheck",
                                           f"--lockcheck-trace={trace}", timeout=TIMEOUT)
    return result, trace


def check(trace: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lockcheck", "check", "--no-config", *args, trace],
                          check=False, capture_output=True, text=True, timeout=TIMEOUT)


def test_replay_finds_what_the_plugin_found(pytester: pytest.Pytester) -> None:
    result, trace = record(pytester, SUITE)
    result.assert_outcomes(passed=2, failed=1)
    result.stdout.fnmatch_lines(["lockcheck: 1 finding (1 circular-dependency), 1 suppressed in *"])
    replay = check(trace, "--format", "json")
    assert replay.returncode == 1, replay.stderr
    findings = json.loads(replay.stdout)["findings"]
    assert [(f["kind"], sorted(f["cycle"])) for f in findings] == [
        ("circular-dependency", ["test_suite.A", "test_suite.B"])]
    text = check(trace)
    assert text.returncode == 1
    assert "test_suite.py::test_ba" in text.stdout  # the test that closed the cycle
    assert "logging._lock" not in text.stdout  # the stdlib's inversion: accepted, as by the plugin
    assert "1 suppressed" in text.stdout


def test_clean_session_replays_clean(pytester: pytest.Pytester) -> None:
    result, trace = record(pytester, CLEAN)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["lockcheck: 0 findings, 1 suppressed in *"])
    replay = check(trace)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "no problems found" in replay.stdout and "1 suppressed" in replay.stdout
