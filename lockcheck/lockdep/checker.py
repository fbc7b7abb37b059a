"""Lockdep's semantics over a stream of events.

The steps carry the kernel's names (kernel/locking/lockdep.c) so a kernel
engineer finds them where expected: `lock_acquire` -> `validate_chain` ->
`check_deadlock` / `check_prevs_add` -> `check_prev_add` ->
`check_noncircular`; `lock_release` with `find_held_lock` and
`reacquire_held_locks`.  Irq-state bookkeeping and usage-bit validation
live in `lockcheck.lockdep.irq`, which this module calls at the points where
lockdep calls `mark_usage` / `mark_held_locks` / `check_irq_usage`.

Differences from the kernel, on purpose:

- lockdep turns itself off after the first report; we go on (the event
  still takes effect: an acquisition that raised a finding is still held,
  but adds no dependencies), reporting each distinct problem once;
- a lock whose acquisition raised a finding is still pushed (the kernel
  returns before pushing, but it is also off by then);
- chain keys are Python hashes of (previous key, class, read) instead of
  jhash; like the kernel's 64-bit key, a collision would only skip a check.

The checker never prints: `feed()` returns the new findings of one event.
"""

from __future__ import annotations

from operator import attrgetter
from sys import intern
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional, Sequence

from lockcheck import events as E
from lockcheck.lockdep import findings as F
from lockcheck.events import ACQUIRE, LOST_EVENTS, RELEASE, RUN, Event, class_name
from lockcheck.lockdep.findings import ChainLink, Evidence, Finding, LockSnapshot
from lockcheck.lockdep.graph import DepGraph, calc_dep
from lockcheck.lockdep import lazy_release as lazy
from lockcheck.lockdep.chain_cache import ChainCache
from lockcheck.lockdep.circular import BfsEntry, CircularSearch
from lockcheck.lockdep.irq import IrqValidator
from lockcheck.lockdep.release import LockRelease
from lockcheck.lockdep import rules
from lockcheck.lockdep.rules import INITIAL_CHAIN_KEY
from lockcheck.lockdep.tasks import HeldLock, RecentLocks, TaskState, snapshot, task_finding
from lockcheck.lockdep.usage import usage_chars
from lockcheck.lockdep.waits import WaitContext
from lockcheck.lockdep.setclass import Asserts, SetClass
from lockcheck.lockdep.more_ops import MoreOps
from lockcheck.lockdep.trace_runs import TraceRuns

#: a held entry's class (check_deadlock's first look at the stack)
_held_class = attrgetter("cls")

#: what `feed` returns for the (usual) event that raises nothing: one shared, immutable value
_NOTHING: tuple = ()
#: lockdep's MAX_LOCK_DEPTH (`rules`; kept here for the importers that name it from the checker)
MAX_LOCK_DEPTH = rules.MAX_LOCK_DEPTH


@dataclass
class CheckerOptions:
    """Behaviour switches; the defaults are the kernel's behaviour on a full trace."""

    #: releases of locks never seen acquired by that task are counted, not reported
    #: (a capture that starts mid-flight); `.lt` traces are complete, so off by default
    lenient_start: bool = False
    #: stop checking after the first finding, as the kernel does
    first: bool = False
    #: report releases of locks never seen acquired even in captures (`--strict-start`)
    strict_start: bool = False
    #: a PREEMPT_RT kernel's traces: softirq context is not tracked (`rules.softirq_context_tracked`)
    preempt_rt: bool = False


@dataclass
class CheckerStats:
    events: int = 0
    unknown_releases: int = 0
    chain_hits: int = 0
    chains: int = 0
    lost_resets: int = 0
    #: idle tasks of captures whose recent locks were forgotten (`Checker.forget_recent_locks`)
    forgotten: int = 0
    notes: list[str] = field(default_factory=list)


