"""Overhead of lockcheck's lock instrumentation on a lock-heavy workload.

A thread pool hammers a few locks (a bank of accounts, a global lock, a
queue, an RLock re-entered, a Condition); the same workload runs plain and
inside `lockcheck.pylocks.instrument()` (what `pytest --lockcheck` does for
a session), best of N runs each, and the slowdown ratio is printed.
Target: below 2x.

    python benchmarks/bench_plugin.py [--ops 20000] [--threads 4] [--repeat 5]
"""

from __future__ import annotations

import argparse
import concurrent.futures
import queue
import sys
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lockcheck import pylocks  # noqa: E402


def build():
    """The shared state; locks are created here, so inside instrument() they are tracked."""

    class Account:
        def __init__(self) -> None:
            self.lock = threading.Lock()
            self.balance = 100

    state = {
        "accounts": [Account() for _ in range(4)],
        "bank": threading.Lock(),
        "stats": threading.RLock(),
        "cond": threading.Condition(),
        "queue": queue.Queue(),
        "count": 0,
    }
    return state


def worker(state: dict, ops: int, seed: int) -> None:
    accounts, bank, stats, cond, q = (state[k] for k in ("accounts", "bank", "stats", "cond", "queue"))
    n = len(accounts)
    for i in range(ops):
        a = accounts[(seed + i) % n]
        b = accounts[(seed + 3 * i + 1) % n]
        if a is b:
            continue
        first, second = (a, b) if id(a) < id(b) else (b, a)  # ordered: no findings
        with bank:
            with first.lock:
                with second.lock:
                    a.balance -= 1
                    b.balance += 1
        with stats:
            with stats:
                state["count"] += 1
        if i % 16 == 0:
            with cond:
                cond.notify_all()
            q.put(i)
            q.get()


def run(ops: int, threads: int) -> float:
    state = build()
    start = time.perf_counter()
    with concurrent.futures.ThreadPoolExecutor(threads) as pool:
        list(pool.map(lambda s: worker(state, ops, s), range(threads)))
    return time.perf_counter() - start


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=20000, help="operations per thread")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--repeat", type=int, default=5)
    args = parser.parse_args(argv)
    plain = min(run(args.ops, args.threads) for _ in range(args.repeat))
    tracked = []
    for _ in range(args.repeat):
        with pylocks.instrument() as rec:
            tracked.append(run(args.ops, args.threads))
        assert not rec.findings, [f.kind for f, _ in rec.findings]
    best = min(tracked)
    acquires = args.threads * args.ops * 5
    print(f"workload: {args.threads} threads x {args.ops} ops (~{acquires:,} lock acquisitions)")
    print(f"plain:        {plain:.3f} s")
    print(f"instrumented: {best:.3f} s  ({rec.checker.stats.events:,} events in the last run)")
    print(f"slowdown: {best / plain:.2f}x (target < 2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
