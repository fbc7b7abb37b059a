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
    assert findings[0]["details"]["test"] == "test_suite.py::test_ba"  # the test that closed the cycle
    assert findings[0]["details"]["stack"][-1]["function"] == "test_ba"  # and where it was
    assert "MainThread/1 [test_suite.py::test_ba]" in text.stdout
    assert " in test_ba" in text.stdout.partition("stack backtrace:")[2]
    assert "logging._lock" not in text.stdout  # the stdlib's inversion: accepted, as by the plugin
    assert "1 suppressed" in text.stdout


def test_clean_session_replays_clean(pytester: pytest.Pytester) -> None:
    result, trace = record(pytester, CLEAN)
    result.assert_outcomes(passed=2)
    result.stdout.fnmatch_lines(["lockcheck: 0 findings, 1 suppressed in *"])
    replay = check(trace)
    assert replay.returncode == 0, replay.stdout + replay.stderr
    assert "no problems found" in replay.stdout and "1 suppressed" in replay.stdout


def _abba(task: str, a: str, b: str) -> list[str]:
    return [f"{task} acquire {a}", f"{task} acquire {b}", f"{task} release {b}", f"{task} release {a}"]


def test_a_tests_own_rule_applies_to_that_test_only(tmp_path) -> None:
    """`#lockcheck-plugin suppress-test` (the marker's suppress=) accepts the findings made in its test."""
    lines = ["#lockcheck-trace v1", "#lockcheck-plugin v1",
             "# context t.py::test_first", *_abba("T1", "A", "B"),
             "# context t.py::test_accepted",
             "#lockcheck-plugin suppress-test circular-dependency A B", *_abba("T1", "B", "A"),
             "#lockcheck-plugin no-context",
             "# context t.py::test_reported", *_abba("T1", "C", "D"), *_abba("T1", "D", "C")]
    trace = tmp_path / "rules.lt"
    trace.write_text("\n".join(lines) + "\n")
    result = check(str(trace))
    assert result.returncode == 1, result.stderr
    assert "1 finding (1 circular-dependency)" in result.stdout and "1 suppressed" in result.stdout
    assert "T1 [t.py::test_reported]" in result.stdout
    assert "(A)" not in result.stdout


def test_a_plugin_trace_deeper_than_lockdeps_limit_is_no_finding(tmp_path) -> None:
    """The plugin holds as many locks as Python does (its summary notes a depth past lockdep's
    48): the replay does not report it either -- but a trace not recorded by the plugin does."""
    held = [f"T1 acquire L{i}" for i in range(60)] + [f"T1 release L{i}" for i in reversed(range(60))]
    plugin = tmp_path / "deep.lt"
    plugin.write_text("\n".join(["#lockcheck-trace v1", "#lockcheck-plugin v1", *held]) + "\n")
    other = tmp_path / "other.lt"
    other.write_text("\n".join(["#lockcheck-trace v1", *held]) + "\n")
    assert check(str(plugin)).returncode == 0
    assert check(str(other)).returncode == 1


DECIDED = """
    import threading

    import pytest

    R = threading.RLock()
    S = threading.Lock()
    T = threading.Lock()


    def test_thread_ended_holding_an_rlock():
        worker = threading.Thread(target=R.acquire)
        worker.start()
        worker.join()
        with pytest.raises(Exception):
            R.acquire()  # never free again: held-at-exit (the plugin raises rather than hang)


    @pytest.mark.lockcheck(order=["test_suite.S", "test_suite.T"])
    def test_against_its_declared_order():
        with T:
            with S:
                pass


    def test_same_order_elsewhere_is_fine():
        with T:
            with S:
                pass
"""