class Checker(LockRelease, CircularSearch, WaitContext, SetClass, Asserts, MoreOps, TraceRuns):
    """Feed events in trace order; collect findings and the dependency graph.

    >>> from lockcheck.events import Event
    >>> c = Checker()
    >>> trace = [("T1", "A"), ("T1", "B"), ("T2", "B"), ("T2", "A")]
    >>> for task, lock in [("T1", "A"), ("T1", "B")]:
    ...     _ = c.feed(Event(task, "acquire", lock))
    >>> _ = c.feed(Event("T1", "release", "B")); _ = c.feed(Event("T1", "release", "A"))
    >>> _ = c.feed(Event("T2", "acquire", "B"))
    >>> [f.kind for f in c.feed(Event("T2", "acquire", "A"))]
    ['circular-dependency']
    """

    def __init__(self, graph: Optional[DepGraph] = None, options: Optional[CheckerOptions] = None) -> None:
        self.graph = graph if graph is not None else DepGraph()
        self.options = options or CheckerOptions()
        self.tasks: dict[str, TaskState] = {}
        self._tasks_before = 0
        self.chain_cache: set[int] = ChainCache()  # (its `generation`: the compiled core's copy of it)
        self.reported: set[tuple] = set()
        self.findings: list[Finding] = []
        #: whether `findings` keeps every finding (a caller that takes them from `run`, as `lockcheck
        #: check` does, turns it off: kept, 499,500 findings of an all-pairs trace took 1.8 GB; issue 30)
        self.keep_findings = True
        self.stats = CheckerStats()
        #: the depth limit, and the depth the fast paths hold without asking the checker (`rules.limits`;
        #: the pytest plugin raises the limit: no kernel table limits Python code)
        self.max_depth, self.fast_depth = rules.limits()
        #: chains deeper than this are validated each time, not cached (`rules.chain_cacheable`)
        self.cache_depth = self.max_depth
        self.irq = IrqValidator(self.graph, self.report, self.stats.notes)
        self.irq.preempt_rt = self.options.preempt_rt
        self._classes = self.graph._succ
        # a subclass that wants to see cached chains too (OrderChecker) overrides validate_chain
        self._inline_cache_hits = type(self).validate_chain is Checker.validate_chain
        self._nodes = self.graph._node
        self.stopped = False
        #: re-acquired locks that need no validation skip it (`reacquire_held_locks`; off: the full path)
        self.quick_reacquire = True
        #: while locks are re-acquired: the classes held (see `reacquire_held_locks`)
        self._held_classes: Optional[set] = None
        #: out-of-order releases move what cannot change (`lockcheck.lockdep.lazy_release`; the plugin)
        self.lazy_release = False
        #: whether the trace being read carries irq context (`open_trace`)
        self.irq_state = True
        #: whether `contended`/`acquired` are checked for bad contention (`open_trace`)
        self.contention_checked = True
        self._lenient_always = self.options.lenient_start
        self._pending: list[Finding] = []
        #: events after which an idle task forgets its recent locks (None: never; `open_trace`)
        self.forget_after: Optional[int] = None
        self._swept = 0
        self._dispatch = {
            E.FREE: self._op_free,
            E.EXIT: self._op_exit,
            E.LOST_EVENTS: lambda task, ev: self._op_lost_events(ev),
        }
        self._dispatch.update(self.irq.handlers())
        self._dispatch.update(self.set_class_handlers())
        self._dispatch.update(self.assert_handlers())
        self._dispatch.update(self.more_op_handlers())
        self.init_class_props()

    # -- public ----------------------------------------------------------
    def feed(self, ev: Event) -> Sequence[Finding]:
        """Apply one event; return the new (not yet reported) findings it raised (often none)."""
        self.stats.events += 1
        if self.stopped:
            return _NOTHING
        op = ev.op
        task = self.tasks.get(ev.task)
        if task is None:
            if op == LOST_EVENTS:
                self._op_lost_events(ev)
                return _NOTHING
            if op == RUN:  # `#lockcheck-run`: a run begins inside the file (a boundary, not an event)
                self.stats.events -= 1
                self.open_trace(ev.trylock, irq_state=ev.check)
                if ev.props and ev.props.get("preempt_rt"):  # `#lockcheck-trace v1 preempt-rt`
                    self.irq.preempt_rt = True
                return _NOTHING
            if self.forget_after is not None and self.stats.events - self._swept > self.forget_after >> 3:
                self.forget_recent_locks()
            task = self.tasks[ev.task] = TaskState(ev.task, ev.comm or ev.task)
            if self.options.lenient_start:
                task.acquired_ever = RecentLocks()
            if not self.irq_state:
                task.set_irq_unknown()
        elif ev.comm is not None:
            task.name = ev.comm
        if task.stale is not None and op != RELEASE:
            lazy.settle(task)  # chain keys left stale by out-of-order releases, read from here on
        if ev.cpu is not None:
            task.cpu = ev.cpu
        if op == ACQUIRE:
            if ev.props is not None:
                self.register_class_props(ev.lock, ev.props, ev)
            recent = task.acquired_ever
            if recent is not None:
                recent.add((ev.lock, ev.instance))
                recent.last = self.stats.events
            self.lock_acquire(task, ev, ev.lock, ev.instance, ev.subclass, ev.mode, ev.trylock, ev.check,
                              ev.nest, rules.hardirqs_off(task.hardirqs_enabled, task.hardirq_depth), 0)
        elif op == RELEASE:
            held = task.held
            if held:
                # the common case, releasing the innermost lock, without the search
                top = held[-1]
                if top.instance == ev.instance and top.lock == ev.lock and not top.references and not task.pins:
                    held.pop()
                    if task.stale is None:
                        task.chain_key = top.prev_chain_key
                    else:
                        lazy.popped(task, top)
                    return _NOTHING
            self.lock_release(task, ev)
        else:
            handler = self._dispatch.get(op)
            if handler is None:
                handler = self._special(op)
            handler(task, ev)
        if not self._pending:
            return _NOTHING
        new, self._pending = self._pending, []
        if self.options.first and new:
            self.stopped = True
            new = new[:1]
        if self.keep_findings:
            self.findings.extend(new)
        return new

    def run(self, events: Iterable[Event]) -> Iterator[Finding]:
        """Feed every event, yielding findings as they are found (streaming)."""
        feed = self.feed
        for ev in events:
            found = feed(ev)
            if found:
                yield from found
                if self.stopped:
                    return

    def flush_reports(self) -> list[Finding]:
        """Findings reported outside `feed` (while merging a saved graph): queued until now, now kept."""
        new, self._pending = self._pending, []
        self.findings.extend(new)
        return new

    def report(self, finding: Finding) -> None:
        """Queue a finding unless the same problem was reported before."""
        key = finding.key()
        if key in self.reported:
            return
        self.reported.add(key)
        self._pending.append(finding)

    # -- ops -------------------------------------------------------------
    def _op_free(self, task: TaskState, ev: Event) -> None:
        """debug_check_no_locks_freed: freeing (or re-initialising) a lock this task holds."""
        for hlock in task.held:
            if hlock.lock == ev.lock and hlock.instance == ev.instance:
                self.report(self._finding(F.HELD_FREED, task, ev, lock=hlock.cls, held=hlock.cls,
                                          next=self.snapshot(hlock)))
                return

    def _op_exit(self, task: TaskState, ev: Event) -> None:
        """lockdep_sys_exit: returning to user space with locks held."""
        if task.held:
            top = task.held[-1]
            self.report(self._finding(F.HELD_AT_EXIT, task, ev, lock=top.cls))

    def release_innermost(self, task_key: str, lock: str, instance: Optional[str]) -> bool:
        """Release `lock` if it is the task's innermost held lock; False: feed a release event instead.

        The common release needs no event and can raise no finding; callers
        that produce events in bulk (the pytest plugin) use this to skip
        building one.
        """
        task = self.tasks.get(task_key)
        if task is None or self.stopped:
            return False
        held = task.held
        if held:
            top = held[-1]
            if (top.instance == instance and top.lock == lock and not top.references and task.stale is None
                    and not task.pins):
                held.pop()
                task.chain_key = top.prev_chain_key
                self.stats.events += 1
                return True
        return False

    def _special(self, op: str):
        raise ValueError(f"unknown op {op!r}")

    # -- acquire (lockdep's __lock_acquire) -------------------------------
    def lock_acquire(self, task: TaskState, ev: Event, lock: str, instance: Optional[str], subclass: int,
                     read: int, trylock: bool, check: bool, nest: Optional[tuple], hardirqs_off: bool,
                     references: int, hold: Optional[HeldLock] = None, sync: bool = False) -> bool:
        """Push a lock on the task's stack, validating it; False when nothing was pushed (merged).

        `ev` is the event being processed (where findings are located);
        `hold` is the entry being re-acquired, when it is one (a lock
        re-acquired after an out-of-order release keeps its original site:
        its event, or the fast path's deferred reading of it, is taken over
        unread).  `sync`: lock_sync() (`lockdep.more_ops`), validated and not pushed.
        """
        if sync:
            hardirqs_off = rules.mark_usage_hardirqs_off(hardirqs_off, sync)
        # one string per class: the graph's dicts key each dependency by its locks' names (else a copy each)
        cls = intern(rules.hlock_class(lock, subclass))
        if cls not in self._classes:
            self.graph.add_class(cls)
            if lock in self.class_props:
                self.init_class_node(cls, lock)
        held = task.held
        depth = len(held)
        # nest_lock merge: the top entry is the same class and we rely on the nest lock
        if depth and not sync and rules.nest_lock_merges(depth, held[-1].cls, cls, nest):
            top = held[-1]
            top.references = (top.references or 1) + (references or 1)
            return False
        irq_context = rules.task_irq_context(task.hardirq_depth, task.softirq_depth)
        if hold is None:
            hlock = HeldLock(cls, lock, instance, subclass, read, trylock, check, nest, irq_context,
                             hardirqs_off, references, ev)
        else:
            hlock = hold.reacquired(irq_context, hardirqs_off)
            if task.pins and hold in task.pins:  # (`reacquire_held_locks()` passes hlock->pin_count on)
                task.pins[hlock] = task.pins.pop(hold)
        # check_wait_context() first: an invalid wait context is reported, the lock held unvalidated
        waited = not self.wait_locks or lock not in self.wait_locks or self.check_wait_context(task, hlock, ev)
        # usage bits (lockdep's mark_usage): usually nothing new, one mask test
        needed = rules.acquire_usage(task.usage_need, read, trylock, check, hardirqs_off)
        ok = waited and (not needed & ~self._nodes[cls]["usage"] or self.irq.mark_usage(task, hlock, ev))
        chain_key = task.chain_key
        chain_head = not depth
        hlock.prev_chain_key = chain_key
        if depth and rules.separate_irq_context(held[-1].irq_context, irq_context):
            chain_key = INITIAL_CHAIN_KEY
            chain_head = True
        chain_key = rules.iterate_chain_key(chain_key, cls, read)
        if nest is not None and waited and not self.lock_is_held(task, nest[0], nest[1]) \
                and not self.held_before_capture(task, nest):
            self.print_lock_nested_lock_not_held(task, hlock, ev)
        elif ok:
            if self._inline_cache_hits and chain_key in self.chain_cache and rules.validates_chain(trylock, check):
                self.stats.chain_hits += 1  # validate_chain's cache hit, without the call
            else:
                self.validate_chain(task, hlock, chain_head, chain_key, ev)
        if sync:
            return True  # `if (hlock->sync) return 1;`: no critical section, nothing held
        held.append(hlock)
        task.chain_key = chain_key
        # a re-acquisition (hold given) is no new acquisition: the depth it reaches again was
        # reported when the task first got there (a first-in first-out release of N > 48 held locks
        # would otherwise report every lock that moves past the limit)
        if len(held) == self.max_depth and hold is None:
            self.report(self._finding(F.MAX_DEPTH, task, ev, lock=cls, next=self.snapshot(hlock),
                                      details={"depth": len(held), "max": self.max_depth}))
        return True

    def held_before_capture(self, task: TaskState, lock: tuple) -> bool:
        """A capture that started mid-flight: a lock (a nest_lock) the task was never seen to take
        may be held since before it began; given the benefit of the doubt, as its releases are."""
        return task.acquired_ever is not None and tuple(lock) not in task.acquired_ever

    def lock_is_held(self, task: TaskState, lock: str, instance: Optional[str]) -> bool:
        return any(h.matches(lock, instance) for h in task.held)

    def validate_chain(self, task: TaskState, hlock: HeldLock, chain_head: bool, chain_key: int,
                       ev: Event) -> None:
        """Validate a held-lock chain not seen before; a cached chain costs one set lookup."""
        if not rules.validates_chain(hlock.trylock, hlock.check):
            return
        if chain_key in self.chain_cache or (self.wait_chains and chain_key in self.wait_chains):
            self.stats.chain_hits += 1
            return
        if rules.chain_cacheable(len(task.held), self.cache_depth):
            # (a class checked for its wait context keeps its chains from the fast paths: `waits`)
            (self.wait_chains if hlock.lock in self.wait_locks else self.chain_cache).add(chain_key)
        self.stats.chains += 1
        ret = self.check_deadlock(task, hlock, ev)
        if ret == 0:
            return
        if not chain_head and ret != 2:
            self.check_prevs_add(task, hlock, ev)

    def check_deadlock(self, task: TaskState, nxt: HeldLock, ev: Event) -> int:
        """Same class already held: 0 reported, 1 fine, 2 allowed by a held nest lock (no new deps)."""
        if self._held_classes is not None and nxt.cls not in self._held_classes:
            return 1
        if nxt.cls not in map(_held_class, task.held):
            return 1  # the common case, in C: a deep stack costs a scan, not a Python loop per entry
        nest = None
        nest_key = nxt.nest
        for prev in task.held:
            if nest_key is not None and prev.lock == nest_key[0] and prev.instance == nest_key[1]:
                nest = prev
            if prev.cls != nxt.cls:
                continue
            # read-after-read recursion of the same class is allowed
            if nxt.read == 2 and prev.read:
                continue
            if self.cmp_locks and prev.lock in self.cmp_locks and self.cmp_fn_orders(prev, nxt):
                continue
            if nest is not None or (nest_key is not None and self.held_before_capture(task, nest_key)):
                return 2
            self.print_deadlock_bug(task, prev, nxt, ev)
            return 0
        return 1

    def check_prevs_add(self, task: TaskState, nxt: HeldLock, ev: Event) -> None:
        """Add `prev -> next` for the nearest held lock and the trylocks above it, in this irq context."""
        held = task.held
        depth = len(held)
        i = depth - 1
        while True:
            prev = held[i]
            if prev.check:
                # check_prev_add()'s `return 2` for a pair its class's cmp_fn orders: no dependency
                ordered = prev.cls == nxt.cls and prev.lock in self.cmp_locks and self.cmp_fn_orders(prev, nxt)
                if not ordered and not self.check_prev_add(task, prev, nxt, depth - i, ev):
                    return
                if rules.prevs_walk_stops(True, prev.trylock):
                    break
            i -= 1
            if i < 0 or held[i + 1].irq_context != held[i].irq_context:
                break

    def check_prev_add(self, task: TaskState, prev: HeldLock, nxt: HeldLock, distance: int,
                       ev: Event) -> bool:
        """Validate and record one dependency; False when it was reported instead."""
        dep = calc_dep(prev.read, nxt.read)
        attrs = self.graph._succ[prev.cls].get(nxt.cls)
        if attrs is not None and attrs["dep"] & dep == dep:
            # already present with this type: the search below ran when it was added
            # and found nothing, and the graph has not gained a strong cycle since
            if distance == 1:
                attrs["distance"] = 1
            return True
        target = self.check_noncircular(nxt, prev)
        if target is not None:
            if target.cls == nxt.cls:
                self.print_deadlock_bug(task, prev, nxt, ev)
            else:
                self.print_circular_bug(task, target, nxt, prev, ev)
            return False
        if not self.irq.check_irq_usage(task, prev, nxt, ev):
            return False
        held = getattr(prev, "held_evidence", None)  # (jobs.merge passes held locks of its own)
        if held is None or held.task != task.name:  # (a task's name may change while it holds a lock)
            pev = prev.event
            held = Evidence(pev.file, pev.line, task.name, pev.at, pev.ts)
            if isinstance(prev, HeldLock):
                prev.held_evidence = held
        evidence = Evidence(ev.file, ev.line, task.name, ev.at, ev.ts)
        if attrs is None:  # (looked up above: new, between known classes)
            self.graph.add_new_dependency(prev.cls, nxt.cls, dep, evidence, distance, held)
            return True
        self.graph.add_dependency(prev.cls, nxt.cls, dep, evidence, distance, held=held)
        return True

    # -- reports ---------------------------------------------------------
    def usage_of(self, cls: str) -> str:
        return usage_chars(self.graph.usage(cls))

    def snapshot(self, hlock: HeldLock) -> LockSnapshot:
        return snapshot(self.graph, hlock)

    def _finding(self, kind: str, task: TaskState, ev: Event, lock: str, held: Optional[str] = None,
                 **fields) -> Finding:
        return task_finding(self.graph, kind, task, ev, lock, held, **fields)

    def print_deadlock_bug(self, task: TaskState, prev: HeldLock, nxt: HeldLock, ev: Event) -> None:
        if (F.RECURSIVE, nxt.cls, prev.cls, None) in self.reported:
            return  # reported already (`report` would drop it): not built again, held list and all
        self.report(self._finding(F.RECURSIVE, task, ev, lock=nxt.cls, held=prev.cls,
                                  next=self.snapshot(nxt), prev=self.snapshot(prev)))

    def print_circular_bug(self, task: TaskState, target: "BfsEntry", nxt: HeldLock, prev: HeldLock,
                           ev: Event) -> None:
        path = []
        entry: Optional[BfsEntry] = target
        while entry is not None:
            path.append(entry)
            entry = entry.parent
        # path: target (prev's class) ... root (next's class); printed in that order
        depth = len(path) - 1
        chain = []
        for i, entry in enumerate(path):
            if entry.attrs is not None:
                evidence = entry.attrs["evidence"]
            else:
                evidence = Evidence(ev.file, ev.line, task.name, ev.at, ev.ts)
            chain.append(ChainLink(depth - i, entry.cls, self.usage_of(entry.cls), evidence, entry.dep))
        cycle = [e.cls for e in reversed(path)]
        self.report(self._finding(F.CIRCULAR, task, ev, lock=nxt.cls, held=prev.cls, cycle=cycle,
                                  next=self.snapshot(nxt), prev=self.snapshot(prev), chain=chain))

    def print_unlock_imbalance_bug(self, task: TaskState, ev: Event) -> None:
        cls = class_name(ev.lock, 0)
        self.report(self._finding(F.UNLOCK_IMBALANCE, task, ev, lock=cls,
                                  details={"instance": ev.instance}))

    def print_lock_nested_lock_not_held(self, task: TaskState, hlock: HeldLock, ev: Event) -> None:
        nest_lock, nest_instance = hlock.nest
        self.report(self._finding(F.NEST_NOT_HELD, task, ev, lock=hlock.cls, held=nest_lock,
                                  next=self.snapshot(hlock),
                                  details={"nest_instance": nest_instance}))


def check_events(events: Iterable[Event], graph: Optional[DepGraph] = None,
                 options: Optional[CheckerOptions] = None) -> tuple[list[Finding], Checker]:
    """Run a whole trace; the findings in report order and the checker (graph, stats)."""
    checker = Checker(graph, options)
    found = list(checker.run(events))
    return found, checker
