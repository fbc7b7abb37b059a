"""Text layouts of the lockdep reports and warnings beyond the classic ones: Invalid wait context,
bad contention, and what only a kernel log holds (lockdep's WARNs and capacity BUGs, RCU's
`suspicious RCU usage`).

Each function mirrors the kernel function that prints the report, under its
name, with `lockcheck.report.text`'s deliberate changes (the ident line
names lockcheck and the file; where the kernel dumps a stack, where in the
input it happened).  `KERNEL_PRINTERS` maps each kind to its function;
`lockcheck.report.text` merges it into its dispatch table.  This module
imports only the building blocks (`lockcheck.report.printk`), never `text`,
so there is no import circle.

`brief()` is the one-line detail the kind adds to a SARIF / GitHub message
(the wait types and the context of an Invalid wait context, say).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable, Optional

from lockcheck.lockdep.findings import (
    BAD_CONTENTION,
    INVALID_WAIT,
    LOCKDEP_WARNING,
    RCU_USAGE,
    Finding,
    LockSnapshot,
)
from lockcheck.report.printk import (
    _Out,
    dump_stack,
    lockdep_print_held_locks,
    print_header,
    print_kernel_ident,
    print_lock,
    print_report_origin,
)

from lockcheck.report.warn_reports import WARN_PRINTERS

if TYPE_CHECKING:
    from lockcheck.report import Summary


def _lock(finding: Finding) -> LockSnapshot:
    return finding.next or LockSnapshot(finding.lock, None, "", finding.site)


def print_lock_invalid_wait_context(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`print_lock_invalid_wait_context()`: the lock being taken with its `-{O:I}` wait types, the
    task's wait context (`context-{N:N}`, `task_wait_context()`), the held locks."""
    print_header(pr, f"[ BUG: {finding.message} ]", finding, summary)
    pr(f"{finding.task} is trying to lock:", print_lock(_lock(finding), finding.location))
    pr("other info that might help us debug this:")
    context = finding.details.get("context")
    pr(f"context-{{{context}}}" if context else "context-{?} (not in the log)")
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding)


def print_lock_contention_bug(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`print_lock_contention_bug()`: `contended` / `acquired` of a lock the task does not hold."""
    print_header(pr, f"WARNING: {finding.message}", finding, summary)
    pr(f"{finding.task} is trying to contend lock ({finding.lock}) at:")
    pr(finding.site or finding.location)
    pr("but there are no locks held!", "", "other info that might help us debug this:")
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding)


def lockdep_rcu_suspicious(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`lockdep_rcu_suspicious()`: where the RCU check failed and what it says, then the held locks."""
    print_header(pr, f"WARNING: {finding.message}", finding, summary)
    pr(f"{finding.lock} {finding.details.get('check', 'suspicious rcu_dereference_check() usage!')}")
    pr("", "other info that might help us debug this:", "")
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding)


def print_lockdep_warning(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """A WARN in lockdep's code (`DEBUG_LOCKS_WARN_ON(...)`, `WARNING: at kernel/locking/lockdep.c`), a
    capacity BUG (`print_lockdep_off()`) or a chain_key collision: the line as the kernel printed it,
    where lockdep raised it, and that lockdep checked nothing after it."""
    message = finding.message
    if message == "chain_key collision":
        print_header(pr, f"WARNING: {message}", finding, summary)
        pr(f"{finding.task}: Hash chain already cached but the contents don't match!")
        dump_stack(pr, finding)
        return
    pr("")
    pr("------------[ cut here ]------------" if not message.startswith("BUG: ") else message)
    print_kernel_ident(pr, finding, summary)
    if finding.uncertain:
        pr.wrapped("NOTE: uncertain: ", finding.uncertain)
    print_report_origin(pr, finding)
    if message.startswith("BUG: "):
        pr("turning off the locking correctness validator.")
    else:
        pr(message)
        warned_at = finding.details.get("warned_at")
        if warned_at:
            pr(f"WARNING: at {warned_at}")
    pr.wrapped("NOTE: ", "lockdep turned itself off here: the kernel checked no locking after it")
    if finding.task != "?":
        pr(f"task: {finding.task}")


def brief(finding: Finding) -> Optional[str]:
    """What the kind adds to a one-line message (SARIF, GitHub), or None.

    >>> f = Finding("invalid-wait-context", "T1", "&port->lock", "t.lt:5", held="&desc->lock",
    ...             next=LockSnapshot("&port->lock", None, "", None, waits="3:3"), details={"context": "5:5"})
    >>> brief(f)
    '&port->lock-{3:3} taken in context-{5:5}, holding &desc->lock'
    """
    if finding.kind == INVALID_WAIT:
        waits = finding.next.waits if finding.next is not None else None
        text = finding.lock + (f"-{{{waits}}}" if waits else "")
        context = finding.details.get("context")
        if context:
            text += f" taken in context-{{{context}}}"
        if finding.held:
            held = finding.prev.waits if finding.prev is not None else None
            text += f", holding {finding.held}" + (f"-{{{held}}}" if held else "")
        return text
    if finding.kind == RCU_USAGE and finding.details.get("check"):
        return f"{finding.lock} {finding.details['check']}"
    if finding.kind == LOCKDEP_WARNING and finding.details.get("warned_at"):
        return f"raised at {finding.details['warned_at']}"
    if finding.kind == LOCKDEP_WARNING:
        return finding.lock if finding.lock != finding.message else "lockdep turned itself off"
    return None


#: kind -> the function printing its report (merged into `lockcheck.report.text.PRINTERS`)
KERNEL_PRINTERS: dict[str, Callable[[Finding, "Summary", _Out], None]] = {
    INVALID_WAIT: print_lock_invalid_wait_context,
    BAD_CONTENTION: print_lock_contention_bug,
    RCU_USAGE: lockdep_rcu_suspicious,
    LOCKDEP_WARNING: print_lockdep_warning,
    **WARN_PRINTERS,
}
