"""The plugin under pytest-xdist, driven by the command lines users type.

`-n 2` and `-n auto` alone (no `--dist`) are how almost everyone runs xdist; xdist only
fills in `dist = "load"` for them in its own `pytest_cmdline_main`, after the plugin's
early hook has run.  A controller that took itself for a test process reported
`0 findings` while its workers had found a cycle, and in warn mode dropped every finding.
"""

from __future__ import annotations

import pytest

#: these tests read the kernel layout (the plugin's default is the short one)
pytestmark = pytest.mark.usefixtures("kernel_report_style")

pytest_plugins = ["pytester"]

TIMEOUT = 120

ABBA = """
    import threading

    A = threading.Lock()
    B = threading.Lock()

    def test_ab():
        with A:
            with B:
                pass

    def test_ba():
        with B:
            with A:
                pass

    def test_plain():
        pass
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=TIMEOUT)


@pytest.mark.slow
@pytest.mark.parametrize("xdist_args", [("-n", "2"), ("-n", "auto"), ("-n", "0"), ("--dist", "load")],
                         ids=["n2", "nauto", "n0", "dist-load-without-n"])
def test_a_cycle_fails_the_run_however_xdist_is_asked_for(pytester: pytest.Pytester, xdist_args: tuple) -> None:
    pytester.makepyfile(test_abba=ABBA)
    result = run(pytester, "--lockcheck", *xdist_args)
    out = result.stdout.str()
    assert result.ret == 1, out
    assert "WARNING: possible circular locking dependency detected" in out
    assert "lockcheck: 0 findings" not in out
    outcomes = result.parseoutcomes()
    # the second half of the cycle fails its test when both ran in one process, else the
    # controller fails the session with one error line
    assert outcomes.get("failed", 0) + outcomes.get("errors", outcomes.get("error", 0)) == 1, outcomes


@pytest.mark.slow
@pytest.mark.parametrize("xdist_args", [("-n", "2"), ("-n", "auto")], ids=["n2", "nauto"])
def test_warn_mode_under_xdist_reports_the_finding(pytester: pytest.Pytester, xdist_args: tuple) -> None:
    pytester.makepyfile(test_abba=ABBA)
    result = run(pytester, "--lockcheck", "--lockcheck-mode=warn", *xdist_args)
    out = result.stdout.str()
    assert result.ret == 0, out
    result.assert_outcomes(passed=3)
    assert "WARNING: possible circular locking dependency detected" in out
    result.stdout.fnmatch_lines(["lockcheck: warn mode: 1 finding reported*"])


def test_collect_only_under_xdist_records_nothing_and_fails_nothing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_abba=ABBA)
    result = run(pytester, "--lockcheck", "-n", "2", "--collect-only", "-q")
    assert result.ret == 0, result.stdout.str()
    assert "test_abba.py::test_ab" in result.stdout.str()
