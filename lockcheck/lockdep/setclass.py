"""lockdep's `__lock_set_class()` (`lock_set_class`, `lock_set_subclass`) and `__lock_downgrade()`
(`lock_downgrade`, `downgrade_write()`), as a part of the checker (`Checker` inherits it).

Both change a held lock in place and then take it, and every lock held above it, again
(`reacquire_held_locks()`): the held lock is found (not held: *bad unlock balance*), the
stack is cut there, the lock gets its new class, subclass or read mode, and the entries
are pushed again through `lock_acquire`, validated as new acquisitions.  So the scheduler's
`double_unlock_balance()`, which makes `this_rq` subclass 0 again, takes the next nested
rq lock without a recursive report, as in the kernel.
"""

from __future__ import annotations

from lockcheck import events as E
from lockcheck.events import Event
from lockcheck.lockdep import findings as F
from lockcheck.lockdep import rules
from lockcheck.lockdep.tasks import HeldLock, TaskState


class SetClass:
    """The set-class / set-subclass / downgrade half of `Checker`."""

    def set_class_handlers(self) -> dict:
        return {E.SET_CLASS: self.lock_set_class, E.SET_SUBCLASS: self.lock_set_class,
                E.DOWNGRADE: self.lock_downgrade}

    def lock_set_class(self, task: TaskState, ev: Event) -> None:
        """`__lock_set_class()`: the held lock takes the class `props["class"]` (set-class) or
        keeps its own (set-subclass), with subclass `ev.subclass`."""
        index = self.find_held_lock(task, ev.lock, ev.instance)
        if index is None:
            self.print_unlock_imbalance_bug(task, ev)
            return
        hlock = task.held[index]
        lock = ev.props["class"] if ev.op == E.SET_CLASS and ev.props else hlock.lock
        changed = hlock.reacquired(hlock.irq_context, hlock.hardirqs_off)
        changed.lock, changed.subclass = lock, ev.subclass
        changed.cls = rules.hlock_class(lock, ev.subclass)
        self.move_pins(task, hlock, changed)
        self._reacquire_from(task, index, changed, ev)

    def lock_downgrade(self, task: TaskState, ev: Event) -> None:
        """`__lock_downgrade()`: the held write lock becomes a read lock (`hlock->read = 1`); a
        lock held for reading already is the kernel's WARN "downgrading a read lock"."""
        index = self.find_held_lock(task, ev.lock, ev.instance)
        if index is None:
            self.print_unlock_imbalance_bug(task, ev)
            return
        hlock = task.held[index]
        if hlock.read:
            self.report(self._finding(F.BAD_DOWNGRADE, task, ev, lock=hlock.cls, next=self.snapshot(hlock),
                                      details={"warned_at": "__lock_downgrade", "cpu": task.cpu}))
        changed = hlock.reacquired(hlock.irq_context, hlock.hardirqs_off)
        changed.read = 1
        self.move_pins(task, hlock, changed)
        self._reacquire_from(task, index, changed, ev)

    def _reacquire_from(self, task: TaskState, index: int, changed: HeldLock, ev: Event) -> None:
        """`curr->lockdep_depth = i; curr->curr_chain_key = hlock->prev_chain_key;
        reacquire_held_locks(curr, depth, i)`, the changed entry first."""
        held = task.held
        above = held[index + 1:]
        task.chain_key = held[index].prev_chain_key
        del held[index:]
        if changed.cls not in self._classes:
            self.graph.add_class(changed.cls)
            if changed.lock in self.class_props:
                self.init_class_node(changed.cls, changed.lock)
        self.reacquire_held_locks(task, [changed, *above], ev)


class Asserts:
    """lockdep's asserts (`lockdep_assert_held*()`, `lockdep_assert_not_held()`,
    `lockdep_assert_irqs_*()`) and do_exit's `debug_check_no_locks_held()`, as a part of `Checker`."""

    def assert_handlers(self) -> dict:
        return {E.ASSERT_HELD: self.assert_held, E.ASSERT_NOT_HELD: self.assert_held,
                E.ASSERT_IRQS_ON: self.assert_irqs, E.ASSERT_IRQS_OFF: self.assert_irqs,
                E.TASK_EXIT: self.debug_check_no_locks_held}

    def assert_held(self, task: TaskState, ev: Event) -> None:
        """`lockdep_assert_held()` (`_write`, `_read`) and `lockdep_assert_not_held()`:
        `__lock_is_held(lock, read)` -- the lock held by this task, in that mode when one is given."""
        want = (ev.props or {}).get("held")
        found = [h for h in task.held if h.matches(ev.lock, ev.instance)]
        if want == "read":
            held = any(h.read for h in found)
        elif want == "write":
            held = any(not h.read for h in found)
        else:
            held = bool(found)
        if held == (ev.op == E.ASSERT_HELD):
            return
        name = {None: "lockdep_assert_held", "write": "lockdep_assert_held_write",
                "read": "lockdep_assert_held_read"}[want] if ev.op == E.ASSERT_HELD else "lockdep_assert_not_held"
        self._assertion(task, ev, f"{name}({ev.lock})", rules.hlock_class(ev.lock, 0))

    def assert_irqs(self, task: TaskState, ev: Event) -> None:
        """`lockdep_assert_irqs_enabled()` / `_disabled()`: the task's hardirq state now (a task
        in a hardirq handler runs with hardirqs disabled)."""
        enabled = task.hardirqs_enabled and not task.hardirq_depth
        if not task.irq_known or enabled == (ev.op == E.ASSERT_IRQS_ON):
            return
        name = "lockdep_assert_irqs_enabled()" if ev.op == E.ASSERT_IRQS_ON else "lockdep_assert_irqs_disabled()"
        self._assertion(task, ev, name, name)

    def _assertion(self, task: TaskState, ev: Event, assertion: str, lock: str) -> None:
        self.report(self._finding(F.ASSERTION_FAILED, task, ev, lock=lock,
                                  details={"assertion": f"WARNING: {assertion} failed", "cpu": task.cpu}))

    def debug_check_no_locks_held(self, task: TaskState, ev: Event) -> None:
        """do_exit(): a task that exits holding locks is `print_held_locks_bug()`'s
        "TASK still has locks held!"."""
        if task.held:
            self.report(self._finding(F.HELD_AT_EXIT, task, ev, lock=task.held[-1].cls,
                                      details={"task_exit": True}))
