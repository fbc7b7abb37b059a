"""The fast scanner and the grammar agree, and `format_event` round-trips.

`scan_fast` may decline any line (None), but when it answers it must give
exactly the Event `parse_line` (the lark grammar) gives, and it must never
accept a line the grammar rejects.  Lines are generated from the pieces of
the spec, then some are mutated with the characters that matter (quotes,
`=`, `@`, backslashes, tabs, blanks) to probe the edges.
"""

from __future__ import annotations

import math

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockcheck.errors import TraceError
from lockcheck.events import ACQUIRE, ALL_OPS, LOCK_OPS, MODE_NAMES, MORE_LOCK_OPS, MORE_PLAIN_OPS, Event
from lockcheck.readers.lt import parse_line, scan_fast
from lockcheck.readers.lt_write import format_event

SETTINGS = settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])

NAME_CHARS = "abAB01_-&>()#/.:+x"
SPECIAL = ' \t"=@\\#'

tokens = st.text(NAME_CHARS, min_size=1, max_size=6)
keyword_like = st.sampled_from(["read", "write", "rread", "try", "nocheck", "exit", "acquire", "nest", "at"])
names = st.one_of(tokens, keyword_like)
locks = st.builds(lambda c, i: c if i is None else f"{c}@{i}", names, st.none() | tokens)
numbers = st.sampled_from(["0", "1", "7", "8", "-1", "01", "1.5", "1e3", "nan", "x", "1_0", ".5", "+2"])
options = st.one_of(
    st.sampled_from(["write", "read", "rread", "try", "nocheck", "tyr", "reads", "at", "nest", "cpu"]),
    st.builds("subclass={}".format, numbers),
    st.builds("cpu={}".format, numbers),
    st.builds("ts={}".format, numbers),
    st.builds("at={}".format, st.one_of(tokens, st.just('"a b"'), st.just("x=y@z"))),
    st.builds("nest={}".format, locks),
    st.builds("{}={}".format, st.sampled_from(["subclas", "colour", ""]), tokens),
)
separators = st.sampled_from([" "] * 8 + ["  ", "\t"])


@st.composite
def lines(draw) -> str:
    """A line built from spec pieces: mostly valid, sometimes not (wrong option for the op...)."""
    op = draw(st.sampled_from(sorted(ALL_OPS) + ["aquire"]))
    fields = [draw(names), op]
    if op in LOCK_OPS or draw(st.integers(0, 9)) == 0:
        fields.append(draw(locks))
    fields += draw(st.lists(options, max_size=4))
    text = fields[0]
    for field in fields[1:]:
        text += draw(separators) + field
    return text


@st.composite
def mutated(draw) -> str:
    """A generated line with a special character inserted, replaced or deleted."""
    line = draw(lines())
    pos = draw(st.integers(0, len(line)))
    how = draw(st.sampled_from(["insert", "replace", "delete"]))
    char = draw(st.sampled_from(SPECIAL))
    if how == "insert":
        return line[:pos] + char + line[pos:]
    if how == "replace":
        return line[:pos] + char + line[pos + 1:]
    return line[:pos] + line[pos + 1:]


def grammar_result(line: str):
    try:
        return parse_line(line, "t.lt", 7)
    except TraceError as err:
        assert err.line == 7 and err.col is not None and 1 <= err.col <= len(line) + 1, err
        return err


def assert_agree(line: str) -> None:
    fast = scan_fast(line, "t.lt", 7)
    slow = grammar_result(line)
    if fast is not None:
        assert isinstance(slow, Event), (line, slow)
        assert fast == slow, line


@SETTINGS
@given(lines())
def test_fast_path_agrees_with_grammar(line):
    assert_agree(line)


@SETTINGS
@given(mutated())
def test_fast_path_agrees_on_mutations(line):
    assert_agree(line)


@SETTINGS
@given(lines().filter(lambda line: not any(s in line for s in ("\t", "  ", "\""))))
def test_fast_path_takes_the_plain_lines(line):
    """The fast path is not allowed to decline the plain lines it exists for."""
    slow = grammar_result(line)
    # (the ops and keys of "The rest of lockdep" are the grammar's alone: rare lines)
    if isinstance(slow, Event) and slow.op not in MORE_LOCK_OPS | MORE_PLAIN_OPS and slow.props is None:
        assert scan_fast(line, "t.lt", 7) == slow, line


# -- format_event round trip ----------------------------------------------------------
any_text = st.text(st.characters(blacklist_characters="\r\n", blacklist_categories=("Cs",)), max_size=8)
bare_tokens = st.text(st.characters(blacklist_characters=' \t"\r\n', blacklist_categories=("Cs",)),
                      min_size=1, max_size=8)
task_tokens = bare_tokens.filter(lambda t: not t.startswith("#"))
instances = st.none() | bare_tokens


@st.composite
def events(draw) -> Event:
    """Any Event the `.lt` format can carry."""
    op = draw(st.sampled_from(sorted(ALL_OPS - MORE_LOCK_OPS - MORE_PLAIN_OPS)))  # (the rest of lockdep: test_reader_more)
    fields = dict(task=draw(task_tokens), op=op, file="t.lt", line=7,
                  ts=draw(st.none() | st.floats(allow_nan=False, allow_infinity=False)),
                  cpu=draw(st.none() | st.integers(0, 4096)))
    if op in LOCK_OPS:
        fields.update(lock=draw(any_text), instance=draw(instances))
    if op in {"acquire", "release", "contended", "irqs-on", "irqs-off", "softirqs-on", "softirqs-off"}:
        fields.update(at=draw(st.none() | any_text))
    if op is ACQUIRE:
        fields.update(mode=draw(st.sampled_from(sorted(MODE_NAMES))), trylock=draw(st.booleans()),
                      subclass=draw(st.integers(0, 7)), check=draw(st.booleans()),
                      nest=draw(st.none() | st.tuples(any_text, instances)))
    return Event(**fields)


@SETTINGS
@given(events())
def test_format_event_round_trips(event):
    line = format_event(event)
    assert parse_line(line, "t.lt", 7) == event, line
    fast = scan_fast(line, "t.lt", 7)
    assert fast is None or fast == event


def test_ts_round_trip_is_exact():
    for ts in (0.1, 1e-7, 123456789.123456, -0.0, 5e300):
        assert parse_line(format_event(Event("T", "exit", ts=ts)), "t.lt", 7).ts == ts
        assert math.copysign(1, parse_line(f"T exit ts={ts!r}").ts) == math.copysign(1, ts)
