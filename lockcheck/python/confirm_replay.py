"""Replaying one circular-dependency finding under the directed scheduler: the verdict.

Shared by the pytest plugin's `--lockcheck-confirm` (`lockcheck.python.confirm_run`, which
re-runs a test by pytest's protocol) and `lockcheck.confirm` (`lockcheck.python.confirm_api`,
which calls a function again): `replay` is handed a callable that runs the code once, and
runs it up to `runs` times with a `DirectedScheduler` (`lockcheck.python.confirm_scheduler`)
until the runtime detector's `DeadlockError` confirms the cycle.  What a run records is
taken out of the recorder's findings again: the first run filed the finding already.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Callable, Optional

from lockcheck.lockdep.findings import DEADLOCK, Finding
from lockcheck.python.confirm_scheduler import DirectedScheduler, Edge, cycle_edges, test_of, thread_of

DEFAULT_RUNS = 3
DEFAULT_PAUSE = 0.5
DEFAULT_TIMEOUT = 10.0


@dataclasses.dataclass
class Outcome:
    """What confirming one finding found: `confirmed` (True: a re-run deadlocked; False: none
    did; None: not replayed), and the lines that say it (`text`)."""

    finding: Optional[Finding]
    test: Optional[str]
    confirmed: Optional[bool]
    lines: list[str]

    @property
    def text(self) -> str:
        return "\n".join(self.lines)


def replay(rec: Any, finding: Finding, run_once: Callable[[], None], test: Optional[str], runs: int = DEFAULT_RUNS,
           pause: float = DEFAULT_PAUSE, timeout: float = DEFAULT_TIMEOUT) -> Outcome:
    """Confirm `finding` by running `run_once` (the code of `test`) again, at most `runs` times."""
    title = " -> ".join(finding.cycle or []) + (f" in {test}" if test else "")
    edges = cycle_edges(finding)
    if not edges:
        return Outcome(finding, test, None,
                       [f"lockcheck: POTENTIAL: {title}: the report kept no chain to replay"])
    if {test_of(edge.task) for edge in edges} != {test}:
        return Outcome(finding, test, None, across_tests(title, edges))
    if len({thread_of(edge.task) for edge in edges}) < 2:
        return Outcome(finding, test, False, [
            f"lockcheck: POTENTIAL: {title}: one thread made every edge of the cycle, so this "
            f"code has no second thread to deadlock with (another caller of the same code would)"])
    why = ""
    for run in range(1, runs + 1):
        scheduler, deadlock, took = attempt(rec, edges, finding, run_once, pause, timeout)
        if deadlock is not None:
            return Outcome(finding, test, True, confirmed_lines(title, run, scheduler, deadlock))
        why = scheduler.why_not()
        if took >= timeout:
            why += f" (the re-run took {took:.1f}s, over its limit of {timeout:g}s: no more re-runs)"
            break
    return Outcome(finding, test, False, [
        f"lockcheck: POTENTIAL: {title}: no deadlock in {run} re-run{'s' if run > 1 else ''} "
        f"under the directed scheduler: {why}"])


def attempt(rec: Any, edges: list[Edge], finding: Finding, run_once: Callable[[], None], pause: float,
            timeout: float) -> tuple[DirectedScheduler, Optional[Finding], float]:
    """One run with the scheduler on; the deadlock finding of the cycle, if one was made."""
    from lockcheck.python.settings import RAISE

    start = time.monotonic()
    scheduler = DirectedScheduler(rec, edges, pause, start + timeout)
    n_found, n_suppressed = len(rec.findings), len(rec.suppressed_findings)
    settings = rec.settings
    rec.settings = dataclasses.replace(settings, deadlock=RAISE)  # a deadlock must end, never hang
    scheduler.install()
    try:
        run_once()
    finally:
        scheduler.uninstall()
        rec.settings = settings
        rec.drain()
        made = rec.findings[n_found:]
        del rec.findings[n_found:]
        del rec.suppressed_findings[n_suppressed:]
        for found, context in made:  # filed under the context too: not the session's
            filed = rec.by_context.get(context)
            if filed:
                filed[:] = [other for other in filed if other is not found]
    cycle = {_base(name) for name in finding.cycle or []}
    for found, _ in made:
        if found.kind == DEADLOCK and found.cycle and {_base(name) for name in found.cycle} <= cycle:
            return scheduler, found, time.monotonic() - start
    return scheduler, None, time.monotonic() - start


def _base(cls: str) -> str:
    return cls.partition("/")[0]


def confirmed_lines(title: str, run: int, scheduler: DirectedScheduler, deadlock: Finding) -> list[str]:
    """The verdict, and the interleaving that deadlocked: who held what and waited where."""
    lines = [f"lockcheck: CONFIRMED: {title}: re-run {run} deadlocked under the directed scheduler "
             f"(broken by DeadlockError, so nothing hung); the interleaving:",
             "  held at their sites until every edge of the cycle had a thread:"]
    for task, edge in scheduler.meeting:
        lines.append(f"    {thread_of(task)} holding {edge.held}, about to take {edge.cls} at {edge.site}")
    lines.append("  then the cycle of waits:")
    for ctx in deadlock.details.get("contexts", []):
        taken = f" (taken at {ctx['holds_at']})" if ctx.get("holds_at") else ""
        lines.append(f"    {thread_of(ctx['task'])} holds {ctx['holds']}{taken}, waits for {ctx['waits_for']} "
                     f"at {ctx['waits_at']}")
    return lines


def across_tests(title: str, edges: list[Edge]) -> list[str]:
    """A cycle whose edges come from different tests: which test made each, and a sketch of a
    program that runs the halves at once."""
    lines = [f"lockcheck: POTENTIAL: {title}: its edges come from different tests, so no one re-run "
             f"can replay it:"]
    for edge in edges:
        lines.append(f"  {edge.cls} taken while holding {edge.held} at {edge.site} by {thread_of(edge.task)} "
                     f"in {test_of(edge.task) or 'no test'}")
    lines.append("  reproducer sketch (a sketch, not a tested program: fill in the calls' arguments):")
    lines.append("    import threading")
    for i, edge in enumerate(edges, 1):
        lines.append(f"    def half_{i}():  # as {test_of(edge.task) or 'outside any test'} did")
        lines.extend(f"        {call}" for call in _calls(edge))
    lines.append(f"    threads = [threading.Thread(target=f) for f in ({', '.join(f'half_{i}' for i in range(1, len(edges) + 1))},)]")
    lines.append("    for t in threads: t.start()")
    lines.append("    for t in threads: t.join()  # a deadlock hangs here (under pytest --lockcheck: DeadlockError)")
    return lines


def _calls(edge: Edge) -> list[str]:
    """The recorded call path of an edge, outermost first, as a comment, and the call to make:
    the first function below the test's own (the code under test), else the outermost."""
    frames = list(reversed(edge.stack or ()))
    if not frames:
        return [f"...  # the code that takes {edge.held}, then {edge.cls} at {edge.site}"]
    path = " -> ".join(f"{frame.function}() at {frame.file}:{frame.line}" for frame in frames)
    entry = frames[1] if len(frames) > 1 and frames[0].function.rpartition(".")[2].startswith("test") else frames[0]
    name = entry.function.replace(".<locals>.", "_")
    return [f"# call path: {path}", f"{name}(...)  # takes {edge.held}, then {edge.cls} at {edge.site}"]
