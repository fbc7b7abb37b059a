"""One `lockcheck check` run: inputs -> checker -> renderer, with the exit-status rules.

Kept apart from `cli` (which only parses arguments) so the pytest plugin
and tests can run a whole check without a command line.
"""

from __future__ import annotations

import os
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional, TextIO

from lockcheck.util.version import __version__
from lockcheck.lockdep.checker import Checker, CheckerOptions
from lockcheck.errors import LockcheckError, TraceError, UsageError
from lockcheck.util.escape import visible
from lockcheck.events import Event
from lockcheck.lockdep.findings import Finding
from lockcheck.lockdep.graph import DepGraph
from lockcheck.readers.source import STDIN, STDIN_NAME
from lockcheck.kernel.boot import DIRECTORY_HOOKS
from lockcheck.store.graphview import GraphView
from lockcheck.util.wording import count

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


@dataclass
class SessionOptions:
    input_format: str = "auto"
    output_format: str = "text"
    first: bool = False
    quiet: bool = False
    strict_start: bool = False
    #: the traces come from a PREEMPT_RT kernel (`--preempt-rt`; a `.lt` header can say so per file)
    preempt_rt: bool = False
    baselines: list[str] = field(default_factory=list)
    save_graph: Optional[str] = None
    suppress: Optional[str] = None
    order: Optional[str] = None
    #: /proc/lockdep and /proc/lockdep_chains of the traced boot (files or directories): the
    #: annotations the capture could not carry (lockcheck.kernel.annotations)
    lockdep_state: list[str] = field(default_factory=list)
    #: an annotation file (grammars/annotations.lark): nest / subclass / recursive-read / no-check rules
    annotations: Optional[str] = None
    #: apply lockcheck's built-in rules for kernel captures (lockcheck/kernel/kernel.annotations)
    builtin_annotations: bool = True
    progress: bool = True
    #: read `[tool.lockcheck]` of the nearest pyproject.toml
    use_pyproject: bool = True
    #: `--jobs N`: check in N processes (`lockcheck.jobs`); the findings are those of one
    jobs: int = 1
    #: `--dask ADDRESS`: the same split, on the Dask cluster whose scheduler is at ADDRESS
    dask: Optional[str] = None
    #: `--dask-timeout SECONDS`: how long the scheduler may take to answer (None: `jobs.cluster.DASK_TIMEOUT`)
    dask_timeout: Optional[float] = None
    #: `--max-per-group N`: a text report prints up to N circular findings of one strongly connected
    #: set in full, more as one block (None: `[tool.lockcheck] max-per-group`, else `text_groups.MAX_PER_GROUP`)
    max_per_group: Optional[int] = None


