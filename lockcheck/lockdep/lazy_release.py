"""Out-of-order releases whose cost does not grow with what stays held (`Checker.lazy_release`).

Lockdep's `reacquire_held_locks` takes every lock above a released one
again, each with a new chain key, and validates it again.  Python code
takes many locks at once and lets them go oldest first --
`concurrent.futures.wait()` and `as_completed()` hold the `Condition` of
every future they wait on (`_AcquireFutures`) -- so N held locks cost
N^2 / 2 re-acquisitions: 800 futures took minutes.

The pytest plugin's checker re-acquires only what can find something new
and leaves the rest where it is:

- re-acquired in full (lockdep's path): the lock just above the released
  one and the trylocks / unchecked locks up to the first lock that ends a
  dependency walk (`check_prevs_add` stops at a checked non-trylock): their
  walks reached the released lock, so they may gain a dependency; and the
  lowest lock of the released lock's class above it, whose only same-class
  conflict may have gone (`check_deadlock` may pass now, and add
  dependencies);
- moved as they are (the tail): every lock above that.  Its chain is the
  one it was validated with, but for the released lock: the same lock
  below it ends its dependency walk, and the same-class locks below it
  conflict with it still (a removal only takes conflicts away; the lowest
  one of the released class is re-acquired in full).  Validating it again
  would find what its first validation found: dependencies already in the
  graph, a recursive locking already reported.

The tail is moved only when its locks were taken in the irq context the
release happens in, merge no nest lock, are checked, and need no usage bit
(else lockdep's loop runs, unchanged).  What the tail loses is its chain
keys: they are marked stale from an index (`TaskState.stale`) and computed
again only when one is read (an acquire, the release of a stale innermost
lock: `settle`).  A run of releases at the bottom of a deep stack reads
none of them.  The chains lockdep would have cached for the moved locks
are not cached (a later acquisition of such a chain validates it, finding
what it found before).  The checks over the tail are single passes in C
(`map`, `set`), no Python step per held lock, and are made once for a run
of releases: what a release moved is known to be movable at the next one
(`_Moves`, kept while the keys are stale), so N releases at the bottom of
N held locks cost O(N) in all.
"""

from __future__ import annotations

from collections import Counter
from operator import attrgetter, indexOf
from typing import Optional, Protocol

from lockcheck.events import Event
from lockcheck.lockdep import rules
from lockcheck.lockdep.tasks import HeldLock, TaskState


class _Releasing(Protocol):
    """What a release here needs of the checker (`Checker`, above this module: not imported)."""

    _nodes: dict

    def find_held_lock(self, task: TaskState, lock: str, instance: Optional[str]) -> Optional[int]: ...

    def reacquire_held_locks(self, task: TaskState, above: list[HeldLock], ev: Event) -> None: ...

_cls = attrgetter("cls")
_instance = attrgetter("instance")
_irq = attrgetter("irq_context")
_refs = attrgetter("references")
_nest = attrgetter("nest")
_cls_read = attrgetter("cls", "read")
_tail_fields = attrgetter("cls", "read", "trylock", "hardirqs_off", "check")


def key_after(held: list[HeldLock], k: int) -> int:
    """The chain key once `held[k]` is pushed (its own `prev_chain_key` is valid)."""
    h = held[k]
    starts = k and rules.separate_irq_context(held[k - 1].irq_context, h.irq_context)
    return rules.iterate_chain_key(rules.INITIAL_CHAIN_KEY if starts else h.prev_chain_key, h.cls, h.read)


def settle(task: TaskState, upto: Optional[int] = None) -> None:
    """Compute the stale chain keys of `task.held[task.stale:upto]` (all, and `task.chain_key`,
    when `upto` is None or the depth).  `task.stale` is at least 1: the entry below is valid."""
    start = task.stale
    if start is None:
        return
    held = task.held
    n = len(held)
    end = n if upto is None or upto >= n else upto
    if end <= start:
        return
    key = key_after(held, start - 1)
    below = held[start - 1]
    separate, iterate, initial = rules.separate_irq_context, rules.iterate_chain_key, rules.INITIAL_CHAIN_KEY
    for k in range(start, end):
        h = held[k]
        h.prev_chain_key = key
        key = iterate(initial if separate(below.irq_context, h.irq_context) else key, h.cls, h.read)
        below = h
    if end == n:
        task.chain_key = key
        task.stale = None
        task.moves = None
    else:
        task.stale = end


