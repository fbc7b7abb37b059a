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

The replay itself (shared with `lockcheck.confirm`) is `lockcheck.python.confirm_replay`.
Registered by the lockcheck plugin (`install`) as a plugin of its own, so the
plugin module gains a few lines; `@pytest.mark.lockcheck(confirm=False)` opts a test out.
"""

from __future__ import annotations

from typing import Any, Optional

import pytest

from lockcheck.lockdep.findings import CIRCULAR, Finding
from lockcheck.python.confirm_replay import DEFAULT_PAUSE, DEFAULT_RUNS, DEFAULT_TIMEOUT, Outcome, replay

NAME = "lockcheck-confirm"


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
    from lockcheck.python.plugin_options import seconds, whole_number

    runs = whole_number(config, "lockcheck_confirm_runs", "runs", 1)
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


def outcome_lines(config: pytest.Config) -> list[str]:
    """What the `lockcheck confirm` section says (an xdist worker sends it to the controller,
    whose terminal prints the session's summary)."""
    confirmer = config.pluginmanager.get_plugin(NAME)
    return [line for outcome in confirmer.outcomes for line in outcome.lines] if confirmer is not None else []


def write_section(tr: Any, lines: list[str]) -> None:
    if lines:
        tr.section("lockcheck confirm")
        for line in lines:
            tr.write_line(line)


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
        write_section(terminalreporter, [line for outcome in self.outcomes for line in outcome.lines])

    # -- confirming ------------------------------------------------------------
    def _confirm(self, item: pytest.Item, nextitem: Optional[pytest.Item], found: list[Finding]) -> None:
        from lockcheck.python.plugin_marker import read

        if not read(item).confirm:
            return  # @pytest.mark.lockcheck(confirm=False)
        texts = []
        for finding in found:
            outcome = self._one(item, nextitem, finding)
            self.verdicts[finding.key()] = outcome.confirmed
            finding.details["confirmed"] = outcome.confirmed  # what the JSON report reads (plugin_json)
            self.outcomes.append(outcome)
            texts.append("\n".join(outcome.lines))
        report = self._reports.get(item.nodeid)
        if report is not None:
            _annotate(report, "\n\n".join(texts))

    def _one(self, item: pytest.Item, nextitem: Optional[pytest.Item], finding: Finding) -> Outcome:
        return replay(self.rec, finding, lambda: self._rerun(item, nextitem), item.nodeid, self.runs, self.pause,
                      self.timeout)

    def _rerun(self, item: pytest.Item, nextitem: Optional[pytest.Item]) -> None:
        """The test once more, by pytest's protocol, its reports not logged; its context opened and
        closed again around it, and its report sections as they were."""
        from _pytest.runner import runtestprotocol

        from lockcheck.python.plugin_summary import ReportedOnce

        rec = self.rec
        sections = list(getattr(item, "_report_sections", []))
        rec.set_context(item.nodeid)
        ReportedOnce.install()  # a DeadlockError that ends a thread: one captured line, no warning
        self.rerunning = True
        try:
            runtestprotocol(item, log=False, nextitem=nextitem)
        finally:
            self.rerunning = False
            ReportedOnce.uninstall()
            rec.end_context(item.nodeid)
            rec.take(item.nodeid)
            rec.set_context(None)
            if hasattr(item, "_report_sections"):
                item._report_sections[:] = sections


def _annotate(report: pytest.TestReport, text: str) -> None:
    """Add the verdict to the test's lockcheck text (its failure, or its warn-mode section)."""
    from lockcheck.python.plugin_summary import headlined

    if report.longrepr and str(report.longrepr).startswith("lockcheck: "):
        report.longrepr = headlined(f"{report.longrepr}\n\n{text}")
    else:
        report.sections.append(("lockcheck confirm", text))
