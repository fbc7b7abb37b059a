"""`concurrent.futures.wait()` and `as_completed()` on N futures, with and without `pytest --lockcheck`.

`_AcquireFutures` takes every future's Condition at once and releases them oldest first: the
shape that makes lockdep's `reacquire_held_locks` quadratic (issue 30).  Prints the wall time of
one pytest run per N (interpreter start-up included), plain and with the plugin, and the
plugin's time above plain per future: flat when the cost is linear in the futures.
A figure, not a timed test.

    python benchmarks/bench_futures.py [--sizes 100,200,400,800,1000] [--repeat 2]
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

TEST = """
import concurrent.futures as cf, os

N = int(os.environ["LOCKCHECK_BENCH_FUTURES"])

def test_wait_and_as_completed():
    with cf.ThreadPoolExecutor(4) as pool:
        futures = [pool.submit(pow, i, 2) for i in range(N)]
        done, _ = cf.wait(futures)
        assert len(done) == N
        assert len(list(cf.as_completed(futures))) == N
"""


def run(directory: str, n: int, plugin: bool) -> float:
    env = dict(os.environ, LOCKCHECK_BENCH_FUTURES=str(n))
    args = [sys.executable, "-m", "pytest", "-q", "-p", "no:cacheprovider", "-p", "no:randomly", "test_futures.py"]
    if plugin:
        args.insert(4, "--lockcheck")
    start = time.perf_counter()
    done = subprocess.run(args, cwd=directory, env=env, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if done.returncode != 0:
        sys.exit(f"pytest {'--lockcheck ' if plugin else ''}failed at N={n}:\n{done.stdout[-2000:]}")
    return elapsed


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--sizes", default="100,200,400,800,1000")
    parser.add_argument("--repeat", type=int, default=2, help="runs per size and mode (the best is kept)")
    opts = parser.parse_args()
    sizes = [int(s) for s in opts.sizes.split(",")]
    with tempfile.TemporaryDirectory() as directory:
        Path(directory, "test_futures.py").write_text(TEST)
        print(f"{'futures':>8} {'plain s':>8} {'--lockcheck s':>14} {'extra ms/future':>16}")
        for n in sizes:
            plain = min(run(directory, n, False) for _ in range(opts.repeat))
            checked = min(run(directory, n, True) for _ in range(opts.repeat))
            print(f"{n:>8} {plain:>8.2f} {checked:>14.2f} {1000 * (checked - plain) / n:>16.2f}")


if __name__ == "__main__":
    main()
