"""What the fast `.lt` path does to a held stack besides pushing onto a cached chain: a release
below the top (lockdep's re-acquisition of the locks above it) and an irq-state change, each
applied here only when it marks no usage bit and validates no new chain -- else the checker's.

A fast-path entry of a held stack is a tuple, laid out by the indices below (RELEASE: the
text after the task of the plain release that pops it, `release CLASS@INSTANCE`); the
compiled core (`_speedups.c`) keeps the same layout.
"""

from __future__ import annotations

from typing import Optional

from lockcheck.lockdep import rules
from lockcheck.lockdep.findings import Evidence
from lockcheck.lockdep.tasks import TaskState, usage_needs
from lockcheck.readers import lt
from lockcheck.lockdep.usage import READ_MASK

RELEASE, CLS, LOCK, INSTANCE, PREV_KEY, IRQ_CONTEXT, READ, TRYLOCK, HARDIRQS_OFF, NEST, SUBCLASS, REFERENCES, \
    LINE, LINENO = range(14)


def release_out_of_order(task: TaskState, held: list, lock: str, instance: Optional[str], nodes: dict,
                         cache: set) -> int:
    """`Checker.lock_release` of a held lock that is not the innermost, when every lock above it
    is re-acquired (`reacquire_held_locks`) onto a cached chain marking no usage bit: applied
    here, the number of chain-cache hits; -1: nothing changed, the full checker's.

    A re-acquisition whose new chain is cached validates nothing, whichever of lockdep's steps
    takes it (`Checker.reacquire_held_locks`'s quick one or `lock_acquire`): the lock is pushed
    again in the task's irq context now, with its new chain key.  The locks above must be the
    fast path's entries without a nest lock (`lock_acquire` would look for it); all is checked
    before anything changes.
    """
    index = find_held(held, lock, instance)
    if index is None:
        return -1
    found = held[index]
    if found.__class__ is tuple:
        if found[REFERENCES]:
            return -1
        chain_key = found[PREV_KEY]
    else:
        if found.references:
            return -1
        chain_key = found.prev_chain_key
    irq_context = rules.task_irq_context(task.hardirq_depth, task.softirq_depth)
    need = task.usage_need
    if index:
        below = held[index - 1]
        below_context = below[IRQ_CONTEXT] if below.__class__ is tuple else below.irq_context
    else:
        below_context = None  # no lock below: the chain goes on from the key (lock_acquire at depth 0)
    moved = []
    hits = 0
    for again in held[index + 1:]:
        if again.__class__ is not tuple or again[NEST] is not None:
            return -1
        cls, read, trylock = again[CLS], again[READ], again[TRYLOCK]
        if rules.acquire_usage(need, read, trylock, True, again[HARDIRQS_OFF]) & ~nodes[cls]["usage"]:
            return -1  # a new usage bit: mark_usage
        starts = below_context is not None and rules.separate_irq_context(below_context, irq_context)
        next_key = rules.iterate_chain_key(rules.INITIAL_CHAIN_KEY if starts else chain_key, cls, read)
        if rules.validates_chain(trylock, True):
            if next_key not in cache:
                return -1  # a new chain: validate_chain
            hits += 1
        moved.append(again[:PREV_KEY] + (chain_key, irq_context) + again[IRQ_CONTEXT + 1:])
        below_context = irq_context
        chain_key = next_key
    del held[index:]
    held += moved
    task.chain_key = chain_key
    return hits


def find_held(held: list, lock: str, instance: Optional[str]) -> Optional[int]:
    """`Checker.find_held_lock` over a stack of tuples and `HeldLock`s: top-down, not crossing
    into another irq context."""
    i = len(held) - 1
    while i >= 0:
        entry = held[i]
        if entry.__class__ is tuple:
            if entry[LOCK] == lock and (entry[INSTANCE] == instance or (entry[REFERENCES] and entry[SUBCLASS] == 0)):
                return i
            context = entry[IRQ_CONTEXT]
        else:
            if entry.matches(lock, instance):
                return i
            context = entry.irq_context
        i -= 1
        if i >= 0:
            below = held[i]
            if (below[IRQ_CONTEXT] if below.__class__ is tuple else below.irq_context) != context:
                return None
    return None


def irq_change(task: TaskState, held: list, op: str, nodes: dict, transitions: dict, line: str, file: str,
               lineno: int, where: Optional[tuple] = None) -> bool:
    """Apply the irq-state op `op` of `line` as `IrqValidator`'s handler would, if that marks no
    usage bit and notes nothing (True); else change nothing (False: the full checker's).

    `where`, when given, is what the transition's record keeps instead of the `.lt` line to
    read back: `(make, *args)`, `make(*args)` being its `Evidence` (a capture's line is no
    `.lt` line; `fast_stages.context_hit`).

    The op is `rules.irq_transition`'s, looked up in the run's `transitions`
    (`IrqValidator.transitions`).  Turning hardirqs (softirqs) on marks every checked held lock
    with its `marks` (ENABLED_HARDIRQ, ENABLED_SOFTIRQ; _READ for a reader; `mark_held_locks`):
    when the held classes have those bits already, that marks nothing and validates nothing,
    and the change is the task's state alone.  A recorded transition is stamped as
    `irq._irq_event` stamps it, its evidence deferred (`tasks.irq_event` reads it back).  One
    that notes (an exit without its enter, `irqs-on` inside a hardirq handler) is the full
    checker's.
    """
    t = transitions.get((op, task.hardirq_depth > 0, task.softirq_depth > 0, task.hardirqs_enabled,
                         task.softirqs_enabled))
    if t is None:
        return False
    hard_step, soft_step, hardirqs_enabled, softirqs_enabled, marks, recorded, note, refresh = t
    if note or (marks and held and not _marked(held, nodes, marks)):
        return False
    if hard_step:
        task.hardirq_depth += hard_step
    if soft_step:
        task.softirq_depth += soft_step
    task.hardirqs_enabled = hardirqs_enabled
    task.softirqs_enabled = softirqs_enabled
    if recorded:
        _defer_irq_event(task, op, line, file, lineno, where)
    if refresh:
        task.usage_need = usage_needs(task)
    return True


def _marked(held: list, nodes: dict, bits: int) -> bool:
    """Whether every checked held lock's class has `bits` (shifted to _READ for a reader)."""
    read_bits = bits << READ_MASK
    for entry in held:
        if entry.__class__ is tuple:
            cls, read = entry[CLS], entry[READ]
        elif entry.check:
            cls, read = entry.cls, entry.read
        else:
            continue
        want = read_bits if read else bits
        if nodes[cls]["usage"] & want != want:
            return False
    return True


def _defer_irq_event(task: TaskState, op: str, line: str, file: str, lineno: int,
                     where: Optional[tuple] = None) -> None:
    """`irq._irq_event` without reading the line: its evidence is read back if asked."""
    irq_events = task.irq_events
    stamp = irq_events.get("stamp", 0) + 1  # type: ignore[operator]
    irq_events["stamp"] = stamp
    irq_events[op] = (stamp, irq_evidence, line, file, lineno, task.name) if where is None else (stamp,) + where


def irq_evidence(line: str, file: str, lineno: int, name: str) -> Evidence:
    """The evidence of an irq-state change the fast path took (`tasks.irq_event`): its line read
    back (`lt.scan_fast` takes every line the fast path takes)."""
    ev = lt.scan_fast(line, file, lineno)
    return Evidence(file, lineno, name, ev.at, ev.ts)  # type: ignore[union-attr]
