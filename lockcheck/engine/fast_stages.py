"""What the capture fast paths (`lockcheck.engine.fast_capture`) do to the three stages' state for
a line they take: the task's view (`_View`), the annotator's decision and bookkeeping
(`_Annotated`), and the checker's chain-cache hit and innermost release (`_push_hit`,
`_pop_innermost`) -- exactly what the plain path would have done, or False/None to leave the
line to it."""

from __future__ import annotations

from typing import Callable, Optional

from lockcheck.engine.fast_held import irq_change
from lockcheck.lockdep import rules
from lockcheck.lockdep.checker import Checker
from lockcheck.lockdep.findings import Evidence
from lockcheck.events import ACQUIRE, Event
from lockcheck.kernel.annotations import context_after
from lockcheck.lockdep.tasks import HeldLock


class _View:
    """What the fast path needs of one task's state in the three stages, until a plain line of
    the task may change it."""

    __slots__ = ("task", "held", "irq_context", "hardirqs_off", "usage_need", "recent", "a_held")

    def __init__(self, task, a_held: Optional[list]) -> None:
        self.task = task
        self.held = task.held
        hardirq_depth = task.hardirq_depth
        self.hardirqs_off = hardirqs_off = rules.hardirqs_off(task.hardirqs_enabled, hardirq_depth)
        self.irq_context = rules.task_irq_context(hardirq_depth, task.softirq_depth)
        self.usage_need = rules.needs_now(task.usage_need, hardirqs_off)
        self.recent = task.acquired_ever
        self.a_held = a_held


class _Annotated:
    """The annotator's `_acquire` and `_release` for a line the fast path takes: first what it would
    decide (nothing changed), then what it would do.  One copy for lines and for field tuples."""

    __slots__ = ("annotator", "held_of", "ctx", "cpu", "sources", "tries", "ruled_of", "changes",
                 "only_unchecked", "until_report", "index", "suffixes")

    def __init__(self, annotator) -> None:
        self.annotator = annotator
        self.held_of = annotator.held
        self.ctx = annotator.ctx
        self.cpu = annotator.cpu
        self.sources = annotator.sources
        self.tries = annotator.tries
        self.ruled_of = annotator._ruled
        self.changes = annotator.changes
        #: class -> its no-check rule's origin when that is its one rule; "" not
        self.only_unchecked: dict = {}
        self.until_report = annotator.validity == "until-report"
        self.index = annotator.index
        self.suffixes = self.index.suffixes if self.index is not None else None

    def decide(self, view: _View, task: str, name: str, mode: int, trylock: bool, check: bool,
               source: str) -> Optional[tuple]:
        """`(check, origin, use_state, ctx)` as the annotator would pass the acquisition on, or None:
        it would change or doubt something (the plain way)."""
        annotator = self.annotator
        if not annotator.capture or not check:
            return None
        trusted = annotator.trusted
        if trusted and self.until_report:
            return None
        ruled = self.ruled_of.get(name)
        if ruled is None:
            return None
        origin = None
        if ruled:
            # a class whose one rule is `no-check` (rcu_read_lock...): taken with check=0
            origin = self.only_unchecked.get(name)
            if origin is None:
                origin = self.only_unchecked[name] = _only_unchecked(annotator.rules, name)
            if not origin:
                return None
            check = False
        a_held = view.a_held
        ctx = self.ctx.get(task, 0)
        index = self.index
        use_state = index is not None and trusted
        validated = rules.validates_chain(trylock, check)
        # a class held twice is the annotator's to resolve (subclass, nest_lock, doubts) -- but for a
        # trylock under the trusted state, which `_resolve` leaves as it came (lockdep validates no
        # trylock's chain: `try &dentry->d_lock` under another d_lock is pushed as any trylock)
        if a_held and (not use_state or validated):
            for entry in a_held:
                if entry[0] == name:
                    return None
        if use_state:
            if validated:
                entries = a_held or ()
                i = len(entries)
                while i and entries[i - 1][3] == ctx:
                    i -= 1
                if tuple([entry[0] for entry in entries[i:]] + [name]) not in self.suffixes:
                    return None
        else:
            if index is not None and source not in annotator.untrusted_from:
                return None
            if mode and name not in annotator.rules.recursive_read:
                reasons = annotator.doubts.get(name)
                if reasons is None or (len(reasons) < 3 and not any(
                        reason[:20] == _READ_DOUBT for reason in reasons)):
                    return None
        return check, origin, use_state, ctx

    def acquire(self, view: _View, task: str, name: str, instance: str, mode: int, trylock: bool,
                cpu: Optional[int], source: str, verdict: tuple) -> None:
        """What the annotator's `_acquire` does to its state for an acquisition `decide` passed."""
        _, origin, use_state, ctx = verdict
        if cpu is not None:
            self.cpu[task] = cpu
        counts = self.tries.get(source)
        if counts is None:
            counts = self.tries[source] = [0, 0]
        counts[0] += 1
        if trylock:
            counts[1] += 1
        if origin is not None:
            self.changes[("check0", name, "rule " + origin)] += 1
            self.sources["rule"] += 1
        else:
            self.sources["state" if use_state else "none"] += 1
        a_held = view.a_held
        if a_held is None:
            a_held = view.a_held = self.held_of[task] = []
        a_held.append([name, name, instance, ctx, mode])

    @staticmethod
    def release(view: _View, name: str, instance: str) -> bool:
        """The annotator's `_release` of its innermost entry, if that is the lock (True: done)."""
        a_held = view.a_held
        if not a_held:
            return False
        a_top = a_held[-1]
        if a_top[1] != name or a_top[2] != instance or (len(a_top) > 5 and a_top[5]):
            return False
        a_held.pop()
        return True


