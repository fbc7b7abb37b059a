"""A part's private checker in summary mode (the first try): what each event did to the
state the tasks share, recorded in trace order for `merge.merge_summaries`."""

from __future__ import annotations

from typing import Any, Callable, Optional, Sequence

from lockcheck import events as E
from lockcheck.events import Event
from lockcheck.jobs import shards
from lockcheck.jobs.shards import (_NOTHING, CHAIN, CLASS, NOTE, USAGE, Fallback, Shard, Unsure, owner,
                                   refuse_rest_of_lockdep)
from lockcheck.jobs.wire import _held_site
from lockcheck.lockdep import rules
from lockcheck.lockdep.checker import Checker, CheckerOptions
from lockcheck.lockdep.findings import Finding
from lockcheck.lockdep.graph import DepGraph
from lockcheck.lockdep.tasks import HeldLock, TaskState


class _SummaryGraph(DepGraph):
    """A part's graph in summary mode: classes and usage bits only, each new class recorded."""

    def __init__(self, on_class: Callable[[str], None]) -> None:
        super().__init__()
        self._on_class = on_class

    def add_class(self, name: str) -> None:
        if name not in self._succ:
            self._on_class(name)
            super().add_class(name)


class SummaryChecker(Checker):
    """A part's private checker in summary mode: every event applied, what it did to the shared
    state recorded (see the module's docstring, "Summaries").

    It adds no dependency to its own graph (nor validates one) and
    validates no usage bit: it records, in trace order, each class it meets
    first, each usage bit it sets first, and each chain it validates first
    with the `check_prev_add` calls that validation makes.  Any finding it
    raises ends it (`Unsure`): a finding changes what a sequential run goes
    on to do in ways a summary does not carry.
    """

    def __init__(self, options: CheckerOptions) -> None:
        super().__init__(_SummaryGraph(self._new_class), options)
        # a cache hit is a hit here as in `Checker` (validate_chain below only records the misses)
        self._inline_cache_hits = True
        self._shard: Optional[Shard] = None
        self.records: list = []
        #: where records go as they are made (`stream_pool`), in batches; None: kept to the end
        self.sink: Optional[Callable[[list], None]] = None
        self._at: tuple = (0, 0)
        self._seq = 0
        self._deps: Optional[list] = None
        self._notes = 0
        #: task -> whether this part owns it (`owner`, asked once per task)
        self._mine: dict[str, bool] = {}
        self.irq.mark_lock = self._mark_lock
        self.irq._note = self._note
        # every chain a re-acquisition validates goes through `validate_chain`, to be recorded (the quick
        # path caches a chain head's key itself; with no dependencies here it would take no other)
        self.quick_reacquire = False

    @property
    def shard(self) -> Optional[Shard]:
        """The shard being read (which file, which of its tasks)."""
        return self._shard

    @shard.setter
    def shard(self, shard: Shard) -> None:
        self._shard = shard
        self._mine = {}

    def _record(self, kind: int, *payload: Any) -> None:
        self._seq += 1
        self.records.append(((self._at[0], self._at[1], self._seq), kind, *payload))
        if self.sink is not None and len(self.records) >= shards.STREAM_BATCH:
            self.flush()

    def flush(self) -> None:
        """Send the records made so far to `sink`, and forget them."""
        if self.records:
            self.sink(self.records)
            self.records = []

    def feed(self, ev: Event) -> Sequence[Finding]:
        shard = self.shard
        op = ev.op
        if op == E.LOST_EVENTS:
            raise Fallback("lost events reset the tasks of a CPU")
        if op == E.UNREGISTER:
            raise Fallback("an unregistered class is forgotten by every part (zap_class)")
        refuse_rest_of_lockdep(ev)  # a class's wait types, set by one part's task, bind every part's
        if op == E.RUN:
            return super().feed(ev)
        if shard.parts > 1:
            mine = self._mine.get(ev.task)
            if mine is None:
                mine = self._mine[ev.task] = owner(ev.task, shard.parts) == shard.part
            if not mine:
                return _NOTHING  # another part's task
        if ev.line is None:
            raise Fallback("an event without a line number")
        self._at = (shard.index, ev.line)
        return super().feed(ev)

    def report(self, finding: Finding) -> None:
        raise Unsure(f"{finding.location}: {finding.kind}")

    def _new_class(self, name: str) -> None:
        self._record(CLASS, name)

    def _mark_lock(self, task: TaskState, hlock: HeldLock, bit: int, ev: Event) -> bool:
        """`IrqValidator.mark_lock` without validating: the merge validates on the whole graph."""
        if self._nodes[hlock.cls]["usage"] & (1 << bit):
            return True
        site = (ev.file, ev.line, task.name, ev.at, ev.ts)  # an `Evidence`'s fields: a tuple pickles faster
        self.graph.set_usage(hlock.cls, bit, site)  # (a part's graph reports nothing: its traces are never read)
        self._record(USAGE, hlock.cls, bit, hlock.read, site)
        return True

    def _note(self, ev: Event, text: str) -> None:
        if self._notes < 20:  # the run keeps 20 (`IrqValidator._note`): the first 20 of a part suffice
            self._notes += 1
            self._record(NOTE, f"{ev.location}: {text}")

    def validate_chain(self, task: TaskState, hlock: HeldLock, chain_head: bool, chain_key: int,
                       ev: Event) -> None:
        """`Checker.validate_chain`, recording a chain not cached here with its `check_prev_add` calls."""
        if not rules.validates_chain(hlock.trylock, hlock.check):
            return
        if chain_key in self.chain_cache:
            self.stats.chain_hits += 1
            return
        cacheable = rules.chain_cacheable(len(task.held), self.cache_depth)
        if cacheable:
            self.chain_cache.add(chain_key)
        self.stats.chains += 1
        deps = self._deps = []
        ret = self.check_deadlock(task, hlock, ev)  # 0 (a report) raises Unsure
        if not chain_head and ret != 2:
            self.check_prevs_add(task, hlock, ev)
        self._deps = None
        self._record(CHAIN, chain_key, cacheable, tuple(deps))

    def check_prev_add(self, task: TaskState, prev: HeldLock, nxt: HeldLock, distance: int, ev: Event) -> bool:
        """Record the call for the merge (which makes it on the whole graph); add nothing here."""
        self._deps.append((prev.cls, prev.read, nxt.cls, nxt.read, distance,
                           (ev.file, ev.line, task.name, ev.at, ev.ts), _held_site(prev)))
        return True
