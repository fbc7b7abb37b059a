"""`--jobs N` and `--dask ADDRESS`: one check spread over processes (or a cluster), findings unchanged.

Lockdep's verdicts depend on the order of the whole input: a dependency is
checked against the graph as it stands when it is first seen, a chain is
validated the first time any task builds it, a usage bit is validated when
it is first set.  What a task holds, though, depends on that task's events
only.  So the work splits in two: a **map**, in workers (`map_shards`),
each reading one file or the share of one file's tasks that a part owns
(`owner`) with a private checker -- the fast path and the compiled core
included -- and a **merge**, in lockcheck's process, that puts the parts
together in trace order (file, then line).  A check first tries the cheap
merge, of summaries; where a summary cannot vouch for the result it is done
again with the exact one, which replays events.

Summaries (`SummaryChecker`, `merge_summaries`)
-----------------------------------------------

A part applies every event of its tasks to its private checker, and records
what the event did to the state the tasks share, with its place in the
trace: a class met for the first time (CLASS), a usage bit set for the
first time (USAGE, with the lock's read mode and the evidence), a chain key
validated for the first time (CHAIN: whether it may be cached, and every
`check_prev_add` call of its validation -- prev and next class and read
mode, distance, evidence of the event and of prev's acquisition), an irq
note (NOTE).  The part adds no dependency to its own graph and validates no
usage bit; any finding it raises ends the try (`Unsure`).  The merge applies
all parts' records in trace order to the session's checker: a class is
added; a usage bit not yet set is set and validated on the merged graph
(`IrqValidator.mark_lock_irq`); a chain the merged cache lacks is cached and
its calls are made -- `Checker.check_prev_add` itself, which searches the
merged graph for a cycle and an irq inversion before adding the dependency
-- and a chain the cache has is a hit; anything that would report raises
`Unsure` instead.

Why that is the sequential run, when nothing raised.  Induction over the
trace: before each event, the merged graph, chain cache and usage bits are
the sequential run's at that point, and each part's private cache, bits and
classes are a subset of them (they came from the part's own earlier events,
which the sequential run applied too, and no finding kept any of it from
being set).  The event's task state is the sequential one, since it depends
on that task's events alone.  So an event the part takes as a hit (fast
path or checker) is a hit in the sequential run.  An event the part takes
as a miss does in the sequential run what it recorded, restricted to what
the shared state still lacks: the sequential `lock_acquire` adds the class
if new, sets exactly the needed bits the merged graph lacks, in the same
order (`mark_usage`), each validated as the merge validates it; it
validates the chain if and only if the merged cache lacks the key, and then
makes the calls the part recorded, since `check_deadlock` and
`check_prevs_add` read only the task's held locks (no finding: every
`check_prev_add` returns True, so the same calls follow), and each call
does, on the same graph, what the merge's call does.  A key the merged
cache already has came from an earlier event -- of any part -- and is a
hit there.  What decides evidence is therefore the order of application,
which is the trace's: an edge or usage bit keeps the evidence of its first
occurrence in the trace, whichever part saw it, and which of several tasks'
orders closes a cycle, or whether a chain key built under a trylock (the
key leaves trylocks out, the dependencies do not) adds A -> B, is decided
as in one process.  Dictionaries are filled
in the same order too (classes, each class's dependencies), so the saved
graph is the same file.  Where the sequential run would report, the merge
(or a part, for what only the task's state decides) meets the same report
first: the try stops (`Unsure`), and the check is done again -- in one
process for `--jobs` (`REPLAY_LOCALLY`), with the exact replay below for
`--dask` -- so a run with findings pays for the try up to the first of
them, then for the check that reports.  Counts: events,
tasks and unknown releases are sums over the parts; chains validated are
the merge's, cache hits the parts' look-ups minus those; the first 20
notes in trace order are among the first 20 of each part.

Exact replay (`PartChecker`, `replay`)
-------------------------------------

A part keeps every event that is not a hit for its private checker -- a
*candidate* -- with its task's state just before it (held stack, chain
key, irq state) and what the private checker's state was just after it
(`Candidate`).  The merge feeds the candidates of every part, in trace
order, to the session's one checker, each with its task's state put back
first.  That checker sees every event that could add a class, a usage
bit, a chain or a dependency, in the order the sequential run sees them,
on the same graph: it finds the same findings with the same evidence.
After each candidate the merge checks that it left what the private run
left (`Candidate.classes`, `Candidate.chains`): when it did not -- a usage
bit or chain that only a finding on the merged graph kept from being set
-- a later "hit" of that part might be a miss in the whole run, and the run
is done again in one process (`Fallback`).

So is any input the split cannot follow: standard input, kernel logs,
captures whose annotations read a boot's state or watch all tasks at once,
lost events (which reset every task of a CPU), a declared `--order` (its
checker looks at hits too), `--first`, an unreadable or malformed file.  A
fallback gives what `--jobs 1` gives, only slower; `--jobs` never changes
a report.
"""

