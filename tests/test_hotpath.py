"""The fast path (`lockcheck.engine.fast_lt`) against the plain pipeline: identical in every observable way.

The plain pipeline reads every line into an `Event` and feeds it to the
checker; the fast path applies chain-cache hits itself and hands the rest
on.  Both must leave the same findings (every field), the same graph
(classes, usage bits and their traces, dependencies and their evidence),
the same statistics and the same error, on generated traces and on every
trace shipped with the tests.
"""

from __future__ import annotations

import io
import itertools
import json
import os
from pathlib import Path

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lockcheck.engine import fast_lt as hotpath
from lockcheck.lockdep.checker import Checker
from lockcheck.commands.cli import main
from lockcheck.errors import TraceError
from lockcheck import readers
from lockcheck.readers import lt, source

ROOT = Path(__file__).resolve().parent.parent

TASKS = ["T1", "T2", "kworker/0:1/7"]
CLASSES = ["A", "B", "C", "&mm->lock"]
INSTANCES = ["", "@1", "@2", "@0xffff8a01"]


@st.composite
def lock_field(draw) -> str:
    return draw(st.sampled_from(CLASSES)) + draw(st.sampled_from(INSTANCES))


@st.composite
def acquire_options(draw) -> list[str]:
    words = []
    for word, weight in (("read", 6), ("rread", 6), ("write", 20), ("try", 8), ("nocheck", 30)):
        if draw(st.integers(0, weight)) == 0:
            words.append(word)
    if draw(st.integers(0, 6)) == 0:
        words.append(f"subclass={draw(st.sampled_from(['0', '1', '2', '9']))}")
    if draw(st.integers(0, 4)) == 0:
        words.append(f"nest={draw(lock_field())}")
    return words


@st.composite
def stamps(draw) -> list[str]:
    words = []
    if draw(st.booleans()):
        words.append(f"at=site_{draw(st.integers(0, 3))}+0x1a/0x80")
    if draw(st.integers(0, 2)) == 0:
        words.append(f"ts={draw(st.sampled_from(['1.5', '2', '3.25', '1e3', 'nan', 'x']))}")
    if draw(st.integers(0, 2)) == 0:
        words.append(f"cpu={draw(st.sampled_from(['0', '1', '3', '-1']))}")
    return words


#: "The rest of lockdep": lines the fast paths hand to the checker, which may change what they
#: keep (unregister forgets classes and reads every task's held locks)
_MORE_OPS = ["unregister", "unregister", "set-class", "set-subclass", "downgrade", "sync", "pin", "unpin",
             "assert-held", "assert-not-held", "task-exit", "assert-irqs-on", "assert-irqs-off"]
_MORE_PLAIN = ("task-exit", "assert-irqs-on", "assert-irqs-off")


