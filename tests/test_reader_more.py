"""The ops and keys of "The rest of lockdep" (docs/trace-format.md) in `.lt` and JSON Lines: each
line reads to the same event in both, writes back to itself, and a bad one is an error at its column."""

from __future__ import annotations

import json

import pytest

from lockcheck.errors import TraceError
from lockcheck.readers import jsonl
from lockcheck.readers.lt import parse_line, scan_fast
from lockcheck.readers.lt_write import format_event

LINES = [
    ("T1 acquire &desc->lock wait=2:2 at=handle_irq_desc+0x20/0x60", {"wait": (2, 2)}),
    ("T1 acquire &port->lock wait=sleep type=percpu cmp=instance", {"wait": (0, 4), "type": 1, "cmp": "instance"}),
    ("T1 acquire rcu_read_lock rread nocheck wait=free:config", {"wait": (1, 3)}),
    ("T1 set-class &port->lock NEWC subclass=1", {"class": "NEWC"}),
    ("T1 set-subclass &rq->__lock@cpu3 subclass=0", None),
    ("T1 downgrade &mm->mmap_lock at=mmap_write_downgrade+0x10/0x40", None),
    ("T1 hardirq-enter threaded", {"threaded": True}),
    ("T1 assert-held X read", {"held": "read"}),
    ("T1 assert-held X", None),
    ("T1 assert-not-held X", None),
    ("T1 assert-irqs-on", None),
    ("T1 assert-irqs-off", None),
    ("T1 task-exit", None),
    ("T1 unregister NEWC", None),
    ("T1 sync srcu read", None),
    ("T1 pin &rq->__lock@cpu1", None),
    ("T1 unpin &rq->__lock@cpu1", None),
]


@pytest.mark.parametrize("line,props", LINES)
def test_lines_read_write_back_and_agree_with_json_lines(line: str, props) -> None:
    event = parse_line(line, "t", 1)
    assert event.props == props
    assert format_event(event) == line or parse_line(format_event(event), "t", 1) == event
    fast = scan_fast(line, "t", 1)
    assert fast is None or fast == event  # the fast scanner leaves what it does not know to the grammar
    again = next(jsonl.parse([json.dumps(jsonl.to_json(event))], "t"))
    assert (again.op, again.lock, again.instance, again.mode, again.subclass, again.props) == \
        (event.op, event.lock, event.instance, event.mode, event.subclass, event.props)


@pytest.mark.parametrize("line,col,message", [
    ("T1 acquire A wait=5:5", 19, "wait must be"),
    ("T1 acquire A wait=spin:bogus", 19, "wait must be"),
    ("T1 acquire A type=weird", 19, "type must be one of"),
    ("T1 release A wait=2:2", 14, "only valid on"),
    ("T1 set-class A", 15, "missing class"),
    ("T1 set-class A B@1", 16, "a class, not a lock instance"),
    ("T1 set-subclass A", 17, "missing 'subclass='"),
    ("T1 hardirq-exit threaded", 17, "only valid on"),
])
def test_bad_lines_are_errors_at_their_column(line: str, col: int, message: str) -> None:
    with pytest.raises(TraceError) as err:
        parse_line(line, "t", 1)
    assert message in err.value.message and err.value.col == col, (err.value.col, err.value.message)


def test_json_lines_errors() -> None:
    with pytest.raises(TraceError, match="wait must be"):
        list(jsonl.parse(['{"task": "T", "op": "acquire", "lock": "A", "wait": "9"}']))
    with pytest.raises(TraceError, match="missing 'class'"):
        list(jsonl.parse(['{"task": "T", "op": "set-class", "lock": "A"}']))
    with pytest.raises(TraceError, match="is not valid on 'pin'"):
        list(jsonl.parse(['{"task": "T", "op": "pin", "lock": "A", "nest": "B"}']))
