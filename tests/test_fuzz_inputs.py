"""Never a traceback: arbitrary input to every reader, then the checker, ends in events or a TraceError."""

from __future__ import annotations

import io
import json
import os

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockcheck.commands.cli import main
from lockcheck.errors import TraceError
from lockcheck.readers import read_all
from lockcheck.commands.check import CheckSession, SessionOptions

# words that the formats use, so generated lines get past the first token often
WORDS = [
    "T1", "T2", "acquire", "release", "contended", "acquired", "hardirq-enter", "hardirq-exit",
    "softirq-enter", "softirq-exit", "irqs-on", "irqs-off", "softirqs-on", "softirqs-off", "free", "exit",
    "A", "B@1", "&rq->lock@0x10", "read", "rread", "write", "try", "nocheck", "subclass=1", "subclass=9",
    "nest=A", "nest=", "at=f.c:1", "ts=1.5", "cpu=0", "cpu=x", '"q a"', "#", "=", "@",
    "bash-1234", "[000]", "d.h2.", "....", "123.456:", "lock_acquire:", "lock_release:", "0000000012345678",
    "<...>-7", "CPU:0", "[LOST", "EVENTS]", "lock:lock_acquire:", "0xffff", "{", "}", '"op":', "\t",
]
line = st.lists(st.sampled_from(WORDS) | st.text(max_size=6), max_size=9).map(" ".join)
document = st.lists(line, max_size=25).map("\n".join)


def _check(text: str, fmt: str, tmp_path) -> None:
    path = tmp_path / "t.trace"
    path.write_bytes(text.encode("utf-8", "surrogatepass"))
    session = CheckSession(SessionOptions(input_format=fmt, progress=False, use_pyproject=False),
                           stderr=io.StringIO())
    session.check([str(path)])  # TraceErrors are collected in session.errors, anything else escapes
    for err in session.errors:
        assert isinstance(err, TraceError) and err.format().startswith(str(path))


@settings(max_examples=int(os.environ.get("LOCKCHECK_EXAMPLES", "150")), deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(document, st.sampled_from(["auto", "lt", "ftrace", "perf", "jsonl"]))
def test_any_text_gives_events_or_a_trace_error(tmp_path, text, fmt):
    _check(text, fmt, tmp_path)


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.lists(st.dictionaries(st.sampled_from(["task", "op", "lock", "instance", "mode", "try", "subclass",
                                                  "nest", "at", "ts", "cpu", "nocheck", "bogus"]),
                                st.none() | st.booleans() | st.integers(-2, 9) | st.sampled_from(
                                    ["T1", "acquire", "release", "A", "read", "rread", "x", "A@1"]) | st.lists(
                                    st.integers(), max_size=2)),
                max_size=8))
def test_any_json_lines_give_events_or_a_trace_error(tmp_path, objects):
    _check("\n".join(json.dumps(o) for o in objects), "jsonl", tmp_path)


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.binary(max_size=300))
def test_any_bytes_through_the_cli_exit_0_1_or_2(tmp_path, data):
    path = tmp_path / "b.lt"
    path.write_bytes(data)
    err = io.StringIO()
    status = main(["check", "--no-config", "--no-progress", str(path)], stdout=io.StringIO(), stderr=err)
    assert status in (0, 1, 2)
    assert "Traceback" not in err.getvalue()


JSON_VALUES = st.recursive(st.none() | st.booleans() | st.integers() | st.floats() | st.text(max_size=8)
                           | st.sampled_from(["EN", "INITIAL USE", "A", "x.lt", "9" * 5000]),
                           lambda inner: st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner,
                                                                                      max_size=3),
                           max_leaves=6)
TRACE = os.path.join(os.path.dirname(__file__), "..", "traces", "abba.lt")


def _paths(value, path=()):
    """Every place in a JSON document: object keys and list items, outermost first."""
    yield path
    items = value.items() if isinstance(value, dict) else enumerate(value) if isinstance(value, list) else ()
    for key, item in items:
        yield from _paths(item, path + (key,))


@settings(max_examples=int(os.environ.get("LOCKCHECK_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(st.data())
def test_any_value_anywhere_in_a_saved_graph_is_used_or_one_error(tmp_path, data):
    """A real saved graph with one value replaced by any JSON value: `--baseline` and `diff` use it or refuse it."""
    graph = tmp_path / "g.json"
    if not graph.exists():
        assert main(["graph", "--no-config", "--no-progress", TRACE, "-o", str(graph)],
                    stdout=io.StringIO(), stderr=io.StringIO()) == 0
        (tmp_path / "good.json").write_bytes(graph.read_bytes())
    doc = json.loads((tmp_path / "good.json").read_text())
    path = data.draw(st.sampled_from(list(_paths(doc))[1:]))
    place = doc
    for key in path[:-1]:
        place = place[key]
    place[path[-1]] = data.draw(JSON_VALUES)
    graph.write_text(json.dumps(doc))  # NaN and Infinity as Python writes them: not JSON, refused
    for args in (["check", "--no-config", "--no-progress", "--baseline", str(graph), TRACE],
                 ["diff", "--no-config", str(graph), TRACE]):
        err = io.StringIO()
        status = main(args, stdout=io.StringIO(), stderr=err)
        errors = [line for line in err.getvalue().splitlines() if not line.startswith("lockcheck: ")]
        assert "internal error" not in err.getvalue() and "Traceback" not in err.getvalue(), err.getvalue()
        assert status in (0, 1) and not errors or status == 2 and len(errors) == 1, err.getvalue()
        assert not errors or errors[0].startswith(f"{graph}:")


def test_read_all_is_lazy_and_errors_name_the_file(tmp_path):
    path = tmp_path / "bad.lt"
    path.write_text("T1 acquire A\nT1 zap\n")
    events = read_all([str(path)])
    assert next(events).lock == "A"
    try:
        next(events)
    except TraceError as err:
        assert err.format().startswith(f"{path}:2:")
    else:  # pragma: no cover
        raise AssertionError("no error for line 2")
