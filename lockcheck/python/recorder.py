"""The recorder: Python lock operations -> events -> one `Checker`, with what it found.

The tracked lock types (`lockcheck.python.tracked`) call `acquired`/`released`;
the recorder names the task (a thread, or an asyncio task) and the test
that runs (`set_context`), builds the `Event`, feeds the checker under its
own raw lock, writes the event to the trace, and files each finding under
its test or among the suppressed ones.
"""

from __future__ import annotations

import _thread
import asyncio
import collections
import dataclasses
import itertools
import sys
import threading
import weakref
from typing import Any, Callable, Optional, TextIO

from lockcheck.lockdep import findings as F
from lockcheck.lockdep.checker import Checker
from lockcheck.events import ACQUIRE, RELEASE, WRITE, Event
from lockcheck.lockdep.findings import Evidence, Finding
from lockcheck.python import patching
from lockcheck.python.core import OWNED_CLASSES
from lockcheck.python.forks import ForkHandling
from lockcheck.python.settings import DEFAULT_MAX_DEPTH, Settings  # noqa: F401 - DEFAULT_MAX_DEPTH re-exported
from lockcheck.python.sites import relpath, user_frame
from lockcheck.python.stacks import capture, capture_earlier
from lockcheck.python import trace_meta
from lockcheck.python.suppression_rules import DEFAULT, DEFAULT_SUPPRESS, Rule, match, parse_rules
from lockcheck.readers import plugin_meta

_get_ident = _thread.get_ident
_NOTHING: list = []

#: task numbers are unique in the process, so a hold recorded by an earlier recorder is never
#: mistaken for one of the current recorder's tasks
_task_numbers = itertools.count(1)


