"""Deadlocks caught as they happen (`lockcheck.python.waitfor`) and hang reports (`lockcheck.python.hang`).

Every suite here deadlocks or hangs on purpose; each one is run in a
subprocess with a timeout, and each deadlock is broken by the check (or by
a thread of the test itself), so none of them can hang this suite.
"""

from __future__ import annotations

import asyncio
import os
import re
import subprocess
import sys
import threading
from pathlib import Path

import pytest

import lockcheck
from lockcheck.python import instrument as pylocks

#: these tests read the kernel layout (the plugin's default is the short one)
pytestmark = pytest.mark.usefixtures("kernel_report_style")

pytest_plugins = ["pytester"]

TIMEOUT = 120
#: a short grace: a cycle through a plain Lock is reported once it stood this long
INI = """
    [pytest]
    lockcheck_grace = 0.3
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    pytester.makeini(INI)
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--lockcheck", *args, timeout=TIMEOUT)


TWO_THREADS = """
    import threading
    import lockcheck

    A = threading.Lock()
    B = threading.Lock()

    def test_ab_ba():
        errors = []
        a_held, b_held = threading.Event(), threading.Event()

        def worker():
            with B:
                b_held.set()
                a_held.wait(10)
                try:
                    with A:
                        pass
                except lockcheck.DeadlockError as err:
                    errors.append(("worker", err))

        thread = threading.Thread(target=worker, name="worker")
        thread.start()
        with A:
            a_held.set()
            b_held.wait(10)
            try:
                with B:
                    pass
            except lockcheck.DeadlockError as err:
                errors.append(("main", err))
        thread.join(10)
        assert not thread.is_alive()
        assert len(errors) == 1, errors   # one of the two closed the cycle, and only that one raised
        print("RAISED IN", errors[0][0])
        print(errors[0][1])
"""


def test_two_thread_deadlock_raises_in_one_thread(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_dl=TWO_THREADS)
    result = run(pytester, "-s", "--lockcheck-mode=warn")
    out = result.stdout.str()
    assert result.ret == 0, out  # the test's own assertions held: exactly one DeadlockError
    assert "RAISED IN " in out
    assert "WARNING: deadlock detected: every context in a cycle of waits is blocked" in out
    # both threads, what each holds and where it took it, what each waits for
    assert "holds test_dl.A@" in out and "holds test_dl.B@" in out
    assert "waits for test_dl.B@" in out and "waits for test_dl.A@" in out
    assert "worker/" in out and "MainThread/" in out
    assert "taken at: test_dl.py:12" in out and "taken at: test_dl.py:23" in out
    # the deadlock is a finding of its test, besides the lock-order one found before it waited
    assert "deadlock: test_dl.B -> test_dl.A in test_dl.py::test_ab_ba" in out or \
        "deadlock: test_dl.A -> test_dl.B in test_dl.py::test_ab_ba" in out
    assert "1 circular-dependency, 1 deadlock" in out
    # How to fix: where each context took what it holds, and what it waits for
    assert re.search(r"worker/\d+ \[test_dl.py::test_ab_ba\]: test_dl.B at test_dl.py:12, then test_dl.A at", out)
    assert re.search(r"MainThread/\d+ \[test_dl.py::test_ab_ba\]: test_dl.A at test_dl.py:23, then test_dl.B at", out)


REPORT_MODE = """
    import threading, time

    A = threading.Lock()
    B = threading.Lock()

    def test_report_and_wait():
        b_held = threading.Event()

        def worker():
            with B:
                b_held.set()
                time.sleep(0.2)
                with A:           # waits: A is main's, until the rescuer releases it
                    pass

        def rescuer():
            time.sleep(2.5)
            A.release()           # a plain Lock may be released by another thread

        A.acquire()
        threading.Thread(target=worker).start()
        b_held.wait(10)
        threading.Thread(target=rescuer).start()
        with B:                   # closes the cycle: reported, then waits on
            pass
