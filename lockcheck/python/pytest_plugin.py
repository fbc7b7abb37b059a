"""pytest plugin: lockdep over the locks of the code under test (`pytest --lockcheck`).

Registered under the `pytest11` entry point as `lockcheck` (`-p no:lockcheck`
blocks it).  Inert unless enabled by `--lockcheck` or the ini option
`lockcheck = true`: until then it only adds its options and marker.

Enabled, it starts a `lockcheck.python.instrument.Recorder` at configure time (before
collection, so module-level locks of test modules are tracked from their
creation) and stops it at unconfigure.  One dependency graph serves the whole
session, so an order inversion between `test_a` and `test_b` is found; the
test whose lock operation raised a finding fails with the report as its
failure text (`lockcheck.python.report_short`, or the kernel's layout with
`--lockcheck-report-style=kernel`), and the terminal summary lists every finding.
Each event's task name carries the current test id (`MainThread/1
[tests/test_x.py::test_a]`), so a report's dependency chain says in which test
and at which `file:LINE` each dependency was first seen.

Options (command line / ini):

- `--lockcheck` / `lockcheck = true`: enable;
- `--lockcheck-trace=FILE`: write the events as a `.lt` trace (under xdist,
  one per worker: `FILE` with `.gw0` before its extension) for
  `lockcheck check FILE`; gzip-, xz- or zstd-compressed when FILE ends in
  `.gz`, `.xz` or `.zst` (`lockcheck.util.traceout`);
- `--lockcheck-mode=warn` / `lockcheck_mode = warn`: report every finding
  (the test's report section, the terminal summary) without failing a test
  or the session, so a project can turn lockcheck on before it is clean;
  `fail` (the default) fails the test whose lock operation raised it;
- `--lockcheck-graph=FILE`: save the session's graph (`lockcheck.store.graphfile`;
  merged over all workers under xdist);
- `--lockcheck-stack-depth=N` / `lockcheck_stack_depth`: Python frames shown
  for each acquisition site in reports (default 5, 0: none); stacks are
  captured only when a dependency is first seen or a finding made;
- `lockcheck_order` (ini, a file of `A < B` lines, as `lockcheck check
  --order`): the declared lock order; every dependency against it is
  reported, even in a run that never takes both orders;
- `lockcheck_suppress` (ini, lines `KIND CLASSGLOB...`): findings of that
  kind whose classes match every glob are counted, not reported
  (the standard library's own orders, `lockcheck.python.recorder.DEFAULT_SUPPRESS`, are always on);
- `lockcheck_grace` (ini, seconds, default 1): how long a re-acquire of a
  held `Lock` waits for another thread's release (a signal) before it is
  reported and raises `SelfDeadlockError`, and how long a cycle of waits
  through a `Lock` or an `asyncio.Lock` must stand before it is reported;
- `lockcheck_timed_acquire` (ini, `try` or `blocking`, default `try`):
  whether `acquire(timeout=...)` is a trylock or validated like a blocking
  acquire;
- `--lockcheck-deadlock=raise|report|off` / `lockcheck_deadlock`: a blocking
  acquire that closes a cycle of waits (`lockcheck.python.waitfor`) raises
  `lockcheck.DeadlockError` (default), or prints its report and keeps
  waiting; either way the `deadlock` finding fails its test;
- `--lockcheck-hang-report=SECONDS` / `lockcheck_hang_report`: a test still
  running after SECONDS gets a hang report (`lockcheck.python.hang`) and the stacks
  of every thread; pytest-timeout's timeouts and `faulthandler_timeout` get
  the report anyway, before their stack dumps;
- `--lockcheck-waits` / `lockcheck_waits = true`: waits on events under
  locks (`Thread.join`, `Future.result`, `Queue.get`, `Event.wait`...) are
  dependencies too, DEPT's model (`lockcheck.python.dept`);
- `--lockcheck-max-depth=N` / `lockcheck_max_depth` (default 10000): a thread
  holding more locks at once is noted in the summary, never failed (no kernel
  table limits Python; `concurrent.futures.wait()` holds one per future);
- `--lockcheck-report-style=python|kernel` / `lockcheck_report_style`: the
  short report (default) or lockdep's layout; `lockcheck_helper_modules`
  (ini lines): modules whose frames reports skip, as `__tracebackhide__` does;
- `--lockcheck-report=FILE.json` / `lockcheck_report`: every finding of the
  session as JSON at its end (`lockcheck.python.plugin_json`);
- `lockcheck_interrupts` (ini, default true): signal handlers and
  finalizers run as interrupt contexts, so lockdep's irq checks apply
  (`lockcheck.python.interrupts`); `false` switches that off.

Marker: `@pytest.mark.lockcheck(skip=True)` switches checking off for one
test: its lock operations are still recorded (so holds stay balanced) but
`nocheck`, adding no dependencies and raising no findings; `expect=KIND`,
`order=[...]` and `suppress=[...]` are in `lockcheck.python.plugin_marker`.

pytest-xdist: each worker records its own graph and sends it (as graphio
JSON) to the controller, which replays every worker's dependencies into one
checker and reports the cycles that only exist across workers; they fail
the session (exit status 1) and are printed in the terminal summary.

Findings that belong to no test (cycles across xdist workers, lock
operations outside any test) fail the session in `fail` mode; pytest's
closing line then counts one error named `lockcheck` ("2 passed, 1 error"),
the short summary and the lockcheck section say why, so what the terminal
says agrees with the exit status.
"""

