"""What tracking costs an asyncio lock: acquire + release of `asyncio.Lock`, `Semaphore`,
`BoundedSemaphore` and `Condition` in one task, plain and inside `lockcheck.instrument()`
(what `pytest --lockcheck` does for a session), best of N runs each, alternating.

    python benchmarks/bench_asyncio.py [--ops 100000] [--repeat 5]

Prints, per primitive, nanoseconds per acquire+release plain and tracked, their ratio, whether
instrument() tracks it at all, and the peak RSS of the process.  Issue 24's target for asyncio
is <= 3x plain; the hit path is compiled (lockcheck/python/_tracked.c: `async_acquired`,
`async_released`), `LOCKCHECK_PURE=1` measures the pure path.  `--clock cpu` times the process's
CPU time instead of the wall clock: steadier on a machine other work shares.
"""

from __future__ import annotations

import argparse
import asyncio
import resource
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import lockcheck  # noqa: E402
from lockcheck.python import tracked as _tracked  # noqa: E402

PRIMITIVES = {
    "Lock": lambda: asyncio.Lock(),
    "Semaphore": lambda: asyncio.Semaphore(2),
    "BoundedSemaphore": lambda: asyncio.BoundedSemaphore(2),
    "Condition": lambda: asyncio.Condition(),
}


_clock = time.perf_counter


async def _loop(make, ops: int) -> float:
    primitive = make()  # made inside the run: tracked when the run is instrumented
    started = _clock()
    for _ in range(ops):
        async with primitive:
            pass
    return _clock() - started


def _is_tracked(name: str) -> bool:
    """Whether instrument() tracks this primitive: its acquire is an event the recorder sees."""
    with lockcheck.instrument() as rec:
        before = rec.summary().events
        asyncio.run(_loop(PRIMITIVES[name], 1))
        return rec.summary().events > before


def _once(name: str, ops: int, tracked: bool) -> float:
    make = PRIMITIVES[name]
    if not tracked:
        return asyncio.run(_loop(make, ops))
    with lockcheck.instrument() as rec:
        took = asyncio.run(_loop(make, ops))
    assert not rec.findings, rec.findings
    return took


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--ops", type=int, default=100_000)
    parser.add_argument("--repeat", type=int, default=5)
    parser.add_argument("--clock", choices=("wall", "cpu"), default="wall")
    args = parser.parse_args(argv)
    global _clock
    _clock = time.process_time if args.clock == "cpu" else time.perf_counter
    print(f"{'primitive':<17} {'plain ns':>9} {'tracked ns':>11} {'ratio':>6}  tracked?")
    for name in PRIMITIVES:
        plain, tracked = [], []
        for _ in range(args.repeat):
            plain.append(_once(name, args.ops, False))
            tracked.append(_once(name, args.ops, True))
        p, t = min(plain) / args.ops * 1e9, min(tracked) / args.ops * 1e9
        print(f"{name:<17} {p:9.0f} {t:11.0f} {t / p:6.2f}x  {'yes' if _is_tracked(name) else 'no'}")
    rss = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    core = "pure path (LOCKCHECK_PURE=1 or no core)" if _tracked._core is None else "compiled hit path"
    print(f"peak RSS {rss:.1f} MB; {args.ops:,} acquire+release per run, best of {args.repeat}, "
          f"{args.clock} clock, {core}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
