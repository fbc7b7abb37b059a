"""The compiled hit path of the tracked locks (lockcheck/python/_tracked.c) against the pure-Python one.

The same workload (tests/data/tracked/scenario.py) runs in two interpreters, one with the
compiled core and one with `LOCKCHECK_PURE=1`: the findings as reported, the dependency graph
with its evidence, usage bits, statistics and what each task still holds must be identical,
and the compiled run must have served most events without the Python path.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

SCENARIO = Path(__file__).parent / "data" / "tracked" / "scenario.py"
ASYNC_SCENARIO = Path(__file__).parent / "data" / "tracked" / "async_scenario.py"
ROOT = Path(__file__).resolve().parent.parent


def _run(pure: bool, scenario: Path = SCENARIO) -> dict:
    # one hash seed: the chain keys (hashes of class names) compare across the two processes
    env = dict(os.environ, PYTHONPATH=str(ROOT), LOCKCHECK_PURE="1" if pure else "0", PYTHONHASHSEED="0")
    proc = subprocess.run([sys.executable, str(scenario)], env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-3000:]
    return json.loads(proc.stdout)


def test_compiled_and_pure_record_the_same() -> None:
    compiled, pure = _run(pure=False), _run(pure=True)
    assert compiled["core"] is True, "lockcheck.python._trackedcore is not built (pip install -e . builds it)"
    assert pure["core"] is False
    for key in ("report", "findings", "dependencies", "usage", "stats", "held"):
        assert compiled[key] == pure[key], key
    kinds = [kind for kind, _ in pure["findings"]]
    assert kinds == ["circular-dependency", "recursive-locking"]
    events, chain_hits, _chains = pure["stats"]
    assert chain_hits > events // 4  # the workload is mostly cached chains: the hit path's case
    # every event of the pure run went through Recorder.feed; most of the compiled run's did not
    assert compiled["fed"] * 3 < pure["fed"], (compiled["fed"], pure["fed"])


def test_compiled_and_pure_record_the_same_for_asyncio_locks() -> None:
    """asyncio's Lock, Condition, Semaphore and BoundedSemaphore (tests/data/tracked/async_scenario.py):
    the compiled hit path (`_trackedcore.async_acquired`/`async_released`) records what the pure
    path records, and serves most events itself."""
    compiled, pure = _run(False, ASYNC_SCENARIO), _run(True, ASYNC_SCENARIO)
    assert compiled["core"] is True, "lockcheck.python._trackedcore is not built (pip install -e . builds it)"
    assert pure["core"] is False
    for key in ("report", "findings", "dependencies", "usage", "stats", "held"):
        assert compiled[key] == pure[key], key
    assert [kind for kind, _ in pure["findings"]] == ["circular-dependency"]
    # every site is the workload's own line, never a tracked type's frame (`async with` goes
    # through the tracked __aenter__, which calls acquire on the Python path)
    sites = pure["report"] + json.dumps(pure["dependencies"]) + json.dumps(pure["held"])
    assert "lockcheck/python" not in sites and "async_scenario.py:" in sites
    assert any(held for _key, _chain, held in pure["held"])  # a lock left held, and its stack
    events, chain_hits, _chains = pure["stats"]
    assert chain_hits > events // 4
    assert compiled["fed"] * 3 < pure["fed"], (compiled["fed"], pure["fed"])


def test_chain_key_is_pythons_tuple_hash() -> None:
    from lockcheck.python import _trackedcore as core

    for prev in (-1, 0, 1, 2**62, -(2**63), 2**63 - 1, 123456789123456789):
        for cls in ("a", "Cache._lock", "Cache._lock/1", "x" * 100, "é"):
            for read in (0, 1, 2):
                assert core.chain_key(prev, cls, read) == hash((prev, cls, read))


def test_real_locks_tried_in_place_behave_as_real_locks() -> None:
    """The hit path takes a real lock without calling it (its layout checked at import, on the
    CPython versions whose layout it knows); the lock then acts as one taken by its own method."""
    import threading

    from lockcheck.python import _trackedcore, instrument as pylocks

    if sys.version_info[:2] in ((3, 11), (3, 12)):
        assert _trackedcore.tries_in_place() == (True, True)
    with pylocks.instrument() as rec:
        lock, rlock = threading.Lock(), threading.RLock()
        with lock:
            assert lock.locked()
            assert lock.acquire(False) is False  # taken: the try fails, nothing recorded
            other = threading.Thread(target=lambda: results.append(lock.acquire(False)))
            results: list = []
            other.start()
            other.join()
            assert results == [False]
        assert not lock.locked()
        with rlock:
            with rlock:
                assert rlock._is_owned()
                assert "count=2" in repr(rlock)
        assert not rlock._is_owned()
        with pytest.raises(RuntimeError):
            lock.release()
        with pytest.raises(RuntimeError):
            rlock.release()
    assert rec.bad_releases == 2
    assert not rec.findings


def test_an_rlock_released_in_a_thread_is_released_for_the_checker() -> None:
    """A tracked RLock's last release is an event, in any thread, by `with` or by `release()`
    (on CPython 3.12 the compiled path once read an int's zero test from its layout and never
    recorded it: every thread 'ended holding an RLock')."""
    import threading

    from lockcheck.python import instrument as pylocks

    with pylocks.instrument() as rec:
        rlock = threading.RLock()

        def run() -> None:
            for _ in range(3):
                with rlock:
                    with rlock:
                        pass
                rlock.acquire()
                rlock.release()

        threads = [threading.Thread(target=run) for _ in range(4)]
        for t in threads:
            t.start()
        for t in threads:
            t.join()
        run()
        held = {key: list(task.held) for key, task in rec.checker.tasks.items() if task.held}
    assert held == {}
    assert not rlock._is_owned()


def test_a_held_lock_says_when_it_was_taken_on_time_monotonic_clock() -> None:
    """`_since` (what a hang report's "held for" reads against time.monotonic()) is set when the
    hit path takes a lock: never after the acquire returned, at most a clock tick before it."""
    import threading
    import time

    from lockcheck.python import instrument as pylocks

    with pylocks.instrument() as rec:
        lock, rlock = threading.Lock(), threading.RLock()
        for tracked in (lock, rlock, lock, rlock):  # (the second round: the compiled hit path's)
            before = time.monotonic()
            with tracked:
                after = time.monotonic()
                assert isinstance(tracked._since, float)
                assert before - 0.05 <= tracked._since <= after, (before, tracked._since, after)
                time.sleep(0.02)
                assert time.monotonic() - tracked._since >= 0.02
    assert not rec.findings