from __future__ import annotations

import functools
import heapq
import math
import multiprocessing
import os
import zlib
from dataclasses import dataclass, field
from operator import attrgetter
from typing import Any, Callable, Iterable, Iterator, NamedTuple, Optional, Sequence

from lockcheck import events as E
from lockcheck.lockdep.checker import MAX_LOCK_DEPTH, Checker, CheckerOptions
from lockcheck.errors import TraceError
from lockcheck.events import Event
from lockcheck.lockdep.findings import Evidence, Finding
from lockcheck.lockdep.graph import DepGraph
from lockcheck.readers import lt
from lockcheck.lockdep.tasks import INITIAL_CHAIN_KEY, HeldLock, RecentLocks, TaskState, irq_event, usage_needs
from lockcheck.lockdep.usage import ENABLED_HARDIRQ, ENABLED_SOFTIRQ, READ_MASK

#: where the summaries cannot vouch (`Unsure`): True, `--jobs` replays the parts exactly (as
#: `--dask` always does); False, it checks in one process -- with few cores the exact replay's merge,
#: one process feeding every candidate, costs more than the whole one-process check
REPLAY_LOCALLY = False

#: the kinds of `Candidate`: a file opened (its run begins), or an event for the merge's checker
OPEN, EVENT = 0, 1
_NOTHING: tuple = ()


class Fallback(Exception):
    """The split cannot give the sequential result for these inputs: check them in one process."""


@dataclass(frozen=True)
class Shard:
    """One unit of map work: the tasks of file `path` that part `part` of `parts` owns."""

    index: int  #: the file's place among the inputs (trace order across files)
    path: str
    part: int = 0
    parts: int = 1


#: an event as plain data (its fields in `Event.__slots__` order: `Event(*fields)` rebuilds it)
_EVENT_FIELDS = attrgetter(*Event.__slots__)


class TaskSnapshot(NamedTuple):
    """A task's state just before a candidate event: what the merge's checker puts back.

    Plain tuples all the way down (a held lock is `_held_row`), so that
    thousands of them cross a pipe at the speed of pickling tuples.
    """

    key: str
    name: str
    held: tuple
    chain_key: int
    hardirq_depth: int
    softirq_depth: int
    hardirqs_enabled: bool
    softirqs_enabled: bool
    cpu: Optional[int]
    #: the locks among those the event can ask about that the task was seen to take (captures)
    acquired: Optional[tuple]
    irq_events: dict
    irq_known: bool


class Candidate(NamedTuple):
    """An event the merge must feed (or a file's start), with where it sits in the trace."""

    #: (file index, line, order within the part): sorts as the sequential run reads
    key: tuple
    kind: int
    #: the event's fields (`_EVENT_FIELDS`)
    event: Optional[tuple] = None
    task: Optional[TaskSnapshot] = None
    #: OPEN: the file's name and format module
    name: str = ""
    module: str = ""
    #: after the private checker applied it: the usage bits of the classes it touched
    classes: Optional[dict] = None
    #: ... and the chain keys of the task's stack that it had cached
    chains: tuple = ()


