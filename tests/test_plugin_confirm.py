"""`--lockcheck-confirm` (`lockcheck.python.confirm_run`): a lock-order cycle made by the threads
of one test is replayed under the directed scheduler until it deadlocks (confirmed) or the
runs end (potential, with why); a cycle across tests gets a reproducer sketch.

Every suite runs in a subprocess with a timeout: a confirmed deadlock is broken by
`DeadlockError`, and none of them can hang this suite.
"""

from __future__ import annotations

import re
import sys
import time

import pytest

pytest_plugins = ["pytester"]

TIMEOUT = 120

#: two threads take A -> B and B -> A; the second sleeps first and the test joins them in
#: turn, so the plain run never deadlocks (and lockdep reports the inversion)
HIDDEN = """
    import threading
    import time

    def test_ab_ba():
        A = threading.Lock()
        B = threading.Lock()

        def one():
            with A:
                with B:
                    pass

        def two():
            time.sleep(0.2)
            with B:
                with A:
                    pass

        t1 = threading.Thread(target=one, name="one")
        t2 = threading.Thread(target=two, name="two")
        t1.start()
        t2.start()
        t1.join()
        t2.join()
"""

#: the same inversion, but the second half waits for the first to end: it cannot deadlock
ORDERED = """
    import threading

    def test_ordered():
        A = threading.Lock()
        B = threading.Lock()
        done = threading.Event()

        def one():
            with A:
                with B:
                    pass
            done.set()

        def two():
            done.wait(10)
            with B:
                with A:
                    pass

        t1 = threading.Thread(target=one, name="one")
        t2 = threading.Thread(target=two, name="two")
        t2.start()
        t1.start()
        t1.join()
        t2.join()
"""

PLAIN = """
    import threading

    RUNS = []

    def test_plain():
        lock = threading.Lock()
        with lock:
            RUNS.append(1)
        print("ran", len(RUNS))
"""


def run(pytester: pytest.Pytester, *args: str) -> pytest.RunResult:
    return pytester.runpytest_subprocess("-p", "no:cacheprovider", "--lockcheck", "--lockcheck-confirm", *args,
                                         timeout=TIMEOUT)


def test_hidden_deadlock_is_confirmed_with_its_interleaving(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hidden=HIDDEN)
    started = time.monotonic()
    result = run(pytester, "-rA")
    took = time.monotonic() - started
    out = result.stdout.str()
    assert took < 30, took
    result.assert_outcomes(failed=1)  # the original outcome: failed by the circular dependency
    assert "lockcheck: CONFIRMED: " in out, out
    assert "re-run 1 deadlocked" in out
    # the interleaving: each thread, what it held, where it waited
    assert re.search(r"one/\d+ holding test_ab_ba\.A, about to take test_ab_ba\.B at test_hidden\.py:10", out), out
    assert re.search(r"two/\d+ holding test_ab_ba\.B, about to take test_ab_ba\.A at test_hidden\.py:16", out), out
    assert re.search(r"one/\d+ holds test_ab_ba\.A@\w+ \(taken at test_hidden\.py:9\), "
                     r"waits for test_ab_ba\.B@\w+ at test_hidden\.py:10", out), out
    # the verdict is in the test's own failure text, and in the summary's section
    failure = out.split("FAILURES")[1].split("= lockcheck confirm =")[0]
    assert "CONFIRMED" in failure
    # the re-runs were not logged as tests, nor their deadlock filed as another finding
    assert "1 finding (1 circular-dependency)" in out
    assert "deadlock:" not in out


def test_ordered_halves_stay_potential(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_ordered=ORDERED)
    result = run(pytester, "--lockcheck-confirm-runs=2")
    out = result.stdout.str()
    result.assert_outcomes(failed=1)
    assert "lockcheck: POTENTIAL: " in out, out
    assert "CONFIRMED" not in out
    assert "no deadlock in 2 re-runs" in out
    assert "something else orders them" in out, out


def test_test_without_findings_is_not_rerun(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_plain=PLAIN)
    result = run(pytester, "-s")
    result.assert_outcomes(passed=1)
    assert result.stdout.str().count("ran 1") == 1
    assert "ran 2" not in result.stdout.str()
    assert "lockcheck confirm" not in result.stdout.str()


ACROSS = """
    import threading

    A = threading.Lock()
    B = threading.Lock()


    def take_ab():
        with A:
            with B:
                pass


    def take_ba():
        with B:
            with A:
                pass


    def test_first():
        take_ab()


    def test_second():
        take_ba()
"""

OPTED_OUT = """
    import threading

    import pytest


    @pytest.mark.lockcheck(confirm=False)
    def test_opted_out():
        A = threading.Lock()
        B = threading.Lock()
        with A:
            with B:
                pass

        def other():
            with B:
                with A:
                    pass

        thread = threading.Thread(target=other)
        thread.start()
        thread.join()
"""

#: what a report (the JSON report) reads: the plugin's one mapping, Finding.key() -> verdict
VERDICTS = """
    def pytest_terminal_summary(config):
        plugin = config.pluginmanager.get_plugin("lockcheck-session")
        rec = plugin.recorder
        for finding, ctx in rec.findings:
            print("VERDICT", ctx, plugin.verdicts.get(finding.key(), "absent"))
"""


