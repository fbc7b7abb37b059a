#!/usr/bin/env python3
"""What a line costs when the fast path hands it to the full checker: microseconds per kind.

    .venv/bin/python benchmarks/bench_miss.py benchmarks/out/lt-v1-e1000000-s1.lt
    LOCKCHECK_PURE=1 .venv/bin/python benchmarks/bench_miss.py TRACE.lt

The fast path (`lockcheck.engine.fast_lt`) applies chain-cache hits itself and
yields every other line as an `Event` for `Checker.feed`.  This runs a
`.lt` trace that way and times, in process CPU time, each `feed` call,
sorted by what the event was: an acquisition that added a dependency
(`+dep`), one that validated a new chain without one (`+chain`), one that
validated nothing new (a trylock, a usage bit, a deep stack); a release
(out of order, or of a merged entry) likewise, by what re-acquiring the
locks above the released one added; an irq-state change, an exit,
anything else.  The rest of the run (reading, the fast path, turning a
missed line into an `Event` and the task's stack into `HeldLock`s) is
printed as one figure, and the reading of the missed lines alone
(`lt.scan_fast` over them again, after the run) as another.

Process CPU time per call costs a clock read of its own (~0.3 µs each,
printed as `clock` per pair): the per-kind figures include it.  Run before
and after a change in the same session, alternating, and compare the
minimum of several runs: the machine is shared.

A fed event costs several times what the same call costs in a loop of its
own (a re-acquisition after an out-of-order release: ~3.6 µs the first
time, ~1.4 µs at once again, in the 1M trace): between two misses the fast
path reads dozens of lines, and the checker's objects (held locks, class
and edge dicts) are no longer in the CPU's caches.  What makes a miss
cheaper is touching fewer objects, more than running fewer bytecodes.
"""

from __future__ import annotations

import argparse
import gc
import sys
import time
from collections import defaultdict
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT))

from lockcheck.engine import fast_lt as hotpath  # noqa: E402
from lockcheck.lockdep.checker import Checker  # noqa: E402
from lockcheck.events import ACQUIRE, EXIT, IRQ_OPS, RELEASE  # noqa: E402
from lockcheck.readers import lt  # noqa: E402

#: the kinds of fed event, in the order printed
KINDS = ("acquire+dep", "acquire+chain", "acquire", "release+dep", "release+chain", "release", "irq", "exit",
         "other")


def _kind(ev, checker: Checker, chains: int, deps: int, added: list) -> str:
    """What one fed event turned out to be (read after `feed`: the counters it moved)."""
    op = ev.op
    if op is ACQUIRE or op is RELEASE:
        # a release validates the chains of the locks it moves (lockdep's reacquire_held_locks)
        if added[0] != deps:
            return op + "+dep"
        if checker.stats.chains != chains:
            return op + "+chain"
        return op
    if op in IRQ_OPS:
        return "irq"
    if op is EXIT:
        return "exit"
    return "other"


def measure(path: str) -> dict:
    """One timed run over `path`: per-kind counts and CPU nanoseconds, the total, the missed lines."""
    clock = time.process_time_ns
    checker = Checker()
    checker.open_trace(False)
    feed = checker.feed
    stats = checker.stats
    added = [0]  # new dependencies so far: the graph's own edge insertion, counted
    add_edge = checker.graph._add_edge

    def counted(prev: str, next: str, data: dict) -> None:
        added[0] += 1
        add_edge(prev, next, data)

    checker.graph._add_edge = counted  # type: ignore[method-assign]
    counts: dict = defaultdict(int)
    spent: dict = defaultdict(int)
    missed: list[int] = []
    start = clock()
    with open(path, encoding="utf-8") as lines:
        for ev in hotpath.lt_events(checker, lines, path):
            chains, deps = stats.chains, added[0]
            before = clock()
            feed(ev)
            after = clock()
            kind = _kind(ev, checker, chains, deps, added)
            counts[kind] += 1
            spent[kind] += after - before
            missed.append(ev.line)
    total = clock() - start
    return {"counts": counts, "spent": spent, "total": total, "events": stats.events, "missed": missed,
            "findings": len(checker.findings)}


def scan_cost(path: str, numbers: list[int]) -> tuple[int, int]:
    """CPU nanoseconds `lt.scan_fast` takes over the missed lines alone, and their count."""
    wanted = set(numbers)
    with open(path, encoding="utf-8") as lines:
        texts = [(number, line.rstrip("\r\n")) for number, line in enumerate(lines, 1) if number in wanted]
    scan = lt.scan_fast
    start = time.process_time_ns()
    for number, text in texts:
        scan(text, path, number)
    return time.process_time_ns() - start, len(texts)


def clock_cost() -> float:
    """Nanoseconds of one pair of clock reads (included in every per-kind figure)."""
    clock = time.process_time_ns
    start = clock()
    for _ in range(100_000):
        clock()
        clock()
    return (clock() - start) / 100_000


def main(argv: list[str]) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("trace", help="a .lt trace (e.g. benchmarks/out/lt-v1-e1000000-s1.lt)")
    parser.add_argument("--runs", type=int, default=3, help="runs; the minimum of each figure is printed")
    args = parser.parse_args(argv)
    runs = [measure(args.trace) for _ in range(max(1, args.runs))]
    gc.collect()
    core = "compiled" if hotpath.compiled() else "pure"
    first = runs[0]
    print(f"{args.trace}: {first['events']} events, {len(first['missed'])} fed to the checker, "
          f"{first['findings']} findings ({core} fast path, min of {len(runs)} runs)")
    print(f"{'kind':<15}{'count':>9}{'ms':>10}{'us/event':>10}")
    fed = 0.0
    for kind in KINDS:
        count = first["counts"].get(kind, 0)
        if not count:
            continue
        ns = min(run["spent"].get(kind, 0) for run in runs)
        fed += ns
        print(f"{kind:<15}{count:>9}{ns / 1e6:>10.1f}{ns / 1e3 / count:>10.2f}")
    total = min(run["total"] for run in runs)
    misses = len(first["missed"])
    print(f"{'feed, all':<15}{misses:>9}{fed / 1e6:>10.1f}{fed / 1e3 / max(misses, 1):>10.2f}")
    scan_ns, scanned = min(scan_cost(args.trace, first["missed"]) for _ in range(len(runs)))
    print(f"{'scan missed':<15}{scanned:>9}{scan_ns / 1e6:>10.1f}{scan_ns / 1e3 / max(scanned, 1):>10.2f}")
    rest = total - fed
    print(f"{'rest of run':<15}{first['events']:>9}{rest / 1e6:>10.1f}{rest / 1e3 / max(first['events'], 1):>10.3f}")
    print(f"{'total':<15}{first['events']:>9}{total / 1e6:>10.1f}{total / 1e3 / max(first['events'], 1):>10.3f}")
    print(f"clock: {clock_cost():.0f} ns per timed call (in each per-kind figure)")
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
