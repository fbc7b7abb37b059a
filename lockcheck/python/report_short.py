"""The pytest plugin's default report: short, in the program's own terms (`--lockcheck-report-style=python`).

The kernel's layout (`lockcheck.python.report`, `--lockcheck-report-style=kernel`)
spends 60 lines on an AB-BA, most of them for a kernel engineer (usage bits,
addresses, the CPU scenario).  A Python developer needs four things, and this
layout gives just those, an AB-BA in under 30 lines:

- the cycle, `a -> b -> a`, in the lock names the code uses;
- each dependency of it: in which test it was first seen and the
  application's frames that took the lock (the standard library's, installed
  packages' and lockcheck's own frames fold into `(... 4 frames in logging)`
  and do not count against `--lockcheck-stack-depth`), paths relative to
  pytest's rootdir;
- one short fix hint;
- the `lockcheck_suppress = ...` line that accepts it instead.

Frames a helper hides (`__tracebackhide__ = True`, or a module of
`lockcheck_helper_modules`) are left out when the stack is captured
(`lockcheck.python.stacks`), so the caller is the reported site.
"""

from __future__ import annotations

import os
import re
from typing import Callable, Optional

from lockcheck.lockdep.findings import (
    CIRCULAR, DEADLOCK, HELD_AT_EXIT, HELD_AT_FORK, INCONSISTENT, IRQ_INVERSION, MAX_DEPTH, ORDER_VIOLATION,
    RECURSIVE, Finding, Frame,
)
from lockcheck.python.report import split_task, suppression
from lockcheck.python.stacks import FOLDED, LIBRARY, is_folded, kind_of, package_of

#: the option value of this layout and of the kernel's
PYTHON, KERNEL = "python", "kernel"
STYLES = (PYTHON, KERNEL)
_SITE = re.compile(r"^(?P<file>.+?):(?P<line>\d+)(?P<rest>.*)$")


class Paths:
    """Frame paths as pytest shows them: relative to the rootdir (the recorder's are relative to the
    working directory, which a `cd` or `rootdir=` may make another)."""

    def __init__(self, rootdir: Optional[str] = None) -> None:
        self.rootdir = os.path.abspath(rootdir) if rootdir else os.getcwd()

    def file(self, file: str) -> str:
        path = os.path.abspath(file)
        try:
            rel = os.path.relpath(path, self.rootdir)
        except ValueError:
            return path
        return path if rel.startswith("..") else rel

    def frame(self, frame: Frame) -> str:
        if is_folded(frame):
            return f"({FOLDED} {frame.function})"
        return f"{self.file(frame.file)}:{frame.line} in {frame.function}"

    def site(self, site: Optional[str]) -> str:
        """`file:LINE...` of a site string; a library's site as `(in logging)`: its line is not the program's."""
        if not site:
            return "?"
        match = _SITE.match(site)
        if match is None:
            return site
        file = match.group("file")
        if os.path.isabs(file) and kind_of(file) == LIBRARY:
            return f"(in {package_of(file)})"
        return f"{self.file(file)}:{match.group('line')}{match.group('rest')}"


def frames(stack: Optional[tuple[Frame, ...]], depth: int, paths: Paths) -> list[str]:
    """The first `depth` application frames of `stack` (folded lines shown, not counted)."""
    out: list[str] = []
    count = 0
    for frame in stack or ():
        if count >= depth:
            break
        out.append(paths.frame(frame))
        if not is_folded(frame):
            count += 1
    while out and out[-1].startswith(f"({FOLDED}"):
        out.pop()
    return out


def render(finding: Finding, depth: int, paths: Paths, key_of: Optional[Callable[[str], str]] = None,
           test: Optional[str] = None) -> str:
    """One finding in the short layout (no trailing newline)."""
    body = _BODIES.get(finding.kind, _generic)(finding, depth, paths, test)
    lines = [f"{finding.kind}: {body[0].strip()}"] + body[1:]
    lines += _wrap(f"fix: {hint(finding)}")
    lines += ["accept it instead (ini file, [pytest] section):",
              f"  lockcheck_suppress = {suppression(finding, key_of)}"]
    return "\n".join(lines)


def _wrap(text: str, width: int = 100) -> list[str]:
    """A hint in lines of at most `width` characters, the second and later indented."""
    import textwrap

    return textwrap.wrap(text, width, subsequent_indent="     ", break_on_hyphens=False) or [text]