class _Wire:
    """Events and held locks as tuples, each made once: a lock held across many candidates is
    one object in the pickle (its memo), not one per candidate."""

    def __init__(self) -> None:
        self._events: dict[int, tuple] = {}
        self._held: dict[int, tuple] = {}

    def event(self, ev: Event) -> tuple:
        known = self._events.get(id(ev))
        if known is not None and known[0] is ev:
            return known[1]
        fields = _EVENT_FIELDS(ev)
        self._events[id(ev)] = (ev, fields)
        return fields

    def held(self, h: HeldLock) -> tuple:
        known = self._held.get(id(h))
        if known is not None and known[0] is h and known[1] == h.references:
            return known[2]
        source = h._source
        if h._event is None and isinstance(source, functools.partial) and source.func is lt.scan_fast:
            # a hold of the fast path whose event nothing asked for yet: its line goes, unread
            event: tuple = source.args
        else:
            event = self.event(h.event)
        row = (h.cls, h.lock, h.instance, h.subclass, h.read, h.trylock, h.check, h.nest, h.irq_context,
               h.hardirqs_off, h.references, h.prev_chain_key, event)
        self._held[id(h)] = (h, h.references, row)
        return row

    def task(self, task: TaskState, ev: Event) -> TaskSnapshot:
        acquired = None
        if task.acquired_ever is not None:
            asked = {(ev.lock, ev.instance)}
            if ev.nest is not None:
                asked.add(tuple(ev.nest))
            asked.update(tuple(h.nest) for h in task.held if h.nest is not None)
            acquired = tuple(key for key in asked if key in task.acquired_ever)
        return TaskSnapshot(task.key, task.name, tuple(self.held(h) for h in task.held), task.chain_key,
                            task.hardirq_depth, task.softirq_depth, task.hardirqs_enabled, task.softirqs_enabled,
                            task.cpu, acquired, _irq_rows(task), task.irq_known)


def _irq_rows(task: TaskState) -> tuple:
    """`TaskState.irq_events` as plain data: `("stamp", n)` and `(op, stamp, *Evidence fields)`."""
    rows = []
    for op, value in list(task.irq_events.items()):
        if op == "stamp":
            rows.append((op, value))
        else:
            stamp, ev = irq_event(task, op)  # type: ignore[misc]
            rows.append((op, stamp, ev.file, ev.line, ev.task, ev.at, ev.ts))
    return tuple(rows)


def _irq_events(rows: tuple) -> dict:
    events: dict = {}
    for row in rows:
        events[row[0]] = row[1] if len(row) == 2 else (row[1], Evidence(*row[2:]))
    return events


class _Unwire:
    """The merge's side of `_Wire`: one `Event` per event tuple, fresh held locks per restore."""

    def __init__(self) -> None:
        self._events: dict[int, tuple] = {}

    def event(self, fields: tuple) -> Event:
        known = self._events.get(id(fields))
        if known is not None and known[0] is fields:
            return known[1]
        ev = Event(*fields)
        self._events[id(fields)] = (fields, ev)
        return ev

    def task(self, snap: tuple) -> TaskState:
        """A fresh `TaskState` equal to the one snapshotted (a `TaskSnapshot` as a plain tuple)."""
        key, name, rows, chain_key, hardirq_depth, softirq_depth, hardirqs_enabled, softirqs_enabled, cpu, \
            acquired, irq_rows, irq_known = snap
        task = TaskState(key, name)
        held = task.held
        for row in rows:
            event = row[12]
            if len(event) == 3:  # (line, file, line number): read back only if asked, as the fast path does
                h = HeldLock.deferred(functools.partial(lt.scan_fast, *event), *row[:11])
            else:
                h = HeldLock(*row[:11], self.event(event))
            h.prev_chain_key = row[11]
            held.append(h)
        task.chain_key = chain_key
        task.hardirq_depth = hardirq_depth
        task.softirq_depth = softirq_depth
        task.hardirqs_enabled = hardirqs_enabled
        task.softirqs_enabled = softirqs_enabled
        task.cpu = cpu
        if acquired is not None:
            task.acquired_ever = RecentLocks()
            for lock in acquired:
                task.acquired_ever.add(lock)
        task.irq_events = _irq_events(irq_rows)
        task.irq_known = irq_known
        task.usage_need = usage_needs(task)
        return task


@dataclass
class MapResult:
    """What one group of shards sends back."""

    candidates: list = field(default_factory=list)
    events: int = 0
    tasks: int = 0
    unknown_releases: int = 0
    #: reader statistics of the files this group read as part 0, by file index
    reader_stats: dict = field(default_factory=dict)
    #: why the split cannot serve these inputs (the whole run goes to one process), or None
    fallback: Optional[str] = None
    #: summary mode: the records (`SummaryChecker`), unless streamed
    records: list = field(default_factory=list)
    #: summary mode: acquisitions that looked a chain up (hits and misses: `CheckerStats.chain_hits + chains`)
    validations: int = 0
    #: summary mode: why the summaries cannot serve (the run is done again with exact replay), or None
    unsure: Optional[str] = None


