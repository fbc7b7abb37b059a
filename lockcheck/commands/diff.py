"""`lockcheck diff BASE NEW`: what NEW adds to BASE -- the command a CI job runs on a pull request.

BASE and NEW are each a trace, a directory of traces, or a saved graph
(`graph -o X.json` / `check --save-graph X.json`).  The diff reports

- the dependencies NEW has that BASE does not (and those whose read/write
  type NEW widens), and those BASE has that NEW no longer shows;
- the findings NEW adds: problems of NEW alone, and problems that only
  exist once NEW's dependencies are joined with BASE's (a cycle whose
  `A -> B` was seen on main last week and whose `B -> A` the pull request
  adds), minus every problem BASE already had.

The join replays NEW's events through a checker seeded with BASE's graph,
so the checker's own rules (read recursion, nest locks, irq states) apply;
a saved graph is replayed as one acquire-acquire pair per dependency, at
the place the dependency was first seen (`replay_events`).  NEW is read
once: each event feeds the NEW-alone and the joined checker.

>>> from lockcheck.lockdep.graph import DepGraph, DEP_EN
>>> base = DepGraph(); _ = base.add_dependency("A", "B", DEP_EN, Evidence("main.lt", 3, "T1"))
>>> new = DepGraph(); _ = new.add_dependency("B", "A", DEP_EN, Evidence("pr.lt", 7, "T2"))
>>> result = diff_graphs(Side("main.json", base), Side("pr.json", new))
>>> [(f.kind, f.cycle) for f in result.findings]
[('circular-dependency', ['A', 'B'])]
>>> result.cross_run(result.findings[0])
True
"""

from __future__ import annotations

import itertools
import json
from dataclasses import dataclass, field
from typing import Any, Iterable, Optional, TextIO

from lockcheck.util.version import __version__
from lockcheck.lockdep.checker import Checker, CheckerOptions
from lockcheck.util.escape import visible
from lockcheck.events import Event
from lockcheck.lockdep.findings import Evidence, Finding
from lockcheck.lockdep.graph import DEP_NAMES, DepGraph, dep_text
from lockcheck.store.graphfile import (class_props_json, is_graph_file, load_graph_with_findings, record_finding,
                                      record_key)
from lockcheck.kernel.boot import DIRECTORY_HOOKS
from lockcheck.store.replay import replay_events
from lockcheck.util.wording import count, wrap_note

@dataclass
class Side:
    """One side of a diff: its graph, its own findings, and how to replay it.

    `events` is None for a saved graph (its dependencies are replayed) or an
    iterable of trace events (read once).
    """

    name: str
    graph: DepGraph
    findings: list[Finding] = field(default_factory=list)
    known: set = field(default_factory=set)
    events: Optional[Iterable[Event]] = None
    events_read: int = 0
    checked: bool = False
    #: the readers' context of a trace side: its checkers follow its file boundaries
    context: Optional[Any] = None
    #: a trace side's annotations (lockcheck.kernel.annotations.Annotator), applied as in `check`
    annotator: Optional[Any] = None
    #: the kernel reports of a side's kernel logs, fanned out to its checkers (`feeds`)
    reports: Optional["_ReportFan"] = None
    #: cycles a side's /proc/lockdep dumps close among themselves (their graph holds none of them)
    dump_findings: list[Finding] = field(default_factory=list)
    #: a trace side's inputs (`inputs.Input`s), for `--jobs`; None when it has dumps too
    inputs: Optional[list] = None
    #: `--jobs`: what the workers sent back for this side (`lockcheck.jobs.MapResult`s), or None
    split: Optional[list] = None
    #: the split side's totals and notes were taken (by its first merge)
    split_merged: bool = False

    def feeds(self, *checkers: Checker) -> None:
        """Each trace file is a run of its own for `checkers`, and a capture starts mid-flight
        (as in `lockcheck check`); each kernel log's reports reach every checker."""
        if self.context is None:
            return
        self.context.reports = self.reports = _ReportFan(checkers)

        from lockcheck.readers import run_rules

        def opened(name: str, module: Any) -> None:
            rules = run_rules(module)
            for checker in checkers:
                # as `check` does: a capture's idle tasks forget their recent locks
                checker.open_trace(**rules, forget_idle=rules["capture"])
            if self.annotator is not None:
                self.annotator.open_trace(name, module)

        self.context.on_open = opened