def cycle_text(finding: Finding) -> str:
    """`a -> b -> a`: the cycle, starting from the lock the failing test held."""
    if finding.chain:
        names = [finding.chain[-1].cls] + [link.cls for link in finding.chain]
    elif finding.cycle:
        names = list(finding.cycle) + [finding.cycle[0]]
    else:
        names = [finding.held or "?", finding.lock, finding.held or "?"]
    return " -> ".join(names)


def _in_test(task: str, test: Optional[str]) -> str:
    thread, in_test = split_task(task)
    where = f"in {in_test}" if in_test else "outside any test"
    if in_test and in_test == test:
        where += " (this test)"
    return f"{where}, {thread}" if thread != "MainThread/1" and not thread.endswith(":MainThread/1") else where


def _circular(finding: Finding, depth: int, paths: Paths, test: Optional[str]) -> list[str]:
    chain = finding.chain
    lines = [f"  {cycle_text(finding)}"]
    n = len(chain)
    for i, link in enumerate(chain):
        held = chain[i - 1].cls
        last = i == n - 1
        ev = link.evidence
        stack = ev.stack or (finding.details.get("stack") if last else None)
        lines.append(f"  {held} -> {link.cls}  {_in_test(ev.task if not last else finding.task, test)}")
        if last:
            held_stack = finding.details.get("held_stack")
            held_at = frames(held_stack, 1, paths) if held_stack else []
            where = held_at[0] if held_at else paths.site(finding.prev.at if finding.prev else None)
            lines.append(f"    {held} held, taken at {where}")
        shown = frames(stack, depth, paths) if depth else []
        taken = _taken(held, link.cls)
        if shown:
            lines.append(f"    {taken} at:")
            lines += [f"      {frame}" for frame in shown]
        else:
            site = finding.site or finding.location if last else (ev.at or f"{ev.file}:{ev.line}")
            lines.append(f"    {taken} at {paths.site(site)}")
    lines += _events(finding)
    if not chain:
        lines += _generic(finding, depth, paths, test)
    return lines


def _taken(held: str, cls: str) -> str:
    """How `cls` is taken with `held` held: a lock taken, an event waited for (`--lockcheck-waits`),
    or a lock that completing an event needs."""
    from lockcheck.python.event_classes import is_event

    if is_event(cls):
        return f"waits for completion of {cls}"
    if is_event(held):
        return f"completing {held} takes {cls}"
    return f"{cls} taken"


def _events(finding: Finding) -> list[str]:
    """What each event class of the cycle stands for (`Thread(t)`: the end of the thread made at ...)."""
    from lockcheck.python.event_classes import describe, is_event

    names = dict.fromkeys(link.cls for link in finding.chain)
    return [f"  ({cls}: {describe(cls)})" for cls in names if is_event(cls)]


def _deadlock(finding: Finding, depth: int, paths: Paths, test: Optional[str]) -> list[str]:
    contexts = finding.details.get("contexts", [])
    held = [str(ctx["holds"]).rpartition("@")[0] or str(ctx["holds"]) for ctx in contexts]
    if finding.details.get("mixed") or finding.details.get("ended"):
        lines = [f"{finding.lock}  {_in_test(finding.task, test)}"]
    elif held:
        lines = [f"{' -> '.join(held + held[:1])}  (each holds a lock the one before waits for)"]
    else:
        lines = [f"{finding.lock}  {_in_test(finding.task, test)}"]
    for i, ctx in enumerate(contexts):
        holds = str(ctx["holds"]).rpartition("@")[0] or ctx["holds"]
        taken = f" (taken at {paths.site(ctx['holds_at'])})" if ctx.get("holds_at") else ""
        lines.append(f"  #{i} {ctx['task']}: holds {holds}{taken}")
        if ctx.get("waits_for"):
            wants = str(ctx["waits_for"]).rpartition("@")[0] or ctx["waits_for"]
            lines.append(f"     waits for {wants} at {paths.site(ctx.get('waits_at'))}")
        else:
            lines.append(f"     suspended at {paths.site(ctx.get('waits_at'))}, waits for {ctx.get('held_by')}")
    shown = frames(finding.details.get("stack"), depth, paths) if depth else []
    if shown:
        lines.append(f"  the acquire that closed it ({_in_test(finding.task, test)}):")
        lines += [f"    {frame}" for frame in shown]
    return lines


