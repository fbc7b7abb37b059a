"""Overhead of lockcheck's lock instrumentation on a lock-heavy workload.

A thread pool hammers a few locks (a bank of accounts, a global lock, a
queue, an RLock re-entered, a Condition); the same workload runs plain and
inside `lockcheck.python.instrument.instrument()` (what `pytest --lockcheck` does for
a session), N runs each, alternating, and the ratio of the best of each is printed.
Target: below 2x.

    python benchmarks/bench_plugin.py [--ops 20000] [--threads 4] [--repeat 5] [--waits]
    python benchmarks/bench_plugin.py --suite [--repeat 3] [--waits]
    python benchmarks/bench_plugin.py --pair [--repeat 15]

The first form is the worst case: critical sections that do nothing, so
the cost of tracking each acquire and release is all there is.  `--suite`
measures what a project sees: a generated pytest suite whose tests run
thread pools over shared caches and counters guarded by locks (with the
small amount of work real code does under a lock), timed end to end as
`pytest` and `pytest --lockcheck`.  `--pair` prints the figure issue 23 holds the plugin to: CPU nanoseconds
per uncontended acquire+release (`with lock: pass` in a loop, one thread)
of a plain and a tracked `Lock` and `RLock`, best of N batches, the plain
and tracked batches alternating.  `--waits` adds what `--lockcheck-waits`
patches (`lockcheck.python.dept`) to the instrumented run (the interrupt contexts
of `lockcheck.python.interrupts` are on in both forms, as in the plugin by default).
"""

from __future__ import annotations

import argparse
import concurrent.futures
import os
import queue
import subprocess
import sys
import tempfile
import threading
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import lockcheck  # noqa: E402
from lockcheck.python import instrument as pylocks  # noqa: E402


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
                with lockcheck.nested(second.lock, 1):  # same class, ordered by id
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


SUITE_TEST = '''
import concurrent.futures
import json
import threading


class Cache:
    def __init__(self):
        self._lock = threading.Lock()
        self._data = {}
        self.hits = 0

    def get(self, key, make):
        with self._lock:
            if key in self._data:
                self.hits += 1
                return self._data[key]
        value = make(key)
        with self._lock:
            self._data.setdefault(key, value)
            return self._data[key]


class Stats:
    def __init__(self):
        self._lock = threading.RLock()
        self.counts = {}

    def add(self, name):
        with self._lock:
            self.counts[name] = self.counts.get(name, 0) + 1


def render(key):
    return json.dumps({"key": key, "items": [key * i for i in range(8)], "name": f"item-{key}"})


def work(cache, stats, n):
    for i in range(n):
        text = cache.get(i % 64, render)
        stats.add(text[:12])


@pytest.mark.parametrize("round", range(ROUNDS))
def test_pool(round):
    cache, stats = Cache(), Stats()
    with concurrent.futures.ThreadPoolExecutor(4) as pool:
        list(pool.map(lambda _: work(cache, stats, OPS), range(4)))
    assert sum(stats.counts.values()) == 4 * OPS
'''


def run_suite(repeat: int, rounds: int = 20, ops: int = 500, waits: bool = False) -> tuple[float, float]:
    """Best-of-`repeat` wall time of a generated lock-heavy suite, without and with --lockcheck."""
    with tempfile.TemporaryDirectory() as tmp:
        test = Path(tmp) / "test_lockheavy.py"
        test.write_text("import pytest\n" + SUITE_TEST.replace("ROUNDS", str(rounds)).replace("OPS", str(ops)))
        base = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", str(test)]
        env = dict(os.environ, PYTHONPATH=str(Path(__file__).resolve().parent.parent))

        def timed(extra: list[str]) -> float:
            start = time.perf_counter()
            proc = subprocess.run(base + extra, cwd=tmp, env=env, capture_output=True, text=True)
            took = time.perf_counter() - start
            if proc.returncode != 0:
                raise SystemExit(f"suite failed ({' '.join(extra) or 'plain'}):\n{proc.stdout[-2000:]}")
            return took

        checked = ["--lockcheck"] + (["--lockcheck-waits"] if waits else [])
        runs = [(timed([]), timed(checked)) for _ in range(repeat)]  # alternating, as the worst case
        return min(plain for plain, _ in runs), min(tracked for _, tracked in runs)


