"""`bench_plugin.py --pair` measures what issue 23 holds the plugin to (ns per uncontended
acquire+release, plain and tracked): it must time a tracked lock, not a plain one twice."""

from __future__ import annotations

import sys
import threading
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import bench_plugin  # noqa: E402


def test_pairs_time_a_tracked_and_a_plain_lock_of_each_kind(monkeypatch) -> None:
    timed = []
    batch = bench_plugin._pair_batch

    def spy(lock, n):
        timed.append(type(lock))
        return batch(lock, n)

    monkeypatch.setattr(bench_plugin, "_pair_batch", spy)
    best = bench_plugin.run_pairs(2, n=2000)
    assert sorted(best) == [("Lock", "plain"), ("Lock", "tracked"), ("RLock", "plain"), ("RLock", "tracked")]
    assert all(ns > 0 for ns in best.values())
    plain_types = {type(threading.Lock()), type(threading.RLock())}
    assert len(timed) == 8
    assert sum(kind in plain_types for kind in timed) == 4  # the other four are tracked wrappers


def test_the_command_prints_both_kinds(capsys) -> None:
    assert bench_plugin.main(["--pair", "--repeat", "1"]) == 0
    out = capsys.readouterr().out
    assert out.splitlines()[0].split() == ["kind", "plain", "ns", "tracked", "ns", "overhead", "ns", "ratio"]
    assert [line.split()[0] for line in out.splitlines()[1:]] == ["Lock", "RLock"]