def _generic(finding: Finding, depth: int, paths: Paths, test: Optional[str]) -> list[str]:
    lines = []
    if finding.held and finding.held != finding.lock:
        lines.append(f"  {finding.held} -> {finding.lock}  {_in_test(finding.task, test)}")
    else:
        lines.append(f"  {finding.lock}  {_in_test(finding.task, test)}")
    held_stack = finding.details.get("held_stack")
    if finding.held:
        held_at = frames(held_stack, 1, paths) if held_stack else []
        where = held_at[0] if held_at else paths.site(finding.prev.at if finding.prev else None)
        lines.append(f"    {finding.held} held, taken at {where}")
    shown = frames(finding.details.get("stack"), depth, paths) if depth else []
    if shown:
        lines.append(f"    {finding.lock} at:")
        lines += [f"      {frame}" for frame in shown]
    else:
        lines.append(f"    {finding.lock} at {paths.site(finding.site or finding.location)}")
    bit = finding.details.get("prev_bit")
    usage = finding.details.get("usage_traces", {}).get(bit) if bit else None
    if usage is not None:  # inconsistent-lock-state: where the other use (a handler's, say) was
        shown = frames(usage.stack, depth, paths) if depth else []
        lines.append(f"    {finding.lock} also taken {_irq_words(str(bit))} ({bit}) at:")
        lines += [f"      {frame}" for frame in shown] or [f"      {paths.site(usage.at or usage.location)}"]
    return lines


def _irq_words(bit: str) -> str:
    """lockdep's usage bit in a Python program's words (`lockcheck.python.interrupts`)."""
    who = "a signal handler" if "SOFTIRQ" in bit else "a finalizer" if "HARDIRQ" in bit else "an interrupt"
    return f"in {who}" if bit.startswith("IN-") else f"where {who} may interrupt"


_BODIES: dict[str, Callable[[Finding, int, Paths, Optional[str]], list[str]]] = {
    CIRCULAR: _circular,
    DEADLOCK: _deadlock,
}


def hint(finding: Finding) -> str:
    """One short fix hint for the finding's kind (the kernel style's How to fix says more)."""
    kind, lock, held = finding.kind, finding.lock, finding.held or "?"
    if kind == CIRCULAR:
        from lockcheck.python.event_classes import is_event

        if any(is_event(link.cls) for link in finding.chain) or is_event(lock):
            return f"do not wait while holding {held}: release it before the wait"
        order = [link.cls for link in reversed(finding.chain)] if len(finding.chain) >= 2 else [lock, held]
        return (f"take {lock} before {held} here (or release {held} first); "
                f"declare the order `{' < '.join(order)}` in a lockcheck_order file")
    if kind == DEADLOCK:
        contexts = finding.details.get("contexts", [])
        other = contexts[1] if len(contexts) > 1 else {}
        taken = str(other.get("holds", lock)).rpartition("@")[0] or lock
        if finding.details.get("ended"):
            return f"{other.get('task')} ended holding {taken}: release it on every path out (`with`, try/finally)"
        if finding.details.get("mixed"):
            return (f"do not hold the threading lock {taken} across an await: use an asyncio.Lock in "
                    f"coroutines, or release it before awaiting")
        return "take these locks in one order everywhere, or release the held lock before taking the next"
    if kind == RECURSIVE:
        nxt, prv = finding.next, finding.prev
        if nxt is not None and prv is not None and nxt.instance is not None and nxt.instance == prv.instance:
            return "a Lock is not re-entrant: use an RLock, or do not take it again while holding it"
        return ("two locks of one class nested: lockcheck.nested(inner, 1) if the order is fixed by design, "
                "or lockcheck.name() one of them")
    if kind in (INCONSISTENT, IRQ_INVERSION):
        return f"take no lock ({lock}) in a signal handler or finalizer: record the event, do the work outside"
    if kind == HELD_AT_EXIT:
        return f"release {lock} on every path out of the thread (`with lock:` or try/finally)"
    if kind == HELD_AT_FORK:
        return "fork before starting threads, re-initialise the lock in the child, or use 'spawn'"
    if kind == MAX_DEPTH:
        return "release each lock in the step that took it (`with lock:`)"
    if kind == ORDER_VIOLATION:
        declared = " < ".join(finding.details.get("declared") or [])
        return f"the declared order is {declared}: take {lock} first here, or correct the declared order"
    return "see the full report: --lockcheck-report-style=kernel"


__all__ = ["KERNEL", "PYTHON", "STYLES", "Paths", "render", "cycle_text", "hint", "frames"]
