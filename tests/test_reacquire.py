"""Re-acquisition after an out-of-order release: the quick path against the full one.

`Checker.reacquire_held_locks` re-pushes most of what moves without
validating it again, where it can prove validation would find nothing
new (`Checker.quick_reacquire`).  Held here to the full path (`lock_acquire` for
every lock) on generated traces: same findings, same graph, same chains,
same held stacks.
"""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockcheck.lockdep import findings as F
from lockcheck.lockdep.checker import MAX_LOCK_DEPTH, Checker
from lockcheck.events import Event

CLASSES = ["A", "B", "C", "D"]

acquire = st.tuples(
    st.just("acquire"),
    st.sampled_from(CLASSES),
    st.sampled_from([None, "1", "2"]),
    st.sampled_from([0, 0, 0, 1, 2]),  # mode
    st.sampled_from([False, False, False, False, True]),  # trylock
    st.sampled_from([0, 0, 0, 0, 1]),  # subclass
    st.one_of(*[st.none()] * 6, st.tuples(st.sampled_from(CLASSES), st.sampled_from([None, "1"]))),
    st.sampled_from([True] * 6 + [False]),  # check
)
release = st.tuples(st.just("release"), st.integers(0, 20))
irq = st.sampled_from([("hardirq-enter",), ("hardirq-exit",), ("softirq-enter",), ("softirq-exit",),
                       ("irqs-off",), ("irqs-on",), ("softirqs-off",), ("softirqs-on",)])
step = st.tuples(st.sampled_from(["T1", "T1", "T1", "T2"]),
                 st.one_of(acquire, acquire, acquire, acquire, acquire, release, release, irq))


def build(steps) -> list[Event]:
    """Events of generated steps; a release names a held lock, most often not the innermost."""
    held: dict[str, list] = {}
    events = []
    for line, (task, action) in enumerate(steps, 1):
        stack = held.setdefault(task, [])
        if action[0] == "acquire":
            _, lock, inst, mode, trylock, subclass, nest, check = action
            events.append(Event(task, "acquire", lock, inst, mode, trylock, subclass, nest, check,
                                file="gen.lt", line=line))
            stack.append((lock, inst))
        elif action[0] == "release":
            if not stack:
                continue
            lock, inst = stack.pop(action[1] % len(stack))
            events.append(Event(task, "release", lock, inst, file="gen.lt", line=line))
        else:
            events.append(Event(task, action[0], file="gen.lt", line=line))
    return events


class FullPathChecker(Checker):
    """Every re-acquired lock through `lock_acquire`, as before the quick path existed."""

    def __init__(self) -> None:
        super().__init__()
        self.quick_reacquire = False


def outcome(checker: Checker, events: list[Event]) -> tuple:
    found = [(f.kind, f.task, f.lock, f.held, tuple(f.cycle or ()), f.location) for f in checker.run(events)]
    edges = {(a, b): (d["dep"], d["distance"], d["evidence"].line, d["held"].line)
             for a, b, d in checker.graph.nx.edges(data=True)}
    usage = dict(checker.graph.nx.nodes(data="usage"))
    stacks = {name: (task.chain_key, [(h.cls, h.read, h.irq_context, h.prev_chain_key, h.event.line) for h in task.held])
              for name, task in checker.tasks.items()}
    return found, edges, usage, stacks, frozenset(checker.chain_cache), checker.stats.chains, checker.stats.chain_hits


@settings(max_examples=int(__import__("os").environ.get("LOCKCHECK_EXAMPLES", "300")), deadline=None,
          suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, min_size=10, max_size=100))
def test_quick_reacquire_agrees_with_the_full_path(steps) -> None:
    events = build(steps)
    assert outcome(Checker(), events) == outcome(FullPathChecker(), events)