class Recorder(ForkHandling):
    """One checker fed by every tracked lock while started, with what it found.

    `findings` holds `(finding, context)` pairs in report order; `context`
    is what `set_context` last said (the pytest node id).  `suppress` is a
    list of `"KIND CLASSGLOB..."` rules (see `suppressed`); matching
    findings go to `suppressed_findings` instead.

    How the tracked locks behave is `settings` (`lockcheck.python.settings.Settings`), given
    whole or built from the keywords `grace`, `timed_is_try`, `stack_depth`, `max_depth`.
    """

    def __init__(self, checker: Optional[Checker] = None, *, settings: Optional[Settings] = None,
                 suppress: Optional[list[str]] = None, trace: Optional[TextIO] = None,
                 task_prefix: str = "", on_finding: Optional[Callable[[Finding, Optional[str]], None]] = None,
                 **options: Any) -> None:
        if settings is None:
            settings = Settings(**options)
        elif options:
            settings = dataclasses.replace(settings, **options)
        #: read by every tracked lock and wait; replaced whole, never changed in place (frozen)
        self.settings = settings
        max_depth = settings.max_depth
        self.checker = checker or Checker()
        # Python holds as many locks as it likes (concurrent.futures.wait() holds every future's
        # Condition): no kernel table limits it, and taking them all then letting them go oldest
        # first must cost what it does plainly (lockcheck.lockdep.lazy_release)
        self.checker.max_depth = self.checker.cache_depth = max_depth
        self.checker.lazy_release = True
        #: (task, depth) of each task that held more than `max_depth` locks: a note, not a finding
        self.too_deep: list[tuple[str, int]] = []
        self._frame: Any = None  # the acquisition being fed: where a new dependency's stack comes from
        if settings.stack_depth:
            self.checker.graph.evidence_hook = self._with_stack
        #: the suppression rules (`lockcheck.python.suppression_rules`): the stdlib's, then `suppress` -- lines
        #: or parsed `Rule`s -- and how many findings each accepted (`stale` lists those at 0)
        self.rules = parse_rules(DEFAULT_SUPPRESS, DEFAULT) + _rules(suppress or [])
        self.rule_hits = [0] * len(self.rules)
        #: the running test's own rules (`@pytest.mark.lockcheck(suppress=[...])`), set by the plugin
        self._test_rules: tuple[Rule, ...] = ()
        self.trace = trace
        #: classes whose qualified name the trace has said (`lockcheck.python.trace_meta`)
        self._traced_classes: set = set()
        self.task_prefix = task_prefix
        self.on_finding = on_finding
        #: called as (task, cls, site) before each acquire that may block (`lockcheck.python.confirm_scheduler`
        #: pauses a thread there); None -- the rule -- costs one check.  Set: the compiled hit path stands aside
        self.pre_acquire: Optional[Callable[[str, str, str], None]] = None
        self.findings: list[tuple[Finding, Optional[str]]] = []
        self.suppressed_findings: list[tuple[Finding, Optional[str]]] = []
        self.by_context: dict[Optional[str], list[Finding]] = {}
        self.bad_releases = 0
        self.context: Optional[str] = None
        self.check = True  # False: events are recorded `nocheck` (a test switched lockcheck off)
        self.active = False
        self._gen = 0
        self._feed_lock = _thread.allocate_lock()
        #: threads inside the recorder (set before they take the feed lock): a signal handler or
        #: a `__del__` that runs in one of them while it is in here queues its work instead of
        #: waiting for a lock its own thread holds
        self._busy: set = set()
        #: work queued for the next feed: events, ("drop"|"exit"|"fork"|"process", ...) items
        self._pending: collections.deque = collections.deque()
        #: locks (class, instance) held by a thread that is gone -- ended holding an RLock, not
        #: the forking thread of this forked child, or the forking thread whose code does not go
        #: on in a multiprocessing child -- -> (why, its TaskState, the HeldLock):
        #: nobody will release them, so taking one is the finding (`held-at-exit`, `held-at-fork`)
        self._orphans: dict = {}
        self.dropped_held = 0  # locks garbage-collected or re-initialised while held
        #: (task, class, instance) left held at the end of the test that took them (`end_context`)
        self._left: set = set()
        self.left_held: list[tuple[str, str]] = []  # (lock class, test) of each
        self.exited_holding = 0  # threads that ended holding locks
        #: task key of each thread that ended holding locks -> (its comm, {(class, instance): where taken})
        self.ended_holding: dict[str, tuple[str, dict]] = {}
        self.forked_from: Optional[int] = None  # in a forked child: the parent's pid
        #: called in a forked child (the plugin gives it its own trace and findings file)
        self.on_fork_child: Optional[Callable[["Recorder"], None]] = None
        #: locks that existed before tracking began (`lockcheck.python.patching.Preexisting`), set by start
        self.preexisting: list = []
        self._local = _thread._local()
        #: thread ident -> the task key of the newest thread with it (idents are reused)
        self.thread_keys: dict[int, str] = {}
        #: called with (recorder, task) when a thread first appears (`lockcheck.python.interrupts` records there
        #: that only the main thread runs signal handlers)
        self.on_new_thread: Optional[Callable[["Recorder", str], None]] = None
        self._atasks: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
        self._sites: dict = {}
        if trace is not None:
            # imported now: nothing may be imported under the feed lock (imports take locks)
            from lockcheck.readers.lt_write import format_event

            self._format_event = format_event
            trace.write("#lockcheck-trace v1\n")
            trace_meta.write_header(trace, self.rules)

    @property
    def test_rules(self) -> tuple[Rule, ...]:
        """The running test's own rules (`@pytest.mark.lockcheck(suppress=[...])`), set by the
        plugin; written to the trace, so its replay applies them to that test's findings."""
        return self._test_rules

    @test_rules.setter
    def test_rules(self, rules: tuple[Rule, ...]) -> None:
        self._test_rules = rules
        if rules and self.trace is not None:
            with self._feed_lock:
                trace_meta.write_test_rules(self.trace, rules)

    # -- context ------------------------------------------------------------
    def set_context(self, context: Optional[str], check: bool = True) -> None:
        """Name what runs from now on (a test id): it shows in reports after each task name."""
        with self._feed_lock:
            self.context = context
            self.check = check
            self._gen += 1
            if self.trace is not None and context is not None:
                self.trace.write(f"# context {context}{'' if check else ' (lockcheck off)'}\n")
            elif self.trace is not None:
                self.trace.write(plugin_meta.NO_CONTEXT + "\n")  # what follows is no test's

    def end_context(self, context: str) -> None:
        """The test `context` is over: what its thread still holds from it is dropped.

        A lock a test leaves held (an assertion failed inside the critical section; a fixture
        that holds one on purpose) would otherwise stay on the test runner thread's held stack
        for the rest of the session, and every later test's locks would depend on it.  Listed
        in the summary; its release, if it ever comes, is then no event.
        """
        self.drain()
        try:
            task = self._local.info[1]
        except AttributeError:
            return
        suffix = f" [{context}]"
        with self._feed_lock:
            state = self.checker.tasks.get(task)
            if state is None or not state.held:
                return
            for hlock in list(state.held):
                comm = hlock.event.comm or ""
                if comm.endswith(suffix):
                    ev = Event(task, RELEASE, hlock.lock, hlock.instance)
                    self.checker.feed(ev)
                    self._left.add((task, hlock.lock, hlock.instance))
                    self.left_held.append((hlock.cls, context))
                    if self.trace is not None:
                        # the release is an event of the trace too: its replay drops the lock as here
                        self.trace.write(f"# left held by {context}: {hlock.cls}\n")
                        self.trace.write(self._format_event(ev) + "\n")

    def _comm(self, task: str) -> str:
        return f"{task} [{self.context}]" if self.context else task

    def thread_task(self, name: Optional[str] = None) -> tuple[str, str]:
        """(task key, comm) of the calling thread; `name`: its name, for a thread that is not yet
        in `threading._active` (its first event comes from its own bootstrap)."""
        local = self._local
        try:
            gen, task, comm = local.info
        except AttributeError:
            # not current_thread(): in a thread started by _thread it would make a _DummyThread,
            # which threading.enumerate() then lists for ever (Python 3.10, 3.11)
            if name is None:
                current = threading._active.get(_get_ident())  # type: ignore[attr-defined]
                name = current.name if current is not None else "thread"
            name = name.replace(" ", "_").replace("\t", "_").replace('"', "'")
            task = f"{self.task_prefix}{name}/{next(_task_numbers)}"
            self.thread_keys[_get_ident()] = task  # the hang report's thread -> task (lockcheck.python.hang)
            gen, comm = -1, task
            local.info = (gen, task, comm)  # set first: a gc that on_new_thread starts asks again
            if self.on_new_thread is not None:
                self.on_new_thread(self, task)
            # dropped with the thread's locals when the thread ends (any thread: _thread, dummy)
            local.end = _ThreadEnd(self._pending, task)
        if gen != self._gen:
            comm = self._comm(task)
            local.info = (self._gen, task, comm)
        return task, comm

    def async_task(self) -> tuple[str, str]:
        """(task key, comm) of the running asyncio task (the thread outside any task)."""
        current = asyncio.current_task()
        if current is None:
            return self.thread_task()
        task = self._atasks.get(current)
        if task is None:
            name = current.get_name().replace(" ", "_").replace('"', "'")
            task = self._atasks[current] = f"{self.task_prefix}{name}/a{next(_task_numbers)}"
        return task, self._comm(task)

    # -- events -------------------------------------------------------------
    def site(self, frame: Any) -> tuple[str, int, str]:
        """(file, line, `file:LINE`) of an acquire call, cached per code object and line."""
        key = (frame.f_code, frame.f_lineno)
        site = self._sites.get(key)
        if site is None:
            rel = relpath(frame.f_code.co_filename)
            site = self._sites[key] = (rel, frame.f_lineno, f"{rel}:{frame.f_lineno}")
        return site

    def acquired(self, task: str, comm: str, cls: str, inst: str, frame: Any, mode: int = WRITE,
                 trylock: bool = False, subclass: int = 0) -> list[Finding]:
        """Feed one acquire (call it before a blocking acquire waits); the new findings."""
        frame = user_frame(frame)
        site = self._sites.get((frame.f_code, frame.f_lineno))
        file, line, at = site if site is not None else self.site(frame)
        if self.pre_acquire is not None and not trylock:
            self.pre_acquire(task, cls, at)
        ev = Event(task, ACQUIRE, cls, inst, mode, trylock, subclass, None, self.check, at, None, None,
                   file, line, comm)
        if self._pending:
            self.drain()  # a fork, say: what the child inherited is known before this acquire
        if self._orphans and (cls, inst) in self._orphans and not trylock:
            return self.feed(ev, frame, self._orphans[cls, inst])
        return self.feed(ev, frame)

    def released(self, task: str, cls: str, inst: str) -> None:
        """Feed one release by (or for) `task`; holds from before this recorder started are skipped."""
        if task in self.checker.tasks:
            if self.trace is None and not self._pending:
                me = _get_ident()
                busy = self._busy
                if me not in busy:
                    busy.add(me)
                    try:
                        with self._feed_lock:
                            if self.checker.release_innermost(task, cls, inst):
                                return  # the common case: no event to build, nothing to find
                    finally:
                        busy.discard(me)
            self.feed(self._release_event(task, cls, inst))
        elif self._pending:
            self.feed(self._release_event(task, cls, inst))  # its acquire may be queued: applied in order
        elif self._orphans:
            self._orphans.pop((cls, inst), None)

    def _release_event(self, task: str, cls: str, inst: str) -> Event:
        """A release that needs an event: with its site, for the findings a release can make
        (the locks above a released one are taken again, and validated again)."""
        frame = user_frame(sys._getframe(2))
        site = self._sites.get((frame.f_code, frame.f_lineno))
        file, line, at = site if site is not None else self.site(frame)
        return Event(task, RELEASE, cls, inst, at=at, file=file, line=line)

    def dropped(self, task: str, cls: str, inst: str, freed: bool = True) -> None:
        """A lock held by `task` was garbage-collected (or re-initialised): it is held no more.

        Called from `__del__` and fork handlers, at any moment in any thread -- maybe one that is
        inside the recorder now -- so it only queues; the next feed applies it.  Not a finding:
        Python frees a held lock safely (a note in the summary at most).
        """
        self._pending.append(("drop", task, cls, inst))
        if freed:
            self.dropped_held += 1

    def feed(self, ev: Event, frame: Any = None, orphan: Optional[tuple] = None) -> list[Finding]:
        me = _get_ident()
        busy = self._busy
        if me in busy:
            # this thread is inside the recorder already (a signal handler or a __del__ ran in the
            # middle of it): recorded once the interrupted feed is done, never waited for
            self._pending.append(ev)
            return _NOTHING
        busy.add(me)
        try:
            with self._feed_lock:
                if self._pending:  # what was queued happened before this event
                    found = self._drain()
                    found.extend(self._feed(ev, frame, orphan))
                else:
                    found = self._feed(ev, frame, orphan)
        finally:
            busy.discard(me)
        if found and self.on_finding is not None:
            for finding in found:
                self.on_finding(finding, self.context)
        return found

    def add_finding(self, finding: Finding) -> None:
        """A finding made outside the checker (a cycle of waits, `lockcheck.python.waitfor`): filed under
        the current test like the checker's own."""
        with self._feed_lock:
            if self.trace is not None:
                trace_meta.write_findings(self.trace, [finding])
            kept = self._file([finding])
        if kept and self.on_finding is not None:
            self.on_finding(finding, self.context)

    def end_trace(self) -> None:
        """Write no more of the trace: the session is over, and what the process does from here on
        is lockcheck's own work (merging the forked children's files imports modules, and an import
        takes `logging._lock`).  Written into the file between a child's lines, it would be replayed
        as the parent's, from that child's fork point: a hold the parent never had."""
        with self._feed_lock:
            self.trace = None

    def drain(self) -> list[Finding]:
        """Apply the queued work now (at the end of a test, of the session); the findings it made."""
        if not self._pending:
            return _NOTHING
        me = _get_ident()
        if me in self._busy:
            return _NOTHING
        self._busy.add(me)
        try:
            with self._feed_lock:
                found = self._drain()
        finally:
            self._busy.discard(me)
        if found and self.on_finding is not None:
            for finding in found:
                self.on_finding(finding, self.context)
        return found

    def _feed(self, ev: Event, frame: Any, orphan: Optional[tuple] = None) -> list[Finding]:
        """One event, under the feed lock: the checker, the trace, and where each finding goes."""
        if ev.op == RELEASE:
            if ev.task not in self.checker.tasks:
                return _NOTHING  # for a thread that has ended meanwhile (its stack is gone)
            if self._left and (ev.task, ev.lock, ev.instance) in self._left:
                self._left.discard((ev.task, ev.lock, ev.instance))
                return _NOTHING  # left held by an earlier test, released at last
        self._frame = frame
        found = self.checker.feed(ev)
        if found and any(f.kind == F.MAX_DEPTH for f in found):
            self.too_deep.extend((f.task, f.details.get("depth", 0)) for f in found if f.kind == F.MAX_DEPTH)
            found = [f for f in found if f.kind != F.MAX_DEPTH]
        if orphan is not None:
            found = [*found, *self._orphan_taken(ev, orphan)]
        if found:
            found = [f for f in found if not self._reentered(f)]
        if found and frame is not None and self.settings.stack_depth:
            for finding in found:
                self._add_stacks(finding, frame)
        self._frame = None
        if self.trace is not None:
            if ev.lock is not None and ev.lock not in self._traced_classes:
                self._traced_classes.add(ev.lock)
                trace_meta.write_class(self.trace, ev.lock)
            self.trace.write(self._format_event(ev))
            self.trace.write("\n")
            if found:
                trace_meta.write_stack(self.trace, found)
                trace_meta.write_findings(self.trace, found)  # what the replay cannot decide itself
        if found:
            found = self._file(found)
            if self.trace is not None:
                self.trace.flush()  # the events that made a finding outlive a crash right after it
        return found

    def _reentered(self, finding: Finding) -> bool:
        """An RLock instance "taken again" by the thread that holds it is re-entry, not recursion.

        The tracked RLock records only its outermost acquire, but a signal handler that runs
        between that event and the real acquire (or whose events were queued while the thread
        was inside the recorder) takes the RLock again as outermost: the checker sees the same
        instance twice.  Not reported, and not remembered as reported either.
        """
        nxt, prev = finding.next, finding.prev
        if finding.kind != F.RECURSIVE or nxt is None or prev is None or nxt.instance != prev.instance:
            return False
        if finding.lock.partition("/")[0] not in OWNED_CLASSES:
            return False
        self.checker.reported.discard(finding.key())
        return True

    def _file(self, found: list[Finding]) -> list[Finding]:
        context = self.context
        kept = []
        for finding in found:
            if self.suppressed(finding):
                self.suppressed_findings.append((finding, context))
            else:
                kept.append(finding)
                self.findings.append((finding, context))
                self.by_context.setdefault(context, []).append(finding)
        return kept

    def _drain(self) -> list[Finding]:
        """The queued work, under the feed lock, in the order it happened -- except a fork, which
        comes first: the threads gone with it are classified before their own end (threading's
        fork handler ends them) or the re-initialising of their locks is applied."""
        pending = self._pending
        items = []
        while pending:
            items.append(pending.popleft())
        found: list[Finding] = []
        tasks = self.checker.tasks
        for item in items:
            if type(item) is tuple and item[0] == "fork":
                self._fork_child(item[1])
        for item in items:
            if type(item) is not tuple:
                found.extend(self._feed(item, None))
            elif item[0] == "drop":
                _, task, cls, inst = item
                if self._orphans:
                    self._orphans.pop((cls, inst), None)
                state = tasks.get(task)
                if state is not None and self.checker.find_held_lock(state, cls, inst) is not None:
                    found.extend(self._feed(Event(task, RELEASE, cls, inst), None))
            elif item[0] == "exit":
                found.extend(self._thread_ended(item[1]))
            elif item[0] == "process":
                self._process_target(item[1])
        return found

    def _thread_ended(self, task: str) -> list[Finding]:
        """A thread ended: its held stack goes.  An RLock it still held (only its holder may
        release one) is held for ever: taking it again is a finding (lockdep's held-at-exit,
        raised when it would hang); a `Lock` it held may still be released by another thread,
        legally, so that is nothing."""
        state = self.checker.tasks.get(task)
        if state is None:
            return _NOTHING
        if state.held:  # a wait for one of them is a deadlock (lockcheck.python.waitfor)
            self.ended_holding[task] = (state.name,
                                        {(h.lock.partition("/")[0], h.instance): h.event.at for h in state.held})
        owned = [h for h in state.held if h.lock in OWNED_CLASSES]
        if owned:
            self.exited_holding += 1
            for hlock in owned:
                self._orphans[hlock.lock, hlock.instance] = ("exit", state, hlock)
        del self.checker.tasks[task]
        self.checker._tasks_before += 1
        return _NOTHING

    # -- Python stacks, only where a report shows them ------------------------------
    def _with_stack(self, evidence: Evidence) -> Evidence:
        """`DepGraph.evidence_hook`: a new dependency keeps the stack of the acquisition that made it."""
        frame = self._frame
        if frame is None:
            return evidence  # made by a release (the locks above are re-taken): no acquire frame
        return evidence.with_stack(capture(frame, self.settings.stack_depth))

    def _add_stacks(self, finding: Finding, frame: Any) -> None:
        """A finding's own stack, and the held lock's when the function that took it still runs."""
        finding.details["stack"] = capture(frame, self.settings.stack_depth)
        prev = finding.prev
        if prev is not None and prev.acquired is not None:
            held = capture_earlier(frame, prev.acquired.file, prev.acquired.line, self.settings.stack_depth)
            if held:
                finding.details["held_stack"] = held

    def take(self, context: Optional[str]) -> list[Finding]:
        """The findings made in `context` since the last `take` of it (queued work applied first)."""
        self.drain()
        with self._feed_lock:
            return self.by_context.pop(context, [])

    def suppressed(self, finding: Finding) -> bool:
        """Whether a rule of `rules` (`lockcheck.python.suppression_rules`) accepts the finding (counted)."""
        i = match(self.rules, finding)
        if i is None:
            return bool(self.test_rules) and match(list(self.test_rules), finding) is not None
        self.rule_hits[i] += 1
        return True

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> "Recorder":
        patching.start(self)
        return self

    def stop(self) -> None:
        patching.stop(self)

    def __enter__(self) -> "Recorder":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def render(self, out: TextIO) -> None:
        """All findings in the kernel's text layout, with the summary line."""
        from lockcheck.report import RENDERERS

        RENDERERS["text"].render([f for f, _ in self.findings], self.summary(), out)

    def summary(self) -> Any:
        from lockcheck.util.version import __version__
        from lockcheck.report import Summary

        checker = self.checker
        notes = []
        if self.bad_releases:
            notes.append(f"{self.bad_releases} releases of unlocked locks raised RuntimeError in the program")
        if self.left_held:
            listed = ", ".join(f"{cls} ({test})" for cls, test in self.left_held[:5])
            more = f" and {len(self.left_held) - 5} more" if len(self.left_held) > 5 else ""
            notes.append(f"{_count(len(self.left_held), 'lock')} left held at the end of the test that took "
                         f"{'them' if len(self.left_held) > 1 else 'it'}, dropped from the held stack: {listed}{more}")
        if self.exited_holding:
            notes.append(f"{_count(self.exited_holding, 'thread')} ended holding an RLock (reported if "
                         f"another thread then waits for it)")
        if self.too_deep:
            notes.append(f"{_count(len(self.too_deep), 'thread')} held {self.checker.max_depth} locks at once "
                         f"(--lockcheck-max-depth; a note, not a finding): {self.too_deep[0][0]}")
        if self.dropped_held:
            notes.append(f"{_count(self.dropped_held, 'lock')} garbage-collected while held "
                         f"(no longer held by anyone: not a finding)")
        return Summary(events=checker.stats.events, tasks=checker.task_count, classes=checker.graph.n_classes,
                       dependencies=checker.graph.n_dependencies, files=[], version=__version__, notes=notes,
                       suppressed=len(self.suppressed_findings))


class _ThreadEnd:
    """Kept in a thread's recorder-local data: collected when the thread ends, it says so."""

    __slots__ = ("pending", "task")

    def __init__(self, pending: collections.deque, task: str) -> None:
        self.pending = pending
        self.task = task

    def __del__(self) -> None:
        self.pending.append(("exit", self.task))


def _count(n: int, noun: str) -> str:
    from lockcheck.util.wording import count

    return count(n, noun)


def _rules(suppress: list) -> list[Rule]:
    """`suppress` as rules: lines are parsed, `Rule`s (from pyproject.toml) kept as they are."""
    lines = [item for item in suppress if isinstance(item, str)]
    return parse_rules(lines) + [item for item in suppress if isinstance(item, Rule)]