class _ReportFan:
    """A kernel log's reports into each checker of a side (`logreports.ReportCollector` each):
    their findings, grouped, and their dependencies, joined with whatever that checker holds."""

    def __init__(self, checkers: tuple) -> None:
        from lockcheck.kernel.log_findings import ReportCollector

        self.collectors = [(checker, ReportCollector(checker)) for checker in checkers]

    def report(self, splat) -> None:
        for _, collector in self.collectors:
            collector.report(splat)

    def log_done(self, file: str, stats) -> None:
        for _, collector in self.collectors:
            collector.log_done(file, stats)

    def found(self, checker: Checker) -> list[Finding]:
        """The findings the reports gave `checker`: the reports' own, and cycles they closed there."""
        return next(collector.found for owner, collector in self.collectors if owner is checker)


def reports_of(side: Side, checker: Checker) -> list[Finding]:
    """What a side's kernel logs reported to `checker` (nothing for a side without logs)."""
    return side.reports.found(checker) if side.reports is not None else []


def load_side(spec: str, input_format: str = "auto", aliases=None, annotations=None) -> Side:
    """A saved graph is loaded now; a trace or directory is only opened (NEW is streamed later).

    `annotations` (`lockcheck.kernel.per_boot.AnnotationOptions`) annotates a
    trace side's captures as `check` does.
    """
    if is_graph_file(spec):
        graph, records = load_graph_with_findings(spec)
        # the findings the saved run made: a cycle's closing dependency was refused, so the
        # graph alone no longer shows it -- the record does (a PR's own cycle, saved as pr.json)
        saved = [f for f in (record_finding(r, spec) for r in records) if f is not None]
        return Side(spec, graph, known={record_key(r) for r in records}, dump_findings=saved)
    from lockcheck.readers import ReadContext, inputs, read_all

    context = ReadContext(directory_hooks=DIRECTORY_HOOKS)
    annotator = None
    paths: list = inputs.expand([spec], DIRECTORY_HOOKS)
    dumps = [item.path for item in paths if item.kind == inputs.DUMP]
    paths = [item for item in paths if item.kind != inputs.DUMP]
    if annotations is not None:
        annotator = annotations.annotators()
        annotator.add_boots(paths, annotations)
        context.transform = annotator.transform
    dump_graph, dump_findings = _dump_graph(dumps, annotator)
    if dumps and not any(item.kind == inputs.TRACE for item in paths):
        # /proc/lockdep dumps alone: a graph, replayed like a saved one
        return Side(spec, dump_graph, dump_findings=dump_findings)
    events: Iterable[Event] = read_all(paths, input_format, context)
    if aliases is not None:
        events = aliases.apply_aliases(events)
    if dumps:  # dumps beside traces: their dependencies first, as `check` merges them first
        events = itertools.chain(replay_events(dump_graph), events)
    return Side(spec, DepGraph(), events=events, context=context, annotator=annotator,
                dump_findings=dump_findings, inputs=None if dumps else paths)


def _dump_graph(dumps: list[str], annotator=None) -> tuple[DepGraph, list[Finding]]:
    """The graph of /proc/lockdep and /proc/lockdep_chains dumps (one boot after the other, as
    `check` merges them) and the cycles they close among themselves."""
    from lockcheck.kernel import state as kstate

    checker = Checker(DepGraph(), CheckerOptions())
    unchecked = annotator.rules.unchecked if annotator is not None else None
    found: list[Finding] = []
    for group in kstate.group_boots(dumps):
        found.extend(kstate.to_graph(kstate.load(*group), checker=checker, unchecked=unchecked))
    return checker.graph, found


