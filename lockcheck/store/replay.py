"""A saved graph as events: what rebuilds its dependencies and usage bits in a checker, each
event placed where the dependency was first seen, so findings made on the replay point at
the original traces (`lockcheck diff` on saved graphs, baselines)."""

from __future__ import annotations

from typing import Iterator

from lockcheck import events as E
from lockcheck.events import Event
from lockcheck.lockdep.findings import Evidence
from lockcheck.lockdep.graph import DEP_EN, DEP_ER, DEP_SN, DEP_SR, DepGraph
from lockcheck.lockdep.usage import ENABLED_HARDIRQ, ENABLED_SOFTIRQ, READ_MASK, USED_IN_HARDIRQ, USED_IN_SOFTIRQ

#: the task key of replayed dependencies (the task *name* is the evidence's task)
REPLAY_TASK = "<lockcheck-replay>"
#: dependency type bit -> (prev read, next read) that produce it (calc_dep inverted)
_DEP_MODES = {DEP_EN: (E.WRITE, E.WRITE), DEP_ER: (E.WRITE, E.RREAD),
              DEP_SN: (E.READ, E.WRITE), DEP_SR: (E.READ, E.RREAD)}


def replay_events(graph: DepGraph) -> Iterator[Event]:
    """Events that rebuild `graph`'s dependencies in a checker: per dependency and type, prev then next.

    Each event sits where the dependency was first seen (file, line, task,
    site), so findings and chains point at the original traces.  The replay
    task runs with hardirqs off: replaying adds no irq usage of its own;
    the classes' usage bits follow (`replay_usage`).
    """
    yield Event(REPLAY_TASK, E.IRQS_OFF, file="<replay>", line=0)
    props = class_props(graph)
    for prev, nxt, data in graph.nx.edges(data=True):
        if prev == nxt:
            continue
        ev: Evidence = data["evidence"]
        held: Evidence = data.get("held") or ev
        for bit in (DEP_EN, DEP_ER, DEP_SN, DEP_SR):
            if not data["dep"] & bit:
                continue
            prev_read, next_read = _DEP_MODES[bit]
            yield Event(REPLAY_TASK, E.ACQUIRE, prev, mode=prev_read, at=held.at, ts=held.ts,
                        file=held.file, line=held.line, comm=held.task, props=props.get(prev))
            yield Event(REPLAY_TASK, E.ACQUIRE, nxt, mode=next_read, at=ev.at, ts=ev.ts,
                        file=ev.file, line=ev.line, comm=ev.task, props=props.get(nxt))
            yield Event(REPLAY_TASK, E.RELEASE, nxt, file=ev.file, line=ev.line, comm=ev.task)
            yield Event(REPLAY_TASK, E.RELEASE, prev, file=ev.file, line=ev.line, comm=ev.task)
    yield from replay_usage(graph)


def class_props(graph: DepGraph) -> dict[str, dict]:
    """Class -> the `props` its replayed acquisitions carry: the wait and lock types a saved graph
    kept (`wait`, `lock_type` on its nodes), so the replay's checker knows them as the trace's did."""
    props: dict[str, dict] = {}
    for cls, data in graph.nx.nodes(data=True):
        known: dict = {}
        if data.get("wait") is not None:
            known["wait"] = tuple(data["wait"])
        if data.get("lock_type") is not None:
            known["type"] = data["lock_type"][0]
        if known:
            props[cls] = known
    return props


#: usage bit -> (enter, leave) context events that make an acquisition set it and no other
#: (hardirqs are off between them): HARDIRQ-ON alone needs softirqs off, as in a softirq
#: handler -- with softirqs on it would also set SOFTIRQ-ON, and a class the kernel saw
#: only hardirq-unsafe and softirq-safe (a timer: `{+.-.}`) would replay as inconsistent
_USAGE_CONTEXT = {
    USED_IN_HARDIRQ: ((E.HARDIRQ_ENTER,), (E.HARDIRQ_EXIT,)),
    USED_IN_SOFTIRQ: ((E.SOFTIRQ_ENTER,), (E.SOFTIRQ_EXIT,)),
    ENABLED_HARDIRQ: ((E.SOFTIRQS_OFF, E.IRQS_ON), (E.IRQS_OFF, E.SOFTIRQS_ON)),
    ENABLED_SOFTIRQ: ((E.IRQS_ON,), (E.IRQS_OFF,)),  # taken with hardirqs and softirqs on
}


def replay_usage(graph: DepGraph) -> Iterator[Event]:
    """Events that give each class of `graph` its irq usage bits, after its dependencies.

    A saved graph knows where a class became irq-safe or irq-unsafe; taking
    the class again in that context (a handler, or with irqs on), at that
    place, marks the same bit in a checker -- and lockdep's usage checks run
    against the other side's dependencies, so an irq inversion that exists
    only across two runs is found.  Non-recursive reads stand for the
    `_READ` bits.
    """
    props = class_props(graph)
    for cls, data in graph.nx.nodes(data=True):
        usage = data.get("usage", 0)
        traces = data.get("usage_traces", {})
        for bit, (enter, leave) in _USAGE_CONTEXT.items():
            for read in (0, READ_MASK):
                if not usage & (1 << (bit + read)):
                    continue
                where: Evidence = traces.get(bit + read) or Evidence("<replay>", 0, REPLAY_TASK)
                mode = E.READ if read else E.WRITE
                common = {"file": where.file, "line": where.line, "comm": where.task}
                for op in enter:
                    yield Event(REPLAY_TASK, op, **common)
                yield Event(REPLAY_TASK, E.ACQUIRE, cls, mode=mode, at=where.at, ts=where.ts, props=props.get(cls),
                            **common)
                yield Event(REPLAY_TASK, E.RELEASE, cls, **common)
                for op in leave:
                    yield Event(REPLAY_TASK, op, **common)