def owner(task: str, parts: int) -> int:
    """The part that checks `task` (a stable hash: the same in every process and on every machine)."""
    return zlib.crc32(task.encode("utf-8", "surrogatepass")) % parts


# -- map ----------------------------------------------------------------------------------


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
        if self.sink is not None and len(self.candidates) >= STREAM_BATCH:
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
            return top.instance == ev.instance and top.lock == ev.lock and not top.references
        if op == E.CONTENDED or op == E.ACQUIRED:
            return True
        if op == E.FREE:
            return not any(h.lock == ev.lock and h.instance == ev.instance for h in held)
        if op == E.EXIT:
            return not held
        if op in E.IRQ_OPS:
            return self._irq_hit(task, ev)
        return False

    def _acquire_hit(self, task: TaskState, ev: Event) -> bool:
        cls = f"{ev.lock}/{ev.subclass}" if ev.subclass else ev.lock
        node = self._nodes.get(cls)
        if node is None:
            return False
        held = task.held
        depth = len(held)
        if depth >= MAX_LOCK_DEPTH - 1:
            return False
        if depth and ev.nest is not None and held[-1].cls == cls:
            return True  # nest_lock merge
        read, trylock, check = ev.mode, ev.trylock, ev.check
        hardirqs_off = not task.hardirqs_enabled or task.hardirq_depth > 0
        if check:
            needed = task.usage_need[(1 if read else 0) | (2 if trylock else 0) | (4 if hardirqs_off else 0)]
        else:
            needed = 512 if read else 256
        if needed & ~node["usage"]:
            return False
        if ev.nest is not None and not self.lock_is_held(task, ev.nest[0], ev.nest[1]):
            return False
        if trylock or not check:
            return True
        irq_context = (2 if task.hardirq_depth else 0) | (1 if task.softirq_depth else 0)
        chain_key = task.chain_key
        if depth and held[-1].irq_context != irq_context:
            chain_key = INITIAL_CHAIN_KEY
        return hash((chain_key, cls, read)) in self.chain_cache

    def _irq_hit(self, task: TaskState, ev: Event) -> bool:
        """Irq context events change only the task, except an enable that marks held locks
        (`mark_held_locks`) with a bit one of them lacks, and what leaves a note."""
        op = ev.op
        if op == E.HARDIRQ_EXIT:
            return task.hardirq_depth > 0
        if op == E.SOFTIRQ_EXIT:
            return task.softirq_depth > 0
        if op == E.IRQS_ON:
            if task.hardirqs_enabled:
                return True
            if task.hardirq_depth:
                return False
            bits = [ENABLED_HARDIRQ]
            if task.softirqs_enabled and task.softirq_depth == 0:
                bits.append(ENABLED_SOFTIRQ)
            return self._marked(task, bits)
        if op == E.SOFTIRQS_ON:
            if task.softirqs_enabled or task.softirq_depth:
                return True
            if not task.hardirqs_enabled or task.hardirq_depth > 0:
                return True
            return self._marked(task, [ENABLED_SOFTIRQ])
        return True  # enter, irqs-off, softirqs-off

    def _marked(self, task: TaskState, bits: list) -> bool:
        nodes = self._nodes
        for h in task.held:
            if not h.check:
                continue
            usage = nodes[h.cls]["usage"]
            for bit in bits:
                if not usage & (1 << (bit + (READ_MASK if h.read else 0))):
                    return False
        return True


# -- map, summarised (the first try) -------------------------------------------------------------

#: kinds of summary records (`SummaryChecker`): a new class, a usage bit set, a chain validated, a note
CLASS, USAGE, CHAIN, NOTE = 2, 3, 4, 5


class Unsure(Exception):
    """The summaries cannot vouch for the sequential result (a finding, or one that may arise
    where the parts meet): the run is done again, split, with exact replay (`replay`)."""


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
        if self.sink is not None and len(self.records) >= STREAM_BATCH:
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
        if hlock.trylock or not hlock.check:
            return
        if chain_key in self.chain_cache:
            self.stats.chain_hits += 1
            return
        cacheable = len(task.held) < MAX_LOCK_DEPTH
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


def _held_site(h: HeldLock) -> tuple:
    """Where a held lock was taken: `(file, line, at, ts)`, or the fast path's unread `(line text,
    file, line number)` (4 and 3 items), read by the merge only for a dependency it adds."""
    source = h._source
    if h._event is None and isinstance(source, functools.partial) and source.func is lt.scan_fast:
        return source.args
    ev = h.event
    return (ev.file, ev.line, ev.at, ev.ts)


