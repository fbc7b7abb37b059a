"""Lockdep reports ("splats") read back from kernel logs: what one report says, and its finding.

`lockcheck.readers.kernel_log` reads dmesg, console logs and syzbot reports
into `Splat` objects, one per report, holding what the kernel printed: the
kind (from the title), the task, the lock the report is about and the held
lock it conflicts with (as `print_lock()` printed them: instance, class with
its `#N` and `/S`, usage characters, site), the dependency chain of a
circular report (`-> #N (CLASS){usage}:` entries with the first frame worth
showing), the held-lock list, and the kind's own lines (irq bits, the irq-safe
and irq-unsafe classes, the released lock...).  A report the log cut short
still becomes a `Splat`, with `notes` saying what is missing.

`to_finding()` turns a splat into the `Finding` lockcheck's own checker
would have made, so every renderer lays it out as usual; its `report`
field (`findings.ReportOrigin`) marks it as read from a kernel report.

>>> s = Splat(kind="recursive-locking", file="dmesg", line=3, task="init/1",
...           lock=SplatLock("&p->lock", "+.+."), held=SplatLock("&p->lock", "+.+."))
>>> f = to_finding(s)
>>> f.kind, f.lock, f.held, f.location, f.report.count
('recursive-locking', '&p->lock', '&p->lock', 'dmesg:3', 1)
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any, Optional

from lockcheck.lockdep import findings as F
from lockcheck.lockdep.findings import ChainLink, Evidence, Finding, LockSnapshot, ReportOrigin
from lockcheck.util import numbers


@dataclass
class SplatLock:
    """One lock as `print_lock()` / `print_lock_name()` printed it."""

    name: str  #: the class, as printed (`&type->s_umount_key#46/1`)
    usage: str = ""  #: the usage characters (`+.+.`; six with RECLAIM_FS)
    instance: Optional[str] = None  #: the lock's address, when printed
    at: Optional[str] = None  #: where it was taken (`genl_rcv+0x19/0x40`)
    waits: Optional[str] = None  #: wait types (`3:3`), 5.7+
    line: int = 0  #: where in the log


@dataclass
class SplatLink:
    """One `-> #N (CLASS){usage}:` entry of the chain of a circular report."""

    depth: int
    lock: SplatLock
    frames: list[str] = field(default_factory=list)


@dataclass
class Splat:
    """One lockdep report as printed, with where it was read.

    `lock` is the lock the report is about (the JSON contract's `lock`), `held`
    the held lock it conflicts with.  `chain` holds the chain entries in
    printed order (`-> #N` first).  `held_locks` is the `N locks held by`
    list, `held_count` the N printed.  `details` holds the kind's own lines:

    - inconsistent-lock-state: `prev_bit`, `new_bit` (usage_str spelling),
      `irq_state` (`[HC0[0]:SC1[1]:HE1:SE0]`), `registered` (the first frame
      worth showing under `{PREV} state was registered at:`, line, frames),
      `irq_events`;
    - irq-lock-inversion: `irqclass`, `forwards` (changed-state reports),
      `other` (SplatLock), `safe` / `unsafe` (SplatLock, bad-dependency reports),
      `safe_at` / `unsafe_at` (where each became irq-safe / irq-unsafe),
      `safe_path` / `unsafe_path` / `path` (the `-> (CLASS){usage} {` blocks);
    - unlock-imbalance: `site` (`print_ip_sym`);
    - held-at-exit: `task_exit` (True for `do_exit()`'s report);
    - held-lock-freed: `mem_from`, `mem_to`;
    - nest-lock-not-held: `nest` (the nest lock's name);
    - lock-depth-exceeded: `depth`, `max`.
    """

    kind: str
    file: str
    line: int
    title: str = ""
    ts: Optional[float] = None
    kernel: Optional[str] = None  #: the `print_kernel_ident()` line
    task: Optional[str] = None  #: `comm/pid` as printed
    lock: Optional[SplatLock] = None
    held: Optional[SplatLock] = None
    chain: list[SplatLink] = field(default_factory=list)
    chain_exists: list[str] = field(default_factory=list)
    held_locks: list[SplatLock] = field(default_factory=list)
    held_count: Optional[int] = None
    scenario: list[tuple[str, str, bool]] = field(default_factory=list)  #: (verb, class, in CPU1 column)
    details: dict[str, Any] = field(default_factory=dict)
    notes: list[str] = field(default_factory=list)  #: what the log lost of it
    end: int = 0  #: the last line of it that was read

    @property
    def location(self) -> str:
        return f"{self.file}:{self.line}"

    def evidence(self, line: Optional[int] = None, at: Optional[str] = None) -> Evidence:
        """An Evidence for a line of this report (its title line by default)."""
        return Evidence(self.file, line or self.line, self.task or "?", at, self.ts)

    def links_by_depth(self) -> list[SplatLink]:
        """The chain from `-> #0` (the lock being acquired) to `-> #N` (the held lock)."""
        return sorted(self.chain, key=lambda link: link.depth)

    def cycle(self) -> Optional[list[str]]:
        """The cycle in dependency order starting at `lock`: `#0 -> #1 -> ... -> #N -> #0`.

        None when the chain lost entries (a gap in the numbering, or no `-> #0`).
        """
        links = self.links_by_depth()
        if not links or [link.depth for link in links] != list(range(len(links))):
            return None
        return [link.lock.name for link in links]


#: frames that say where lockdep or a lock primitive ran, not who took the lock
_PLUMBING = (
    "lock_acquire", "__lock_acquire", "lock_acquire.", "validate_chain", "check_prev", "check_noncircular",
    "mark_lock", "mark_usage", "lock_sync", "__mutex_lock", "mutex_lock", "__down", "down_read", "down_write",
    "_down", "_raw_", "__raw_", "do_raw_", "rt_mutex", "__rt_mutex", "rwsem_", "__rwsem", "spin_lock",
    "read_lock", "write_lock", "_raw_spin", "__flush_work", "lock_map_acquire", "percpu_down", "__percpu_down",
    "__sb_start_write", "lock_sock_nested", "ww_mutex_lock", "__ww_mutex", "arch_stack_walk", "stack_trace_save",
    "save_trace", "dump_stack", "[<",
)


def pick_site(frames: list[str]) -> Optional[str]:
    """The first frame worth showing: past lockdep and the lock primitives, else the first.

    >>> pick_site(["lock_acquire+0x1d5/0x580", "__mutex_lock+0x16f/0x1a80", "pipe_lock+0x56/0x70"])
    'pipe_lock+0x56/0x70'
    """
    for frame in frames:
        text = frame.lstrip("? ")
        if not text.startswith(_PLUMBING):
            return text
    return frames[0].lstrip("? ") if frames else None


def _snapshot(lock: Optional[SplatLock], splat: Splat, mode: int = 0) -> Optional[LockSnapshot]:
    if lock is None:
        return None
    return LockSnapshot(name=lock.name, instance=lock.instance, usage=lock.usage, at=lock.at, mode=mode,
                        acquired=splat.evidence(lock.line, lock.at), waits=lock.waits)


def _read_mode(splat: Splat, name: str, cpu1: bool) -> int:
    """1 when the scenario shows `rlock(NAME)` in that column (the kernel's `hlock->read`)."""
    return int(any(verb == "rlock" and cls == name and col == cpu1 for verb, cls, col in splat.scenario))


def to_finding(splat: Splat) -> Finding:
    """The Finding of one report, as lockcheck's checker would have made it, marked as read from a report."""
    lock = splat.lock
    name = lock.name if lock is not None else "?"
    held = splat.held.name if splat.held is not None else None
    details: dict[str, Any] = {}
    chain: list[ChainLink] = []
    cycle = None
    nxt = _snapshot(lock, splat)
    prv = _snapshot(splat.held, splat)
    d = splat.details
    if splat.kind == F.CIRCULAR:
        for link in splat.chain:
            at = pick_site(link.frames)
            chain.append(ChainLink(link.depth, link.lock.name, link.lock.usage, splat.evidence(link.lock.line, at),
                                   frames=tuple(link.frames), waits=link.lock.waits))
        # a partial chain (no header) is the whole cycle only when its heading line shows the chain whole
        cycle = splat.cycle() if not d.get("partial") or d.get("chain_head") else None
        if lock is not None:
            nxt = _snapshot(lock, splat, _read_mode(splat, lock.name, False))
        if splat.held is not None:
            prv = _snapshot(splat.held, splat, _read_mode(splat, splat.held.name, False))
    elif splat.kind == F.INCONSISTENT:
        details = _usage_bug_details(splat)
    elif splat.kind == F.IRQ_INVERSION:
        details = _irq_details(splat)
        if d.get("other") is not None:
            held = d["other"].name
    elif splat.kind in (F.UNLOCK_IMBALANCE, F.BAD_CONTENTION):
        if d.get("site"):
            details["site"] = d["site"]
    elif splat.kind == F.HELD_AT_EXIT:
        details["task_exit"] = bool(d.get("task_exit"))
        if lock is None and splat.held_locks:
            name = splat.held_locks[-1].name
            nxt = None
    elif splat.kind == F.HELD_FREED:
        held = name  # as the checker reports it: the freed lock is the held one
        for key in ("mem_from", "mem_to"):
            if key in d:
                details[key] = d[key]
    elif splat.kind == F.NEST_NOT_HELD:
        held = d.get("nest")
    elif splat.kind == F.INVALID_WAIT:
        if "context" in d:
            details["context"] = d["context"]
        culprit = wait_culprit(splat)
        if culprit is not None:
            held = culprit.name
            prv = _snapshot(culprit, splat)
    elif splat.kind == F.LOCKDEP_WARNING:  # the condition is what the warning is about (docs/cli.md)
        name = d.get("message") or splat.title
        details["message"] = name
        if d.get("warned_at"):
            details["warned_at"] = d["warned_at"]
    elif splat.kind == F.RCU_USAGE:  # lockdep_rcu_suspicious(): FILE:LINE of the check, and what it says
        name = d.get("rcu_site") or "?"
        if d.get("check"):
            details["check"] = d["check"]
    elif splat.kind == F.MAX_DEPTH:
        for key in ("depth", "max"):
            if key in d:
                details[key] = d[key]
        if splat.held_locks:
            name = splat.held_locks[-1].name
    if splat.kind in (F.UNLOCK_IMBALANCE, F.BAD_CONTENTION):
        site = d.get("site")
    else:
        site = lock.at if lock is not None else None
    first = splat.evidence()
    return Finding(
        kind=splat.kind, task=splat.task or "?", lock=name, location=splat.location, held=held, cycle=cycle,
        next=nxt, prev=prv, held_locks=[_snapshot(h, splat) for h in splat.held_locks], chain=chain, site=site,
        details=details,
        report=ReportOrigin(kernel=splat.kernel, first=first, last=first, count=1, notes=list(splat.notes),
                            missing=missing_parts(splat), partial=bool(d.get("partial")),
                            backtrace=tuple(d.get("backtrace", ()))),
    )


def _wait_types(waits: Optional[str]) -> Optional[tuple[int, int]]:
    """`3:3` -> (3, 3); None when not printed."""
    if not waits:
        return None
    outer, _, inner = waits.partition(":")
    inner = inner or outer
    if not (numbers.is_count(outer, 2) and numbers.is_count(inner, 2)):
        return None  # not lockdep's (its wait types are one digit): no wait types rather than an internal error
    return int(outer), int(inner)


def wait_culprit(splat: Splat) -> Optional[SplatLock]:
    """The held lock that makes an Invalid wait context report's context too small, as
    `check_wait_context()` finds it: the first held lock of smallest inner wait type (0, unknown,
    left out), when that is below both what the new lock needs (its outer wait type, else its
    inner one) and the task's own context (`context-{N:N}`); None when the context alone (a
    hardirq, a softirq) is the reason, or the wait types were not printed.

    >>> s = Splat(kind="invalid-wait-context", file="log", line=1, lock=SplatLock("&port->lock", waits="3:3"),
    ...           held_locks=[SplatLock("&dev->mutex", waits="4:4"), SplatLock("&desc->lock", waits="2:2")],
    ...           details={"context": "5:5"})
    >>> wait_culprit(s).name
    '&desc->lock'
    """
    new = _wait_types(splat.lock.waits if splat.lock is not None else None)
    if new is None:
        return None
    needed = new[0] or new[1]
    context = _wait_types(splat.details.get("context"))
    best: Optional[SplatLock] = None
    best_inner = context[1] if context is not None else needed
    for held in splat.held_locks:
        types = _wait_types(held.waits)
        if types is not None and types[1] and types[1] < best_inner:
            best, best_inner = held, types[1]
    return best if best is not None and best_inner < needed else None


def missing_parts(splat: Splat) -> tuple[str, ...]:
    """The parts of its report a splat lacks (`ReportOrigin.missing`): a log cut mid-report.

    >>> missing_parts(Splat(kind="circular-dependency", file="log", line=1, lock=SplatLock("A")))
    ('held', 'chain', 'held_locks')
    """
    d = splat.details
    missing = []
    if splat.kind == F.IRQ_INVERSION and _is_inversion(splat):  # a change of state: the other class is held
        if d.get("other") is None:
            missing.append("held")
    elif splat.kind in (F.RECURSIVE, F.CIRCULAR, F.IRQ_INVERSION) and splat.held is None:
        missing.append("held")
    if splat.kind == F.CIRCULAR and not splat.chain:
        missing.append("chain")
    if splat.held_count is None and not splat.held_locks:
        missing.append("held_locks")
    return tuple(missing)


def _usage_bug_details(splat: Splat) -> dict[str, Any]:
    d = splat.details
    details: dict[str, Any] = {"prev_bit": d.get("prev_bit", "?"), "new_bit": d.get("new_bit", "?")}
    if d.get("irq_state"):
        details["irq_state"] = d["irq_state"]
    registered = d.get("registered")
    if registered is not None:
        line, frames = registered
        details["usage_traces"] = {details["prev_bit"]: splat.evidence(line, pick_site(frames))}
    events = d.get("irq_events")
    if events:
        details["irq_events"] = {key: ([value[0], splat.evidence(value[1], value[2])] if isinstance(value, tuple)
                                       else value) for key, value in events.items()}
    return details


def _irq_details(splat: Splat) -> dict[str, Any]:
    d = splat.details
    details: dict[str, Any] = {"irqclass": d.get("irqclass", "?")}
    if d.get("irq_state"):
        details["irq_state"] = d["irq_state"]
    if _is_inversion(splat):
        details["irq_report"] = "inversion"
        details["forwards"] = bool(d.get("forwards", True))
        other = d.get("other")
        if other is not None:
            details["other"] = LockSnapshot(other.name, None, other.usage, None)
        details["path"] = _path_links(splat, d.get("path", []))
        this = splat.lock.name if splat.lock is not None else "?"
        other_name = other.name if other is not None else "?"
        details["safe"], details["unsafe"] = ((this, other_name) if details["forwards"] else (other_name, this))
        details["dedup"] = "inversion"
    else:
        details["irq_report"] = "bad_dependency"
        irqclass = details["irqclass"]
        state, _, read = irqclass.partition("-")
        safe_bit = f"IN-{state}-{'R' if read == 'READ' else 'W'}"
        unsafe_bit = f"{state}-ON-W"
        details["safe_bit"], details["unsafe_bit"] = safe_bit, unsafe_bit
        traces = {}
        for key, bit in (("safe", safe_bit), ("unsafe", unsafe_bit)):
            lock = d.get(key)
            if lock is not None:
                details[key] = LockSnapshot(lock.name, None, lock.usage, None)
            where = d.get(f"{key}_at")
            if where is not None:
                line, frames = where
                traces[bit] = splat.evidence(line, pick_site(frames))
        details["usage_traces"] = traces
        details["safe_path"] = _path_links(splat, d.get("safe_path", []))
        details["unsafe_path"] = _path_links(splat, d.get("unsafe_path", []))
        details["dedup"] = "bad-dependency"
    return details


def _is_inversion(splat: Splat) -> bool:
    """An irq report raised by a change of irq state (`print_irq_inversion_bug`), not by an
    acquisition (`print_bad_irq_dependency`): its title says so, even when the log lost the rest."""
    d = splat.details
    return "other" in d or "forwards" in d or "irq lock inversion" in splat.title


def _path_links(splat: Splat, blocks: list[tuple[SplatLock, list[str]]]) -> list[ChainLink]:
    """`-> (CLASS){usage} {` blocks as printed (leaf first), each with its `... acquired at:` frame."""
    depth = len(blocks) - 1
    return [ChainLink(depth - i, lock.name, lock.usage, splat.evidence(lock.line, pick_site(frames)))
            for i, (lock, frames) in enumerate(blocks)]
