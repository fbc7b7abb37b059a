"""`--format text`: findings in the layout of the kernel's lockdep splats.

One function per kernel print function (kernel/locking/lockdep.c, the
modern layout), under the same name, so a
kernel engineer finds `print_deadlock_bug`, `print_circular_bug`,
`print_usage_bug`... here.  What lockcheck changes, deliberately:

- the `print_kernel_ident()` line is `lockcheck VERSION  FILE` (the trace
  file of the finding);
- `TASK` is the trace's task name as written (`qemu-kvm/64239`), printed
  where the kernel prints `%s/%d`;
- a lock line is `print_lock`'s `INSTANCE (CLASS){USAGE}, at: SITE`,
  with the `-{O:I}` wait types where they are known (`LockSnapshot.waits`);
  a lock with
  no instance prints as ` (CLASS){USAGE}` with the leading blank of OLD
  kernels; with no `at=` site the trace location (`trace.lt:12`) is printed;
- where the kernel prints a stack trace, the trace location and task of
  the event and its site are printed as frames (`print_lock_trace`), and
  `stack backtrace:` is followed by the same for the reported event;
- `NOTE: uncertain: REASON` follows the header when `Finding.uncertain`;
- after all findings, one summary line (`print_summary`);
- every line is printed through `lockcheck.util.escape.visible`: a name holding a
  newline or an escape sequence shows it as `\\n` or `\\x1b`.

Where the kernel fills `%s` in a title (the bad-irq-dependency title and
`%s/%d still has locks held!`) its rule keeps the length of the format
string; lockcheck makes the rule as long as the expanded title (the spec's
"rule as long as the title").

Snapshots used by every layout: `Finding.next` is the lock the finding is
about (the JSON `lock`: being acquired, released, freed, or whose usage
changed), `Finding.prev` the held lock it conflicts with; `held_locks` the
task's held list as `lockdep_print_held_locks` prints it (before the new
lock is pushed).  A missing snapshot is synthesised from `lock`/`held`.

`Finding.details` keys read here (all optional unless marked; the irq
checker fills them):

inconsistent-lock-state (`print_usage_bug`):
    prev_bit (required)  str  usage bit already recorded, `usage_str[]` spelling:
                              "IN-HARDIRQ-W", "IN-HARDIRQ-R", "HARDIRQ-ON-W",
                              "HARDIRQ-ON-R", the same for SOFTIRQ,
                              "INITIAL USE", "INITIAL READ USE", "IN-NMI"
    new_bit (required)   str  usage bit being added, same spelling
    irq_state            str  "[HC1[1]:SC0[0]:HE0:SE1]" printed after the task
    usage_traces         dict[str, Evidence]  bit -> where the class first got it;
                              `usage_traces[prev_bit]` is printed under
                              "{prev_bit} state was registered at:"
    irq_events           dict, `print_irqtrace_events`: {"stamp": int,
                              "hardirqs_enabled", "hardirqs_disabled",
                              "softirqs_enabled", "softirqs_disabled":
                              [event_number: int, Evidence] or None}

irq-lock-inversion, raised by a change of irq state (`print_irq_inversion_bug`):
    irq_report           "inversion" (default when `Finding.prev` is None)
    irqclass (required)  str  "HARDIRQ", "SOFTIRQ", "HARDIRQ-READ", "SOFTIRQ-READ"
    forwards (required)  bool True: `next` (now irq-safe) took an irq-unsafe
                              lock in the past; False: `next` (now irq-unsafe)
                              was taken under an irq-safe lock in the past
    other (required)     LockSnapshot  the class at the other end (name, usage)
    path                 list[ChainLink]  the BFS path printed by
                              `print_shortest_lock_dependencies(other, root)`,
                              as printed: path[0] is `other` (depth len-1),
                              path[-1] the root `next` (depth 0); each link's
                              evidence is where link.cls was acquired with the
                              following link's class held (forwards) / where
                              the following class was taken with link.cls held
                              (backwards) -- the kernel's `entry->trace`;
                              path[-2] is the scenario's middle class
    class_usage_traces   dict[str, dict[str, Evidence]]  class -> bit ->
                              where it got the bit, for the `{ ... }` blocks

irq-lock-inversion, raised by an acquisition (`print_bad_irq_dependency`):
    irq_report           "bad_dependency" (default when `Finding.prev` is set)
    irqclass (required)  str  as above; the title is "IRQCLASS-safe -> IRQCLASS-unsafe"
    irq_state            str  "[HC0[0]:SC0[0]:HE1:SE1]"
    safe (required)      LockSnapshot  the irq-safe class (`backwards_entry`)
    unsafe (required)    LockSnapshot  the irq-unsafe class (`forwards_entry`)
    safe_bit, unsafe_bit str  the two bits ("IN-HARDIRQ-W", "HARDIRQ-ON-W");
                              default "IN-<STATE>-W" / "<STATE>-ON-W"
                              ("IN-<STATE>-R" for a "<STATE>-READ" irqclass)
    usage_traces         dict[str, Evidence]  safe_bit -> where `safe` became
                              irq-safe, unsafe_bit -> where `unsafe` became
                              irq-unsafe
    safe_path            list[ChainLink]  `safe` (depth len-1) ... `prev` (depth 0),
                              as printed by
                              `print_shortest_lock_dependencies_backwards`;
                              safe_path[i].evidence is where safe_path[i+1].cls
                              was acquired with safe_path[i].cls held (printed
                              under block i+1, as the kernel does); the last
                              link's evidence is not printed
    unsafe_path          list[ChainLink]  `unsafe` (depth len-1) ... `next`
                              (depth 0), as printed by
                              `print_shortest_lock_dependencies`; each link's
                              evidence is where link.cls was acquired with the
                              following link's class held
    class_usage_traces   as above

held-at-exit:
    task_exit            bool  True: `do_exit()`'s `print_held_locks_bug`
                              ("TASK still has locks held!", with backtrace);
                              default: `lockdep_sys_exit` ("lock held when
                              returning to user space!")

held-lock-freed (`print_freed_lock_bug`):
    mem_from, mem_to     str  the freed range as printed (`mem_to` inclusive);
                              default: the freed lock's instance (or class)

lock-depth-exceeded:
    depth, max           int  default len(held_locks), 48

order-violation:
    declared (required)  list[str]  the declared order the dependency contradicts,
                              outermost first ("A", "B": A is taken before B)
    declared_at          str  where that order was declared ("order.toml:3")
    evidence             Evidence  where the reverse dependency was first seen,
                              when it is not the current event
"""

