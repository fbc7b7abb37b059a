"""The capture fast path (`lockcheck.engine.fast_capture`) over JSON Lines against the plain pipeline:
identical in every way (test_capturepath holds it so over ftrace captures, and lends its outcome)."""

from __future__ import annotations

import json
import os

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lockcheck.engine import fast_capture as capturepath
from lockcheck.lockdep.checker import Checker
from lockcheck.readers import jsonl
from test_capturepath import _fields_batches, _irq_state, _run_outcome

# -- JSON Lines ---------------------------------------------------------------------------

JSON_TASKS = ["T1", "T2", "kworker/0:1/7"]
JSON_LOCKS = [("A", None), ("B", "0x1"), ("A", "0x2"), ("&mm->lock", None)]


@st.composite
def json_line(draw, held: dict) -> str:
    """Mostly common lock lines (acquire, LIFO release), some irq ops, uncommon keys and bad lines."""
    task = draw(st.sampled_from(JSON_TASKS))
    stack = held.setdefault(task, [])
    kind = draw(st.sampled_from(["acquire"] * 5 + ["release"] * 5 + ["acquired", "other"]))
    obj: dict = {"task": task}
    if kind == "acquire" or (kind == "release" and not stack):
        lock, instance = draw(st.sampled_from(JSON_LOCKS))
        stack.append((lock, instance))
        obj.update(op="acquire", lock=lock)
        if instance is not None:
            obj["instance"] = instance
        mode = draw(st.sampled_from([None, None, "write", "read", "rread"]))
        if mode is not None:
            obj["mode"] = mode
        if draw(st.integers(0, 6)) == 0:
            obj[draw(st.sampled_from(["try", "nocheck"]))] = True
    elif kind in ("release", "acquired"):
        lock, instance = stack.pop() if kind == "release" else draw(st.sampled_from(JSON_LOCKS))
        obj.update(op=kind, lock=lock)
        if instance is not None:
            obj["instance"] = instance
    else:
        what = draw(st.sampled_from(["hardirq-enter", "hardirq-exit", "irqs-off", "irqs-on", "softirq-enter",
                                     "softirq-exit", "softirqs-off", "softirqs-on", "exit", "free",
                                     "blank", "comment", "bad", "escape", "unknown-key"]))
        if what == "blank":
            return ""
        if what == "comment":
            return "# a comment"
        if what == "bad" and draw(st.integers(0, 3)) == 0:
            return '{"task": "T1", "op": "acquire", "lock": NaN}'
        if what == "escape":
            return '{"task": "T\\u0031", "op": "acquire", "lock": "A"}'
        if what == "unknown-key":
            return '{"task": "T1", "op": "acquire", "lock": "A", "colour": 1}' if draw(st.integers(0, 3)) == 0 \
                else '{"task": "T1", "op": "acquire", "lock": "A", "subclass": 1}'
        obj["op"] = what if what != "bad" else "acquire"
        if what == "free":
            obj["lock"] = draw(st.sampled_from(JSON_LOCKS))[0]
            stack[:] = []
    for key, values in (("at", ["f+0x1/0x2"]), ("ts", [1.5, 2, 3.25]), ("cpu", [0, 1]), ("comm", ["bash"])):
        if draw(st.integers(0, 3)) == 0:
            obj[key] = draw(st.sampled_from(values))
    return json.dumps(obj, separators=draw(st.sampled_from([(", ", ": "), (",", ":")])))


@st.composite
def json_traces(draw) -> list[str]:
    held: dict = {}
    block = [draw(json_line(held)) for _ in range(draw(st.integers(0, 25)))]
    return block * draw(st.integers(1, 3)) + [draw(json_line(held)) for _ in range(draw(st.integers(0, 8)))]


def _json_outcome(lines: list[str], fast) -> dict:
    checker = Checker()
    checker.open_trace(False, contention=False)  # (`jsonl.CONTENTION`)
    if fast == "fields":
        events = capturepath.fields_events(checker, None, _fields_batches(jsonl.parse(lines, "gen.jsonl", fields=True)),
                                           None, "gen.jsonl")
    elif fast:
        parse = capturepath.parser(jsonl, jsonl, checker, None, None)
        assert parse is not None
        events = parse(lines, "gen.jsonl")
    else:
        events = jsonl.parse(lines, "gen.jsonl")
    return {
        **_run_outcome(checker, events),
        "tasks": {key: (task.chain_key, task.name, task.cpu, _irq_state(task)) for key, task in checker.tasks.items()},
    }


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("LOCKCHECK_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(json_traces())
@example(['{"task": "T1", "op": "acquire", "lock": "A"}', '{"task": "T1", "op": "acquire", "lock": "B", "ts": 2}',
          '{"task": "T1", "op": "release", "lock": "B", "cpu": 1}', '{"task": "T1", "op": "release", "lock": "A"}'] * 3)
def test_json_lines_fast_path_is_the_plain_path(lines) -> None:
    plain = _json_outcome(lines, False)
    assert _json_outcome(lines, True) == plain
    assert _json_outcome(lines, "fields") == plain


def test_json_lines_bad_line_keeps_its_place() -> None:
    good = ['{"task": "T1", "op": "acquire", "lock": "A"}', '{"task": "T1", "op": "release", "lock": "A"}'] * 3
    lines = good + ['{"task": "T1", "op": "acquire", "lock": "A", "mode": "reed"}'] + good
    fast = _json_outcome(lines, True)
    assert fast == _json_outcome(lines, False) == _json_outcome(lines, "fields")
    assert fast["error"] is not None and fast["error"].startswith("gen.jsonl:7:")
    assert fast["stats"].events == 6


def test_irq_state_changes_in_json_lines_keep_their_evidence() -> None:
    """An irq-state change read from JSON Lines is recorded with what a report would cite of it."""
    json_block = ['{"task": "T1", "op": "acquire", "lock": "A"}', '{"task": "T1", "op": "release", "lock": "A"}',
                  '{"task": "T1", "op": "irqs-off", "at": "f+0x1/0x2", "ts": 2.5, "comm": "bash"}',
                  '{"task": "T1", "op": "acquire", "lock": "A"}', '{"task": "T1", "op": "release", "lock": "A"}',
                  '{"task": "T1", "op": "irqs-on", "at": "g+0x3/0x4", "ts": 3.5, "cpu": 1}']
    plain = _json_outcome(json_block * 3, False)
    assert _json_outcome(json_block * 3, "fields") == plain
    recorded = dict(plain["tasks"]["T1"][3][6])
    assert (recorded["irqs-on"][1].at, recorded["irqs-on"][1].line) == ("g+0x3/0x4", 18)