@pytest.mark.slow
def test_what_the_plugin_decided_beyond_the_events_is_replayed(pytester: pytest.Pytester) -> None:
    """A thread that ended holding an RLock (held-at-exit) and a test's own `order=`: the events
    cannot say either (no thread end, no order), so the plugin records the finding it made and
    the replay reports it at the event that made it, with its test -- the plugin's verdict."""
    result, trace = record(pytester, DECIDED)
    result.assert_outcomes(passed=1, failed=2)
    result.stdout.fnmatch_lines(["lockcheck: 2 findings (1 held-at-exit, 1 order-violation) in *"])
    replay = check(trace, "--format", "json")
    assert replay.returncode == 1, replay.stderr
    found = sorted((f["kind"], f["lock"], f["details"].get("test")) for f in json.loads(replay.stdout)["findings"])
    assert found == [("held-at-exit", "test_suite.R", "test_suite.py::test_thread_ended_holding_an_rlock"),
                     ("order-violation", "test_suite.S", "test_suite.py::test_against_its_declared_order")]
    text = check(trace)
    assert "1 lock held by Thread-1" in text.stdout and "test_suite.S --> test_suite.T" in text.stdout
    assert check(trace, "--jobs", "2").returncode == 1  # one process checks it (the records are its)


def test_a_recorded_finding_is_suppressed_by_its_tests_rule(tmp_path) -> None:
    """A `finding` record is a finding of its line: the plugin's rules apply to it as to any."""
    record_line = ('#lockcheck-plugin finding {"kind":"held-at-exit","task":"T2","lock":"R",'
                   '"details":{"task_exit":true}}')
    lines = ["#lockcheck-trace v1", "#lockcheck-plugin v1", "# context t.py::test_a",
             "#lockcheck-plugin suppress-test held-at-exit R", "T1 acquire R", "T2 acquire R", record_line,
             "# context t.py::test_b", "T3 acquire Q", record_line.replace('"R"', '"Q"')]
    trace = tmp_path / "decided.lt"
    trace.write_text("\n".join(lines) + "\n")
    result = check(str(trace), "--format", "json")
    doc = json.loads(result.stdout)
    assert [(f["kind"], f["lock"], f["location"]) for f in doc["findings"]] == [
        ("held-at-exit", "Q", f"{trace}:9")]
    assert result.returncode == 1


@pytest.mark.parametrize("record", [
    '{"kind":"bogus-kind","task":"T/1"}',                     # no kind lockcheck has
    '{"kind":"held-at-exit","task":"T/1","held":{"q":1}}',    # a field of the wrong type
    '{"kind":["held-at-exit"]}',                              # an unhashable kind
    '["held-at-exit"]',                                       # not a record at all
])
def test_a_damaged_finding_record_is_no_finding(tmp_path, record: str) -> None:
    trace = tmp_path / "damaged.lt"
    trace.write_text("#lockcheck-trace v1\n#lockcheck-plugin v1\nT/1 acquire A@1\n"
                     f"#lockcheck-plugin finding {record}\nT/1 release A@1\n")
    for fmt in ("text", "json", "sarif"):
        result = check(str(trace), "--format", fmt)
        assert result.returncode == 0, result.stderr
        assert "internal error" not in result.stderr


@pytest.mark.parametrize("first", [False, True])
def test_recorded_findings_come_in_trace_order(tmp_path, first: bool) -> None:
    """A finding the plugin recorded after line 3 (the event that made it) comes before the pass's cycle at line 9, and
    `--first` keeps it (the kernel's first report is the first one made)."""
    trace = tmp_path / "ordered.lt"
    trace.write_text("\n".join([
        "#lockcheck-trace v1", "#lockcheck-plugin v1", "T/1 acquire X@1",
        '#lockcheck-plugin finding {"kind":"held-at-exit","lock":"Q","task":"T/2"}',
        "T/1 acquire Y@1", "T/1 release Y@1", "T/1 release X@1", "T/1 acquire Y@1", "T/1 acquire X@1",
        "T/1 release X@1", "T/1 release Y@1"]) + "\n")
    result = check(str(trace), "--format", "json", *(["--first"] if first else []))
    found = [(f["kind"], f["location"].rpartition(":")[2]) for f in json.loads(result.stdout)["findings"]]
    assert found == [("held-at-exit", "3")] + ([] if first else [("circular-dependency", "9")])


