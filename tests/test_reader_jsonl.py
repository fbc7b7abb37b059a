"""The JSON Lines reader: fields, errors with columns, a round trip."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockcheck.errors import TraceError
from lockcheck.events import ACQUIRE, ALL_OPS, LOCK_OPS, MODE_NAMES, MORE_LOCK_OPS, MORE_PLAIN_OPS, READ, RREAD, WRITE, Event
from lockcheck.readers import jsonl

REPO = Path(__file__).resolve().parents[1]


def read(lines):
    return list(jsonl.parse(lines, "t.jsonl"))


def test_spec_example():
    (event,) = read(['{"task": "T1", "op": "acquire", "lock": "A", "instance": "0x1", "mode": "read", '
                     '"try": false, "subclass": 0, "nest": null, "at": "f.py:3"}'])
    assert event == Event("T1", ACQUIRE, "A", "0x1", READ, False, 0, None, True, "f.py:3", None, None, "t.jsonl", 1)


def test_nest_forms_check_and_keys():
    events = read([
        "# a comment",
        "",
        '{"task": "T", "op": "acquire", "lock": "A", "nest": "M", "nocheck": true}',
        '{"task": "T", "op": "acquire", "lock": "A", "nest": "M@0x2", "mode": "rread", "subclass": 3}',
        '{"task": "T", "op": "acquire", "lock": "A", "nest": {"lock": "a b@c", "instance": null}, "check": false}',
        '{"task": "T", "op": "hardirq-enter", "ts": 1, "cpu": 2}',
    ])
    assert [(e.nest, e.check, e.mode, e.subclass, e.line) for e in events] == [
        (("M", None), False, WRITE, 0, 3), (("M", "0x2"), True, RREAD, 3, 4), (("a b@c", None), False, WRITE, 0, 5),
        (None, True, WRITE, 0, 6)]
    assert (events[-1].ts, events[-1].cpu) == (1.0, 2)


@pytest.mark.parametrize(("line", "col", "message"), [
    ('{"task": "T", "op": "acquire", "lock": "A",}', 44, "invalid JSON"),
    ('{"task": "T", "op": "acquire", "lock": "A", "mdoe": "read"}', 45, "unknown key 'mdoe'"),
    ('{"task": "T", "op": "acquire", "lock": "A", "mode": "shared"}', 45, "'mode' must be"),
    ('{"task": "T", "op": "grab", "lock": "A"}', 15, "unknown op"),
    ('{"task": "T", "op": "acquire"}', 1, "missing 'lock'"),
    ('{"task": "T", "op": "release", "lock": "A", "try": true}', 45, "'try' is for 'acquire' only"),
    ('{"task": "T", "op": "acquire", "lock": "A", "subclass": 9}', 45, "'subclass' must be"),
    ('[1, 2]', 1, "JSON object"),
])
def test_errors_name_line_and_column(line, col, message):
    if message == "invalid JSON":
        # the column is the json module's own, which moved by one in Python 3.13
        with pytest.raises(json.JSONDecodeError) as bad:
            json.loads(line)
        col = bad.value.colno
    with pytest.raises(TraceError) as info:
        read(["", line])
    assert (info.value.file, info.value.line, info.value.col) == ("t.jsonl", 2, col)
    assert message in info.value.message


def test_sniff():
    assert jsonl.sniff(["", '{"task": "T", "op": "acquire", "lock": "A"}'])
    assert not jsonl.sniff(["T1 acquire A"])
    assert not jsonl.sniff(["  bash-1  [000] .... 1.0: lock_acquire: 01 A"])


names = st.text(st.characters(blacklist_categories=("Cs",)), min_size=1, max_size=8)


@st.composite
def events(draw):
    op = draw(st.sampled_from(sorted(ALL_OPS - MORE_LOCK_OPS - MORE_PLAIN_OPS)))  # (the rest of lockdep: test_reader_more)
    lock = draw(names) if op in LOCK_OPS else None
    acquire = op == ACQUIRE
    return Event(
        draw(names), op, lock, draw(st.one_of(st.none(), names)) if lock else None,
        draw(st.sampled_from(sorted(MODE_NAMES))) if acquire else WRITE, draw(st.booleans()) if acquire else False,
        draw(st.integers(0, 7)) if acquire else 0,
        draw(st.one_of(st.none(), st.tuples(names, st.one_of(st.none(), names)))) if acquire else None,
        draw(st.booleans()) if acquire else True, draw(st.one_of(st.none(), names)),
        draw(st.one_of(st.none(), st.floats(0, 1e6))), draw(st.one_of(st.none(), st.integers(0, 512))),
        "t.jsonl", 0, draw(st.one_of(st.none(), names)))


@settings(max_examples=200, deadline=None)
@given(st.lists(events(), max_size=8))
def test_round_trip(evs):
    lines = [json.dumps(jsonl.to_json(e)) for e in evs]
    back = read(lines)
    for n, e in enumerate(evs, 1):
        e.line = n
    assert back == evs


def test_sample_reads():
    evs = read((REPO / "traces" / "sample.jsonl").read_text().splitlines())
    assert {e.lock for e in evs if e.lock} == {"&a->lock", "&b->lock", "&mm->mmap_lock", "hrtimer_bases.lock"}


#: values of every JSON type, good and bad for each key
_ANY_VALUE = st.one_of(st.none(), st.booleans(), st.integers(-2**60, 2**60), st.floats(allow_nan=True),
                       st.sampled_from(["", "write", "read", "rread", "acquire", "release", "irqs-on", "0x1"]),
                       names, st.lists(st.integers(), max_size=2), st.dictionaries(names, st.integers(), max_size=1))
_KEYS = ["task", "op", "lock", "instance", "mode", "at", "ts", "cpu", "comm", "try", "nest", "check", "other"]


@settings(max_examples=200, deadline=None)
@given(st.dictionaries(st.sampled_from(_KEYS), _ANY_VALUE, max_size=9), st.data())
def test_the_common_path_reads_what_the_full_checks_read(obj, data):
    """`_common_event` (the fast path for plain lock lines) accepts only what `event_from_json`
    accepts, as the same event; it leaves everything else (errors included) to it."""
    if data.draw(st.booleans()):  # mostly well-formed lock lines, with one key or value off at times
        obj = {"task": "T1", "op": data.draw(st.sampled_from(sorted(LOCK_OPS))), "lock": "A", **obj}
    fast = jsonl._common_event(obj, "t.jsonl", 3)
    try:
        full = jsonl.event_from_json(obj, "t.jsonl", 3)
    except (jsonl._Bad, OverflowError):
        full = None
    if fast is not None:
        assert fast == full
        assert fast.op is next(op for op in LOCK_OPS if op == fast.op)  # the events module's string


def test_the_common_path_takes_the_benchmark_lines():
    line = {"task": "nginx/1", "op": "acquire", "lock": "&a->lock", "instance": "0xff", "mode": "read",
            "at": "f+0x1/0x2", "ts": 1.5, "cpu": 3, "comm": "nginx"}
    assert jsonl._common_event(line, "t.jsonl", 1) == jsonl.event_from_json(line, "t.jsonl", 1)
    assert jsonl._common_event({**line, "ts": float("inf")}, "t.jsonl", 1) is None
    assert jsonl._common_event({**line, "op": "release", "mode": "read"}, "t.jsonl", 1) is None
