"""The JSON Lines translator's quickest way (`_jsonlt_ordered.h`): the common lock event written in the `.lt`
order, `{"task", "op", "lock"[, "instance"][, "mode"][, "at"][, "ts"][, "cpu"]}` as json.dumps writes it,
read and written in one pass.  It must take only lines the general translator takes, and write them as it
does: generated lines in that order with every value that order can hold -- good, not written bare,
rejected by the reader, null, numbers at the grammar's edges -- check as the JSON Lines reader reads them,
each hint is its line's split, and the common lines are taken that way."""

from __future__ import annotations

import io
import json

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st
from test_jsonl_hints import assert_hints_match, hinted_items
from test_jsonl_translate import EXAMPLES, _outcome

from lockcheck.engine import fast_jsonl
from lockcheck.errors import TraceError
from lockcheck.readers.lt import MAX_SECONDS_CHARS
from lockcheck.readers.source import Lines

pytestmark = pytest.mark.skipif(not fast_jsonl.available(), reason="the compiled translator is not built")

TASKS = ["T1", "T2", "kworker/0:1/7"] * 4 + ["", "#x", "a b", "a@b", "a=b"]
OPS = ["acquire"] * 6 + ["release"] * 4 + ["contended", "acquired", "exit", "hardirq-enter", "softirq-exit", "irqs-on",
                                           "softirqs-off", "free", "acquire-x", ""]
LOCK_OPS = {"acquire", "release", "contended", "acquired", "free"}
NAMES = ["A", "B", "&mm->lock", "n" * 70] * 3 + ["", "#h", "a b", "x=y", "a@b"]
INSTANCES = ["0x1", "0xffff8f75f568b4c0"] * 4 + ["", "#i", "i@j", "a b", "i=j", None]
MODES = ["read", "rread", "write"] * 3 + ["reed", "", "writer", "rea", None]
#: members as the JSON text holds them (some the reader refuses: its error, after the lines before)
TRIES = ["true", "false"] * 3 + ["null", "1", '"true"', "truer"]
SUBCLASSES = ["0", "1", "3", "7"] * 2 + ["8", "01", "1.0", "-1", "10", "null", "true"]
NESTS = ['{"lock": "A", "instance": "0x2"}', '{"lock": "B", "instance": null}', '{"lock": "C"}'] * 3 + [
    '{"lock": "", "instance": "1"}', '{"lock": "#h"}', '{"lock": "a b"}', '{"lock": "A", "instance": ""}',
    '{"lock": "A", "instance": "#i"}', '{"lock": "A", "instance": "i@j"}', '{"instance": "1", "lock": "A"}',
    '{"lock": "A", "instance": 1}', '{"lock": "A", "lock": "B"}', '{"lock": null}', '{}', '"A@0x1"', '"A"', "null"]
NOCHECKS = ["true", "false"] * 3 + ["null", "0"]
SITES = ["f+0x1/0x2", "x.py:3"] * 4 + ["", "#s", "s@t", "a b", "a=b", None]
STAMPS = ["1.5", "2", "0", "0.0", "12345.678901", "100000000000000000000"] * 2 + [
    "-1.0", "-0", "01", "1.", "1e5", "1.5E3", ".5", "null", '"1"', "1" * (MAX_SECONDS_CHARS + 1), "1" * MAX_SECONDS_CHARS]
CPUS = ["0", "1", "17", "999999999"] * 3 + ["1000000000", "-1", "1.0", "01", "1e2", "null", "true"]
#: the members after the op, in the `.lt` order, and the texts of their values
MEMBERS = {"mode": [json.dumps(mode) for mode in MODES], "try": TRIES, "subclass": SUBCLASSES, "nest": NESTS,
           "nocheck": NOCHECKS, "at": [json.dumps(site) for site in SITES], "ts": STAMPS, "cpu": CPUS}


@st.composite
def ordered_line(draw) -> str:
    """A line in the `.lt` order, each optional member given or not, written as json.dumps writes it."""
    op = draw(st.sampled_from(OPS))
    parts = [f'"task": {json.dumps(draw(st.sampled_from(TASKS)))}', f'"op": {json.dumps(op)}']
    if op in LOCK_OPS or draw(st.integers(0, 9)) == 0:
        parts.append(f'"lock": {json.dumps(draw(st.sampled_from(NAMES)))}')
        if draw(st.integers(0, 2)):
            parts.append(f'"instance": {json.dumps(draw(st.sampled_from(INSTANCES)))}')
    for key, values in MEMBERS.items():
        if draw(st.integers(0, 3 if key in ("at", "ts", "cpu") else 5)) == 0:
            parts.append(f'"{key}": {draw(st.sampled_from(values))}')
    return "{" + ", ".join(parts) + "}"


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(st.lists(ordered_line(), min_size=1, max_size=12))
def test_lines_in_the_lt_order_check_as_the_reader_reads_them(lines) -> None:
    # (a last line of its own: a line within 16 bytes of its block's end is left to fast_line)
    lines = lines + ['{"task": "T9", "op": "acquire", "lock": "Z"}']
    assert _outcome(lines, "bytes") == _outcome(lines, "plain")
    assert_hints_match(hinted_items(lines))


