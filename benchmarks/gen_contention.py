#!/usr/bin/env python3
"""Seeded generator of the sample contention traces in traces/contention/.

    python benchmarks/gen_contention.py --variant before --seed 1 -o traces/contention/before/run1.lt
    python benchmarks/gen_contention.py --write-samples     # regenerate every shipped sample

A small discrete-event simulation of the anon_vma story: four `exim`
processes on four CPUs fork (`anon_vma_clone` takes the shared root
`&anon_vma->rwsem` for write) and walk reverse mappings
(`rmap_walk_anon`), each time nesting `&mm->page_table_lock` inside.

- `before`: the rmap walk takes the rwsem for write too, so every walk
  waits for every other user (the exclusive lock of the 2012 exim
  regression);
- `after`: the rmap walk takes it for read (`anon_vma_lock_read`), so
  walks share it and only forks wait.

The lock is an rwsem with a FIFO wait queue (a reader behind a waiting
writer waits).  The trace is what a lockdep kernel would show: `acquire`
when a task asks, `contended` if it must wait, `acquired` when it has the
lock, `release`; `ts=` in seconds with microsecond resolution, `cpu=`.
Deterministic: the same arguments give the same bytes.
"""

from __future__ import annotations

import argparse
import heapq
import random
import sys
from pathlib import Path
from typing import Optional, TextIO

ROOT = Path(__file__).resolve().parents[1]
SAMPLES = ROOT / "traces" / "contention"
RWSEM = "&anon_vma->rwsem@0xffff888003a1c000"
OPS_PER_TASK = 6
TASKS = 4
FORK_SHARE = 0.25


class Sim:
    """Tasks asking for the rwsem, a FIFO queue of waiters, and the trace lines in time order."""

    def __init__(self, variant: str, seed: int) -> None:
        # one random stream per task: both variants draw the same work, only the lock mode differs
        self.rngs = [random.Random(seed * 1000 + t) for t in range(TASKS)]
        self.read_walk = variant == "after"
        self.lines: list[tuple[int, int, str]] = []  # (us, seq, text)
        self.seq = 0
        self.events: list[tuple[int, int, str, int]] = []  # (us, seq, action, task)
        self.writer: Optional[int] = None
        self.readers: set[int] = set()
        self.queue: list[tuple[int, bool]] = []  # (task, write)
        self.want: dict[int, tuple[bool, str, int]] = {}  # task -> (write, site, hold us)
        self.left = {t: OPS_PER_TASK for t in range(TASKS)}
        self.cpu = {t: t for t in range(TASKS)}

    def task(self, t: int) -> str:
        return f"exim/{2101 + t}"

    def emit(self, us: int, t: int, text: str) -> None:
        self.seq += 1
        self.lines.append((us, self.seq, f"{self.task(t)} {text} ts={10 + us / 1e6:.6f} cpu={self.cpu[t]}"))

    def schedule(self, us: int, action: str, t: int) -> None:
        self.seq += 1
        heapq.heappush(self.events, (us, self.seq, action, t))

    def run(self) -> list[str]:
        for t in range(TASKS):
            self.schedule(self.rngs[t].randint(0, 30), "ask", t)
        while self.events:
            now, _, action, t = heapq.heappop(self.events)
            if action == "ask":
                self.ask(now, t)
            else:
                self.release(now, t)
        self.lines.sort()
        return ["#lockcheck-trace v1"] + [text for _, _, text in self.lines]

    def ask(self, now: int, t: int) -> None:
        rng = self.rngs[t]
        if rng.random() < 0.15:  # the scheduler moved the task
            self.cpu[t] = rng.randrange(TASKS)
        fork = rng.random() < FORK_SHARE
        write = fork or not self.read_walk
        site = "anon_vma_clone+0x6b/0x200" if fork else "rmap_walk_anon+0x35/0x1b0"
        hold = rng.randint(20, 40) if fork else rng.randint(8, 20)
        self.want[t] = (write, site, hold)
        mode = "" if write else " read"
        self.emit(now, t, f"acquire {RWSEM}{mode} at={site}")
        if self.can_take(write) and not self.queue:
            self.take(now, t)
        else:
            self.emit(now + 1, t, f"contended {RWSEM} at={site}")  # lock_contended's ip: the caller
            self.queue.append((t, write))

    def can_take(self, write: bool) -> bool:
        return self.writer is None and (not write or not self.readers)

    def take(self, now: int, t: int) -> None:
        write, site, hold = self.want[t]
        if write:
            self.writer = t
        else:
            self.readers.add(t)
        self.emit(now, t, f"acquired {RWSEM}")
        ptl = f"&mm->page_table_lock@0xffff88800{4 + t}b20040"
        self.emit(now + 2, t, f"acquire {ptl} at={site.split('+')[0]}+0x9a/0x200")
        self.emit(now + 2, t, f"acquired {ptl}")
        self.emit(now + hold - 3, t, f"release {ptl}")
        self.schedule(now + hold, "release", t)

    def release(self, now: int, t: int) -> None:
        self.emit(now, t, f"release {RWSEM}")
        if self.writer == t:
            self.writer = None
        else:
            self.readers.discard(t)
        while self.queue and self.can_take(self.queue[0][1]):
            waiter, _ = self.queue.pop(0)
            self.take(now + 3, waiter)  # the wakeup takes a few microseconds
        self.left[t] -= 1
        if self.left[t]:
            self.schedule(now + self.rngs[t].randint(3, 25), "ask", t)


def generate(variant: str, seed: int, out: TextIO) -> None:
    for line in Sim(variant, seed).run():
        out.write(line + "\n")


def write_samples() -> None:
    for variant in ("before", "after"):
        for run in (1, 2, 3):
            path = SAMPLES / variant / f"run{run}.lt"
            path.parent.mkdir(parents=True, exist_ok=True)
            with open(path, "w", encoding="utf-8") as out:
                generate(variant, run, out)


def main(argv: Optional[list[str]] = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--variant", choices=("before", "after"), default="before")
    parser.add_argument("--seed", type=int, default=1)
    parser.add_argument("-o", "--output", default="-")
    parser.add_argument("--write-samples", action="store_true", help="regenerate traces/contention/")
    args = parser.parse_args(argv)
    if args.write_samples:
        write_samples()
        return 0
    if args.output == "-":
        generate(args.variant, args.seed, sys.stdout)
    else:
        with open(args.output, "w", encoding="utf-8") as out:
            generate(args.variant, args.seed, out)
    return 0


if __name__ == "__main__":
    sys.exit(main())
