"""The report of a `deadlock` finding (`lockcheck.python.waitfor`): a cycle of waits, as it happens.

Laid out as lockdep's circular-dependency report is, with what a live
deadlock adds: every thread or asyncio task of the cycle, the lock it holds
and where it took it, the lock it waits for and where, and since when.

    ============================================================
    WARNING: deadlock detected: every context in a cycle of waits is blocked
    lockcheck 0.1.0  test_x.py
    ------------------------------------------------------------
    MainThread/1 [test_x.py::test_ab] is trying to acquire lock:
     (test_x.b) 0x2, at: test_x.py:14
    ...
"""

from __future__ import annotations

from lockcheck.lockdep.findings import DEADLOCK, Finding
from lockcheck.report import Summary, text
from lockcheck.python import report as python

COLUMN = 32  # width of one context's column in the scenario


def print_deadlock(finding: Finding, summary: Summary, pr: text._Out) -> None:
    """Title, the acquire that closed the cycle, each context of it, the scenario, the stack."""
    contexts = finding.details.get("contexts", [])
    text.print_header(pr, f"WARNING: {finding.message}", finding, summary)
    first = contexts[0] if contexts else None
    waits_for = first["waits_for"] if first else finding.lock
    pr(f"{finding.task} is trying to acquire lock:", f" {_lock(waits_for)}, at: {finding.location}", "")
    if finding.details.get("ended") and len(contexts) > 1:
        pr(f"but that lock is held by {contexts[1]['task']}, which has ended holding it:",
           "nobody can release it now, so this acquire would never return.", "")
    elif finding.details.get("mixed") and len(contexts) > 1:
        holder = contexts[1]
        pr(f"but that lock is held by {holder['task']},",
           "which can only resume, and release it, when this thread returns to the event loop:",
           "this thread blocks the loop that runs the holder.", "")
    elif len(contexts) > 1:
        pr(f"but that lock is held by {contexts[1]['task']},",
           f"which waits{' (through ' + str(len(contexts) - 2) + ' more)' if len(contexts) > 2 else ''} "
           f"for a lock {finding.task} holds: none of them can go on.", "")
    if finding.details.get("ended"):
        ended = contexts[1] if len(contexts) > 1 else {}
        pr(f" {ended.get('task')} took {ended.get('holds')} at: {ended.get('holds_at') or '?'}, and ended", "")
        text.dump_stack(pr, finding)
        return
    pr(f"the cycle of waits ({len(contexts)} contexts, every one blocked):")
    for i, ctx in enumerate(contexts):
        since = f", waiting for {ctx['for']:.2f}s" if ctx.get("for") else ""
        pr(f" #{i}: {ctx['task']} ({ctx['kind']}){since}")
        taken = f", taken at: {ctx['holds_at']}" if ctx.get("holds_at") else ""
        pr(f"     holds {ctx['holds']}{taken}")
        if ctx.get("waits_for"):
            pr(f"     waits for {ctx['waits_for']}, at: {ctx['waits_at']}, held by {ctx['held_by']}")
        else:
            pr(f"     suspended at: {ctx['waits_at']}, waits to be resumed by {ctx['held_by']}")
    pr("")
    if 1 < len(contexts) <= 3 and not finding.details.get("mixed"):
        print_deadlock_scenario(pr, contexts)
    text.dump_stack(pr, finding)


def print_deadlock_scenario(pr: text._Out, contexts: list[dict]) -> None:
    """The kernel's scenario table, one column per context: what each took, then what it waits for."""
    pr(" Deadlock scenario (happening now):", "")
    names = [f"CONTEXT{i}" for i in range(len(contexts))]
    pr("       " + "".join(name.ljust(COLUMN) for name in names).rstrip())
    pr("       " + "".join("----".ljust(COLUMN) for _ in names).rstrip())
    for step in ("holds", "waits_for"):
        for i, ctx in enumerate(contexts):
            verb = "lock" if step == "holds" else "lock"
            cls = str(ctx[step]).rpartition("@")[0]
            pr(" " * (2 + COLUMN * i) + f"{verb}({cls});" + ("" if step == "holds" else "  <- blocked"))
    pr("", " *** DEADLOCK ***", "")
    for i, ctx in enumerate(contexts):
        pr(f" CONTEXT{i}: {ctx['task']}")
    pr("")


def _lock(name: str) -> str:
    cls, _, inst = name.rpartition("@")
    return f"({cls}) {inst}" if cls else f"({name})"


def deadlock_advice(finding: Finding) -> list[str]:
    """What breaks this kind of cycle: one lock order, or no lock held across a wait."""
    contexts = finding.details.get("contexts", [])
    if finding.details.get("ended") and len(contexts) > 1:
        lock = str(contexts[1]["holds"]).rpartition("@")[0]
        return [f"{contexts[1]['task']} took {lock} at {contexts[1]['holds_at'] or '?'} and ended without releasing it:",
                "release it on every path out of that thread (a `with` block, or try/finally)."]
    if finding.details.get("mixed") and len(contexts) > 1:
        lock = str(contexts[1]["holds"]).rpartition("@")[0]
        return [f"Do not hold the threading lock {lock} across an await (at {contexts[1]['waits_at']}):",
                "in coroutines use an asyncio.Lock, or release it before awaiting; the event loop's",
                "thread must never block on a lock that one of its suspended tasks may hold."]
    held = [str(ctx["holds"]).rpartition("@")[0] for ctx in contexts]
    lines = ["Each context holds the lock the one before it waits for. Take these locks in one",
             f"order everywhere ({' -> '.join(reversed(held))}, or its reverse), or release the held",
             "lock before taking the next; where each order was taken:"]
    for ctx in contexts:
        lock = str(ctx["holds"]).rpartition("@")[0]
        wanted = str(ctx["waits_for"]).rpartition("@")[0]
        lines.append(f"  {ctx['task']}: {lock} at {ctx['holds_at'] or '?'}, then {wanted} at {ctx['waits_at']}")
    return lines


text.PRINTERS[DEADLOCK] = print_deadlock
python._ADVICE[DEADLOCK] = deadlock_advice
