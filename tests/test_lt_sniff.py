"""Sniffing says no to another format's line without building the `.lt` grammar, and never says no
to a line the grammar reads as an event."""

from __future__ import annotations

import re

from hypothesis import given, settings, strategies as st

from lockcheck.errors import TraceError
from lockcheck.readers import lt
from lockcheck.util.grammar import grammar_text

#: every literal of the grammar (its ops, modes, keys) and words that look like them
_LITERALS = sorted(set(re.findall(r'"([^"\\\\]+)"', grammar_text("lockcheck.lark"))))
_WORDS = _LITERALS + ["T1", "kworker/0:1/7", "A", "&rq->lock", "acquire:", "lock_acquire:", "Acquire", "0x1",
                      "[000]", "d..1", "12.5:", "at=f+0x1/0x2", "cpu=1", "#x", '"a b"', "x\u3000acquire"]
_BLANKS = ["", " ", "  ", "\t", " \t"]


_BLANK = st.sampled_from(_BLANKS)
_WORD = st.sampled_from(_WORDS)


@settings(max_examples=400, deadline=None)
@given(st.tuples(_BLANK, _WORD), st.tuples(st.sampled_from([" ", "\t", " \t "]), _WORD),
       st.lists(st.tuples(_BLANK, _WORD), max_size=3), _BLANK)
def test_no_line_the_grammar_reads_as_an_event_is_refused(first, second, rest, trail) -> None:
    words = [first, second, *rest]
    line = "".join(blank + word for blank, word in words) + trail
    if not line.strip(" \t") or line.lstrip(" \t").startswith("#"):
        return
    try:
        event = lt.parse_line(line)
    except TraceError:
        event = None
    if event is not None:
        assert lt._may_be_event(line), line


def test_other_formats_first_lines_are_refused_without_the_grammar(monkeypatch) -> None:
    def no_grammar(*args, **kwargs):
        raise AssertionError("the grammar was asked")

    monkeypatch.setattr(lt, "parse_line", no_grammar)
    ftrace = "          <idle>-0       [001] d.h1.  1234.567890: lock_acquire: 0xffff88807a1b2c38 &rq->__lock"
    log = "[    0.000000] Linux version 6.1.0 (gcc 12)"
    jsonl = '{"task": "T1", "op": "acquire", "lock": "A"}'
    for line in (ftrace, log, jsonl):
        assert not lt.sniff(["# tracer: nop", line])
    assert lt.sniff(["T1 acquire A"])  # (scan_fast reads it)
    monkeypatch.undo()
    assert lt.sniff(["  T1\tacquire A  at=f"])  # (the grammar reads it)
