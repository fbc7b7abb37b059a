"""What the pytest plugin tells its user: reports, warn mode, the session verdict, trace files.

Real small suites run under pytester in a subprocess (each with a timeout,
so a plugin bug that deadlocks cannot hang CI); the assertions are on what
a developer reads: the report text, the exit status and pytest's closing line.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

from lockcheck.readers.source import open_lines
from lockcheck.util.traceout import TraceOutput, compression_of, open_trace_output

#: these tests read the kernel layout (the plugin's default is the short one)
pytestmark = pytest.mark.usefixtures("kernel_report_style")

pytest_plugins = ["pytester"]

TIMEOUT = 120

ABBA = """
    import threading

    A = threading.Lock()
    B = threading.Lock()

    def test_a():
        with A:
            with B:
                pass

    def test_b():
        with B:
            with A:
                pass
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", *args, timeout=TIMEOUT)


def check_cli(path: os.PathLike, cwd: os.PathLike) -> dict:
    """`lockcheck check --format json PATH` as a user would run it on the plugin's trace."""
    cli = subprocess.run([sys.executable, "-m", "lockcheck", "check", "--format", "json", str(path)],
                         capture_output=True, text=True, timeout=TIMEOUT, cwd=cwd)
    assert cli.returncode in (0, 1), cli.stderr
    return json.loads(cli.stdout)


# -- warn mode --------------------------------------------------------------------------


def test_warn_mode_reports_without_failing(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_abba=ABBA)
    trace = pytester.path / "run.lt.zst"
    result = run(pytester, "--lockcheck", "--lockcheck-mode=warn", f"--lockcheck-trace={trace}")
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    out = result.stdout.str()
    # the full report is in the terminal summary, since no failed test carries it
    assert "WARNING: possible circular locking dependency detected" in out
    result.stdout.fnmatch_lines([
        "*lockcheck: 1 finding (1 circular-dependency)*",
        "findings in tests (warn mode: reported, not failing the tests):",
        "*lockcheck: warn mode: 1 finding reported; neither the tests nor the session fail*",
    ])
    # the compressed trace is zstd and `lockcheck check` reads it to the same verdict
    assert trace.read_bytes()[:4] == b"\x28\xb5\x2f\xfd"
    doc = check_cli(trace, pytester.path)
    assert [f["kind"] for f in doc["findings"]] == ["circular-dependency"]


def test_warn_mode_from_ini_and_bad_values(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_abba=ABBA)
    pytester.makeini("[pytest]\nlockcheck = true\nlockcheck_mode = warn\n")
    result = run(pytester, "-rP")
    result.assert_outcomes(passed=2)
    assert result.ret == 0
    # -rP shows passing tests' sections: the report rides on the test that made it
    result.stdout.fnmatch_lines(["*lockcheck (warn mode: not failing the test)*"])
    # the command line wins over the ini file
    result = run(pytester, "--lockcheck-mode=fail")
    result.assert_outcomes(passed=1, failed=1)
    assert result.ret == 1
    pytester.makeini("[pytest]\nlockcheck = true\nlockcheck_mode = loud\n")
    result = run(pytester)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    result.stderr.fnmatch_lines(["*lockcheck_mode: expected `fail` or `warn`, not 'loud'*"])


# -- the session's verdict ----------------------------------------------------------------


def test_finding_outside_any_test_fails_the_session_and_says_so(pytester: pytest.Pytester) -> None:
    # both orders are taken at import time, while collecting: no test is running
    pytester.makepyfile(test_ok="""
        import threading
        A = threading.Lock()
        B = threading.Lock()
        with A:
            with B:
                pass
        with B:
            with A:
                pass

        def test_ok():
            pass
    """)
    result = run(pytester, "--lockcheck")
    assert result.ret == 1
    result.stdout.fnmatch_lines([
        "*ERROR at teardown of lockcheck*",
        "lockcheck fails the session (exit status 1): 1 finding made outside any test.",
        "findings outside any test:",
        "*lockcheck: the session FAILED (exit status 1) because of 1 finding made outside any test*",
        "ERROR lockcheck - fails the session: 1 finding made outside any test",
        "*1 passed, 1 error in *",
    ])
    warned = run(pytester, "--lockcheck", "--lockcheck-mode=warn")
    assert warned.ret == 0
    assert "error" not in warned.stdout.lines[-1]
    warned.stdout.fnmatch_lines(["*1 passed in *"])


