"""The irq reports in the kernel's layout: `inconsistent lock state` (`print_usage_bug`), the
irq lock inversion (`print_irq_inversion_bug`) and `HARDIRQ-safe -> HARDIRQ-unsafe lock order
detected` (`print_bad_irq_dependency`), with the usage traces and scenarios they print."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any, Callable, Optional

from lockcheck.lockdep.findings import INCONSISTENT, IRQ_INVERSION, ChainLink, Evidence, Finding, LockSnapshot
from lockcheck.report.printk import (
    CPU1, NOT_IN_LOG, _held_line, _missing, _next, _Out, _prev, _task_irq, _where, dump_stack,
    lockdep_print_held_locks, print_header, print_lock, print_lock_name, print_lock_trace,
)

if TYPE_CHECKING:
    from lockcheck.report import Summary

#: `enum lock_usage_bit` order, in which `print_lock_class_header` lists bits
USAGE_BITS = (
    "IN-HARDIRQ-W", "IN-HARDIRQ-R", "HARDIRQ-ON-W", "HARDIRQ-ON-R",
    "IN-SOFTIRQ-W", "IN-SOFTIRQ-R", "SOFTIRQ-ON-W", "SOFTIRQ-ON-R",
    "INITIAL USE", "INITIAL READ USE",
)



# -- 1.3 inconsistent lock state -------------------------------------------------


def print_usage_bug(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`print_usage_bug(curr, this, prev_bit, new_bit)`: irq-safe and irq-unsafe use of one class (§1.3)."""
    details = finding.details
    this = _next(finding)
    prev_bit = details.get("prev_bit", "?")
    print_header(pr, f"WARNING: {finding.message}", finding, summary)
    pr(f"inconsistent {{{prev_bit}}} -> {{{details.get('new_bit', '?')}}} usage.")
    pr(f"{_task_irq(finding)} takes:", print_lock(this, finding.location))
    pr(f"{{{prev_bit}}} state was registered at:")
    print_lock_trace(pr, details.get("usage_traces", {}).get(prev_bit), 1)
    print_irqtrace_events(pr, details.get("irq_events"))
    pr("", "other info that might help us debug this:")
    print_usage_bug_scenario(pr, this)
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding)


def print_irqtrace_events(pr: _Out, events: Optional[dict[str, Any]]) -> None:
    """`print_irqtrace_events(curr)`: the last irq-state changes, when the checker tracks them."""
    if not events:
        return
    pr(f"irq event stamp: {events.get('stamp', 0)}")
    for label, key in (
        ("hardirqs last  enabled at", "hardirqs_enabled"),
        ("hardirqs last disabled at", "hardirqs_disabled"),
        ("softirqs last  enabled at", "softirqs_enabled"),
        ("softirqs last disabled at", "softirqs_disabled"),
    ):
        entry = events.get(key)
        if entry:
            stamp, evidence = entry
            pr(f"{label} ({stamp}): {_where(evidence)}")
        else:  # the kernel prints `(0): 0x0`; a trace has no address to show
            pr(f"{label} (0): none in the trace")


def print_usage_bug_scenario(pr: _Out, this: LockSnapshot) -> None:
    """`print_usage_bug_scenario(lock)`: the lock, then the same lock from an interrupt."""
    pr(" Possible unsafe locking scenario:", "")
    pr("       CPU0", "       ----")
    pr(f"  lock({this.name});", "  <Interrupt>", f"    lock({this.name});")
    pr("", " *** DEADLOCK ***", "")


# -- 1.4 / 1.5 irq lock inversion ------------------------------------------------


