"""The compiled core's held overlay: pushes kept in C until a line goes to the Python side.

Why: a push the core applies was a 14-tuple, the line as a str, its number and the chain key as
ints, all made at the push and freed at the release -- most of a 10M-event run's allocations and
cache misses.  The overlay (`OvEntry` in `_speedups.c`) keeps them as bytes and C fields and
turns them into those very tuples only when the Python side may look (a line passed on, the
end, `take`, `stop`).  It must change nothing but the time: the same lines reach the Python
side with it as without it (a stale chain key or cpu in C would send acquisitions to the Python
loop, unseen by the results), and every run ends as the plain pipeline's.
"""

from __future__ import annotations

import functools
import importlib.util
import io
import sys

import pytest

from lockcheck.engine import fast_lt as hotpath
from lockcheck.lockdep.checker import Checker
from tests.test_hotpath import ROOT, fast, plain

pytestmark = pytest.mark.skipif(not hotpath.compiled(), reason="the compiled core is not built here")


def _generated(events: int, seed: int) -> list[str]:
    spec = importlib.util.spec_from_file_location("gen_trace", ROOT / "benchmarks" / "gen_trace.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_trace", module)
    spec.loader.exec_module(module)  # type: ignore[union-attr]
    out = io.StringIO()
    module.generate(out, events, seed, classes=60, paths=40, tasks=6)
    return out.getvalue().splitlines()


class _Recorded:
    """The compiled core's filter (overlay on or off), recording the lines it passes on."""

    def __init__(self, passed: list, overlay: bool, *args) -> None:
        from lockcheck.engine._speedups import LineFilter
        self.filter = LineFilter(*args)
        self.filter.use_overlay(overlay)
        self.passed = passed

    def __iter__(self) -> _Recorded:
        return self

    def __next__(self) -> tuple:
        numbered = next(self.filter)
        self.passed.append(numbered[0])
        return numbered

    def __getattr__(self, name: str):
        return getattr(self.filter, name)


def _passed_on(lines: list[str], overlay: bool, monkeypatch) -> tuple[list[int], dict]:
    passed: list = []
    monkeypatch.setattr(hotpath, "_compiled_filter", lambda: functools.partial(_Recorded, passed, overlay))
    checker = Checker()
    checker.open_trace(False)
    for ev in hotpath.lt_events(checker, lines, "gen.lt"):
        checker.feed(ev)
    held = {key: [entry if entry.__class__ is tuple else (entry.lock, entry.instance, entry.prev_chain_key)
                  for entry in task.held] + [task.chain_key, task.cpu] for key, task in checker.tasks.items()}
    return passed, held


LINES = [
    "T1 irqs-on", "T2 irqs-on",
    "T1 acquire A@1", "T1 acquire B at=f+0x1/0x2", "T2 acquire A@2 ts=1.5 cpu=3", "T1 release B",
    "T2 release A@2 ts=1.6 cpu=1", "T1 release A@1",
] * 3 + [
    "T1 acquire A@1", "T1 acquire B", "T2 acquire A@2",
    "T3 acquire C",  # a new class (the checker's) while T1 and T2 hold overlay entries
    "T1 release A@1",  # below the top: on the held list
    "T1 release B ts=2 cpu=2", "T2 irqs-off", "T2 release A@2", "T2 irqs-on",
    "T1 acquire A@1", "T1 release A@1 at=g+0x1/0x2", "T1 exit", "T3 release C",
]


#: more tasks holding overlay entries at once than the core keeps overlays for (OV_SLOTS / 2):
#: making room flushes them all, mid-run
MANY = [f"T{i} acquire A@{i}" for i in range(600)] + [f"T{i} acquire B" for i in range(600)]
MANY = MANY + [f"T{i} release B" for i in range(600)] + [f"T{i} release A@{i}" for i in range(600)]
MANY = MANY * 2 + ["T7 acquire A@7", "T7 acquire C", "T7 release C", "T7 release A@7"]


@pytest.mark.parametrize("lines", [LINES, MANY, _generated(3000, 1), _generated(3000, 7)],
                         ids=["lines", "many", "gen1", "gen7"])
def test_the_overlay_passes_on_what_the_tuples_do(lines, monkeypatch) -> None:
    without = _passed_on(lines, False, monkeypatch)
    with_overlay = _passed_on(lines, True, monkeypatch)
    assert with_overlay == without
    assert len(without[0]) < len(lines) / 2  # (the core applied most lines)


#: releases below the top and contention of the overlay's own entries: applied in the overlay
#: (overlay_release_below, overlay_contention), the chains re-keyed there hits of the warm-up's
BELOW = [
    "T1 acquire A", "T1 acquire B", "T1 acquire C", "T1 release C", "T1 release B", "T1 release A",
    "T1 acquire A", "T1 acquire C", "T1 acquire D", "T1 release D", "T1 release C", "T1 release A",
] * 2 + [
    "T1 acquire A", "T1 acquire B", "T1 acquire C",
    "T1 contended B ts=3 cpu=4", "T1 acquired B",  # held below the top, in the overlay
    "T1 release B at=f+0x1/0x2",  # below the top: C re-keyed onto A's chain
    "T1 acquire D",  # a hit only on the re-keyed chain
    "T1 contended C", "T1 release D", "T1 release A", "T1 acquire E", "T1 release C ts=4 cpu=1",
    "T1 release E",
]


@pytest.mark.parametrize("overlay", [False, True])
def test_releases_below_the_top_are_applied_in_the_overlay(overlay, monkeypatch) -> None:
    passed, held = _passed_on(BELOW, overlay, monkeypatch)
    # new chains only (the warm-up's, A and C below the top re-keyed onto chains never seen, E)
    assert passed == [1, 2, 3, 8, 9, 34, 35, 36]
    assert (passed, held) == _passed_on(BELOW, not overlay, monkeypatch)
    assert fast(BELOW, False, "compiled") == plain(BELOW)