def test_xdist_cycle_across_workers_fails_with_an_error_line(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(shared_locks="""
        import threading
        A = threading.Lock()
        B = threading.Lock()
    """)
    pytester.makepyfile(test_one="""
        from shared_locks import A, B
        def test_a():
            with A:
                with B:
                    pass
    """, test_two="""
        from shared_locks import A, B
        def test_b():
            with B:
                with A:
                    pass
    """)
    trace = pytester.path / "run.lt.gz"
    result = run(pytester, "--lockcheck", "-p", "xdist", "-n", "2", "--dist", "loadfile",
                 f"--lockcheck-trace={trace}")
    assert result.ret == 1
    out = result.stdout.str()
    if "across workers" in out:
        # the usual case, one file per worker: every test passed, the session failed, and the
        # closing line says so instead of "2 passed"
        result.assert_outcomes(passed=2, errors=1)
        result.stdout.fnmatch_lines([
            "lockcheck fails the session (exit status 1): 1 circular-dependency across xdist workers*",
            "*lockcheck: the session FAILED (exit status 1) because of 1 circular-dependency across xdist*",
            "ERROR lockcheck - fails the session: 1 circular-dependency across xdist*",
            "*2 passed, 1 error in *",
        ])
    else:  # both files ran on one worker: the second test failed there, nothing is session-level
        result.assert_outcomes(passed=1, failed=1)
        assert "lockcheck fails the session" not in out
    # each worker wrote its own compressed trace; together they replay to the cycle
    traces = sorted(pytester.path.glob("run.gw*.lt.gz"))
    assert [p.name for p in traces] == ["run.gw0.lt.gz", "run.gw1.lt.gz"]
    assert all(p.read_bytes()[:2] == b"\x1f\x8b" for p in traces)
    for path in traces:
        name, lines = open_lines(str(path))
        assert next(lines) == "#lockcheck-trace v1"


# -- trace output -------------------------------------------------------------------------


@pytest.mark.parametrize("suffix, magic", [(".lt", b"#lockcheck"), (".lt.gz", b"\x1f\x8b"),
                                           (".lt.xz", b"\xfd7zXZ\x00"), (".lt.zst", b"\x28\xb5\x2f\xfd")])
def test_trace_output_compresses_by_name_and_reads_back(tmp_path, suffix: str, magic: bytes) -> None:
    path = tmp_path / f"t{suffix}"
    lines = ["#lockcheck-trace v1"] + [f"T{i % 3} acquire L{i % 7}@0x{i:x} at=f.py:{i}" for i in range(20000)]
    with open_trace_output(str(path)) as out:
        for line in lines[:10]:
            out.write(line)
            out.write("\n")
        out.flush()
        if suffix != ".lt.xz":  # xz has no sync point: what was flushed is readable only at the end
            _, head = open_lines(str(path))
            assert [next(head) for _ in range(10)] == lines[:10]
        for line in lines[10:]:
            out.write(line + "\n")
    assert out.write("late\n") == 0  # after close: dropped, not an error
    assert path.read_bytes().startswith(magic)
    _, back = open_lines(str(path))
    assert list(back) == lines
    if suffix != ".lt":
        assert path.stat().st_size < sum(len(line) + 1 for line in lines) / 5


def test_compression_is_chosen_by_the_last_suffix_only() -> None:
    assert compression_of("a.lt") is None
    assert compression_of("a.LT.GZ") == "gzip"
    assert compression_of("a.gz.lt") is None
    assert compression_of("trace.zst") == "zstd"


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_trace_output_survives_a_forked_child(tmp_path) -> None:
    """A child that inherits the writer and closes it must not touch the parent's file."""
    path = tmp_path / "t.lt.gz"
    out = TraceOutput(str(path), "gzip")
    out.write("#lockcheck-trace v1\nT1 acquire A\n")
    out.flush()
    pid = os.fork()
    if pid == 0:  # the child: write, flush and close, as a careless program would
        try:
            out.write("child acquire B\n")
            out.flush()
            out.close()
        finally:
            os._exit(0)
    os.waitpid(pid, 0)
    out.write("T1 release A\n")
    out.close()
    _, lines = open_lines(str(path))
    assert list(lines) == ["#lockcheck-trace v1", "T1 acquire A", "T1 release A"]


# -- Python-flavoured reports ------------------------------------------------------------

#: every lock of the app is taken through one helper: a one-frame site says nothing
REPORT_SUITE = {
    "util": """
        import contextlib


        @contextlib.contextmanager
        def locked(lock):
            with lock:
                yield
    """,
    "bank": """
        import threading

        from util import locked

        REGISTRY = threading.Lock()


        class Account:
            def __init__(self):
                self._lock = threading.Lock()
                self.balance = 0


        class Bank:
            def __init__(self):
                self._lock = threading.Lock()
                self.accounts = []

            def add(self, account):
                with locked(self._lock):
                    with locked(account._lock):
                        self.accounts.append(account)

            def audit(self, account):
                with locked(account._lock):
                    with locked(self._lock):
                        return len(self.accounts)


        def transfer(src, dst, amount):
            with locked(src._lock):
                with locked(dst._lock):
                    src.balance -= amount
                    dst.balance += amount


        def register(name):
            with REGISTRY:
                _remember(name)


        def _remember(name):
            with REGISTRY:
                pass
    """,
    "test_bank": """
        import pytest

        from bank import Account, Bank, register, transfer
        from lockcheck.python.instrument import SelfDeadlockError


        def test_add():
            Bank().add(Account())


        def test_audit():
            Bank().audit(Account())


        def test_transfer():
            transfer(Account(), Account(), 5)


        def test_register():
            with pytest.raises(SelfDeadlockError):
                register("x")
    """,
}


def reports(out: str) -> list[str]:
    """The lockcheck reports in pytest's output: from each `WARNING:` title to its suppression line."""
    found, current = [], None
    for line in out.splitlines():
        if line.startswith("WARNING: ") and current is None:
            current = [line]
        elif current is not None:
            current.append(line)
            if line.startswith("  lockcheck_suppress = "):
                found.append("\n".join(current))
                current = None
    return found


def test_reports_show_stacks_how_to_fix_and_a_suppression_that_works(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(**REPORT_SUITE)
    pytester.makeini("[pytest]\nlockcheck_grace = 0.1\n")
    result = run(pytester, "--lockcheck")
    result.assert_outcomes(passed=1, failed=3)
    # the failures section: with CI set (as on CI machines) pytest repeats each failure's
    # whole message in its short test summary
    out = result.stdout.str().split(" short test summary info ", 1)[0]
    found = reports(out)
    assert len(found) == 3, out
    circular, two_instances, reentry = sorted(found, key=lambda r: ("circular" not in r, "REGISTRY" in r))
    for report in found:
        # the helper's frame, then its callers, and the test, innermost first; none of the plumbing
        for hidden in ("threading.py", "contextlib.py", "lockcheck/", "_pytest", "pluggy", "runpy"):
            assert hidden not in report, (hidden, report)
        assert "May be due to missing lock nesting notation\n" not in report
    # the chain: each dependency with its stack and the test that made it
    assert "\n".join(["-> #1 (Account._lock){+.+.}:",
                      "       util.py:6 in locked"]) in circular
    assert "by MainThread/1 in test test_bank.py::test_add" in circular
    assert "by MainThread/1 in test test_bank.py::test_audit" in circular
    lines = circular.splitlines()
    backtrace = lines[lines.index("stack backtrace:") + 1:][:4]
    assert backtrace[0] == " util.py:6 in locked"
    assert backtrace[1].startswith(" bank.py:26 in ") and backtrace[1].endswith("audit")
    assert backtrace[2] == " test_bank.py:12 in test_audit"
    assert backtrace[3] == " by MainThread/1 in test test_bank.py::test_audit"
    # how to fix names the classes, the established order and the site that reverses it
    assert "The order seen first is\n  Bank._lock -> Account._lock:" in circular
    assert "Bank._lock, then Account._lock at util.py:6 in locked, from bank.py:21 in " in circular
    assert "Change that code to take Bank._lock before Account._lock" in circular
    assert "    Bank._lock < Account._lock" in circular
    assert "from bank.py:26 in " in circular and "(test test_bank.py::test_audit)" in circular
    # two instances of one class: nested(), an id()-ordered helper, or a class of its own
    assert "Two locks of one class are held together:" in two_instances
    assert "with lockcheck.nested(child._lock, 1):   # validated as Account._lock/1" in two_instances
    assert "def locked_in_order(*locks):" in two_instances
    assert 'lockcheck.name(parent._lock, "Account.parent_lock")' in two_instances
    assert "in Python, lockcheck.nested()" in two_instances
    # the same Lock twice: not re-entrant, with where it was first taken (a function still running)
    assert "This thread already holds this very lock, bank.REGISTRY" in reentry
    assert "taken at bank.py:38 in register, from test_bank.py:21 in test_register" in reentry
    assert "and again at bank.py:43 in _remember, from bank.py:39 in register" in reentry
    assert "make it a threading.RLock" in reentry

    # paste what the reports say: the first suppression line as printed, the others as its
    # continuation lines; and the id()-ordered helper of the report, for a class of its own
    rules = [line.split(" = ", 1)[1] for line in out.splitlines() if line.startswith("  lockcheck_suppress = ")]
    assert len(rules) == 3
    snippet = two_instances.splitlines()
    start = snippet.index("      @contextlib.contextmanager")
    helper = "\n".join(line[6:] for line in snippet[start:start + 6])
    pytester.makepyfile(ordered="import contextlib\nimport lockcheck\n\n\n" + helper + "\n")
    pytester.makepyfile(test_ordered="""
        import threading
        import lockcheck
        from ordered import locked_in_order

        class Node:
            def __init__(self):
                self.lock = threading.Lock()

        def test_both_orders_are_one_order():
            a, b = Node(), Node()
            with locked_in_order(a.lock, b.lock):
                pass
            with locked_in_order(b.lock, a.lock):
                pass

        def test_parent_then_child():
            parent, child = Node(), Node()
            with parent.lock:
                with lockcheck.nested(child.lock, 1):
                    pass
    """)
    pytester.makeini("[pytest]\nlockcheck_grace = 0.1\n"
                     f"lockcheck_suppress = {rules[0]}\n" + "".join(f"    {rule}\n" for rule in rules[1:]))
    result = run(pytester, "--lockcheck")
    result.assert_outcomes(passed=6)
    assert result.ret == 0
    result.stdout.fnmatch_lines(["*lockcheck: 0 findings, 3 suppressed*"])


def _backtrace(report: str) -> list[str]:
    """The frames a report prints under `stack backtrace:` (up to its `by TASK in test` line)."""
    lines = report.splitlines()
    frames = []
    for line in lines[lines.index("stack backtrace:") + 1:]:
        if not line.startswith(" ") or line.startswith(" by "):
            break
        frames.append(line.strip())
    return frames


def test_stack_depth_option_limits_the_frames_of_each_report(pytester: pytest.Pytester) -> None:
    """`--lockcheck-stack-depth` (and its ini twin) is how many frames each site shows; bad values
    are a usage error, not a traceback."""
    pytester.makepyfile(**REPORT_SUITE)
    frames = {}
    # the command line; then the ini option, when the command line does not say
    for args, ini in ((["--lockcheck-stack-depth=3"], ""), ([], "lockcheck_stack_depth = 1\n")):
        pytester.makeini("[pytest]\nlockcheck_grace = 0.1\n" + ini)
        result = run(pytester, "--lockcheck", *args, "-k", "add or audit")
        result.assert_outcomes(passed=1, failed=1)
        (report,) = reports(result.stdout.str().split(" short test summary info ", 1)[0])
        frames[len(frames)] = _backtrace(report)
    # innermost first: the helper, the method and the test; with 1, the helper alone
    assert len(frames[0]) == 3 and frames[0][0] == "util.py:6 in locked"
    assert frames[0][1].startswith("bank.py:26 in ") and frames[0][2] == "test_bank.py:12 in test_audit"
    assert frames[1] == ["util.py:6 in locked"]
    for bad, message in (("--lockcheck-stack-depth=-1", "*--lockcheck-stack-depth: expected 0 or more frames*"),
                         ("-olockcheck_stack_depth=deep", "*lockcheck_stack_depth: expected a number of frames*")):
        result = run(pytester, "--lockcheck", bad)
        assert result.ret == pytest.ExitCode.USAGE_ERROR
        result.stderr.fnmatch_lines([message])
        assert "Traceback" not in result.stderr.str()