@pytest.mark.slow
@pytest.mark.parametrize("compress", [False, True])
def test_a_plugin_trace_on_standard_input_is_replayed_as_the_file(tmp_path, compress: bool) -> None:
    """Standard input is read once: a plugin trace there is kept whole and its plugin lines read
    first, as a file's are -- its test's rule, its forked child, its recorded finding -- and its
    findings name `<stdin>`; any other input streams on as before."""
    import gzip

    lines = ["#lockcheck-trace v1", "#lockcheck-plugin v1", "# context t.py::test_a",
             "#lockcheck-plugin suppress-test circular-dependency C D", *_abba("T1", "C", "D"), *_abba("T1", "D", "C"),
             "# context t.py::test_b", *_abba("T1", "A", "B"),
             "# forked child: pid9", "#lockcheck-plugin fork 9 1 9", "# context t.py::test_b",
             *_abba("pid9:T1", "B", "A"), "pid9:T1 acquire R",
             '#lockcheck-plugin finding {"kind":"held-at-exit","task":"pid9:T1","lock":"R","details":{"task_exit":true}}']
    text = "\n".join(lines) + "\n"
    trace = tmp_path / "stdin.lt"
    trace.write_text(text)
    data = gzip.compress(text.encode()) if compress else text.encode()
    piped = subprocess.run([sys.executable, "-m", "lockcheck", "check", "--no-config", "--format", "json", "-"],
                           input=data, check=False, capture_output=True, timeout=TIMEOUT)
    from_file = check(str(trace), "--format", "json")
    assert piped.returncode == from_file.returncode == 1, piped.stderr
    doc, expected = json.loads(piped.stdout), json.loads(from_file.stdout)
    assert [(f["kind"], f["location"], f["details"].get("test")) for f in doc["findings"]] == [
        ("held-at-exit", "<stdin>:25", "t.py::test_b")]
    assert [(f["kind"], f["details"].get("test")) for f in expected["findings"]] == [("held-at-exit", "t.py::test_b")]
    as_text = subprocess.run([sys.executable, "-m", "lockcheck", "check", "--no-config", "-"],
                             input=data, check=False, capture_output=True, timeout=TIMEOUT)
    assert b"1 finding (1 held-at-exit)" in as_text.stdout and b"1 suppressed" in as_text.stdout  # test_a's rule
    plain = subprocess.run([sys.executable, "-m", "lockcheck", "check", "--no-config", "-"],
                           input="\n".join(["#lockcheck-trace v1", *_abba("T1", "A", "B"), *_abba("T1", "B", "A")]),
                           check=False, capture_output=True, text=True, timeout=TIMEOUT)
    assert plain.returncode == 1 and "1 finding (1 circular-dependency)" in plain.stdout


@pytest.mark.parametrize("whole", [False, True], ids=["piecemeal", "head-is-all"])
@pytest.mark.parametrize("plugin", [False, True])
def test_a_compressed_standard_input_is_spooled_only_when_it_is_a_plugin_trace(monkeypatch, plugin: bool,
                                                                               whole: bool) -> None:
    """Its second line is read from the decompressed head; any other compressed input streams on,
    every byte given back, with nothing written to a temporary file."""
    import gzip
    import io

    from lockcheck.commands import plugin_stdin

    text = ("#lockcheck-trace v1\n" + ("#lockcheck-plugin v1\n" if plugin else "") +
            "".join(f"T{n % 3} acquire L{n % 7}\nT{n % 3} release L{n % 7}\n" for n in range(20000)))
    data = gzip.compress(text.encode(), 6)
    spooled = []
    real = plugin_stdin.tempfile.TemporaryFile
    monkeypatch.setattr(plugin_stdin.tempfile, "TemporaryFile", lambda *a, **k: spooled.append(1) or real(*a, **k))
    # a pipe hands over a piece at a time; a redirected file may hand over all of it at once, so
    # the head read first may hold bytes the decompressor has not taken yet
    raw = io.BytesIO(data) if whole else io.BufferedReader(io.BytesIO(data), buffer_size=4096)
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(raw))
    meta = plugin_stdin.stdin_meta()
    assert (meta is not None, bool(spooled)) == (plugin, plugin)
    import sys

    assert gzip.decompress(sys.stdin.buffer.read()).decode() == text  # every byte given back
