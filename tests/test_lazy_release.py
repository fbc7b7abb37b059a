"""Out-of-order releases in the plugin's checker (`lockcheck.lockdep.lazy_release`): lockdep's verdict.

The plugin's checker moves the locks above a released one without validating them again where
their chain is unchanged but for the released lock (`Checker.lazy_release`).  Held here to
lockdep's full path on generated traces: same findings, same graph, same held stacks, and chain
keys that, once computed, are the ones lockdep gives.  (The chain cache and its counts differ on
purpose: the moved locks' new chains are not cached.)
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockcheck.events import Event
from lockcheck.lockdep import lazy_release
from lockcheck.lockdep.checker import Checker
from tests.test_reacquire import FullPathChecker, build, step


def lazy_checker() -> Checker:
    checker = Checker()
    checker.lazy_release = True
    return checker


def verdict(checker: Checker, events: list[Event]) -> tuple:
    found = [(f.kind, f.task, f.lock, f.held, tuple(f.cycle or ()), f.location) for f in checker.run(events)]
    edges = {(a, b): (d["dep"], d["evidence"].line, d["held"].line)
             for a, b, d in checker.graph.nx.edges(data=True)}
    usage = dict(checker.graph.nx.nodes(data="usage"))
    stacks = {}
    for name, task in checker.tasks.items():
        lazy_release.settle(task)
        stacks[name] = (task.chain_key, [(h.cls, h.read, h.irq_context, h.prev_chain_key, h.event.line)
                                         for h in task.held])
    return found, edges, usage, stacks


@settings(max_examples=int(__import__("os").environ.get("LOCKCHECK_EXAMPLES", "300")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=10, max_size=100))
def test_lazy_release_agrees_with_lockdep(steps) -> None:
    events = build(steps)
    assert verdict(lazy_checker(), events) == verdict(FullPathChecker(), events)


def fifo(n: int, classes: int = 1) -> list[Event]:
    """concurrent.futures' `_AcquireFutures`: n locks taken, then released oldest first."""
    events = [Event("T1", "acquire", f"C{i % classes}", str(i), line=i) for i in range(n)]
    events += [Event("T1", "release", f"C{i % classes}", str(i), line=n + i) for i in range(n)]
    events += [Event("T1", "acquire", "C0", "0", line=3 * n), Event("T1", "acquire", "X", line=3 * n + 1)]
    return events


def test_take_all_release_oldest_first_agrees_with_lockdep() -> None:
    for classes in (1, 2, 3):
        events = fifo(60, classes)
        assert verdict(lazy_checker(), events) == verdict(FullPathChecker(), events)


def test_take_all_release_oldest_first_is_linear() -> None:
    """Each release re-acquires one lock (the next oldest, the new bottom), not everything above
    it: N releases cost N re-acquisitions, where lockdep's path makes N^2 / 2."""
    n = 400
    checker = lazy_checker()
    checker.max_depth = checker.cache_depth = 10 * n
    calls = []
    original = checker.lock_acquire
    checker.lock_acquire = lambda *a, **k: calls.append(a[2]) or original(*a, **k)  # type: ignore[method-assign]
    list(checker.run(fifo(n)))
    assert len(calls) == n + (n - 2) + 2  # the last release is of the innermost: nothing above
    assert [h.cls for h in checker.tasks["T1"].held] == ["C0", "X"]