def _push_hit(checker: Checker, view: _View, name: str, instance: str, mode: int, trylock: bool, check: bool,
              read_back: Callable[[], Event]) -> bool:
    """The checker's `feed` + `lock_acquire` of an acquisition whose chain is cached and that marks no
    new usage bit, applied (True); False: not such an acquisition, nothing changed.

    `read_back()` makes the event the plain path would have fed, for a report that cites it.
    """
    node = checker._nodes.get(name)
    if node is None:
        return False
    held = view.held
    depth = len(held)
    if depth >= checker.fast_depth:  # (a stack this deep goes the plain way, which reports the limit)
        return False
    # (the view's usage_need is its task's, already taken for its hardirqs-off state)
    if rules.acquire_usage(view.usage_need, mode, trylock, check, False) & ~node["usage"]:
        return False
    ctask = view.task
    prev_key = chain_key = ctask.chain_key
    irq_context = view.irq_context
    if depth and rules.separate_irq_context(held[-1].irq_context, irq_context):
        chain_key = rules.INITIAL_CHAIN_KEY
    chain_key = rules.iterate_chain_key(chain_key, name, mode)
    validated = rules.validates_chain(trylock, check)
    if validated and chain_key not in checker.chain_cache:
        return False
    cstats = checker.stats
    cstats.events += 1
    recent = view.recent
    if recent is not None:
        recent.add((name, instance))
        recent.last = cstats.events
    hlock = HeldLock.deferred(read_back, name, name, instance, 0, mode, trylock, check, None, irq_context,
                              view.hardirqs_off, 0)
    hlock.prev_chain_key = prev_key
    held.append(hlock)
    ctask.chain_key = chain_key
    if validated:
        cstats.chain_hits += 1
    return True


def _pop_innermost(checker: Checker, view: _View, name: str, instance: str, ann: Optional[_Annotated]) -> bool:
    """The checker's (and the annotator's, if one runs) release of the task's innermost lock, when it
    is NAME@INSTANCE held once, applied (True); False: any other release, nothing changed."""
    held = view.held
    if not held or view.task.pins:  # a pinned lock's release is the checker's (`__lock_release`)
        return False
    top = held[-1]
    if top.instance != instance or top.lock != name or top.references:
        return False
    if ann is not None and not ann.release(view, name, instance):
        return False
    checker.stats.events += 1
    held.pop()
    view.task.chain_key = top.prev_chain_key
    return True


def context_hit(checker: Checker, view: _View, ann: Optional[_Annotated], task: str, ops: tuple,
                display: Optional[str], cpu: Optional[int], file: str, lineno: int, ts: Optional[float],
                at: Optional[str] = None) -> Optional[_View]:
    """The irq-context events the ftrace reader makes of a line whose flags column changed
    (`ftrace_context.context_transition`), applied to the checker and the annotator as the plain
    path would (`fast_held.irq_change`: none may mark a usage bit or note anything): the task's
    new view; None: one would, nothing changed (the plain way).

    A capture changes context on about one line in fourteen (every `d` of the flags column
    that comes or goes): left to the plain path, each took the line's lock event with it.
    """
    ctask = view.task
    if ctask.hardirq_threaded or ctask.pins or checker.irq.preempt_rt or checker.stopped:
        return None
    saved = (ctask.hardirqs_enabled, ctask.softirqs_enabled, ctask.hardirq_depth, ctask.softirq_depth,
             ctask.usage_need, dict(ctask.irq_events))
    name = ctask.name
    if display is not None:
        ctask.name = display  # (Checker.feed's, before its handler stamps the transition)
    nodes = checker.graph._node
    transitions = checker.irq.transitions
    held = view.held
    where = (Evidence, file, lineno, ctask.name, at, ts)
    for op in ops:
        if not irq_change(ctask, held, op, nodes, transitions, "", file, lineno, where):
            ctask.name = name
            (ctask.hardirqs_enabled, ctask.softirqs_enabled, ctask.hardirq_depth, ctask.softirq_depth,
             ctask.usage_need, events) = saved
            ctask.irq_events.clear()
            ctask.irq_events.update(events)
            return None
    checker.stats.events += len(ops)
    if cpu is not None:
        ctask.cpu = cpu
    a_held = view.a_held
    if ann is not None:
        ctx = ann.ctx.get(task, 0)  # the annotator's `_irq`, per op
        for op in ops:
            ctx = context_after(ctx, op)
        ann.ctx[task] = ctx
        a_held = ann.held_of.get(task)
    return _View(ctask, a_held)


def _event(task: str, lock: str, instance: str, mode: int, trylock: bool, check: bool, timestamp: str,
           cpu: Optional[int], file: str, lineno: int, display: str, subclass: int = 0) -> Event:
    """The event of a `lock_acquire` line as the checker got it: the reader's, annotated (read back
    for a report; `subclass`: the one the compiled filter's annotator part gave a class held twice)."""
    return Event(task, ACQUIRE, lock, instance, mode, trylock, subclass, None, check, None, float(timestamp), cpu,
                 file, lineno, display)


#: the first 20 characters of the annotator's doubt about a read mode guessed by name (its kind)
_READ_DOUBT = "the capture does not"


def _only_unchecked(rules, name: str) -> str:
    """The origin of the `no-check` rule of class NAME when that is the one rule naming it; "" else."""
    origin = rules.unchecked(name)
    if origin is None or name in rules.recursive_read or name in rules.subclass_by_address \
            or name in rules.nest_under:
        return ""
    return origin
