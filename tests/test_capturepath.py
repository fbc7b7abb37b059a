"""The capture fast path (`lockcheck.engine.fast_capture`) against the plain pipeline: identical in every way.

The plain pipeline reads every ftrace line into events (`FtraceReader`),
passes them through the annotator and feeds them to the checker; the fast
path applies the lines that change only a held stack, a chain key and
counters itself and hands the rest to that pipeline.  Both must leave the
same findings, graph, statistics, annotator state, held stacks (with the
events a report would cite) and the same `FILE:LINE:COL` error, on
generated captures (with and without a kernel state) and on every capture
and JSON Lines input shipped with the tests.
"""

from __future__ import annotations

import contextlib
import itertools
import json
import os
from pathlib import Path
from unittest import mock

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lockcheck.engine import capture_filter, fast_capture as capturepath
from lockcheck.kernel import state as kstate
from lockcheck.kernel.annotations import Annotator
from lockcheck.kernel.per_boot import AnnotationOptions
from lockcheck.lockdep.checker import Checker
from lockcheck.commands.cli import main
from lockcheck.errors import TraceError
from lockcheck.readers import ftrace
from lockcheck.lockdep.tasks import TaskState, irq_event

ROOT = Path(__file__).resolve().parent.parent
STATE = ROOT / "tests" / "data" / "kernel-6.1" / "clean"

# -- generated captures ----------------------------------------------------------------

HEADS = ["bash-12", "kworker/0:1-7", "<idle>-0", "<...>-12", "sshd-4 (    4)", "  init-1"]
CPUS = ["000", "001", "1"]
FLAGS = ["...1.", "d..2.", "d.h2.", "..s1.", "d.s2.", "dNh1.", "b..1.", "...1", "..s1", "d.h1", ""]
#: classes of the kernel state (so chains are explained), a no-check class, one unknown to it
LOCKS = [("&p->pi_lock", "00000000a1"), ("&rq->__lock", "00000000b2"), ("rcu_read_lock", "0xc3"),
         ("&newf->file_lock", "00000000d4"), ("&x->other", "00000000e5"), ("&p->pi_lock", "00000000f6")]


@st.composite
def line(draw, held: dict) -> str:
    """A capture line: mostly acquisitions and LIFO releases of a few locks, some of everything else."""
    head = draw(st.sampled_from(HEADS))
    cpu = draw(st.sampled_from(CPUS))
    flags = draw(st.sampled_from(FLAGS))
    stamp = draw(st.sampled_from(["5.834099", "12.5", "7"]))
    if draw(st.integers(0, 150)) == 0:  # a malformed time stamp now and then: the error must keep its place
        stamp = draw(st.sampled_from(["1.2.3", ".5", "5." + "1" * 45]))
    stack = held.setdefault(head, [])
    kind = draw(st.sampled_from(["acquire"] * 5 + ["release"] * 5 + ["acquired", "contended", "other"]))
    if kind == "acquire":
        name, address = draw(st.sampled_from(LOCKS))
        stack.append((name, address))
        words = ["lock_acquire:", address] + draw(st.sampled_from([[], [], ["read"], ["try"], ["try", "read"]]))
        words.append(name if draw(st.integers(0, 12)) else "")
    elif kind in ("release", "acquired", "contended") and stack and draw(st.integers(0, 9)):
        name, address = stack.pop() if kind == "release" else stack[-1]
        words = [f"lock_{kind}:", address, name if draw(st.integers(0, 8)) else ""]
    elif kind == "other":
        what = draw(st.sampled_from(["contention_begin: 00000000a1 (flags=SPIN)", "contention_end: 00000000a1 (ret=0)",
                                     "sched_switch: prev_comm=bash", "lost", "blank", "comment", "probe"] * 4
                                    + ["bad"]))
        if what == "lost":
            return f"CPU:{draw(st.sampled_from(['0', '1']))} [LOST EVENTS]"
        if what == "blank":
            return ""
        if what == "comment":
            return "# tracer: nop"
        if what == "bad":
            return f"{head} [{cpu}] {flags} {stamp}: lock_acquire: zz {LOCKS[0][0]}"
        if what == "probe":
            name, address = LOCKS[0]
            words = ["lock_acquire_args:", "(lock_acquire+0x0/0x60)", f"map=0x{address}", "subclass=0", "trylock=0",
                     "read=0", "check=1", f'name="{name}"']
        else:
            words = what.split(" ")
    else:
        name, address = draw(st.sampled_from(LOCKS))
        words = [f"lock_{kind}:", address, name]
    gap = draw(st.sampled_from([" ", " ", "  "]))
    return f"{head.rjust(16)} [{cpu}] {flags + ' ' if flags else ''}{gap}{stamp}: " + " ".join(words)