def test_common_lines_are_read_the_quickest_way_and_others_are_not() -> None:
    taken = [('{"task": "T1", "op": "acquire", "lock": "A", "instance": "0x1", "mode": "read", "at": "f+0x1/0x2", '
              '"ts": 1.25, "cpu": 3}'),
             '{"task": "T1", "op": "acquire", "lock": "B", "mode": "rread", "cpu": 0}',
             '{"task": "T1", "op": "acquire", "lock": "C", "mode": "write", "ts": 7}',
             '{"task": "T1", "op": "release", "lock": "C", "mode": "write", "at": "g"}',
             ('{"task": "T1", "op": "acquire", "lock": "D", "try": true, "subclass": 2, '
              '"nest": {"lock": "N", "instance": "0x5"}, "nocheck": true}'),
             '{"task": "T1", "op": "acquire", "lock": "E", "nest": {"lock": "N", "instance": null}, "at": "h"}',
             '{"task": "T1", "op": "contended", "lock": "E", "at": "h"}',
             '{"task": "T1", "op": "acquired", "lock": "E", "try": false, "subclass": 0, "nocheck": false}',
             '{"task": "T1", "op": "irqs-off", "at": "x.py:3", "ts": 2}',
             '{"task": "T1", "op": "hardirq-enter"}',
             '{"task": "T1", "op": "release", "lock": "B"}']
    left = ['{"task": "T1", "op": "acquire", "lock": "F", "nest": "N@0x5"}',  # (a member this way does not read)
            '{"task": "T1", "op": "acquire", "at": "g", "lock": "F"}',  # (another order)
            '{"task":"T1","op":"acquire","lock":"F"}',  # (other spacing)
            '{"task": "T1", "op": "acquire", "lock": "F", "instance": null}',
            '{"task": "T1", "op": "acquire", "lock": "a b"}',
            '{"task": "T1", "op": "release", "lock": "F", "mode": "read"}']  # (the reader's error)
    lines = taken + left + ['{"task": "T1", "op": "release", "lock": "A"}']
    data = "\n".join(lines).encode()
    source = Lines.opened(io.BytesIO(data), "f.jsonl", lambda: None)
    translator = fast_jsonl._translator()(source, fast_jsonl.slow_line("f.jsonl"))
    source.give_bytes(translator.lines_read)
    out = []
    with pytest.raises(TraceError, match=f":{len(lines) - 1}:"):
        for item in translator:
            out.extend(item.decode().split("\n") if isinstance(item, bytes) else [item])
    assert out[:len(taken) - 1] == [
        "T1 acquire A@0x1 read at=f+0x1/0x2 ts=1.25 cpu=3", "T1 acquire B rread cpu=0", "T1 acquire C ts=7",
        "T1 release C at=g", "T1 acquire D try subclass=2 nest=N@0x5 nocheck", "T1 acquire E nest=N at=h",
        "T1 contended E at=h", "T1 acquired E", "T1 irqs-off at=x.py:3 ts=2", "T1 hardirq-enter"]
    assert translator.ordered_lines() == len(taken)


def test_the_subclass_limit_is_read_from_events_when_the_translator_is_imported() -> None:
    # a lower MAX_SUBCLASS set before the translator is imported: both of its ways take subclass 3 and
    # leave 5 to the general reader, whose error names the limit (a limit written again in C takes 5)
    script = r'''
import io
import lockcheck.events
lockcheck.events.MAX_SUBCLASS = 3
from lockcheck.engine import fast_jsonl
from lockcheck.errors import TraceError
from lockcheck.readers.source import Lines
for line in ('{"task": "T1", "op": "acquire", "lock": "A", "subclass": %d}',
             '{"task": "T1", "op": "acquire", "subclass": %d, "lock": "A"}'):
    for subclass in (3, 5):
        data = (line % subclass + "\n" + '{"task": "T1", "op": "release", "lock": "A"}' + "\n").encode()
        source = Lines.opened(io.BytesIO(data), "f.jsonl", lambda: None)
        translator = fast_jsonl._translator()(source, fast_jsonl.slow_line("f.jsonl"))
        source.give_bytes(translator.lines_read)
        try:
            out = [item if isinstance(item, bytes) else item for item in translator]
            print(subclass, "read", translator.ordered_lines(), out[0][:40] if isinstance(out[0], bytes) else "")
        except TraceError as error:
            print(subclass, "refused", translator.ordered_lines(), str(error).split(": ", 1)[1])
'''
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-c", script], capture_output=True, text=True, check=True)
    lines = run.stdout.splitlines()
    assert len(lines) == 4, run.stdout + run.stderr
    ordered_three, ordered_five, general_three, general_five = lines
    assert ordered_three.startswith("3 read 1 ") and "subclass=3" in ordered_three
    assert general_three.startswith("3 read 0 ") and "subclass=3" in general_three
    for five in (ordered_five, general_five):
        assert five.startswith("5 refused 0 ") and "0..3" in five


