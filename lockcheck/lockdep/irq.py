"""Irq contexts and lock usage validation (lockdep's mark_usage / mark_lock_irq / check_irq_usage).

A class taken inside a hardirq handler is "hardirq-safe" (USED_IN_HARDIRQ);
one taken, or held, while hardirqs are enabled is "hardirq-unsafe"
(ENABLED_HARDIRQ).  Both on one class means an interrupt can arrive while
the lock is held and take it again on the same CPU: *inconsistent lock
state*.  A dependency path from a safe class to an unsafe one is the same
deadlock one lock removed: *irq lock inversion*.  The same holds for
softirqs.

Irq state per task follows the `.lt` context events.  Because a handler
really runs with its own kind of interrupt disabled, the checker treats
hardirqs as off inside `hardirq-enter`/`-exit` and softirqs as off inside
`softirq-enter`/`-exit` even when the trace does not say `irqs-off`
(the trace-format spec lets producers write only the enter/exit pair).
An exit without a matching enter (a capture that starts inside a handler)
is not an error: it is counted in the checker's notes and ignored.  An
`irqs-on` inside a hardirq handler is the kernel's
`DEBUG_LOCKS_WARN_ON(lockdep_hardirq_context())`: a WARN that turns lockdep
off, so a `lockdep-warning` finding (an ftrace capture cannot say it: its
flags column puts a handler's irqs off).

`task.irq_events` mirrors `curr->irqtrace`: `"stamp"` counts the real
on/off transitions (redundant `irqs-off` etc. do not count), and each op
maps to `(stamp at that transition, Evidence)`, printed by
`print_irqtrace_events` -- kept as a deferred reading of it until a report
asks (`_irq_event`, `tasks.irq_event`).

Backward searches use lockdep's `locks_before` dependency type
(`calc_depb`: `(next->read != 2) + ((prev->read == 0) << 1)`), which is the
forward type with the ER and SN bits swapped (`graph.reverse_dep`): a bit
permutation, so it is exact for a mask of several types too.
"""

from __future__ import annotations

from collections import deque
from typing import Callable, Optional

from lockcheck import events as E
from lockcheck.lockdep import findings as F
from lockcheck.events import Event
from lockcheck.lockdep.findings import ChainLink, Evidence, Finding, LockSnapshot
from lockcheck.lockdep.graph import DEP_E_MASK, DEP_N_MASK, DepGraph, reverse_dep
from lockcheck.lockdep import rules
from lockcheck.lockdep.usage import (
    DIR_MASK, ENABLED_HARDIRQ, ENABLED_SOFTIRQ, LOCKF_ENABLED_IRQ_ALL, LOCKF_IRQ, LOCKF_USED_IN_IRQ_ALL,
    READ_MASK, USED, USED_IN_HARDIRQ, USED_IN_SOFTIRQ, USAGE_STATES, exclusive_bit,
    state_name, usage_chars, usage_str,
)

from lockcheck.lockdep.tasks import (
    HeldLock, TaskState, irq_event, irq_state_text, snapshot, task_finding, usage_needs,
)

LOCKF_IRQ_READ = LOCKF_IRQ << READ_MASK
#: the `print_irqtrace_events` lines, by the `.lt` op that last set them
_IRQ_EVENT_KEYS = {
    E.IRQS_ON: "hardirqs_enabled", E.IRQS_OFF: "hardirqs_disabled",
    E.SOFTIRQS_ON: "softirqs_enabled", E.SOFTIRQS_OFF: "softirqs_disabled",
}


class _Entry:
    """A visited class in a usage search, with the dependency that led there."""

    __slots__ = ("cls", "parent", "only_xr", "attrs")

    def __init__(self, cls: str, parent: Optional["_Entry"], only_xr: bool, attrs: Optional[dict]) -> None:
        self.cls = cls
        self.parent = parent
        self.only_xr = only_xr
        self.attrs = attrs


