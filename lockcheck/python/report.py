"""The pytest plugin's reports: the kernel's layout, plus what a Python developer acts on.

Every report keeps the lockdep splat a kernel engineer knows (it is drawn
by `lockcheck.report.text`), with three changes for Python programs:

- where the kernel prints a stack trace, the program's own call stack
  (`Evidence.stack`, captured by the recorder when the dependency was first
  seen or the finding made), innermost frame first, and which thread in
  which test did it;
- the kernel's dead end "May be due to missing lock nesting notation"
  points at what Python code can do instead;
- a "How to fix" paragraph for the finding's kind that names the classes
  and the sites, and the exact `lockcheck_suppress` line that accepts it.

The CLI's reports of kernel traces never come here, so they stay
byte-for-byte the kernel's.
"""

from __future__ import annotations

import re
from typing import Callable, Optional, TextIO

from lockcheck.lockdep.findings import (
    CIRCULAR,
    HELD_AT_EXIT,
    HELD_AT_FORK,
    INCONSISTENT,
    IRQ_INVERSION,
    MAX_DEPTH,
    ORDER_VIOLATION,
    RECURSIVE,
    Evidence,
    Finding,
    Frame,
    LockSnapshot,
)
from lockcheck.python.stacks import FOLDED, is_folded
from lockcheck.report import Summary, text

DEFAULT_DEPTH = 5
#: `MainThread/1 [tests/t.py::test_a]`: the recorder's task name, and the test that ran
_TASK_IN_TEST = re.compile(r"^(?P<task>\S+) \[(?P<test>.*)\]$")


class PythonOut(text._Out):
    """The kernel renderer's printer, drawing Python stacks where the kernel draws its own."""

    def __init__(self, out: TextIO, finding: Finding, depth: int = DEFAULT_DEPTH) -> None:
        super().__init__(out)
        self.finding = finding
        self.depth = depth

    def frames(self, evidence: Evidence, indent: str) -> bool:
        stack = evidence.stack or self._current_stack(evidence)
        if not stack or not self.depth:
            return False
        for frame in shown(stack, self.depth):
            self(f"{indent}{frame_text(frame)}")
        self(f"{indent}{by_whom(evidence.task)}")
        return True

    def backtrace(self, finding: Finding) -> bool:
        stack = finding.details.get("stack")
        if not stack or not self.depth:
            return False
        for frame in shown(stack, self.depth):
            self(f" {frame_text(frame)}")
        self(f" {by_whom(finding.task)}")
        return True

    def nesting_notation(self) -> None:
        self(" May be due to missing lock nesting notation: in Python, lockcheck.nested()",
             " on the inner lock, a declared order, or a suppression (see How to fix)", "")

    def verb(self, name: str, verb: str, held: bool) -> str:
        """An event class of `--lockcheck-waits`: waited for, or held by what completes it."""
        from lockcheck.python.event_classes import is_event

        if not is_event(name):
            return verb
        return "completing" if held else "wait_for_completion"

    def _current_stack(self, evidence: Evidence) -> Optional[tuple[Frame, ...]]:
        """The chain's `-> #0` is the event being reported: its stack is the finding's."""
        finding = self.finding
        if evidence.location == finding.location and evidence.task == finding.task:
            return finding.details.get("stack")
        return None


def print_finding(finding: Finding, summary: Summary, out: TextIO, depth: int = DEFAULT_DEPTH,
                  key_of: Optional[Callable[[str], str]] = None) -> None:
    """One finding: the kernel's layout with Python stacks, then How to fix and the suppression line."""
    pr = PythonOut(out, finding, depth)
    text.PRINTERS.get(finding.kind, text.print_generic_bug)(finding, summary, pr)
    print_waits(pr, finding)
    print_how_to_fix(pr, finding)
    print_suppression(pr, finding, key_of)


def render(findings: list[Finding], summary: Summary, out: TextIO, depth: int = DEFAULT_DEPTH,
           key_of: Optional[Callable[[str], str]] = None) -> None:
    """Every finding, then the summary line (as `lockcheck.report.text.render`)."""
    for finding in findings:
        print_finding(finding, summary, out, depth, key_of)
    if findings:
        out.write("\n")
    text.print_summary(findings, summary, out)


# -- waits on events (--lockcheck-waits) --------------------------------------------


