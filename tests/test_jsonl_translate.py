"""JSON Lines translated into `.lt` lines (lockcheck.engine.fast_jsonl, _jsonlt.c) check as the JSON Lines
reader's events do: generated traces -- every op, escapes, unicode names, nest objects, `comm` (which `.lt`
cannot carry: the rest of the file goes the old way), bad lines anywhere -- give the same error or
findings, graph, statistics and task state as the plain reader, and the same JSON document, saved graph
and report from the command line as the old way (`LOCKCHECK_JSONL_LT=0`)."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lockcheck.commands.cli import main
from lockcheck.engine import fast_jsonl, fast_lt
from lockcheck.errors import TraceError
from lockcheck.lockdep.checker import Checker
from lockcheck.readers import jsonl
from lockcheck.readers.source import Lines

pytestmark = pytest.mark.skipif(not fast_jsonl.available(), reason="the compiled translator is not built")

EXAMPLES = int(os.environ.get("LOCKCHECK_EXAMPLES", "150"))
#: tasks and locks: mostly plain, some the translator leaves to the reader (unicode, quoting), a few `.lt`
#: cannot carry (a task with a blank or starting a comment: the rest of the file goes the old way)
TASKS = ["T1", "T2", "kworker/0:1/7"] * 15 + ["t\u00e9", "{x", "a=b", "\u4efb\u52a1", "a\u3000b", "a\x85"] + ["a b", "#x"]
LOCKS = [("A", None), ("B", "0x1"), ("A", "0x2"), ("&mm->lock", None)] * 3 + [
    ("l\u00f6ck", None), ("\u9501\U0001f512", "0x\u00e9"), ("l\u2028k", None), ("l\xa0k", "\u2003"), ("a@b", None), ("x=y", "1"), ("sp ace", "0x3"), ("#h", None), ("C", "i@j")]
LOCK_OPS = ["acquire", "release", "contended", "acquired", "free", "set-subclass", "downgrade", "sync", "pin",
            "unpin", "assert-held", "assert-not-held", "set-class"]
OPS = ["acquire"] * 12 + ["release"] * 12 + ["contended", "acquired"] * 2 + [
    "free", "hardirq-enter", "hardirq-exit", "softirq-enter", "softirq-exit", "irqs-on", "irqs-off", "softirqs-on",
    "softirqs-off", "exit", "task-exit", "set-subclass", "downgrade", "sync", "pin", "unpin", "assert-held",
    "assert-not-held", "set-class"]
SITE_OPS = ("acquire", "release", "contended", "irqs-on", "irqs-off", "softirqs-on", "softirqs-off")
#: values the reader accepts: on acquire, and (the defaults) on any other op
ACQUIRE_VALUES = {
    "mode": ["write", "read", "rread", None], "try": [True, False, None], "subclass": [0, 1, 3, 7, None],
    "nest": ["A", "A@0x2", "B@0x1", "A@", "@x", "x@y@z", {"lock": "A", "instance": None}, {"lock": "B", "instance": "0x1"},
             {"lock": "A"}, {"lock": "A", "instance": ""}, "sp ace", None],
    "nocheck": [True, False, None], "check": [True, False, None]}
DEFAULTS = {"mode": ["write", None], "try": [False, None], "subclass": [0, None], "nest": [None],
            "nocheck": [False, None], "check": [True, None]}
COMMON_VALUES = {
    "at": ["f+0x1/0x2", "x.py:3", "", "a b", "a=b", "#s", "s@t", "\u00e0", "\u00e0\ufeff", None],
    "ts": [1.5, 2, 3.25, 0, -1.0, -0.0, 10**20, 1e300, 12345.678901, None], "cpu": [0, 1, 17, 10**9 - 1, None]}
#: values the reader rejects (a bad line: the error, after the lines before it took effect)
BAD = [("mode", "reed"), ("subclass", 8), ("subclass", 1.0), ("subclass", True), ("cpu", -1), ("cpu", 10**9),
       ("cpu", 1.0), ("colour", 1), ("nest", {"instance": "1"}), ("try", 1), ("ts", "1")]


@st.composite
def json_line(draw, held: dict) -> str:
    """One JSON Lines line: mostly events the reader accepts, written in many ways, a few it rejects."""
    what = draw(st.sampled_from(["event"] * 30 + ["blank", "comment", "junk", "raw"]))
    if what == "blank":
        return draw(st.sampled_from(["", "   ", "\t"]))
    if what == "comment":
        return draw(st.sampled_from(["# c", "#lockcheck-run format=ftrace", "  # x"]))
    if what == "junk" and draw(st.integers(0, 2)) == 0:
        return draw(st.sampled_from(['{"task": "T1", "op": "acquire", "lock": NaN}', '{"task": "T1"', "[1]",
                                     '{"task": "T1", "op": "acquire", "lock": "A", "lock": "B"}', "{}",
                                     '{"task": "T1", "op": "acquire", "lock": "A"} x', "nope"]))
    task = draw(st.sampled_from(TASKS))
    stack = held.setdefault(task, [])
    op = draw(st.sampled_from(OPS))
    obj: dict = {"task": task, "op": op}
    if op == "release" and stack and draw(st.integers(0, 3)):
        lock, instance = stack.pop()
    else:
        lock, instance = draw(st.sampled_from(LOCKS))
    if op == "acquire":
        stack.append((lock, instance))
    if op in LOCK_OPS:
        obj["lock"] = lock
        if instance is not None or draw(st.integers(0, 9)) == 0:
            obj["instance"] = instance
    if op == "set-class":
        obj["class"] = draw(st.sampled_from(["K", "A"]))
    if op == "set-subclass":
        obj["subclass"] = draw(st.integers(0, 7))
    for key, values in (ACQUIRE_VALUES if op == "acquire" else DEFAULTS).items():
        if key not in obj and draw(st.integers(0, 4)) == 0:
            obj[key] = draw(st.sampled_from(values))
    if "nocheck" in obj and "check" in obj and draw(st.integers(0, 3)):
        del obj["check"]
    for key, values in COMMON_VALUES.items():
        if draw(st.integers(0, 2)) == 0 and (key != "at" or op in SITE_OPS or draw(st.integers(0, 9)) == 0):
            obj[key] = draw(st.sampled_from(values))
    if draw(st.integers(0, 60)) == 0:
        obj["comm"] = draw(st.sampled_from(["bash", None]))
    if draw(st.integers(0, 60)) == 0:
        obj["wait"] = draw(st.sampled_from(["spin", "3:3"]))
    if what == "junk":
        key, value = draw(st.sampled_from(BAD))
        obj[key] = value
    if draw(st.integers(0, 80)) == 0:
        del obj[draw(st.sampled_from(sorted(obj)))]
    text = json.dumps(obj, ensure_ascii=draw(st.booleans()),
                      separators=draw(st.sampled_from([(", ", ": "), (",", ":"), (" , ", " : ")])))
    if what == "raw":
        # written by hand: escapes where json.dumps writes none, blanks around the object
        text = draw(st.sampled_from([text.replace('"task"', '"t\\u0061sk"'), " " + text, text + " \t",
                                     text.replace('"op"', '"o\\u0070"'), text + "\r", text.replace("T1", "T\\u0031")]))
    return text


@st.composite
def json_traces(draw) -> list[str]:
    held: dict = {}
    block = [draw(json_line(held)) for _ in range(draw(st.integers(0, 20)))]
    return block * draw(st.integers(1, 3)) + [draw(json_line(held)) for _ in range(draw(st.integers(0, 8)))]


def _outcome(lines: list[str], how: str) -> dict:
    """What checking LINES leaves that anyone can see: the error or findings, the graph, the statistics,
    every task's state and held stack with the events a report would cite (`how`: "plain", the JSON Lines
    reader; "str" and "bytes": translated, from str lines or from blocks of bytes, `source.Lines`)."""
    checker = Checker()
    checker.open_trace(False)  # (`readers.run_rules(jsonl)`)
    if how == "plain":
        events = jsonl.parse(lines, "gen.jsonl")
    elif how == "str":
        events = fast_jsonl.jsonl_lt_events(checker, None, list(lines), "gen.jsonl")
    else:
        data = "\n".join(lines).encode("utf-8")
        source = Lines.opened(io.BytesIO(data), "gen.jsonl", lambda: None)
        events = fast_jsonl.jsonl_lt_events(checker, None, source, "gen.jsonl")
    error = None
    findings = []
    try:
        findings = list(checker.run(events))
    except TraceError as err:
        error = err.format()
    for task in checker.tasks.values():
        fast_lt.materialize(task.held, "gen.jsonl")
    graph = checker.graph.nx
    return {
        "error": error,
        "findings": findings,
        "nodes": sorted((name, data["usage"], sorted(data["usage_traces"].items()))
                        for name, data in graph.nodes(data=True)),
        "edges": [(a, b, sorted(data.items())) for a, b, data in graph.edges(data=True)],
        "stats": checker.stats,
        "notes": checker.notes if hasattr(checker, "notes") else None,
        "tasks": {key: (task.chain_key, task.name, task.cpu, task.hardirqs_enabled, task.softirqs_enabled,
                        task.hardirq_depth, task.softirq_depth,
                        [(h.cls, h.instance, h.read, h.trylock, h.check, h.irq_context, h.hardirqs_off, h.references,
                          h.prev_chain_key, h.event) for h in task.held])
                  for key, task in checker.tasks.items()},
    }


COMMON = ['{"task": "T1", "op": "acquire", "lock": "A"}', '{"task": "T1", "op": "acquire", "lock": "B", "ts": 2}',
          '{"task": "T1", "op": "release", "lock": "B", "cpu": 1}', '{"task": "T1", "op": "release", "lock": "A"}']


@pytest.mark.slow
@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(json_traces())
@example(COMMON * 3)
@example(COMMON + ['{"task": "T1", "op": "acquire", "lock": "B", "comm": "x"}'] + COMMON[::-1])
@example(['{"task": "T1", "op": "acquire", "lock": "B", "nest": {"lock": "A", "instance": null}}'] * 2)
def test_translated_json_lines_check_as_the_reader_reads_them(lines) -> None:
    plain = _outcome(lines, "plain")
    assert _outcome(lines, "str") == plain
    assert _outcome(lines, "bytes") == plain


def test_a_bad_line_keeps_its_place_and_the_lines_before_it_take_effect() -> None:
    lines = COMMON[:2] + ['{"task": "T1", "op": "acquire", "lock": "A", "mode": "reed"}'] + COMMON
    for how in ("str", "bytes"):
        outcome = _outcome(lines, how)
        assert outcome == _outcome(lines, "plain")
        assert outcome["error"].startswith("gen.jsonl:3:")
        assert outcome["stats"].events == 2


def test_comm_sends_the_rest_of_the_file_the_old_way() -> None:
    """`.lt` has no `comm`: from that line on the old way applies the events, on the stacks the `.lt`
    engine left (the first two locks are still held when it takes over)."""
    lines = COMMON[:2] + ['{"task": "T1", "op": "contended", "lock": "B", "comm": "bash/1"}'] + COMMON[2:] * 2
    for how in ("str", "bytes"):
        outcome = _outcome(lines, how)
        assert outcome == _outcome(lines, "plain")
        assert outcome["tasks"]["T1"][1] == "bash/1"


def test_common_shapes_are_translated_in_c_and_the_rest_by_the_reader() -> None:
    seen = []

    def slow(line: str, lineno: int):
        seen.append(lineno)
        return fast_jsonl.slow_line("f")(line, lineno)

    lines = [('{"task": "T1", "op": "acquire", "lock": "A", "instance": "0x1", "mode": "read", "try": true, '
              '"subclass": 2, "nest": {"lock": "N", "instance": null}, "at": "f+0x1/0x2", "ts": 1.25, "cpu": 3}'),
             '{"task": "T1", "op": "acquire", "lock": "l\\u00f6ck"}',
             "",
             '{"task": "T1", "op": "irqs-off", "at": "x.py:3"}',
             '{"task": "T1", "op": "release", "lock": "l\u00f6ck"}', '{"task": "T1", "op": "release", "lock": "l\u3000k"}']
    out = [item.decode() if isinstance(item, bytes) else item for item in fast_jsonl._translator()(lines, slow)]
    assert out == ["T1 acquire A@0x1 read try subclass=2 nest=N at=f+0x1/0x2 ts=1.25 cpu=3",
                   "T1 acquire l\u00f6ck", "", "T1 irqs-off at=x.py:3", "T1 release l\u00f6ck", "T1 release l\u3000k"]
    assert seen == [2, 3, 6]  # (an escape, a blank line, a white space character Python's str.split() cuts at)


@settings(max_examples=max(EXAMPLES // 6, 10), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large, HealthCheck.function_scoped_fixture])
@given(lines=json_traces())
def test_the_command_line_prints_and_saves_the_same(lines, monkeypatch, capsys, tmp_path) -> None:
    """The JSON document, the report with its evidence and the saved graph, translated or the old way."""
    trace = tmp_path / "gen.jsonl"
    trace.write_text("\n".join(lines) + "\n", encoding="utf-8")
    monkeypatch.setenv("LOCKCHECK_JOBS", "1")
    results = []
    for translated in ("1", "0"):
        monkeypatch.setenv("LOCKCHECK_JSONL_LT", translated)
        run = []
        for fmt in ("json", "text"):
            graph = tmp_path / f"graph-{translated}-{fmt}.json"
            if graph.exists():
                graph.unlink()
            status = main(["check", "--format", fmt, "--no-config", "--save-graph", str(graph), str(trace)])
            out, err = capsys.readouterr()
            run.append((status, out, err, graph.read_text() if graph.exists() else None))
        results.append(run)
    assert results[0] == results[1]


#: characters that end a string's run of printable ASCII, written raw or escaped in the JSON text
_STOPPERS = ['\\"', "\\\\", "\x7f", "\x01", "\t", "\u00e9", "\u4efb", "\u2028", "\x85", "\\u0041", "\U0001f512"]


@pytest.mark.parametrize("stopper", _STOPPERS, ids=lambda s: f"U+{ord(s[-1]):04X}-{len(s)}")
def test_a_string_is_read_the_same_wherever_its_first_unusual_character_falls(stopper) -> None:
    """The translator reads a string's printable ASCII eight bytes at a time: a character that ends
    that run (a quote or backslash escape, DEL, a control character, UTF-8) at every offset of a word,
    and strings shorter than a word, read as the reader reads them (or fail as it fails)."""
    name = "abcdefghijklmnopqrstu"
    for cut in range(len(name) + 1):
        lock = name[:cut] + stopper + name[cut:]
        lines = ['{"task": "T1", "op": "acquire", "lock": "%s", "at": "%s"}' % (lock, name[:cut]),
                 '{"task": "T1", "op": "release", "lock": "%s"}' % lock]
        plain = _outcome(lines, "plain")
        assert _outcome(lines, "str") == plain
        assert _outcome(lines, "bytes") == plain


@pytest.mark.parametrize("odd", ["", " ", "@", "=", "#"])
def test_a_clean_line_is_read_the_same_wherever_its_strings_end(odd) -> None:
    """A line of printable ASCII without a backslash is scanned 16 bytes a step (_jsonlt_scan.h): its
    strings ending at every offset of a step, a character `.lt` does not write bare (a blank, `@`, `=`)
    at every offset of a name, and the data's last line (no newline after it), read as the reader reads them."""
    name = "abcdefghijklmnopqrstuvwxyz0123456789"
    for cut in range(len(name) + 1):
        lock = name[:cut] + odd + name[cut:cut + 5]
        instance = name[:cut] + odd
        lines = [f'{{"task": "T{cut}", "op": "acquire", "lock": "{lock}", "at": "{lock}"}}',
                 f'{{"task":"T{cut}","op":"acquire","lock":"B","instance":"{instance}"}}',
                 f'{{"task": "T{cut}", "op": "release", "lock": "{lock}"}}']
        plain = _outcome(lines, "plain")
        assert _outcome(lines, "bytes") == plain
        assert _outcome(lines, "str") == plain


