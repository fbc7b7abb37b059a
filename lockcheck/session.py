"""One `lockcheck check` run: inputs -> checker -> renderer, with the exit-status rules.

Kept apart from `cli` (which only parses arguments) so the pytest plugin
and tests can run a whole check without a command line.
"""

from __future__ import annotations

import sys
import time
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional, TextIO

from lockcheck import __version__
from lockcheck.checker import Checker, CheckerOptions
from lockcheck.errors import LockcheckError, TraceError, UsageError
from lockcheck.events import Event
from lockcheck.findings import Finding
from lockcheck.graph import DepGraph

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


@dataclass
class SessionOptions:
    input_format: str = "auto"
    output_format: str = "text"
    first: bool = False
    quiet: bool = False
    strict_start: bool = False
    baselines: list[str] = field(default_factory=list)
    save_graph: Optional[str] = None
    suppress: Optional[str] = None
    order: Optional[str] = None
    progress: bool = True


class CheckSession:
    """Runs one check over some traces and renders the result."""

    def __init__(self, options: SessionOptions, stderr: TextIO = sys.stderr) -> None:
        self.options = options
        self.stderr = stderr
        self.errors: list[LockcheckError] = []

    def run(self, paths: list[str], out: TextIO) -> int:
        from lockcheck.report import RENDERERS, Summary
        from lockcheck.readers import read_all

        renderer = RENDERERS.get(self.options.output_format)
        if renderer is None:
            raise UsageError(f"unknown --format {self.options.output_format!r} (choose from {', '.join(RENDERERS)})")
        graph = self._baseline_graph()
        checker = Checker(graph, CheckerOptions(lenient_start=not self.options.strict_start and self._is_capture(),
                                                first=self.options.first))
        findings: list[Finding] = []
        try:
            events = self._progress(read_all(paths, self.options.input_format))
            findings.extend(checker.run(events))
        except TraceError as err:
            self.errors.append(err)
        self._clear_progress()
        if checker.stats.events == 0 and not self.errors:
            print(f"lockcheck: {', '.join(paths)}: empty trace (no events)", file=self.stderr)
        summary = Summary(
            events=checker.stats.events,
            tasks=len(checker.tasks),
            classes=checker.graph.n_classes,
            dependencies=checker.graph.n_dependencies,
            files=list(paths),
            version=__version__,
            notes=self._notes(checker),
        )
        if self.options.quiet:
            summary.notes = []
        renderer.render(findings, summary, out)
        if self.options.save_graph:
            from lockcheck.graphio import save_graph

            save_graph(checker.graph, self.options.save_graph)
        for err in self.errors:
            print(err.format(), file=self.stderr)
        if self.errors:
            return EXIT_ERROR
        return EXIT_FINDINGS if findings else EXIT_CLEAN

    def _is_capture(self) -> bool:
        """Captures (ftrace, perf) start mid-flight; hand-written or recorded traces do not."""
        return self.options.input_format in ("ftrace", "perf")

    def _baseline_graph(self) -> Optional[DepGraph]:
        if not self.options.baselines:
            return None
        from lockcheck.graphio import load_graph

        graph = DepGraph()
        for path in self.options.baselines:
            graph.merge(load_graph(path), origin=path)
        return graph

    def _notes(self, checker: Checker) -> list[str]:
        notes = list(checker.stats.notes)
        if checker.stats.unknown_releases:
            notes.append(f"{checker.stats.unknown_releases} releases of locks never seen acquired "
                         "(the capture started while they were held; --strict-start reports them)")
        if checker.stats.lost_resets:
            notes.append(f"{checker.stats.lost_resets} task stacks reset after lost events")
        return notes

    # -- progress on a terminal -------------------------------------------
    def _progress(self, events: Iterable[Event]) -> Iterator[Event]:
        if not (self.options.progress and not self.options.quiet and _isatty(self.stderr)):
            yield from events
            return
        start = last = time.monotonic()
        count = 0
        self._shown = False
        for ev in events:
            count += 1
            if not count & 0xFFFF:
                now = time.monotonic()
                if now - last >= 0.5:
                    last = now
                    rate = count / max(now - start, 1e-9)
                    self.stderr.write(f"\rlockcheck: {count:,} events ({rate:,.0f}/s) {ev.file}:{ev.line}  ")
                    self.stderr.flush()
                    self._shown = True
            yield ev

    def _clear_progress(self) -> None:
        if getattr(self, "_shown", False):
            self.stderr.write("\r\033[K")
            self.stderr.flush()


def _isatty(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False