def run_side(side: Side) -> Side:
    """Check a side on its own (BASE): fill its graph and findings."""
    checker = Checker(DepGraph(), CheckerOptions())
    side.feeds(checker)
    found = _replay_split(side, checker)
    if found is None:
        if side.split is not None:  # the merge could not follow the split: read the side again
            side.split = None
            checker = Checker(DepGraph(), CheckerOptions())
            side.feeds(checker)
        source = side.events if side.events is not None else replay_events(side.graph)
        found = list(checker.run(source))
    side.findings = side.dump_findings + found + reports_of(side, checker)
    if side.annotator is not None:
        side.annotator.mark_uncertain(side.findings)
    side.events_read = checker.stats.events
    if side.events is not None:
        side.graph = checker.graph
        side.events = None
    side.known |= {f.key() for f in side.findings}
    side.checked = True
    return side


def _map_sides(sides: list[Side], options: Any, workers: int) -> None:
    """`--jobs`: the trace sides' files checked by worker processes, all sides at once (`side.split`).

    A side the split cannot serve (standard input, an unreadable input,
    dumps, captures, kernel logs: see `lockcheck.jobs`) is read in one pass
    as before.
    """
    import os

    from lockcheck import jobs
    from lockcheck.readers import inputs

    planned = []
    for side in sides:
        if side.inputs is None or side.context is None:
            continue
        items = side.inputs
        if any(item.kind not in (inputs.TRACE, inputs.SKIP, inputs.LOCK_STAT) or item.path == "-" for item in items):
            continue
        paths = [item.path for item in items if item.kind == inputs.TRACE]
        if not paths:
            continue
        sizes = []
        for path in paths:
            try:
                sizes.append(os.path.getsize(path))
            except OSError:
                sizes.append(0)
        planned.append((side, jobs.plan(paths, sizes, workers)))
    if not planned:
        return
    groups = [group for _, side_groups in planned for group in side_groups]
    results = jobs.run_pool(options, groups, workers)
    for side, side_groups in planned:
        mine, results = results[:len(side_groups)], results[len(side_groups):]
        if all(result.fallback is None for result in mine):
            side.split = mine


def _replay_split(side: Side, checker: Checker) -> Optional[list[Finding]]:
    """A split side's events fed to `checker` in trace order (`lockcheck.jobs.replay`); its
    findings, or None: the side is not split, or the merge could not follow the split."""
    if side.split is None:
        return None
    from lockcheck import jobs
    from lockcheck.readers import inputs, run_rules

    def opened(name: str, module: Any) -> None:
        checker.open_trace(**run_rules(module))
        if side.annotator is not None:
            side.annotator.open_trace(name, module)

    counts: dict = {}
    try:
        found = list(jobs.replay(side.split, checker, opened, counts))
    except jobs.Fallback:
        return None
    first = not side.split_merged
    side.split_merged = True
    jobs.finish(side.split, checker, side.context if first else None, counts.get("tasks", 0))
    if first:
        side.context.skipped.extend(item for item in side.inputs if item.kind != inputs.TRACE)
    return found


@dataclass
class DiffResult:
    """What NEW adds to BASE; see the module docstring."""

    base: Side
    new: Side
    added: list[tuple[str, str, dict]] = field(default_factory=list)
    widened: list[tuple[str, str, int, dict]] = field(default_factory=list)
    removed: list[tuple[str, str, dict]] = field(default_factory=list)
    findings: list[Finding] = field(default_factory=list)
    suppressed: list[Finding] = field(default_factory=list)
    alone_keys: set = field(default_factory=set)
    notes: list[str] = field(default_factory=list)
    #: classes whose wait or lock type BASE and NEW both know and give differently: (class, base, new)
    retyped: list[tuple[str, dict, dict]] = field(default_factory=list)

    def cross_run(self, finding: Finding) -> bool:
        """True when the finding only exists with BASE's dependencies joined in."""
        return finding.key() not in self.alone_keys

    def link_origin(self, evidence: Evidence) -> str:
        """`base` or `new`: which side a chain link's dependency was first seen in."""
        return "base" if evidence in self._base_evidence else "new"

    @property
    def _base_evidence(self) -> set:
        cache = getattr(self, "_base_ev_cache", None)
        if cache is None:
            cache = {d["evidence"] for _, _, d in self.base.graph.nx.edges(data=True)}
            self._base_ev_cache = cache
        return cache


