"""The recorder: Python lock operations -> events -> one `Checker`, with what it found.

The tracked lock types (`lockcheck.tracked`) call `acquired`/`released`;
the recorder names the task (a thread, or an asyncio task) and the test
that runs (`set_context`), builds the `Event`, feeds the checker under its
own raw lock, writes the event to the trace, and files each finding under
its test or among the suppressed ones.
"""

from __future__ import annotations

import _thread
import asyncio
import fnmatch
import itertools
import threading
import weakref
from typing import Any, Callable, Optional, TextIO

from lockcheck.checker import Checker
from lockcheck.events import ACQUIRE, RELEASE, WRITE, Event
from lockcheck.findings import Evidence, Finding
from lockcheck.pysites import relpath, user_frame
from lockcheck.pystacks import DEFAULT_DEPTH, capture, capture_earlier

#: task numbers are unique in the process, so a hold recorded by an earlier recorder is never
#: mistaken for one of the current recorder's tasks
_task_numbers = itertools.count(1)


class Recorder:
    """One checker fed by every tracked lock while started, with what it found.

    `findings` holds `(finding, context)` pairs in report order; `context`
    is what `set_context` last said (the pytest node id).  `suppress` is a
    list of `"KIND CLASSGLOB..."` rules (see `suppressed`); matching
    findings go to `suppressed_findings` instead.
    """

    def __init__(self, checker: Optional[Checker] = None, *, grace: float = 1.0, timed_is_try: bool = True,
                 suppress: Optional[list[str]] = None, trace: Optional[TextIO] = None,
                 task_prefix: str = "", on_finding: Optional[Callable[[Finding, Optional[str]], None]] = None,
                 stack_depth: int = DEFAULT_DEPTH) -> None:
        self.checker = checker or Checker()
        #: Python frames kept per new dependency and per finding (0: none, reports show sites only)
        self.stack_depth = stack_depth
        self._frame: Any = None  # the acquisition being fed: where a new dependency's stack comes from
        if stack_depth:
            self.checker.graph.evidence_hook = self._with_stack
        self.grace = grace
        self.timed_is_try = timed_is_try
        rules = DEFAULT_SUPPRESS + list(suppress or [])
        self.rules = [_parse_rule(rule) for rule in rules if rule.strip() and not rule.lstrip().startswith("#")]
        self.trace = trace
        self.task_prefix = task_prefix
        self.on_finding = on_finding
        self.findings: list[tuple[Finding, Optional[str]]] = []
        self.suppressed_findings: list[tuple[Finding, Optional[str]]] = []
        self.by_context: dict[Optional[str], list[Finding]] = {}
        self.bad_releases = 0
        self.context: Optional[str] = None
        self.check = True  # False: events are recorded `nocheck` (a test switched lockcheck off)
        self.active = False
        self._gen = 0
        self._feed_lock = _thread.allocate_lock()
        self._local = _thread._local()
        self._atasks: "weakref.WeakKeyDictionary[Any, str]" = weakref.WeakKeyDictionary()
        self._sites: dict = {}
        if trace is not None:
            # imported now: nothing may be imported under the feed lock (imports take locks)
            from lockcheck.readers.lt import format_event

            self._format_event = format_event
            trace.write("#lockcheck-trace v1\n")

    # -- context ------------------------------------------------------------
    def set_context(self, context: Optional[str], check: bool = True) -> None:
        """Name what runs from now on (a test id): it shows in reports after each task name."""
        with self._feed_lock:
            self.context = context
            self.check = check
            self._gen += 1
            if self.trace is not None and context is not None:
                self.trace.write(f"# context {context}{'' if check else ' (lockcheck off)'}\n")

    def _comm(self, task: str) -> str:
        return f"{task} [{self.context}]" if self.context else task

    def thread_task(self) -> tuple[str, str]:
        """(task key, comm) of the calling thread."""
        local = self._local
        try:
            gen, task, comm = local.info
        except AttributeError:
            name = threading.current_thread().name.replace(" ", "_").replace("\t", "_").replace('"', "'")
            task = f"{self.task_prefix}{name}/{next(_task_numbers)}"
            gen, comm = -1, task
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
        ev = Event(task, ACQUIRE, cls, inst, mode, trylock, subclass, None, self.check, at, None, None,
                   file, line, comm)
        return self.feed(ev, frame)

    def released(self, task: str, cls: str, inst: str) -> None:
        """Feed one release by (or for) `task`; holds from before this recorder started are skipped."""
        if task in self.checker.tasks:
            if self.trace is None:
                with self._feed_lock:
                    if self.checker.release_innermost(task, cls, inst):
                        return  # the common case: no event to build, nothing to find
            self.feed(Event(task, RELEASE, cls, inst))

    def feed(self, ev: Event, frame: Any = None) -> list[Finding]:
        with self._feed_lock:
            self._frame = frame
            found = self.checker.feed(ev)
            if found and frame is not None and self.stack_depth:
                for finding in found:
                    self._add_stacks(finding, frame)
            self._frame = None
            if self.trace is not None:
                self.trace.write(self._format_event(ev))
                self.trace.write("\n")
            if found:
                context = self.context
                kept = []
                for finding in found:
                    if self.suppressed(finding):
                        self.suppressed_findings.append((finding, context))
                    else:
                        kept.append(finding)
                        self.findings.append((finding, context))
                        self.by_context.setdefault(context, []).append(finding)
                found = kept
        if found and self.on_finding is not None:
            for finding in found:
                self.on_finding(finding, self.context)
        return found

    # -- Python stacks, only where a report shows them ------------------------------
    def _with_stack(self, evidence: Evidence) -> Evidence:
        """`DepGraph.evidence_hook`: a new dependency keeps the stack of the acquisition that made it."""
        frame = self._frame
        if frame is None:
            return evidence  # made by a release (the locks above are re-taken): no acquire frame
        return evidence.with_stack(capture(frame, self.stack_depth))

    def _add_stacks(self, finding: Finding, frame: Any) -> None:
        """A finding's own stack, and the held lock's when the function that took it still runs."""
        finding.details["stack"] = capture(frame, self.stack_depth)
        prev = finding.prev
        if prev is not None and prev.acquired is not None:
            held = capture_earlier(frame, prev.acquired.file, prev.acquired.line, self.stack_depth)
            if held:
                finding.details["held_stack"] = held

    def take(self, context: Optional[str]) -> list[Finding]:
        """The findings made in `context` since the last `take` of it."""
        with self._feed_lock:
            return self.by_context.pop(context, [])

    def suppressed(self, finding: Finding) -> bool:
        """`KIND CLASSGLOB...`: the kind matches and every glob matches a class of the finding."""
        if not self.rules:
            return False
        classes = {finding.lock, finding.held, *(finding.cycle or ())} - {None}
        for kind, globs in self.rules:
            if not fnmatch.fnmatchcase(finding.kind, kind):
                continue
            if all(any(fnmatch.fnmatchcase(cls, glob) for cls in classes) for glob in globs):
                return True
        return False

    # -- lifecycle ----------------------------------------------------------
    def start(self) -> "Recorder":
        from lockcheck.patching import start

        start(self)
        return self

    def stop(self) -> None:
        from lockcheck.patching import stop

        stop(self)

    def __enter__(self) -> "Recorder":
        return self.start()

    def __exit__(self, *exc: Any) -> None:
        self.stop()

    def render(self, out: TextIO) -> None:
        """All findings in the kernel's text layout, with the summary line."""
        from lockcheck.report import RENDERERS

        RENDERERS["text"].render([f for f, _ in self.findings], self.summary(), out)

    def summary(self) -> Any:
        from lockcheck import __version__
        from lockcheck.report import Summary

        checker = self.checker
        notes = []
        if self.bad_releases:
            notes.append(f"{self.bad_releases} releases of unlocked locks raised RuntimeError in the program")
        return Summary(events=checker.stats.events, tasks=checker.task_count, classes=checker.graph.n_classes,
                       dependencies=checker.graph.n_dependencies, files=[], version=__version__, notes=notes,
                       suppressed=len(self.suppressed_findings))


#: same-class nesting inside the standard library that is ordered on purpose (lockdep's
#: `lock_set_cmp_fn`): `concurrent.futures._AcquireFutures` takes Future conditions sorted by id()
DEFAULT_SUPPRESS = ["recursive-locking Future._condition"]


def _parse_rule(rule: str) -> tuple[str, list[str]]:
    parts = rule.split()
    return parts[0], parts[1:]
