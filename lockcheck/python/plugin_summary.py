"""The plugin's session-end words: the summary line, the headlines, the notes, and the error
that makes pytest's closing line agree with the exit status lockcheck set.

Kept apart from `lockcheck.python.pytest_plugin` (which runs the session) so each stays about
one job; imports nothing that tracks locks (the plugin module loads before tracking starts).
"""

from __future__ import annotations

import sys
import threading
from collections import Counter
from typing import Any, Optional

import pytest

from lockcheck.lockdep.findings import Finding
from lockcheck.lockdep.graph import DepGraph
from lockcheck.util.wording import count as _count


def write_preexisting(tr: Any, found: list[tuple[str, str, bool, bool]]) -> None:
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


def write_nothing_seen(tr: Any, events: int, workers: int = 0) -> None:
    """Never check nothing silently."""
    if events:
        return
    where = f" in any of {workers} workers" if workers else ""
    tr.write_line(f"lockcheck: WARNING: no lock operation was observed{where}: nothing was checked. "
                  f"Locks are tracked from their creation while lockcheck runs: locks created before "
                  f"(listed above, if any) or by code outside the tests are not seen.", yellow=True, bold=True)


class HeadlinedRepr:
    """A report's text with a one-line message for the short summary.

    A plain-string longrepr is what pytest's short summary prints whole on CI
    (`CI` set) and under `-vv`: a 100-line report twice. pytest reads the
    summary's message from `longrepr.reprcrash.message`, so that is the headline.
    """

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


def headlined(longrepr: Any) -> Any:
    """A lockcheck failure's text (a string: pytest-xdist sends a worker's report as one) with
    its first line as the short summary's message; any other longrepr as it is."""
    if isinstance(longrepr, str) and longrepr.startswith("lockcheck: "):
        return HeadlinedRepr(longrepr, longrepr.partition("\n")[0])
    return longrepr


def report_session_error(config: pytest.Config, reasons: list[str]) -> None:
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
        longrepr=HeadlinedRepr(text, f"fails the session: {why}"), when="teardown",
    )
    tr.stats.setdefault("error", []).append(report)


def suppression_key(cls: str) -> str:
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


def empty_summary() -> Any:
    from lockcheck.report import Summary

    return Summary()


def headline(finding: Finding, context: Optional[str]) -> str:
    classes = " -> ".join(finding.cycle) if finding.cycle else (
        f"{finding.held} -> {finding.lock}" if finding.held else finding.lock)
    where = f" in {context}" if context else ""
    return f"{finding.kind}: {classes}{where} at {finding.site or finding.location} ({finding.task})"


def summary_line(headlines: list[str], events: int, tasks: int, graph: DepGraph, suppressed: int,
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


def write_stale(tr: Any, rules: list) -> None:
    """The suppressions that accepted no finding in the whole session: stale, to remove (as
    `lockcheck check` lists its own)."""
    if not rules:
        return
    tr.write_line(f"lockcheck: {_count(len(rules), 'suppression')} matched no finding (stale: remove "
                  f"{'them' if len(rules) > 1 else 'it'}):")
    for rule in rules:
        tr.write_line(f"  {rule.text()}  ({rule.origin})")


class ReportedOnce:
    """A `threading.excepthook` in front of pytest's: a `DeadlockError` that ends a thread is a
    finding lockcheck already filed, and its test fails with the report; pytest's
    `PytestUnhandledThreadExceptionWarning` would print the same report a second time.  Such
    an exception gets one line here; any other goes on to the hook it wraps."""

    def __init__(self, previous: Any) -> None:
        self.previous = previous

    def __call__(self, args: Any) -> None:
        exc = args.exc_value
        if type(exc).__name__ == "DeadlockError" and getattr(exc, "finding", None) is not None:
            thread = getattr(args.thread, "name", "a thread")
            sys.stderr.write(f"lockcheck: DeadlockError ended thread {thread} "
                             f"(the finding is reported once, with its test)\n")
            return
        self.previous(args)

    @classmethod
    def install(cls) -> None:
        if not isinstance(threading.excepthook, cls):
            threading.excepthook = cls(threading.excepthook)

    @classmethod
    def uninstall(cls) -> None:
        hook = threading.excepthook
        if isinstance(hook, cls):
            threading.excepthook = hook.previous