@st.composite
def trace_line(draw, held: dict) -> str:
    """Mostly acquisitions and releases of held locks (LIFO mostly), some of everything else."""
    task = draw(st.sampled_from(TASKS))
    stack = held.setdefault(task, [])
    kind = draw(st.sampled_from(["acquire"] * 6 + ["release"] * 6 + ["other"]))
    if kind == "acquire":
        lock = draw(lock_field())
        stack.append(lock)
        words = [task, "acquire", lock] + draw(acquire_options()) + draw(stamps())
    elif kind == "release":
        if stack and draw(st.integers(0, 9)):
            index = -1 if draw(st.integers(0, 3)) else draw(st.integers(0, len(stack) - 1))
            lock = stack.pop(index)
        else:
            lock = draw(lock_field())
        words = [task, "release", lock] + draw(stamps())
    else:
        op = draw(st.sampled_from(["contended", "acquired", "exit", "free", "hardirq-enter", "hardirq-exit",
                                   "softirq-enter", "softirq-exit", "irqs-on", "irqs-off", "softirqs-on",
                                   "softirqs-off", "#lockcheck-lost-events", "# a comment", "", "quoted",
                                   "blanks", "tabs", "quoted-at"] + _MORE_OPS))
        if op == "#lockcheck-lost-events":
            return f"#lockcheck-lost-events cpu={draw(st.sampled_from(['0', '1']))}"
        if op in ("# a comment", ""):
            return op
        if op == "quoted":
            return f'{task} acquire "{draw(st.sampled_from(CLASSES))}"'
        if op == "blanks":
            return f"{task}  release {draw(lock_field())} "
        if op == "tabs":  # fields apart by tabs too: the compiled core leaves such a line to Python
            words = [task, "acquire", draw(lock_field())] + draw(acquire_options())
            return "".join(w + draw(st.sampled_from([" ", "\t", " \t"])) for w in words).rstrip(" \t")
        if op == "quoted-at":  # a quote well into the line (past the compiled core's first 16 bytes)
            return f'{task} acquire {draw(lock_field())} at="{draw(st.sampled_from(["f+0x1/0x2 [kvm]", "g h"]))}"'
        if op == "free":
            stack[:] = []
        if op == "set-class":
            return f"{task} set-class {draw(lock_field())} {draw(st.sampled_from(CLASSES))}"
        if op == "unregister":
            return f"{task} unregister {draw(st.sampled_from(CLASSES))}"
        takes_lock = op in ("contended", "acquired", "free") or (op in _MORE_OPS and op not in _MORE_PLAIN)
        words = [task, op] + ([draw(lock_field())] if takes_lock else [])
        words += draw(stamps())
    order = draw(st.permutations(range(3, len(words)))) if len(words) > 3 else []
    return " ".join(words[:3] + [words[i] for i in order])


@st.composite
def nest_burst(draw, held: dict) -> list[str]:
    """mm_take_all_locks: instances of one class under a nest lock, merged into one held entry."""
    task = draw(st.sampled_from(TASKS))
    nest, cls = draw(st.sampled_from([("C", "A"), ("C@1", "A"), ("&mm->lock", "B")]))
    instances = draw(st.lists(st.sampled_from(["@1", "@2", "@3", ""]), min_size=1, max_size=5))
    subclass = draw(st.sampled_from(["", "", " subclass=1"]))
    lines = [f"{task} acquire {nest}"] + [f"{task} acquire {cls}{i} nest={nest}{subclass}" for i in instances]
    releases = [f"{task} release {cls}{i}" for i in draw(st.permutations(instances))]
    if draw(st.booleans()):  # the nest lock first, or last
        releases.append(f"{task} release {nest}")
    else:
        releases.insert(draw(st.integers(0, len(releases))), f"{task} release {nest}")
    if draw(st.integers(0, 3)) == 0:  # sometimes left held
        releases = releases[:draw(st.integers(0, len(releases)))]
    return lines + releases


@st.composite
def traces(draw) -> list[str]:
    held: dict = {}
    lines: list[str] = []
    for _ in range(draw(st.integers(0, 40))):
        if draw(st.integers(0, 8)) == 0:
            lines += draw(nest_burst(held))
        else:
            lines.append(draw(trace_line(held)))
    return lines


def _outcome(checker: Checker, run) -> dict:
    """Everything a run leaves that anyone can see."""
    error = None
    findings = []
    try:
        findings = list(run)
    except TraceError as err:
        error = err.format()
    for task in checker.tasks.values():  # what the fast path still holds, as the plain checker holds it
        hotpath.materialize(task.held, "gen.lt")
    graph = checker.graph.nx
    return {
        "error": error,
        "findings": findings,
        "nodes": sorted((name, data["usage"], sorted(data["usage_traces"].items())) for name, data in graph.nodes(data=True)),
        "edges": [(a, b, sorted(data.items())) for a, b, data in graph.edges(data=True)],
        "stats": checker.stats,
        "held": {key: [(h.cls, h.instance, h.references, h.prev_chain_key, h.event) for h in task.held]
                 for key, task in checker.tasks.items()},
        "chain_keys": {key: task.chain_key for key, task in checker.tasks.items()},
    }


def plain(lines: list[str], capture: bool = False) -> dict:
    checker = Checker()
    checker.open_trace(capture)
    return _outcome(checker, checker.run(lt.parse(lines, "gen.lt")))