def test_cycle_across_tests_says_who_made_each_half_and_sketches_a_reproducer(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_across=ACROSS)
    result = run(pytester)
    out = result.stdout.str()
    result.assert_outcomes(passed=1, failed=1)
    assert "its edges come from different tests, so no one re-run can replay it" in out, out
    assert "at test_across.py:9 by MainThread/1 in test_across.py::test_first" in out
    assert "at test_across.py:15 by MainThread/1 in test_across.py::test_second" in out
    assert "reproducer sketch (a sketch, not a tested program" in out
    assert "take_ab(...)" in out and "take_ba(...)" in out
    assert "CONFIRMED" not in out


@pytest.mark.slow
def test_verdicts_mapping_and_marker_opt_out(pytester: pytest.Pytester) -> None:
    pytester.makeconftest(VERDICTS)
    pytester.makepyfile(test_hidden=HIDDEN, test_ordered=ORDERED, test_optout=OPTED_OUT, test_across=ACROSS)
    result = run(pytester, "-s", "-p", "no:randomly", "--lockcheck-confirm-runs=1")
    out = result.stdout.str()
    result.assert_outcomes(passed=1, failed=4)
    verdicts = dict(re.findall(r"^VERDICT (\S+) (\S+)$", out, re.M))
    assert verdicts == {
        "test_hidden.py::test_ab_ba": "True",
        "test_ordered.py::test_ordered": "False",
        "test_optout.py::test_opted_out": "absent",  # not replayed: @pytest.mark.lockcheck(confirm=False)
        "test_across.py::test_second": "None",  # not replayable: edges of two tests
    }, out
    assert "test_opted_out: " not in out.split("= lockcheck confirm =")[1].split("= lockcheck =")[0]


def test_off_by_default(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_hidden=HIDDEN)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--lockcheck", timeout=TIMEOUT)
    result.assert_outcomes(failed=1)
    assert "lockcheck confirm" not in result.stdout.str()


API = """
    import threading
    import time

    import lockcheck


    def hidden():
        A = threading.Lock()
        B = threading.Lock()

        def one():
            with A:
                with B:
                    pass

        def two():
            time.sleep(0.2)
            with B:
                with A:
                    pass

        threads = [threading.Thread(target=one), threading.Thread(target=two)]
        for thread in threads:
            thread.start()
        for thread in threads:
            thread.join()


    outcome = lockcheck.confirm(hidden, cycle=["A", "B"])
    print("VERDICT", outcome.confirmed)
    print(outcome.text)
    print("NONE", lockcheck.confirm(lambda: None).confirmed)
"""


def test_confirm_api_outside_pytest(pytester: pytest.Pytester) -> None:
    script = pytester.makepyfile(api=API)
    result = pytester.run(sys.executable, str(script), timeout=TIMEOUT)
    out = result.stdout.str()
    assert result.ret == 0, out + result.stderr.str()
    assert "VERDICT True" in out, out
    assert "then the cycle of waits:" in out
    assert "NONE None" in out


@pytest.mark.slow
def test_the_verdict_is_in_the_json_report(pytester: pytest.Pytester) -> None:
    # issue 25: "both in the JSON report": confirmed true for the hidden cycle, false for the
    # ordered one (replayed, no deadlock), null without --lockcheck-confirm
    import json

    pytester.makepyfile(test_hidden=HIDDEN, test_ordered=ORDERED)
    result = run(pytester, "--lockcheck-confirm-runs=2", "--lockcheck-report=report.json")
    result.assert_outcomes(failed=2)
    doc = json.loads((pytester.path / "report.json").read_text())
    by_test = {tuple(f["tests"])[0].split("::")[0]: f["confirmed"] for f in doc["findings"]}
    assert by_test == {"test_hidden.py": True, "test_ordered.py": False}, doc["findings"]
    plain = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--lockcheck", "--lockcheck-report=plain.json",
                                          timeout=TIMEOUT)
    plain.assert_outcomes(failed=2)
    assert [f["confirmed"] for f in json.loads((pytester.path / "plain.json").read_text())["findings"]] == [None, None]


def test_under_xdist_the_controller_prints_the_verdicts(pytester: pytest.Pytester) -> None:
    # a worker's reports are sent before its re-runs: the verdicts reach the controller with the
    # worker's output at the end, for the `lockcheck confirm` section and the JSON report
    import json

    pytester.makepyfile(test_hidden=HIDDEN, test_ordered=ORDERED)
    result = run(pytester, "-n", "2", "--lockcheck-confirm-runs=2", "--lockcheck-report=report.json")
    result.assert_outcomes(failed=2)
    section = result.stdout.str().split("= lockcheck confirm =")[1]
    assert "lockcheck: CONFIRMED: test_ab_ba.A -> test_ab_ba.B in test_hidden.py::test_ab_ba" in section
    assert "lockcheck: POTENTIAL: test_ordered.A -> test_ordered.B in test_ordered.py::test_ordered" in section
    doc = json.loads((pytester.path / "report.json").read_text())
    assert sorted(f["confirmed"] for f in doc["findings"]) == [False, True]
