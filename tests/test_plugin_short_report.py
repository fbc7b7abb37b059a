"""The plugin's default report (`lockcheck.python.report_short`), `--lockcheck-report=FILE.json`
and `@pytest.mark.lockcheck(expect=, order=, suppress=)`, each through a real pytest run.

The short report's promise is measured here: one AB-BA through a `logging.Handler` in at most
30 lines, the whole failing run in at most 60, library frames folded, paths relative to the
rootdir even when pytest runs from elsewhere.  Assertions avoid the short summary's width
(pytest prints it whole when CI is set).
"""

from __future__ import annotations

import json
import re
import subprocess
import sys
from pathlib import Path

import jsonschema
import pytest

pytest_plugins = ["pytester"]
TIMEOUT = 120

LOGGING_ABBA = '''
import logging
import threading

registry = threading.RLock()


class AuditHandler(logging.Handler):
    def emit(self, record):
        with registry:  # the handler's lock is held here (Handler.handle)
            pass


log = logging.getLogger("app")
log.addHandler(AuditHandler())
log.propagate = False


def test_register():
    with registry:
        logging.getLogger("app").warning("registered")  # registry, then the handler's lock


def test_log_then_register():
    logging.getLogger("app").warning("first")  # the handler's lock, then registry
'''


def _run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--lockcheck", *args,
                                         timeout=TIMEOUT)


def _report(lines: list[str]) -> list[str]:
    """The lockcheck failure text of the one failed test: from its headline to the next section."""
    start = next(i for i, line in enumerate(lines) if line.startswith("lockcheck: possible"))
    end = next(i for i, line in enumerate(lines[start:], start) if line.startswith(("---", "===")))
    return lines[start:end]


def test_logging_abba_is_short_folded_and_relative(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_logabba=LOGGING_ABBA)
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    lines = result.outlines
    report = _report(lines)
    assert len(report) <= 30, "\n".join(report)
    run = [line for line in lines if line.strip()]
    assert len(run) <= 60, result.stdout.str()
    text = "\n".join(report)
    assert report[1] == "circular-dependency: test_logabba.registry -> AuditHandler.lock -> test_logabba.registry"
    # each dependency: the test that made it, the application's frames, logging folded into one line
    assert "  test_logabba.registry -> AuditHandler.lock  in test_logabba.py::test_register" in report
    assert "  AuditHandler.lock -> test_logabba.registry  in test_logabba.py::test_log_then_register (this test)" \
        in report
    assert "      test_logabba.py:9 in AuditHandler.emit" in report
    assert "      test_logabba.py:24 in test_log_then_register" in report
    assert "      test_logabba.py:20 in test_register" in report
    folded = [line.strip() for line in report if "frames in logging" in line]
    assert folded and all(re.fullmatch(r"\(\.\.\. \d+ frames in logging\)", line) for line in folded), folded
    assert "logging/__init__.py" not in text and "site-packages" not in text and "lockcheck/" not in text
    assert "  lockcheck_suppress = circular-dependency test_logabba.registry test_logabba.AuditHandler.lock" \
        in report
    assert text.count("fix: ") == 1
    # the kernel layout's furniture is gone
    assert "0x" not in text and "{+.+.}" not in text and "*** DEADLOCK ***" not in text


def test_paths_are_relative_to_the_rootdir(pytester: pytest.Pytester) -> None:
    """Run from a subdirectory, the frames still read `tests/test_x.py:N` (as pytest shows them)."""
    pytester.makeini("[pytest]\n")
    tests = pytester.mkdir("tests")
    (tests / "test_abba.py").write_text(
        "import threading\na = threading.Lock()\nb = threading.Lock()\n\n"
        "def test_ab():\n    with a:\n        with b:\n            pass\n\n"
        "def test_ba():\n    with b:\n        with a:\n            pass\n")
    sub = pytester.mkdir("elsewhere")
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", "-p", "no:randomly",
                           "--lockcheck", "../tests"], cwd=sub, capture_output=True, text=True, timeout=TIMEOUT,
                          check=False)
    out = proc.stdout
    assert "      tests/test_abba.py:7 in test_ab" in out, out
    assert "      tests/test_abba.py:12 in test_ba" in out, out
    assert "../tests" not in "\n".join(line for line in out.splitlines() if " in test_" in line and ".py:" in line)