@st.composite
def captures(draw) -> list[str]:
    """Lines, and a block of them repeated (chains then hit the checker's cache)."""
    held: dict = {}
    block = [draw(line(held)) for _ in range(draw(st.integers(0, 25)))]
    lines = block * draw(st.integers(1, 3))
    lines += [draw(line(held)) for _ in range(draw(st.integers(0, 10)))]
    return lines


_STATE: list = []


def _state():
    if not _STATE:
        _STATE.append(kstate.load(str(STATE)))
    return _STATE[0]


def _batches(items, size: int = 7) -> list:
    """Field tuples in batches, as a reader process sends them (`parallel.read_batches_in_worker`)."""
    items = list(items)
    return [items[i:i + size] for i in range(0, len(items), size)]


def _fields_batches(parse):
    """The batches of a reader run here; an error comes after the batches before it, as from a worker."""
    done = []
    try:
        for item in parse:
            done.append(item)
    except TraceError as err:
        yield from _batches(done)
        raise err
    yield from _batches(done)


def _run_outcome(checker: Checker, events) -> dict:
    """What running EVENTS through CHECKER leaves that anyone can see: the error or findings, the
    graph, the statistics and every task's held stack with the events a report would cite."""
    error = None
    findings = []
    try:
        findings = list(checker.run(events))
    except TraceError as err:
        error = err.format()
    graph = checker.graph.nx
    return {
        "error": error,
        "findings": findings,
        "nodes": sorted((name, data["usage"], sorted(data["usage_traces"].items()))
                        for name, data in graph.nodes(data=True)),
        "edges": [(a, b, sorted(data.items())) for a, b, data in graph.edges(data=True)],
        "stats": checker.stats,
        "held": {key: [(h.cls, h.instance, h.read, h.trylock, h.check, h.irq_context, h.hardirqs_off,
                        h.references, h.prev_chain_key, h.event) for h in task.held]
                 for key, task in checker.tasks.items()},
    }


def _irq_state(task: TaskState) -> tuple:
    """A task's irq state, and each irq-state change it recorded with the evidence a report would cite
    (the fast path applies context changes itself: `fast_stages.context_hit`)."""
    recorded = {op: irq_event(task, op) for op in task.irq_events if op != "stamp"}
    return (task.hardirqs_enabled, task.softirqs_enabled, task.hardirq_depth, task.softirq_depth, task.usage_need,
            task.irq_events.get("stamp"), sorted(recorded.items()))


def _outcome(lines: list[str], fast, with_state: bool, first: bool = False) -> dict:
    """Everything a run of the pipeline over LINES leaves that anyone can see (`fast`: False, True, or
    "fields": the events as a reader process sends them, applied by `fields_events`)."""
    checker = Checker()
    checker.options.first = first
    annotator = AnnotationOptions().annotator(_state() if with_state else None)
    stats = ftrace.ReaderStats()
    checker.open_trace(True, forget_idle=True, contention=False)  # (`readers.run_rules`: captures count contention)
    annotator.open_trace(ftrace)
    if fast == "fields":
        events = capturepath.fields_events(
            checker, annotator, _fields_batches(ftrace.parse(lines, "gen.ftrace", stats=stats, fields=True)), None,
            "gen.ftrace")
    elif fast:
        parse = capturepath.parser(ftrace, ftrace, checker, annotator, stats, annotated=True)
        assert parse is not None
        events = parse(lines, "gen.ftrace")
    else:
        events = ftrace.parse(lines, "gen.ftrace", stats=stats)
    return {
        **_run_outcome(checker, annotator.transform(ftrace, events)),
        "reader": stats,
        "tasks": {key: (task.chain_key, task.name, task.cpu,
                        list(task.acquired_ever._locks) if task.acquired_ever is not None else None,
                        task.acquired_ever.last if task.acquired_ever is not None else None, _irq_state(task))
                  for key, task in checker.tasks.items()},
        "annotator": (annotator.held, annotator.ctx, annotator.cpu, annotator.changes, annotator.doubts,
                      annotator.tries, annotator.sources, annotator.untrusted_from, annotator.trusted),
    }


