"""How far a run's findings rest on what the kernel's state proves: the validity of a boot's
lockdep state, which findings an annotation could explain (uncertain), and the notes that
say so.  `Annotator` inherits it."""

from __future__ import annotations

from collections import Counter

from lockcheck.kernel import after_report
from lockcheck.kernel.annotation_file import BUILTIN_RULES
from lockcheck.kernel.state import split_class_name
from lockcheck.lockdep import findings as F
from lockcheck.lockdep.findings import Finding
from lockcheck.util.wording import count as plural

FULL = "full"  #: lockdep stayed on (debug_locks: 1, or a kernel log from the boot on without a report)
UNTIL_REPORT = "until-report"  #: lockdep reported and turned off: trusted up to that report
NONE = "none"  #: lockdep turned off at a point the inputs do not show
UNKNOWN = "unknown"  #: no /proc/lockdep_stats, no whole kernel log: assumed on, but no chain proves acceptance

#: where the annotations of an acquisition came from (`Annotator.sources`; STATE_CHANGED counts
#: those of "state" it changed, the others it confirmed as captured)
SOURCES = ("capture", "state", "rule", "none")
STATE_CHANGED = "state_changed"


class AnnotatorVerdicts:
    """The after-the-run half of `Annotator`: findings marked uncertain, notes."""

    def lost_try_files(self) -> list[str]:
        """Captures with many acquisitions and not one trylock: their `try ` flags were lost."""
        return [file for file, (n, tries) in self.tries.items() if n >= 1000 and tries == 0]

    def mark_uncertain(self, findings: list[Finding]) -> int:
        """Tag findings an annotation could explain with the reason; how many.

        Only what was checked without a trusted state can be uncertain (the
        doubts are recorded there).  A finding the kernel's own report made
        too is certain: it gets `details["kernel_report"]` instead.  A cycle
        closed after that report is judged by the dump (`after_report`): uncertain
        when lockdep had every dependency of it, else `details["lockdep_off"]`.
        """
        lost = self.lost_try_files()
        marked = 0
        for finding in findings:
            if finding.uncertain is not None or finding.kind in (F.UNLOCK_IMBALANCE, F.ORDER_VIOLATION):
                continue
            if self._kernel_reported(finding):
                finding.details["kernel_report"] = self.report.location  # type: ignore[union-attr]
                continue
            reasons = []
            names = list(finding.cycle) if finding.cycle else [n for n in (finding.lock, finding.held) if n]
            for name in names:
                base = name.rpartition("/")[0] if name.rpartition("/")[2].isdigit() else name
                for reason in self.doubts.get(base, ()):
                    if reason not in reasons:
                        reasons.append(reason)
            if lost and self._stateless(finding) and finding.kind in (F.CIRCULAR, F.RECURSIVE, F.INCONSISTENT,
                                                                      F.IRQ_INVERSION):
                reasons.append(f"{', '.join(lost)} has no trylock at all: the capture lost the `try ` flag "
                               "(6.1 with hash-ptr off prints none), so trylocks look like blocking acquisitions")
            if self.validity == UNTIL_REPORT and self.state is not None and self._stateless(finding):
                checked = after_report.judge(finding, self.state, self.report.location,  # type: ignore[union-attr]
                                             lambda file, line: not self._untrusted_at(file, line))
                if checked:
                    reasons.append(checked)
            if reasons:
                finding.uncertain = "; ".join(reasons)
                marked += 1
        return marked

    def _stateless(self, finding: Finding) -> bool:
        """Whether a finding was made where the state was not used."""
        if self.index is None:
            return True
        file, _, line = finding.location.rpartition(":")
        start = self.untrusted_from.get(file)
        return start is not None and line.isdigit() and int(line) >= start

    def _untrusted_at(self, file: str, line: int) -> bool:
        """Whether FILE:LINE is at or after the cut (where the state stopped being used)."""
        start = self.untrusted_from.get(file)
        return start is not None and line >= start

    def _kernel_reported(self, finding: Finding) -> bool:
        """Whether the kernel's own report (from the boot's log) is this finding: same kind and lock."""
        report = self.report
        if report is None or report.lock is None or finding.message.lower() != report.title.lower():
            return False
        mine, theirs = split_class_name(finding.lock), split_class_name(report.lock)
        return (mine[0], mine[2]) == (theirs[0], theirs[2])

    def notes(self) -> list[str]:
        out = self._validity_notes()
        source = "/proc/lockdep_chains"
        for (what, lock, detail), count in sorted(self.changes.items(), key=lambda kv: (-kv[1], kv[0])):
            acq = f"{count} acquisition{'s' if count != 1 else ''} of {lock}"
            if what == "subclass":
                how = detail if " by rule " in detail else f"{detail} from {source}"
                out.append(f"{acq} given subclass {how}")
            elif what == "nest":
                how = detail if " by rule " in detail else f"{detail} (a repeated class the kernel accepted, {source})"
                out.append(f"{acq} given nest_lock {how}")
            elif what == "rread":
                out.append(f"{acq} taken as recursive reads ({detail})")
            elif what == "trylock":
                out.append(f"{acq} taken as trylocks: {source} has no chain for them, so the kernel did not "
                           "validate them (a `try ` flag the capture lost)")
            elif what == "check0" and detail:
                out.append(f"{acq} taken without validation (check=0) by {detail}")
            elif what == "check0":
                out.append(f"{acq} taken without validation (check=0): /proc/lockdep shows the class with no "
                           "dependency and no usage")
            elif what == "revised":
                out.append(f"{count} held {lock} taken as {detail} afterwards: only a chain of {source} with "
                           f"{detail} explains what was acquired on top of it")
            elif what == "unexplained":
                out.append(f"{acq} repeat a held class with nothing held below that could be its nest_lock")
        if self._rules is not BUILTIN_RULES and self.rules.other_statements:
            out.append(f"the annotation file also declares {plural(self.rules.other_statements, 'lock order')}; "
                       "give it to --order to enforce them")
        counts = self.source_counts()
        if counts:
            changed = counts.get(STATE_CHANGED, 0)
            labels = (("capture", "from the capture (lock_acquire arguments)"),
                      ("state", f"from the kernel's state ({changed} changed by it)"),
                      ("rule", "by rule"), ("none", "left as captured"))
            parts = [f"{counts[key]} {label}" for key, label in labels if counts.get(key)]
            out.append(f"annotations of {plural(counts['acquisitions'], 'captured acquisition')}: "
                       f"{', '.join(parts)}")
        return out

    def source_counts(self) -> dict[str, int]:
        """Where the annotations of the captured acquisitions came from: `acquisitions` in all,
        then per SOURCES (`capture`, `state`, `rule`, `none`) and `state_changed`; {} without any."""
        return source_counts([self.sources])

    def _validity_notes(self) -> list[str]:
        """How far the state was trusted, and why."""
        state = self.state
        if self.index is None or state is None:
            return []
        if self.validity == UNTIL_REPORT:
            report = self.report
            assert report is not None
            when = f" [{report.ts:12.6f}]" if report.ts is not None else ""
            by = f" by {report.task}" if report.task else ""
            text = (f"the kernel reported '{report.title}'{by} at {report.location}{when} and turned lockdep "
                    f"off: lockdep recorded no chain after it, so {', '.join(state.files)} ")
            if self.cut is None:
                return [text + "was used for the whole capture (it ends before the report)"]
            return [text + f"was used up to {self.cut[0]}:{self.cut[1]} only; later acquisitions were checked "
                           "without it"]
        if self.validity == NONE:
            where = state.stats_file or "the state"
            return [f"lockdep turned itself off in that boot (debug_locks: 0 in {where}) and no kernel log "
                    f"says when: {', '.join(state.files)} was not used (give the boot's dmesg)"]
        if self.validity == UNKNOWN:
            if state.log_file is not None:
                why = (f"no /proc/lockdep_stats came with the state and {state.log_file} does not go back to "
                       "the boot (no 'Linux version' line: a report may have scrolled out)")
            else:
                why = "no /proc/lockdep_stats or kernel log came with the state"
            text = (f"{why}: lockdep is assumed to have "
                    "stayed on, but a repeated class in a chain is not taken as accepted (lockdep adds a chain "
                    "before validating it)")
            if self.cut is not None:
                text += (f"; the first such repeat, at {self.cut[0]}:{self.cut[1]}, may have been a report that "
                         "turned lockdep off, so the state was not used after it")
            return [text]
        return []


def source_counts(counters: list[Counter]) -> dict[str, int]:
    """Annotators' `sources` counters summed, with `acquisitions` first; {} when they counted none."""
    total: Counter = Counter()
    for counter in counters:
        total.update(counter)
    acquisitions = sum(total[key] for key in SOURCES)
    if not acquisitions:
        return {}
    return {"acquisitions": acquisitions, **{key: total[key] for key in SOURCES + (STATE_CHANGED,)}}