def diff_graphs(base: Side, new: Side) -> DiffResult:
    """Diff two sides; BASE is checked on its own first, NEW is streamed through two checkers."""
    if not base.checked:
        run_side(base)
    joined_graph = DepGraph()
    joined_graph.merge(base.graph, origin=base.name)
    alone = Checker(DepGraph(), CheckerOptions())
    joined = Checker(joined_graph, CheckerOptions())
    new.feeds(alone, joined)
    found_alone: list[Finding] = []
    found_joined: list[Finding] = []
    is_trace = new.events is not None
    split = joined_split = _replay_split(new, alone)
    if split is not None:
        joined_split = _replay_split(new, joined)
        if joined_split is not None:
            found_alone, found_joined = split, joined_split
    if split is None or joined_split is None:
        if new.split is not None:  # the merge could not follow the split: read NEW in one pass
            new.split = None
            new.context.skipped.clear()
            joined_graph = DepGraph()
            joined_graph.merge(base.graph, origin=base.name)
            alone = Checker(DepGraph(), CheckerOptions())
            joined = Checker(joined_graph, CheckerOptions())
            new.feeds(alone, joined)
        for ev in new.events if is_trace else replay_events(new.graph):
            found_alone.extend(alone.feed(ev))
            found_joined.extend(joined.feed(ev))
    found_alone += new.dump_findings + reports_of(new, alone)
    found_joined += reports_of(new, joined)
    if is_trace:
        new.graph = alone.graph
        new.events = None
    new.checked = True
    if new.annotator is not None:
        new.annotator.mark_uncertain(found_alone + found_joined)
    new.events_read = alone.stats.events
    new.findings = found_alone
    new.known |= {f.key() for f in found_alone}
    result = DiffResult(base, new, alone_keys={f.key() for f in found_alone})
    seen: set = set()
    for finding in found_joined + found_alone:
        key = finding.key()
        if key in seen or key in base.known:
            continue
        seen.add(key)
        result.findings.append(finding)
    _compare_edges(result, base.graph, new.graph)
    _compare_classes(result, base.graph, new.graph)
    return result


def _compare_classes(result: DiffResult, base: DepGraph, new: DepGraph) -> None:
    """Classes whose `wait` or `type` changed (a `spinlock_t` made a `raw_spinlock_t`, a mutex made
    a spinlock): the same dependencies then judge differently in a wait context."""
    base_nodes = base.nx._node
    for cls, data in new.nx.nodes(data=True):
        old = base_nodes.get(cls)
        if old is None:
            continue
        before, after = class_props_json(old), class_props_json(data)
        for side, other in ((before, after), (after, before)):
            if "type" in other and "type" not in side and "wait" in side:
                side["type"] = "normal"  # a class saved with its properties and no type is a normal lock
        if any(key in before and key in after and before[key] != after[key] for key in ("wait", "type")):
            result.retyped.append((cls, before, after))


def _compare_edges(result: DiffResult, base: DepGraph, new: DepGraph) -> None:
    base_succ = base.nx._succ
    for prev, nxt, data in new.nx.edges(data=True):
        old = base_succ.get(prev, {}).get(nxt)
        if old is None:
            result.added.append((prev, nxt, data))
        elif data["dep"] & ~old["dep"]:
            result.widened.append((prev, nxt, old["dep"], data))
    new_succ = new.nx._succ
    for prev, nxt, data in base.nx.edges(data=True):
        if nxt not in new_succ.get(prev, {}):
            result.removed.append((prev, nxt, data))


def run_diff(base_spec: str, new_spec: str, input_format: str = "auto", config=None,
             annotations=None, jobs: int = 1, options=None) -> DiffResult:
    """Load both sides, diff them, apply suppressions; the result to render.

    `jobs` > 1: trace sides are checked by that many worker processes
    (`lockcheck.jobs`, with `options`, a `SessionOptions`), both sides at
    once, and merged here in trace order: the same result.
    """
    base = load_side(base_spec, input_format, config, annotations)
    new = load_side(new_spec, input_format, config, annotations)
    if jobs > 1 and options is not None:
        _map_sides([base, new], options, jobs)
    run_side(base)
    result = diff_graphs(base, new)
    for side in (base, new):
        if side.context is not None:
            result.notes.extend(side.context.notes())
    if config is not None:
        result.findings, result.suppressed = config.filter(result.findings)
        result.notes.extend(config.stale_notes())
    return result


