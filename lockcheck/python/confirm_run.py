"""`--lockcheck-confirm`: re-run a test under a directed scheduler to confirm its cycles.

A circular-dependency finding is a deadlock that *could* happen.  When every edge
of the cycle was made by threads of one test, that test is run again -- by
pytest's own protocol (`_pytest.runner.runtestprotocol(item, log=False)`, as
pytest-rerunfailures does: its fixtures set up again, its reports not logged,
its output never shown) -- up to `runs` times, each with a
`lockcheck.python.confirm_scheduler.DirectedScheduler` that holds each thread at
its site of the cycle until the others reach theirs.  If the runtime detector
then sees the cycle of waits (`DeadlockError` breaks it, so the session goes
on), the finding is CONFIRMED, with the interleaving; otherwise it stays
POTENTIAL, with why when the scheduler can tell.  A cycle whose edges come from
different tests is never replayed: the summary says which test made each edge
and prints a reproducer *sketch*.

The original outcome is not changed: the verdict is appended to the failed
test's report text (or shown in the summary, warn mode); the findings made
during re-runs are dropped (the session has them already).  `verdicts` maps a
finding's key (`Finding.key()`) to True (confirmed), False (replayed, no
deadlock) or None (not replayed): the one place reports read it (`verdict`).

Registered by the lockcheck plugin (`install`) as a plugin of its own, so the
plugin module gains one line; `@pytest.mark.lockcheck(confirm=False)` opts a test out.
"""

from __future__ import annotations

import dataclasses
import time
from typing import Any, Optional

import pytest

from lockcheck.lockdep.findings import CIRCULAR, DEADLOCK, Finding
from lockcheck.python.confirm_scheduler import DirectedScheduler, Edge, cycle_edges, test_of, thread_of

NAME = "lockcheck-confirm"
DEFAULT_RUNS = 3
DEFAULT_PAUSE = 0.5
DEFAULT_TIMEOUT = 10.0


def add_options(parser: pytest.Parser) -> None:
    """The options of confirmation (`pytest_addoption`)."""
    group = parser.getgroup("lockcheck")
    group.addoption("--lockcheck-confirm", action="store_true", default=None,
                    help="re-run a test whose threads made a lock-order cycle under a directed scheduler, "
                         "to confirm it as a deadlock (confirmed / potential)")
    group.addoption("--lockcheck-confirm-runs", metavar="N", type=int, default=None,
                    help=f"re-runs per cycle for --lockcheck-confirm (default {DEFAULT_RUNS})")
    parser.addini("lockcheck_confirm", type="bool", default=False, help="as --lockcheck-confirm")
    parser.addini("lockcheck_confirm_runs", default=str(DEFAULT_RUNS), help="as --lockcheck-confirm-runs")
    parser.addini("lockcheck_confirm_pause", default=str(DEFAULT_PAUSE),
                  help="seconds a thread is held at its site of the cycle, waiting for the others")
    parser.addini("lockcheck_confirm_timeout", default=str(DEFAULT_TIMEOUT),
                  help="seconds of one re-run after which the scheduler holds no thread any more")


def install(config: pytest.Config, rec: Any, verdicts: dict) -> dict:
    """Register the confirmer when `--lockcheck-confirm` (or the ini value) asks; the mapping its
    verdicts go to (`verdicts`, the plugin's, which stays empty when confirmation is off)."""
    if not (config.getoption("lockcheck_confirm", None) or config.getini("lockcheck_confirm")):
        return verdicts
    existing = config.pluginmanager.get_plugin(NAME)
    if existing is not None:
        return existing.verdicts
    from lockcheck.python.plugin_options import seconds

    runs = config.getoption("lockcheck_confirm_runs", None)
    if runs is None:
        try:
            runs = int(str(config.getini("lockcheck_confirm_runs")).strip())
        except ValueError:
            raise pytest.UsageError("lockcheck_confirm_runs: expected a number of runs") from None
    if runs < 1:
        raise pytest.UsageError(f"--lockcheck-confirm-runs: expected 1 or more runs, not {runs}")
    confirmer = Confirmer(rec, runs, seconds("lockcheck_confirm_pause", config.getini("lockcheck_confirm_pause")),
                          seconds("lockcheck_confirm_timeout", config.getini("lockcheck_confirm_timeout")))
    confirmer.verdicts = verdicts
    config.pluginmanager.register(confirmer, NAME)
    return confirmer.verdicts