def popped(task: TaskState, top: HeldLock) -> None:
    """The innermost entry `top` was popped from a task with stale keys: the task's chain key."""
    held = task.held
    n = len(held)
    if task.stale is not None and n <= task.stale:
        task.stale = None
        task.moves = None
        task.chain_key = key_after(held, n - 1) if n else top.prev_chain_key
        return
    moves = task.moves
    if moves is not None:
        moves.instances[top.instance] -= 1
        moves.moved = max(0, moves.moved - 1)


class _Moves:
    """What is known of a task's stack while its keys are stale: every instance's count, the
    classes held (and those held for read), and how many locks at the top were checked movable."""

    __slots__ = ("instances", "classes", "read_classes", "irq_context", "moved")

    def __init__(self, held: list[HeldLock]) -> None:
        self.instances = Counter(map(_instance, held))
        self.classes = set(map(_cls, held))
        self.read_classes = {cls for cls, read in set(map(_cls_read, held)) if read}
        irqs = set(map(_irq, held))
        self.irq_context = irqs.pop() if len(irqs) == 1 else None
        self.moved = 0


def _moves(task: TaskState) -> Optional[_Moves]:
    """The task's `_Moves`, made now if its keys were valid (then nothing was known); None for
    a stack with merged entries (references) or nest locks: the general path for those."""
    moves = task.moves if task.stale is not None else None
    if moves is None:
        held = task.held
        if any(map(_refs, held)) or any(map(_nest, held)):
            task.moves = None
            return None
        moves = task.moves = _Moves(held)
    return moves


def find_held(checker: _Releasing, task: TaskState, lock: str, instance: Optional[str]) -> Optional[int]:
    """`Checker.find_held_lock` where the answer is plain: the instance is held once, in one irq
    context, with no merged entry -- found from the bottom (where out-of-order releases are) by a
    C search; the Python search (top-down) for anything else."""
    moves = _moves(task)
    if moves is None or moves.irq_context is None or moves.instances.get(instance) != 1:
        return checker.find_held_lock(task, lock, instance)
    held = task.held
    k = indexOf(map(_instance, held), instance)
    if held[k].lock != lock:
        return checker.find_held_lock(task, lock, instance)
    return k


def release(checker: _Releasing, task: TaskState, index: int, ev: Event) -> bool:
    """Release `task.held[index]` (its references all gone): True done; False, the caller runs
    lockdep's `lock_release` on a stack whose keys are all valid again."""
    held = task.held
    n = len(held)
    hlock = held[index]
    moves = _moves(task)
    if task.stale is not None and task.stale <= index:
        settle(task, index + 1)
    if index == n - 1:  # the innermost
        held.pop()
        if task.stale is None:
            task.chain_key = hlock.prev_chain_key
            task.moves = None
        else:
            popped(task, hlock)
        return True
    irq_context = rules.task_irq_context(task.hardirq_depth, task.softirq_depth)
    if moves is None or moves.irq_context != irq_context or hlock.cls in moves.read_classes:
        settle(task)
        return False
    # the full part: up to the first lock above that ends a dependency walk ...
    j = _walk_end(held, index + 1, n)
    tail = held[j:]
    if tail and len(tail) > moves.moved:
        # not known movable yet: every distinct kind of lock in it checked (one C pass)
        need, nodes = task.usage_need, checker._nodes
        for cls, read, trylock, hardirqs_off, check in set(map(_tail_fields, tail)):
            if not check or rules.acquire_usage(need, read, trylock, check, hardirqs_off) & ~nodes[cls]["usage"]:
                settle(task)
                return False
    if tail and hlock.cls in moves.classes:
        # ... and up to the lowest lock of the released class, whose conflict may be gone
        try:
            m = j + indexOf(map(_cls, tail), hlock.cls)
        except ValueError:
            pass
        else:
            j = _walk_end(held, m, n)
            tail = held[j:]
    prefix = held[index + 1:j]
    del held[index:]
    task.chain_key = hlock.prev_chain_key
    task.stale = None
    task.moves = None
    if prefix:
        checker.reacquire_held_locks(task, prefix, ev)
    if tail:
        if not held:  # everything merged away (a nest lock): nothing valid below to key the tail on
            checker.reacquire_held_locks(task, tail, ev)
            return True
        task.stale = len(held)
        held.extend(tail)
        moves.instances[hlock.instance] -= 1
        moves.moved = len(tail)
        task.moves = moves
    return True


def _walk_end(held: list[HeldLock], j: int, n: int) -> int:
    """The index after the first lock at or above `j` that ends a dependency walk (checked, no
    trylock): the locks above it walk no further down than it."""
    while j < n:
        h = held[j]
        j += 1
        if rules.prevs_walk_stops(h.check, h.trylock):
            break
    return j
