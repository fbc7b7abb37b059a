"""Text layouts of lockdep's WARNs that are no report of their own: the asserts
(`lockdep_assert_held*()`, `lockdep_assert_not_held()`, `lockdep_assert_irqs_*()`: a `WARN_ON()`
at the caller), the pins (`WARN(1, "pinning an unheld lock\\n")` and the others in
`__lock_pin_lock()`, `__lock_unpin_lock()`, `__lock_release()`) and `__lock_downgrade()`'s
`WARN(hlock->read, "downgrading a read lock")`.

Each is laid out as the kernel's `__warn()` prints it: the cut-here rule, the WARN's message
(a `WARN_ON()` has none), `WARNING: CPU: N PID: TASK at FILE FUNCTION`, then -- where the
kernel dumps modules, registers and a call trace -- lockcheck's ident line, what failed
(for an assert), the task's held locks and where in the trace it happened (`Call Trace:`).
`WARN_PRINTERS` maps each kind to its function; `lockcheck.report.kernel_reports` merges it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Callable

from lockcheck.lockdep.findings import ASSERTION_FAILED, BAD_DOWNGRADE, PIN_VIOLATION, Finding
from lockcheck.report.printk import _Out, _site, dump_stack, lockdep_print_held_locks, print_kernel_ident, print_report_origin

if TYPE_CHECKING:
    from lockcheck.report import Summary

#: where lockdep's own WARNs are (`__warn()` prints the file of the WARN)
LOCKDEP_C = "kernel/locking/lockdep.c"


def print_warn(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`__warn()`: a lockdep WARN (pin, downgrade: its message first) or an assert's WARN_ON()."""
    cpu = finding.details.get("cpu")
    cpu_text = "?" if cpu is None else str(cpu)
    pr("", "------------[ cut here ]------------")
    if finding.kind == ASSERTION_FAILED:
        # WARN_ON(debug_locks && !(cond)) in the caller: no message, the caller's site
        pr(f"WARNING: CPU: {cpu_text} PID: {finding.task} at {_site(finding) or finding.location}")
    else:
        pr(finding.message)
        pr(f"WARNING: CPU: {cpu_text} PID: {finding.task} at {LOCKDEP_C} {finding.details.get('warned_at', '')}"
           .rstrip())
    print_kernel_ident(pr, finding, summary)
    if finding.uncertain:
        pr.wrapped("NOTE: uncertain: ", finding.uncertain)
    print_report_origin(pr, finding)
    if finding.kind == ASSERTION_FAILED:
        pr(finding.message.removeprefix("WARNING: "))
    elif finding.next is not None:
        pins = finding.details.get("pins") or 0
        pr(f"{finding.task}: {finding.lock}" + (f" (pinned {pins} time{'s' if pins > 1 else ''})" if pins else ""))
    pr("")
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding, "Call Trace:")


#: kind -> the function printing its WARN (merged into `kernel_reports.KERNEL_PRINTERS`)
WARN_PRINTERS: dict[str, Callable[[Finding, "Summary", _Out], None]] = {
    ASSERTION_FAILED: print_warn,
    BAD_DOWNGRADE: print_warn,
    PIN_VIOLATION: print_warn,
}