#: the fast path's cores: pure Python always, the compiled one where it was built, given str
#: lines or (`blocks`) the bytes of a file in small blocks, as `source.Lines.give_bytes` hands them
CORES = ["pure"] + (["compiled", "blocks"] if hotpath.compiled() else [])


def as_read(lines: list[str], newline: str = "\n", final: bool = True) -> "readers._Peeked":
    """`lines` as `readers` hands a file's lines on: the first as str (what `_peek` looked at),
    the rest from `source.Lines`, read `source.BLOCK` bytes at a time."""
    data = newline.join(lines) + (newline if final and lines else "")
    read = source.Lines.opened(io.BytesIO(data.encode("utf-8")), "gen.lt", lambda: None)
    return readers._Peeked.of(iter(list(itertools.islice(read, 1))), read)


def fast(lines: list[str], capture: bool = False, core: str = "pure", block: int = 64, newline: str = "\n",
         final: bool = True) -> dict:
    checker = Checker()
    checker.open_trace(capture)
    saved_block = source.BLOCK
    source.BLOCK = block
    try:
        with pytest.MonkeyPatch.context() as env:
            if core == "pure":
                env.setenv("LOCKCHECK_PURE", "1")  # the user's switch, read at each run
            events = hotpath.lt_events(checker, as_read(lines, newline, final) if core == "blocks" else lines,
                                       "gen.lt")
            return _outcome(checker, checker.run(events))
    finally:
        source.BLOCK = saved_block