def test_blocks_larger_than_the_first_buffer_come_out_whole(monkeypatch: pytest.MonkeyPatch) -> None:
    """The translator writes a block's lines into the `bytes` it yields, grown as a block needs (the first
    from 64 KiB): a file of several such blocks comes out line for line, none lost or cut.  (The reader's
    blocks made larger than its own 64 KiB, so that a block's translation outgrows the first buffer.)"""
    from lockcheck.readers import source as source_module

    monkeypatch.setattr(source_module, "BLOCK", 1 << 18)
    lines = [f'{{"task": "T{i % 7}", "op": "acquire", "lock": "lock-{i}", "at": "f+0x{i:x}/0x80", "ts": {i}.5, '
             f'"cpu": {i % 4}}}' for i in range(12000)]
    source = Lines.opened(io.BytesIO("\n".join(lines).encode()), "big.jsonl", lambda: None)
    translator = fast_jsonl._translator()(source, fast_jsonl.slow_line("big.jsonl"))
    source.give_bytes(translator.lines_read)
    items = list(translator)
    assert all(isinstance(item, bytes) for item in items)
    assert max(len(item) for item in items) > 1 << 16
    out = b"\n".join(items).decode().split("\n")
    assert out == [f"T{i % 7} acquire lock-{i} at=f+0x{i:x}/0x80 ts={i}.5 cpu={i % 4}" for i in range(12000)]