def print_irq_bug(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """irq-lock-inversion: by a change of irq state (§1.4) or by an acquisition (§1.5)."""
    if finding.irq_report == "bad_dependency":
        print_bad_irq_dependency(finding, summary, pr)
    else:
        print_irq_inversion_bug(finding, summary, pr)


def print_irq_inversion_bug(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`print_irq_inversion_bug()`: a class changed irq state against a class it is connected to (§1.4)."""
    details = finding.details
    this = _next(finding)
    other: LockSnapshot = details.get("other") or LockSnapshot(finding.held or "?", None, "", None)
    irqclass = details.get("irqclass", "?")
    forwards = bool(details.get("forwards", True))
    path: list[ChainLink] = list(details.get("path") or [])
    print_header(pr, f"WARNING: {finding.message}", finding, summary)
    pr(f"{finding.task} just changed the state of lock:", print_lock(this, finding.location))
    if _missing(finding, "held"):  # which way, and with which class: the log does not say
        pr(NOT_IN_LOG)
    elif forwards:
        pr(f"but this lock took another, {irqclass}-unsafe lock in the past:")
    else:
        pr(f"but this lock was taken by another, {irqclass}-safe lock in the past:")
    if not _missing(finding, "held"):
        pr(print_lock_name(other.name, other.usage))
    pr("", "", "and interrupts could create inverse lock ordering between them.", "")
    pr("", "other info that might help us debug this:")
    middle = path[-2].cls if len(path) >= 2 else None
    if _missing(finding, "held"):
        pass
    elif forwards:
        print_irq_lock_scenario(pr, this.name, other.name, middle or this.name, other.name)
    else:
        print_irq_lock_scenario(pr, other.name, this.name, middle or other.name, this.name)
    lockdep_print_held_locks(pr, finding)
    pr("", "the shortest dependencies between 2nd lock and 1st lock:")
    print_shortest_lock_dependencies(pr, path, details.get("class_usage_traces", {}))
    dump_stack(pr, finding)


def print_bad_irq_dependency(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`print_bad_irq_dependency()`: the new prev -> next edge connects irq-safe to irq-unsafe (§1.5)."""
    details = finding.details
    nxt, prv = _next(finding), _prev(finding)
    irqclass = details.get("irqclass", "?")
    safe: LockSnapshot = details.get("safe") or prv
    unsafe: LockSnapshot = details.get("unsafe") or nxt
    safe_bit, unsafe_bit = _irq_bits(irqclass, details)
    traces = details.get("usage_traces", {})
    usage_traces = details.get("class_usage_traces", {})
    # The kernel's rule keeps the length of the format string (53); ours
    # follows the expanded title (`Finding.message`), as for every other report.
    print_header(pr, f"WARNING: {finding.message}", finding, summary)
    pr(f"{_task_irq(finding)} is trying to acquire:", print_lock(nxt, finding.location))
    pr("", "and this task is already holding:", _held_line(finding, prv))
    pr("which would create a new lock dependency:")
    pr(f"{print_lock_name(prv.name, prv.usage)} ->{print_lock_name(nxt.name, nxt.usage)}")
    pr("", f"but this new dependency connects a {irqclass}-irq-safe lock:")
    pr(print_lock_name(safe.name, safe.usage))
    pr("", f"... which became {irqclass}-irq-safe at:")
    print_lock_trace(pr, traces.get(safe_bit), 1)
    pr("", f"to a {irqclass}-irq-unsafe lock:")
    pr(print_lock_name(unsafe.name, unsafe.usage))
    pr("", f"... which became {irqclass}-irq-unsafe at:", "...")
    print_lock_trace(pr, traces.get(unsafe_bit), 1)
    pr("", "other info that might help us debug this:", "")
    if not _missing(finding, "held"):
        print_irq_lock_scenario(pr, safe.name, unsafe.name, prv.name, nxt.name)
    lockdep_print_held_locks(pr, finding)
    pr("", f"the dependencies between {irqclass}-irq-safe lock and the holding lock:")
    print_shortest_lock_dependencies_backwards(pr, list(details.get("safe_path") or []), usage_traces)
    # one pr_warn("...acquired" " and ...") split in two lines by modern printk
    pr("", "the dependencies between the lock to be acquired", f" and {irqclass}-irq-unsafe lock:")
    print_shortest_lock_dependencies(pr, list(details.get("unsafe_path") or []), usage_traces)
    dump_stack(pr, finding)


def print_irq_lock_scenario(pr: _Out, safe: str, unsafe: str, prev_class: str, next_class: str) -> None:
    """`print_irq_lock_scenario(safe_entry, unsafe_entry, prev_class, next_class)`."""
    middle = next_class if prev_class == safe else prev_class
    if middle != unsafe:
        pr("Chain exists of:", f"  {safe} --> {middle} --> {unsafe}", "")
    pr(" Possible interrupt unsafe locking scenario:", "")
    pr("       CPU0                    CPU1", "       ----                    ----")
    pr(f"  lock({unsafe});")
    pr(f"{CPU1}local_irq_disable();")
    pr(f"{CPU1}lock({safe});")
    pr(f"{CPU1}lock({middle});")
    pr("  <Interrupt>", f"    lock({safe});")
    pr("", " *** DEADLOCK ***", "")


def print_lock_class_header(pr: _Out, link: ChainLink, usage_traces: dict[str, dict[str, Evidence]]) -> None:
    """`print_lock_class_header(class, depth)`: `-> (CLASS){usage} {`, its usage bits, ` }`.

    The kernel's `... key      at:` line is left out: a trace has no key address.
    """
    pad = " " * link.depth
    pr(f"{pad}->{print_lock_name(link.cls, link.usage)} {{")
    for bit, evidence in _in_bit_order(usage_traces.get(link.cls, {})):
        head = f"{pad}   {bit}"
        pr(f"{head} at:")
        # len = depth + what the two printk calls returned, as the kernel computes it
        print_lock_trace(pr, evidence, link.depth + len(head) + len(" at:\n"))
    pr(f"{pad} }}")


def print_shortest_lock_dependencies(
    pr: _Out, path: list[ChainLink], usage_traces: dict[str, dict[str, Evidence]]
) -> None:
    """`print_shortest_lock_dependencies(leaf, root)`: each class and where it was acquired."""
    for link in path:
        print_lock_class_header(pr, link, usage_traces)
        pr(f"{' ' * link.depth} ... acquired at:")
        print_lock_trace(pr, link.evidence, 2)
        pr("")


def print_shortest_lock_dependencies_backwards(
    pr: _Out, path: list[ChainLink], usage_traces: dict[str, dict[str, Evidence]]
) -> None:
    """`print_shortest_lock_dependencies_backwards(leaf, root)`: each block shows the previous entry's trace."""
    previous: Optional[Evidence] = None
    for link in path:
        print_lock_class_header(pr, link, usage_traces)
        if previous is not None:
            pr(f"{' ' * link.depth} ... acquired at:")
            print_lock_trace(pr, previous, 2)
            pr("")
        previous = link.evidence


def _irq_bits(irqclass: str, details: dict[str, Any]) -> tuple[str, str]:
    # state_name(backward_bit): "X-READ" when the safe class is only read-safe;
    # the unsafe side is then still the write bit (exclusive_bit() drops read)
    state, _, read = irqclass.partition("-")
    return (
        details.get("safe_bit", f"IN-{state}-{'R' if read == 'READ' else 'W'}"),
        details.get("unsafe_bit", f"{state}-ON-W"),
    )


def _in_bit_order(traces: dict[str, Evidence]) -> list[tuple[str, Evidence]]:
    rank = {bit: i for i, bit in enumerate(USAGE_BITS)}
    return sorted(traces.items(), key=lambda item: rank.get(item[0], len(rank)))


#: kind -> the function printing its report
IRQ_PRINTERS: dict[str, Callable[[Finding, "Summary", _Out], None]] = {
    INCONSISTENT: print_usage_bug,
    IRQ_INVERSION: print_irq_bug,
}