@pytest.mark.slow
@settings(max_examples=int(os.environ.get("LOCKCHECK_EXAMPLES", "120")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(traces(), st.booleans())
@example(["T1 acquire C", "T1 acquire A@1 nest=C", "T1 acquire A@2 nest=C", "T1 release A@1", "T1 release A@2",
          "T1 release C"], False)
@example(["T1 acquire C", "T1 acquire A@1 nest=C subclass=1", "T1 acquire A@2 nest=C subclass=1",
          "T1 acquire A@3 nest=C subclass=1", "T1 release C", "T1 release A@2", "T1 release A@1", "T1 release A@3"],
         True)
@example(["T1 acquire A", "T1 release A"] * 3 + ["T1 hardirq-enter", "T1 acquire A", "T1 release A", "T1 hardirq-exit",
          "T2 acquire B", "T2 irqs-off", "T2 acquire C try", "T2 release C", "T2 irqs-on", "T2 release B"], False)
@example(["T1 acquire A", "T1 acquire B", "T1 release B", "T1 release A", "T1 acquire A", "T1 acquire B",
          "T2 unregister A", "T1 release B", "T1 release A", "T3 acquire B", "T3 acquire A", "T3 release A",
          "T3 release B"], False)  # (unregister reads every task's held locks: T1's were the fast path's)
@example(["T1 acquire A", "T1 release A", "T1 acquire A", "T1 release A", "T1 unregister A", "T1 irqs-off",
          "T1 acquire A", "T1 release A", "T1 irqs-on", "T1 acquire A", "T1 release A", "T2 hardirq-enter",
          "T2 acquire A", "T2 release A", "T2 hardirq-exit"], False)  # (A after unregister: a new node)
def test_fast_path_is_the_plain_path(lines, capture) -> None:
    # three times through one checker: the later passes find their chains cached, as most of a
    # long trace does, so the fast path takes them
    expected = plain(lines * 3, capture)
    for core in CORES:
        assert fast(lines * 3, capture, core) == expected, core


@pytest.mark.slow
@pytest.mark.skipif(not hotpath.compiled(), reason="the compiled core is not built here")
@settings(max_examples=int(os.environ.get("LOCKCHECK_EXAMPLES", "120")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(traces(), st.booleans(), st.integers(1, 300), st.sampled_from(["\n", "\r\n"]), st.booleans())
@example(["T1 acquire A@1 at=f+0x1/0x2 ts=1.5 cpu=3", "T1 release A@1 ts=2", "T2 acquire B read try",
          "T2 release B at=g+0x1/0x2"], False, 7, "\r\n", False)
def test_compiled_blocks_are_the_plain_path(lines, capture, block, newline, final) -> None:
    """The compiled core splitting blocks of bytes itself (lines cut across blocks anywhere,
    either line ending, with or without a last newline) is the plain pipeline too."""
    expected = plain(lines * 3, capture)
    assert fast(lines * 3, capture, "blocks", block, newline, final) == expected


#: a release below the top once the task's irq context changed: the locks above are taken again in
#: the new context (`reacquire_held_locks`), which marks a usage bit they lacked -- the fast paths must
#: hand that to the checker, not re-key them as a cache hit
_REACQUIRED_IN_AN_IRQ = [
    ["T1 acquire A", "T1 acquire B", "T1 release A", "T1 release B",
     "T1 acquire A", "T1 acquire B", "T1 hardirq-enter", "T1 release A", "T1 release B", "T1 hardirq-exit"],
    ["T1 irqs-off", "T1 irqs-on", "T1 acquire A", "T1 acquire B", "T1 release A", "T1 release B",
     "T2 irqs-off", "T2 irqs-on", "T2 acquire A", "T2 acquire B", "T2 softirq-enter", "T2 release A",
     "T2 release B", "T2 softirq-exit"],
]


@pytest.mark.parametrize("lines", _REACQUIRED_IN_AN_IRQ)
def test_locks_taken_again_in_another_irq_context_mark_their_usage(lines) -> None:
    expected = plain(lines * 3)
    assert [f.kind for f in expected["findings"]] == ["inconsistent-lock-state"]
    for core in CORES:
        assert fast(lines * 3, False, core) == expected, core


def test_first_finding_stops_both_alike() -> None:
    lines = ["T1 acquire A", "T1 acquire B", "T1 release B", "T1 release A",
             "T2 acquire B", "T2 acquire A", "T2 release A", "T2 release B", "T3 acquire A", "T3 acquire A"]
    results = []
    for parse in ("plain", "fast"):
        checker = Checker()
        checker.options.first = True
        checker.open_trace(False)
        events = lt.parse(lines, "t.lt") if parse == "plain" else hotpath.lt_events(checker, lines, "t.lt")
        results.append(([f.kind for f in checker.run(events)], checker.stats.events))
    assert results[0] == results[1] == (["circular-dependency"], 6)


def _shipped_traces() -> list[Path]:
    roots = [ROOT / "traces", ROOT / "tests" / "data"]
    found = []
    for root in roots:
        for path in sorted(root.rglob("*")):
            if path.is_file() and path.suffix in (".lt", ".ftrace", ".perf", ".jsonl", ".gz", ".xz", ".zst"):
                found.append(path)
    return found


def _check(path: Path, tmp_path: Path, fastpath: str, monkeypatch, capsys, pure: str = "0") -> tuple:
    monkeypatch.setenv("LOCKCHECK_FASTPATH", fastpath)
    monkeypatch.setenv("LOCKCHECK_PURE", pure)
    monkeypatch.setenv("LOCKCHECK_JOBS", "1")
    graph = tmp_path / f"graph-{fastpath}-{pure}.json"
    status = main(["check", "--format", "json", "--no-config", "--save-graph", str(graph), str(path)])
    out, err = capsys.readouterr()
    return status, json.loads(out) if out.strip() else None, err, graph.read_text() if graph.exists() else None


@pytest.mark.parametrize("path", _shipped_traces(), ids=lambda p: str(p.relative_to(ROOT)))
def test_every_shipped_trace_checks_the_same_on_the_fast_path(path, tmp_path, monkeypatch, capsys) -> None:
    """Report, JSON and saved graph alike: plain pipeline, pure-Python fast path, compiled core."""
    expected = _check(path, tmp_path, "0", monkeypatch, capsys)
    assert _check(path, tmp_path, "1", monkeypatch, capsys, pure="1") == expected
    if hotpath.compiled():
        assert _check(path, tmp_path, "1", monkeypatch, capsys, pure="0") == expected