from __future__ import annotations

from collections import Counter
from typing import TYPE_CHECKING, Any, Callable, Optional, TextIO

from lockcheck.util.wording import count
from lockcheck.lockdep.findings import (
    CIRCULAR,
    HELD_AT_EXIT,
    HELD_AT_FORK,
    HELD_FREED,
    INCONSISTENT,
    IRQ_INVERSION,
    MAX_DEPTH,
    MESSAGES,
    NEST_NOT_HELD,
    ORDER_VIOLATION,
    RECURSIVE,
    UNLOCK_IMBALANCE,
    ChainLink,
    Evidence,
    Finding,
    LockSnapshot,
)

from lockcheck.report.kernel_reports import KERNEL_PRINTERS
from lockcheck.report.printk import (  # noqa: F401 -- `text._Out`, `text.dump_stack`... for lockcheck.python
    NOT_IN_LOG,
    _missing,
    _Out,
    _site,
    dump_stack,
    lockdep_print_held_locks,
    print_header,
    print_kernel_ident,
    print_lock,
    print_lock_name,
    print_lock_trace,
    print_report_origin,
)

if TYPE_CHECKING:
    from lockcheck.report import Summary

from lockcheck.lockdep.rules import MAX_LOCK_DEPTH  # noqa: E402 - the limit a report prints

#: `enum lock_usage_bit` order, in which `print_lock_class_header` lists bits
USAGE_BITS = (
    "IN-HARDIRQ-W", "IN-HARDIRQ-R", "HARDIRQ-ON-W", "HARDIRQ-ON-R",
    "IN-SOFTIRQ-W", "IN-SOFTIRQ-R", "SOFTIRQ-ON-W", "SOFTIRQ-ON-R",
    "INITIAL USE", "INITIAL READ USE",
)

#: the scenario's CPU1 column: 31 blanks
CPU1 = " " * 31


# -- entry point -----------------------------------------------------------------


def render(findings: list[Finding], summary: "Summary", out: TextIO) -> None:
    """Print every finding in its kernel layout, then the summary line."""
    for finding in findings:
        print_finding(finding, summary, out)
    if not summary.quiet:
        print_summary(findings, summary, out, blank_first=bool(findings))


def print_finding(finding: Finding, summary: "Summary", out: TextIO) -> None:
    """Dispatch on the kind to the kernel's report function for it."""
    PRINTERS.get(finding.kind, print_generic_bug)(finding, summary, _Out(out))


