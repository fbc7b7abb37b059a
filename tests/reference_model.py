"""A deliberately simple lockdep, to hold the fast checker to account.

No chain cache, no incremental anything: every acquisition is validated
from scratch; the dependency relation is a plain dict of `(prev, next) ->
dep mask`; a cycle is found by an exhaustive search for a *strong* path
(lockdep-design.rst, "Recursive read locks": no `-(xR)->` directly followed
by `-(Sx)->`), done over (class, came-in-only-through-R) states so no path
is missed.  Only what the `.lt` core covers is modelled (no irq usage).
"""

from __future__ import annotations

from collections import deque
from dataclasses import dataclass, field
from typing import Optional

from lockcheck.events import Event, class_name

SR, ER, SN, EN = 1, 2, 4, 8


def dep_of(prev_read: int, next_read: int) -> int:
    exclusive = prev_read == 0
    non_recursive = next_read != 2
    return {(False, False): SR, (True, False): ER, (False, True): SN, (True, True): EN}[(exclusive, non_recursive)]


@dataclass
class Held:
    cls: str
    lock: str
    instance: Optional[str]
    subclass: int
    read: int
    trylock: bool
    check: bool
    nest: Optional[tuple]
    ctx: int
    refs: int = 0


@dataclass
class Task:
    held: list = field(default_factory=list)
    hardirq: int = 0
    softirq: int = 0

    @property
    def ctx(self) -> int:
        return (2 if self.hardirq else 0) | (1 if self.softirq else 0)


class ReferenceLockdep:
    def __init__(self) -> None:
        self.edges: dict[tuple[str, str], int] = {}
        self.tasks: dict[str, Task] = {}
        self.findings: list[tuple] = []
        self.seen: set = set()

    # -- findings ------------------------------------------------------------
    def report(self, kind: str, lock: str, held: Optional[str] = None, cycle: Optional[list] = None) -> None:
        if cycle:
            i = cycle.index(min(cycle))
            key = (kind, tuple(cycle[i:] + cycle[:i]))
        else:
            key = (kind, lock, held)
        if key not in self.seen:
            self.seen.add(key)
            self.findings.append((kind, lock, held, tuple(cycle) if cycle else None))

    # -- strong paths ----------------------------------------------------------
    def strong_path(self, start: str, start_only_r: bool, goal: str, goal_exclusive: bool) -> Optional[list]:
        """Shortest strong path start -> ... -> goal, as a class list, or None.

        A state is (class, whether every way in so far ends in a recursive-read
        edge); from an R-only state, edges that start shared are not usable.
        """
        if start == goal and (goal_exclusive or not start_only_r):
            return [start]
        parent = {(start, start_only_r): None}
        queue = deque([(start, start_only_r)])
        while queue:
            cls, only_r = queue.popleft()
            for (a, b), dep in self.edges.items():
                if a != cls:
                    continue
                usable = dep & (ER | EN) if only_r else dep
                if not usable:
                    continue
                next_only_r = not (usable & (SN | EN))
                state = (b, next_only_r)
                # an N-capable arrival dominates an R-only one
                if state in parent or (next_only_r and (b, False) in parent):
                    continue
                parent[state] = (cls, only_r)
                if b == goal and (goal_exclusive or not next_only_r):
                    path, cur = [], state
                    while cur is not None:
                        path.append(cur[0])
                        cur = parent[cur]
                    return list(reversed(path))
                queue.append(state)
        return None

    # -- operations --------------------------------------------------------------
    def feed(self, ev: Event) -> None:
        task = self.tasks.setdefault(ev.task, Task())
        op = ev.op
        if op == "acquire":
            self.acquire(task, ev.lock, ev.instance, ev.subclass, ev.mode, ev.trylock, ev.check, ev.nest, 0)
        elif op == "release":
            self.release(task, ev.lock, ev.instance)
        elif op == "exit":
            if task.held:
                self.report("held-at-exit", task.held[-1].cls)
        elif op == "free":
            for h in task.held:
                if h.lock == ev.lock and h.instance == ev.instance:
                    self.report("held-lock-freed", h.cls, h.cls)
                    break
        elif op == "hardirq-enter":
            task.hardirq += 1
        elif op == "hardirq-exit":
            task.hardirq = max(0, task.hardirq - 1)
        elif op == "softirq-enter":
            task.softirq += 1
        elif op == "softirq-exit":
            task.softirq = max(0, task.softirq - 1)

    def acquire(self, task: Task, lock, instance, subclass, read, trylock, check, nest, refs,
                again: bool = False) -> None:
        cls = class_name(lock, subclass)
        if task.held and nest is not None and task.held[-1].cls == cls:
            top = task.held[-1]
            top.refs = (top.refs or 1) + (refs or 1)
            return
        new = Held(cls, lock, instance, subclass, read, trylock, check, nest, task.ctx, refs)
        if nest is not None and not any(self.matches(h, *nest) for h in task.held):
            self.report("nest-lock-not-held", cls, nest[0])
        elif check and not trylock:
            self.validate(task, new)
        task.held.append(new)
        if len(task.held) == 48 and not again:  # reported when first reached, not on re-acquisition
            self.report("lock-depth-exceeded", cls)

    def validate(self, task: Task, new: Held) -> None:
        nest_seen = False
        for h in task.held:
            if new.nest is not None and h.lock == new.nest[0] and h.instance == new.nest[1]:
                nest_seen = True
            if h.cls != new.cls or (new.read == 2 and h.read):
                continue
            if nest_seen:
                return
            self.report("recursive-locking", new.cls, h.cls)
            return
        if not task.held or task.held[-1].ctx != new.ctx:
            return
        # the contiguous top segment of this irq context
        segment = []
        for h in reversed(task.held):
            if h.ctx != new.ctx:
                break
            segment.append(h)
        for prev in segment:
            if not prev.check:
                continue
            path = self.strong_path(new.cls, new.read == 2, prev.cls, prev.read == 0)
            if path is not None:
                if path[-1] == new.cls and len(path) == 1:
                    self.report("recursive-locking", new.cls, prev.cls)
                else:
                    self.report("circular-dependency", new.cls, prev.cls, path)
                return
            key = (prev.cls, new.cls)
            self.edges[key] = self.edges.get(key, 0) | dep_of(prev.read, new.read)
            if not prev.trylock:
                break

    @staticmethod
    def matches(h: Held, lock, instance) -> bool:
        return (h.lock == lock and h.instance == instance) or (bool(h.refs) and h.subclass == 0 and h.lock == lock)

    def release(self, task: Task, lock, instance) -> None:
        held = task.held
        index = None
        if held and self.matches(held[-1], lock, instance):
            index = len(held) - 1
        else:
            for i in range(len(held) - 2, -1, -1):
                if held[i + 1].ctx != held[i].ctx:
                    break
                if self.matches(held[i], lock, instance):
                    index = i
                    break
        if index is None:
            self.report("unlock-imbalance", lock)
            return
        h = held[index]
        if h.refs:
            h.refs -= 1
            if h.refs:
                return
        above = held[index + 1:]
        del held[index:]
        for again in above:
            self.acquire(task, again.lock, again.instance, again.subclass, again.read, again.trylock,
                         again.check, again.nest, again.refs, again=True)
