"""Findings: what the checker concludes, with everything a renderer needs.

The checker never prints (see pyflakes' messages.py for the model): it
returns `Finding` objects carrying snapshots of the locks involved, taken at
the moment of the report, and the renderers in `lockcheck.report` lay them
out as the kernel would.  A new kind of problem is a new `KIND_*` constant
and the checker line that raises it.
"""

from __future__ import annotations

import re
from dataclasses import dataclass, field
from typing import Any, NamedTuple, Optional

# -- kinds (the JSON `kind` values of docs/cli.md) -------------------
RECURSIVE = "recursive-locking"
CIRCULAR = "circular-dependency"
UNLOCK_IMBALANCE = "unlock-imbalance"
NEST_NOT_HELD = "nest-lock-not-held"
HELD_AT_EXIT = "held-at-exit"
HELD_FREED = "held-lock-freed"
INCONSISTENT = "inconsistent-lock-state"
IRQ_INVERSION = "irq-lock-inversion"
INVALID_WAIT = "invalid-wait-context"
BAD_CONTENTION = "bad-contention"
#: lock_downgrade of a lock held for reading (`__lock_downgrade()`'s WARN)
BAD_DOWNGRADE = "bad-downgrade"
#: a lockdep_assert_*() that failed (`__lock_is_held()`, the irq-state asserts); the assertion is
#: `details["assertion"]`, the title
ASSERTION_FAILED = "assertion-failed"
#: lock_pin_lock()/lock_unpin_lock()/__lock_release()'s WARNs; which one is `details["warning"]`, the title
PIN_VIOLATION = "pin-violation"
#: read from kernel logs only (docs/cli.md): lockdep's WARNs and BUGs that turn it off without a report
#: of their own (`DEBUG_LOCKS_WARN_ON(...)`, the capacity BUGs, `chain_key collision`), the condition
#: as the message; and RCU's `suspicious RCU usage` (lockdep's RCU checks, `lockdep_rcu_suspicious()`)
LOCKDEP_WARNING = "lockdep-warning"
RCU_USAGE = "suspicious-rcu-usage"
MAX_DEPTH = "lock-depth-exceeded"  # not in the contract's table: lockdep's "BUG: MAX_LOCK_DEPTH too low!"
ORDER_VIOLATION = "order-violation"  # a dependency against a declared lock order (lockcheck.order)
#: not lockdep's: a forked child (Python's os.fork) takes a lock that a thread which did not survive
#: the fork held; nobody in the child will ever release it (the pytest plugin)
HELD_AT_FORK = "held-at-fork"
#: not lockdep's: a cycle of blocked waits seen as it happens (lockcheck.python.waitfor, the pytest plugin)
DEADLOCK = "deadlock"

#: the kernel's title for each kind (the message of the JSON contract)
MESSAGES = {
    RECURSIVE: "possible recursive locking detected",
    CIRCULAR: "possible circular locking dependency detected",
    UNLOCK_IMBALANCE: "bad unlock balance detected!",
    NEST_NOT_HELD: "Nested lock was not taken",
    HELD_AT_EXIT: "lock held when returning to user space!",
    HELD_FREED: "held lock freed!",
    INCONSISTENT: "inconsistent lock state",
    IRQ_INVERSION: "possible irq lock inversion dependency detected",
    MAX_DEPTH: "MAX_LOCK_DEPTH too low!",
    INVALID_WAIT: "Invalid wait context",
    BAD_CONTENTION: "bad contention detected!",
    BAD_DOWNGRADE: "downgrading a read lock",
    ASSERTION_FAILED: "lockdep assertion failed",
    PIN_VIOLATION: "releasing a pinned lock",
    LOCKDEP_WARNING: "lockdep warning",
    RCU_USAGE: "suspicious RCU usage",
    ORDER_VIOLATION: "lock order violates the declared order",
    HELD_AT_FORK: "lock held by another thread at fork",
    DEADLOCK: "deadlock detected: every context in a cycle of waits is blocked",
}