def _pair_batch(lock, n: int) -> float:
    """CPU nanoseconds per `with lock: pass` over n iterations (the loop's own cost included, as in
    the plain run it is compared with)."""
    start = time.thread_time_ns()
    for _ in range(n):
        with lock:
            pass
    return (time.thread_time_ns() - start) / n


def run_pairs(repeat: int, n: int = 200_000) -> dict:
    """Best ns per acquire+release of each kind, plain and tracked (alternating batches)."""
    best: dict = {}
    with pylocks.instrument() as rec:
        tracked = {"Lock": threading.Lock(), "RLock": threading.RLock()}
    plain = {"Lock": threading.Lock(), "RLock": threading.RLock()}
    for kind in ("Lock", "RLock"):
        assert type(tracked[kind]) is not type(plain[kind]), "the tracked lock is not instrumented"
    with pylocks.instrument(rec):
        for _ in range(repeat):
            for kind in ("Lock", "RLock"):
                for how, lock in (("plain", plain[kind]), ("tracked", tracked[kind])):
                    ns = _pair_batch(lock, n)
                    best[kind, how] = min(best.get((kind, how), ns), ns)
    assert not rec.findings
    return best


def _positive(text: str) -> int:
    value = int(text)
    if value < 1:
        raise argparse.ArgumentTypeError("must be at least 1")
    return value


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--ops", type=int, default=20000, help="operations per thread")
    parser.add_argument("--threads", type=int, default=4)
    parser.add_argument("--repeat", type=_positive, default=None,
                        help="runs of each (default: 5; --suite 3; --pair 15 batches)")
    parser.add_argument("--suite", action="store_true", help="time a generated pytest suite instead")
    parser.add_argument("--waits", action="store_true", help="also check waits on events (--lockcheck-waits)")
    parser.add_argument("--pair", action="store_true",
                        help="CPU ns per uncontended acquire+release, plain and tracked Lock/RLock")
    args = parser.parse_args(argv)
    if args.pair:
        best = run_pairs(args.repeat or 15)
        print(f"{'kind':6} {'plain ns':>9} {'tracked ns':>11} {'overhead ns':>12} {'ratio':>6}")
        for kind in ("Lock", "RLock"):
            plain, tracked = best[kind, "plain"], best[kind, "tracked"]
            print(f"{kind:6} {plain:9.0f} {tracked:11.0f} {tracked - plain:12.0f} {tracked / plain:6.2f}")
        return 0
    if args.suite:
        plain, tracked = run_suite(min(args.repeat or 3, 3), waits=args.waits)
        print("suite: 20 tests, each a 4-thread pool over a lock-guarded cache and an RLock-guarded counter")
        print(f"pytest:             {plain:.2f} s")
        print(f"pytest --lockcheck: {tracked:.2f} s")
        print(f"slowdown: {tracked / plain:.2f}x (target < 2x)")
        return 0
    plains, tracked = [], []
    from lockcheck.python import interrupts as pyirq, dept as waits

    for _ in range(args.repeat or 5):
        # alternating plain and instrumented runs: a load that comes and goes on a shared
        # machine hits both alike, and the best of each is compared
        plains.append(run(args.ops, args.threads))
        with pylocks.instrument() as rec:
            pyirq.start(rec)
            if args.waits:
                waits.start(rec)
            try:
                tracked.append(run(args.ops, args.threads))
            finally:
                waits.stop()
                pyirq.stop(rec)
        assert not rec.findings, [f.kind for f, _ in rec.findings]
    plain, best = min(plains), min(tracked)
    acquires = args.threads * args.ops * 5
    print(f"workload: {args.threads} threads x {args.ops} ops (~{acquires:,} lock acquisitions)")
    print(f"plain:        {plain:.3f} s")
    print(f"instrumented: {best:.3f} s  ({rec.checker.stats.events:,} events in the last run)")
    print(f"slowdown: {best / plain:.2f}x (target < 2x)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