def test_tracebackhide_and_helper_modules_name_the_caller(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(locking='''
import contextlib

@contextlib.contextmanager
def both(first, second):
    with first:
        with second:
            yield
''', hidden='''
def take(first, second):
    __tracebackhide__ = True
    with first:
        with second:
            pass
''', test_helpers='''
import threading
import hidden
import locking

a = threading.Lock()
b = threading.Lock()


def test_ab():
    hidden.take(a, b)


def test_ba():
    with locking.both(b, a):
        pass
''')
    pytester.makeini("[pytest]\nlockcheck_helper_modules = locking\n")
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    report = _report(result.outlines)
    text = "\n".join(report)
    assert "      test_helpers.py:10 in test_ab" in report, text
    assert "      test_helpers.py:14 in test_ba" in report, text
    assert "hidden.py" not in text and "locking.py" not in text


def test_kernel_style_is_kept(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_logabba=LOGGING_ABBA)
    result = _run(pytester, "--lockcheck-report-style=kernel")
    result.stdout.fnmatch_lines(["WARNING: possible circular locking dependency detected",
                                 "the existing dependency chain (in reverse order) is:", "How to fix:",
                                 "  lockcheck_suppress = circular-dependency *"])
    pytester.makeini("[pytest]\nlockcheck_report_style = nope\n")
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*lockcheck_report_style: expected `python` or `kernel`, not 'nope'*"])


def test_deadlock_report_is_compact_and_points_at_the_test(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_dead='''
import threading
import time

accounts = threading.RLock()
ledger = threading.RLock()


def test_transfer_and_audit():
    def audit():
        with ledger:
            time.sleep(0.2)
            with accounts:
                pass

    auditor = threading.Thread(target=audit, name="auditor")
    auditor.start()
    with accounts:
        time.sleep(0.1)
        with ledger:
            pass
    auditor.join()
''')
    result = _run(pytester, "-p", "no:threadexception")
    result.assert_outcomes(failed=1)
    out = result.stdout.str()
    block = out[out.index("\ndeadlock: ") + 1:]
    block = block[:block.index("lockcheck_suppress = deadlock")]
    assert len(block.splitlines()) <= 12, block
    assert "holds test_dead.ledger (taken at test_dead.py:10)" in block, block
    assert "holds test_dead.accounts (taken at test_dead.py:17)" in block, block
    assert "WARNING:" not in out and "Deadlock scenario" not in out


def _schema() -> dict:
    from lockcheck.python.plugin_json import SCHEMA

    return json.loads(Path(SCHEMA).read_text())


@pytest.mark.slow
@pytest.mark.parametrize("workers", [[], ["-n", "2"]], ids=["plain", "xdist"])
def test_json_report(pytester: pytest.Pytester, workers: list[str]) -> None:
    pytester.makepyfile(test_logabba=LOGGING_ABBA, test_other='''
import threading
x = threading.Lock()
y = threading.Lock()

def test_xy():
    with x:
        with y:
            pass

def test_yx():
    with y:
        with x:
            pass
''')
    pytester.makeini("[pytest]\nlockcheck_suppress = circular-dependency test_other.x test_other.y\n")
    pytester.mkdir("out")
    result = _run(pytester, *workers, "--lockcheck-report=out/report.json")
    assert result.ret == 1
    doc = json.loads((pytester.path / "out" / "report.json").read_text())
    jsonschema.validate(doc, _schema())
    assert doc["version"] == 1
    reported = [f for f in doc["findings"] if not f["suppressed"]]
    assert [f["kind"] for f in reported] == ["circular-dependency"], doc
    finding = reported[0]
    assert sorted(finding["tests"]) == ["test_logabba.py::test_log_then_register", "test_logabba.py::test_register"]
    assert set(finding["classes"]) == {"test_logabba.registry", "AuditHandler.lock"}
    assert finding["confirmed"] is None and finding["expected"] is False
    assert {"file": "test_logabba.py", "line": 9, "function": "AuditHandler.emit"} in finding["frames"]
    files = {frame["file"] for edge in finding["edges"] for frame in edge["frames"]} | {
        frame["file"] for frame in finding["frames"]}
    assert files == {"test_logabba.py"}
    suppressed = [f for f in doc["findings"] if f["suppressed"] and f["classes"][0].startswith("test_other.")]
    assert len(suppressed) == 1 and suppressed[0]["tests"][0].startswith("test_other.py::"), doc


def test_json_report_path_is_checked_first(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x():\n    pass\n")
    result = _run(pytester, "--lockcheck-report=nowhere/r.json")
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*--lockcheck-report: nowhere/r.json: no such directory*"])


def test_schema_rejects_a_report_without_confirmed() -> None:
    doc = {"version": 1, "tool": "lockcheck", "findings": [{
        "kind": "circular-dependency", "message": "m", "tests": [], "classes": ["a"], "task": "t", "frames": [],
        "held_frames": [], "edges": [], "suppressed": False, "expected": False}]}
    with pytest.raises(jsonschema.ValidationError, match="confirmed"):
        jsonschema.validate(doc, _schema())


MARKED = '''
import threading
import pytest

a = threading.Lock()
b = threading.Lock()


def test_ab():
    with a:
        with b:
            pass


@pytest.mark.lockcheck(expect="circular-dependency")
def test_ba_on_purpose():
    with b:
        with a:
            pass


@pytest.mark.lockcheck(expect="circular-dependency")
def test_expects_but_is_clean():
    with a:
        pass
'''


def test_marker_expect(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_marked=MARKED)
    result = _run(pytester, "--lockcheck-report=r.json")
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert "FAILED test_marked.py::test_expects_but_is_clean" in out
    assert "expected a circular-dependency finding" in out
    assert "test_ba_on_purpose FAILED" not in out and "FAILED test_marked.py::test_ba_on_purpose" not in out
    doc = json.loads((pytester.path / "r.json").read_text())
    assert [(f["kind"], f["tests"][0], f["expected"]) for f in doc["findings"] if not f["suppressed"]] == [
        ("circular-dependency", "test_marked.py::test_ba_on_purpose", True)]


def test_marker_order(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ordered='''
import threading
import pytest

a = threading.Lock()
b = threading.Lock()
c = threading.Lock()


@pytest.mark.lockcheck(order=["b", "a", "c"])
def test_against_its_order():
    with a:
        with b:
            pass


def test_other_order_elsewhere_is_fine():
    with c:  # against the order above, which is not this test's
        with b:
            pass
''')
    result = _run(pytester)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    assert "FAILED test_ordered.py::test_against_its_order" in out
    # the order is this test's alone: b -> c elsewhere is no violation, nor a -> b in another test
    assert "order-violation: test_ordered.a -> test_ordered.b" in out, out
    assert "the declared order is b < a" in out


def test_marker_order_sees_a_dependency_an_earlier_test_made(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ordered2='''
import threading
import pytest

a = threading.Lock()
b = threading.Lock()


def take_a_then_b():
    with a:
        with b:
            pass


def test_first_makes_it():
    take_a_then_b()


@pytest.mark.lockcheck(order=["b", "a"])
def test_makes_it_again_against_its_order():
    take_a_then_b()


def test_after_it_the_order_is_gone():
    take_a_then_b()
''')
    result = _run(pytester)
    result.assert_outcomes(passed=2, failed=1)
    out = result.stdout.str()
    assert "FAILED test_ordered2.py::test_makes_it_again_against_its_order" in out, out
    assert "order-violation: test_ordered2.a -> test_ordered2.b" in out, out


def test_marker_suppress(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_supp='''
import threading
import pytest

a = threading.Lock()
b = threading.Lock()


def test_ab():
    with a:
        with b:
            pass


@pytest.mark.lockcheck(suppress=["circular-dependency test_supp.a test_supp.b"])
def test_ba_accepted():
    with b:
        with a:
            pass
''')
    result = _run(pytester)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["lockcheck: 0 findings, 1 suppressed in *"])


@pytest.mark.parametrize("marker, error", [
    ("skip=True, colour='red'", "unknown keyword 'colour'"),
    ("expect='circular-dependancy'", "did you mean 'circular-dependency'"),
    ("order=['a']", "name two locks or more"),
    ("suppress=['no-such-kind a']", "'no-such-kind' is not a kind of finding"),
])
def test_marker_misuse_is_a_usage_error(pytester: pytest.Pytester, marker: str, error: str) -> None:
    pytester.makepyfile(test_bad=f"import pytest\n\n@pytest.mark.lockcheck({marker})\ndef test_x():\n    pass\n")
    result = _run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR, result.stdout.str()
    assert error in result.stderr.str(), result.stderr.str()
    assert "test_bad.py::test_x" in result.stderr.str()