@dataclass(frozen=True, slots=True)
class Evidence:
    """Where something was first observed: a trace line, its task and call site.

    Every dependency in the graph keeps one of these, so each link of a
    reported chain can say why it exists ("-> #1 (B): first seen at
    trace.lt:12 by T1, f.c:11").
    """

    file: str
    line: int
    task: str
    at: Optional[str] = None
    ts: Optional[float] = None
    #: the program's call stack where a live program (the pytest plugin) did it: `Frame`s,
    #: innermost first; None for traces, which carry no stacks
    stack: Optional[tuple["Frame", ...]] = field(default=None, repr=False)

    def __init__(self, file: str, line: int, task: str, at: Optional[str] = None, ts: Optional[float] = None,
                 stack: Optional[tuple["Frame", ...]] = None) -> None:
        # Slots, not an instance dict: a graph keeps two of these per dependency (100k classes and
        # 1M dependencies: ~220 MB of dicts).  The dataclass's own __init__ of a frozen class sets
        # each field through object.__setattr__ (~0.8 us for six); the slots' own setters (which
        # the frozen __setattr__ does not guard) cost about half that.
        _SET_FILE(self, file)
        _SET_LINE(self, line)
        _SET_TASK(self, task)
        _SET_AT(self, at)
        _SET_TS(self, ts)
        _SET_STACK(self, stack)

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"

    def with_stack(self, stack: Optional[tuple["Frame", ...]]) -> "Evidence":
        """This evidence with `stack` (itself when there is none to add)."""
        if not stack:
            return self
        return Evidence(self.file, self.line, self.task, self.at, self.ts, stack)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"file": self.file, "line": self.line, "task": self.task}
        if self.at is not None:
            doc["at"] = self.at
        if self.ts is not None:
            doc["ts"] = self.ts
        if self.stack:
            doc["stack"] = [frame.to_json() for frame in self.stack]
        return doc

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "Evidence":
        stack = doc.get("stack")
        return cls(doc["file"], int(doc["line"]), doc["task"], doc.get("at"), doc.get("ts"),
                   tuple(Frame.from_json(frame) for frame in stack) if stack else None)


# the slots' setters (`Evidence.__init__`): bound after the dataclass made the slotted class
_SET_FILE, _SET_LINE, _SET_TASK, _SET_AT, _SET_TS, _SET_STACK = (
    Evidence.__dict__[name].__set__ for name in ("file", "line", "task", "at", "ts", "stack"))


class Frame(NamedTuple):
    """One frame of a program's call stack: `file:line in function`."""

    file: str
    line: int
    function: str

    def __str__(self) -> str:
        return f"{self.file}:{self.line} in {self.function}"

    def to_json(self) -> dict[str, Any]:
        return {"file": self.file, "line": self.line, "function": self.function}

    @classmethod
    def from_json(cls, doc: dict[str, Any]) -> "Frame":
        return cls(str(doc["file"]), int(doc["line"]), str(doc["function"]))


@dataclass(frozen=True)
class LockSnapshot:
    """A lock as lockdep's `print_lock` shows it, frozen at report time.

    `name` includes `/N` for a subclass; `usage` is the `get_usage_chars`
    string (`+.+.`) of the class when the report was made; `acquired` is
    where in the trace this hold began (None for a lock being acquired).
    """

    name: str
    instance: Optional[str]
    usage: str
    at: Optional[str]
    mode: int = 0
    acquired: Optional[Evidence] = None
    references: int = 0
    #: the class's wait types as the kernel prints them after its name, `-{OUTER:INNER}` (`3:3`);
    #: None where they are not known (a trace without `wait=`, a kernel before 5.7)
    waits: Optional[str] = None


@dataclass(frozen=True)
class ChainLink:
    """One `-> #N (CLASS){usage}:` entry of a circular report.

    `evidence` is where `cls` was first taken while the previous class of
    the chain was held (the kernel prints that stack); for `-> #0`, the
    class being acquired now, it is the current event.  `dep` is the
    dependency's read/write type mask (see `lockcheck.lockdep.graph`).
    """

    depth: int
    cls: str
    usage: str
    evidence: Evidence
    dep: int = 0
    #: a kernel report's entry: every frame it printed under `-> #N`, and its `-{n:n}` wait types
    frames: tuple[str, ...] = ()
    waits: Optional[str] = None