"""


def test_report_mode_reports_and_keeps_waiting(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_rep=REPORT_MODE)
    result = run(pytester, "--lockcheck-deadlock=report")
    result.assert_outcomes(failed=1)  # the finding fails the test; the acquire itself returned
    err, out = result.stderr.str(), result.stdout.str()
    assert "WARNING: deadlock detected" in err  # printed when found, while it still waits
    assert "DeadlockError" not in out
    assert "lockcheck: deadlock detected" in out


def test_cycle_broken_within_grace_is_no_deadlock(pytester: pytest.Pytester) -> None:
    """A Lock released by a thread outside the cycle (a signal) ends it: not reported, not raised."""
    pytester.makepyfile(test_rep=REPORT_MODE)
    result = run(pytester, "-o", "lockcheck_grace=10", "--lockcheck-mode=warn")
    result.assert_outcomes(passed=1)
    out = result.stdout.str() + result.stderr.str()
    assert "1 finding (1 circular-dependency)" in out  # the order is still reported
    assert "deadlock detected" not in out


def test_off_mode_checks_no_waits(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_rep=REPORT_MODE)
    result = run(pytester, "--lockcheck-deadlock=off", "--lockcheck-mode=warn")
    result.assert_outcomes(passed=1)
    assert "deadlock detected" not in result.stdout.str() + result.stderr.str()


def test_bad_deadlock_mode_is_a_usage_error(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_x="def test_x(): pass")
    pytester.makeini("[pytest]\nlockcheck_deadlock = maybe\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--lockcheck", timeout=TIMEOUT)
    assert result.ret == pytest.ExitCode.USAGE_ERROR
    assert "lockcheck_deadlock: expected `raise`, `report` or `off`, not 'maybe'" in result.stderr.str()


ASYNC_TASKS = """
    import asyncio
    import lockcheck

    def test_two_tasks():
        async def main():
            a, b = asyncio.Lock(), asyncio.Lock()
            both = asyncio.Event()

            async def one():
                async with a:
                    await asyncio.sleep(0.05)
                    async with b:
                        pass

            async def two():
                async with b:
                    await asyncio.sleep(0.05)
                    async with a:
                        pass

            return await asyncio.wait_for(
                asyncio.gather(one(), two(), return_exceptions=True), 20)

        results = asyncio.run(main())
        raised = [r for r in results if isinstance(r, lockcheck.DeadlockError)]
        assert len(raised) == 1 and results.count(None) == 1, results
        print(raised[0])
"""


def test_asyncio_tasks_deadlock(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_adl=ASYNC_TASKS)
    result = run(pytester, "-s", "--lockcheck-mode=warn")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "WARNING: deadlock detected" in out
    contexts = out[out.index("the cycle of waits"):out.index("Deadlock scenario")]
    assert contexts.count("(asyncio task)") == 2
    assert "holds test_two_tasks.main.a@" in out and "holds test_two_tasks.main.b@" in out
    assert "waits for test_two_tasks.main.a@" in out and "waits for test_two_tasks.main.b@" in out


MIXED = """
    import asyncio, threading
    import lockcheck

    LOCK = threading.Lock()

    def test_loop_thread_blocks_on_its_task():
        async def main():
            async def holder():
                with LOCK:                   # a threading lock held across an await
                    await asyncio.sleep(0.5)

            async def blocker():
                await asyncio.sleep(0.05)
                with LOCK:                   # blocks the loop: holder can never resume
                    pass

            return await asyncio.gather(
                asyncio.create_task(holder(), name="holder"),
                asyncio.create_task(blocker(), name="blocker"), return_exceptions=True)

        results = asyncio.run(main())
        assert results[0] is None and isinstance(results[1], lockcheck.DeadlockError), results
        print(results[1])
