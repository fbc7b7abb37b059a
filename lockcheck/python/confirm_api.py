"""`lockcheck.confirm(func, cycle=...)`: confirm a lock-order cycle outside pytest.

`func` is code that starts threads which take locks (and joins them).  It is run once
with the locks tracked; a circular-dependency finding that run makes (or the one whose
classes are `cycle`, if that is given) is then replayed: `func` is called again, up to
`runs` times, under the directed scheduler (`lockcheck.python.confirm_replay`), and the
returned `Outcome` says `confirmed` True (a re-run deadlocked, and `DeadlockError` broke
it), False (none did, with why in `lines`) or None (nothing to replay).

The locks must be created while tracking is on: inside `func`, or inside an `instrument()`
block that is active around the call (its recorder is then used, and keeps the first
run's findings; a recorder started here is stopped again on return).
"""

from __future__ import annotations

import threading
from typing import Any, Callable, Optional, Sequence

from lockcheck.lockdep.findings import CIRCULAR, Finding
from lockcheck.python.confirm_replay import DEFAULT_PAUSE, DEFAULT_RUNS, DEFAULT_TIMEOUT, Outcome, replay


def confirm(func: Callable[[], Any], cycle: Optional[Sequence[str]] = None, *, runs: int = DEFAULT_RUNS,
            pause: float = DEFAULT_PAUSE, timeout: float = DEFAULT_TIMEOUT, recorder: Any = None) -> Outcome:
    """Run `func`, then replay the cycle it made (or `cycle`, lock class names) until it deadlocks."""
    from lockcheck.python.patching import active_recorder, start, stop
    from lockcheck.python.recorder import Recorder

    rec = recorder or active_recorder()
    started = rec is None or not rec.active
    if rec is None:
        rec = Recorder()
    if started:
        start(rec)
    previous_hook = threading.excepthook
    threading.excepthook = _quiet(previous_hook)  # a DeadlockError that ends a thread is the verdict
    try:
        first = len(rec.findings)
        func()
        rec.drain()
        finding = _pick([f for f, _ in rec.findings[first:]], cycle) or (
            _pick([f for f, _ in rec.findings[:first]], cycle) if cycle else None)
        if finding is None:
            wanted = f" of {' -> '.join(cycle)}" if cycle else ""
            return Outcome(None, None, None, [f"lockcheck: no circular dependency{wanted} was recorded"])
        return replay(rec, finding, func, _context_of(finding), runs, pause, timeout)
    finally:
        threading.excepthook = previous_hook
        if started:
            stop(rec)


def _pick(findings: list[Finding], cycle: Optional[Sequence[str]]) -> Optional[Finding]:
    """The first circular dependency; with `cycle`, the one whose classes are those (a name may
    be the class's last part: `B` for `app.B`)."""
    for finding in findings:
        if finding.kind != CIRCULAR:
            continue
        if not cycle:
            return finding
        classes = finding.cycle or []
        if len(classes) == len(cycle) and all(any(c == w or c.endswith("." + w) for c in classes) for w in cycle):
            return finding
    return None


def _context_of(finding: Finding) -> Optional[str]:
    from lockcheck.python.confirm_scheduler import test_of

    return test_of(finding.task)


def _quiet(previous: Any) -> Callable[[Any], None]:
    def hook(args: Any) -> None:
        if type(args.exc_value).__name__ == "DeadlockError":
            return
        previous(args)
    return hook