class CheckSession:
    """Runs one check over some traces and renders the result."""

    def __init__(self, options: SessionOptions, stderr: TextIO = sys.stderr) -> None:
        self.options = options
        self.stderr = stderr
        self.errors: list[LockcheckError] = []
        self.config = None
        self.replay: Any = None
        self.context = None
        self.annotator = None
        self.dump_notes: list[str] = []
        self.progress_line = None
        #: the running checker's statistics (what the progress line counts)
        self.checker_stats = None
        self.reports = None
        #: traces read in a format without irq context (perf script)
        self.no_irq_files: list[str] = []
        #: why a `--jobs`/`--dask` run was done in one process after all (None: it was split)
        self.parallel_fallback: Optional[str] = None
        #: why the split's summaries could not serve (`lockcheck.jobs.Unsure`: the check was then done in one
        #: process, or on a cluster replayed exactly), or None
        self.parallel_unsure: Optional[str] = None
        #: `run`'s report writer, as `(format, out)` until `_check` opens it; the writer itself once
        #: open: the findings go to it as they are found (`lockcheck.commands.streaming`)
        self._stream_to: Optional[tuple[str, TextIO]] = None
        self.writer = None
        #: findings suppressed on their way to `writer`
        self.streamed_suppressed = 0

    def run(self, paths: list[str], out: TextIO) -> int:
        from lockcheck.report import RENDERERS, Summary

        renderer = RENDERERS.get(self.options.output_format)
        if renderer is None:
            raise UsageError(f"unknown --format {self.options.output_format!r} (choose from {', '.join(RENDERERS)})")
        self._stream_to = (self.options.output_format, out) if not self.options.save_graph else None
        checker, findings, suppressed = self.check(paths)
        writer = self.writer if self.writer is not None else self._open_writer(self.options.output_format, out)
        for finding in findings:  # what was not streamed (all of it, in a run that was not)
            writer.add(finding)
        summary = Summary(
            events=checker.stats.events,
            tasks=checker.task_count,
            classes=checker.graph.n_classes,
            dependencies=checker.graph.n_dependencies,
            files=list(paths),
            version=__version__,
            notes=self._notes(checker),
            suppressed=len(suppressed) + self.streamed_suppressed,
            errors=[err.format() for err in self.errors],
            annotations=self.annotator.source_counts() if self.annotator is not None else {},
        )
        if self.options.quiet:
            summary.notes = []
            summary.quiet = True
        writer.close(summary)
        if self.options.save_graph:
            from lockcheck.store.graphfile import save_graph

            save_graph(checker.graph, self.options.save_graph, findings)
        return self._finish(writer.count)

    def _open_writer(self, fmt: str, out: TextIO):
        """The report writer of `--format fmt` (`lockcheck.report.stream`)."""
        from lockcheck.report.stream import open_writer
        from lockcheck.report.text_groups import MAX_PER_GROUP

        limit = self.options.max_per_group
        if limit is None:
            limit = self.config.max_per_group if self.config is not None else None
        return open_writer(fmt, out, MAX_PER_GROUP if limit is None else limit)

    def _emit(self, finding: Finding) -> None:
        """A finding on its way to the open writer, unless a suppression accepts it."""
        if self.config.suppression_for(finding) is None:
            self.replay.label(finding)
            self.writer.add(finding)
        else:
            self.streamed_suppressed += 1

    def write_graph(self, paths: list[str], output: str, fmt: Optional[str] = None,
                    stdout: Optional[TextIO] = None, view: Optional[GraphView] = None) -> int:
        """`lockcheck graph`: check the traces, write the merged graph, one summary line on stderr.

        Exit 0 once the graph is written, findings or not: reporting them is
        `check`'s job, and a CI step that caches the graph must not fail on
        them.  Exit 2 (and no graph written) when an input could not be read.
        `view` (`--cycles-only`, `--focus`) keeps only part of the graph, so a
        boot's thousands of classes can still be drawn.
        """
        from lockcheck.store.graphfile import format_of, save_graph
        from lockcheck.store.graphview import apply_view

        format_of(output, fmt)  # a bad extension is a usage error before any reading
        checker, findings, _ = self.check(paths)
        graph = checker.graph
        if not self.errors:
            graph, kept = apply_view(checker.graph, findings, view)
            save_graph(graph, output, kept, fmt, stdout)
        if self.errors:  # nothing was written: the line must not read as if it had been
            print(visible(f"lockcheck: {output}: not written: {count(len(self.errors), 'input')} could not be read"),
                  file=self.stderr)
        elif not self.options.quiet:
            line = (f"lockcheck: {visible(output)}: {count(graph.n_classes, 'lock class', 'lock classes')}, "
                    f"{count(graph.n_dependencies, 'dependency', 'dependencies')}")
            if graph is not checker.graph:
                line += f" (of {checker.graph.n_classes} and {checker.graph.n_dependencies})"
            if findings:
                line += f", {count(len(findings), 'finding')} (`lockcheck check` reports them)"
            print(line, file=self.stderr)
        status = self._finish(findings)
        return EXIT_ERROR if status == EXIT_ERROR else EXIT_CLEAN

    def check(self, paths: list[str]) -> tuple[Checker, list[Finding], list[Finding]]:
        """Read and check the traces: the checker, the findings kept, the findings suppressed.

        With `jobs` > 1 or `dask`, the traces are checked split (`lockcheck.jobs`);
        inputs the split cannot follow are checked again in this process, from
        the start, so the result never depends on the split.
        """
        if self.options.jobs > 1 or self.options.dask:
            from lockcheck import jobs

            try:
                try:
                    return self._check(paths, split=True, summary=True)
                except jobs.Unsure as why:  # a finding, or one the summaries cannot rule out
                    self.parallel_unsure = str(why)
                    self._reset()
                if not (self.options.dask or jobs.REPLAY_LOCALLY):
                    raise jobs.Fallback(f"{self.parallel_unsure} (an exact replay would cost more than one process)")
                return self._check(paths, split=True)
            except jobs.Fallback as why:
                self.parallel_fallback = str(why)
                self._reset()
        return self._check(paths, split=False)

    def _reset(self) -> None:
        """Forget what a check that is done again reported on the way."""
        self.errors.clear()
        self.dump_notes.clear()
        self.writer = None
        self.streamed_suppressed = 0
        self.no_irq_files.clear()
        self.progress_line = None

    def _check(self, paths: list[str], split: bool, summary: bool = False
               ) -> tuple[Checker, list[Finding], list[Finding]]:
        """`check`, in this process or (`split`) in several (`summary`: merging the parts' summaries).

        Order of work: `[tool.lockcheck]` and `--suppress` are read; baselines
        are merged; a declared order seeds the graph; lock names are aliased
        before the checker sees an event; suppressions filter what it found.
        """
        from lockcheck.readers import ReadContext, read_all
        from lockcheck.report.suppress import load_config

        self.config = load_config(self.options.suppress, use_pyproject=self.options.use_pyproject)
        from lockcheck.commands.plugin_replay import Replay

        self.replay = Replay(paths)  # a session the pytest plugin recorded: its rules and test ids
        self.replay.install(self.config)
        graph, baseline_findings, reported = self._baseline_graph()
        options = CheckerOptions(first=self.options.first, strict_start=self.options.strict_start,
                                 preempt_rt=self.options.preempt_rt)
        order_path = self.options.order or self.config.order
        if order_path:
            from lockcheck.lockdep.order import OrderChecker, load_order

            order = load_order(order_path)
            graph = graph if graph is not None else DepGraph()
            order.seed(graph)
            checker: Checker = OrderChecker(order, graph, options)
        else:
            checker = Checker(graph, options)
        checker.reported |= reported  # a cycle the baselines closed is not reported again by a trace
        checker.keep_findings = False  # the session keeps (or streams) what `run` yields: no second list
        self.context = ReadContext(on_open=lambda name, module: self._opened(checker, name, module),
                                   parallel=True, errors=self.errors)
        findings: list[Finding] = list(baseline_findings)
        # option files are read before any input: a bad one is the only line printed
        annotation_options = self._annotation_options()
        annotator = self.annotator = annotation_options.annotators()
        from lockcheck.kernel.log_findings import ReportCollector

        # kernel logs send their lockdep reports here, in reading order (lockcheck.kernel.log_findings)
        self.context.reports = self.reports = ReportCollector(checker, findings)
        # a dump on standard input shows itself only once read: merged where it comes
        self.context.on_dump = lambda name, lines: findings.extend(self._stream_dump(checker, name, lines))
        try:
            traces, dumps = self._split_dumps(paths)
            if split and not (traces and type(checker) is Checker and not options.first and not checker.class_props
                              and not self.replay.whole):
                from lockcheck.jobs import Fallback

                # --first stops at the first finding: one process reads no further than that; the
                # wait and lock types of a baseline's classes are checked at every acquisition,
                # which a part that does not know them cannot leave to the merge (lockdep/waits.py)
                raise Fallback("no traces, a declared order, a baseline with wait types, --first, or forked children")
            annotator.add_boots(traces, annotation_options)
            if self._stream_to is not None and not split and not options.first and not dumps and not self.replay.whole:
                from lockcheck.commands.streaming import plain_traces

                if plain_traces(traces, self.options.input_format, annotator):
                    self.writer = self._open_writer(*self._stream_to)
                    for finding in findings:
                        self._emit(finding)
                    findings.clear()
            if dumps:
                findings.extend(self._check_dumps(checker, dumps))
            if traces:
                if split:
                    findings.extend(self._check_split(checker, traces, summary))
                else:
                    self.context.transform = annotator.transform
                    self.context.fast = self._fast_path(checker)
                    self.checker_stats = checker.stats
                    events = self.config.apply_aliases(read_all(traces, self.options.input_format, self.context))
                    emit = self._emit if self.writer is not None else findings.append
                    initial = self.replay.snapshot(checker)  # a forked child begins from its parent's state
                    for finding in checker.run(self._progress(events, traces)):
                        if self.replay.own(finding):
                            emit(finding)
                    for finding in self.replay.after(initial, self.config.apply_aliases, reported):
                        emit(finding)
                annotator.mark_uncertain(findings)
                findings[:] = annotator.fold_kernel_reports(findings)
        except TraceError as err:
            self.errors.append(err)
        if self.progress_line is not None:
            self.progress_line.clear()
        self.replay.in_trace_order(findings)  # what the replay added goes where it was made
        if options.first:
            del findings[1:]
        if (checker.stats.events == 0 and not self.errors and not self.dump_notes
                and not self.reports.stats.files):
            names = ", ".join(STDIN_NAME if path == STDIN else path for path in paths)
            print(visible(f"lockcheck: {names}: empty trace (no events)"), file=self.stderr)
        kept, suppressed = self.config.filter(findings)
        for finding in kept:
            self.replay.label(finding)
        return checker, kept, suppressed

    def _check_split(self, checker: Checker, traces: list, summary: bool = False) -> list[Finding]:
        """The traces checked by workers (`lockcheck.jobs`), merged into `checker` in trace order:
        their summaries (`summary`, none found: raises `jobs.Unsure` otherwise) or their candidates."""
        from lockcheck import jobs
        from lockcheck.readers import inputs

        paths: list[str] = []
        sizes: list[int] = []
        for item in traces:
            if item.kind in (inputs.SKIP, inputs.DUMP, inputs.LOCK_STAT):
                self.context.skipped.append(item)
            elif item.kind != inputs.TRACE or item.path == STDIN:
                raise jobs.Fallback(f"{item.path}: standard input or an unreadable input")
            else:
                paths.append(item.path)
                try:
                    sizes.append(os.path.getsize(item.path))
                except OSError:
                    sizes.append(0)
        address = self.options.dask
        workers = self.options.jobs
        if address:
            workers = max(workers, jobs.dask_workers(address, self.options.dask_timeout))
        groups = jobs.plan(paths, sizes, workers)
        opened = lambda name, module: self._opened(checker, name, module)  # noqa: E731
        counts: dict = {}
        chains = None
        if address or len(groups) == 1:
            if address:
                results = jobs.run_dask(self.options, groups, address, summary=summary)
            else:
                results = jobs.run_pool(self.options, groups, summary=summary)
            for result in results:
                if result.fallback is not None:
                    raise jobs.Fallback(result.fallback)
            for result in results:
                if result.unsure is not None:
                    raise jobs.Unsure(result.unsure)
            if summary:
                chains = jobs.merge_summaries(results, checker, opened)
            else:
                found = list(jobs.replay(results, checker, opened, counts))
        else:
            # the merge takes what the workers send while they still read (its work overlaps theirs)
            streams = jobs.stream_pool(self.options, groups, summary=summary)
            try:
                if summary:
                    chains = jobs.merge_summaries(streams, checker, opened)
                else:
                    found = list(jobs.replay(streams, checker, opened, counts))
            finally:
                jobs.stop_streams(streams)
            results = [stream.result or jobs.MapResult() for stream in streams]
        if summary:
            found = []
            counts["tasks"] = sum(result.tasks for result in results)
        jobs.finish(results, checker, self.context, counts.get("tasks", 0), chains)
        return found

    def _fast_path(self, checker: Checker):
        """What chooses the fast path for a file (`ReadContext.fast`), or None when it may not run.

        The fast path applies lines to the checker without events, so it runs
        only where nothing else would look at them: no aliases to rename
        classes, no annotations for the file's format, a checker that sees a
        cached chain only as a hit (not `OrderChecker`).  `LOCKCHECK_FASTPATH=0`
        turns it off (the plain pipeline, for comparing).
        """
        from lockcheck.engine import fast_lt as hotpath

        if (os.environ.get("LOCKCHECK_FASTPATH") == "0" or not hotpath.applies(checker) or self.config.aliases
                or checker.options.preempt_rt):  # (RT: every softirq line is the checker's, `lockdep.irq`)
            return None
        annotator = self.annotator

        def tick(file: str) -> None:
            if self.progress_line is not None:
                self.progress_line.tick(file)

        def choose(module, rules_module):
            from lockcheck.engine import fast_capture as capturepath

            probe: Iterator[Event] = iter(())
            if annotator is not None and annotator.transform(rules_module, probe) is not probe:
                # annotated (a capture): the capture fast path keeps the annotator's state itself
                return capturepath.parser(module, rules_module, checker, annotator, self.context.stats, tick,
                                          annotated=True, context=self.context)
            if getattr(module, "NAME", None) == "jsonl" and rules_module is module:
                import functools

                from lockcheck.engine import fast_jsonl

                if fast_jsonl.available():  # JSON Lines as `.lt` lines, through the `.lt` engine
                    return functools.partial(fast_jsonl.jsonl_lt_events, checker, tick, context=self.context)
            return (hotpath.parser(module, checker, tick)
                    or capturepath.parser(module, rules_module, checker, annotator, self.context.stats, tick,
                                          context=self.context))

        return choose

    def _opened(self, checker: Checker, name: str, module) -> None:
        """A trace file begins (its format is known): a run of its own, where no task holds
        anything yet; a capture started mid-flight, so releases of locks taken before it
        began are expected (unless --strict-start); a format without irq context sets no
        irq usage."""
        from lockcheck.readers import run_rules

        rules = run_rules(module)
        # a capture's idle tasks are forgotten (in place: the capture fast path's views of tasks
        # keep the same RecentLocks, and it stamps them with the checker's exact event count)
        checker.open_trace(**rules, forget_idle=rules["capture"])
        if not rules["irq_state"]:
            self.no_irq_files.append(name)
        if self.annotator is not None:
            self.annotator.open_trace(name, module)

    def _annotation_options(self):
        """What annotates captures: `--lockdep-state`, `--annotations`, the built-in rules; boot
        directories among the inputs bring their own state (lockcheck.kernel.boot)."""
        from lockcheck.kernel.per_boot import AnnotationOptions

        options = self.options
        return AnnotationOptions(options.lockdep_state, options.annotations, options.builtin_annotations)

    def _split_dumps(self, paths: list[str]) -> tuple[list, list[str]]:
        """(traces as `inputs.Input`s, /proc/lockdep dumps) among the inputs, directories
        expanded; `--lockdep-state` alone is a dump input."""
        from lockcheck.readers import inputs

        if not paths:
            if not self.options.lockdep_state:
                raise UsageError("lockcheck check: give a trace, a /proc/lockdep dump or --lockdep-state")
            return [], list(self.options.lockdep_state)
        expanded = inputs.expand(list(paths), DIRECTORY_HOOKS)
        return ([item for item in expanded if item.kind != inputs.DUMP],
                [item.path for item in expanded if item.kind == inputs.DUMP])

    def _check_dumps(self, checker: Checker, dumps: list[str]) -> list[Finding]:
        """Merge /proc/lockdep dumps into the graph, one boot after the other, reporting the cycles they close.

        A directory holding one /proc/lockdep and one /proc/lockdep_chains
        dump holds one boot: the two are read together.
        """
        from lockcheck.kernel import state as kstate

        found: list[Finding] = []
        for paths in kstate.group_boots(dumps):
            found.extend(self._merge_state(checker, kstate.load(*paths)))
        return found

    def _stream_dump(self, checker: Checker, name: str, lines) -> list[Finding]:
        """A dump read from an open stream (standard input) merged as `_check_dumps` merges files."""
        from lockcheck.kernel import state as kstate

        return self._merge_state(checker, kstate.read_into(kstate.LockdepState(), name, lines))

    def _merge_state(self, checker: Checker, state) -> list[Finding]:
        """One boot's dumps into the graph (a note says how much); the cycles they close."""
        from lockcheck.kernel import state as kstate

        unchecked = self.annotator.rules.unchecked if self.annotator is not None else None
        found = kstate.to_graph(state, checker=checker, unchecked=unchecked)
        n_classes = len(state.class_names() | {name for chain in state.chains for name in chain.names})
        # distinct pairs: many chains of /proc/lockdep_chains give the same dependency
        n_edges = len({(dep.before_name, dep.after_name) for dep in kstate.dependencies(state, unchecked)})
        if n_classes or n_edges:
            self.dump_notes.append(f"merged {count(n_classes, 'lock class', 'lock classes')} and "
                                   f"{count(n_edges, 'dependency', 'dependencies')} of {', '.join(state.files)}")
        return found

    def _finish(self, findings: "list[Finding] | int") -> int:
        """The exit status; `findings` may be how many there were."""
        for err in self.errors:
            print(visible(err.format()), file=self.stderr)
        if self.errors:
            return EXIT_ERROR
        return EXIT_FINDINGS if findings else EXIT_CLEAN

    def _baseline_graph(self) -> tuple[Optional[DepGraph], list[Finding], set]:
        """The saved graphs merged, each dependency validated as it is added (`lockcheck.store.baseline`):
        the graph, the cycles their union closes, and the keys of those findings."""
        if not self.options.baselines:
            return None, [], set()
        from lockcheck.store.baseline import check_wait_contexts, merge_checked
        from lockcheck.store.graphfile import load_graph

        merger = Checker(DepGraph())
        found: list[Finding] = []
        for path in self.options.baselines:
            found.extend(merge_checked(merger, load_graph(path), origin=path))
        found.extend(check_wait_contexts(merger))  # wait types one graph says, dependencies another has
        return merger.graph, found, merger.reported

    def _notes(self, checker: Checker) -> list[str]:
        notes = list(self.context.stats.notes()) if self.context is not None else []
        if self.context is not None:
            notes += self.context.notes()
        if self.no_irq_files:
            notes.append(f"{', '.join(self.no_irq_files)}: perf script output carries no irq context, so no "
                         "irq usage was inferred from it")
        notes += checker.stats.notes
        notes += self.dump_notes
        if self.reports is not None:
            notes += self.reports.notes()
        if self.annotator is not None:
            notes += self.annotator.notes()
        if self.config is not None:
            notes.extend(self.config.stale_notes())
        if checker.stats.unknown_releases:
            notes.append(f"{count(checker.stats.unknown_releases, 'release')} of locks never seen acquired "
                         "(the capture started while they were held; --strict-start reports them)")
        if checker.stats.lost_resets:
            notes.append(f"{count(checker.stats.lost_resets, 'task stack')} reset after lost events")
        return notes

    # -- progress on a terminal -------------------------------------------
    def _progress(self, events: Iterable[Event], traces: list) -> Iterable[Event]:
        """`events`, showing a progress line on a terminal (and adding no layer otherwise)."""
        from lockcheck.util.progress import ProgressLine, is_terminal

        if not (self.options.progress and not self.options.quiet and is_terminal(self.stderr)):
            return events
        context = self.context
        self.progress_line = ProgressLine(self.stderr, _input_bytes(traces), context.bytes_read, name=visible)
        stats = self.checker_stats
        return self.progress_line.wrap(events, count=(lambda: stats.events) if stats is not None else None)


def _input_bytes(traces: list) -> Optional[int]:
    """The size of the traces to read, in bytes on disk; None when one is standard input."""
    from lockcheck.readers import inputs

    total = 0
    for item in traces:
        if item.kind != inputs.TRACE:
            continue
        if item.path == "-":
            return None
        try:
            total += os.path.getsize(item.path)
        except OSError:
            pass
    return total