"""


def test_mixed_loop_thread_and_suspended_task(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_mixed=MIXED)
    result = run(pytester, "-s", "--lockcheck-mode=warn")
    out = result.stdout.str()
    assert result.ret == 0, out
    assert "WARNING: deadlock detected" in out
    assert "the event loop's thread, running blocker" in out
    assert "#1: holder [test_mixed.py::test_loop_thread_blocks_on_its_task] (asyncio task, suspended)" in out
    assert "holds test_mixed.LOCK@" in out and "taken at: test_mixed.py:9" in out
    assert "suspended at: test_mixed.py:10" in out
    assert "Do not hold the threading lock test_mixed.LOCK across an await (at test_mixed.py:10)" in out


HANG = """
    import threading, time

    LOCK = threading.Lock()

    def test_hangs():
        taken = threading.Event()

        def sleeper():
            with LOCK:
                taken.set()
                time.sleep(RELEASE_AFTER)

        threading.Thread(target=sleeper, name="sleeper", daemon=True).start()
        taken.wait(10)
        with LOCK:
            pass
"""


@pytest.mark.parametrize("method", ["signal", "thread"])
def test_hang_report_under_pytest_timeout(pytester: pytest.Pytester, method: str) -> None:
    pytester.makepyfile(test_hang=HANG.replace("RELEASE_AFTER", "60"))
    result = run(pytester, "-p", "timeout", "--timeout=2", f"--timeout-method={method}")
    if method == "signal":
        result.assert_outcomes(failed=1)
    else:  # the thread method ends the process after its dumps
        assert result.ret == 1
    out = result.stdout.str()
    assert "thread pytest_timeout" not in out  # the thread that reports is not one that hangs
    report = out.index("lockcheck: hang report (pytest-timeout: test_hang.py::test_hangs timed out)")
    assert report < out.index("Stack of sleeper")  # before pytest-timeout's stack dumps
    # the main thread waits for LOCK, and the report names its holder and where it took it
    assert "BLOCKED: waits for test_hang.LOCK@0x" in out
    assert ", held by sleeper/" in out
    assert "thread sleeper (ident" in out
    assert "holds test_hang.LOCK@" in out and "taken at: test_hang.py:9, held for " in out
    assert "wait-for cycle: none among the tracked locks" in out


def test_hang_report_before_faulthandler_dump(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hang=HANG.replace("RELEASE_AFTER", "3"))
    pytester.makeini(INI + "    faulthandler_timeout = 2\n")
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--lockcheck", timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    err = result.stderr.str()
    report = err.index("lockcheck: hang report (faulthandler_timeout: test_hang.py::test_hangs ran 2s)")
    assert report < err.index("Timeout (0:00:02)!")
    assert ", held by sleeper/" in err


def test_own_hang_report(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hang=HANG.replace("RELEASE_AFTER", "2"))
    result = run(pytester, "--lockcheck-hang-report=0.5")
    result.assert_outcomes(passed=1)  # reported, not ended
    err = result.stderr.str()
    report = err.index("lockcheck: hang report (--lockcheck-hang-report=0.5: test_hang.py::test_hangs)")
    assert report < err.index("(most recent call first)")  # then the stacks
    assert ", held by sleeper/" in err


def test_rlock_cycle_is_certain_at_once() -> None:
    """RLocks are released by their holder only: a cycle of them raises without the grace wait."""
    errors: list[BaseException] = []
    with pylocks.instrument(grace=30.0) as rec:  # a grace wait would fail this test's join below
        a = threading.RLock()
        b = threading.RLock()
        a_held, b_held = threading.Event(), threading.Event()

        def worker() -> None:
            with b:
                b_held.set()
                a_held.wait(10)
                try:
                    with a:
                        pass
                except lockcheck.DeadlockError as err:
                    errors.append(err)

        thread = threading.Thread(target=worker)
        thread.start()
        with a:
            a_held.set()
            b_held.wait(10)
            try:
                with b:
                    pass
            except lockcheck.DeadlockError as err:
                errors.append(err)
        thread.join(10)
    assert not thread.is_alive()
    assert len(errors) == 1
    assert [f.kind for f, _ in rec.findings].count("deadlock") == 1
    finding = errors[0].finding
    assert finding is not None and len(finding.details["contexts"]) == 2


# -- the README's examples are real output -----------------------------------------------

README = Path(__file__).resolve().parent.parent / "docs" / "pytest-plugin.md"
SECTION = "## Deadlocks as they happen, and hang reports"
#: what changes from run to run: waiting times, thread idents, lock instance numbers (how many
#: locks were made before depends on the plugins installed)
# (a thread's task number, `reloader/2`, counts the threads seen first: one that a garbage
# collection or pytest's own timer made first moves it, so it is shown but not compared)
_VARYING = [(re.compile(r"\b\d+\.\d\ds\b"), "N.NNs"), (re.compile(r"\b\d{6,}\b"), "IDENT"),
            (re.compile(r"\b0x[0-9a-f]+\b"), "0xN"), (re.compile(r"\b([A-Za-z_]\w*)/\d+\b"), r"\1/N")]


def _normal(line: str) -> str:
    for pattern, stands in _VARYING:
        line = pattern.sub(stands, line)
    return line.rstrip()


def readme_examples() -> list[tuple[str, str, list[str], list[str]]]:
    """(file name, its code, the command's arguments, the output lines shown) of each example."""
    text = README.read_text()
    section = text[text.index(SECTION):]
    section = section.split("\n## ", 1)[0]  # up to the next section, or the end of the page
    pairs = re.findall(r"^```py\n(.*?)^```\n\n```text\n(.*?)^```", section, re.M | re.S)
    examples = []
    for code, shown in pairs:
        name = code.splitlines()[0].lstrip("# ").strip()
        command, *lines = shown.splitlines()
        assert command.startswith("$ pytest ")
        examples.append((name, code, command.split()[2:-1], [line for line in lines if line != "..."]))
    return examples


@pytest.mark.parametrize("example", readme_examples(), ids=lambda example: example[0])
def test_readme_example_prints_what_it_shows(example: tuple, tmp_path: Path) -> None:
    name, code, args, shown = example
    (tmp_path / name).write_text(code)
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args, name],
                          capture_output=True, text=True, timeout=TIMEOUT, cwd=tmp_path,
                          env={**os.environ, "COLUMNS": "80"})
    assert proc.returncode == 1, proc.stdout  # each example's test fails: a deadlock, or a timeout
    out = [_normal(line) for line in proc.stdout.splitlines()]
    at = 0
    for line in shown:  # each shown line, in order, in what the example prints
        want = _normal(line)
        assert want in out[at:], f"{name}: not printed (after line {at}): {want!r}\n{proc.stdout}"
        at = out.index(want, at) + 1