def _valid(*args: Any) -> bool:
    return True


#: candidates per message when a worker streams them (`stream_pool`)
STREAM_BATCH = 1024


def _plain(candidates: list) -> list:
    """Candidates as plain tuples: they cross a pipe several times faster than named ones (no
    Python-level __new__)."""
    return [(c.key, c.kind, c.event, tuple(c.task) if c.task is not None else None, c.name, c.module, c.classes,
             c.chains) for c in candidates]


def map_shards(options: Any, shards: Sequence[Shard], sink: Optional[Callable[[list], None]] = None,
               summary: bool = False) -> MapResult:
    """Map work: check `shards` in trace order with one private checker; the candidates (or, with
    `summary`, the records of a `SummaryChecker`).

    `options` is the session's `SessionOptions`.  A top-level function of
    plain data in and out, so a process pool or a Dask worker can run it.
    With `sink`, candidates are passed to it in batches as they are made
    (the result then holds none), so the merge can start before the map ends.
    """
    from lockcheck.engine import fast_lt as hotpath
    from lockcheck.readers import ReadContext, inputs, read_all, run_rules
    from lockcheck.report.suppress import load_config

    result = MapResult()
    config = load_config(options.suppress, use_pyproject=options.use_pyproject)
    annotation_options = _annotation_options(options)
    annotator = annotation_options.annotators()
    checker_options = CheckerOptions(first=False, strict_start=options.strict_start)
    checker: Any = SummaryChecker(checker_options) if summary else PartChecker(checker_options)
    checker.sink = sink
    fast_allowed = os.environ.get("LOCKCHECK_FASTPATH") != "0" and not config.aliases
    try:
        for shard in shards:
            checker.shard = shard
            item = inputs.Input(shard.path, inputs.TRACE)
            annotator.add_boots([item], annotation_options)

            def opened(name: str, module, shard: Shard = shard) -> None:
                if getattr(module, "TAKES_REPORTS", False):
                    raise Fallback(f"{name}: a kernel log")
                checker.open_trace(**run_rules(module))
                annotator.open_trace(name, module)
                if summary:
                    checker.records.append(((shard.index, -1, 0), OPEN, name, module.__name__))
                else:
                    checker.candidates.append(Candidate((shard.index, -1, 0), OPEN, name=name,
                                                        module=module.__name__))

            def choose(module, rules_module, shard: Shard = shard):
                probe: Iterator[Event] = iter(())
                if annotator.transform(rules_module, probe) is not probe:
                    raise Fallback(f"{shard.path}: annotations apply to it")
                if not fast_allowed:
                    return None
                if shard.parts == 1:
                    return hotpath.parser(module, checker)
                return hotpath.parser(module, checker, foreign=lambda task: owner(task, shard.parts) != shard.part)

            context = ReadContext(on_open=opened, parallel=False, errors=[], fast=choose)
            events = config.apply_aliases(read_all([item], options.input_format, context))
            for _ in checker.run(events):
                pass
            if context.errors:
                raise Fallback(context.errors[0].format())
            if shard.part == 0:
                result.reader_stats[shard.index] = context.stats
            checker.start_trace()
    except Fallback as why:
        return MapResult(fallback=str(why))
    except TraceError as err:
        return MapResult(fallback=err.format())
    except Unsure as why:
        return MapResult(unsure=str(why))
    if sink is not None:
        checker.flush()
    elif summary:
        result.records = checker.records
        result.validations = checker.stats.chain_hits + checker.stats.chains
    else:
        result.candidates = _plain(checker.candidates)
    if summary:
        result.validations = checker.stats.chain_hits + checker.stats.chains
    result.events = checker.stats.events
    result.tasks = checker.task_count
    result.unknown_releases = checker.stats.unknown_releases
    return result


def _annotation_options(options: Any):
    from lockcheck.kernel.annotations import AnnotationOptions

    return AnnotationOptions(options.lockdep_state, options.annotations, options.builtin_annotations)


# -- planning and running the map --------------------------------------------------------------


