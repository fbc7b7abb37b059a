"""Parsing in a worker process changes the speed, never the result."""

from __future__ import annotations

import io
import json

import pytest

from lockcheck.commands.cli import main
from lockcheck.engine import capture_filter
from lockcheck.readers import parallel

from testdata import CAPTURES

CAPTURE = CAPTURES / "clean"


def run(args: list[str]) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--format", "json", "--no-progress", "--no-config", *args], stdout=out, stderr=err)
    return status, json.loads(out.getvalue()) if out.getvalue() else {}, err.getvalue()


@pytest.fixture
def always_parallel(monkeypatch):
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.delenv("LOCKCHECK_JOBS", raising=False)


def both(monkeypatch, args: list[str]) -> tuple[tuple, tuple]:
    monkeypatch.setenv("LOCKCHECK_JOBS", "1")
    alone = run(args)
    monkeypatch.delenv("LOCKCHECK_JOBS")
    return alone, run(args)


def test_same_findings_stats_and_notes(tmp_path, monkeypatch, always_parallel):
    trace = tmp_path / "abba.lt"
    trace.write_text("".join(f"T{i} acquire {a} at=f.c:{i}\nT{i} acquire {b}\nT{i} release {b}\nT{i} release {a}\n"
                             for i, (a, b) in enumerate(["AB", "BC", "CA"], 1)) * 50)
    assert parallel.worth_it(str(trace))
    alone, forked = both(monkeypatch, [str(trace)])
    assert alone == forked
    assert forked[1]["findings"][0]["kind"] == "circular-dependency"


@pytest.mark.slow
@pytest.mark.parametrize("compiled_filter", [False, True])
def test_capture_with_annotations_gives_the_same_result(monkeypatch, always_parallel, compiled_filter):
    """A reader process for a capture only where the compiled capture filter does not run (it is
    cheaper in one process); the same result either way."""
    if compiled_filter:
        if not capture_filter.compiled():
            pytest.skip("the compiled capture filter is not built")

        def no_worker(*args, **kwargs):
            raise AssertionError("a capture read in a second process though the compiled filter runs")

        monkeypatch.setattr(parallel, "read_batches_in_worker", no_worker)
    else:
        monkeypatch.setattr(capture_filter, "_compiled", lambda: None)
        started = []
        worker = parallel.read_batches_in_worker

        def counted(*args, **kwargs):
            started.append(args[0])
            return worker(*args, **kwargs)

        monkeypatch.setattr(parallel, "read_batches_in_worker", counted)
    args = ["--lockdep-state", str(CAPTURE), str(CAPTURE / "trace.ftrace.xz")]
    alone, forked = both(monkeypatch, args)
    if not compiled_filter:
        assert started == [str(CAPTURE / "trace.ftrace.xz")]  # (the forked run's, not the one alone)
    assert alone == forked
    status, doc, _ = forked
    assert status == 0 and doc["findings"] == []
    assert any("given subclass 1 from /proc/lockdep_chains" in note for note in doc["notes"])
    assert any("skipped 446 lines of other events" in note for note in doc["notes"])


def test_errors_after_events_arrive_in_order(tmp_path, monkeypatch, always_parallel):
    trace = tmp_path / "bad.lt"
    trace.write_text("T1 acquire A\nT1 release A\nT1 release A\n" + "T1 acquire B\nT1 release B\n" * 3000 + "T1 zap\n")
    alone, forked = both(monkeypatch, [str(trace)])
    assert alone == forked
    status, doc, err = forked
    assert status == 2 and [f["kind"] for f in doc["findings"]] == ["unlock-imbalance"]
    assert err.strip().startswith(f"{trace}:6004:")


def test_small_files_and_stdin_stay_in_process(tmp_path):
    small = tmp_path / "s.lt"
    small.write_text("T1 acquire A\n")
    assert not parallel.worth_it(str(small))
    assert not parallel.worth_it("-")