class IrqValidator:
    """The irq half of lockdep, driven by the checker at lockdep's call points.

    It shares the checker's graph, reports through the checker's `report`
    (which drops repeats) and keeps its notes in the checker's list; it
    never calls the checker otherwise.
    """

    def __init__(self, graph: DepGraph, report: Callable[[Finding], None], notes: list[str]) -> None:
        self.graph = graph
        self.report = report
        self.notes = notes
        #: a PREEMPT_RT kernel's trace (`rules.softirq_context_tracked`)
        self.preempt_rt = False
        #: the task and event whose irq-usage search runs now (where `usage_skip`'s warning is located)
        self.at: Optional[tuple[TaskState, Event]] = None
        #: `rules.irq_transitions_by_state()` as the run starts: the irq-state ops of the checker and of the
        #: Python fast paths (`fast_held.irq_change`), one look-up each
        self.transitions = rules.irq_transitions_by_state()

    # -- context events --------------------------------------------------
    def on_event(self, task: TaskState, ev: Event) -> None:
        """Apply one irq-context event (`handlers` gives the checker each op's handler directly)."""
        self.handlers()[ev.op](task, ev)

    def handlers(self) -> dict[str, Callable[[TaskState, Event], None]]:
        """op -> the handler of each irq-context op (one for all: `rules.irq_transition` tells each)."""
        return {op: self._transition for op in rules.IRQ_TRANSITION_OPS}

    def _transition(self, task: TaskState, ev: Event) -> None:
        """An irq-state op as `rules.irq_transition` has it: the task's new state, the transition's
        stamp, its note or warning, the held locks it marks, the task's usage needs."""
        op = ev.op
        if (op == E.SOFTIRQ_ENTER or op == E.SOFTIRQ_EXIT) and not rules.softirq_context_tracked(self.preempt_rt):
            return  # lockdep_softirq_enter()/_exit() are empty on PREEMPT_RT
        state = (task.hardirq_depth > 0, task.softirq_depth > 0, task.hardirqs_enabled, task.softirqs_enabled)
        t = self.transitions.get((op, *state))
        if t is None:  # (a state of no bools: the rule itself)
            t = rules.irq_transition(op, *map(bool, state))
            if t is None:
                return
        if op == E.HARDIRQ_ENTER:
            # lockdep_hardirq_enter() clears hardirq_threaded on the outermost entry;
            # lockdep_hardirq_threaded() sets it (`hardirq-enter threaded`)
            threaded = bool(ev.props and ev.props.get("threaded"))
            if not task.hardirq_depth or threaded:
                task.hardirq_threaded = threaded
        if t.hardirq_step:
            task.hardirq_depth += t.hardirq_step
            if not task.hardirq_depth:
                task.hardirq_threaded = False
        if t.softirq_step:
            task.softirq_depth += t.softirq_step
        task.hardirqs_enabled = t.hardirqs_enabled
        task.softirqs_enabled = t.softirqs_enabled
        if t.recorded:
            _irq_event(task, op, ev)
        if t.note == rules.NOTE_UNMATCHED_EXIT:
            self._note(ev, f"{op} without a matching enter (ignored)")
        elif t.note == rules.NOTE_IRQS_ON_IN_HARDIRQ:
            # lockdep_hardirqs_on_prepare: DEBUG_LOCKS_WARN_ON(lockdep_hardirq_context()) -- a WARN that
            # turns lockdep off, so a finding as the same WARN read from a kernel log is; the held locks
            # are not marked (the kernel returns before mark_held_locks())
            message = "DEBUG_LOCKS_WARN_ON(lockdep_hardirq_context())"
            self.report(task_finding(self.graph, F.LOCKDEP_WARNING, task, ev, lock=message, details={
                "message": message, "warned_at": "lockdep_hardirqs_on_prepare",
                "dedup": "lockdep_hardirqs_on_prepare"}))
        marks = t.marks
        bit = 0
        while marks >> bit:  # mark_held_locks per bit, in bit order (hardirq first), until one reports
            if marks & (1 << bit) and not self.mark_held_locks(task, bit, ev):
                break
            bit += 1
        if t.refresh:
            task.usage_need = usage_needs(task)

    def _note(self, ev: Event, text: str) -> None:
        notes = self.notes
        if len(notes) < 20:
            notes.append(f"{ev.location}: {text}")

    def mark_held_locks(self, task: TaskState, base_bit: int, ev: Event) -> bool:
        for hlock in list(task.held):
            if not hlock.check:
                continue
            bit = base_bit + (READ_MASK if hlock.read else 0)
            if not self.mark_lock(task, hlock, bit, ev):
                return False
        return True

    # -- usage marking on acquire ------------------------------------------
    def mark_usage(self, task: TaskState, hlock: HeldLock, ev: Event) -> bool:
        """lockdep's mark_usage: the usage bits one acquisition implies; False after a report.

        The checker calls this only when `usage_needs` says a bit is new; the
        bits are then marked in lockdep's order, each validated.
        """
        read = 1 if hlock.read else 0
        needed = rules.acquire_usage(task.usage_need, hlock.read, hlock.trylock, hlock.check, hlock.hardirqs_off)
        missing = needed & ~self.graph._node[hlock.cls]["usage"]
        for bit in (USED_IN_HARDIRQ, USED_IN_SOFTIRQ, ENABLED_HARDIRQ, ENABLED_SOFTIRQ, USED):
            bit += read
            if missing & (1 << bit) and not self.mark_lock(task, hlock, bit, ev):
                return False
        return True

    def mark_lock(self, task: TaskState, hlock: HeldLock, bit: int, ev: Event) -> bool:
        """Set a usage bit (first trace kept); a new irq bit is validated (mark_lock_irq)."""
        node = self.graph._node[hlock.cls]
        if node["usage"] & (1 << bit):
            return True
        self.graph.set_usage(hlock.cls, bit, Evidence(ev.file, ev.line, task.name, ev.at, ev.ts))
        if bit >= USAGE_STATES:
            return True
        return self.mark_lock_irq(task, hlock, bit, ev)

    def mark_lock_irq(self, task: TaskState, hlock: HeldLock, new_bit: int, ev: Event) -> bool:
        excl_bit = exclusive_bit(new_bit)
        read = new_bit & READ_MASK
        if not self.valid_state(task, hlock, new_bit, excl_bit, ev):
            return False
        if not read and not self.valid_state(task, hlock, new_bit, excl_bit + READ_MASK, ev):
            return False
        if new_bit & DIR_MASK:
            return self.check_usage_backwards(task, hlock, excl_bit, ev)
        return self.check_usage_forwards(task, hlock, excl_bit, ev)

    def valid_state(self, task: TaskState, hlock: HeldLock, new_bit: int, bad_bit: int, ev: Event) -> bool:
        if self.graph.usage(hlock.cls) & (1 << bad_bit):
            self.print_usage_bug(task, hlock, bad_bit, new_bit, ev)
            return False
        return True

    def check_usage_forwards(self, task: TaskState, hlock: HeldLock, bit: int, ev: Event) -> bool:
        """A class just became irq-safe: no class it leads to may be irq-unsafe."""
        self.at = (task, ev)
        mask = (1 << bit) | (1 << (bit + READ_MASK))
        root = _Entry(hlock.cls, None, hlock.read == 2, None)
        found = self.find_usage(root, mask, forwards=True)
        if found is None:
            return True
        used = self.graph.usage(found.cls)
        name = state_name(bit) if used & (1 << bit) else state_name(bit + READ_MASK)
        self.print_irq_inversion_bug(task, root, found, hlock, True, name, ev)
        return False

    def check_usage_backwards(self, task: TaskState, hlock: HeldLock, bit: int, ev: Event) -> bool:
        """A class just became irq-unsafe: no class leading to it may be irq-safe."""
        self.at = (task, ev)
        if not self.graph.irq_safe_classes:
            return True  # looking for an irq-safe class, and there is none
        mask = (1 << bit) | (1 << (bit + READ_MASK))
        if not self.graph.irq_safe_reach(hlock.cls) & mask:
            return True  # none leads here
        root = _Entry(hlock.cls, None, hlock.read != 0, None)
        found = self.find_usage(root, mask, forwards=False)
        if found is None:
            return True
        used = self.graph.usage(found.cls)
        name = state_name(bit) if used & (1 << bit) else state_name(bit + READ_MASK)
        self.print_irq_inversion_bug(task, root, found, hlock, False, name, ev)
        return False

    # -- the new-dependency check (check_irq_usage) ------------------------
    def check_irq_usage(self, task: TaskState, prev: HeldLock, nxt: HeldLock, ev: Event) -> bool:
        """Would `prev -> next` connect an irq-safe class (before prev) to an irq-unsafe one (after next)?"""
        self.at = (task, ev)
        if not self.graph.irq_safe_classes:
            return True  # nothing is irq-safe yet: no dependency can be irq-unsafe
        if not self.graph.irq_safe_reach(prev.cls) & LOCKF_USED_IN_IRQ_ALL:
            return True  # no irq-safe class leads to prev: the backward search would find none
        usage = self.graph._node
        accumulated = 0

        def accumulate(entry: _Entry) -> bool:
            nonlocal accumulated
            mask = usage[entry.cls]["usage"]
            accumulated |= (mask & LOCKF_IRQ) if entry.only_xr else mask
            return False

        this = _Entry(prev.cls, None, prev.read != 0, None)
        self.bfs(this, accumulate, forwards=False)
        accumulated &= LOCKF_USED_IN_IRQ_ALL
        if not accumulated:
            return True
        that = _Entry(nxt.cls, None, nxt.read == 2, None)
        target1 = self.find_usage(that, exclusive_mask(accumulated), forwards=True)
        if target1 is None:
            return True
        backward_mask = original_mask(usage[target1.cls]["usage"] & LOCKF_ENABLED_IRQ_ALL)
        this = _Entry(prev.cls, None, prev.read != 0, None)
        target = self.find_usage(this, backward_mask, forwards=False)
        if target is None:
            return True
        match = find_exclusive_match(usage[target.cls]["usage"], usage[target1.cls]["usage"])
        if match is None:
            return True
        backward_bit, forward_bit = match
        self.print_bad_irq_dependency(task, this, that, target, target1, prev, nxt, backward_bit,
                                      forward_bit, ev)
        return False

    # -- graph searches ----------------------------------------------------
    def find_usage(self, root: _Entry, mask: int, forwards: bool) -> Optional[_Entry]:
        usage = self.graph._node

        def match(entry: _Entry) -> bool:
            bits = usage[entry.cls]["usage"]
            if entry.only_xr:
                bits &= LOCKF_IRQ
            return bool(bits & mask)

        return self.bfs(root, match, forwards)

    def bfs(self, root: _Entry, match: Callable[[_Entry], bool], forwards: bool) -> Optional[_Entry]:
        """lockdep's __bfs over locks_after (forwards) or locks_before (backwards), strong paths only."""
        adjacency = self.graph._succ if forwards else self.graph._pred
        nodes = self.graph._node
        if "lock_type" in nodes[root.cls] and self.usage_skip(root.cls):
            return None
        if match(root):
            return root
        accessed = {root.cls}
        queue: deque = deque((cls, attrs, root) for cls, attrs in adjacency[root.cls].items())
        while queue:
            cls, attrs, parent = queue.popleft()
            if cls in accessed:
                continue
            accessed.add(cls)
            dep = attrs["dep"] if forwards else reverse_dep(attrs["dep"])
            if parent.only_xr:
                dep &= DEP_E_MASK
                if not dep:
                    continue
            if "lock_type" in nodes[cls] and self.usage_skip(cls):
                continue  # `usage_skip()`: the class and every path through it are passed over
            entry = _Entry(cls, parent, not (dep & DEP_N_MASK), attrs)
            if match(entry):
                return entry
            queue.extend((ncls, nattrs, entry) for ncls, nattrs in adjacency[cls].items())
        return None

    def usage_skip(self, cls: str) -> bool:
        """`rules.usage_skip` for a percpu or override class; the kernel's DEBUG_LOCKS_WARN_ON for a
        percpu one whose inner wait type is below config, once per class, where the search ran."""
        lock_type, inner = self.graph._node[cls]["lock_type"]
        if rules.percpu_wait_invalid(lock_type, inner) and self.at is not None and self.at[0] is not None:
            task, ev = self.at
            self.report(task_finding(self.graph, F.LOCKDEP_WARNING, task, ev, lock=cls, details={
                "message": "DEBUG_LOCKS_WARN_ON(entry->class->wait_type_inner < LD_WAIT_CONFIG)",
                "warned_at": "usage_skip", "class": cls}))
        return rules.usage_skip(lock_type, inner)

    # -- reports -----------------------------------------------------------
    def _usage_trace(self, cls: str, bit: int) -> Optional[Evidence]:
        return self.graph._node[cls]["usage_traces"].get(bit)

    def _path(self, leaf: _Entry, here: Evidence) -> list[ChainLink]:
        """The dependencies from the search root to `leaf`, leaf first (as the kernel prints them).

        The root's trace is the current one (`root->trace = save_trace()`
        before the kernel prints the path): `here`.
        """
        entries = []
        entry: Optional[_Entry] = leaf
        while entry is not None:
            entries.append(entry)
            entry = entry.parent
        links = []
        depth = len(entries) - 1
        for i, entry in enumerate(entries):
            evidence = entry.attrs["evidence"] if entry.attrs is not None else here
            links.append(ChainLink(depth - i, entry.cls, usage_chars(self.graph.usage(entry.cls)),
                                   evidence, entry.attrs["dep"] if entry.attrs else 0))
        return links

    def _class_snapshot(self, cls: str) -> LockSnapshot:
        return LockSnapshot(name=cls, instance=None, usage=usage_chars(self.graph.usage(cls)), at=None)

    def _usage_bits(self, cls: str) -> dict[str, Evidence]:
        """Every usage bit with its trace, INITIAL USE included (`LOCK_TRACE_STATES == LOCK_USAGE_STATES`)."""
        node = self.graph._node[cls]
        return {usage_str(bit): ev for bit, ev in sorted(node["usage_traces"].items())}

    def _class_usage_traces(self, *paths: list[ChainLink]) -> dict[str, dict[str, Evidence]]:
        """`print_lock_class_header` prints the usage of every class on the printed paths."""
        return {link.cls: self._usage_bits(link.cls) for path in paths for link in path}

    def print_usage_bug(self, task: TaskState, hlock: HeldLock, prev_bit: int, new_bit: int, ev: Event) -> None:
        events: dict = {"stamp": task.irq_events.get("stamp", 0)}
        for op, key in _IRQ_EVENT_KEYS.items():
            seen = irq_event(task, op)
            events[key] = list(seen) if seen is not None else None
        details = {
            "prev_bit": usage_str(prev_bit),
            "new_bit": usage_str(new_bit),
            "irq_state": irq_state_text(task),
            "usage_traces": {usage_str(prev_bit): self._usage_trace(hlock.cls, prev_bit)},
            "irq_events": events,
        }
        self.report(task_finding(self.graph, F.INCONSISTENT, task, ev, lock=hlock.cls,
                                 next=snapshot(self.graph, hlock), details=details))

    def print_irq_inversion_bug(self, task: TaskState, root: _Entry, other: _Entry, hlock: HeldLock,
                                forwards: bool, irqclass: str, ev: Event) -> None:
        """lockdep's print_irq_inversion_bug: a usage change made an existing dependency bad."""
        here = Evidence(ev.file, ev.line, task.name, ev.at, ev.ts)
        path = self._path(other, here)  # other ... root
        if forwards:  # root became safe and leads to unsafe `other`
            safe, unsafe = root.cls, other.cls
        else:  # root became unsafe and `other` (safe) leads to it
            safe, unsafe = other.cls, root.cls
        # print_irq_inversion_bug's middle: the entry next to root on the path (`other`
        # itself when adjacent; root when root is `other`)
        middle_cls = path[-2].cls if len(path) >= 2 else root.cls
        details = {
            "irq_report": "inversion",
            "forwards": forwards,
            "irqclass": irqclass,
            "other": self._class_snapshot(other.cls),
            "safe": safe,
            "unsafe": unsafe,
            "middle": middle_cls,
            "path": path,
            "class_usage_traces": self._class_usage_traces(path),
            "irq_state": irq_state_text(task),
            "dedup": "inversion",
        }
        self.report(task_finding(self.graph, F.IRQ_INVERSION, task, ev, lock=hlock.cls, held=other.cls,
                                 next=snapshot(self.graph, hlock), details=details))

    def print_bad_irq_dependency(self, task: TaskState, this: _Entry, that: _Entry, backward: _Entry,
                                 forward: _Entry, prev: HeldLock, nxt: HeldLock, backward_bit: int,
                                 forward_bit: int, ev: Event) -> None:
        """lockdep's print_bad_irq_dependency: a new dependency links irq-safe to irq-unsafe."""
        here = Evidence(ev.file, ev.line, task.name, ev.at, ev.ts)
        safe_path, unsafe_path = self._path(backward, here), self._path(forward, here)
        irqclass = state_name(backward_bit)
        safe_bit, unsafe_bit = usage_str(backward_bit), usage_str(forward_bit)
        details = {
            "irq_report": "bad_dependency",
            "irqclass": irqclass,
            "irq_state": irq_state_text(task),
            "safe": self._class_snapshot(backward.cls),
            "safe_bit": safe_bit,
            "unsafe": self._class_snapshot(forward.cls),
            "unsafe_bit": unsafe_bit,
            "usage_traces": {safe_bit: self._usage_trace(backward.cls, backward_bit),
                             unsafe_bit: self._usage_trace(forward.cls, forward_bit)},
            "middle": _scenario_middle(backward.cls, forward.cls, prev.cls, nxt.cls),
            "safe_path": safe_path,  # safe ... prev
            "unsafe_path": unsafe_path,  # unsafe ... next
            "class_usage_traces": self._class_usage_traces(safe_path, unsafe_path),
            "dedup": "bad-dependency",
        }
        self.report(task_finding(self.graph, F.IRQ_INVERSION, task, ev, lock=nxt.cls, held=prev.cls,
                                 next=snapshot(self.graph, nxt), prev=snapshot(self.graph, prev),
                                 details=details))