from __future__ import annotations

import io
import os
from collections import Counter
from typing import Any, Optional

import pytest

from lockcheck.lockdep.checker import Checker
from lockcheck.lockdep.findings import Finding
from lockcheck.python import confirm_run, plugin_options, plugin_threads
from lockcheck.python.core import core_note
from lockcheck.python.plugin_marker import MARKER, Request, check_items, read as read_marker, set_test_order
from lockcheck.python.plugin_children import ForkedChildren
from lockcheck.python.plugin_fixture import lockcheck_fixture  # noqa: F401 - the `lockcheck` fixture
from lockcheck.python.plugin_options import (
    FAIL, WARN, hang_hooks, make_checker, option, read_stack_depth, session_mode,
)
from lockcheck.python.plugin_summary import (
    empty_summary, headline, headlined, report_session_error, summary_line, suppression_key, write_nothing_seen,
    ReportedOnce, write_preexisting, write_stale,
)
from lockcheck.python.suppression_rules import stale
from lockcheck.python.plugin_xdist import (  # noqa: F401 - replay_graph: re-exported
    XdistSession, is_controller_early, is_xdist_controller, per_worker, replay_graph,
)
from lockcheck.util.wording import count as _count

PLUGIN_NAME = "lockcheck-session"


def pytest_addoption(parser: pytest.Parser) -> None:
    plugin_options.add_all(parser)
    confirm_run.add_options(parser)


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Start tracking before any conftest.py (and so the application it imports) is imported:
    a module-level lock, or a `from threading import Lock` done at import, is then tracked."""
    config = early_config
    if not (option(config, "lockcheck") or config.getini("lockcheck")):
        return
    if config.pluginmanager.get_plugin(PLUGIN_NAME) is not None:
        return
    if is_controller_early(config):
        return  # the controller only merges the workers' graphs (made at configure)
    config.pluginmanager.register(LockcheckPlugin(config, early=True), PLUGIN_NAME)


def pytest_configure(config: pytest.Config) -> None:
    config.addinivalue_line("markers", MARKER)
    if config.getoption("lockcheck") or config.getini("lockcheck"):
        plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
        if plugin is None:
            config.pluginmanager.register(LockcheckPlugin(config), PLUGIN_NAME)
        else:
            plugin.configured()


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if plugin is not None:
        plugin.close()
        config.pluginmanager.unregister(plugin)


class LockcheckPlugin(ForkedChildren, XdistSession):
    """The enabled plugin: one recorder (test processes) or the merger (xdist controller)."""

    def __init__(self, config: pytest.Config, early: bool = False) -> None:
        # networkx (which saves the graph at the end) is imported before tracking starts, as it
        # was when lockcheck.lockdep.graph imported it: locks it makes at import are not the program's
        import networkx  # noqa: F401

        from lockcheck.python import instrument as pylocks

        self.config = config
        self.worker_id: Optional[str] = None
        workerinput = getattr(config, "workerinput", None)
        if workerinput is not None:
            self.worker_id = workerinput.get("workerid", "gw")
        self.controller = False
        self._trace_spec: Optional[str] = None
        self.trace_file: Optional[Any] = None
        self.trace_path: Optional[str] = None
        self.recorder: Optional[pylocks.Recorder] = None
        self.merger: Optional[Checker] = None
        self.merged: list[Finding] = []
        self.worker_reports: list[dict] = []
        self.unattributed: list[tuple[Finding, Optional[str]]] = []
        #: findings made in forked children (read back from their files): (context, headline, report)
        self.child_findings: list[tuple[Optional[str], str, str]] = []
        self.child_headlines: list[str] = []  # findings of forked children that failed their test
        self.child_dir: Optional[str] = None
        self._child_offsets: dict[str, int] = {}
        self.in_child = False
        self.mode = session_mode(config)
        self.hang: Optional[Any] = None
        self.stack_depth = read_stack_depth(config)
        self.threads_before = plugin_threads.running_now()
        self.thread_wait = plugin_options.seconds("lockcheck_thread_wait", config.getini("lockcheck_thread_wait"))
        #: (threads waited for at the end that ended, threads still running after the wait)
        self.lingering: tuple[list[str], list[str]] = ([], [])
        self.style = plugin_options.report_style(config)
        self.report_path = plugin_options.report_path(config)
        self.requests: dict[str, Request] = {}
        #: findings a test's marker expected (`expect=KIND`): not failures, but in the JSON report
        self.expected: list[tuple[Finding, Optional[str]]] = []
        #: the JSON report's entries sent by xdist workers (`lockcheck.python.plugin_json`)
        self.worker_entries: list[dict] = []
        from lockcheck.python.stacks import set_helper_modules

        set_helper_modules(list(config.getini("lockcheck_helper_modules")))
        #: Finding.key() -> True (confirmed) / False (replayed, no deadlock) / None (`lockcheck.python.confirm_run`)
        self.verdicts: dict = {}
        if self._is_controller(config):
            self._become_controller()
            return
        self._trace_spec = option(config, "lockcheck_trace")
        if self._trace_spec:
            # until pytest_configure says which xdist worker this is (the file's name), a buffer
            self.trace_file = io.StringIO()
        settings = plugin_options.build_settings(config)
        plugin_options.graph_path(option(config, "lockcheck_graph"))
        self.recorder = pylocks.Recorder(
            make_checker(config), settings=settings, suppress=plugin_options.suppress_rules(config),
            trace=self.trace_file, task_prefix=f"{self.worker_id}:" if self.worker_id else "",
        )
        import tempfile

        # where forked children write their findings: named now (mkdtemp's name, before tracking
        # starts, as tempfile's first name costs it a lock) but made by the first child that has
        # one, so a session that forks nothing, or that pytest-timeout ends with os._exit, leaves
        # nothing behind
        self.child_dir = tempfile.mkdtemp(prefix="lockcheck-children-")
        os.rmdir(self.child_dir)
        self.recorder.on_fork_child = self._in_forked_child
        self.hang = hang_hooks(config, self.recorder)
        pylocks.start(self.recorder)
        self._start_contexts(config)
        if not early:
            self.configured()

    def pytest_report_header(self, config: pytest.Config) -> list[str]:
        """Said once, at session start: the pure path runs where the GIL is disabled."""
        note = core_note()
        return [note] if note else []

    def _is_controller(self, config: pytest.Config) -> bool:
        if self.worker_id is not None:
            return False
        return is_xdist_controller(config)

    def _become_controller(self) -> None:
        """The xdist controller runs no test: it merges the workers' graphs."""
        self.close()
        self.recorder = None
        self.trace_file = None
        self.controller = True
        self.merger = Checker()

    def configured(self) -> None:
        """pytest_configure: xdist's `-n`, and which worker this is, are known now."""
        rec = self.recorder
        if rec is None:
            return
        if self._is_controller(self.config):
            self._become_controller()
            return
        workerinput = getattr(self.config, "workerinput", None)
        if workerinput is not None:
            self.worker_id = workerinput.get("workerid", "gw")
            rec.task_prefix = f"{self.worker_id}:"  # tasks made from now on (conftest's ran before)
        self.verdicts = confirm_run.install(self.config, rec, self.verdicts)
        if self._trace_spec and isinstance(self.trace_file, io.StringIO):
            from lockcheck.util.traceout import open_trace_output

            self.trace_path = per_worker(self._trace_spec, self.worker_id)
            try:
                out = open_trace_output(self.trace_path)
            except OSError as err:
                raise pytest.UsageError(f"--lockcheck-trace: {self.trace_path}: {err.strerror or err}") from None
            with rec._feed_lock:
                out.write(self.trace_file.getvalue())
                self.trace_file = rec.trace = out

    def _start_contexts(self, config: pytest.Config) -> None:
        """The opt-in waits (`lockcheck.python.dept`) and the interrupt contexts (`lockcheck.python.interrupts`)."""
        from lockcheck.python import interrupts as pyirq, dept as waits

        if option(config, "lockcheck_waits") or config.getini("lockcheck_waits"):
            waits.start(self.recorder)
        if config.getini("lockcheck_interrupts"):
            pyirq.start(self.recorder)

    def close(self) -> None:
        from lockcheck.python import instrument as pylocks, interrupts as pyirq, dept as waits

        if self.hang is not None:
            self.hang.uninstall()
        if self.recorder is not None:
            waits.stop()
            pyirq.stop(self.recorder)
            pylocks.stop(self.recorder)
            if self.in_child:
                return
        if self.trace_file is not None:
            self.trace_file.close()
            self.trace_file = None
        if self.child_dir is not None and not self.in_child:
            import shutil

            shutil.rmtree(self.child_dir, ignore_errors=True)
            self.child_dir = None

    # -- per test ---------------------------------------------------------
    def pytest_collection_modifyitems(self, items: list[pytest.Item]) -> None:
        """Every test's `@pytest.mark.lockcheck(...)` checked before any runs (`lockcheck.python.plugin_marker`)."""
        self.requests = check_items(items)

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Optional[pytest.Item]) -> Any:
        rec = self.recorder
        if rec is None:
            return (yield)
        request = self.requests.get(item.nodeid) or read_marker(item)
        rec.set_context(item.nodeid, request.check)
        rec.test_rules = request.rules
        if request.order is not None or getattr(rec.checker, "test_order", None) is not None:
            set_test_order(rec.checker, request.order)
        if self.hang is not None:
            self.hang.install()  # pytest-timeout is loaded by now, if it is there
            self.hang.test_started(item)
        ReportedOnce.install()  # in front of pytest's thread-exception hook, set at its configure
        try:
            return (yield)
        finally:
            ReportedOnce.uninstall()
            if self.hang is not None:
                self.hang.test_ended()
            rec.end_context(item.nodeid)
            rec.set_context(None)
            rec.test_rules = ()
            if request.order is not None:
                set_test_order(rec.checker, None)
            if self.trace_file is not None and rec.trace is self.trace_file:
                with rec._feed_lock:  # a run that dies later (os._exit, a crash) keeps this test's events
                    self.trace_file.flush()

    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_makereport(self, item: pytest.Item, call: pytest.CallInfo) -> Any:
        report = yield
        rec = self.recorder
        if rec is None:
            return report
        found = rec.take(item.nodeid)
        expect = self.requests.get(item.nodeid, Request()).expect
        if expect is not None:
            found = self._expected(item.nodeid, found, expect, call.when, report)
        kinds = {f.message for f in found}
        raised = getattr(call.excinfo, "value", None) if call.excinfo is not None else None
        if self.style != "kernel" and getattr(raised, "finding", None) is not None:
            # the test's own traceback ends in the DeadlockError, whose message is this report
            found = [f for f in found if f is not raised.finding]
        texts = [self._render(found, item.nodeid)] if found else []
        for context, head, report_text, message in self._read_children():
            if context == item.nodeid:
                texts.append(report_text)
                kinds.add(message)
                self.child_headlines.append(head)
            else:
                self.child_findings.append((context, head, report_text))
        if texts or kinds:
            text = f"lockcheck: {', '.join(sorted(kinds))}\n" + "\n\n".join(texts)
            if self.mode == WARN:
                # reported (the section, and the terminal summary), but the outcome is the test's own
                report.sections.append(("lockcheck (warn mode: not failing the test)", text))
                return report
            report.outcome = "failed"
            if report.longrepr:
                text = f"{text}\n\n{report.longrepr}"
            report.longrepr = headlined(text)
        return report

    @pytest.hookimpl(tryfirst=True)
    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        """A worker's report reaches the controller with its text as a string: give it back its
        one-line summary message."""
        report.longrepr = headlined(report.longrepr)

    def _expected(self, nodeid: str, found: list[Finding], kind: str, when: str, report: pytest.TestReport) -> list[Finding]:
        """`expect=KIND`: the findings of that kind are the test's point, not failures; by the end of
        its call, none made fails the test."""
        import fnmatch

        rec = self.recorder
        assert rec is not None
        hits = [f for f in found if fnmatch.fnmatchcase(f.kind, kind)]
        for finding in hits:
            self.expected.append((finding, nodeid))
            rec.findings[:] = [(f, ctx) for f, ctx in rec.findings if f is not finding]
        if when == "call" and not any(ctx == nodeid for _, ctx in self.expected) and self.mode != WARN:
            report.outcome = "failed"
            text = (f"lockcheck: expected a {kind} finding (@pytest.mark.lockcheck(expect={kind!r})), "
                    f"but this test made none")
            report.longrepr = headlined(f"{text}\n\n{report.longrepr}" if report.longrepr else text)
        return [f for f in found if not any(f is hit for hit in hits)]

    def _render(self, findings: list[Finding], test: Optional[str] = None) -> str:
        """Each finding's report: the short layout (`lockcheck.python.report_short`, the default) or
        the Python-flavoured kernel layout (`lockcheck.python.report`, `--lockcheck-report-style=kernel`)."""
        from lockcheck.python import report as python

        if self.style != "kernel":
            from lockcheck.python import report_short as short

            paths = short.Paths(str(self.config.rootpath))
            return "\n\n".join(short.render(f, self.stack_depth, paths, suppression_key, test) for f in findings)
        out = io.StringIO()
        summary = self.recorder.summary() if self.recorder is not None else empty_summary()
        for finding in findings:
            python.print_finding(finding, summary, out, self.stack_depth, suppression_key)
        return out.getvalue().strip("\n")

    # -- end of session ----------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        rec = self.recorder
        if rec is not None:
            self.lingering = plugin_threads.join_lingering(self.threads_before, self.thread_wait)
            rec.drain()
            if self.trace_file is not None:
                rec.end_trace()  # from here on, lockcheck's own work: none of it in the trace
        self.child_findings.extend(entry[:3] for entry in self._read_children())
        if self.trace_file is not None:
            self._merge_child_traces()
            # finished now, not at unconfigure: an xdist worker may be ended before it unconfigures,
            # and a compressed trace is unreadable without its last block
            self.trace_file.close()
        if rec is not None:
            self.unattributed = [(f, ctx) for f, ctx in rec.findings if ctx is None]
            if self.worker_id is not None:
                self.config.workeroutput["lockcheck"] = self._worker_output()
        reasons = self._session_failures()
        if reasons and self.mode == FAIL:
            if session.exitstatus == 0:
                session.exitstatus = pytest.ExitCode.TESTS_FAILED
            report_session_error(self.config, reasons)
        graph_path = self.config.getoption("lockcheck_graph")
        if graph_path and self.worker_id is None:
            self._save_graph(graph_path)
        if self.report_path and self.worker_id is None:
            from lockcheck.python import plugin_json

            plugin_json.write(self.report_path, self.json_entries())

    def json_entries(self) -> list[dict]:
        """This process's findings as `--lockcheck-report` entries (a worker's go to the controller)."""
        from lockcheck.python import plugin_json

        root = str(self.config.rootpath)
        entries = list(self.worker_entries)
        rec = self.recorder
        if rec is not None:
            entries += [plugin_json.entry(f, ctx, root) for f, ctx in rec.findings]
            entries += [plugin_json.entry(f, ctx, root, expected=True) for f, ctx in self.expected]
            entries += [plugin_json.entry(f, ctx, root, suppressed=True) for f, ctx in rec.suppressed_findings]
        entries += [plugin_json.entry(f, None, root) for f in self.merged]
        return entries

    def _session_failures(self) -> list[str]:
        """Why lockcheck fails the session beyond the tests it failed (empty: it does not).

        Findings made outside any test (at import, in a fixture of session
        scope that outlived its test, in a thread still running at the end)
        and cycles that only exist across xdist workers belong to no test,
        so no test report can carry them: the session fails instead, and
        says so (see `report_session_error`).
        """
        if self.worker_id is not None:
            return []  # a worker's findings go to the controller, which decides
        reasons = []
        unattributed = len(self.unattributed) + len(self.child_findings) + sum(
            report.get("n_unattributed", bool(report["unattributed"])) + len(report.get("children", ()))
            for report in self.worker_reports)
        if unattributed:
            reasons.append(f"{_count(unattributed, 'finding')} made outside any test")
        if self.merged:
            kinds = Counter(f.kind for f in self.merged)
            listed = ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items()))
            reasons.append(f"{listed} across xdist workers (each worker's graph alone is acyclic, "
                           f"so no test failed)")
        return reasons

    def _save_graph(self, path: str) -> None:
        from lockcheck.store.graphfile import save_graph

        if self.merger is not None:
            save_graph(self.merger.graph, path, self.merged)
        elif self.recorder is not None:
            save_graph(self.recorder.checker.graph, path, [f for f, _ in self.recorder.findings])

    def pytest_terminal_summary(self, terminalreporter: Any) -> None:
        tr = terminalreporter
        if self.worker_id is not None:
            return
        tr.section("lockcheck")
        if self.merger is not None:
            self._controller_summary(tr)
            return
        rec = self.recorder
        if rec is None:
            return
        summary = rec.summary()
        headlines = [headline(f, ctx) for f, ctx in rec.findings] + self.child_headlines + [
            h for _, h, _ in self.child_findings]
        tr.write_line(summary_line(headlines, summary.events, summary.tasks, rec.checker.graph, summary.suppressed))
        for line in headlines:
            tr.write_line(f"  {line}")
        for note in summary.notes:
            tr.write_line(f"  note: {note}")
        ended, running = self.lingering
        if ended:
            tr.write_line(f"  note: waited for {_count(len(ended), 'thread')} still running after the last test "
                          f"({', '.join(ended)}); what they did is checked")
        if running:
            tr.write_line(f"  note: {_count(len(running), 'thread')} still running after {self.thread_wait:g} s "
                          f"(lockcheck_thread_wait): {', '.join(running)}; what they do from now on is not checked",
                          yellow=True)
        write_stale(tr, stale(rec.rules, rec.rule_hits))
        write_preexisting(tr, [(p.name, p.where, p.tracked, p.stdlib) for p in rec.preexisting])
        if self.mode == WARN:
            self._write_reports(tr, [self._render([f]) for f, ctx in rec.findings if ctx is not None])
        if self.unattributed:
            tr.write_line("findings outside any test:")
            tr.write_line(self._render([f for f, _ in self.unattributed]))
        self._write_children(tr, [text for _, _, text in self.child_findings])
        write_nothing_seen(tr, summary.events)
        self._write_verdict(tr, len(headlines))
        self._write_paths(tr, [self.trace_path] if self.trace_path else [])

    def _write_children(self, tr: Any, reports: list[str]) -> None:
        """Findings of forked children that no test report carried (made after their test ended)."""
        if reports:
            tr.write_line("findings in forked children, outside their test:")
            for report in reports:
                tr.write_line(report)

    def _write_reports(self, tr: Any, reports: list[str]) -> None:
        """Warn mode: the reports no failed test shows."""
        if reports:
            tr.write_line("findings in tests (warn mode: reported, not failing the tests):")
            for report in reports:
                tr.write_line(report)

    def _write_verdict(self, tr: Any, findings: int) -> None:
        """The last word: what lockcheck did to the outcome, so it agrees with the exit status."""
        reasons = self._session_failures()
        if self.mode == WARN:
            if findings:
                tr.write_line(f"lockcheck: warn mode: {_count(findings, 'finding')} reported; neither the tests "
                              f"nor the session fail because of them (`lockcheck_mode = fail` makes them fail)")
        elif reasons:
            tr.write_line(f"lockcheck: the session FAILED (exit status 1) because of {'; '.join(reasons)}; "
                          f"the reports are above")

    def _write_paths(self, tr: Any, traces: list[str]) -> None:
        if traces:
            tr.write_line(f"lockcheck trace: {' '.join(traces)} (replay: lockcheck check {' '.join(traces)})")
        graph = self.config.getoption("lockcheck_graph")
        if graph:
            tr.write_line(f"lockcheck graph: {graph}")


