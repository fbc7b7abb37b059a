"""The `lockcheck` fixture: the session's recorder as a test sees it.

Under `--lockcheck` it is the plugin's recorder; without, the fixture tracks locks for the
test alone (`instrument()`), so a test written with it runs either way.

    def test_cache_orders_its_locks(lockcheck):
        cache.refresh()
        assert not lockcheck.findings
        lockcheck.expect_order(cache.index_lock, cache.entry_lock)
"""

from __future__ import annotations

from typing import Any, Iterator, Optional

import pytest

from lockcheck.lockdep.findings import Finding


class LockcheckFixture:
    """What a test may ask of the recorder: its findings so far, what this thread holds, and
    whether an order it expects holds in the graph recorded so far."""

    def __init__(self, recorder: Any, context: Optional[str]) -> None:
        #: the `Recorder` (`lockcheck.python.recorder`): everything else it knows
        self.recorder = recorder
        self._context = context

    @property
    def findings(self) -> list[Finding]:
        """The findings made in this test so far (queued work applied first)."""
        rec = self.recorder
        rec.drain()
        if rec.context is None and self._context is None:  # a recorder of this test alone
            return [finding for finding, _ in rec.findings]
        return list(rec.by_context.get(self._context, []))

    def held(self) -> list[str]:
        """The lock classes the calling thread holds now, outermost first."""
        rec = self.recorder
        task, _ = rec.thread_task()
        rec.drain()
        state = rec.checker.tasks.get(task)
        return [hlock.cls for hlock in state.held] if state is not None else []

    def expect_order(self, *locks: Any) -> None:
        """Fail (AssertionError) if the graph recorded so far has taken any two of `locks` (lock
        objects or class names) against the order given: a later one held while an earlier one
        was taken, directly or through other locks."""
        names = [_class_of(lock) for lock in locks]
        graph = self.recorder.checker.graph
        for i, earlier in enumerate(names):
            for later in names[i + 1:]:
                if _reaches(graph, later, earlier):
                    raise AssertionError(f"lockcheck: {later} is taken before {earlier} somewhere "
                                         f"(a dependency path {later} -> ... -> {earlier} was recorded), "
                                         f"against the expected order {' -> '.join(names)}")


def _class_of(lock: Any) -> str:
    if isinstance(lock, str):
        return lock
    from lockcheck.python.naming import _target

    target = _target(lock)
    if target is not None:
        return target._cls
    lc = getattr(lock, "_lc", None)
    if lc is not None:
        return lc[0]
    raise TypeError(f"lockcheck.expect_order: {lock!r} is not a tracked lock (made before tracking began?)")


def _reaches(graph: Any, src: str, dst: str) -> bool:
    """A path of dependencies from `src` to `dst` (a subclass `X/N` counts as `X`)."""
    starts = [name for name in list(graph.nx.nodes) if name.partition("/")[0] == src]
    seen = set(starts)
    stack = list(starts)
    while stack:
        name = stack.pop()
        for nxt in graph.successors(name):
            if nxt.partition("/")[0] == dst:
                return True
            if nxt not in seen:
                seen.add(nxt)
                stack.append(nxt)
    return False


@pytest.fixture(name="lockcheck")
def lockcheck_fixture(request: pytest.FixtureRequest) -> Iterator[LockcheckFixture]:
    """The session's recorder under `--lockcheck`; else one for this test alone."""
    from lockcheck.python import patching

    rec = patching.active_recorder()
    if rec is not None:
        yield LockcheckFixture(rec, request.node.nodeid)
        return
    from lockcheck.python.instrument import instrument

    with instrument() as own:
        yield LockcheckFixture(own, None)