@pytest.mark.parametrize("odd", [" ", "@", "=", "#", '"'])
def test_long_names_are_read_the_same_across_the_blocks_64_byte_masks(odd) -> None:
    """A block's bytes are classified once into bit masks of 64 bytes (_jsonlt_fast.h): names of one to
    three mask words, a character `.lt` does not write bare at offsets around each word's edges, and the
    line's own offset in the block shifted a byte at a time, read as the reader reads them."""
    for pad in range(0, 70, 7):
        for size in (63, 64, 65, 127, 128, 129, 190):
            base = "n" * size
            task = "T" * (pad + 1)
            for cut in (0, 1, 62, 63, 64, 65, size - 1):
                lock = base[:cut] + (odd if odd != '"' else '\\"') + base[cut:]
                lines = [f'{{"task": "{task}", "op": "acquire", "lock": "{lock}", "at": "{base}"}}',
                         f'{{"task": "T", "op": "acquire", "lock": "{base}", "instance": "{lock}"}}',
                         f'{{"task": "T", "op": "release", "lock": "{base}"}}']
                plain = _outcome(lines, "plain")
                assert _outcome(lines, "bytes") == plain


def test_the_plain_cpu_way_writes_what_the_avx2_way_writes() -> None:
    """The block's masks are built with AVX2 and counted with popcnt where the CPU has them, else with SSE2
    and bit tricks (LOCKCHECK_JSONLT_PLAIN_CPU=1 forces the latter): both write the same `.lt` text, for
    lines whose names hold a blank, `@` or `=` at every offset of a 64-byte mask word and lines that do not."""
    import subprocess
    import sys

    script = (
        "import sys\n"
        "from lockcheck.engine import fast_jsonl\n"
        "lines = []\n"
        "for cut in range(0, 140, 3):\n"
        "    for odd in ('', ' ', '@', '='):\n"
        "        name = ('n' * cut) + odd + 'x'\n"
        "        instance = name.replace(' ', '')  # (an instance with a blank: `.lt` cannot carry it)\n"
        "        lines.append('{\"task\": \"T\", \"op\": \"acquire\", \"lock\": \"%s\", \"instance\": \"%s\", '\n"
        "                     '\"at\": \"%s\", \"ts\": %d.5, \"cpu\": 1}' % (name, instance, name, cut))\n"
        "data = '\\n'.join(lines).encode()\n"
        "slow = fast_jsonl.slow_line('f')\n"
        "out = [x if isinstance(x, bytes) else x.encode() for x in fast_jsonl._translator()(iter([data]), slow)]\n"
        "from lockcheck.engine import _jsonlt\n"
        "sys.stdout.buffer.write(_jsonlt.CPU_WAY.encode() + b'#' + b'|'.join(out))\n")
    outs = []
    for plain in (None, "1"):
        env = dict(os.environ)
        env.pop("LOCKCHECK_JSONLT_PLAIN_CPU", None)
        if plain:
            env["LOCKCHECK_JSONLT_PLAIN_CPU"] = plain
        outs.append(subprocess.run([sys.executable, "-c", script], env=env, check=True, capture_output=True).stdout)
    (way, text), (plain_way, plain_text) = (out.split(b"#", 1) for out in outs)
    assert plain_way == b"sse2"  # the variable took effect
    flags = Path("/proc/cpuinfo").read_text().split() if Path("/proc/cpuinfo").is_file() else []
    if "avx2" in flags and "popcnt" in flags:
        assert way == b"avx2+popcnt"  # so the two runs compared two ways
    assert text == plain_text
    assert text.count(b"\n") == 47 * 4 - 1 and b" acquire nnn" in text
