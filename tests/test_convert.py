"""`lockcheck convert`: the `.lt` it writes checks exactly as its inputs do.

Runs stay runs (`#lockcheck-run`, with the rules of the format they came
from), tasks keep their names, lost-events markers survive, and the
directive lines read back through both the grammar and the reader.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from lockcheck.commands.cli import main
from lockcheck.commands.convert import converted
from lockcheck.errors import TraceError
from lockcheck.events import LOST_EVENTS, RUN
from lockcheck.readers import read
from lockcheck.readers.lt import parse_line
from lockcheck.readers.lt_write import format_event

from testdata import CAPTURES, TRACES, timer_traces


def check(*args: str) -> tuple[int, dict]:
    out = io.StringIO()
    status = main(["check", "--format", "json", "--no-config", "--no-progress", *args], stdout=out,
                  stderr=io.StringIO())
    return status, json.loads(out.getvalue())


def verdict(doc: dict) -> list[tuple]:
    return [(f["kind"], f["lock"], f["held"], f["task"], tuple(f.get("cycle") or ())) for f in doc["findings"]]


def convert_to(tmp_path: Path, *inputs: Path, name: str = "out.lt") -> Path:
    out = tmp_path / name
    status = main(["convert", *map(str, inputs), "-o", str(out)], stdout=io.StringIO(), stderr=io.StringIO())
    assert status == 0
    return out


def test_two_files_stay_two_runs(tmp_path):
    a = tmp_path / "a.lt"
    a.write_text("T1 acquire A\n")  # still held when the file ends
    b = tmp_path / "b.lt"
    b.write_text("T1 acquire B\nT1 release B\n")
    assert check(str(a), str(b))[1]["stats"]["dependencies"] == 0
    out = convert_to(tmp_path, a, b)
    text = out.read_text()
    assert text.count("#lockcheck-run format=lt") == 2
    # merged into one run, T1 would hold A while taking B: a dependency nobody saw
    status, doc = check(str(out))
    assert status == 0 and doc["stats"]["dependencies"] == 0


def test_task_names_are_kept(tmp_path):
    text = converted([str(TRACES / "sample.ftrace")])
    tasks = {line.split()[0] for line in text.splitlines() if not line.startswith("#")}
    assert any(task.startswith("demo-helper") and task.endswith("102") and task != "102" for task in tasks), tasks
    status, doc = check(str(TRACES / "sample.ftrace"))
    assert status == 1
    [finding] = doc["findings"]
    assert finding["task"] in tasks


@pytest.mark.parametrize("name", ["abba.lt", "irq_unsafe_order.lt", "mm_take_all_locks.lt", "sample.ftrace",
                                  "sample.perf", "sample.jsonl"])
def test_a_converted_trace_checks_as_the_original(tmp_path, name):
    out = convert_to(tmp_path, TRACES / name)
    assert verdict(check(str(out))[1]) == verdict(check(str(TRACES / name))[1])


def test_all_shipped_traces_converted_together_check_as_the_directory(tmp_path):
    out = convert_to(tmp_path, TRACES)
    original, again = check(str(TRACES))[1], check(str(out))[1]
    assert verdict(again) == verdict(original) and len(original["findings"]) == 4
    assert again["stats"]["events"] == original["stats"]["events"]


@pytest.mark.slow
def test_a_converted_kernel_capture_checks_as_the_original(tmp_path):
    # a capture's rules (releases of locks taken before it began, the built-in no-check
    # rules of kernel captures) follow the run into the .lt file
    capture = CAPTURES / "clean-nohash" / "trace.ftrace.xz"
    out = convert_to(tmp_path, capture)
    original, again = check(str(capture))[1], check(str(out))[1]
    assert verdict(again) == verdict(original)
    assert again["stats"] == original["stats"]
    assert any("releases of locks never seen acquired" in note for note in again["notes"])


def test_perf_runs_keep_their_missing_irq_context(tmp_path):
    ftrace, perf = timer_traces(tmp_path, "kworker", 18)
    out = convert_to(tmp_path, ftrace, perf)
    assert "#lockcheck-run format=perf" in out.read_text()
    assert check(str(out))[0] == 0
    # without the run line the perf lines would be irqs-on process context: inconsistent
    plain = tmp_path / "plain.lt"
    plain.write_text("".join(line + "\n" for line in out.read_text().splitlines()
                             if not line.startswith("#lockcheck-run")))
    assert check(str(plain))[1]["findings"][0]["kind"] == "inconsistent-lock-state"


def test_lost_events_survive_conversion(tmp_path):
    ftrace = tmp_path / "lost.ftrace"
    ftrace.write_text("# tracer: nop\n#\n"
                      "            demo-101     [000] .....    10.001000: lock_acquire: 0xff01 &a->lock\n"
                      "CPU:0 [LOST 12 EVENTS]\n"
                      "            demo-101     [000] .....    10.002000: lock_acquire: 0xff02 &b->lock\n")
    text = converted([str(ftrace)])
    assert "#lockcheck-lost-events cpu=0" in text
    out = tmp_path / "lost.lt"
    out.write_text(text)
    assert check(str(out))[1]["stats"]["dependencies"] == check(str(ftrace))[1]["stats"]["dependencies"] == 0


# -- the directive lines ------------------------------------------------------------------
@pytest.mark.parametrize("line, fields", [
    ("#lockcheck-run", (RUN, None, None, False, True)),
    ("#lockcheck-run format=ftrace from=traces/x.ftrace", (RUN, "traces/x.ftrace", "ftrace", True, True)),
    ('#lockcheck-run from="a b.perf" format=perf', (RUN, "a b.perf", "perf", True, False)),
    ("  #lockcheck-run format=lt  ", (RUN, None, "lt", False, True)),
])
def test_run_lines(line, fields):
    ev = parse_line(line)
    assert (ev.op, ev.lock, ev.at, ev.trylock, ev.check) == fields
    assert parse_line(format_event(ev)) == ev


def test_lost_events_line():
    ev = parse_line("#lockcheck-lost-events cpu=3")
    assert (ev.op, ev.cpu) == (LOST_EVENTS, 3)
    assert format_event(ev) == "#lockcheck-lost-events cpu=3"


@pytest.mark.parametrize("line", ["#lockcheck-running x", "#lockcheck-trace v1", "# lockcheck-run"])
def test_lookalikes_are_comments(line):
    assert parse_line(line) is None


@pytest.mark.parametrize("line, col, message", [
    ("#lockcheck-run format=nope", 23, "unknown format 'nope'"),
    ("#lockcheck-run capture", 16, "unknown option 'capture'"),
    ("#lockcheck-run cpu=1", 16, "#lockcheck-run takes only 'format=' and 'from='"),
    ("#lockcheck-lost-events", 23, "missing 'cpu='"),
    ("#lockcheck-lost-events from=x", 24, "#lockcheck-lost-events takes only 'cpu=' and 'ts='"),
    ("T1 acquire A from=x", 14, "'from=' is only valid on #lockcheck-run"),
    ("#lockcheck-run format=lt format=lt", 26, "'format=' given twice"),
])
def test_bad_directives(line, col, message):
    with pytest.raises(TraceError) as info:
        parse_line(line, "t.lt", 4)
    assert (info.value.line, info.value.col) == (4, col)
    assert info.value.message.startswith(message)


def test_the_reader_yields_directives_between_events(tmp_path):
    path = tmp_path / "t.lt"
    path.write_text("#lockcheck-trace v1\n#lockcheck-run format=perf from=p\nT1 acquire A\n# note\n"
                    "#lockcheck-lost-events cpu=1\nT1 release A\n")
    assert [(ev.op, ev.line) for ev in read(str(path))] == [(RUN, 2), ("acquire", 3), (LOST_EVENTS, 5),
                                                             ("release", 6)]


def test_a_json_lines_acquisition_keeps_its_options():
    """A JSON Lines event's op is the decoded string, not the interned constant: format_event wrote
    its acquisition without mode, try, subclass, nest and nocheck (`is ACQUIRE`)."""
    from lockcheck.readers import jsonl

    line = ('{"task": "T", "op": "acquire", "lock": "B", "mode": "read", "try": true, "subclass": 2, '
            '"nest": {"lock": "A", "instance": "0x1"}, "nocheck": true}')
    event = next(jsonl.parse([line], "t.jsonl"))
    written = format_event(event)
    assert written == "T acquire B read try subclass=2 nest=A@0x1 nocheck"
    assert parse_line(written, "t.jsonl", 1) == event
