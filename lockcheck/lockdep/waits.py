"""Class properties beyond a name (wait types, lock type, cmp_fn) and lockdep's wait-context
check, as a part of the checker (`Checker` inherits it).

The kernel keeps a class's wait types (`wait_type_outer`, `wait_type_inner`)
and lock type in its `lock_class`, copied by `register_lock_class()` from the
first `lockdep_map` that makes the class; a trace says them on an acquisition
(`wait=`, `type=`, `cmp=`; docs/trace-format.md, "The rest of lockdep").
Here they are kept by lock name (every subclass of a map shares them) and
shown on the graph's nodes (`waits`: what reports print after a class name).

`check_wait_context()` (`rules.check_wait_context`) runs on every acquisition of
a class with a known wait type, before anything else of `__lock_acquire()`,
whether or not its chain was validated before: the verdict depends on the
task's irq context, which a chain key does not hold.  So the chains of those
classes are kept apart (`wait_chains`), out of the `chain_cache` that the fast
paths test: an acquisition of such a class is never a fast-path hit and
always comes here.
"""

from __future__ import annotations

from typing import Optional

from lockcheck.events import Event
from lockcheck.lockdep import findings as F
from lockcheck.lockdep import rules
from lockcheck.lockdep.tasks import HeldLock, TaskState


class WaitContext:
    """The class-property half of `Checker` (it reads the checker's graph, caches and notes)."""

    def init_class_props(self) -> None:
        #: lock name -> {"wait": (outer, inner), "type": LD_LOCK_*, "cmp": ...}, as first given
        self.class_props: dict[str, dict] = {}
        #: lock names whose classes have a known inner wait type (checked at every acquisition)
        self.wait_locks: set[str] = set()
        #: validated chains whose top class is in `wait_locks` (see the module's doc)
        self.wait_chains: set[int] = set()
        self._props_noted: set[tuple] = set()
        #: lock names whose class has a comparison function (`cmp=`, `lock_set_cmp_fn()`)
        self.cmp_locks: set[str] = set()
        self.adopt_graph_props()

    def adopt_graph_props(self) -> None:
        """The wait and lock types a graph's classes came with (a saved graph read back for
        `--baseline` or `diff`: `lockcheck.store.graphfile`), as if a trace had given them: a
        trace that takes those locks without `wait=` is then judged as the one that saved them."""
        for cls, node in self._nodes.items():
            wait, lock_type = node.get("wait"), node.get("lock_type")
            if wait is None and lock_type is None:
                continue
            known = self.class_props.setdefault(rules.class_lock(cls), {})
            if wait is not None and "wait" not in known:
                known["wait"] = tuple(wait)
                if wait[1]:
                    self.wait_locks.add(rules.class_lock(cls))
            if lock_type is not None and "type" not in known:
                known["type"] = lock_type[0]

    def register_class_props(self, lock: str, props: dict, ev: Event) -> None:
        """`register_lock_class()`'s copy of a map's properties: the first value given for each
        key stands; a later, different one is counted in a note."""
        known = self.class_props.setdefault(lock, {})
        for key in ("wait", "type", "cmp"):
            value = props.get(key)
            if value is None:
                continue
            old = known.get(key)
            if old is None:
                known[key] = value
                if key == "wait" and value[1]:
                    self._gain_wait_types(lock, value)
                if key == "cmp":
                    self.cmp_locks.add(lock)
                if key in ("wait", "type"):
                    for cls in rules.hlock_classes(lock):
                        if cls in self._nodes:
                            self.init_class_node(cls, lock)
            elif old != value and (lock, key) not in self._props_noted:
                self._props_noted.add((lock, key))
                self.stats.notes.append(f"{ev.location}: {lock}: {key}= differs from the class's first "
                                        f"({old!r}); the first one stands, as register_lock_class() keeps it")

    def _gain_wait_types(self, lock: str, wait: tuple[int, int]) -> None:
        """A class gets wait types: checked from now on, shown on its nodes.  A class that was
        taken before without them may have chains in the fast paths' cache: forgotten, so that
        every acquisition of it comes to the checker again (validated again, adding nothing new)."""
        self.wait_locks.add(lock)
        text = rules.print_waits(*wait)
        stale = False
        for cls in rules.hlock_classes(lock):
            node = self._nodes.get(cls)
            if node is not None:
                node["waits"] = text
                node["wait"] = wait
                stale = True
        if stale:
            self.chain_cache.clear()

    def init_class_node(self, cls: str, lock: str) -> None:
        """What the graph's node of a class keeps of its lock's properties: `waits` (printed after
        its name) and `lock_type`, `(LD_LOCK_*, wait_type_inner)` of a percpu or override class
        (the irq-usage searches read it: `rules.usage_skip`); `wait`, `(outer, inner)` as given,
        is what a saved graph keeps."""
        node = self._nodes[cls]
        if lock in self.wait_locks:
            node["waits"] = self.class_waits(lock)
            node["wait"] = self.class_props[lock]["wait"]
        lock_type = self.lock_type(lock)
        if lock_type != rules.LD_LOCK_NORMAL:
            wait = self.class_props[lock].get("wait")
            node["lock_type"] = (lock_type, wait[1] if wait else rules.LD_WAIT_INV)

    def cmp_fn_orders(self, prev: HeldLock, nxt: HeldLock) -> bool:
        """`rules.cmp_fn_orders` for a held lock of a class with `cmp=` and the one being taken."""
        return rules.cmp_fn_orders(self.class_props[prev.lock].get("cmp"), prev.subclass, prev.instance,
                                   nxt.instance)

    def class_waits(self, lock: str) -> Optional[str]:
        """The `-{O:I}` text of a lock's class, None when its wait types are not known."""
        props = self.class_props.get(lock)
        wait = props.get("wait") if props else None
        return rules.print_waits(*wait) if wait and wait[1] else None

    def lock_type(self, lock: str) -> int:
        props = self.class_props.get(lock)
        return props.get("type", rules.LD_LOCK_NORMAL) if props else rules.LD_LOCK_NORMAL

    def check_wait_context(self, task: TaskState, hlock: HeldLock, ev: Event) -> bool:
        """`check_wait_context()` for the lock being taken; False when it was reported."""
        outer, inner = self.class_props[hlock.lock]["wait"]
        if not rules.wait_context_checked(inner, hlock.trylock):
            return True
        held = task.held
        depth = len(held) - 1
        while depth >= 0 and held[depth].irq_context == hlock.irq_context:
            depth -= 1
        props = self.class_props
        below = []
        for prev in held[depth + 1:]:
            known = props.get(prev.lock)
            wait = known.get("wait") if known else None
            if wait:
                below.append((wait[1], known.get("type", rules.LD_LOCK_NORMAL)))
        context = rules.task_wait_context(task.hardirq_depth, task.softirq_depth, task.hardirq_threaded)
        if not rules.check_wait_context(context, below, outer, inner):
            return True
        self.print_lock_invalid_wait_context(task, hlock, ev, context)
        return False

    def print_lock_invalid_wait_context(self, task: TaskState, hlock: HeldLock, ev: Event, context: int) -> None:
        """The kernel prints `task_wait_context()` as `context-{N:N}`, and every class with its `-{O:I}`."""
        held = task.held[-1].cls if task.held else None
        self.report(self._finding(F.INVALID_WAIT, task, ev, lock=hlock.cls, held=held,
                                  next=self.snapshot(hlock),
                                  prev=self.snapshot(task.held[-1]) if task.held else None,
                                  details={"context": f"{context}:{context}"}))