def test_quick_path_is_taken_for_what_moves_unchanged() -> None:
    """A release at the bottom of a deep stack re-pushes the rest without re-validating each."""
    quick = Checker()
    calls = []
    original = quick.lock_acquire
    quick.lock_acquire = lambda *a, **k: calls.append(a[2]) or original(*a, **k)  # type: ignore[method-assign]
    n = 20
    events = [Event("T1", "acquire", f"L{i}", line=i) for i in range(n)]
    events.append(Event("T1", "release", "L0", line=n))
    list(quick.run(events))
    # every lock once when taken; none of the 19 that move again (the new bottom starts a chain:
    # no dependency to add)
    assert calls == [f"L{i}" for i in range(n)]
    assert [h.cls for h in quick.tasks["T1"].held] == [f"L{i}" for i in range(1, n)]


QUICK_TOO = {
    # B moves to the bottom: a chain head, nothing below it to depend on
    "chain head": """
        T1 acquire A
        T1 acquire B
        T1 release A
    """,
    # C, a trylock, adds no dependency when taken (validate_chain returns at once), nor again
    "trylock": """
        T1 acquire A
        T1 acquire B
        T1 acquire C try
        T1 release B
    """,
    # C was taken in a softirq over B: it starts the softirq's chain, again after B goes
    "chain head in another irq context": """
        T1 acquire A
        T1 acquire B
        T1 softirq-enter
        T1 acquire C
        T1 release B
    """,
}


def test_quick_path_is_taken_for_chain_heads_and_trylocks() -> None:
    """What moves to the head of a chain, or was a trylock, is re-pushed without `lock_acquire`,
    and ends as the full path ends."""
    for name, text in QUICK_TOO.items():
        events = []
        for line, words in enumerate((row.split() for row in text.strip().splitlines()), 1):
            task, op, *rest = words
            events.append(Event(task, op, rest[0] if rest else None, trylock="try" in rest, file="t.lt", line=line))
        quick = Checker()
        calls = []
        original = quick.lock_acquire
        quick.lock_acquire = lambda *a, **k: calls.append(a[2]) or original(*a, **k)  # type: ignore[method-assign]
        assert outcome(quick, events) == outcome(FullPathChecker(), events), name
        acquired = [ev.lock for ev in events if ev.op == "acquire"]
        assert calls == acquired, name  # each once, when taken; nothing again when it moved


def test_fifo_release_past_the_depth_limit_reports_the_limit_once() -> None:
    n = MAX_LOCK_DEPTH + 30
    events = [Event("T1", "acquire", f"L{i}", line=i) for i in range(n)]
    events += [Event("T1", "release", f"L{i}", line=n + i) for i in range(n)]
    checker = Checker()
    found = list(checker.run(events))
    assert [(f.kind, f.lock) for f in found] == [(F.MAX_DEPTH, f"L{MAX_LOCK_DEPTH - 1}")]
    assert checker.tasks["T1"].held == []
    assert checker.graph.n_dependencies == n - 1  # L(i) -> L(i+1): re-acquisitions add nothing


def _events(text: str) -> list[Event]:
    """`TASK OP [LOCK [MODE]]` lines (mode: 0 write, 1 read, 2 rread) as events."""
    events = []
    for line, words in enumerate((row.split() for row in text.strip().splitlines()), 1):
        task, op, *rest = words
        if rest:
            events.append(Event(task, op, rest[0], None, int(rest[1]) if len(rest) > 1 else 0, file="t.lt", line=line))
        else:
            events.append(Event(task, op, file="t.lt", line=line))
    return events


WHEN_THE_FULL_PATH_IS_NEEDED = {
    # softirqs enabled since B and C were taken: their re-acquisition marks ENABLED_SOFTIRQ usage
    "usage bits": """
        T1 softirqs-off
        T1 acquire A
        T1 acquire B
        T1 acquire C
        T1 softirqs-on
        T1 release A
    """,
    # X -> C is in the graph only as X -> rread C: C written under X again widens the dependency
    "dependency type": """
        T2 acquire X
        T2 acquire C 2
        T2 release C
        T2 release X
        T1 acquire X
        T1 acquire A
        T1 acquire C
        T1 acquire D
        T1 release A
    """,
}


def test_quick_reacquire_leaves_what_needs_validation_to_the_full_path() -> None:
    for name, text in WHEN_THE_FULL_PATH_IS_NEEDED.items():
        events = _events(text)
        quick, full = outcome(Checker(), events), outcome(FullPathChecker(), events)
        assert quick == full, name
