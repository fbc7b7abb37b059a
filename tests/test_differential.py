"""The fast checker against the reference model on generated traces: same findings, same graph."""

from __future__ import annotations

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from lockcheck.lockdep.checker import Checker
from lockcheck.events import Event
from tests.reference_model import ReferenceLockdep

CLASSES = ["A", "B", "C"]
INSTANCES = [None, "1", "2"]

acquire = st.tuples(
    st.just("acquire"),
    st.sampled_from(CLASSES),
    st.sampled_from(INSTANCES),
    st.sampled_from([0, 0, 1, 2, 2]),  # mode
    st.sampled_from([False, False, False, True]),  # trylock
    st.sampled_from([0, 0, 0, 1]),  # subclass
    st.one_of(st.none(), st.none(), st.tuples(st.sampled_from(CLASSES), st.sampled_from(INSTANCES))),
    st.sampled_from([True, True, True, True, False]),  # check
)
release = st.tuples(st.just("release"), st.integers(0, 10))
other = st.sampled_from([("exit",), ("free", 0)])
step = st.tuples(st.sampled_from(["T1", "T2", "T3"]), st.one_of(acquire, acquire, release, release, other))


def build(steps) -> list[Event]:
    """Turn generated steps into events; releases mostly name a lock the task holds."""
    held: dict[str, list] = {}
    events = []
    for line, (task, action) in enumerate(steps, 1):
        stack = held.setdefault(task, [])
        kind = action[0]
        if kind == "acquire":
            _, lock, inst, mode, trylock, subclass, nest, check = action
            events.append(Event(task, "acquire", lock, inst, mode, trylock, subclass, nest, check,
                                file="gen.lt", line=line))
            stack.append((lock, inst))
        elif kind == "release":
            if stack and action[1] < 9:
                lock, inst = stack.pop(action[1] % len(stack))
            else:
                lock, inst = CLASSES[action[1] % len(CLASSES)], None
            events.append(Event(task, "release", lock, inst, file="gen.lt", line=line))
        elif kind == "free":
            lock, inst = stack[-1] if stack else ("A", None)
            events.append(Event(task, "free", lock, inst, file="gen.lt", line=line))
        else:
            events.append(Event(task, "exit", file="gen.lt", line=line))
    return events


def fast_result(events):
    checker = Checker()
    found = [(f.kind, f.lock, f.held if f.kind not in ("unlock-imbalance", "held-at-exit", "lock-depth-exceeded") else None,
              tuple(f.cycle) if f.cycle else None)
             for f in checker.run(events)]
    edges = {(a, b): d["dep"] for a, b, d in checker.graph.nx.edges(data=True)}
    return found, edges


def reference_result(events):
    model = ReferenceLockdep()
    for ev in events:
        model.feed(ev)
    found = [(k, lock, held if k not in ("unlock-imbalance", "held-at-exit", "lock-depth-exceeded") else None, cycle)
             for k, lock, held, cycle in model.findings]
    return found, model.edges


@settings(max_examples=int(__import__("os").environ.get("LOCKCHECK_EXAMPLES", "400")), deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(step, max_size=60))
def test_checker_agrees_with_reference_model(steps) -> None:
    events = build(steps)
    fast = fast_result(events)
    ref = reference_result(events)
    assert fast[0] == ref[0]
    assert fast[1] == ref[1]
