#!/usr/bin/env python3
"""Adversarial trace shapes: what makes a lock checker's cost grow with the graph, not the trace.

    python benchmarks/shapes.py chain-backwards 4000 -o /tmp/c.lt
    python benchmarks/shapes.py addresses 3000000 --format ftrace -o /tmp/a.ftrace

Each shape is small in events and hard for a naive incremental checker:

- `chain-backwards N`: the dependencies C0 -> C1 -> ... -> CN arrive last
  link first (C(N-1) -> CN, then C(N-2) -> C(N-1), ...), each new class
  landing in front of everything seen so far: a topological order kept by
  appending has to move the whole chain at every step, and a search from
  the new dependency's head walks the whole chain;
- `chain-registered N`: the same backwards chain over classes first seen on
  their own in reverse order (CN first): positions given on first sight are
  exactly wrong for every dependency;
- `chain-rooted N`: the backwards chain again, each new class first taken
  under one root class (a dependency into it before it links to the
  chain), so no class is a source when it gets linked;
- `chain-irq N`: a chain built first link first in a trace where one
  class is irq-safe: every new dependency asks whether an irq-safe class
  leads to it (lockdep's check_irq_usage searches backwards);
- `star-in N` / `star-out N`: N classes taken before (after) one hub class;
- `fifo N`: one task takes N locks nested and releases them first-taken
  first (a queue), so every release moves everything held above it
  (lockdep's reacquire_held_locks); the depth limit is reported once;
- `dense N`: a graph-heavy trace: N classes, each taken (in a scrambled
  order) with ten classes of higher index nested inside it, so about 10N
  dependencies (100k classes: about 950k) in an acyclic graph whose
  classes arrive out of order: every new dependency asks for a cycle
  search, which a kept topological order must answer without walking
  what is reachable;
- `addresses N`: N distinct lock instances (addresses) of a few classes,
  each taken and released once: per-address state must be freed with the
  lock.  `--format ftrace` writes the same shape as an ftrace capture.

Every shape checks clean except `fifo` (one `lock-depth-exceeded` finding:
lockdep's MAX_LOCK_DEPTH).  Deterministic: same arguments, same bytes.
"""

from __future__ import annotations

import argparse
import sys
import zlib
from typing import Callable, Iterator, TextIO

#: bump when a shape's output changes (benchmarks/run.py keys its cache on it)
SHAPES_VERSION = 1  # chain-rooted added: the other shapes unchanged


def _cls(i: int) -> str:
    return f"&shape->lock{i}"


def chain_backwards(n: int) -> Iterator[str]:
    for i in range(n - 1, -1, -1):
        yield f"T{i % 4} acquire {_cls(i)}"
        yield f"T{i % 4} acquire {_cls(i + 1)}"
        yield f"T{i % 4} release {_cls(i + 1)}"
        yield f"T{i % 4} release {_cls(i)}"


def chain_registered(n: int) -> Iterator[str]:
    for i in range(n, -1, -1):
        yield f"T0 acquire {_cls(i)}"
        yield f"T0 release {_cls(i)}"
    yield from chain_backwards(n)


def chain_rooted(n: int) -> Iterator[str]:
    """A chain built backwards whose every new class is first taken under one root class.

    Each class has a dependency into it (root -> Ci) before it links to the
    chain (Ci -> C(i+1)), so the O(1) move of a class that nothing leads to
    does not apply: the search for a cycle and the reordering both face the
    whole chain built so far (Pearce-Kelly's worst case).
    """
    for i in range(n - 1, -1, -1):
        yield f"T{i % 4} acquire &shape->root"
        yield f"T{i % 4} acquire {_cls(i)}"
        yield f"T{i % 4} release {_cls(i)}"
        yield f"T{i % 4} release &shape->root"
        yield f"T{i % 4} acquire {_cls(i)}"
        yield f"T{i % 4} acquire {_cls(i + 1)}"
        yield f"T{i % 4} release {_cls(i + 1)}"
        yield f"T{i % 4} release {_cls(i)}"


def chain_irq(n: int) -> Iterator[str]:
    """A chain built first link first, in a trace where some class is irq-safe."""
    yield "T0 hardirq-enter"
    yield "T0 acquire &shape->irq_lock"
    yield "T0 release &shape->irq_lock"
    yield "T0 hardirq-exit"
    for i in range(n):
        yield f"T{i % 4} acquire {_cls(i)}"
        yield f"T{i % 4} acquire {_cls(i + 1)}"
        yield f"T{i % 4} release {_cls(i + 1)}"
        yield f"T{i % 4} release {_cls(i)}"


def star_in(n: int) -> Iterator[str]:
    for i in range(n):
        yield f"T{i % 4} acquire {_cls(i)}"
        yield f"T{i % 4} acquire &shape->hub"
        yield f"T{i % 4} release &shape->hub"
        yield f"T{i % 4} release {_cls(i)}"


