"""pytest plugin: lockdep over the locks of the code under test (`pytest --lockcheck`).

Registered under the `pytest11` entry point as `lockcheck` (`-p no:lockcheck`
blocks it).  Inert unless enabled by `--lockcheck` or the ini option
`lockcheck = true`: until then it only adds its options and marker.

Enabled, it starts a `lockcheck.python.instrument.Recorder` at configure time (before
collection, so module-level locks of test modules are tracked from their
creation) and stops it at unconfigure.  One dependency graph serves the whole
session, so an order inversion between `test_a` and `test_b` is found; the
test whose lock operation raised a finding fails with the kernel-format
report as its failure text, and the terminal summary lists every finding.
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
- `lockcheck_interrupts` (ini, default true): signal handlers and
  finalizers run as interrupt contexts, so lockdep's irq checks apply
  (`lockcheck.python.interrupts`); `false` switches that off.

Marker: `@pytest.mark.lockcheck(skip=True)` switches checking off for one
test: its lock operations are still recorded (so holds stay balanced) but
`nocheck`, adding no dependencies and raising no findings.

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
import json
import os
from collections import Counter
from typing import Any, Optional

import pytest

from lockcheck.lockdep.checker import Checker
from lockcheck.events import ACQUIRE, RELEASE, Event
from lockcheck.lockdep.findings import Evidence, Finding
from lockcheck.lockdep.graph import DEP_EN, DEP_ER, DEP_SN, DEP_SR, DepGraph
from lockcheck.python import plugin_options
from lockcheck.python.settings import Settings
from lockcheck.util.wording import count as _count

PLUGIN_NAME = "lockcheck-session"
#: --lockcheck-mode / lockcheck_mode values
FAIL, WARN = "fail", "warn"
MODES = (FAIL, WARN)
DEFAULT_STACK_DEPTH = 5
DEADLOCK_MODES = ("raise", "report", "off")
MARKER = "lockcheck(skip=False): skip=True records this test's lock operations without checking them"


def pytest_addoption(parser: pytest.Parser) -> None:
    group = parser.getgroup("lockcheck", "lockdep for the locks of the code under test")
    group.addoption("--lockcheck", action="store_true", default=False,
                    help="track threading/asyncio locks and fail tests that take them in deadlock-prone orders")
    group.addoption("--lockcheck-trace", metavar="FILE", default=None,
                    help="write the recorded lock events as a .lt trace (for `lockcheck check FILE`)")
    group.addoption("--lockcheck-graph", metavar="FILE", default=None,
                    help="save the session's dependency graph (.json, .graphml, .dot)")
    group.addoption("--lockcheck-mode", choices=MODES, default=None,
                    help="fail (default): findings fail their test and the session; "
                         "warn: report them without failing anything")
    group.addoption("--lockcheck-stack-depth", metavar="N", type=int, default=None,
                    help="Python frames shown for each acquisition site in reports (default 5; 0: none)")
    group.addoption("--lockcheck-deadlock", choices=DEADLOCK_MODES, default=None,
                    help="a blocking acquire that closes a cycle of waits: raise lockcheck.DeadlockError "
                         "(default), report it and keep waiting, or off")
    group.addoption("--lockcheck-hang-report", metavar="SECONDS", type=float, default=None,
                    help="print who holds and waits for which lock, and the stacks, when a test "
                         "runs longer than SECONDS (pytest-timeout and faulthandler_timeout get it anyway)")
    group.addoption("--lockcheck-waits", action="store_true", default=None,
                    help="also check waits on events under locks (Thread.join, Future.result, Queue.get, "
                         "Event.wait, Condition.wait, asyncio events and queues)")
    plugin_options.add_options(group, parser)
    parser.addini("lockcheck", type="bool", default=False, help="enable lockcheck (as --lockcheck)")
    parser.addini("lockcheck_mode", default="fail", help="fail (default) or warn (as --lockcheck-mode)")
    parser.addini("lockcheck_order", default="",
                  help="a declared lock order file (`A < B` lines, as `lockcheck check --order`)")
    parser.addini("lockcheck_stack_depth", default=str(DEFAULT_STACK_DEPTH),
                  help="Python frames shown for each acquisition site (as --lockcheck-stack-depth)")
    parser.addini("lockcheck_suppress", type="linelist", default=[],
                  help="findings not to report: lines of `KIND CLASSGLOB...`")
    parser.addini("lockcheck_grace", default="1.0",
                  help="seconds a re-acquire of a held Lock waits for another thread's release before raising "
                       "(and a cycle of waits through a Lock must stand before it is reported)")
    parser.addini("lockcheck_deadlock", default="raise",
                  help="raise (default), report or off (as --lockcheck-deadlock)")
    parser.addini("lockcheck_hang_report", default="0",
                  help="seconds after which a running test gets a hang report (as --lockcheck-hang-report)")
    parser.addini("lockcheck_waits", type="bool", default=False,
                  help="check waits on events under locks (as --lockcheck-waits)")
    parser.addini("lockcheck_interrupts", type="bool", default=True,
                  help="signal handlers and finalizers run as interrupt contexts (lockdep's irq checks)")
    parser.addini("lockcheck_timed_acquire", default="try",
                  help="`try` (default): acquire(timeout=...) is a trylock; `blocking`: validated as blocking")


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config: pytest.Config) -> None:
    """Start tracking before any conftest.py (and so the application it imports) is imported:
    a module-level lock, or a `from threading import Lock` done at import, is then tracked."""
    config = early_config
    if not (_option(config, "lockcheck") or config.getini("lockcheck")):
        return
    if config.pluginmanager.get_plugin(PLUGIN_NAME) is not None:
        return
    if _xdist_controller_early(config):
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


def _option(config: pytest.Config, name: str, default: Any = None) -> Any:
    """A command-line option, also before the command line is fully parsed (the early hooks,
    where `config.option` holds only the defaults but `known_args_namespace` the command line)."""
    early = getattr(config, "known_args_namespace", None)
    if early is not None and getattr(early, name, None) is not None:
        return getattr(early, name)
    try:
        return config.getoption(name)
    except (ValueError, AttributeError):
        return default


def _xdist_controller_early(config: pytest.Config) -> bool:
    """Before xdist's own `pytest_cmdline_main` has run: `-n N` (also `auto`), or `--dist`
    with `--tx`, asked for on the command line (xdist's workers are not given them). Early
    tracking is skipped there; `_xdist_controller` decides for good at configure time."""
    workers = _option(config, "numprocesses")
    if workers:
        return True
    return _option(config, "dist", "no") not in ("no", None) and bool(_option(config, "tx"))


def _xdist_controller(config: pytest.Config) -> bool:
    """Whether this process is xdist's controller, decided as xdist itself decides
    (`dist` is not `no` and there are test environments), from `config.option` once
    xdist's `pytest_cmdline_main` has filled in what `-n` implies: `-n 2` alone gives
    `dist = "load"` only then, so `known_args_namespace` still says `no`."""
    if getattr(config, "workerinput", None) is not None:
        return False
    option = config.option
    if getattr(option, "collectonly", False):
        return False
    return getattr(option, "dist", "no") not in ("no", None) and bool(getattr(option, "tx", None))


def pytest_unconfigure(config: pytest.Config) -> None:
    plugin = config.pluginmanager.get_plugin(PLUGIN_NAME)
    if plugin is not None:
        plugin.close()
        config.pluginmanager.unregister(plugin)


class LockcheckPlugin:
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
        self.mode = _mode(config)
        self.hang: Optional[Any] = None
        self.stack_depth = _stack_depth(config)
        if self._is_controller(config):
            self._become_controller()
            return
        self._trace_spec = _option(config, "lockcheck_trace")
        if self._trace_spec:
            # until pytest_configure says which xdist worker this is (the file's name), a buffer
            self.trace_file = io.StringIO()
        mode = str(config.getini("lockcheck_timed_acquire")).strip().lower()
        if mode not in ("try", "blocking"):
            raise pytest.UsageError(f"lockcheck_timed_acquire: expected `try` or `blocking`, not {mode!r}")
        grace = plugin_options.seconds("lockcheck_grace", config.getini("lockcheck_grace"))
        plugin_options.graph_path(_option(config, "lockcheck_graph"))
        depth = plugin_options.max_depth(_option(config, "lockcheck_max_depth"), config.getini("lockcheck_max_depth"))
        settings = Settings(grace=grace, timed_is_try=mode == "try", stack_depth=self.stack_depth,
                            max_depth=depth, deadlock=_deadlock_mode(config))
        self.recorder = pylocks.Recorder(
            _checker(config), settings=settings, suppress=list(config.getini("lockcheck_suppress")),
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
        self.hang = _hang_hooks(config, self.recorder)
        pylocks.start(self.recorder)
        self._start_contexts(config)
        if not early:
            self.configured()

    def _is_controller(self, config: pytest.Config) -> bool:
        if self.worker_id is not None:
            return False
        return _xdist_controller(config)

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
        if self._trace_spec and isinstance(self.trace_file, io.StringIO):
            from lockcheck.util.traceout import open_trace_output

            self.trace_path = _per_worker(self._trace_spec, self.worker_id)
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

        if _option(config, "lockcheck_waits") or config.getini("lockcheck_waits"):
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

    # -- forked children ----------------------------------------------------------
    def _in_forked_child(self, rec: Any) -> None:
        """In a child of os.fork(): its own trace file and findings file, never the parent's.

        Both are written line by line (a child often ends with os._exit(), which flushes
        nothing); the parent merges the trace into its own and reads the findings back
        (`_read_children`), so a finding made in a child fails the test that forked it.
        """
        self.in_child = True
        self.trace_file = None  # the parent's: the child never closes or flushes it
        pid = os.getpid()
        rec.on_finding = self._child_finding
        if rec.trace is not None and self.trace_path is not None:
            try:
                out = open(f"{self.trace_path}.pid{pid}", "w", buffering=1, encoding="utf-8")
            except OSError:
                rec.trace = None
                return
            out.write(f"#lockcheck-trace v1\n# forked from pid {rec.forked_from}\n")
            info = getattr(rec._local, "info", None)
            if info is not None:
                for ev in rec.held_at_start(info[1]):
                    out.write(rec._format_event(ev) + "\n")
            rec.trace = out

    def _child_finding(self, finding: Finding, context: Optional[str]) -> None:
        if self.child_dir is None:
            return
        try:
            text = self._render([finding])
            line = json.dumps({"context": context, "headline": _headline(finding, context) + f" (pid {os.getpid()})",
                               "report": text, "message": finding.message})
            os.makedirs(self.child_dir, mode=0o700, exist_ok=True)
            with open(os.path.join(self.child_dir, f"pid{os.getpid()}.jsonl"), "a", encoding="utf-8") as out:
                out.write(line + "\n")
        except Exception:  # noqa: BLE001 - a child's report must never break the child
            pass

    def _read_children(self) -> list[tuple[Optional[str], str, str, str]]:
        """New findings written by forked children since the last look."""
        if self.child_dir is None:
            return []
        new = []
        try:
            names = sorted(os.listdir(self.child_dir))
        except OSError:
            return []
        for name in names:
            path = os.path.join(self.child_dir, name)
            offset = self._child_offsets.get(path, 0)
            try:
                with open(path, encoding="utf-8") as f:
                    f.seek(offset)
                    data = f.read()
            except OSError:
                continue
            complete = data[:data.rfind("\n") + 1]
            self._child_offsets[path] = offset + len(complete.encode("utf-8"))
            for line in complete.splitlines():
                try:
                    obj = json.loads(line)
                    new.append((obj.get("context"), str(obj["headline"]), str(obj["report"]),
                                str(obj.get("message", ""))))
                except (ValueError, KeyError, TypeError):
                    continue
        return new

    def _merge_child_traces(self) -> None:
        """Each forked child wrote `TRACE.pidN`: appended to the trace, its tasks named `pidN:...`."""
        import glob

        from lockcheck.readers.lt import format_event, parse_line

        if self.trace_file is None or self.trace_path is None:
            return
        for path in sorted(glob.glob(glob.escape(self.trace_path) + ".pid*")):
            prefix = path.rsplit(".", 1)[1] + ":"
            try:
                with open(path, encoding="utf-8") as f:
                    lines = f.read().splitlines()
            except OSError:
                continue
            self.trace_file.write(f"# forked child: {prefix[:-1]} (its tasks are named {prefix}TASK)\n")
            for line in lines:
                if not line.strip() or line.startswith("#"):
                    if line.startswith("# ") and not line.startswith("#lockcheck"):
                        self.trace_file.write(line + "\n")
                    continue
                try:
                    ev = parse_line(line)
                except Exception:  # noqa: BLE001 - a child killed mid-line: its last line is lost
                    continue
                if ev is None:
                    continue
                ev.task = prefix + ev.task
                self.trace_file.write(format_event(ev) + "\n")
            try:
                os.unlink(path)
            except OSError:
                pass

    # -- per test ---------------------------------------------------------
    @pytest.hookimpl(wrapper=True)
    def pytest_runtest_protocol(self, item: pytest.Item, nextitem: Optional[pytest.Item]) -> Any:
        rec = self.recorder
        if rec is None:
            return (yield)
        marker = item.get_closest_marker("lockcheck")
        check = not (marker is not None and (marker.kwargs.get("skip") or marker.kwargs.get("enabled") is False))
        rec.set_context(item.nodeid, check)
        if self.hang is not None:
            self.hang.install()  # pytest-timeout is loaded by now, if it is there
            self.hang.test_started(item)
        try:
            return (yield)
        finally:
            if self.hang is not None:
                self.hang.test_ended()
            rec.end_context(item.nodeid)
            rec.set_context(None)
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
        texts = [self._render(found)] if found else []
        kinds = {f.message for f in found}
        for context, headline, report_text, message in self._read_children():
            if context == item.nodeid:
                texts.append(report_text)
                kinds.add(message)
                self.child_headlines.append(headline)
            else:
                self.child_findings.append((context, headline, report_text))
        if texts:
            text = f"lockcheck: {', '.join(sorted(kinds))}\n" + "\n\n".join(texts)
            if self.mode == WARN:
                # reported (the section, and the terminal summary), but the outcome is the test's own
                report.sections.append(("lockcheck (warn mode: not failing the test)", text))
                return report
            report.outcome = "failed"
            if report.longrepr:
                text = f"{text}\n\n{report.longrepr}"
            report.longrepr = text
        return report

    def _render(self, findings: list[Finding]) -> str:
        """The Python-flavoured kernel report of each finding (`lockcheck.python.report`)."""
        from lockcheck.python import report as python

        out = io.StringIO()
        summary = self.recorder.summary() if self.recorder is not None else _summary()
        for finding in findings:
            python.print_finding(finding, summary, out, self.stack_depth, _suppression_key)
        return out.getvalue().strip("\n")

    # -- end of session ----------------------------------------------------
    @pytest.hookimpl(tryfirst=True)
    def pytest_sessionfinish(self, session: pytest.Session, exitstatus: int) -> None:
        rec = self.recorder
        if rec is not None:
            rec.drain()
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
            _report_session_error(self.config, reasons)
        graph_path = self.config.getoption("lockcheck_graph")
        if graph_path and self.worker_id is None:
            self._save_graph(graph_path)

    def _session_failures(self) -> list[str]:
        """Why lockcheck fails the session beyond the tests it failed (empty: it does not).

        Findings made outside any test (at import, in a fixture of session
        scope that outlived its test, in a thread still running at the end)
        and cycles that only exist across xdist workers belong to no test,
        so no test report can carry them: the session fails instead, and
        says so (see `_report_session_error`).
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

    def _worker_output(self) -> dict:
        rec = self.recorder
        assert rec is not None
        summary = rec.summary()
        return {
            "graph": _graph_to_text(rec.checker.graph),
            "findings": [_headline(f, ctx) for f, ctx in rec.findings] + self.child_headlines,
            "unattributed": self._render([f for f, _ in self.unattributed]) if self.unattributed else "",
            "n_unattributed": len(self.unattributed),
            # warn mode: no failed test carries the reports, so the controller prints them
            "reports": [self._render([f]) for f, ctx in rec.findings if ctx is not None] if self.mode == WARN else [],
            "stats": [summary.events, summary.tasks, summary.suppressed],
            "trace": self.trace_path,
            "children": [[headline, text] for _, headline, text in self.child_findings],
            "preexisting": [[p.name, p.where, p.tracked, p.stdlib] for p in rec.preexisting],
        }

    # -- xdist controller ----------------------------------------------------
    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        if self.merger is None:
            return
        output = getattr(node, "workeroutput", {}).get("lockcheck")
        if not output:
            return
        self.worker_reports.append(output)
        graph = _graph_from_text(output["graph"])
        self.merged.extend(replay_graph(self.merger, graph))

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
        headlines = [_headline(f, ctx) for f, ctx in rec.findings] + self.child_headlines + [
            h for _, h, _ in self.child_findings]
        tr.write_line(_summary_line(headlines, summary.events, summary.tasks, rec.checker.graph, summary.suppressed))
        for line in headlines:
            tr.write_line(f"  {line}")
        for note in summary.notes:
            tr.write_line(f"  note: {note}")
        _write_preexisting(tr, [(p.name, p.where, p.tracked, p.stdlib) for p in rec.preexisting])
        if self.mode == WARN:
            self._write_reports(tr, [self._render([f]) for f, ctx in rec.findings if ctx is not None])
        if self.unattributed:
            tr.write_line("findings outside any test:")
            tr.write_line(self._render([f for f, _ in self.unattributed]))
        self._write_children(tr, [text for _, _, text in self.child_findings])
        _write_nothing_seen(tr, summary.events)
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

    def _controller_summary(self, tr: Any) -> None:
        headlines = [line for report in self.worker_reports for line in report["findings"]]
        events = sum(report["stats"][0] for report in self.worker_reports)
        tasks = sum(report["stats"][1] for report in self.worker_reports)
        suppressed = sum(report["stats"][2] for report in self.worker_reports)
        merged = [f"{_headline(f, None)} (across workers)" for f in self.merged]
        tr.write_line(_summary_line(headlines + merged, events, tasks, self.merger.graph, suppressed,
                                    workers=len(self.worker_reports)))
        for line in headlines + merged:
            tr.write_line(f"  {line}")
        if self.mode == WARN:
            self._write_reports(tr, [text for report in self.worker_reports for text in report.get("reports", ())])
        for report in self.worker_reports:
            if report["unattributed"]:
                tr.write_line("findings outside any test:")
                tr.write_line(report["unattributed"])
        children = [text for report in self.worker_reports for _, text in report.get("children", ())]
        headlines += [headline for report in self.worker_reports for headline, _ in report.get("children", ())]
        self._write_children(tr, children)
        if self.worker_reports:
            _write_preexisting(tr, list(dict.fromkeys(tuple(p) for report in self.worker_reports
                                                      for p in report.get("preexisting", ()))))
        _write_nothing_seen(tr, events, workers=len(self.worker_reports))
        if self.merged:
            tr.write_line("cycles across workers (each worker's graph alone is acyclic):")
            tr.write_line(self._render(self.merged))
        self._write_verdict(tr, len(headlines) + len(merged))
        self._write_paths(tr, [report["trace"] for report in self.worker_reports if report.get("trace")])

    def _write_paths(self, tr: Any, traces: list[str]) -> None:
        if traces:
            tr.write_line(f"lockcheck trace: {' '.join(traces)} (replay: lockcheck check {' '.join(traces)})")
        graph = self.config.getoption("lockcheck_graph")
        if graph:
            tr.write_line(f"lockcheck graph: {graph}")


# -- helpers ----------------------------------------------------------------------------


def _write_preexisting(tr: Any, found: list[tuple[str, str, bool, bool]]) -> None:
    """The locks that existed before tracking began, by name: what lockcheck may not have seen."""
    own = [(name, where, tracked) for name, where, tracked, stdlib in found if not stdlib]
    stdlib = [name for name, _, _, is_stdlib in found if is_stdlib]
    if not own and not stdlib:
        return
    tr.write_line(f"lockcheck: {_count(len(own) + len(stdlib), 'lock')} existed before tracking began "
                  f"(made at import, before pytest loaded lockcheck):")
    tracked = [f"{name} ({where})" for name, where, ok in own if ok]
    untracked = [f"{name} ({where})" for name, where, ok in own if not ok]
    if tracked:
        tr.write_line(f"  tracked from then on (wrapped): {', '.join(tracked)}")
    if untracked:
        tr.write_line(f"  NOT tracked (a Condition or Semaphore made before tracking began): {', '.join(untracked)}",
                      yellow=True)
    if stdlib:
        tr.write_line(f"  and {_count(len(stdlib), 'lock')} of the standard library, tracked from then on")


def _write_nothing_seen(tr: Any, events: int, workers: int = 0) -> None:
    """Never check nothing silently."""
    if events:
        return
    where = f" in any of {workers} workers" if workers else ""
    tr.write_line(f"lockcheck: WARNING: no lock operation was observed{where}: nothing was checked. "
                  f"Locks are tracked from their creation while lockcheck runs: locks created before "
                  f"(listed above, if any) or by code outside the tests are not seen.", yellow=True, bold=True)



def _checker(config: pytest.Config) -> Checker:
    """The session's checker: with `lockcheck_order`, one that also reports every dependency
    against the declared order (and is seeded with it, so the first inversion is a cycle)."""
    path = str(config.getini("lockcheck_order")).strip()
    if not path:
        return Checker()
    from lockcheck.errors import TraceError
    from lockcheck.lockdep.order import OrderChecker, load_order

    path = str(config.rootpath / path)
    try:
        order = load_order(path)
    except TraceError as err:
        raise pytest.UsageError(f"lockcheck_order: {err}") from None
    graph = DepGraph()
    order.seed(graph)
    return OrderChecker(order, graph)


def _deadlock_mode(config: pytest.Config) -> str:
    """What a cycle of waits does (`Settings.deadlock`, read by `lockcheck.python.waitfor`)."""
    mode = (_option(config, "lockcheck_deadlock") or str(config.getini("lockcheck_deadlock")).strip().lower()
            or DEADLOCK_MODES[0])
    if mode not in DEADLOCK_MODES:
        raise pytest.UsageError(f"lockcheck_deadlock: expected `raise`, `report` or `off`, not {mode!r}")
    return mode


def _hang_hooks(config: pytest.Config, rec: Any) -> Any:
    """The hang report's hooks (`lockcheck.python.hang`)."""
    from lockcheck.python import hang

    seconds = _option(config, "lockcheck_hang_report")
    if seconds is None:
        seconds = plugin_options.seconds("lockcheck_hang_report", config.getini("lockcheck_hang_report"))
    else:
        seconds = plugin_options.seconds("--lockcheck-hang-report", seconds)
    return hang.HangHooks(config, rec, seconds)


def _mode(config: pytest.Config) -> str:
    mode = _option(config, "lockcheck_mode") or str(config.getini("lockcheck_mode")).strip().lower() or FAIL
    if mode not in MODES:
        raise pytest.UsageError(f"lockcheck_mode: expected `fail` or `warn`, not {mode!r}")
    return mode


def _stack_depth(config: pytest.Config) -> int:
    depth = _option(config, "lockcheck_stack_depth")
    if depth is None:
        try:
            depth = int(str(config.getini("lockcheck_stack_depth")).strip())
        except ValueError:
            raise pytest.UsageError("lockcheck_stack_depth: expected a number of frames") from None
    if depth < 0:
        raise pytest.UsageError("--lockcheck-stack-depth: expected 0 or more frames")
    return depth


class _SessionErrorRepr:
    """A longrepr for `_report_session_error`: its text, and the one-line message of the short summary."""

    def __init__(self, text: str, message: str) -> None:
        self.text = text
        self.reprcrash = _Crash(message)

    def toterminal(self, out: Any) -> None:
        for line in self.text.splitlines():
            out.line(line)

    def __str__(self) -> str:
        return self.text


class _Crash:
    def __init__(self, message: str) -> None:
        self.message = message


def _report_session_error(config: pytest.Config, reasons: list[str]) -> None:
    """Make the terminal's last line agree with the exit status lockcheck set: one error.

    pytest's closing line counts test reports ("2 passed in 0.5s"); a
    session failed by lockcheck alone would print that over exit status 1.
    An error report named `lockcheck` joins the terminal's statistics, so the
    line reads "2 passed, 1 error", the ERRORS section and the short summary
    say why, and the full reports follow in the `lockcheck` section.
    """
    tr = config.pluginmanager.get_plugin("terminalreporter")
    if tr is None:
        return
    why = "; ".join(reasons)
    text = (f"lockcheck fails the session (exit status 1): {why}.\n"
            f"The reports are in the `lockcheck` section of the summary below; "
            f"`--lockcheck-mode=warn` reports without failing.")
    report = pytest.TestReport(
        nodeid="lockcheck", location=("lockcheck", None, "lockcheck"), keywords={}, outcome="failed",
        longrepr=_SessionErrorRepr(text, f"fails the session: {why}"), when="teardown",
    )
    tr.stats.setdefault("error", []).append(report)


def _suppression_key(cls: str) -> str:
    """What a suppression rule names a class by: its qualified name where the registry knows one
    (stable across releases of the code that made it), else the class name as reports print it."""
    from lockcheck.python.sites import registry

    qualified = getattr(registry, "qualified", None)
    if qualified:
        base, slash, subclass = cls.partition("/")
        key = qualified.get(base)
        if key is not None:
            return key + slash + subclass
    return cls


def _per_worker(path: str, worker_id: Optional[str]) -> str:
    """`locks.lt` -> `locks.gw0.lt`, `locks.lt.gz` -> `locks.gw0.lt.gz`: each worker its own file."""
    if not worker_id:
        return path
    base, ext = os.path.splitext(path)
    if ext.lower() in (".gz", ".xz", ".zst"):
        inner_base, inner_ext = os.path.splitext(base)
        return f"{inner_base}.{worker_id}{inner_ext}{ext}"
    return f"{base}.{worker_id}{ext}"


def _summary() -> Any:
    from lockcheck.report import Summary

    return Summary()


def _headline(finding: Finding, context: Optional[str]) -> str:
    classes = " -> ".join(finding.cycle) if finding.cycle else (
        f"{finding.held} -> {finding.lock}" if finding.held else finding.lock)
    where = f" in {context}" if context else ""
    return f"{finding.kind}: {classes}{where} at {finding.site or finding.location} ({finding.task})"


def _summary_line(headlines: list[str], events: int, tasks: int, graph: DepGraph, suppressed: int,
                  workers: int = 0) -> str:
    kinds = Counter(line.split(":", 1)[0] for line in headlines)
    found = _count(len(headlines), "finding")
    if kinds:
        found += " (" + ", ".join(f"{n} {kind}" for kind, n in sorted(kinds.items())) + ")"
    extra = f", {suppressed} suppressed" if suppressed else ""
    across = f" from {workers} workers" if workers else ""
    return (f"lockcheck: {found}{extra} in {_count(events, 'event')}{across}, {_count(tasks, 'task')}, "
            f"{_count(graph.n_classes, 'lock class', 'lock classes')}, "
            f"{_count(graph.n_dependencies, 'dependency', 'dependencies')}")


def _graph_to_text(graph: DepGraph) -> str:
    """The worker's graph for the controller: graphio's JSON (execnet carries plain strings)."""
    from lockcheck.store.graphfile import graph_to_json

    return json.dumps(graph_to_json(graph))


def _graph_from_text(text: str) -> DepGraph:
    from lockcheck.store.graphfile import graph_from_json

    return graph_from_json(json.loads(text), "<xdist worker>")


#: each dependency type bit, as (prev read, next read) of an acquisition pair that creates it
_DEP_MODES = ((DEP_EN, 0, 0), (DEP_ER, 0, 2), (DEP_SN, 1, 0), (DEP_SR, 1, 2))


def replay_graph(checker: Checker, graph: DepGraph, task: str = "merge") -> list[Finding]:
    """Feed every dependency of `graph` to `checker` as `acquire prev; acquire next`; the findings.

    This is how saved or per-worker graphs are merged *with checking*: a
    dependency that closes a cycle with what the checker already has is
    reported exactly as if its two acquisitions had happened in this run,
    with each event carrying the dependency's original evidence (file:line,
    task and test), so the report reads as a live one would.
    """
    found: list[Finding] = []
    feed = checker.feed
    target = checker.graph
    for name in graph.nx.nodes:
        target.add_class(name)
    saved_hook = target.evidence_hook
    replayed: list[Optional[Evidence]] = [None]
    # the dependency made by replaying keeps the original's Python stack
    target.evidence_hook = lambda new: new.with_stack(replayed[0].stack) if replayed[0] is not None else new
    try:
        for prev, nxt, data in graph.nx.edges(data=True):
            evidence: Evidence = data["evidence"]
            held: Evidence = data.get("held") or evidence
            for bit, prev_read, next_read in _DEP_MODES:
                if not data["dep"] & bit:
                    continue
                found += feed(Event(task, ACQUIRE, prev, None, prev_read, at=held.at, file=held.file,
                                    line=held.line, comm=held.task))
                replayed[0] = evidence
                closing = feed(Event(task, ACQUIRE, nxt, None, next_read, at=evidence.at, file=evidence.file,
                                     line=evidence.line, comm=evidence.task))
                replayed[0] = None
                for finding in closing:
                    if evidence.stack:
                        finding.details["stack"] = evidence.stack
                    if held.stack:
                        finding.details["held_stack"] = held.stack
                found += closing
                found += feed(Event(task, RELEASE, nxt))
                found += feed(Event(task, RELEASE, prev))
    finally:
        target.evidence_hook = saved_hook
    return found