@pytest.mark.slow
@pytest.mark.parametrize("filtered", [True, False], ids=["compiled-filter", "python-loop"])
@settings(max_examples=int(os.environ.get("LOCKCHECK_EXAMPLES", "150")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(captures(), st.booleans())
@example(["           bash-12 [000] ...1.  5.1: lock_acquire: 00000000a1 &p->pi_lock",
          "           bash-12 [000] ...1.  5.2: lock_release: 00000000a1 &p->pi_lock"] * 3, True)
@example(["           bash-12 [000] d.h1.  5.1: lock_acquire: 0xc3 read rcu_read_lock",
          "           bash-12 [000] d.h1.  5.1: lock_acquire: 0xc3 read rcu_read_lock",
          "           bash-12 [000] d.h1.  5.2: lock_release: 0xc3 ",
          "           bash-12 [000] d.h1.  5.2: lock_release: 0xc3 rcu_read_lock"] * 3, False)
def test_fast_path_is_the_plain_path(filtered, lines, with_state) -> None:
    plain = _outcome(lines, False, with_state)
    with _filter(filtered):
        assert _outcome(lines, True, with_state) == plain
    assert _outcome(lines, "fields", with_state) == plain


@contextlib.contextmanager
def _filter(on: bool):
    """The capture fast path with its compiled filter (`capture_filter`, where built) or its Python loop alone."""
    if on:
        yield
    else:
        with mock.patch.object(capture_filter, "_compiled", lambda: None):
            yield


@contextlib.contextmanager
def _filters_made(made: list):
    """Collects the compiled filters the capture fast path makes (to ask what they took)."""
    make = capture_filter.numbered

    def spy(*args, **kwargs):
        made_now = make(*args, **kwargs)
        if made_now is not None:
            made.append(made_now)
        return made_now

    with mock.patch.object(capture_filter, "numbered", spy):
        yield


def nested_round(stamp: str) -> list[str]:
    """bash-12 takes &p->pi_lock, then &rq->__lock with irqs off, and releases both, at `stamp`."""
    return [f"           bash-12 [000] ...1.  {stamp}: lock_acquire: 00000000a1 &p->pi_lock",
            f"           bash-12 [000] d..2.  {stamp}: lock_acquire: 00000000b2 &rq->__lock",
            f"           bash-12 [000] d..2.  {stamp}: lock_release: 00000000b2 &rq->__lock",
            f"           bash-12 [000] ...1.  {stamp}: lock_release: 00000000a1 &p->pi_lock"]


def check_with_state(path, capsys) -> tuple:
    """`lockcheck check` of the capture at `path` with the kernel's state: (status, stdout, stderr)."""
    status = main(["check", "--format", "json", "--no-config", "--lockdep-state", str(STATE), str(path)])
    out, err = capsys.readouterr()
    return status, out, err


def filter_counts(lines: list[str], with_state: bool) -> tuple[object, dict]:
    """The Python loop's outcome of `lines` and the counts of the compiled filter that checked them,
    after showing the filter's outcome and the plain path's are the loop's."""
    with _filter(False):
        loop = _outcome(lines, True, with_state)
    made: list = []
    with _filters_made(made):
        assert _outcome(lines, True, with_state) == loop == _outcome(lines, False, with_state)
    assert made
    return loop, made[0].counts()


#: a block the filter takes the second time, and its locks held at the end (their events compared, line numbers
#: and all), in and out of irq context
_HELD_AT_END = [
    "           bash-12 [000] ...1.  5.1: lock_acquire: 00000000a1 &p->pi_lock",
    "           bash-12 [000] d..2.  5.2: lock_acquire: 00000000b2 &rq->__lock",
    "           bash-12 [000] d..2.  5.3: lock_acquired: 00000000b2 &rq->__lock",
    "           bash-12 [000] d..2.  5.4: lock_release: 00000000b2 &rq->__lock",
    "           bash-12 [000] ...1.  5.5: lock_release: 00000000a1 &p->pi_lock",
] * 3 + [
    "           bash-12 [000] ...1.  6.1: lock_acquire: 00000000a1 &p->pi_lock",
    "           bash-12 [000] d..2.  6.2: lock_acquire: 00000000b2 &rq->__lock",
]


@pytest.mark.skipif(not capture_filter.compiled(), reason="the compiled filter is not built")
@settings(max_examples=int(os.environ.get("LOCKCHECK_FILTER_EXAMPLES", "40")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(captures(), st.booleans())
@example(_HELD_AT_END, True)
@example(_HELD_AT_END, False)
def test_the_compiled_filter_is_the_python_loop(lines, with_state) -> None:
    """The compiled filter (`_capturecore.CaptureFilter`) in front of the Python loop leaves what the loop alone
    leaves, and what the plain path leaves (a quicker cousin of the slow property above, run always)."""
    with _filter(False):
        loop = _outcome(lines, True, with_state)
    made: list = []
    with _filters_made(made):
        assert _outcome(lines, True, with_state) == loop == _outcome(lines, False, with_state)
    if lines is _HELD_AT_END:
        assert made and made[0].counts()["taken"] > 0  # (the filter ran and took lines itself)


def test_a_bad_line_keeps_its_place() -> None:
    """The error of a malformed line after fast lines names the line and column the plain reader names."""
    good = ["           bash-12 [000] ...1.  5.1: lock_acquire: 00000000a1 &p->pi_lock",
            "           bash-12 [000] ...1.  5.2: lock_release: 00000000a1 &p->pi_lock"] * 4
    lines = good + ["           bash-12 [000] ...1.  5.3: lock_acquire: zz &p->pi_lock"] + good
    fast, plain = _outcome(lines, True, True), _outcome(lines, False, True)
    assert fast == plain == _outcome(lines, "fields", True)
    assert fast["error"] is not None and fast["error"].startswith("gen.ftrace:9:")
    assert fast["stats"].events == 8


@pytest.mark.parametrize("stamp", ["1.2.3", ".5", "5.", "5a", "\u0665"])
def test_a_bad_time_stamp_on_a_known_line_keeps_its_place(stamp) -> None:
    """A line whose head, flags and text the fast path has cached, with a time stamp the reader does not
    take, goes to the reader (whose error it is), not through the caches."""
    good = ["           bash-12 [000] ...1.  5.1: lock_acquire: 00000000a1 &p->pi_lock",
            "           bash-12 [000] ...1.  5.2: lock_release: 00000000a1 &p->pi_lock"] * 4
    bad = good[0].replace(" 5.1:", f" {stamp}:")
    lines = good + [bad, good[1]] + good
    fast, plain = _outcome(lines, True, True), _outcome(lines, False, True)
    assert fast == plain == _outcome(lines, "fields", True)
    if stamp.isascii():  # (the grammar reads other digits)
        assert plain["error"] is not None and plain["error"].startswith("gen.ftrace:9:")


def test_first_finding_stops_both_alike() -> None:
    ab = ["           bash-12 [000] ...1.  5.1: lock_acquire: 00000000a1 &x->a",
          "           bash-12 [000] ...1.  5.1: lock_acquire: 00000000b1 &x->b",
          "           bash-12 [000] ...1.  5.1: lock_release: 00000000b1 &x->b",
          "           bash-12 [000] ...1.  5.1: lock_release: 00000000a1 &x->a"]
    ba = [line.replace("bash-12", "sshd-13").replace("a1 &x->a", "Q").replace("b1 &x->b", "a1 &x->a")
          .replace("Q", "b1 &x->b") for line in ab]
    lines = ab * 3 + ba + ab
    fast, plain = _outcome(lines, True, False, first=True), _outcome(lines, False, False, first=True)
    assert fast == plain
    # a reader process reads on after the checker stopped (its statistics count every line), as before
    fields = _outcome(lines, "fields", False, first=True)
    assert {**fields, "reader": None} == {**plain, "reader": None}
    assert [f.kind for f in fast["findings"]] == ["circular-dependency"]


@pytest.mark.parametrize("filtered", [True, False], ids=["compiled-filter", "python-loop"])
def test_hits_are_taken_fast(filtered) -> None:
    """A repeated block of lines is applied by the fast path, not handed on (what makes it fast)."""
    block = ["           bash-12 [000] ...1.  5.1: lock_acquire: 00000000a1 &x->a",
             "           bash-12 [000] ...1.  5.1: lock_acquired: 00000000a1 &x->a",
             "           bash-12 [000] ...1.  5.1: contention_begin: 00000000a1 (flags=SPIN)",
             "           bash-12 [000] ...1.  5.1: lock_release: 00000000a1 &x->a"]
    checker = Checker()
    checker.open_trace(True, forget_idle=True, contention=False)
    annotator = Annotator()
    annotator.open_trace(ftrace)
    stats = ftrace.ReaderStats()
    handed: list = []
    reader = ftrace.FtraceReader("t.ftrace", stats=stats)
    made: list = []
    with _filter(filtered), _filters_made(made):
        misses = capturepath._ftrace_misses(checker, annotator, reader, stats, None, block * 50, "t.ftrace")
        handed_first = next(misses)
    for numbered in itertools.chain([handed_first], misses):
        handed.append(numbered[0])
        for ev in annotator.run(reader.parse_numbered([numbered], count_lines=False)):
            checker.feed(ev)
    assert handed == [1]  # the new task's first acquisition (a new task, a new chain)
    assert checker.stats.events == 150 and stats.lines == 200 and stats.contention == 50
    if filtered and capture_filter.compiled():
        # the compiled filter, not the Python loop behind it, took nearly all of the 199 other lines
        assert len(made) == 1 and made[0].counts()["taken"] >= 190
    else:
        assert made == []


# -- every shipped capture and JSON Lines input, through the command ------------------------


def _inputs() -> list[tuple[str, list[str]]]:
    found = []
    for path in sorted((ROOT / "traces").iterdir()) + sorted((ROOT / "tests" / "data").rglob("*")):
        if path.is_file() and (path.name.endswith((".ftrace", ".ftrace.xz", ".jsonl", ".jsonl.xz"))):
            rel = str(path.relative_to(ROOT))
            found.append((rel, [rel]))
            if path.name.startswith("trace.ftrace"):
                found.append((rel + "+state", ["--lockdep-state", str(path.parent.relative_to(ROOT)), rel]))
    return found


def _check(args: list[str], fastpath: str, fmt: str, monkeypatch, capsys, tmp_path) -> tuple:
    monkeypatch.chdir(ROOT)
    monkeypatch.setenv("LOCKCHECK_FASTPATH", fastpath)
    monkeypatch.setenv("LOCKCHECK_JOBS", "1")
    graph = tmp_path / f"graph-{fastpath}-{fmt}.json"
    status = main(["check", "--format", fmt, "--no-config", "--save-graph", str(graph)] + args)
    out, err = capsys.readouterr()
    return status, json.loads(out) if fmt == "json" else out, err, graph.read_text()


@pytest.mark.slow
@pytest.mark.parametrize("name,args", _inputs(), ids=[name for name, _ in _inputs()])
def test_every_shipped_capture_checks_the_same_on_the_fast_path(name, args, monkeypatch, capsys, tmp_path) -> None:
    """The JSON document, the kernel-layout report (evidence text) and the saved graph alike."""
    for fmt in ("json", "text"):
        assert _check(args, "1", fmt, monkeypatch, capsys, tmp_path) == _check(args, "0", fmt, monkeypatch, capsys,
                                                                             tmp_path)


@pytest.mark.slow
@pytest.mark.parametrize("name,args", _inputs(), ids=[name for name, _ in _inputs()])
def test_every_shipped_capture_checks_the_same_read_in_a_second_process(name, args, monkeypatch, capsys,
                                                                         tmp_path) -> None:
    """The fast path over what a reader process sends (every file is worth it here) is the plain path."""
    from lockcheck.readers import parallel

    expected = _check(args, "0", "json", monkeypatch, capsys, tmp_path)
    # (a capture is read in a second process only where the compiled filter does not run)
    monkeypatch.setattr(capture_filter, "_compiled", lambda: None)
    monkeypatch.setattr(parallel, "PARALLEL_MIN_BYTES", 0)
    monkeypatch.setattr(parallel.os, "cpu_count", lambda: 2)
    monkeypatch.delenv("LOCKCHECK_JOBS")
    status = main(["check", "--format", "json", "--no-config", "--save-graph", str(tmp_path / "p.json")] + args)
    out, err = capsys.readouterr()
    assert (status, json.loads(out), err, (tmp_path / "p.json").read_text()) == expected


def test_the_shipped_inputs_include_captures_and_json_lines() -> None:
    names = [name for name, _ in _inputs()]
    assert any(name.endswith("+state") for name in names)
    assert any(".jsonl" in name for name in names)


def test_irq_state_changes_are_taken_fast_with_their_evidence() -> None:
    """A change of the flags column (ftrace) or an irq op (JSON Lines from a reader process) is
    applied on the fast path, and what a report would cite of it -- file, line, task, site, time --
    is the plain path's."""
    block = ["           bash-12 [000] ...1.  5.1: lock_acquire: 00000000a1 &x->a",
             "           bash-12 [000] ...1.  5.1: lock_release: 00000000a1 &x->a",
             "           bash-12 [000] d..1.  5.2: lock_acquire: 00000000b1 &x->b",
             "           bash-12 [000] d.h1.  5.3: lock_release: 00000000b1 &x->b",
             "           bash-12 [000] ..s1.  5.4: lock_acquire: 00000000a1 &x->a",
             "           bash-12 [000] ...1.  5.5: lock_release: 00000000a1 &x->a"]
    lines = block * 4
    assert _outcome(lines, True, False) == _outcome(lines, False, False) == _outcome(lines, "fields", False)
    checker = Checker()
    checker.open_trace(True, forget_idle=True, contention=False)
    annotator = Annotator()
    annotator.open_trace(ftrace)
    stats = ftrace.ReaderStats()
    reader = ftrace.FtraceReader("t.ftrace", stats=stats)
    handed = []
    for numbered in capturepath._ftrace_misses(checker, annotator, reader, stats, None, lines, "t.ftrace"):
        handed.append(numbered[0])
        for ev in annotator.run(reader.parse_numbered([numbered], count_lines=False)):
            checker.feed(ev)
    assert len(handed) < len(block) and stats.context_events == 8 * 4  # (the plain count: `_outcome` above)
    softirqs_on = irq_event(checker.tasks["12"], "softirqs-on")
    assert softirqs_on is not None and (softirqs_on[1].line, softirqs_on[1].ts) == (24, 5.5)


# -- the annotator's verdict on its own ------------------------------------------------------


def _annotated_view(annotator, held_names: list[str]) -> "capturepath._View":
    """A fast-path view of a task `t` whose annotator stack holds HELD_NAMES (irq context 0)."""
    task = TaskState("t", "t/1")
    annotator.held["t"] = [[name, name, "0x1", 0, 0] for name in held_names]
    return capturepath._View(task, annotator.held["t"])


def test_the_annotator_passes_on_only_a_chain_the_kernel_explains() -> None:
    """With a trusted kernel state, an acquisition goes the fast way only when the stack it makes is a
    suffix of a chain of /proc/lockdep_chains: any other the annotator would re-read (subclass,
    trylock, check=0), so the fast path must leave it to the plain one, even if the checker's chain
    cache holds its chain."""
    annotator = AnnotationOptions().annotator(_state())
    annotator.open_trace(ftrace)
    ann = capturepath._Annotated(annotator)
    explained = next(chain for chain in sorted(ann.suffixes) if len(chain) == 2 and chain[0] != chain[1]
                     and all("/" not in name and name not in annotator.rules.recursive_read
                             and annotator.rules.unchecked(name) is None for name in chain))
    assert annotator.trusted
    annotator._ruled[explained[1]] = False
    verdict = ann.decide(_annotated_view(annotator, [explained[0]]), "t", explained[1], 0, False, True, "x")
    assert verdict == (True, None, True, 0)
    unexplained = next(name for name in sorted({chain[-1] for chain in ann.suffixes})
                       if (explained[0], name) not in ann.suffixes and name != explained[0] and "/" not in name)
    annotator._ruled[unexplained] = False
    assert ann.decide(_annotated_view(annotator, [explained[0]]), "t", unexplained, 0, False, True, "x") is None
    # a trylock is not validated: the kernel's chains say nothing of it, the annotator passes it on
    assert ann.decide(_annotated_view(annotator, [explained[0]]), "t", unexplained, 0, True, True, "x") is not None
    # a class held twice is the annotator's to resolve (nest_lock, subclass)
    assert ann.decide(_annotated_view(annotator, [explained[0]]), "t", explained[0], 0, False, True, "x") is None


@pytest.mark.skipif(not capture_filter.compiled(), reason="the compiled filter is not built")
@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_a_file_read_in_blocks_of_bytes_checks_the_same(ending, tmp_path, monkeypatch, capsys) -> None:
    """Past its first block, the filter splits the file's blocks of bytes itself (`source.Lines.give_bytes`):
    line endings, blank lines, a block with a non-ASCII line (decoded, as before) and the line numbers of
    what it passes on are the Python loop's."""
    lines = []
    for i in range(9000):
        stamp = f"{5 + i / 1000:.6f}"
        lines += nested_round(stamp)
        if i % 2000 == 1999:
            lines += ["", f"        sshd-4 [001] ...1.  {stamp}: sched_switch: prev_comm=sshd \u00e9"]
    lines[-3:] = ["        sshd-4 [001] ...1.  99.0: lock_acquire: 00000000a1 &p->pi_lock",
                  "           bash-12 [000] ...1.  99.1: lock_acquire: zz &p->pi_lock"]
    path = tmp_path / "blocks.ftrace"
    path.write_bytes(ending.join(lines).encode() + ending.encode())
    monkeypatch.setenv("LOCKCHECK_JOBS", "1")
    with _filter(False):
        loop = check_with_state(path, capsys)
    assert check_with_state(path, capsys) == loop
    assert ":36007:" in loop[2]  # the bad line's error, numbered as in the file


@pytest.mark.skipif(not capture_filter.compiled(), reason="the compiled filter is not built")
def test_a_finished_check_leaves_no_filter_behind(tmp_path) -> None:
    """The source's blocks of bytes ask the filter for its line count (a cycle: lines -> filter ->
    lines); the collector must be able to free it, and the checker it holds, after each check."""
    import gc
    import io

    from lockcheck.engine._capturecore import CaptureFilter

    trace = tmp_path / "t.ftrace"
    trace.write_text("# tracer: nop\n" + "\n".join(_HELD_AT_END * 20) + "\n")
    for _ in range(3):
        status = main(["check", "--format", "json", "--no-config", "--no-progress", str(trace)],
                      stdout=io.StringIO(), stderr=io.StringIO())
        assert status in (0, 1)
    gc.collect()
    assert not [obj for obj in gc.get_objects() if type(obj) is CaptureFilter]


#: a capture touching a new lock instance on every line (its body text never seen before), ending in
#: a line whose "address" is none (the full reading's, then the grammar's error)
_NEW_ADDRESSES = [line for i in range(40) for line in (
    f"           bash-12 [000] ...1.  5.{i}: lock_acquire: ffff8880{i:08x} &x->lock",
    f"           bash-12 [000] ...1.  5.{i}: lock_release: 0xffff8880{i:08x} &x->lock")] + [
    "           bash-12 [000] ...1.  6.0: lock_acquire: zz1 &x->lock"]


@pytest.mark.skipif(not capture_filter.compiled(), reason="the compiled filter is not built")
@pytest.mark.parametrize("with_state", [False, True])
def test_new_lock_addresses_are_taken_by_the_filter(with_state) -> None:
    """A body never seen whose shape (the text but its address) is known is read by the compiled
    filter itself (`body_from_shape`), as the Python loop and the plain path read it."""
    with _filter(False):
        loop = _outcome(_NEW_ADDRESSES, True, with_state)
    made: list = []
    with _filters_made(made):
        assert _outcome(_NEW_ADDRESSES, True, with_state) == loop == _outcome(_NEW_ADDRESSES, False, with_state)
    # (not handed to the Python loop line by line; with the kernel's state, whose chains do not
    # explain this made-up lock, its acquisitions are the annotator's to decide)
    assert made and made[0].counts()["taken"] >= (38 if with_state else 70)
    assert loop["error"] is not None and loop["error"].startswith("gen.ftrace:81:")