def star_out(n: int) -> Iterator[str]:
    for i in range(n):
        yield f"T{i % 4} acquire &shape->hub"
        yield f"T{i % 4} acquire {_cls(i)}"
        yield f"T{i % 4} release {_cls(i)}"
        yield f"T{i % 4} release &shape->hub"


def fifo(n: int) -> Iterator[str]:
    for i in range(n):
        yield f"T0 acquire {_cls(i)}"
    for i in range(n):
        yield f"T0 release {_cls(i)}"


def dense(n: int) -> Iterator[str]:
    step = 7919 if n % 7919 else 7927  # a prime that does not divide n: k -> k * step % n permutes the classes
    for k in range(n):
        i = (k * step) % n
        task = f"T{k % 4}"
        yield f"{task} acquire {_cls(i)}"
        for m in range(10 if i < n - 1 else 0):
            j = i + 1 + zlib.crc32(f"{i}:{m}".encode()) % (n - i - 1)
            yield f"{task} acquire {_cls(j)}"
            yield f"{task} release {_cls(j)}"
        yield f"{task} release {_cls(i)}"


def addresses(n: int) -> Iterator[str]:
    for i in range(n):
        lock = f"{_cls(i % 8)}@0x{0xffff888000000000 + 64 * i:x}"
        yield f"T{i % 4} acquire {lock}"
        yield f"T{i % 4} release {lock}"


SHAPES: dict[str, Callable[[int], Iterator[str]]] = {
    "chain-backwards": chain_backwards,
    "chain-registered": chain_registered,
    "chain-rooted": chain_rooted,
    "chain-irq": chain_irq,
    "star-in": star_in,
    "star-out": star_out,
    "fifo": fifo,
    "dense": dense,
    "addresses": addresses,
}
#: findings a lockdep-faithful checker reports for each shape (all others: none)
EXPECTED_FINDINGS = {"fifo": ["lock-depth-exceeded"]}


#: shape -> the sizes benchmarks/run.py measures its growth curve at (`-ftrace`: the same as a capture)
SIZES = {
    "chain-backwards": [1000, 2000, 4000, 8000, 16000],
    "chain-registered": [1000, 2000, 4000, 8000, 16000],
    "chain-rooted": [1000, 2000, 4000, 8000],
    "chain-irq": [1000, 2000, 4000, 8000, 16000],
    "star-in": [2000, 4000, 8000],
    "star-out": [2000, 4000, 8000],
    "fifo": [500, 1000, 2000, 4000],
    "dense": [12_500, 25_000, 50_000, 100_000],
    "addresses": [250_000, 1_000_000, 3_000_000],
    "addresses-ftrace": [250_000, 1_000_000, 3_000_000],
}
#: the same for `run.py --shapes quick` (the default: fits the benchmark's 10-minute budget)
QUICK_SIZES = {
    "chain-backwards": [1000, 4000, 16000],
    "chain-registered": [1000, 4000, 16000],
    "chain-rooted": [1000, 2000, 4000],
    "chain-irq": [1000, 4000, 16000],
    "star-in": [2000, 8000],
    "star-out": [2000, 8000],
    "fifo": [500, 1000, 2000],
    "dense": [12_500, 50_000],
    "addresses": [250_000, 1_000_000],
    "addresses-ftrace": [250_000, 1_000_000],
}


def as_ftrace(lines: Iterator[str]) -> Iterator[str]:
    """The same events as an ftrace capture (6.1 layout, names on acquire only)."""
    yield "# tracer: nop"
    yield "#"
    yield "#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION"
    yield "#              | |         |   |||||     |         |"
    for i, line in enumerate(lines):
        task, op, lock = line.split(" ")
        name, _, address = lock.partition("@")
        address = address[2:] if address else f"{0xffffffff81000000 + zlib.crc32(name.encode()):016x}"
        pid = 100 + int(task[1:])
        stamp = f"{10 + i / 1e6:.6f}"
        body = f"lock_acquire: {address} {name}" if op == "acquire" else f"lock_release: {address} "
        yield f"          shape-{pid}     [00{pid % 2}] ...1.  {stamp}: {body}"


def write(shape: str, n: int, out: TextIO, fmt: str = "lt") -> int:
    """Write shape `shape` of size `n` to `out`; the number of events written."""
    lines = SHAPES[shape](n)
    count = 0
    if fmt == "ftrace":
        for line in as_ftrace(lines):
            out.write(line + "\n")
            count += not line.startswith("#")
        return count
    out.write("#lockcheck-trace v1\n")
    for line in lines:
        out.write(line + "\n")
        count += 1
    return count


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("shape", choices=sorted(SHAPES))
    ap.add_argument("n", type=int)
    ap.add_argument("--format", choices=("lt", "ftrace"), default="lt")
    ap.add_argument("-o", "--output", default="-")
    args = ap.parse_args(argv)
    if args.output == "-":
        write(args.shape, args.n, sys.stdout, args.format)
    else:
        with open(args.output, "w", encoding="utf-8") as out:
            write(args.shape, args.n, out, args.format)
    return 0


if __name__ == "__main__":
    sys.exit(main())
