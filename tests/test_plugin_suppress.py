"""Suppressions under the plugin (issue 24): one syntax in the ini file and in pyproject.toml's
`[tool.lockcheck]` (the table `lockcheck check` reads), a misspelled kind a usage error with
the nearest kind, a line pasted twice one rule, and the rules that matched nothing listed at
the end of the session."""

from __future__ import annotations

import pytest

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
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--lockcheck", *args,
                                         timeout=TIMEOUT)


def test_pyproject_tool_lockcheck_suppresses_and_stale_rules_are_listed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_abba=ABBA)
    pytester.makefile(".toml", pyproject="""
        [tool.lockcheck]
        suppress = [
          {kind = "circular-dependency", classes = ["test_abba.A", "test_abba.B"], reason = "known"},
          {kind = "recursive-locking", classes = ["nothing.here"]},
        ]
    """)
    result = run(pytester)
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*lockcheck: 0 findings, 1 suppressed*",
                                 "lockcheck: 1 suppression matched no finding (stale: remove it):",
                                 "  recursive-locking nothing.here  (pyproject.toml: suppress?1?)"])


def test_a_line_pasted_twice_is_one_rule_and_stale_ini_lines_are_listed(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_abba=ABBA)
    pytester.makeini("[pytest]\nlockcheck_suppress =\n    circular-dependency test_abba.*\n"
                     "    circular-dependency test_abba.*\n    held-at-exit never.*\n")
    result = run(pytester)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["*lockcheck: 0 findings, 1 suppressed*",
                                 "lockcheck: 1 suppression matched no finding*",
                                 "  held-at-exit never.*  (lockcheck_suppress)"])


@pytest.mark.parametrize("where", ["ini", "pyproject"])
def test_a_misspelled_kind_is_a_usage_error_naming_the_nearest_kind(pytester: pytest.Pytester, where: str) -> None:
    pytester.makepyfile(test_abba=ABBA)
    if where == "ini":
        pytester.makeini("[pytest]\nlockcheck_suppress =\n    circular-dependancy test_abba.*\n")
    else:
        pytester.makefile(".toml", pyproject="""
            [tool.lockcheck]
            suppress = [{kind = "circular-dependancy", classes = ["test_abba.*"]}]
        """)
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*'circular-dependancy' is not a kind of finding (did you mean "
                                 "'circular-dependency'?)*"])


@pytest.mark.slow
def test_stale_rules_are_summed_over_xdist_workers(pytester: pytest.Pytester) -> None:
    pytest.importorskip("xdist")
    pytester.makepyfile(test_abba=ABBA)
    pytester.makeini("[pytest]\nlockcheck_suppress =\n    circular-dependency test_abba.*\n    deadlock gone.*\n")
    result = run(pytester, "-n", "2")
    result.assert_outcomes(passed=2)
    out = result.stdout.str()
    assert "circular-dependency test_abba.*  (" not in out  # it matched, on some worker
    result.stdout.fnmatch_lines(["  deadlock gone.*  (lockcheck_suppress)"])