def verdict(config: pytest.Config, finding: Finding) -> Optional[bool]:
    """True: confirmed by a re-run; False: replayed without a deadlock; None: not replayed
    (confirmation off, a cycle across tests, or an opted-out test)."""
    confirmer = config.pluginmanager.get_plugin(NAME)
    return None if confirmer is None else confirmer.verdicts.get(finding.key())


@dataclasses.dataclass
class Outcome:
    """What confirming one finding found: the verdict, and the lines that say it."""

    finding: Finding
    test: str
    confirmed: Optional[bool]
    lines: list[str]


class Confirmer:
    """The plugin object: re-runs each test that made an in-test cycle, after its own run."""

    def __init__(self, rec: Any, runs: int, pause: float, timeout: float) -> None:
        self.rec = rec
        self.runs = runs
        self.pause = pause
        self.timeout = timeout
        self.verdicts: dict[tuple, Optional[bool]] = {}
        self.outcomes: list[Outcome] = []
        self._reports: dict[str, pytest.TestReport] = {}
        self.rerunning = False

    # -- pytest hooks ---------------------------------------------------------
    @pytest.hookimpl(wrapper=True, tryfirst=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Optional[pytest.Item]) -> Any:
        """Outside the lockcheck plugin's own wrapper: by the time the test's run is over, its
        context is closed; the re-runs open it again."""
        start = len(self.rec.findings)
        try:
            result = yield
            found = [f for f, ctx in self.rec.findings[start:] if ctx == item.nodeid and f.kind == CIRCULAR]
            if found:
                self._confirm(item, nextitem, found)
            return result
        finally:
            self._reports.pop(item.nodeid, None)

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """The report that carries the test's lockcheck text, to add the verdict to."""
        text = str(report.longrepr) if report.longrepr else ""
        if text.startswith("lockcheck: ") or any(title.startswith("lockcheck") for title, _ in report.sections):
            self._reports.setdefault(report.nodeid, report)

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        if not self.outcomes:
            return
        tr = terminalreporter
        tr.section("lockcheck confirm")
        for outcome in self.outcomes:
            for line in outcome.lines:
                tr.write_line(line)

    # -- confirming ------------------------------------------------------------
    def _confirm(self, item: pytest.Item, nextitem: Optional[pytest.Item], found: list[Finding]) -> None:
        marker = item.get_closest_marker("lockcheck")
        if marker is not None and marker.kwargs.get("confirm") is False:
            return  # @pytest.mark.lockcheck(confirm=False)
        texts = []
        for finding in found:
            outcome = self._one(item, nextitem, finding)
            self.verdicts[finding.key()] = outcome.confirmed
            self.outcomes.append(outcome)
            texts.append("\n".join(outcome.lines))
        report = self._reports.get(item.nodeid)
        if report is not None:
            _annotate(report, "\n\n".join(texts))

    def _one(self, item: pytest.Item, nextitem: Optional[pytest.Item], finding: Finding) -> Outcome:
        title = f"{' -> '.join(finding.cycle or [])} in {item.nodeid}"
        edges = cycle_edges(finding)
        if not edges:
            return Outcome(finding, item.nodeid, None,
                           [f"lockcheck confirm: POTENTIAL: {title}: the report kept no chain to replay"])
        tests = {test_of(edge.task) for edge in edges}
        if tests != {item.nodeid}:
            return Outcome(finding, item.nodeid, None, across_tests(title, edges))
        if len({thread_of(edge.task) for edge in edges}) < 2:
            return Outcome(finding, item.nodeid, False, [
                f"lockcheck confirm: POTENTIAL: {title}: one thread made every edge of the cycle, so this "
                f"test has no second thread to deadlock with (another caller of the same code would)"])
        why = ""
        for run in range(1, self.runs + 1):
            scheduler, deadlock, took = self._rerun(item, nextitem, edges, finding)
            if deadlock is not None:
                return Outcome(finding, item.nodeid, True, confirmed_lines(title, run, scheduler, deadlock))
            why = scheduler.why_not()
            if took >= self.timeout:
                why += f" (the re-run took {took:.1f}s, over its limit of {self.timeout:g}s: no more re-runs)"
                break
        return Outcome(finding, item.nodeid, False, [
            f"lockcheck confirm: POTENTIAL: {title}: no deadlock in {run} re-run{'s' if run > 1 else ''} "
            f"under the directed scheduler: {why}"])

    def _rerun(self, item: pytest.Item, nextitem: Optional[pytest.Item], edges: list[Edge],
               finding: Finding) -> tuple[DirectedScheduler, Optional[Finding], float]:
        """One re-run with the scheduler on; the deadlock finding of the cycle, if one was made.
        Whatever the re-run recorded is taken out of the session's findings again."""
        from _pytest.runner import runtestprotocol

        from lockcheck.python.plugin_summary import ReportedOnce
        from lockcheck.python.settings import RAISE

        rec = self.rec
        start = time.monotonic()
        scheduler = DirectedScheduler(rec, edges, self.pause, start + self.timeout)
        n_found, n_suppressed = len(rec.findings), len(rec.suppressed_findings)
        sections = list(getattr(item, "_report_sections", []))
        settings = rec.settings
        rec.settings = dataclasses.replace(settings, deadlock=RAISE)  # a deadlock must end, never hang
        rec.set_context(item.nodeid)
        ReportedOnce.install()  # a DeadlockError that ends a thread: one captured line, no warning
        scheduler.install()
        self.rerunning = True
        try:
            runtestprotocol(item, log=False, nextitem=nextitem)
        finally:
            self.rerunning = False
            scheduler.uninstall()
            ReportedOnce.uninstall()
            rec.settings = settings
            rec.end_context(item.nodeid)
            rec.take(item.nodeid)
            rec.set_context(None)
            made = rec.findings[n_found:]
            del rec.findings[n_found:]
            del rec.suppressed_findings[n_suppressed:]
            if hasattr(item, "_report_sections"):
                item._report_sections[:] = sections
        cycle = {_base(name) for name in finding.cycle or []}
        for found, _ in made:
            if found.kind == DEADLOCK and found.cycle and {_base(name) for name in found.cycle} <= cycle:
                return scheduler, found, time.monotonic() - start
        return scheduler, None, time.monotonic() - start


def _base(cls: str) -> str:
    return cls.partition("/")[0]


def _annotate(report: pytest.TestReport, text: str) -> None:
    """Add the verdict to the test's lockcheck text (its failure, or its warn-mode section)."""
    from lockcheck.python.plugin_summary import headlined

    if report.longrepr and str(report.longrepr).startswith("lockcheck: "):
        report.longrepr = headlined(f"{report.longrepr}\n\n{text}")
    else:
        report.sections.append(("lockcheck confirm", text))


def confirmed_lines(title: str, run: int, scheduler: DirectedScheduler, deadlock: Finding) -> list[str]:
    """The verdict, and the interleaving that deadlocked: who held what and waited where."""
    lines = [f"lockcheck confirm: CONFIRMED: {title}: re-run {run} deadlocked under the directed scheduler "
             f"(broken by DeadlockError, the session went on); the interleaving:",
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
    lines = [f"lockcheck confirm: POTENTIAL: {title}: its edges come from different tests, so no one re-run "
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