@dataclass
class ReportOrigin:
    """A finding read from the kernel's own lockdep report, not found by lockcheck's checker.

    Reports of one problem (same kind and lock classes, `lockcheck.kernel.grouping`)
    are one finding: `count` reports, the `first` and `last` of them (file,
    line of the title, the report's task, the log's time stamp where there is
    one).  `kernel` is the report's `print_kernel_ident()` line; `notes` say
    what the log lost of the first report (cut short, lines lost), and
    `missing` which of its parts are not there at all.
    """

    kernel: Optional[str]
    first: Evidence
    last: Evidence
    count: int = 1
    notes: list[str] = field(default_factory=list)
    #: parts of the report the log does not hold (`held`: the held lock it conflicts with,
    #: `chain`: the dependency chain, `held_locks`: the held-lock list), so nothing stands in for them
    missing: tuple[str, ...] = ()
    #: the report's start (title, task, header locks) is not in the log: only its chain entries were read
    partial: bool = False
    #: the lines of the report's `stack backtrace:` dump as printed (`CPU: ...`, `Call Trace:`, frames)
    backtrace: tuple[str, ...] = ()

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {"from_report": True, "count": self.count,
                               "first": self.first.to_json(), "last": self.last.to_json()}
        if self.kernel is not None:
            doc["kernel"] = self.kernel
        if self.notes:
            doc["report_notes"] = list(self.notes)
        if self.partial:
            doc["partial"] = True
        if self.backtrace:
            doc["backtrace"] = list(self.backtrace)
        return doc


@dataclass
class Finding:
    """One distinct problem, as reported.

    Fields follow the JSON contract (`kind`, `task`, `lock`, `held`,
    `cycle`, `location`, `message`); the rest is what the text renderer
    needs to draw the kernel's layout.  `details` carries kind-specific
    extras (irq state, usage bits and traces) documented where they are set.
    """

    kind: str
    task: str
    lock: str
    location: str
    held: Optional[str] = None
    cycle: Optional[list[str]] = None
    next: Optional[LockSnapshot] = None
    prev: Optional[LockSnapshot] = None
    held_locks: list[LockSnapshot] = field(default_factory=list)
    chain: list[ChainLink] = field(default_factory=list)
    site: Optional[str] = None
    uncertain: Optional[str] = None
    details: dict[str, Any] = field(default_factory=dict)
    #: set when the finding is the kernel's own report read from a log (lockcheck.readers.splat)
    report: Optional[ReportOrigin] = None

    @property
    def message(self) -> str:
        """The title the kernel prints for this finding (the text report's `WARNING:` line).

        Two of the kernel's titles are format strings: the bad-irq-dependency
        report names its irq class (`HARDIRQ-safe -> HARDIRQ-unsafe lock order
        detected`) and `do_exit()`'s report its task (`TASK still has locks
        held!`); every renderer shows the expanded title, so JSON, SARIF and
        GitHub say what the text report says.
        """
        if self.kind == IRQ_INVERSION and self.irq_report == "bad_dependency":
            irqclass = self.details.get("irqclass")
            if irqclass:
                return f"{irqclass}-safe -> {irqclass}-unsafe lock order detected"
        if self.kind == HELD_AT_EXIT and self.details.get("task_exit"):
            return f"{self.task} still has locks held!"
        if self.kind == ASSERTION_FAILED and self.details.get("assertion"):
            return str(self.details["assertion"])
        if self.kind == PIN_VIOLATION and self.details.get("warning"):
            return str(self.details["warning"])
        if self.kind == LOCKDEP_WARNING and self.details.get("message"):
            return str(self.details["message"])
        return MESSAGES[self.kind]

    @property
    def irq_report(self) -> Optional[str]:
        """For irq-lock-inversion: `bad_dependency` (raised by an acquisition, the kernel's
        `print_bad_irq_dependency`) or `inversion` (by a change of irq state); else None."""
        if self.kind != IRQ_INVERSION:
            return None
        report = self.details.get("irq_report")
        if report is None:
            report = "bad_dependency" if self.prev is not None else "inversion"
        return report

    def key(self) -> tuple:
        """Identity for de-duplication: kind, lock and held classes; cycles up to rotation.

        A finding read from kernel reports is keyed as reports are grouped
        (`lockcheck.kernel.grouping`: the per-boot `#N` of class names left out), so
        the same problem in two boots' logs is one.
        """
        if self.report is not None:
            return group_key(self)
        if self.cycle:
            pivot = min(range(len(self.cycle)), key=lambda i: self.cycle[i])
            rotated = tuple(self.cycle[pivot:] + self.cycle[:pivot])
            return (self.kind, rotated)
        extra = self.details.get("dedup")
        return (self.kind, self.lock, self.held, extra)

    def to_json(self) -> dict[str, Any]:
        doc: dict[str, Any] = {
            "kind": self.kind,
            "task": self.task,
            "lock": self.lock,
            "held": self.held,
            "location": self.location,
            "message": self.message,
        }
        if self.cycle is not None:
            doc["cycle"] = list(self.cycle)
        if self.chain:
            doc["chain"] = [_chain_link_json(link) for link in self.chain]
        if self.site is not None:
            doc["at"] = self.site
        if self.uncertain is not None:
            doc["uncertain"] = self.uncertain
        if self.kind == INVALID_WAIT:  # what the kernel's report prints: the wait types and the held locks
            if self.next is not None and self.next.waits:
                doc["waits"] = self.next.waits
            doc["held_locks"] = [to_plain(lock) for lock in self.held_locks]
        if self.report is not None:
            doc.update(self.report.to_json())
        details = {key: value for key, value in self.details.items() if key != "dedup"}
        if details:
            doc["details"] = to_plain(details)
        return doc


