"""lockdep's `lock_sync()`, pinning (`lock_pin_lock()`, `lock_unpin_lock()`), `lockdep_unregister_key()`
(`zap_class()`) and the contention hooks (`lock_contended()`, `lock_acquired()`), as a part of the
checker (`Checker` inherits it).

- `sync LOCK`: `__lock_acquire(..., sync=1)` -- the wait context, the nest lock and the chain are
  validated as for an acquisition, with no irq-enabled usage marked (`mark_usage()`'s
  `!hlock->sync`), no nest_lock merge, and nothing pushed: `synchronize_srcu()` written as
  `sync` orders the SRCU map after what is held without being held itself.
- `pin` / `unpin`: `hlock->pin_count` (a count here: the kernel adds a random cookie, a trace
  has none), kept by the task (`TaskState.pins`, entry -> count; an entry taken again passes it
  on, `move_pins`); `__lock_release()` WARNs "releasing a pinned lock" and releases it all the
  same.  A task holding a pinned lock is left to the checker by the fast paths.
- `unregister CLASS`: every subclass of the class is zapped -- its usage, its dependencies, its
  properties -- and the chain cache is emptied (lockdep removes the chains holding the class;
  a chain key here does not say which classes it holds).  A class still held by some task is
  kept as an empty class (lockdep would read freed memory; a note says so).
- `contended` / `acquired`: of a lock the task does not hold, `print_lock_contention_bug()`;
  with nothing held at all, the kernel's `DEBUG_LOCKS_WARN_ON(!depth)` comes first.
"""

from __future__ import annotations

from lockcheck import events as E
from lockcheck.events import Event, class_name
from lockcheck.lockdep import findings as F
from lockcheck.lockdep import rules
from lockcheck.lockdep.tasks import HeldLock, TaskState


class MoreOps:
    """The sync / pin / unregister / contention half of `Checker`."""

    def more_op_handlers(self) -> dict:
        return {E.SYNC: self.lock_sync, E.PIN: self.lock_pin_lock, E.UNPIN: self.lock_unpin_lock,
                E.UNREGISTER: self.lockdep_unregister_key, E.CONTENDED: self.lock_contended,
                E.ACQUIRED: self.lock_contended}

    # -- lock_sync ---------------------------------------------------------------------------------
    def lock_sync(self, task: TaskState, ev: Event) -> None:
        if ev.props is not None:
            self.register_class_props(ev.lock, ev.props, ev)
        self.lock_acquire(task, ev, ev.lock, ev.instance, ev.subclass, ev.mode, False, ev.check, ev.nest,
                          rules.hardirqs_off(task.hardirqs_enabled, task.hardirq_depth), 0, sync=True)

    # -- pins --------------------------------------------------------------------------------------
    def lock_pin_lock(self, task: TaskState, ev: Event) -> None:
        """`__lock_pin_lock()`: the first held entry (bottom up) matching the lock is pinned."""
        for hlock in task.held:
            if hlock.matches(ev.lock, ev.instance):
                task.pins[hlock] = task.pins.get(hlock, 0) + 1
                return
        self.print_pin_warning(task, ev, "pinning an unheld lock", "lock_pin_lock", None)

    def lock_unpin_lock(self, task: TaskState, ev: Event) -> None:
        """`__lock_unpin_lock()`."""
        for hlock in task.held:
            if hlock.matches(ev.lock, ev.instance):
                count = task.pins.get(hlock, 0)
                if not count:
                    self.print_pin_warning(task, ev, "unpinning an unpinned lock", "lock_unpin_lock", hlock)
                    return
                if count > 1:
                    task.pins[hlock] = count - 1
                else:
                    del task.pins[hlock]
                return
        self.print_pin_warning(task, ev, "unpinning an unheld lock", "lock_unpin_lock", None)

    def release_pinned(self, task: TaskState, hlock: HeldLock, ev: Event, removed: bool) -> None:
        """`__lock_release()`'s `WARN(hlock->pin_count, "releasing a pinned lock\\n")`; an entry that
        goes takes its pins with it."""
        self.print_pin_warning(task, ev, "releasing a pinned lock", "__lock_release", hlock)
        if removed:
            del task.pins[hlock]

    @staticmethod
    def move_pins(task: TaskState, old: HeldLock, new: HeldLock) -> None:
        """An entry taken again (`reacquire_held_locks()`) keeps its pins."""
        if task.pins and old in task.pins:
            task.pins[new] = task.pins.pop(old)

    def print_pin_warning(self, task: TaskState, ev: Event, warning: str, warned_at: str,
                          hlock: "HeldLock | None") -> None:
        lock = hlock.cls if hlock is not None else class_name(ev.lock, 0)
        self.report(self._finding(F.PIN_VIOLATION, task, ev, lock=lock,
                                  next=self.snapshot(hlock) if hlock is not None else None,
                                  details={"warning": warning, "dedup": warning, "warned_at": warned_at,
                                           "instance": ev.instance, "cpu": task.cpu,
                                           "pins": task.pins.get(hlock, 0) if hlock is not None else 0}))

    # -- lockdep_unregister_key / zap_class --------------------------------------------------------
    def lockdep_unregister_key(self, task: TaskState, ev: Event) -> None:
        lock = ev.lock
        zapped = [cls for cls in rules.hlock_classes(lock) if self.graph.remove_class(cls)]
        for props in (self.wait_locks, self.cmp_locks):
            props.discard(lock)
        self.class_props.pop(lock, None)
        self.chain_cache.clear()
        self.wait_chains.clear()
        still = {h.cls for other in self.tasks.values() for h in other.held if h.cls in zapped}
        for cls in sorted(still):
            self.graph.add_class(cls)
            self.stats.notes.append(f"{ev.location}: {cls} is unregistered while held (lockdep would "
                                    "read a freed class): kept, without its dependencies")
        if not zapped:
            self.stats.notes.append(f"{ev.location}: unregister {lock}: no such class (nothing to zap)")

    # -- lock_contended / lock_acquired --------------------------------------------------------------
    def lock_contended(self, task: TaskState, ev: Event) -> None:
        """`__lock_contended()` / `__lock_acquired()`: the lock must be held (its `acquire` came first)."""
        if not self.contention_checked:
            return  # counted only (`readers.run_rules`: a format whose fast path counts them)
        if task.acquired_ever is not None and (ev.lock, ev.instance) not in task.acquired_ever:
            return  # a capture: taken before it began, perhaps (as its release would be counted)
        warned_at = "__lock_contended" if ev.op == E.CONTENDED else "__lock_acquired"
        if not task.held:
            self.report(self._finding(F.LOCKDEP_WARNING, task, ev, lock=class_name(ev.lock, 0), details={
                "message": "DEBUG_LOCKS_WARN_ON(!depth)", "warned_at": warned_at, "dedup": warned_at}))
            return
        if self.find_held_lock(task, ev.lock, ev.instance) is None:
            self.report(self._finding(F.BAD_CONTENTION, task, ev, lock=class_name(ev.lock, 0),
                                      details={"instance": ev.instance, "warned_at": warned_at}))
