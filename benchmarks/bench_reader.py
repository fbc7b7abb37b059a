"""Lines per second of the `.lt` reader: the fast scanner against the lark grammar.

    .venv/bin/python benchmarks/bench_reader.py [N_LINES]

Generates N_LINES (default 200,000) lines in the shapes real traces have
(acquire with a site and sometimes a mode, flag, subclass or nest lock;
release; a few irq ops and comments), then times
- `parse`: what the reader does (fast scanner, grammar only for the rest),
- `scan_fast` alone on every line,
- `parse_line` (the lark LALR parser + transformer) on every line.
"""

from __future__ import annotations

import random
import sys
import time
from pathlib import Path
from typing import Callable, Iterable

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

from lockcheck.readers.lt import parse, parse_line, scan_fast  # noqa: E402


def generate(n: int, seed: int = 1) -> list[str]:
    """`n` lines of a plausible trace: nested acquire/release pairs over a few tasks and classes."""
    rng = random.Random(seed)
    classes = ["&mm->mmap_sem", "&rq->lock", "&anon_vma->rwlock", "mm_all_locks_mutex", "&(&zone->lock)->rlock",
               "sb_writers#3", "(wq_completion)events", "tasklist_lock"]
    out: list[str] = []
    held: dict[str, list[str]] = {}
    while len(out) < n:
        task = f"worker/{rng.randrange(16)}"
        stack = held.setdefault(task, [])
        roll = rng.random()
        if roll < 0.02:
            out.append("# a comment")
        elif roll < 0.04:
            out.append(f"{task} {rng.choice(['irqs-off', 'irqs-on', 'hardirq-enter', 'hardirq-exit'])}")
        elif stack and (roll < 0.5 or len(stack) > 4):
            out.append(f"{task} release {stack.pop()}")
        else:
            lock = f"{rng.choice(classes)}@0xffff8b9f{rng.randrange(1 << 16):04x}"
            extra = rng.choice(["", "", " read", " rread", " try", " subclass=1", " nest=&mm->mmap_sem"])
            out.append(f"{task} acquire {lock}{extra} at=func+0x{rng.randrange(4096):x}/0x190")
            stack.append(lock)
    return out


def rate(label: str, lines: list[str], run: Callable[[list[str]], object], repeat: int = 1) -> float:
    """Best CPU time of `repeat` passes of `run` over `lines`; print and return lines per second.

    CPU time, not wall time: the number should not depend on what else the
    machine is doing.
    """
    elapsed = float("inf")
    for _ in range(repeat):
        start = time.process_time()
        run(lines)
        elapsed = min(elapsed, time.process_time() - start)
    per_second = len(lines) / elapsed
    print(f"{label:<34} {per_second:>12,.0f} lines/s  ({elapsed:.2f} s)")
    return per_second


def consume(events: Callable[[list[str]], Iterable[object]]) -> Callable[[list[str]], None]:
    """A run that drops each event at once, as the checker does (no list of 200k events)."""
    def run(lines: list[str]) -> None:
        for _ in events(lines):
            pass
    return run


def main() -> None:
    n = int(sys.argv[1]) if len(sys.argv) > 1 else 200_000
    lines = generate(n)
    parse_line(lines[0])  # build the lark parser outside the timing
    print(f"{n:,} generated lines")
    reader = rate("parse (fast scanner + fallback)", lines, consume(lambda ls: parse(ls, "bench.lt")), repeat=3)
    fast = rate("scan_fast alone", lines, consume(lambda ls: (scan_fast(line, "bench.lt", 1) for line in ls)),
                repeat=3)
    slow = rate("parse_line (lark LALR)", lines, consume(lambda ls: (parse_line(line, "bench.lt", 1) for line in ls)))
    print(f"fast scanner / lark: {fast / slow:.1f}x   reader / lark: {reader / slow:.1f}x")


if __name__ == "__main__":
    main()
