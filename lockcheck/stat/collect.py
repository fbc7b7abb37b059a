"""lock_stat's bookkeeping replayed over trace events.

The kernel's CONFIG_LOCK_STAT hooks (kernel/locking/lockdep.c) keep their
state in each task's held locks and in each lock object, and so does this
module, event by event:

- `acquire` (`__lock_acquire`) pushes a held lock whose hold clock starts
  now (`holdtime_stamp`);
- `contended` (`__lock_contended`) finds the task's held lock, starts its
  wait clock (`waittime_stamp`), counts the contention point (where the
  waiter is: the event's `at=`) and the contending point (where the holder
  took the lock: the kernel's `lock->ip`, which only `lock_acquired` sets),
  and a contended bounce if the object was last acquired on another CPU;
- `acquired` (`__lock_acquired`) ends the wait -- a contention is counted
  here, with its wait time -- and restarts the hold clock, counts an
  acquired bounce if the object was last acquired on another CPU, and
  records this CPU and site as the object's (`lock->cpu`, `lock->ip`);
- `release` (`__lock_release` -> `lock_release_holdtime`) records the hold
  time: `acquisitions` is the number of hold times, as in the kernel.  A
  release of a lock that is not the innermost held one makes the kernel
  take the locks above it apart and put them back (`reacquire_held_locks`
  -> `__lock_acquire`), which restarts their hold clocks: so here too.  A
  release while still waiting (an interrupted `mutex_lock_killable()`)
  counts a hold from the acquire and no wait, as the kernel does.

Reads and writes are kept apart (`hlock->read`), giving the `-R`/`-W` rows.

Where a trace differs from the kernel's view:

- the kernel counts an acquired bounce only at `lock_acquired()`, which
  trylocks and annotation-only maps (RCU, seqcounts, work items) never
  call, and a kernel capture shows exactly those calls; a trace without
  any `acquired` (a hand-written `.lt`, the pytest plugin) gets its
  bounces counted at `acquire` instead (trylocks excluded), decided per
  run (file) at its end;
- times come from trace timestamps (`ts=`, microseconds in ftrace, and
  the trace's clock, which need not be `local_clock()`), so a wait
  shorter than their resolution is 0 but still a contention (the kernel
  skips a wait of exactly 0 ns, which its nanosecond clock all but never
  measures);
- the kernel sets `lock->cpu` when it initialises a lock
  (`lockdep_init_map`), which no tracepoint shows: the first acquisition
  of an object seen in a trace is no bounce, and neither is one after a
  `free` (an object re-initialised at the same address without `free` in
  the trace keeps its old CPU);
- a `contended` before the task's `acquire` of that lock (some producers
  write the wait first) is held aside, one per task -- a task waits for
  one lock at a time -- and applied when the `acquire` comes;
- releases of locks taken before the trace began have no start: not
  counted (`LockStats.unmatched_releases`); locks still held, and waits
  still open, when a run ends are not counted either, as the kernel would
  not have counted them yet (listed in the notes).

Memory is bounded whatever the trace: per task at most `MAX_LOCK_DEPTH`
held locks (the kernel's limit; deeper, the oldest is dropped) and one
wait set aside; tasks holding nothing are forgotten; at most `MAX_TASKS`
tasks, `MAX_LOCK_OBJECTS` lock objects (least recently used forgotten: a
bounce may be missed) and `MAX_CLASSES` classes.  Every drop is counted in
the notes.  `free` forgets a lock object: the kernel re-initialises a lock
at a reused address (`lockdep_init_map` sets `lock->cpu` anew), which a
capture without `free` cannot show.  `exit` ends a task, the end of a file ends a run (every task
and object forgotten), a lost-events marker ends the tasks of its CPU.
"""

from __future__ import annotations

from typing import Iterable, Optional

from lockcheck.errors import TraceError
from lockcheck.events import (
    ACQUIRE, ACQUIRED, CONTENDED, CONTENTION_BEGIN, CONTENTION_END, EXIT, FREE, LOST_EVENTS, RELEASE, RUN, WRITE, Event,
    class_name,
)
from lockcheck.stat.model import BOUNCE_ACQUIRED, BOUNCE_CONTENDED, ClassStats, LockTime, count_point
from lockcheck.util.wording import count