def _taken(lines: list[str]) -> tuple[list[str], list[int], int]:
    """The `.lt` lines the translator yields for LINES, the numbers of the lines it handed to the general
    reader (`slow`), and how many it read the quickest way."""
    data = "\n".join(lines).encode()
    source = Lines.opened(io.BytesIO(data), "f.jsonl", lambda: None)
    slow = fast_jsonl.slow_line("f.jsonl")
    handed: list[int] = []

    def counted(line: str, lineno: int):
        handed.append(lineno)
        return slow(line, lineno)

    translator = fast_jsonl._translator()(source, counted)
    source.give_bytes(translator.lines_read)
    out: list[str] = []
    for item in translator:
        out.extend(item.decode().split("\n") if isinstance(item, bytes) else [item])
    return out, handed, translator.ordered_lines()


@pytest.mark.parametrize("order", ["lt", "other"])
@pytest.mark.parametrize("key", ["cpu", "ts", "subclass"])
def test_a_value_at_the_grammar_limit_is_translated_and_one_past_it_is_the_readers(key: str, order: str) -> None:
    # each limit is read from the Python grammar (events.MAX_CPU_DIGITS, lt.MAX_SECONDS_CHARS,
    # events.MAX_SUBCLASS): at it, both ways of the translator write the line themselves; one past it, the
    # line is the general reader's (its error, or its event as format_event writes it) -- and either way
    # checks as the JSON Lines reader reads it
    from lockcheck.events import MAX_CPU_DIGITS, MAX_SUBCLASS
    from lockcheck.readers.lt import MAX_SECONDS_CHARS

    at_limit, past = {"cpu": ("9" * MAX_CPU_DIGITS, "1" + "0" * MAX_CPU_DIGITS),
                      "ts": ("1" * (MAX_SECONDS_CHARS - 2) + ".5", "1" * (MAX_SECONDS_CHARS - 1) + ".5"),
                      "subclass": (str(MAX_SUBCLASS), str(MAX_SUBCLASS + 1))}[key]
    assert len(past) == len(at_limit) + (key != "subclass")
    for value, taken in ((at_limit, True), (past, False)):
        if order == "lt":
            line = f'{{"task": "T1", "op": "acquire", "lock": "A", "{key}": {value}}}'
        else:
            line = f'{{"task": "T1", "{key}": {value}, "op": "acquire", "lock": "A"}}'
        # (the next line is its block's last: fast_line's, not the ordered way's)
        lines = [line, '{"task": "T2", "op": "acquire", "lock": "B"}', '{"task": "T2", "op": "release", "lock": "B"}']
        assert _outcome(lines, "bytes") == _outcome(lines, "plain"), (key, order, value)
        if not taken and key != "ts":
            continue  # (the reader's error: checked alike above)
        out, handed, ordered = _taken(lines)
        assert (handed == []) is taken, (key, order, value, handed)
        assert ordered == (taken and order == "lt"), (key, order, value)
        word = {"cpu": "cpu=", "ts": "ts=", "subclass": "subclass="}[key]
        assert (f"{word}{value}" in out[0]) is taken, out[0]


def test_the_cpu_and_ts_limits_are_read_from_the_python_grammar_when_the_translator_is_imported() -> None:
    # lower limits set before the translator is imported: both of its ways take a value at them and leave
    # one past them to the general reader (a limit written again in C would take it): a cpu past the
    # limit is the reader's error, a ts past it an event `.lt` cannot carry (the translation stops there)
    script = r'''
import io
import lockcheck.events
lockcheck.events.MAX_CPU_DIGITS = 4
import lockcheck.readers.lt
lockcheck.readers.lt.MAX_SECONDS_CHARS = 10
from lockcheck.engine import fast_jsonl
from lockcheck.errors import TraceError
from lockcheck.readers.source import Lines
slow = fast_jsonl.slow_line("f.jsonl")
for at_limit, past in (('"cpu": 1234', '"cpu": 12345'), ('"ts": 12345678.5', '"ts": 123456789.5')):
    lines = []
    for member in (at_limit, past):
        lines.append('{"task": "T1", "op": "acquire", "lock": "A", %s}' % member)
        lines.append('{"task": "T1", %s, "op": "release", "lock": "A"}' % member)
    data = ("\n".join(lines + ['{"task": "T1", "op": "acquire", "lock": "Z"}']) + "\n").encode()
    source = Lines.opened(io.BytesIO(data), "f.jsonl", lambda: None)
    handed = []
    translator = fast_jsonl._translator()(source, lambda line, n: handed.append(n) or slow(line, n))
    source.give_bytes(translator.lines_read)
    try:
        for item in translator:
            pass
    except TraceError as error:
        handed.append(str(error).split(": ", 1)[1])
    print(handed, translator.ordered_lines(), translator.stopped_at())
'''
    import subprocess
    import sys
    run = subprocess.run([sys.executable, "-c", script], check=False, capture_output=True, text=True)
    assert run.stdout.splitlines() == ['[3, "\'cpu\' must be an integer 0..9999"] 1 0', "[3] 1 3"], run.stdout + run.stderr
