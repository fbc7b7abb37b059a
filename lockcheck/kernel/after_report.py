"""What a boot's dump says about a cycle found after the kernel's report turned lockdep off.

After its first report lockdep calls `debug_locks_off()`: `graph_lock()`
then fails and nothing more is recorded, so /proc/lockdep holds exactly
the dependencies added while lockdep was on.  `check_prev_add()` adds
`prev -> next` only after `check_noncircular()` found no path back (the
dependency that closes a reported cycle is never added), so:

- a cycle every dependency of which /proc/lockdep lists was checked by the
  kernel, dependency by dependency, before its report, and not reported:
  lockdep judged it no deadlock (recursive reads, trylocks or annotations
  the capture does not show), and the finding is uncertain;
- a cycle with a dependency /proc/lockdep does not list was closed after
  lockdep stopped recording: the kernel could not have reported it, which
  `details["lockdep_off"]` says (the finding stays as certain as the
  capture makes it).
"""

from __future__ import annotations

from typing import Callable, Optional

from lockcheck.kernel.state import LockdepState, split_class_name
from lockcheck.lockdep import findings as F
from lockcheck.lockdep.findings import Finding


def _key(name: str) -> tuple[str, int]:
    """A class as both sides can name it: base name and subclass (the `#N` version is the
    kernel's, a capture never prints it)."""
    base, _, subclass = split_class_name(name)
    return base, subclass


def cycle_dependencies(cycle: list[str]) -> list[tuple[str, str]]:
    """The dependencies of a circular finding's cycle, `next ... prev` as the checker builds it:
    each class depends on the one before it, and `prev -> next` closes it.

    >>> cycle_dependencies(["B", "C", "A"])
    [('B', 'C'), ('C', 'A'), ('A', 'B')]
    """
    return [(cycle[i], cycle[(i + 1) % len(cycle)]) for i in range(len(cycle))]


def judge(finding: Finding, state: LockdepState, report_at: str,
          lockdep_on: Callable[[str, int], bool] = lambda file, line: False) -> Optional[str]:
    """Decide a circular finding made after the kernel's report from `state`'s dependencies.

    Returns the uncertainty reason when every dependency was in /proc/lockdep,
    or when one it lacks was made where `lockdep_on(file, line)` (before the cut at
    the report: lockdep was on and did not take it as a dependency, a trylock or
    check=0 acquisition the capture lost); else sets `details["lockdep_off"]` and returns None.  Other kinds, and a state without
    /proc/lockdep (only its dependency list is exact), are left alone.
    """
    if finding.kind != F.CIRCULAR or not finding.cycle or len(finding.cycle) < 2:
        return None
    if not state.edges:
        return None  # a chain's last pair may be the reported dependency, which was never added
    known = {(_key(dep.before_name), _key(dep.after_name)) for dep in state.edges}
    missing = [(a, b) for a, b in cycle_dependencies(finding.cycle) if (_key(a), _key(b)) not in known]
    where = ", ".join(state.files) or "the state"
    if not missing:
        return (f"{where} lists every dependency of this cycle: lockdep added each of them before its "
                f"report at {report_at} and checked the cycle then (check_prev_add), and did not report "
                "it (a recursive read, trylock or annotation the capture does not show)")
    made = _made_at(finding)
    seen_on = [(a, b) for a, b in missing if (a, b) in made and lockdep_on(*made[(a, b)])]
    if seen_on:
        (a, b) = seen_on[0]
        file, line = made[(a, b)]
        return (f"{a} -> {b} was made at {file}:{line}, before the kernel's report, and {where} does not list "
                "it: lockdep, still on, did not take it as a dependency (a trylock or check=0 acquisition "
                "the capture does not show)")
    shown = ", ".join(f"{a} -> {b}" for a, b in missing)
    finding.details["lockdep_off"] = (f"not reported by the kernel: lockdep was off after its report at "
                                      f"{report_at}, and {shown} is not in {where} (made after it stopped "
                                      "recording)")
    return None


def _made_at(finding: Finding) -> dict[tuple[str, str], tuple[str, int]]:
    """Where each dependency of a circular finding's cycle was first made, from its chain: a link's
    evidence is where its class was taken under the class before it in the cycle (`next`'s link,
    the current event, made the closing `prev -> next`)."""
    cycle = finding.cycle or []
    into = {link.cls: (link.evidence.file, link.evidence.line) for link in finding.chain}
    return {(a, b): into[b] for a, b in cycle_dependencies(cycle) if b in into}