def _irq_event(task: TaskState, op: str, ev: Event) -> None:
    """Record an irq-state transition as `curr->irqtrace` does (`++trace->irq_events`).

    Kept deferred, as `(stamp, Evidence, *its fields)` (`tasks.irq_event` builds
    it when a report or `lockcheck.jobs` asks): nearly every transition
    would build the object for nothing.
    """
    events = task.irq_events
    stamp = events["stamp"] = events.get("stamp", 0) + 1
    events[op] = (stamp, Evidence, ev.file, ev.line, task.name, ev.at, ev.ts)


def _scenario_middle(safe: str, unsafe: str, prev_class: str, next_class: str) -> Optional[str]:
    """print_irq_lock_scenario's middle class, None when there is no `Chain exists of:` line."""
    middle = next_class if prev_class == safe else prev_class
    return None if middle == unsafe else middle


def invert_dir_mask(mask: int) -> int:
    return ((mask & LOCKF_ENABLED_IRQ_ALL) >> DIR_MASK) | ((mask & LOCKF_USED_IN_IRQ_ALL) << DIR_MASK)


def exclusive_mask(mask: int) -> int:
    """Usage bits that deadlock against `mask`: other direction, read and write variants."""
    excl = invert_dir_mask(mask)
    excl |= (excl & LOCKF_IRQ_READ) >> READ_MASK
    excl |= (excl & LOCKF_IRQ) << READ_MASK
    return excl


original_mask = exclusive_mask  # the kernel computes the inverse the same way


def find_exclusive_match(mask: int, excl_mask: int) -> Optional[tuple[int, int]]:
    """The first (bit, exclusive bit) pair between a safe class's and an unsafe class's usage."""
    for bit in range(USED):
        if not mask & (1 << bit):
            continue
        excl = exclusive_bit(bit)
        if excl_mask & (1 << excl):
            return bit, excl
        if excl_mask & (1 << (excl | READ_MASK)):
            return bit, excl | READ_MASK
    return None