def plan(paths: list[str], sizes: list[int], workers: int, split: bool = True) -> list[list[Shard]]:
    """Shards for `workers` workers, grouped by worker, each group in trace order.

    Fewer files than workers: each file is split by task into enough parts
    to keep every worker busy.  Otherwise whole files, the largest first to
    the least loaded worker.
    """
    n = len(paths)
    if n == 0:
        return []
    if n < workers and split:
        parts = math.ceil(workers / n)
        shards = [Shard(i, path, k, parts) for i, path in enumerate(paths) for k in range(parts)]
        groups: list[list[Shard]] = [[] for _ in range(workers)]
        for j, shard in enumerate(shards):
            groups[j % workers].append(shard)
    else:
        load = [(0, w) for w in range(min(workers, n))]
        groups = [[] for _ in load]
        for i in sorted(range(n), key=lambda i: -sizes[i]):
            total, w = heapq.heappop(load)
            groups[w].append(Shard(i, paths[i]))
            heapq.heappush(load, (total + max(sizes[i], 1), w))
    return [sorted(group, key=lambda s: (s.index, s.part)) for group in groups if group]


def run_pool(options: Any, groups: list[list[Shard]], workers: Optional[int] = None,
             summary: bool = False) -> list[MapResult]:
    """The map over forked worker processes (one per group, at most `workers`), results in group order
    (`lockcheck.util.pool`: one group, or no `fork`, runs in this process)."""
    from lockcheck.util import pool

    work = functools.partial(map_shards, options, summary=summary)
    return list(pool.ordered_map(work, groups, workers or len(groups)))


class MapStream:
    """One worker's map as it runs: `candidates` yields them in trace order as the worker sends
    them; once it is exhausted, `result` is the worker's `MapResult` (without candidates).

    Raises `Fallback` where the worker gave up (the run goes to one process)
    and `RuntimeError` if the worker failed or died.
    """

    def __init__(self, process: Any, queue: Any) -> None:
        self.process = process
        self._queue = queue
        self.result: Optional[MapResult] = None

    @property
    def records(self) -> Iterator[tuple]:
        """The summary records (`stream_pool(..., summary=True)`), as `candidates` yields candidates."""
        return self.candidates

    @property
    def candidates(self) -> Iterator[tuple]:
        import queue as queues

        while True:
            try:
                kind, payload = self._queue.get(timeout=1.0)
            except queues.Empty:
                if not self.process.is_alive() and self._queue.empty():
                    raise RuntimeError(f"worker process ended unexpectedly (exit status {self.process.exitcode})") \
                        from None
                continue
            if kind == "candidates":
                yield from payload
            elif kind == "done":
                self.result = payload
                return
            elif kind == "fallback":
                raise Fallback(payload)
            elif kind == "unsure":
                raise Unsure(payload)
            else:
                raise RuntimeError(f"worker process failed: {payload}")


def _stream_work(options: Any, shards: list, queue: Any, parent: int, summary: bool = False) -> None:
    """A streaming worker's body: candidates (or records) in batches, then ("done", MapResult) or why not."""
    from lockcheck.util.pool import follow_parent

    follow_parent(parent)
    try:
        result = map_shards(options, shards, sink=lambda batch: queue.put(("candidates", batch)), summary=summary)
        if result.fallback is not None:
            queue.put(("fallback", result.fallback))
        elif result.unsure is not None:
            queue.put(("unsure", result.unsure))
        else:
            queue.put(("done", result))
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which raises it
        queue.put(("crash", f"{type(err).__name__}: {err}"))
    finally:
        queue.close()
        queue.join_thread()


def stream_pool(options: Any, groups: list[list[Shard]], summary: bool = False) -> list[MapStream]:
    """The map over one forked worker per group, each streaming its candidates as it makes them.

    Unlike `run_pool`, the merge (`replay`) can feed the first candidates
    while the workers still read: the merge's share of the work overlaps
    theirs instead of following it.  A worker never waits for the merge (its
    queue buffers what the merge has not taken yet).  Call `stop_streams`
    when done, whatever happened.
    """
    from lockcheck.util.pool import block_stop_signals, unblock_signals

    context = multiprocessing.get_context("fork")
    streams = []
    blocked = block_stop_signals()  # the workers start with them blocked and set their own handlers first
    try:
        for group in groups:
            queue = context.Queue()
            process = context.Process(target=_stream_work, args=(options, group, queue, os.getpid(), summary),
                                      daemon=True)
            process.start()
            streams.append(MapStream(process, queue))
    except BaseException:
        stop_streams(streams)
        raise
    finally:
        unblock_signals(blocked)
    return streams


