"""What the ftrace and perf readers saw besides the events they yielded: `ReaderStats`, the
closing note's counts (one object per input, merged over a directory)."""

from __future__ import annotations

from collections import Counter
from dataclasses import dataclass, field

from lockcheck.util.wording import count


@dataclass
class ReaderStats:
    """What a reader saw besides the events it yielded (for the CLI's closing note).

    One object per input; `merge()` adds another (a directory of traces).
    """

    lines: int = 0  #: lines read, headers and blanks included
    events: int = 0  #: lock events yielded (context and lost markers excluded)
    context_events: int = 0  #: synthetic irq-context events yielded
    skipped: Counter = field(default_factory=Counter)  #: other event name -> lines
    contention: int = 0  #: contention_begin/contention_end lines (also skipped)
    hardirq_lines: int = 0  #: lock events that ran in hardirq context
    softirq_lines: int = 0  #: lock events that ran in softirq context (not hardirq)
    names_resolved: int = 0  #: nameless lines resolved by address
    names_unresolved: int = 0  #: nameless lines no held lock explained (UNKNOWN_LOCK)
    lost_markers: int = 0  #: `CPU:N [LOST EVENTS]` lines
    slow_lines: int = 0  #: lines the fast scanner left to the grammar
    acquisitions: int = 0  #: lock_acquire lines
    probe_lines: int = 0  #: kprobe lines with lockdep's lock_acquire arguments
    args_paired: int = 0  #: acquisitions that got their arguments from such a line
    args_unpaired: int = 0  #: argument lines no lock_acquire line followed
    nest_unknown: int = 0  #: nest_locks not held in the capture (taken before it began)
    unknown: int = 0  #: acquisitions read as unknown: the probe was installed but their line is missing
    restarts: int = 0  #: trace restarts inside the file (a `# tracer:` header again, a CPU's clock going back)
    map_ops: int = 0  #: lock_set_class/lock_downgrade probe lines applied to a held lock
    map_ops_unknown: int = 0  #: such lines whose lock was not held in the capture (taken before it began)

    @property
    def skipped_lines(self) -> int:
        return sum(self.skipped.values())

    def merge(self, other: "ReaderStats") -> None:
        for name in ("lines", "events", "context_events", "contention", "hardirq_lines", "softirq_lines",
                     "names_resolved", "names_unresolved", "lost_markers", "slow_lines", "acquisitions",
                     "probe_lines", "args_paired", "args_unpaired", "nest_unknown", "unknown", "restarts",
                     "map_ops", "map_ops_unknown"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.skipped.update(other.skipped)

    def notes(self) -> list[str]:
        """Sentences for the closing note, e.g. `skipped 444 lines of other events (...)`."""
        out = []
        if self.skipped:
            kinds = ", ".join(f"{name}: {n}" for name, n in self.skipped.most_common())
            out.append(f"skipped {count(self.skipped_lines, 'line')} of other events ({kinds})")
        if self.names_resolved or self.names_unresolved:
            out.append(f"resolved {count(self.names_resolved, 'nameless lock line')} by address"
                       + (f", {self.names_unresolved} unresolved" if self.names_unresolved else ""))
        if self.probe_lines:
            missing = self.acquisitions - self.args_paired
            text = (f"{self.args_paired} of {self.acquisitions} acquisitions carried lockdep's own arguments "
                    "(a kprobe on lock_acquire)")
            if self.unknown:
                text += (f"; {self.unknown} did not (missed probe hits, lost events, a CPU buffer that starts "
                         "late, a restart) and were read as unknown: no usage bit and no dependency of their own "
                         "(lockdep's check=0) unless the kernel's state resolves them, and a finding about their "
                         "class is uncertain")
            if missing > self.unknown:
                text += (f"; {missing - self.unknown} came before the first argument line and are inferred as "
                         "in a capture without arguments")
            if self.args_unpaired:
                text += f"; {self.args_unpaired} argument lines had no lock_acquire line after them"
            out.append(text)
        if self.map_ops or self.map_ops_unknown:
            text = f"{count(self.map_ops, 'lock_set_class/lock_downgrade call')} applied to the held lock"
            if self.map_ops_unknown:
                text += f"; {self.map_ops_unknown} more were about a lock not held in the capture and were left out"
            out.append(text)
        if self.lost_markers:
            out.append(f"{count(self.lost_markers, 'lost-events marker')}: the stacks of those CPUs were reset")
        if self.restarts:
            out.append(f"{count(self.restarts, 'trace restart')} inside the capture (a `# tracer:` header again or "
                       "a CPU's clock going back): pending kprobe arguments were dropped there")
        return out
