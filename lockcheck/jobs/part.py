"""A part's private checker for exact replay: every event of its tasks applied, every
event that is not a hit kept as a candidate for the merge."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from lockcheck import events as E
from lockcheck.events import Event
from lockcheck.jobs import shards
from lockcheck.jobs.shards import _NOTHING, EVENT, Fallback, Shard, owner, refuse_rest_of_lockdep
from lockcheck.jobs.wire import Candidate, _plain, _Wire
from lockcheck.lockdep import rules
from lockcheck.lockdep.checker import Checker, CheckerOptions
from lockcheck.lockdep.findings import Finding
from lockcheck.lockdep.tasks import HeldLock, TaskState
from lockcheck.lockdep.usage import READ_MASK


class PartChecker(Checker):
    """A part's private checker: applies every event it owns, records the candidates.

    Overrides `feed` only, so the fast path (which applies hits itself and
    hands the rest to `feed`) runs here as in a one-process check.
    """

    def __init__(self, options: CheckerOptions) -> None:
        super().__init__(None, options)
        self.shard: Optional[Shard] = None
        self.candidates: list[Candidate] = []
        #: where candidates go as they are made (`stream_pool`), in batches; None: kept to the end
        self.sink: Optional[Callable[[list], None]] = None
        self._seq = 0
        self._wire = _Wire()
        # what decides a hit is the classes, usage bits and cached chains, never the dependencies:
        # a part records none and validates no usage bit (the merge does both, on the whole graph)
        self.irq.mark_lock_irq = _valid

    def check_prevs_add(self, task: TaskState, nxt: HeldLock, ev: Event) -> None:
        """No dependencies in a part: the merge adds them, in trace order."""

    def feed(self, ev: Event) -> Sequence[Finding]:
        shard = self.shard
        op = ev.op
        if op == E.LOST_EVENTS:
            raise Fallback("lost events reset the tasks of a CPU")
        refuse_rest_of_lockdep(ev)  # the wait-context check is not one the merge replays either
        if op == E.RUN:
            self.candidates.append(Candidate((shard.index, ev.line, 0), EVENT, self._wire.event(ev)))
            return super().feed(ev)
        if shard.parts > 1 and owner(ev.task, shard.parts) != shard.part:
            return _NOTHING  # another part's task
        if ev.line is None:
            raise Fallback("an event without a line number")
        task = self.tasks.get(ev.task)
        if task is not None and self._hit(task, ev):
            return super().feed(ev)
        self._seq += 1
        snapshot = self._wire.task(task, ev) if task is not None else None
        old = list(task.held) if task is not None and op in (E.ACQUIRE, E.RELEASE) else None  # alive: ids stay unique
        before = {id(h) for h in old} if old is not None else None
        super().feed(ev)
        task = self.tasks[ev.task]
        held = task.held
        # what this event may have added: the classes of the locks it pushed (all held locks for
        # an irq event, which marks them) and the chains it cached, one per lock pushed
        chains = []
        if before is None and op in (E.ACQUIRE, E.RELEASE):
            before = set()
        if before is None:
            classes = {h.cls for h in held}
        else:
            classes = set()
            cache = self.chain_cache
            for i, h in enumerate(held):
                if id(h) not in before:
                    classes.add(h.cls)
                    key = held[i + 1].prev_chain_key if i + 1 < len(held) else task.chain_key
                    if key in cache:
                        chains.append(key)
        if op == E.ACQUIRE:
            classes.add(f"{ev.lock}/{ev.subclass}" if ev.subclass else ev.lock)
        nodes = self._nodes
        self.candidates.append(Candidate(
            (shard.index, ev.line, self._seq), EVENT, self._wire.event(ev), snapshot,
            classes={cls: nodes[cls]["usage"] for cls in classes if cls in nodes}, chains=tuple(chains)))
        self.findings.clear()  # a part's own findings are not the run's
        if self.sink is not None and len(self.candidates) >= shards.STREAM_BATCH:
            self.flush()
        return _NOTHING

    def flush(self) -> None:
        """Send the candidates made so far to `sink` as plain tuples, and forget them."""
        if self.candidates:
            self.sink(_plain(self.candidates))
            self.candidates = []

    def _hit(self, task: TaskState, ev: Event) -> bool:
        """Whether `feed` would change nothing but the task's own state (`Checker.feed` and
        `lock_acquire` read the same way, for the cases that raise nothing and add nothing)."""
        op = ev.op
        held = task.held
        if op == E.ACQUIRE:
            return self._acquire_hit(task, ev)
        if op == E.RELEASE:
            if not held:
                return False
            top = held[-1]
            return top.instance == ev.instance and top.lock == ev.lock and not top.references and not task.pins
        if op == E.CONTENDED or op == E.ACQUIRED:
            return not self.contention_checked or self.find_held_lock(task, ev.lock, ev.instance) is not None
        if op == E.FREE:
            return not any(h.lock == ev.lock and h.instance == ev.instance for h in held)
        if op == E.EXIT:
            return not held
        if op in E.IRQ_OPS:
            return self._irq_hit(task, ev)
        return False

    def _acquire_hit(self, task: TaskState, ev: Event) -> bool:
        cls = rules.hlock_class(ev.lock, ev.subclass)
        node = self._nodes.get(cls)
        if node is None:
            return False
        held = task.held
        depth = len(held)
        if depth >= rules.limits()[1]:
            return False
        if rules.nest_lock_merges(depth, held[-1].cls if depth else None, cls, ev.nest):
            return True
        read, trylock, check = ev.mode, ev.trylock, ev.check
        hardirqs_off = rules.hardirqs_off(task.hardirqs_enabled, task.hardirq_depth)
        if rules.acquire_usage(task.usage_need, read, trylock, check, hardirqs_off) & ~node["usage"]:
            return False
        if ev.nest is not None and not self.lock_is_held(task, ev.nest[0], ev.nest[1]):
            return False
        if not rules.validates_chain(trylock, check):
            return True
        irq_context = rules.task_irq_context(task.hardirq_depth, task.softirq_depth)
        chain_key = task.chain_key
        if depth and rules.separate_irq_context(held[-1].irq_context, irq_context):
            chain_key = rules.INITIAL_CHAIN_KEY
        return rules.iterate_chain_key(chain_key, cls, read) in self.chain_cache

    def _irq_hit(self, task: TaskState, ev: Event) -> bool:
        """Irq context events change only the task, except an enable that marks held locks
        (`mark_held_locks`) with a bit one of them lacks, and what leaves a note."""
        t = self.irq.transitions.get((ev.op, task.hardirq_depth > 0, task.softirq_depth > 0, task.hardirqs_enabled,
                                      task.softirqs_enabled))
        return t is not None and not t.note and self._marked(task, t.marks)

    def _marked(self, task: TaskState, marks: int) -> bool:
        """Whether every checked held lock's class has the usage bits `marks` (_READ for a reader)."""
        if not marks:
            return True
        nodes = self._nodes
        for h in task.held:
            if not h.check:
                continue
            want = marks << READ_MASK if h.read else marks
            if nodes[h.cls]["usage"] & want != want:
                return False
        return True


#: the ops of "The rest of lockdep" (docs/trace-format.md): a trace using them is checked in one process


def _valid(*args: Any) -> bool:
    return True
