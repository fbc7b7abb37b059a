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
from typing import TYPE_CHECKING, Callable, TextIO

from lockcheck.util.wording import count
from lockcheck.lockdep.findings import (
    CIRCULAR,
    HELD_AT_EXIT,
    HELD_AT_FORK,
    HELD_FREED,
    MAX_DEPTH,
    MESSAGES,
    NEST_NOT_HELD,
    ORDER_VIOLATION,
    RECURSIVE,
    UNLOCK_IMBALANCE,
    ChainLink,
    Finding,
    LockSnapshot,
)

from lockcheck.report.irq_reports import IRQ_PRINTERS
from lockcheck.report.kernel_reports import KERNEL_PRINTERS
from lockcheck.report.printk import (  # noqa: F401 -- `text._Out`, `text.dump_stack`... for lockcheck.python
    CPU1,
    NOT_IN_LOG,
    _held_line,
    _next,
    _prev,
    _verb,
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
    pr("", f"-> #{link.depth}{print_lock_name(link.cls, link.usage, link.waits)}:")
    if link.frames:  # a kernel report's entry: its frames as the kernel printed them (`%*c%pS`, 7 blanks)
        for frame in link.frames:
            pr(f"{' ' * 7}{frame}")
        return
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


def print_summary(findings: "list[Finding] | Counter", summary: "Summary", out: TextIO,
                  blank_first: bool = False) -> None:
    """One line for the run (after a blank line if `blank_first`), then `lockcheck: note: ...` lines.

    `findings` may be the findings or, for a report that did not keep them
    (`text_groups`), how many there were of each kind.  When an input could
    not be read the line never says "no problems found": what was read is
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
    kinds = findings if isinstance(findings, Counter) else Counter(finding.kind for finding in findings)
    total = sum(kinds.values())
    if total:
        per_kind = ", ".join(f"{kinds[kind]} {kind}" for kind in sorted(kinds))
        line = f"lockcheck: {count(total, 'finding')} ({per_kind}) in {scope}"
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
    **IRQ_PRINTERS,
    MAX_DEPTH: print_lock_depth_bug,
    ORDER_VIOLATION: print_order_violation,
    HELD_AT_FORK: print_held_at_fork,
    **KERNEL_PRINTERS,
}
