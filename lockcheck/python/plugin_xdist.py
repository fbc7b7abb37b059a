"""pytest-xdist: which process is the controller, what a worker sends it, and how the
controller merges the workers' graphs *with checking* (`replay_graph`), so a cycle whose two
halves ran on different workers fails the session.
"""

from __future__ import annotations

import json
import os
from typing import Any, Optional

import pytest

from lockcheck.events import ACQUIRE, RELEASE, Event
from lockcheck.lockdep.checker import Checker
from lockcheck.lockdep.findings import Evidence, Finding
from lockcheck.lockdep.graph import DEP_EN, DEP_ER, DEP_SN, DEP_SR, DepGraph
from lockcheck.python import confirm_run
from lockcheck.python.plugin_options import WARN, option, suppress_rules
from lockcheck.python.plugin_summary import (
    headline, summary_line, write_nothing_seen, write_preexisting, write_stale,
)
from lockcheck.python.suppression_rules import DEFAULT, DEFAULT_SUPPRESS, match, parse_rules, stale


def is_controller_early(config: pytest.Config) -> bool:
    """Before xdist's own `pytest_cmdline_main` has run: `-n N` (also `auto`), or `--dist`
    with `--tx`, asked for on the command line (xdist's workers are not given them). Early
    tracking is skipped there; `_xdist_controller` decides for good at configure time."""
    workers = option(config, "numprocesses")
    if workers:
        return True
    return option(config, "dist", "no") not in ("no", None) and bool(option(config, "tx"))


def is_xdist_controller(config: pytest.Config) -> bool:
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


class XdistSession:
    """The `LockcheckPlugin` part that talks to xdist: a worker's output, the controller's merge
    and summary.  The attributes it uses are the plugin's."""

    config: Any
    recorder: Any
    merger: Optional[Checker]
    merged: list
    worker_reports: list
    unattributed: list
    child_headlines: list
    child_findings: list
    trace_path: Optional[str]
    mode: str
    worker_entries: list

    def _worker_output(self) -> dict:
        rec = self.recorder
        assert rec is not None
        summary = rec.summary()
        return {
            "graph": graph_to_text(rec.checker.graph),
            "findings": [headline(f, ctx) for f, ctx in rec.findings] + self.child_headlines,
            "unattributed": self._render([f for f, _ in self.unattributed]) if self.unattributed else "",
            "n_unattributed": len(self.unattributed),
            # warn mode: no failed test carries the reports, so the controller prints them
            "reports": [self._render([f]) for f, ctx in rec.findings if ctx is not None] if self.mode == WARN else [],
            "stats": [summary.events, summary.tasks, summary.suppressed],
            "trace": self.trace_path,
            "children": [[headline, text] for _, headline, text in self.child_findings],
            "preexisting": [[p.name, p.where, p.tracked, p.stdlib] for p in rec.preexisting],
            "rule_hits": rec.rule_hits,
            # --lockcheck-report: the controller writes the session's file
            "entries": self.json_entries() if getattr(self, "report_path", None) else [],
            # --lockcheck-confirm: the verdicts' lines, for the controller's `lockcheck confirm` section
            "confirm": confirm_run.outcome_lines(self.config),
        }

    @pytest.hookimpl(optionalhook=True)
    def pytest_testnodedown(self, node: Any, error: Any) -> None:
        if self.merger is None:
            return
        output = getattr(node, "workeroutput", {}).get("lockcheck")
        if not output:
            return
        self.worker_reports.append(output)
        self.worker_entries.extend(output.get("entries", ()))
        graph = graph_from_text(output["graph"])
        rules, hits = self._merge_rules()
        for finding in replay_graph(self.merger, graph):
            i = match(rules, finding)  # a cycle across workers is suppressed as one on a worker is
            if i is None:
                self.merged.append(finding)
            else:
                hits[i] += 1

    def _merge_rules(self) -> tuple[list, list[int]]:
        """The session's suppression rules (every worker read the same), and how many merged
        findings each accepted."""
        if getattr(self, "_rules", None) is None:
            rules = parse_rules(DEFAULT_SUPPRESS, DEFAULT) + suppress_rules(self.config)
            self._rules = (rules, [0] * len(rules))
        return self._rules

    def _write_stale_rules(self, tr: Any) -> None:
        """The suppressions no worker's finding matched, nor any merged one."""
        if not self.worker_reports:
            return
        rules, merged_hits = self._merge_rules()
        hits = list(merged_hits)
        for report in self.worker_reports:
            for i, n in enumerate(report.get("rule_hits", ())[:len(rules)]):
                hits[i] += n
        write_stale(tr, stale(rules, hits))

    def _controller_summary(self, tr: Any) -> None:
        headlines = [line for report in self.worker_reports for line in report["findings"]]
        events = sum(report["stats"][0] for report in self.worker_reports)
        tasks = sum(report["stats"][1] for report in self.worker_reports)
        suppressed = sum(report["stats"][2] for report in self.worker_reports) + sum(self._merge_rules()[1])
        merged = [f"{headline(f, None)} (across workers)" for f in self.merged]
        tr.write_line(summary_line(headlines + merged, events, tasks, self.merger.graph, suppressed,
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
            write_preexisting(tr, list(dict.fromkeys(tuple(p) for report in self.worker_reports
                                                      for p in report.get("preexisting", ()))))
        self._write_stale_rules(tr)
        write_nothing_seen(tr, events, workers=len(self.worker_reports))
        if self.merged:
            tr.write_line("cycles across workers (each worker's graph alone is acyclic):")
            tr.write_line(self._render(self.merged))
        self._write_verdict(tr, len(headlines) + len(merged))
        self._write_paths(tr, [report["trace"] for report in self.worker_reports if report.get("trace")])
        confirm_run.write_section(tr, [line for report in self.worker_reports for line in report.get("confirm", ())])


def per_worker(path: str, worker_id: Optional[str]) -> str:
    """`locks.lt` -> `locks.gw0.lt`, `locks.lt.gz` -> `locks.gw0.lt.gz`: each worker its own file."""
    if not worker_id:
        return path
    base, ext = os.path.splitext(path)
    if ext.lower() in (".gz", ".xz", ".zst"):
        inner_base, inner_ext = os.path.splitext(base)
        return f"{inner_base}.{worker_id}{inner_ext}{ext}"
    return f"{base}.{worker_id}{ext}"


def graph_to_text(graph: DepGraph) -> str:
    """The worker's graph for the controller: graphio's JSON (execnet carries plain strings)."""
    from lockcheck.store.graphfile import graph_to_json

    return json.dumps(graph_to_json(graph))


def graph_from_text(text: str) -> DepGraph:
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
