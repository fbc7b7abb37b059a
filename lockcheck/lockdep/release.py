"""lockdep's `__lock_release()`: popping a held lock, and re-acquiring every lock above one
released out of order (`reacquire_held_locks`), as a part of the checker (`Checker` inherits it).
"""

from __future__ import annotations

from typing import Optional

from lockcheck.events import Event
from lockcheck.lockdep import lazy_release as lazy
from lockcheck.lockdep import rules
from lockcheck.lockdep.rules import INITIAL_CHAIN_KEY
from lockcheck.lockdep.tasks import HeldLock, TaskState


class LockRelease:
    """The release half of `Checker` (it reads the checker's graph, caches and stats)."""

    def lock_release(self, task: TaskState, ev: Event) -> None:
        held = task.held
        if self.lazy_release:
            index = lazy.find_held(self, task, ev.lock, ev.instance)
        else:
            index = self.find_held_lock(task, ev.lock, ev.instance)
        if index is None:
            if (self.options.lenient_start and task.acquired_ever is not None
                    and (ev.lock, ev.instance) not in task.acquired_ever):
                self.stats.unknown_releases += 1
                return
            self.print_unlock_imbalance_bug(task, ev)
            return
        hlock = held[index]
        if task.pins and hlock in task.pins:
            self.release_pinned(task, hlock, ev, removed=hlock.references <= 1)
        if hlock.references:
            hlock.references -= 1
            if hlock.references:
                return
        if self.lazy_release and lazy.release(self, task, index, ev):
            return
        above = held[index + 1:]
        del held[index:]
        task.chain_key = hlock.prev_chain_key
        if above:
            self.reacquire_held_locks(task, above, ev)

    def reacquire_held_locks(self, task: TaskState, above: list[HeldLock], ev: Event) -> None:
        """lockdep's reacquire_held_locks: the locks above a released one are taken again, re-validated.

        Their chains are new (the released lock left every key above it), so
        each is validated; the classes held are kept in a set meanwhile, so
        that `check_deadlock` costs O(1) for a class not held twice and a
        release costs what moves, not what moves times the depth.

        Most of what moves needs nothing but its new chain key, and gets only
        that: a lock whose `lock_acquire` would mark no usage bit, merge no
        nest lock, find no class held twice and add no dependency it has not
        got -- because it starts a chain (nothing below it, or another irq
        context: `validate_chain` then only checks the class is not held
        already), because it is a trylock (`validate_chain` returns at once),
        or because its only dependency, from the lock below, is in the graph
        with this type already (`check_prev_add`'s early return).  The entry
        is pushed again with its new chain key, the chain cached or counted
        as `validate_chain` would.  A first-in first-out release of N held
        locks moves N^2 / 2 of them: this keeps each move to a few steps
        (tests/test_reacquire.py holds it to the full path).
        """
        held = task.held
        self._held_classes = held_classes = {h.cls for h in held}
        quick = self._inline_cache_hits and self.quick_reacquire
        irq_context = rules.task_irq_context(task.hardirq_depth, task.softirq_depth)
        need = task.usage_need
        nodes, classes, cache, stats = self._nodes, self._classes, self.chain_cache, self.stats
        try:
            for again in above:
                cls = again.cls
                if (quick and again.nest is None and again.check and again.irq_context == irq_context
                        and cls not in held_classes and again.lock not in self.wait_locks):
                    read = again.read
                    trylock = again.trylock
                    if not rules.acquire_usage(need, read, trylock, True, again.hardirqs_off) & ~nodes[cls]["usage"]:
                        chain_key = task.chain_key
                        attrs = None
                        if held and not rules.separate_irq_context(held[-1].irq_context, irq_context):
                            if not rules.validates_chain(trylock, True):
                                fits = True  # validate_chain returns before looking at it
                            else:
                                top = held[-1]
                                attrs = classes[top.cls].get(cls)
                                # (the dependency type is calc_dep's, inlined)
                                fits = attrs is not None and rules.prevs_walk_stops(top.check, top.trylock) and not (
                                    ~attrs["dep"] & 1 << ((top.read == 0) + ((read != 2) << 1)))
                        else:
                            fits = True  # a chain head: no dependency to add
                            if held:  # (the head of a chain in another irq context)
                                chain_key = INITIAL_CHAIN_KEY
                        if fits:
                            again.prev_chain_key = task.chain_key
                            chain_key = rules.iterate_chain_key(chain_key, cls, read)
                            if not rules.validates_chain(trylock, True):
                                pass  # validate_chain neither caches nor counts a trylock's chain
                            elif chain_key in cache:
                                stats.chain_hits += 1
                            else:
                                if rules.chain_cacheable(len(held), self.cache_depth):
                                    cache.add(chain_key)
                                stats.chains += 1
                                if attrs is not None:
                                    attrs["distance"] = 1
                            held.append(again)
                            task.chain_key = chain_key
                            held_classes.add(cls)
                            continue
                self.lock_acquire(task, ev, again.lock, again.instance, again.subclass, again.read,
                                  again.trylock, again.check, again.nest, again.hardirqs_off,
                                  again.references, hold=again)
                held_classes.add(cls)
        finally:
            self._held_classes = None

    def find_held_lock(self, task: TaskState, lock: str, instance: Optional[str]) -> Optional[int]:
        """Top-down search of the held stack, not crossing into another irq context."""
        held = task.held
        i = len(held) - 1
        if i < 0:
            return None
        if held[i].matches(lock, instance):
            return i
        while i > 0:
            if held[i].irq_context != held[i - 1].irq_context:
                return None
            i -= 1
            if held[i].matches(lock, instance):
                return i
        return None