def print_waits(pr: text._Out, finding: Finding) -> None:
    """The kernel layout extended by the waits: which dependencies of the cycle are waits on an
    event ("waits for completion of ...") and which are what completing that event needs."""
    from lockcheck.python.event_classes import describe, is_event

    chain = finding.chain
    # (held class, taken class, where, task) for each dependency of the cycle, the new one last
    pairs = [(chain[i + 1].cls, chain[i].cls, chain[i].evidence.at or chain[i].evidence.location,
              chain[i].evidence.task) for i in range(len(chain) - 1)]
    if finding.held is not None:
        pairs.append((finding.held, finding.lock, finding.site or finding.location, finding.task))
    lines = []
    for held, taken, site, task in pairs:
        if is_event(taken):
            lines.append(f" {split_task(task)[0]} waits for completion of {taken} at {site}, holding {held}")
            lines.append(f"   ({taken}: {describe(taken)})")
        elif is_event(held):
            # a thread's run and a work item hold their event throughout; other events are one call
            how = "takes it at" if held.startswith(("Thread(", "Future(")) else \
                "holds it when it signals the event (taken at"
            close = "" if how.startswith("takes") else ")"
            lines.append(f" completing {held} needs {taken}: {split_task(task)[0]} {how} {site}{close}")
    if lines:
        pr("", "the cycle goes through waits on events (--lockcheck-waits; a wait is an acquisition",
           "of its event's class, and what completes the event holds that class):")
        pr(*lines)


# -- How to fix ------------------------------------------------------------------


def print_how_to_fix(pr: text._Out, finding: Finding) -> None:
    advice = _ADVICE.get(finding.kind)
    lines = advice(finding) if advice is not None else []
    if lines:
        pr("", "How to fix:")
        pr(*(f"  {line}" if line else "" for line in lines))


def circular_advice(finding: Finding) -> list[str]:
    """Take the locks in one order: which orders were seen where, and which acquisition breaks it."""
    from lockcheck.python.event_classes import is_event

    chain = finding.chain
    events = [cls for cls in dict.fromkeys([link.cls for link in chain] + [finding.lock]) if is_event(cls)]
    if events:
        return wait_advice(finding, events)
    prev, nxt = finding.held or "?", finding.lock
    order = [link.cls for link in reversed(chain)] if len(chain) >= 2 else [nxt, prev]
    lines = ["Take these locks in one order everywhere. The order seen first is",
             f"{' -> '.join(order)}:"]
    # chain[i] was taken with chain[i+1] held, first at chain[i].evidence
    for i in range(len(chain) - 2, -1, -1):
        lines += _acquisition(f"{chain[i + 1].cls}, then {chain[i].cls}", chain[i].evidence.stack,
                              chain[i].evidence.at or chain[i].evidence.location, chain[i].evidence.task)
    lines.append(f"and this acquisition reverses it, {prev} -> {nxt}:")
    held_at = _held_site(finding)
    if held_at:
        lines.append(f"  {prev} taken at {held_at}")
    lines += _acquisition(f"then {nxt}" if held_at else f"{prev}, then {nxt}", finding.details.get("stack"),
                          finding.site or finding.location, finding.task)
    lines += [
        "",
        f"Change that code to take {nxt} before {prev} (or to release {prev} first),",
        "or, if the reversed order is the right one, change the others to match it.",
        "Then declare the order in an order file (lockcheck_order = FILE in the ini file),",
        "so code that breaks it is reported even in a run that never takes both orders:",
        f"    {' < '.join(order)}",
    ]
    return lines


def wait_advice(finding: Finding, events: list[str]) -> list[str]:
    """A cycle through a wait: no lock order fixes it; the wait must not hold what completing needs."""
    held = finding.held or "?"
    return [
        f"Do not wait for {', '.join(events)} while holding a lock that completing it needs:",
        f"release {held} before the wait (copy what the wait needs out of the critical section),",
        "or let whatever completes the event do without that lock. A wait with a timeout",
        "only turns the deadlock into a stall.",
    ]


def recursive_advice(finding: Finding) -> list[str]:
    """Same instance: not re-entrant.  Two instances of one class: nested(), an id() order, name()."""
    nxt, prv = finding.next, finding.prev
    cls = finding.lock
    held_at = _held_site(finding) or "?"
    stack, site = finding.details.get("stack"), finding.site or finding.location
    if nxt is not None and prv is not None and nxt.instance is not None and nxt.instance == prv.instance:
        return [
            f"This thread already holds this very lock, {cls} {nxt.instance}:",
            f"  taken at {held_at}",
            *_acquisition("and again", stack, site, finding.task),
            "A Lock is not re-entrant: the second acquire waits for ever for the first. Either",
            "- make it a threading.RLock, if taking it again on the same thread is intended, or",
            "- restructure: let the inner code run with the lock already held (a `_locked()`",
            "  variant that expects the caller to hold it), or release the lock before the call.",
        ]
    outer = f"{finding.held or cls} {prv.instance}" if prv is not None and prv.instance else (finding.held or cls)
    inner = f"{cls} {nxt.instance}" if nxt is not None and nxt.instance else cls
    owner, attr = _owner_attr(cls)
    return [
        "Two locks of one class are held together:",
        f"  {outer} taken at {held_at}",
        *_acquisition(f"then {inner}", stack, site, finding.task),
        "Locks made at one place are one class, so lockcheck cannot tell that another",
        "thread will not take the same two in the opposite order, which would deadlock.",
        "If they are taken in a fixed order by design (parent before child), say so",
        "where the inner one is taken:",
        "",
        f"    with lockcheck.nested(child.{attr}, 1):   # validated as {cls}/1",
        "",
        "If any two of them may be taken together, take them in one global order, by id():",
        "",
        "    @contextlib.contextmanager",
        "    def locked_in_order(*locks):   # up to 8 locks of one class",
        "        with contextlib.ExitStack() as stack:",
        "            for depth, lock in enumerate(sorted(locks, key=id)):",
        "                stack.enter_context(lockcheck.nested(lock, depth))",
        "            yield",
        "",
        "If the two locks play different roles, give one a class of its own:",
        "",
        f"    lockcheck.name(parent.{attr}, \"{owner}parent_{attr.lstrip('_')}\")",
    ]