def _chain_link_json(link: ChainLink) -> dict[str, Any]:
    """A chain entry in JSON; a kernel report's keeps its wait types and all its frames."""
    doc: dict[str, Any] = {"class": link.cls, "depth": link.depth, "evidence": link.evidence.to_json()}
    if link.waits:
        doc["waits"] = link.waits
    if link.frames:
        doc["frames"] = list(link.frames)
    return doc


def to_plain(value: Any) -> Any:
    """Plain JSON data for a value that may hold Evidence, ChainLink or LockSnapshot objects."""
    if isinstance(value, dict):
        return {str(key): to_plain(item) for key, item in value.items()}
    if isinstance(value, Frame):
        return value.to_json()
    if isinstance(value, (list, tuple)):
        return [to_plain(item) for item in value]
    if isinstance(value, (set, frozenset)):
        return sorted(to_plain(item) for item in value)
    if isinstance(value, Evidence):
        return value.to_json()
    if isinstance(value, ChainLink):
        return {"class": value.cls, "depth": value.depth, "usage": value.usage,
                "evidence": value.evidence.to_json()}
    if isinstance(value, LockSnapshot):
        doc: dict[str, Any] = {"class": value.name, "instance": value.instance, "usage": value.usage}
        if value.waits is not None:
            doc["waits"] = value.waits
        if value.at is not None:
            doc["at"] = value.at
        if value.acquired is not None:
            doc["acquired"] = value.acquired.to_json()
        return doc
    if value is None or isinstance(value, (str, int, float, bool)):
        return value
    return str(value)


# -- one problem among kernel reports ----------------------------------------------------------
# The kernel prints a report each time a boot hits a problem, and a fleet of boots hits the same
# problem many times, with dynamically keyed classes numbered per boot (`#2`, `#3`... in the order
# they were registered, which changes from boot to boot).  So a problem read from reports is keyed
# by its kind and its lock classes with that numbering left out, and nothing else (not the task,
# the call sites, the addresses); `lockcheck.kernel.grouping` counts the reports of each.

_VERSION = re.compile(r"#\d+(?=/\d+$|$)")


def class_key(name: Optional[str]) -> str:
    """A class name without its per-boot `#N`: which of the classes of one name a boot registered
    first depends on the boot, so `X`, `X#2` and `X#8` of different boots are one class name here
    (the subclass `/S` is kept: it is the code's annotation).

    >>> class_key("&(&k->k_lock)->rlock#3"), class_key("&type->s_umount_key#46/1"), class_key("sb_writers")
    ('&(&k->k_lock)->rlock', '&type->s_umount_key/1', 'sb_writers')
    """
    return _VERSION.sub("", name) if name else ""


def group_key_of(kind: str, lock: Optional[str], held: Optional[str], cycle: Optional[list[str]],
                 details: dict[str, Any]) -> tuple:
    """The key two reports of one problem share (see the module docstring)."""
    if kind == CIRCULAR and cycle:
        names = [class_key(name) for name in cycle]
        pivot = min(range(len(names)), key=names.__getitem__)
        return (kind, tuple(names[pivot:] + names[:pivot]))
    if kind == RECURSIVE:
        return (kind, class_key(lock))
    if kind == INCONSISTENT:
        return (kind, class_key(lock), details.get("prev_bit"), details.get("new_bit"))
    if kind == IRQ_INVERSION:
        safe, unsafe = details.get("safe"), details.get("unsafe")
        safe = getattr(safe, "name", safe)
        unsafe = getattr(unsafe, "name", unsafe)
        return (kind, details.get("irqclass"), class_key(safe), class_key(unsafe))
    return (kind, class_key(lock), class_key(held))


def group_key(finding: Finding) -> tuple:
    """`group_key_of` a finding."""
    return group_key_of(finding.kind, finding.lock, finding.held, finding.cycle, finding.details)