# -- 1.1 possible recursive locking detected -------------------------------------


def print_deadlock_bug(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`print_deadlock_bug(curr, prev, next)`: same class already held (lockdep.md §1.1)."""
    nxt, prv = _next(finding), _prev(finding)
    print_header(pr, f"WARNING: {finding.message}", finding, summary)
    pr(f"{finding.task} is trying to acquire lock:", print_lock(nxt, finding.location))
    pr("", "but task is already holding lock:", _held_line(finding, prv))
    pr("", "other info that might help us debug this:")
    if not _missing(finding, "held"):
        print_deadlock_scenario(pr, nxt, prv)
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding)


def print_deadlock_scenario(pr: _Out, nxt: LockSnapshot, prv: LockSnapshot) -> None:
    """`print_deadlock_scenario(nxt, prv)`: always `lock(`, whatever the read mode."""
    pr(" Possible unsafe locking scenario:", "")
    pr("       CPU0", "       ----")
    pr(f"  lock({prv.name});", f"  lock({nxt.name});")
    pr("", " *** DEADLOCK ***", "")
    pr.nesting_notation()


# -- 1.2 possible circular locking dependency detected ---------------------------


def print_circular_bug(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`print_circular_bug()`: adding prev -> next closes a cycle (lockdep.md §1.2).

    `finding.chain` is in printed order: chain[0] is `-> #N` (prev's class),
    chain[-1] is `-> #0` (next's class, the lock being acquired).
    """
    nxt, prv = _next(finding), _prev(finding)
    print_circular_bug_header(pr, finding, summary, nxt, prv)
    if _missing(finding, "chain"):
        pr("", NOT_IN_LOG)
    for link in finding.chain:
        print_circular_bug_entry(pr, link)
    pr("", "other info that might help us debug this:", "")
    if not _missing(finding, "held"):
        print_circular_lock_scenario(pr, finding, nxt, prv)
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding)


def print_circular_bug_header(
    pr: _Out, finding: Finding, summary: "Summary", nxt: LockSnapshot, prv: LockSnapshot
) -> None:
    """`print_circular_bug_header()`: the two locks and the chain heading."""
    print_header(pr, f"WARNING: {finding.message}", finding, summary)
    pr(f"{finding.task} is trying to acquire lock:", print_lock(nxt, finding.location))
    pr("", "but task is already holding lock:", _held_line(finding, prv))
    pr("", "which lock already depends on the new lock.", "")
    pr("", "the existing dependency chain (in reverse order) is:")


def print_circular_bug_entry(pr: _Out, link: ChainLink) -> None:
    """`print_circular_bug_entry(e, depth)`: `-> #N (CLASS){usage}:` and where the dependency was first seen."""
    pr("", f"-> #{link.depth}{print_lock_name(link.cls, link.usage)}:")
    print_lock_trace(pr, link.evidence, 6)


def print_circular_lock_scenario(pr: _Out, finding: Finding, src: LockSnapshot, tgt: LockSnapshot) -> None:
    """`print_circular_lock_scenario(src, tgt, prt)`: source = next, target = prev,
    parent = the class just before prev on the path (chain[1])."""
    chain = finding.chain
    source = chain[-1].cls if chain else src.name
    target = chain[0].cls if chain else tgt.name
    parent = chain[1].cls if len(chain) >= 2 else source
    if parent != source:
        pr("Chain exists of:", f"  {source} --> {parent} --> {target}", "")
    pr(" Possible unsafe locking scenario:", "")
    pr("       CPU0                    CPU1", "       ----                    ----")
    pr(f"  {pr.verb(target, _verb(tgt), True)}({target});")
    pr(f"{CPU1}{pr.verb(parent, 'lock', True)}({parent});")
    pr(f"{CPU1}{pr.verb(target, 'lock', False)}({target});")
    pr(f"  {pr.verb(source, _verb(src), False)}({source});")
    pr("", " *** DEADLOCK ***", "")


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


# -- 1.6 - 1.10 ------------------------------------------------------------------


