#!/usr/bin/env python3
"""What Python itself costs on a trace: the floors lockcheck's throughput is measured against.

    python benchmarks/floors.py split TRACE.lt     # read every line and split it
    python benchmarks/floors.py chain TRACE.lt     # + a held stack and a chain key per task

`split` is the least any `.lt` reader does per line; `chain` is the least a
lockdep does per lock event once its chains are cached: a per-task stack,
a chain key hashed from the previous one, a set look-up, and a pop on
release (the innermost lock only; anything else is skipped).  No checking,
no errors, no statistics: a floor, not a checker.  `benchmarks/run.py`
runs both in the same run as lockcheck and prints lockcheck's time as a
ratio to them, which survives a noisy machine better than events/s.

Prints the number of lines (split) or of chains (chain) so the work cannot
be optimised away, and reads plain or gzip-compressed files.
"""

from __future__ import annotations

import gzip
import sys


def _open(path: str):
    if path.endswith(".gz"):
        return gzip.open(path, "rt", encoding="utf-8")
    return open(path, encoding="utf-8")


def split_floor(path: str) -> int:
    n = 0
    with _open(path) as lines:
        for line in lines:
            parts = line.split(" ")
            n += len(parts)
    return n


def chain_floor(path: str) -> int:
    stacks: dict[str, list] = {}
    cache: set = set()
    with _open(path) as lines:
        for line in lines:
            parts = line.rstrip("\n").split(" ")
            if len(parts) < 3:
                continue
            op = parts[1]
            if op == "acquire":
                stack = stacks.get(parts[0])
                if stack is None:
                    stack = stacks[parts[0]] = []
                key = hash((stack[-1][1] if stack else -1, parts[2]))
                if key not in cache:
                    cache.add(key)
                stack.append((parts[2], key))
            elif op == "release":
                stack = stacks.get(parts[0])
                if stack and stack[-1][0] == parts[2]:
                    stack.pop()
    return len(cache)


def main(argv: list[str]) -> int:
    which, path = argv
    result = {"split": split_floor, "chain": chain_floor}[which](path)
    print(result)
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