from lockcheck.lockdep.rules import MAX_LOCK_DEPTH  # noqa: E402 - held locks per task, as the kernel keeps them
#: tasks with state (holding locks or waiting) at once
MAX_TASKS = 1 << 16
#: lock objects whose last CPU and acquire site are remembered
MAX_LOCK_OBJECTS = 1 << 17
#: lock classes counted (lockdep's MAX_LOCKDEP_KEYS is 8192)
MAX_CLASSES = 1 << 15
#: open waits named in the notes
NAMED_WAITS = 5


class _Class:
    """A class's `ClassStats`, plus what is decided only at the end: where bounces count, which waits."""

    __slots__ = ("stats", "acquire_bounces", "tp_wait", "tp_bounces")

    def __init__(self, name: str) -> None:
        self.stats = ClassStats(name)
        self.acquire_bounces = [0, 0]  # write, read: counted at `acquire`, kept if the run has no `acquired`
        self.tp_wait = [LockTime(), LockTime()]  # write, read: from contention_begin/end
        self.tp_bounces = [0, 0]  # write, read: contended bounces at contention_begin


class _Held:
    """The lock_stat part of a `struct held_lock`."""

    __slots__ = ("lock", "instance", "cls", "read", "at", "hold_ts", "waiting", "wait_ts", "refs", "taken", "holder_at")

    def __init__(self, ev: Event, cls: _Class, hold_ts: Optional[int]) -> None:
        self.lock = ev.lock
        self.instance = ev.instance
        self.cls = cls
        self.read = ev.mode != WRITE
        self.at = ev.at
        self.hold_ts = hold_ts  # holdtime_stamp
        self.waiting = False
        self.wait_ts: Optional[int] = None  # waittime_stamp
        self.refs = 0  # hlock->references: same-class acquisitions merged under a nest lock
        self.taken = False  # `acquired` seen: a contention_begin now is about another lock
        #: where the lock was last taken before this acquire (the contending point of a run without `acquired`)
        self.holder_at: Optional[str] = None


class _Wait:
    """A `contended` that came before the task's `acquire` of that lock."""

    __slots__ = ("ev", "ts", "acquired")

    def __init__(self, ev: Event, ts: Optional[int]) -> None:
        self.ev = ev
        self.ts = ts
        self.acquired: Optional[Event] = None


class _Task:
    __slots__ = ("held", "early", "cpu", "name", "tracepoint")

    def __init__(self, name: str) -> None:
        self.held: list[_Held] = []
        self.early: Optional[_Wait] = None
        self.cpu: Optional[int] = None
        self.name = name
        #: an open contention_begin: (ts, class, read, lock object key)
        self.tracepoint: Optional[tuple] = None


class _LockObject:
    """What the kernel keeps in a `lockdep_map` for lock_stat: last CPU and acquire site."""

    __slots__ = ("cpu", "ip", "acquire_cpu", "acquire_ip")

    def __init__(self) -> None:
        self.cpu: Optional[int] = None  # lock->cpu, set by __lock_acquired
        self.ip: Optional[str] = None  # lock->ip: where it was last acquired, set by __lock_acquired only
        self.acquire_cpu: Optional[int] = None  # the same at `acquire`, for runs without `acquired`
        self.acquire_ip: Optional[str] = None


#: the largest time stamp in nanoseconds: the kernel's clocks are u64 nanoseconds (292 years);
#: beyond it `ts * 1e9` may be infinite (an OverflowError in `round`) and sums lose every digit
MAX_NS = 1 << 63


def _ns(ev: Event) -> Optional[int]:
    """The event's time stamp in nanoseconds, or a TraceError at its line when it is out of range."""
    ts = ev.ts
    if ts is None:
        return None
    ns = ts * 1e9
    if not -MAX_NS < ns < MAX_NS:
        raise TraceError(ev.file, ev.line, None, f"ts={ts!r} is out of range for statistics "
                                                 f"(at most {MAX_NS // 10**9} s, as a kernel clock)")
    return round(ns)