def print_unlock_imbalance_bug(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`print_unlock_imbalance_bug(curr, lock, ip)`: releasing a lock that is not held (§1.6)."""
    print_header(pr, f"WARNING: {finding.message}", finding, summary)
    # print_lockdep_cache(): the bare name; print_ip_sym(): the site
    pr(f"{finding.task} is trying to release lock ({finding.lock}) at:")
    pr(_site(finding) or finding.location)
    pr("but there are no more locks to release!")
    pr("", "other info that might help us debug this:")
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding)


def print_lock_nested_lock_not_held(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`print_lock_nested_lock_not_held()`: nest_lock passed but not held (§1.7); two backtraces, as the kernel."""
    print_header(pr, f"WARNING: {finding.message}", finding, summary)
    pr(f"{finding.task} is trying to lock:", print_lock(_next(finding), finding.location))
    pr("", "but this task is not holding:", finding.held or "?")
    dump_stack(pr, finding)
    pr("", "other info that might help us debug this:")
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding)


def print_held_locks_at_exit(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """held-at-exit: `lockdep_sys_exit()`, or `print_held_locks_bug()` when details["task_exit"]."""
    if finding.details.get("task_exit"):
        print_held_locks_bug(finding, summary, pr)
    else:
        lockdep_sys_exit(finding, summary, pr)


def lockdep_sys_exit(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`lockdep_sys_exit()`: locks held when returning to user space (§1.9); no backtrace."""
    print_header(pr, f"WARNING: {finding.message}", finding, summary)
    pr(f"{finding.task} is leaving the kernel with locks still held!")
    lockdep_print_held_locks(pr, finding)


def print_held_locks_bug(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`print_held_locks_bug()` from `debug_check_no_locks_held()` at `do_exit()` (§1.8)."""
    # The kernel's rule has the length of "WARNING: %s/%d still has locks held!"
    # (36); ours follows the expanded title (`Finding.message`).
    print_header(pr, f"WARNING: {finding.message}", finding, summary)
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding)


def print_freed_lock_bug(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`print_freed_lock_bug()`: memory holding a held lock is freed (§1.10)."""
    details = finding.details
    lock = _next(finding) if finding.next is not None else _prev(finding)
    if "mem_from" in details:
        memory = f"{details['mem_from']}-{details.get('mem_to', details['mem_from'])}"
    else:
        memory = lock.instance or lock.name
    print_header(pr, f"WARNING: {finding.message}", finding, summary)
    pr(f"{finding.task} is freeing memory {memory}, with a lock still held there!")
    pr(print_lock(lock, finding.location))
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding)


# -- 1.13 MAX_LOCK_DEPTH ---------------------------------------------------------


def print_lock_depth_bug(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """`__lock_acquire()`'s MAX_LOCK_DEPTH check: `print_lockdep_off()`, depth line, held list (§1.13).

    Not a framed report in the kernel; lockcheck adds the ident line so the
    trace file is named.  "turning off the locking correctness validator."
    is left out: lockcheck goes on checking.
    """
    details = finding.details
    pr("", f"BUG: {finding.message}")
    print_kernel_ident(pr, finding, summary)
    if finding.uncertain:
        pr.wrapped("NOTE: uncertain: ", finding.uncertain)
    print_report_origin(pr, finding)
    depth = details.get("depth", len(finding.held_locks))
    pr(f"depth: {depth}  max: {details.get('max', MAX_LOCK_DEPTH)}!")
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding)


# -- lockcheck's own ---------------------------------------------------------------


def print_order_violation(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """A dependency against a declared lock order (lockcheck.order); laid out like §1.5's opening."""
    details = finding.details
    nxt, prv = _next(finding), _prev(finding)
    declared: list[str] = list(details.get("declared") or [])
    print_header(pr, f"WARNING: {finding.message}", finding, summary)
    pr(f"{finding.task} is trying to acquire lock:", print_lock(nxt, finding.location))
    pr("", "and this task is already holding:", print_lock(prv, finding.location))
    pr("which would create a new lock dependency:")
    pr(f"{print_lock_name(prv.name, prv.usage)} ->{print_lock_name(nxt.name, nxt.usage)}")
    pr("", "but the declared lock order is:")
    pr("  " + " --> ".join(declared) if declared else "  ?")
    if details.get("declared_at"):
        pr(f"declared at: {details['declared_at']}")
    evidence = details.get("evidence")
    if evidence is not None:
        pr("", "the dependency was first observed at:")
        print_lock_trace(pr, evidence, 6)
    pr("", "other info that might help us debug this:")
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding)


def print_generic_bug(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """A kind without a layout of its own: title, the lock, held list, backtrace."""
    print_header(pr, f"WARNING: {MESSAGES.get(finding.kind, finding.kind)}", finding, summary)
    pr(f"{finding.task}: {finding.lock}" + (f" (holding {finding.held})" if finding.held else ""))
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding)


# -- summary -----------------------------------------------------------------------


def print_summary(findings: list[Finding], summary: "Summary", out: TextIO, blank_first: bool = False) -> None:
    """One line for the run (after a blank line if `blank_first`), then `lockcheck: note: ...` lines.

    When an input could not be read the line never says "no problems found": what was read is
    only part of the answer (the errors follow on stderr).
    """
    pr = _Out(out)
    if blank_first:
        pr("")
    scope = (
        f"{count(summary.events, 'event')}, {count(summary.tasks, 'task')}, "
        f"{count(summary.classes, 'lock class', 'lock classes')}, "
        f"{count(summary.dependencies, 'dependency', 'dependencies')}"
    )
    failed = count(len(summary.errors), "input")
    if findings:
        kinds = Counter(finding.kind for finding in findings)
        per_kind = ", ".join(f"{kinds[kind]} {kind}" for kind in sorted(kinds))
        line = f"lockcheck: {count(len(findings), 'finding')} ({per_kind}) in {scope}"
        if summary.errors:
            line += f"; incomplete: {failed} could not be read"
    elif summary.errors:
        line = f"lockcheck: no verdict: {failed} could not be read ({scope} read)"
    else:
        line = f"lockcheck: no problems found in {scope}"
    if summary.suppressed:
        line += f"; {summary.suppressed} suppressed"
    pr(line)
    for note in summary.notes:
        pr.wrapped("lockcheck: note: ", note)


# -- helpers -----------------------------------------------------------------------


def _held_line(finding: Finding, prv: LockSnapshot) -> str:
    """The held lock's `print_lock()` line, or NOT_IN_LOG when its report lost it."""
    return NOT_IN_LOG if _missing(finding, "held") else print_lock(prv, finding.location)


def _next(finding: Finding) -> LockSnapshot:
    return finding.next or LockSnapshot(finding.lock, None, "", finding.site)


def _prev(finding: Finding) -> LockSnapshot:
    return finding.prev or LockSnapshot(finding.held or finding.lock, None, "", None)


def _verb(lock: LockSnapshot) -> str:
    """The scenario verb: `rlock` when the kernel's `hlock->read` is non-zero."""
    return "rlock" if lock.mode else "lock"


def _task_irq(finding: Finding) -> str:
    state = finding.details.get("irq_state")
    return f"{finding.task} {state}" if state else finding.task


def _where(evidence: Evidence) -> str:
    """An Evidence on one line: `SITE (FILE:LINE)` or `FILE:LINE`."""
    return f"{evidence.at} ({evidence.location})" if evidence.at else evidence.location


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


def print_held_at_fork(finding: Finding, summary: "Summary", pr: _Out) -> None:
    """held-at-fork (not lockdep's): a forked child takes a lock a vanished thread held."""
    nxt = _next(finding)
    holder = finding.details.get("holder", "another thread")
    print_header(pr, f"WARNING: {finding.message}", finding, summary)
    pr(f"{finding.task} is trying to acquire lock:", print_lock(nxt, finding.location))
    if finding.details.get("process_target"):
        # the forking thread itself, in a multiprocessing child: its code does not go on here
        pr("", f"but {holder} held it when it started this process:", print_lock(_prev(finding)),
           "and the code that would release it does not run in the child:",
           "no thread of this process will ever release it.")
    else:
        pr("", f"but {holder} held it when the process forked, and did not survive the fork:",
           print_lock(_prev(finding)), "no thread of this process will ever release it.")
    pr("", " *** DEADLOCK ***", "")
    lockdep_print_held_locks(pr, finding)
    dump_stack(pr, finding)


#: kind -> the function printing its report
PRINTERS: dict[str, Callable[[Finding, "Summary", _Out], None]] = {
    RECURSIVE: print_deadlock_bug,
    CIRCULAR: print_circular_bug,
    UNLOCK_IMBALANCE: print_unlock_imbalance_bug,
    NEST_NOT_HELD: print_lock_nested_lock_not_held,
    HELD_AT_EXIT: print_held_locks_at_exit,
    HELD_FREED: print_freed_lock_bug,
    INCONSISTENT: print_usage_bug,
    IRQ_INVERSION: print_irq_bug,
    MAX_DEPTH: print_lock_depth_bug,
    ORDER_VIOLATION: print_order_violation,
    HELD_AT_FORK: print_held_at_fork,
    **KERNEL_PRINTERS,
}