#: what lockdep's irq classes are in a Python program (`lockcheck.python.interrupts`)
_PY_IRQ = {"SOFTIRQ": "a signal handler (run by the main thread between two bytecodes)",
           "HARDIRQ": "a finalizer (__del__, a weakref.finalize callback, the garbage collector)"}


def irq_advice(finding: Finding) -> list[str]:
    """An interrupt context takes a lock that the code it interrupts may hold."""
    text = " ".join(str(finding.details.get(key, "")) for key in ("prev_bit", "new_bit", "irqclass"))
    kinds = [kind for kind in _PY_IRQ if kind in text] or list(_PY_IRQ)
    lines = [f"In a Python program {kind} is {_PY_IRQ[kind]}." for kind in kinds]
    lines += [
        f"It takes {finding.lock}, which the code it interrupts may be holding: it then waits",
        "for its own thread (a Lock never returns; an RLock is re-entered in mid-update).",
        "Take no lock there: record what happened (a flag, queue.SimpleQueue.put_nowait,",
        "os.write to a pipe) and do the work outside the handler, or block the signal",
        "(signal.pthread_sigmask) around the critical section.",
    ]
    return lines


def held_at_exit_advice(finding: Finding) -> list[str]:
    lock = finding.lock
    held_at = _held_site(finding, finding.next or (finding.held_locks[-1] if finding.held_locks else None))
    return [
        f"A thread ended while holding {lock}" + (f" (taken at {held_at})" if held_at else "") + ".",
        "Nobody can take it again: an RLock can only be released by the thread that holds it.",
        "Release it on every path out of the thread: `with lock:`, or try/finally around the work.",
    ]


def held_at_fork_advice(finding: Finding) -> list[str]:
    holder = finding.details.get("holder", "another thread")
    held_at = _held_site(finding)
    taken = f" (taken at {held_at})" if held_at else ""
    if finding.details.get("process_target"):
        return [
            f"{holder} held {finding.held or finding.lock}{taken} when it started this process",
            "(start method 'fork'); the child runs its target instead of the code that would release",
            "it, so this acquire never returns. Start the process after releasing the lock, do not",
            "use that lock in the target, or use the 'spawn' or 'forkserver' start method.",
        ]
    return [
        f"{holder} held {finding.held or finding.lock}{taken} when the process forked; in the child no thread",
        "will ever release it, so this acquire never returns. Fork before starting threads,",
        "re-initialise the lock in the child (os.register_at_fork(after_in_child=...)), or",
        "start processes with the 'spawn' or 'forkserver' method instead of 'fork'.",
    ]


def depth_advice(finding: Finding) -> list[str]:
    return [
        f"{len(finding.held_locks)} locks are held at once by one thread: usually a loop that takes a lock",
        "per item and does not release it, or recursion that holds a lock per level.",
        "Release each lock in the step that took it (`with lock:`).",
    ]


def order_advice(finding: Finding) -> list[str]:
    declared = " < ".join(finding.details.get("declared") or [])
    at = finding.details.get("declared_at")
    return [
        f"The declared order {declared}" + (f" ({at})" if at else "")
        + f" has {finding.held} taken while {finding.lock} is not yet held;",
        f"{_site_line(finding)} takes them the other way. Take {finding.lock} first there,",
        "or correct the order file if the code is right.",
    ]


_ADVICE: dict[str, Callable[[Finding], list[str]]] = {
    CIRCULAR: circular_advice,
    INCONSISTENT: irq_advice,
    IRQ_INVERSION: irq_advice,
    RECURSIVE: recursive_advice,
    HELD_AT_EXIT: held_at_exit_advice,
    HELD_AT_FORK: held_at_fork_advice,
    MAX_DEPTH: depth_advice,
    ORDER_VIOLATION: order_advice,
}