class LockStats:
    """Feed events in trace order with `feed`, then `finish()`; read `classes` and `notes()`.

    CONTENTION chooses the wait times: `lockdep` (lock_contended/lock_acquired,
    lock_stat's own), `tracepoint` (contention_begin/contention_end, what
    `perf lock contention` reads), or `auto`: lockdep's when the trace has
    any `contended`, else the tracepoints'.
    """

    def __init__(self, contention: str = "auto") -> None:
        self.contention = contention
        self.contended_events = 0
        self.tracepoint_waits = 0
        self._classes: dict[str, _Class] = {}
        self._tasks: dict[str, _Task] = {}
        self._objects: dict[tuple, _LockObject] = {}
        self._file: Optional[str] = None
        self._run_has_acquired = False  # this run's producer emits `acquired` (lock_stat's bounce point)
        self._run_bounced: set[_Class] = set()  # classes with bounces counted at `acquire` this run
        self.classes: dict[str, ClassStats] = {}
        self.events = 0
        self.timed = 0
        # what was not counted, for the notes
        self.unmatched_releases = 0
        self.held_at_end = 0
        self.open_waits = 0
        self.open_wait_names: list[str] = []
        self.dropped_deep = 0
        self.dropped_tasks = 0
        self.dropped_objects = 0
        self.dropped_class_events = 0
        self.held_at_exit = 0
        self.lost_resets = 0
        self.given_up_waits = 0
        #: held locks whose hold clock restarted when a lock taken before them was released
        self.reacquired = 0

    # -- the event loop -------------------------------------------------------------
    def feed(self, ev: Event) -> None:
        self.events += 1
        if ev.ts is not None:
            self.timed += 1
        if ev.file != self._file:
            if self._file is not None:
                self.end_run()
            self._file = ev.file
        op = ev.op
        if op == ACQUIRE:
            self.lock_acquire(ev)
        elif op == RELEASE:
            self.lock_release(ev)
        elif op == CONTENDED:
            self.contended_events += 1
            self.lock_contended(ev)
        elif op == ACQUIRED:
            self.lock_acquired(ev)
        elif op == CONTENTION_BEGIN:
            self.contention_begin(ev)
        elif op == CONTENTION_END:
            self.contention_end(ev)
        elif op == FREE:  # the object is gone; one at the same address is initialised afresh (lock->cpu)
            self._objects.pop((ev.lock, ev.instance), None)
        elif op == EXIT:
            task = self._tasks.pop(ev.task, None)
            if task is not None:
                self.held_at_exit += len(task.held)
        elif op == LOST_EVENTS:
            self._lost_events(ev.cpu)
        elif op == RUN:  # `#lockcheck-run`: a run of its own inside a .lt file
            self.end_run()

    def lock_acquire(self, ev: Event) -> None:
        """`__lock_acquire`: push a held lock, its hold clock started."""
        cls = self._class(class_name(ev.lock, ev.subclass))
        if cls is None:
            return
        task = self._task(ev)
        held = task.held
        if ev.nest is not None and held and held[-1].cls is cls:
            top = held[-1]  # merged into the held lock: no hold time of its own (hlock->references)
            top.refs = (top.refs or 1) + 1
            return
        if len(held) >= MAX_LOCK_DEPTH:
            del held[0]
            self.dropped_deep += 1
        hlock = _Held(ev, cls, _ns(ev))
        held.append(hlock)
        if not ev.trylock:  # a trylock does not wait, nor take the lock over (no lock_acquired)
            obj = self._object(ev)
            hlock.holder_at = obj.acquire_ip
            obj.acquire_ip = ev.at
            if ev.cpu is not None:
                if obj.acquire_cpu is not None and obj.acquire_cpu != ev.cpu:
                    cls.acquire_bounces[hlock.read] += 1
                    self._run_bounced.add(cls)
                obj.acquire_cpu = ev.cpu
        early = task.early
        if early is not None and early.ev.lock == ev.lock and early.ev.instance == ev.instance:
            task.early = None
            self._contended(hlock, early.ev, early.ts)
            if early.acquired is not None:
                self._acquired(hlock, early.acquired)

    def lock_contended(self, ev: Event) -> None:
        """`__lock_contended`: the task waits for a lock it is acquiring."""
        task = self._task(ev)
        hlock = self._find(task, ev)
        if hlock is None:  # waiting before its acquire: kept until the acquire comes
            if task.early is not None:
                self._close_wait(task.early.ev.lock, task)
            task.early = _Wait(ev, _ns(ev))
            return
        if hlock.instance != ev.instance:
            return  # a merged (nest_lock) acquisition: the kernel skips it too
        self._contended(hlock, ev, _ns(ev))

    def lock_acquired(self, ev: Event) -> None:
        """`__lock_acquired`: the wait, if any, is over; the lock is this CPU's now."""
        task = self._tasks.get(ev.task)
        if task is None:
            return
        if ev.cpu is not None:
            task.cpu = ev.cpu
        hlock = self._find(task, ev)
        if hlock is None:
            early = task.early
            if early is not None and early.ev.lock == ev.lock and early.ev.instance == ev.instance:
                early.acquired = ev
            return
        if hlock.instance != ev.instance:
            return
        self._acquired(hlock, ev)

    def lock_release(self, ev: Event) -> None:
        """`__lock_release`: record the hold time, pop the held lock."""
        task = self._tasks.get(ev.task)
        hlock = self._find(task, ev) if task is not None else None
        if hlock is None:
            if len(self._classes) >= MAX_CLASSES and ev.lock not in self._classes:
                self.dropped_class_events += 1
            else:
                self.unmatched_releases += 1
            return
        if hlock.instance == ev.instance:  # lock_release_holdtime
            end = _ns(ev)
            hold = end - hlock.hold_ts if end is not None and hlock.hold_ts is not None else 0
            stats = hlock.cls.stats
            (stats.read_holdtime if hlock.read else stats.write_holdtime).add(max(hold, 0))
        if hlock.refs:
            hlock.refs -= 1
            if hlock.refs:
                return
        if hlock.waiting:  # released without `acquired`: an interrupted or killed wait (mutex_lock_killable...)
            self.given_up_waits += 1
        held = task.held
        index = next(i for i in range(len(held) - 1, -1, -1) if held[i] is hlock)
        del held[index]
        if index < len(held):
            # not the innermost: `reacquire_held_locks` acquires the locks above it anew, and
            # `__lock_acquire` restarts their hold clocks (holdtime_stamp = now)
            self.reacquired += len(held) - index
            end = _ns(ev)
            for above in held[index:]:
                above.hold_ts = end
        self._forget_if_idle(ev.task, task)

    def contention_begin(self, ev: Event) -> None:
        """The tracepoint in the lock's slow path: the wait is for the lock the task is acquiring.

        That is the task's innermost held lock not yet `acquired` (lockdep
        pushes it before the slow path); with none (a kernel without lockdep,
        or a lock lockdep does not track) the lock is known by its address and
        the tracepoint's type, `mutex@0xffff...`.
        """
        task = self._task(ev)
        top = task.held[-1] if task.held else None
        flags = ev.at or ""
        if top is not None and not top.taken:
            cls, read, key = top.cls, top.read, (top.lock, top.instance)
        else:
            cls = self._class(f"{_lock_type(flags)}@{ev.instance}")
            if cls is None:
                return
            read, key = "READ" in flags.split("|"), (None, ev.instance)
        obj = self._objects.get(key)
        if obj is not None and obj.cpu is not None and ev.cpu is not None and obj.cpu != ev.cpu:
            cls.tp_bounces[read] += 1
        task.tracepoint = (_ns(ev), cls, read, key)

    def contention_end(self, ev: Event) -> None:
        task = self._tasks.get(ev.task)
        if task is None or task.tracepoint is None:
            return
        start, cls, read, key = task.tracepoint
        task.tracepoint = None
        end = _ns(ev)
        cls.tp_wait[read].add(max(end - start, 0) if end is not None and start is not None else 0)
        self.tracepoint_waits += 1
        if key[0] is None and ev.cpu is not None:  # a lock only the tracepoints know: it is this CPU's now
            self._object_at(key).cpu = ev.cpu
        self._forget_if_idle(ev.task, task)

    # -- the shared steps -------------------------------------------------------------
    def _contended(self, hlock: _Held, ev: Event, ts: Optional[int]) -> None:
        hlock.waiting = True
        hlock.wait_ts = ts
        stats = hlock.cls.stats
        if ev.at:
            count_point(stats.contention_points, ("", ev.at))
        obj = self._objects.get((ev.lock, ev.instance))
        # lock->ip, where the holder took it: set by `acquired` (never by the waiter's own acquire);
        # a run without `acquired` has only the acquire sites, the one before the waiter's
        holder = obj.ip if obj is not None and obj.ip is not None else hlock.holder_at
        if holder:
            count_point(stats.contending_points, ("", holder))
        if obj is not None:
            if obj.cpu is not None and ev.cpu is not None and obj.cpu != ev.cpu:
                stats.bounces[BOUNCE_CONTENDED + hlock.read] += 1

    def _acquired(self, hlock: _Held, ev: Event) -> None:
        self._run_has_acquired = True
        hlock.taken = True
        stats = hlock.cls.stats
        if hlock.waiting:
            now = _ns(ev)
            wait = now - hlock.wait_ts if now is not None and hlock.wait_ts is not None else 0
            (stats.read_waittime if hlock.read else stats.write_waittime).add(max(wait, 0))
            hlock.waiting = False
            if now is not None:
                hlock.hold_ts = now
        obj = self._object(ev)
        if ev.cpu is not None:
            if obj.cpu is not None and obj.cpu != ev.cpu:
                stats.bounces[BOUNCE_ACQUIRED + hlock.read] += 1
            obj.cpu = ev.cpu
        obj.ip = ev.at or hlock.at  # `lock->ip = ip`: the acquired's site (lock_acquire's, as the same caller)

    def _find(self, task: _Task, ev: Event) -> Optional[_Held]:
        """`find_held_lock`: from the top; a merged held lock matches any lock of its class."""
        for hlock in reversed(task.held):
            if hlock.lock == ev.lock and (hlock.instance == ev.instance or hlock.refs):
                return hlock
        return None

    def _close_wait(self, lock: str, task: _Task) -> None:
        self.open_waits += 1
        if len(self.open_wait_names) < NAMED_WAITS:
            self.open_wait_names.append(f"{lock} ({task.name})")

    # -- bounded tables ---------------------------------------------------------------
    def _class(self, name: str) -> Optional[_Class]:
        cls = self._classes.get(name)
        if cls is None:
            if len(self._classes) >= MAX_CLASSES:
                self.dropped_class_events += 1
                return None
            cls = self._classes[name] = _Class(name)
        return cls

    def _task(self, ev: Event) -> _Task:
        task = self._tasks.get(ev.task)
        if task is None:
            if len(self._tasks) >= MAX_TASKS:
                oldest = next(iter(self._tasks))
                self.dropped_tasks += 1
                self._drop_task(self._tasks.pop(oldest))
            task = self._tasks[ev.task] = _Task(ev.comm or ev.task)
        if ev.cpu is not None:
            task.cpu = ev.cpu
        return task

    def _forget_if_idle(self, key: str, task: _Task) -> None:
        if not task.held and task.early is None and task.tracepoint is None:
            del self._tasks[key]

    def _object(self, ev: Event) -> _LockObject:
        return self._object_at((ev.lock, ev.instance))

    def _object_at(self, key: tuple) -> _LockObject:
        objects = self._objects
        obj = objects.pop(key, None)  # re-inserted last: least recently used first
        if obj is None:
            obj = _LockObject()
            if len(objects) >= MAX_LOCK_OBJECTS:
                del objects[next(iter(objects))]
                self.dropped_objects += 1
        objects[key] = obj
        return obj

    def _lost_events(self, cpu: Optional[int]) -> None:
        """What the tasks last seen on CPU hold is unknown after lost events: forget them."""
        for key in [key for key, task in self._tasks.items() if task.cpu == cpu]:
            self.lost_resets += 1
            self._drop_task(self._tasks.pop(key))

    def _drop_task(self, task: _Task) -> None:
        self.held_at_end += len(task.held)
        for hlock in task.held:
            if hlock.waiting:
                self._close_wait(hlock.lock, task)
        if task.early is not None:
            self._close_wait(task.early.ev.lock, task)

    # -- the end ----------------------------------------------------------------------
    def end_run(self) -> None:
        """A run (one file) is over: what tasks still hold or wait for is not counted."""
        for task in self._tasks.values():
            self._drop_task(task)
        self._tasks.clear()
        self._objects.clear()
        for cls in self._run_bounced:
            if not self._run_has_acquired:
                cls.stats.bounces[BOUNCE_ACQUIRED] += cls.acquire_bounces[0]
                cls.stats.bounces[BOUNCE_ACQUIRED + 1] += cls.acquire_bounces[1]
            cls.acquire_bounces = [0, 0]
        self._run_bounced.clear()
        self._run_has_acquired = False

    def finish(self) -> "LockStats":
        """End the last run and settle the per-class decisions; returns self."""
        self.end_run()
        self.classes = {}
        if self.contention == "auto":
            self.contention = "tracepoint" if self.tracepoint_waits and not self.contended_events else "lockdep"
        for name, cls in self._classes.items():
            stats = cls.stats
            if self.contention == "tracepoint":
                stats.write_waittime, stats.read_waittime = cls.tp_wait
                stats.bounces[BOUNCE_CONTENDED:BOUNCE_CONTENDED + 2] = cls.tp_bounces
                stats.contention_points.clear()
                stats.contending_points.clear()
            for points in (stats.contention_points, stats.contending_points):
                ordered = sorted(points.items(), key=lambda item: -item[1])
                points.clear()
                points.update(ordered)
            self.classes[name] = stats
        return self

    def notes(self) -> list[str]:
        """What was not counted and why, one sentence each."""
        out = []
        if self.events and not self.timed:
            out.append("the trace has no timestamps (ts=): wait and hold times are 0")
        if self.contention == "tracepoint":
            out.append(f"wait times from {count(self.tracepoint_waits, 'contention_begin/contention_end pair')} (the "
                       "tracepoints perf lock contention reads), not lock_stat's lock_contended/lock_acquired")
        elif self.tracepoint_waits:
            out.append(f"{count(self.tracepoint_waits, 'contention_begin/contention_end pair')} not used: "
                       "wait times are lock_stat's, from lock_contended/lock_acquired (--contention "
                       "tracepoint uses them)")
        if self.unmatched_releases:
            out.append(f"{count(self.unmatched_releases, 'release')} of locks acquired before the trace began: "
                       "no hold time, not counted")
        if self.held_at_end:
            out.append(f"{count(self.held_at_end, 'lock')} still held at the end of a run: not counted")
        if self.open_waits:
            named = ", ".join(self.open_wait_names) + (", ..." if self.open_waits > len(self.open_wait_names) else "")
            out.append(f"{count(self.open_waits, 'contention')} never acquired by the end of a run (contention points "
                       f"and bounces counted, no wait time): {named}")
        if self.given_up_waits:
            out.append(f"{count(self.given_up_waits, 'wait')} given up (released before `acquired`: an interrupted "
                       "wait): no wait time, the hold counted from the acquire, as the kernel counts it")
        if self.held_at_exit:
            out.append(f"{count(self.held_at_exit, 'lock')} held at a task's exit: not counted")
        if self.lost_resets:
            out.append(f"{count(self.lost_resets, 'task')} forgotten after lost events")
        if self.dropped_deep:
            out.append(f"{count(self.dropped_deep, 'held lock')} dropped beyond the kernel's depth of {MAX_LOCK_DEPTH}")
        if self.dropped_tasks:
            out.append(f"{count(self.dropped_tasks, 'task')} forgotten beyond {MAX_TASKS} at once")
        if self.dropped_objects:
            out.append(f"{count(self.dropped_objects, 'lock object')} forgotten beyond {MAX_LOCK_OBJECTS} "
                       "(a bounce may be missed)")
        if self.dropped_class_events:
            out.append(f"{count(self.dropped_class_events, 'event')} of classes beyond the first {MAX_CLASSES} "
                       "not counted")
        return out


def _lock_type(flags: str) -> str:
    """The kind of lock a contention_begin's flags say (`LCB_F_*`), named as perf lock contention does."""
    bits = set(flags.split("|"))
    for flag, name in (("MUTEX", "mutex"), ("PERCPU", "percpu-rwsem"), ("RT", "rtmutex")):
        if flag in bits:
            return name
    if bits & {"READ", "WRITE"}:
        return "rwlock" if "SPIN" in bits else "rwsem"
    return "spinlock" if "SPIN" in bits else (flags or "lock")


def collect(events: Iterable[Event], contention: str = "auto") -> LockStats:
    """lock_stat's numbers for a stream of events (every file of it); see `LockStats` for CONTENTION."""
    stats = LockStats(contention)
    feed = stats.feed
    for ev in events:
        feed(ev)
    return stats.finish()