# -- rendering -------------------------------------------------------------------------


def render_text(result: DiffResult, out: TextIO) -> None:
    """A readable table: dependencies added / widened / removed, then the findings NEW adds."""
    w = out.write
    w(f"lockcheck diff: BASE {visible(result.base.name)}  NEW {visible(result.new.name)}\n")
    _edge_table(w, f"dependencies NEW adds ({len(result.added)})", [(p, n, d["dep"], d) for p, n, d in result.added])
    if result.widened:
        _edge_table(w, f"dependencies NEW widens ({len(result.widened)})",
                    [(p, n, d["dep"] & ~old, d) for p, n, old, d in result.widened])
    _edge_table(w, f"dependencies NEW no longer shows ({len(result.removed)})",
                [(p, n, d["dep"], d) for p, n, d in result.removed])
    if result.retyped:
        w(f"\nclasses whose wait or lock type changed ({len(result.retyped)}):\n")
        rows = [("CLASS", "BASE", "NEW")]
        for cls, before, after in result.retyped:
            rows.append((cls, _props_text(before), _props_text(after)))
        _table(w, rows)
    w(f"\nfindings NEW adds ({len(result.findings)}):\n")
    if result.findings:
        rows = [("KIND", "CLASSES", "WHERE", "TASK", "NOTE")]
        for f in result.findings:
            rows.append((f.kind, _classes_text(f), f.location, f.task,
                         "only with BASE's dependencies" if result.cross_run(f) else ""))
        _table(w, rows)
        for f in result.findings:
            if not f.chain:
                continue
            w(f"\n  {f.kind} {visible(_classes_text(f))}:\n")
            for link in f.chain:
                ev = link.evidence
                site = f", {ev.at}" if ev.at else ""
                w(visible(f"    -> #{link.depth} ({link.cls}): {ev.location} ({ev.task}{site})  "
                          f"[{result.link_origin(ev)}]") + "\n")
    else:
        w("  (none)\n")
    w("\n" + summary_line(result) + "\n")
    for note in result.notes:
        w(wrap_note("lockcheck: note: ", visible(note)) + "\n")


def summary_line(result: DiffResult) -> str:
    n = len(result.findings)
    retyped = f", {count(len(result.retyped), 'class', 'classes')} retyped" if result.retyped else ""
    text = (f"lockcheck diff: {count(len(result.added), 'dependency', 'dependencies')} added, "
            f"{len(result.widened)} widened, {len(result.removed)} no longer seen{retyped}; "
            f"{count(n, 'new finding')}")
    if result.suppressed:
        text += f" ({len(result.suppressed)} suppressed)"
    return text


def _edge_table(w, title: str, rows: list[tuple[str, str, int, dict]]) -> None:
    w(f"\n{title}:\n")
    if not rows:
        w("  (none)\n")
        return
    table = [("TYPE", "FROM", "TO", "FIRST SEEN")]
    for prev, nxt, dep, data in rows:
        ev: Evidence = data["evidence"]
        seen = f"{ev.location} ({ev.task})" + (f" {ev.at}" if ev.at else "")
        table.append((dep_text(dep), prev, nxt, seen))
    _table(w, table)


def _table(w, rows: list[tuple[str, ...]]) -> None:
    rows = [tuple(visible(cell) for cell in row) for row in rows]  # names from traces: one cell, one line
    widths = [max(len(row[i]) for row in rows) for i in range(len(rows[0]))]
    for row in rows:
        w("  " + "  ".join(cell.ljust(widths[i]) for i, cell in enumerate(row)).rstrip() + "\n")


def _props_text(props: dict) -> str:
    """`wait 3:3, type percpu` for a class's saved keys."""
    return ", ".join(f"{key} {value}" for key, value in props.items()) or "-"


def _classes_text(finding: Finding) -> str:
    if finding.cycle:
        return " -> ".join(finding.cycle + finding.cycle[:1])
    return finding.lock + (f" (holding {finding.held})" if finding.held and finding.held != finding.lock else "")