# -- the suppression line ---------------------------------------------------------


def suppression(finding: Finding, key_of: Optional[Callable[[str], str]] = None) -> str:
    """`KIND CLASSGLOB...`: the `lockcheck_suppress` rule that matches this finding (and its kind only)."""
    if finding.cycle:
        classes = list(dict.fromkeys(finding.cycle))
    else:
        classes = [finding.lock] + ([finding.held] if finding.held and finding.held != finding.lock else [])
    keys = [_glob_escape(key_of(cls) if key_of is not None else cls) for cls in classes]
    return " ".join([finding.kind] + keys)


def print_suppression(pr: text._Out, finding: Finding, key_of: Optional[Callable[[str], str]] = None) -> None:
    pr("", "To accept it instead, add this line to the [pytest] section of your ini file",
       "(a list item of lockcheck_suppress under [tool.pytest.ini_options] in pyproject.toml):",
       f"  lockcheck_suppress = {suppression(finding, key_of)}")


# -- helpers ----------------------------------------------------------------------


def split_task(task: str) -> tuple[str, Optional[str]]:
    """`MainThread/1 [t.py::test_a]` -> (`MainThread/1`, `t.py::test_a`); no test: (task, None)."""
    match = _TASK_IN_TEST.match(task)
    if match is None:
        return task, None
    return match.group("task"), match.group("test")


def by_whom(task: str) -> str:
    """`by MainThread/1 in test t.py::test_a`: the thread, and the test that made it happen."""
    thread, test = split_task(task)
    return f"by {thread} in test {test}" if test else f"by {thread} (outside any test)"


def frame_text(frame: Frame) -> str:
    """`file:LINE in function`, or `(... 4 frames in logging)` for folded library frames."""
    return f"({FOLDED} {frame.function})" if is_folded(frame) else str(frame)


def shown(stack: tuple[Frame, ...], depth: int) -> list[Frame]:
    """The first `depth` frames of `stack`, folded lines not counted (they are not the program's)."""
    out: list[Frame] = []
    count = 0
    for frame in stack:
        if count >= depth:
            break
        out.append(frame)
        if not is_folded(frame):
            count += 1
    while out and is_folded(out[-1]):
        out.pop()
    return out


def brief(stack: Optional[tuple[Frame, ...]], site: str) -> str:
    """`util.py:5 in locked, from bank.py:17 in Bank.add`: an acquisition in one line.

    Two frames, because the first is so often a helper that every lock goes through (folded
    library frames are passed over: the application's frames are the ones to name).
    """
    stack = tuple(frame for frame in stack if not is_folded(frame)) if stack else stack
    if not stack:
        return site
    if len(stack) == 1:
        return str(stack[0])
    return f"{stack[0]}, from {stack[1]}"


def where(evidence: Evidence) -> str:
    """`bank.py:24 in Ledger.record, in test t.py::test_a`: one line for one acquisition."""
    site = brief(evidence.stack, evidence.at or evidence.location)
    _, test = split_task(evidence.task)
    return f"{site}, in test {test}" if test else site


def _site_line(finding: Finding) -> str:
    site = brief(finding.details.get("stack"), finding.site or finding.location)
    _, test = split_task(finding.task)
    return f"{site} (test {test})" if test else site


def _held_site(finding: Finding, snapshot: Optional[LockSnapshot] = None) -> Optional[str]:
    """Where the held lock of the finding was taken: its stack's first frames, or its site."""
    stack = finding.details.get("held_stack")
    if stack:
        return brief(stack, "")
    snapshot = snapshot or finding.prev
    if snapshot is None:
        return None
    if snapshot.at:
        return snapshot.at
    return snapshot.acquired.location if snapshot.acquired is not None else None


def _acquisition(what: str, stack: Optional[tuple[Frame, ...]], site: str, task: str) -> list[str]:
    """`  WHAT at SITE, from CALLER` and `    (test TEST)` for one acquisition."""
    lines = [f"  {what} at {brief(stack, site)}"]
    _, test = split_task(task)
    if test:
        lines.append(f"    (test {test})")
    return lines


def _owner_attr(cls: str) -> tuple[str, str]:
    """`Account._lock/1` -> (`Account.`, `_lock`); a name without a dot -> (``, `lock`)."""
    base = cls.split("/", 1)[0].split("#", 1)[0]
    owner, dot, attr = base.rpartition(".")
    if not dot or not attr.isidentifier():
        return "", "lock"
    return owner + dot, attr


def _glob_escape(name: str) -> str:
    """A class name as a glob matching just itself (a blank, which would split the rule, as `?`)."""
    return re.sub(r"([\[*?])", r"[\1]", name).replace(" ", "?")


__all__ = ["PythonOut", "print_finding", "render", "suppression", "by_whom", "split_task"]