def stop_streams(streams: list[MapStream]) -> None:
    """End the workers of `streams` (finished or not) and free their queues."""
    for stream in streams:
        if stream.process.is_alive():
            stream.process.terminate()
    for stream in streams:
        stream.process.join()
        stream._queue.close()
        stream._queue.cancel_join_thread()


#: seconds to wait for a Dask scheduler to answer
DASK_TIMEOUT = 30


def _client(address: str):
    """A Dask client of the scheduler at `address`; a missing extra or a scheduler that does not
    answer is one line and exit status 2, as any bad option is."""
    from lockcheck.errors import UsageError

    try:
        from distributed import Client
    except ImportError:
        raise UsageError("--dask needs Dask's distributed scheduler: pip install 'pylockdep[dask]'") from None
    try:
        return Client(address, set_as_default=False, timeout=DASK_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as err:
        raise UsageError(f"--dask {address}: cannot reach the scheduler ({type(err).__name__}: {err})") from None


def run_dask(options: Any, groups: list[list[Shard]], address: str, summary: bool = False) -> list[MapResult]:
    """The map on a Dask distributed cluster at `address` (each worker reads the files by their paths)."""
    with _client(address) as client:
        futures = client.map(map_shards, [options] * len(groups), groups, summary=summary, pure=False)
        return client.gather(futures)


def dask_workers(address: str) -> int:
    """How many threads the cluster at `address` has (how many parts to split into)."""
    with _client(address) as client:
        return max(1, sum(client.nthreads().values()))


# -- merge --------------------------------------------------------------------------------------


def replay(results: list[MapResult], checker: Checker, opened: Callable[[str, Any], None],
           counts: Optional[dict] = None) -> Iterator[Finding]:
    """Feed every part's candidates to `checker` in trace order; the findings, as they come.

    `opened(name, module)` starts a file's run (the session's `_opened`).
    `counts["tasks"]` counts the tasks met: a task's first event is always a
    candidate, so this is the count one process makes, also when `--first`
    stops the merge early.
    Raises `Fallback` when a candidate leaves the merged state short of
    what its part assumed after it (see the module's docstring).
    """
    import importlib

    streams = [result.candidates for result in results]
    nodes = checker.graph._node
    cache = checker.chain_cache
    tasks = checker.tasks
    unwire = _Unwire()
    last = None
    for key, kind, fields, snapshot, name, module, classes, chains in heapq.merge(*streams, key=_key):
        if key == last:
            continue  # a file's start, or a `#lockcheck-run` line, seen by every part of the file
        last = key
        if kind == OPEN:
            opened(name, importlib.import_module(module))
            continue
        ev = unwire.event(fields)
        if snapshot is not None:
            tasks[ev.task] = unwire.task(snapshot)
        elif ev.op != E.RUN:
            tasks.pop(ev.task, None)
            if counts is not None:
                counts["tasks"] = counts.get("tasks", 0) + 1
        yield from checker.feed(ev)
        if checker.stopped:
            return
        for cls, usage in (classes or {}).items():
            node = nodes.get(cls)
            if node is None or usage & ~node["usage"]:
                raise Fallback(f"{ev.location}: usage of {cls} differs in the merged run")
        for chain in chains:
            if chain not in cache:
                raise Fallback(f"{ev.location}: a chain the part cached was not cached in the merged run")


class _Site(NamedTuple):
    """Where an event was, as far as a dependency's evidence reads it (an `Event`'s fields)."""

    file: str
    line: int
    at: Optional[str]
    ts: Optional[float]


class _Named:
    """The task of a summarised dependency, as far as `Checker.check_prev_add` reads it: its name."""

    __slots__ = ("name",)

    def __init__(self, name: str) -> None:
        self.name = name


class _Lock:
    """A held lock of a summarised dependency, as far as the checker's graph checks read it."""

    __slots__ = ("cls", "read", "_site")

    def __init__(self, cls: str, read: int, site: Optional[tuple] = None) -> None:
        self.cls = cls
        self.read = read
        self._site = site

    @property
    def event(self) -> Any:
        """Where the lock was taken (read back from its line if the fast path held it)."""
        site = self._site
        if len(site) == 3:
            return lt.scan_fast(*site)
        return _Site(site[0], site[1], site[2], site[3])


def _unsure(what: str) -> Callable[..., None]:
    def raise_unsure(*args: Any, **kwargs: Any) -> None:
        raise Unsure(f"{what} where the parts meet")
    return raise_unsure


#: what reports on the merged graph (`merge_summaries` makes each raise `Unsure` instead)
_CHECKER_REPORTS = ("report", "print_deadlock_bug", "print_circular_bug")
_IRQ_REPORTS = ("report", "print_usage_bug", "print_irq_inversion_bug", "print_bad_irq_dependency")


def merge_summaries(results: list, checker: Checker, opened: Callable[[str, Any], None]) -> int:
    """Apply every part's summary records to `checker`'s graph in trace order (summary mode).

    `results` are `MapResult`s or `MapStream`s.  Each record is applied as
    the sequential run applies it at that place in the trace (see the
    module's docstring): a class added, a usage bit set (and validated on
    the merged graph), a chain validated unless the merged cache has it
    (each of its dependencies through `Checker.check_prev_add`, which
    searches the merged graph for cycles and irq inversions).  Whatever
    would report raises `Unsure` instead, as does a part that gave up.
    Returns the number of chains validated (the rest of the parts' look-ups were hits).
    """
    import importlib

    from lockcheck.lockdep.usage import USAGE_STATES

    streams = [result.records for result in results]
    graph = checker.graph
    nodes = graph._node
    irq = checker.irq
    cache = checker.chain_cache
    saved = irq.report
    for name in _CHECKER_REPORTS:
        setattr(checker, name, _unsure(name))
    for name in _IRQ_REPORTS:
        setattr(irq, name, _unsure(name))
    check_prev_add = checker.check_prev_add
    mark_lock_irq = irq.mark_lock_irq
    chains = 0
    notes = checker.stats.notes
    last = None
    try:
        # (records sort as their keys: a part's keys are distinct, and two parts share only a file's
        # opening, the same record in each)
        for record in heapq.merge(*streams):
            kind = record[1]
            if kind == CHAIN:
                _, _, chain_key, cacheable, deps = record
                if chain_key in cache:
                    continue  # cached first by another part: a hit in the sequential run
                if cacheable:
                    cache.add(chain_key)
                chains += 1
                for prev_cls, prev_read, nxt_cls, nxt_read, distance, site, held in deps:
                    if not check_prev_add(_Named(site[2]), _Lock(prev_cls, prev_read, held), _Lock(nxt_cls, nxt_read),
                                          distance, _Site(site[0], site[1], site[3], site[4])):
                        raise Unsure("a dependency refused where the parts meet")
            elif kind == CLASS:
                graph.add_class(record[2])
            elif kind == USAGE:
                _, _, cls, bit, read, site = record
                if nodes[cls]["usage"] & (1 << bit):
                    continue  # set first by another part (`IrqValidator.mark_lock`: nothing to do)
                graph.set_usage(cls, bit, Evidence(*site))
                if bit < USAGE_STATES and not mark_lock_irq(None, _Lock(cls, read), bit, None):
                    raise Unsure("a usage bit refused where the parts meet")
            elif kind == NOTE:
                if len(notes) < 20:  # `IrqValidator._note`
                    notes.append(record[2])
            elif kind == OPEN:
                if record[0] != last:  # every part of a file opens it
                    last = record[0]
                    opened(record[2], importlib.import_module(record[3]))
    finally:
        for name in _CHECKER_REPORTS:
            delattr(checker, name)
        for name in _IRQ_REPORTS[1:]:
            delattr(irq, name)
        irq.report = saved
    return chains


def _key(candidate: tuple) -> tuple:
    return candidate[0]


def finish(results: list[MapResult], checker: Checker, context: Any, tasks: int,
           chains: Optional[int] = None) -> None:
    """The run's totals from the parts: events, releases of locks never seen taken, reader stats;
    `tasks` met (`replay`'s count); in summary mode the `chains` the merge validated."""
    if chains is not None:
        checker.stats.chains = chains
        checker.stats.chain_hits = sum(r.validations for r in results) - chains
    checker.stats.events = sum(r.events for r in results)
    checker.stats.unknown_releases = sum(r.unknown_releases for r in results)
    checker.tasks.clear()
    checker._tasks_before = tasks
    stats = {}
    for result in results:
        stats.update(result.reader_stats)
    for index in sorted(stats) if context is not None else ():
        merge = getattr(context.stats, "merge", None)
        if merge is not None:
            merge(stats[index])
