#!/usr/bin/env python3
"""A trace with hundreds of thousands of findings: time and peak RSS of `lockcheck check` (issue 30).

    .venv/bin/python benchmarks/bench_findings.py                    # 1,000 classes, text and json
    .venv/bin/python benchmarks/bench_findings.py --classes 2000 --format json

The trace (`write_allpairs`) takes every pair of N lock classes in both
orders, one task per order: N*(N-1)/2 circular findings, all among one
strongly connected set of N classes.  Before issue 30 every finding was
kept in a list until the end (each with its held-lock and chain
snapshots), so memory grew with the findings: 1,000 classes took 2.5 GB.
Memory must now grow with the graph only.

Each run is `python -m lockcheck check --format F TRACE` in a child process
(its own peak RSS from `os.wait4`, as `run.py` measures); printed: events,
wall seconds, events/s, peak RSS, exit status, output bytes.  Traces are
cached under benchmarks/out/.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import time
from pathlib import Path
from typing import TextIO

ROOT = Path(__file__).resolve().parent.parent
OUT = ROOT / "benchmarks" / "out"


def write_allpairs(out: TextIO, classes: int) -> int:
    """Every pair (i < j) of `classes` classes taken as i, j by task A and as j, i by task B: the events written."""
    names = [f"cls{i:05d}" for i in range(classes)]
    out.write("#lockcheck-trace v1\n")
    events = 0
    for i in range(classes):
        a = names[i]
        lines = []
        for j in range(i + 1, classes):
            b = names[j]
            lines.append(f"A acquire {a}\nA acquire {b}\nA release {b}\nA release {a}\n"
                         f"B acquire {b}\nB acquire {a}\nB release {a}\nB release {b}\n")
        out.write("".join(lines))
        events += 8 * (classes - 1 - i)
    return events


def trace_path(classes: int) -> tuple[Path, int]:
    """The cached trace for `classes` classes (written when missing) and its number of events."""
    OUT.mkdir(parents=True, exist_ok=True)
    path = OUT / f"allpairs-{classes}.lt"
    events = 8 * classes * (classes - 1) // 2
    if not path.exists():
        tmp = path.with_suffix(".tmp")
        with open(tmp, "w") as out:
            write_allpairs(out, classes)
        tmp.rename(path)
    return path, events


def measure(trace: Path, fmt: str, extra: list[str]) -> tuple[float, float, int, int]:
    """(wall s, peak RSS MB, exit status, bytes written) of one check in a child process."""
    cmd = [sys.executable, "-m", "lockcheck", "check", "--no-progress", "--format", fmt, *extra, str(trace)]
    sink = OUT / f"{trace.stem}.{fmt}.{os.getpid()}.out"
    start = time.perf_counter()
    with open(sink, "w") as stdout:
        proc = subprocess.Popen(cmd, stdout=stdout, stderr=subprocess.DEVNULL, cwd=ROOT)
        _, status, usage = os.wait4(proc.pid, 0)
    wall = time.perf_counter() - start
    size = sink.stat().st_size
    sink.unlink()  # hundreds of MB for JSON
    return wall, usage.ru_maxrss / 1024, os.waitstatus_to_exitcode(status), size


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--classes", type=int, action="append", help="N (repeatable; default 1000)")
    parser.add_argument("--format", action="append", help="text, json, sarif (repeatable; default text and json)")
    parser.add_argument("extra", nargs="*", help="more `lockcheck check` arguments (after --)")
    args = parser.parse_args(argv)
    print(f"{'classes':>8} {'format':>6} {'events':>11} {'wall s':>8} {'events/s':>10} {'peak RSS MB':>12} "
          f"{'exit':>4} {'output MB':>10}")
    for classes in args.classes or [1000]:
        trace, events = trace_path(classes)
        for fmt in args.format or ["text", "json"]:
            wall, rss, status, size = measure(trace, fmt, args.extra)
            print(f"{classes:>8,} {fmt:>6} {events:>11,} {wall:>8.1f} {events / wall:>10,.0f} {rss:>12.1f} "
                  f"{status:>4} {size / 1e6:>10.1f}", flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