def test_readme_shows_every_case() -> None:
    assert [name for name, *_ in readme_examples()] == [
        "test_transfer.py", "test_tasks.py", "test_loop.py", "test_hang.py"]


def test_hang_report_names_asyncio_tasks() -> None:
    """Tasks are listed with the asyncio locks they hold and the one they wait for."""
    from lockcheck.python.hang import hang_report

    async def main(rec: object) -> str:
        lock = asyncio.Lock()
        taken = asyncio.Event()

        async def holder() -> None:
            async with lock:
                taken.set()
                await asyncio.sleep(10)

        async def waiter() -> None:
            async with lock:
                pass

        tasks = [asyncio.create_task(holder(), name="holder"), asyncio.create_task(waiter(), name="waiter")]
        await taken.wait()
        await asyncio.sleep(0.05)
        report = hang_report(rec, "asked")  # type: ignore[arg-type]
        for task in tasks:
            task.cancel()
        await asyncio.gather(*tasks, return_exceptions=True)
        return report

    with pylocks.instrument() as rec:
        report = asyncio.run(main(rec))
    assert "lockcheck: hang report (asked)" in report, report
    # one block per context: its line, then its indented lines
    blocks = {block.split(":")[0].strip(): block for block in re.split(r"\n(?=  \S)", report)}
    holder, waiter = blocks["asyncio task holder"], blocks["asyncio task waiter"]
    assert holder.startswith("  asyncio task holder: holder/a") and waiter.startswith("  asyncio task waiter: waiter/a")
    assert re.search(r"\n    holds \S+@0x[0-9a-f]+, taken at: \S+:\d+, held for \d", holder), report
    assert re.search(r"\n    BLOCKED: waits for \S+@0x[0-9a-f]+, at: ", waiter), report
    assert ", held by holder/a" in report