def document(result: DiffResult) -> dict[str, Any]:
    """`--format json`: the diff as one JSON document (version 1)."""
    def edge(prev: str, nxt: str, data: dict, dep: Optional[int] = None) -> dict:
        doc = {"from": prev, "to": nxt,
               "dep": [name for bit, name in sorted(DEP_NAMES.items(), reverse=True) if (dep or data["dep"]) & bit],
               "evidence": data["evidence"].to_json()}
        if data.get("origin"):
            doc["origin"] = data["origin"]
        return doc

    findings = []
    for f in result.findings:
        doc = json.loads(json.dumps(f.to_json(), default=str))
        doc["only_with_base"] = result.cross_run(f)
        for link, entry in zip(f.chain, doc.get("chain", [])):
            entry["side"] = result.link_origin(link.evidence)
        findings.append(doc)
    doc: dict[str, Any] = {
        "version": 1,
        "base": result.base.name,
        "new": result.new.name,
        "dependencies": {
            "added": [edge(p, n, d) for p, n, d in result.added],
            "widened": [edge(p, n, d, d["dep"] & ~old) for p, n, old, d in result.widened],
            "removed": [edge(p, n, d) for p, n, d in result.removed],
        },
        "findings": findings,
        "stats": {
            "base_dependencies": result.base.graph.n_dependencies,
            "new_dependencies": result.new.graph.n_dependencies,
            "new_events": result.new.events_read,
        },
    }
    if result.retyped:  # only when there are: a diff of graphs without wait types reads as before
        doc["classes"] = {"retyped": [{"class": cls, "base": before, "new": after}
                                      for cls, before, after in result.retyped]}
    if result.suppressed:
        doc["suppressed"] = len(result.suppressed)
    if result.notes:
        doc["notes"] = list(result.notes)
    return doc


def render(result: DiffResult, fmt: str, out: TextIO) -> None:
    """Write the diff as `text`, `json`, or (the new findings only) any `check --format`."""
    if fmt == "text":
        render_text(result, out)
        return
    if fmt == "json":
        json.dump(document(result), out, indent=2, allow_nan=False)
        out.write("\n")
        return
    from lockcheck.report import RENDERERS, Summary

    renderer = RENDERERS.get(fmt)
    if renderer is None:
        from lockcheck.errors import UsageError

        raise UsageError(f"unknown --format {fmt!r} (choose from text, json, {', '.join(k for k in RENDERERS if k not in ('text', 'json'))})")
    summary = Summary(events=result.new.events_read, classes=result.new.graph.n_classes,
                      dependencies=result.new.graph.n_dependencies, files=[result.new.name],
                      version=__version__, notes=list(result.notes), suppressed=len(result.suppressed))
    renderer.render(result.findings, summary, out)


__all__ = ["DiffResult", "Side", "diff_graphs", "document", "load_side", "render", "replay_events", "run_diff",
           "run_side"]



def run_diff_command(base: str, new: str, fmt: str, out: TextIO, stderr: TextIO, input_format: str = "auto",
                     suppress: Optional[str] = None, use_pyproject: bool = True, annotations=None,
                     jobs: int = 1) -> int:
    """`lockcheck diff`: exit 1 when NEW adds a finding that is not suppressed, 0 otherwise."""
    from lockcheck.report.suppress import load_config

    config = load_config(suppress, use_pyproject=use_pyproject)
    if fmt not in ("text", "json"):
        from lockcheck.report import RENDERERS
        from lockcheck.errors import UsageError

        if fmt not in RENDERERS:
            raise UsageError(f"unknown --format {fmt!r} (choose from text, json, sarif, github)")
    options = None
    if jobs > 1:
        from lockcheck.commands.check import SessionOptions

        options = SessionOptions(input_format=input_format, suppress=suppress, use_pyproject=use_pyproject)
        if annotations is not None:
            options.lockdep_state = list(annotations.lockdep_state)
            options.annotations = annotations.annotations
            options.builtin_annotations = annotations.builtin
    result = run_diff(base, new, input_format, config, annotations, jobs=jobs, options=options)
    render(result, fmt, out)
    return 1 if result.findings else 0