@pytest.mark.parametrize("lines", [LINES, MANY, _generated(3000, 3)], ids=["lines", "many", "gen3"])
def test_the_overlay_runs_as_the_plain_pipeline(lines) -> None:
    expected = plain(lines)
    for core in ("compiled", "blocks"):
        assert fast(lines, False, core) == expected, core


def test_chain_keys_are_probed_without_new_ints_on_this_interpreter() -> None:
    """`probe_of` passed its check against `PyLong_FromSsize_t` at import (CPython 3.11's int
    layout, up to 3.11): the overlay's pushes make no int; elsewhere it makes them, alike in results."""
    import platform
    import sys

    from lockcheck.engine import _speedups
    expected = int(platform.python_implementation() == "CPython" and sys.version_info < (3, 12)
                   and sys.int_info.bits_per_digit == 30)
    assert _speedups.PROBE_INTS == expected


def test_chain_keys_are_hashed_from_kept_hashes_on_this_interpreter() -> None:
    """`hash3_lanes` (the int's hash computed, the class's kept) passed its check against the
    tuple's hash at import wherever the core's tuple hash is the interpreter's (64-bit CPython):
    the overlay's pushes read neither the class's str nor an int."""
    import platform
    import sys

    from lockcheck.engine import _speedups
    expected = int(platform.python_implementation() == "CPython" and sys.hash_info.width == 64
                   and sys.hash_info.modulus == 2**61 - 1)
    assert _speedups.HASH_LANES == expected


#: class names longer than the bytes the class table keeps of them (CLASS_INLINE), two alike in those
LONG = "&" + "very_long_lock_class_name_" * 4
LONG_LINES = [f"T1 acquire {LONG}a@1", f"T1 acquire {LONG}b", f"T1 release {LONG}b", f"T1 release {LONG}a@1",
              f"T1 acquire {LONG}b", f"T1 acquire {LONG}a@2", f"T1 release {LONG}a@2", f"T1 release {LONG}b"] * 3


def test_long_class_names_run_as_the_plain_pipeline() -> None:
    assert len(LONG) > 72
    expected = plain(LONG_LINES)
    assert "circular-dependency" in [f.kind for f in expected["findings"]]
    for core in ("compiled", "blocks"):
        assert fast(LONG_LINES, False, core) == expected, core


#: acquisitions _scan_tail reads (a subclass, a nest lock), pushed onto the overlay with their info:
#: merged onto the top by their nest lock, released by another instance, their nest lock not held
NESTED = [
    "T1 acquire C", "T1 acquire A@1 nest=C subclass=1", "T1 acquire A@2 nest=C subclass=1",
    "T1 acquire A@3 nest=C subclass=1", "T1 release C", "T1 release A@2", "T1 release A@1", "T1 release A@3",
    "T2 acquire X", "T2 acquire D", "T2 acquire A@1", "T2 release A@1", "T2 release D", "T2 release X",
    "T2 acquire X", "T2 acquire B subclass=2", "T2 acquire D", "T2 release D", "T2 release B", "T2 release X",
] * 3 + [
    "T2 acquire X", "T2 acquire D", "T2 acquire A@1 nest=C",  # a cached chain, C not held: the checker's
    "T2 release A@1", "T2 release D", "T2 release X",
] * 2 + [  # (the second time, its text known: the cores' own nest check)
    "T2 acquire X", "T2 acquire B subclass=2", "T2 acquire D", "T2 release B",  # below the top
    "T2 release D", "T2 release X", "T1 acquire C", "T1 acquire A@1 nest=C subclass=1", "T1 release Z",
]


def test_subclass_and_nest_acquisitions_run_as_the_plain_pipeline(monkeypatch) -> None:
    expected = plain(NESTED)
    kinds = {(f.kind, f.location) for f in expected["findings"]}
    assert {("nest-lock-not-held", "gen.lt:63"), ("unlock-imbalance", "gen.lt:81")} <= kinds
    for core in ("compiled", "blocks"):
        assert fast(NESTED, False, core) == expected, core
    # (the overlay finds a nest lock among its own entries where the tuple path, meeting a HeldLock
    # below, asks the checker: it may pass on fewer lines, never others, and ends alike)
    (passed, held), (passed_without, held_without) = (_passed_on(NESTED, True, monkeypatch),
                                                      _passed_on(NESTED, False, monkeypatch))
    assert set(passed) <= set(passed_without) and held == held_without
    assert {63, 69, 81} <= set(passed)  # (69: the same line again, reported once; the checker's all the same)


#: an acquisition whose text the core keeps with its info (a subclass: _scan_tail's), its class
#: unregistered and taken again: the kept info names the old node, whose usage the new one lacks
FORGOTTEN = [
    "T1 irqs-on", "T1 hardirq-enter", "T1 acquire A@1 subclass=1", "T1 release A@1", "T1 hardirq-exit",
] * 3 + [
    "T2 unregister A",
    "T1 acquire A@1 subclass=1", "T1 release A@1",  # HARDIRQ-ON-W on the new node (the checker's)
    "T1 hardirq-enter", "T1 acquire A@1 subclass=1", "T1 release A@1", "T1 hardirq-exit",  # IN-HARDIRQ-W: a report
]


def test_unregistered_classes_forget_the_kept_infos() -> None:
    expected = plain(FORGOTTEN)
    assert "inconsistent-lock-state" in {f.kind for f in expected["findings"]}, expected["findings"]
    for core in ("compiled", "blocks"):
        assert fast(FORGOTTEN, False, core) == expected, core
