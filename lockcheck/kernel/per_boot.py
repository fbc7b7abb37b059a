"""The annotators of a run: one per boot directory (each with its own lockdep state), one for
the rest, made from the command's options."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable, Optional

from lockcheck.events import Event
from lockcheck.kernel.annotation_file import BUILTIN_RULES, AnnotationRules
from lockcheck.kernel.annotation_trust import source_counts
from lockcheck.kernel.annotations import Annotator
from lockcheck.kernel.state import LockdepState
from lockcheck.lockdep.findings import Finding


@dataclass
class AnnotationOptions:
    """The command-line options that make an Annotator (`check`, `graph` and `diff` share them)."""

    lockdep_state: list[str] = field(default_factory=list)
    annotations: Optional[str] = None
    builtin: bool = True

    def rules(self) -> AnnotationRules:
        rules = AnnotationRules.builtin() if self.builtin else AnnotationRules()
        if self.annotations:
            rules = rules.merge(AnnotationRules.load(self.annotations))
        return rules

    def annotators(self) -> "Annotators":
        """The annotators of a run, before its inputs are known (`Annotators.add_boots` adds the boots')."""
        return Annotators(self.annotator())

    def annotator(self, extra_state: Optional[LockdepState] = None) -> "Annotator":
        """An Annotator with these rules and state (EXTRA_STATE: a boot directory's own, used instead)."""
        state = extra_state
        if state is None and self.lockdep_state:
            from lockcheck.kernel import state as kstate

            state = kstate.load(*self.lockdep_state)
        # the built-in rules alone are parsed only if used: a plain `.lt` check never needs them
        # (they concern captures only) and their parser is most of a check's start-up
        rules = self.rules() if self.annotations or not self.builtin else BUILTIN_RULES
        return Annotator(state, rules)


class Annotators:
    """The Annotator of each input: one per boot directory (its own state), one for all the rest.

    Stands in for a single Annotator in a run (`open_trace`, `transform`,
    `mark_uncertain`, `notes`): the file being opened picks the annotator
    that its events go through, and a finding is marked by the annotator of
    the file it was found in.
    """

    def __init__(self, default: Annotator) -> None:
        self.default = default
        self.current = default
        self.by_file: dict[str, Annotator] = {}
        self.boots: list[tuple[object, Annotator]] = []

    @property
    def rules(self) -> AnnotationRules:
        return self.default.rules

    def add_boots(self, traces: list, options: AnnotationOptions) -> None:
        """An annotator for each boot among TRACES (expanded `lockcheck.readers.inputs.Input`s)."""
        from lockcheck.kernel import state as kstate
        from lockcheck.kernel.boot import boots_of

        for boot in boots_of(traces):
            self.add(boot, options.annotator(kstate.load(*boot.state_files)))

    def add(self, boot, annotator: Annotator) -> None:
        """A boot (`lockcheck.kernel.boot.Boot`) whose traces go through ANNOTATOR."""
        self.boots.append((boot, annotator))
        for path in boot.traces:
            self.by_file[path] = annotator

    def open_trace(self, name: str, module) -> None:
        self.current = self.by_file.get(name, self.default)
        self.current.open_trace(module)

    def transform(self, module, events: Iterable[Event]) -> Iterable[Event]:
        return self.current.transform(module, events)

    def mark_uncertain(self, findings: list[Finding]) -> int:
        groups: dict[int, tuple[Annotator, list[Finding]]] = {}
        for finding in findings:
            annotator = self.by_file.get(finding.location.rpartition(":")[0], self.default)
            groups.setdefault(id(annotator), (annotator, []))[1].append(finding)
        return sum(annotator.mark_uncertain(group) for annotator, group in groups.values())

    @staticmethod
    def fold_kernel_reports(findings: list[Finding]) -> list[Finding]:
        """FINDINGS without the capture's copies of a report the kernel log also gave.

        A boot's kernel log is read as an input too: its lockdep report is a
        finding of its own.  The capture's finding that matched it
        (`details["kernel_report"]`, the report's `FILE:LINE`) is the same
        problem; it is left out, and the report's finding says where the
        capture shows it (`details["captured_at"]`).
        """
        at_report = {f.location: f for f in findings if "kernel_report" not in f.details}
        kept = []
        for finding in findings:
            report = at_report.get(finding.details.get("kernel_report", ""))
            if report is not None and report.kind == finding.kind:
                report.details.setdefault("captured_at", finding.location)
                continue
            kept.append(finding)
        return kept

    def source_counts(self) -> dict[str, int]:
        """`Annotator.source_counts` over every annotator of the run (the JSON `stats.annotations`)."""
        return source_counts([self.default.sources] + [annotator.sources for _, annotator in self.boots])

    def notes(self) -> list[str]:
        out = self.default.notes() if self.default.sources or self.default.changes else []
        for boot, annotator in self.boots:
            out += boot.notes()  # type: ignore[attr-defined]
            out += [f"{boot.name}: {note}" for note in annotator.notes()]  # type: ignore[attr-defined]
        return out
