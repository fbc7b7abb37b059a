"""The recorder's side of `lockcheck.readers.plugin_meta`: the comment lines that let
`lockcheck check` replay a recorded session to the plugin's own findings (its suppression
rules, the qualified names they match, the test each event ran in)."""

from __future__ import annotations

from typing import Iterable, Optional, TextIO

from lockcheck.lockdep import findings as F
from lockcheck.python.sites import registry
from lockcheck.readers import plugin_meta


def write_header(trace: TextIO, rules: Iterable) -> None:
    """After `#lockcheck-trace v1`: the plugin's mark and the session's rules (`Rule`s)."""
    trace.write(plugin_meta.HEADER + "\n")
    for rule in rules:
        trace.write(plugin_meta.suppress_line(rule.text()) + "\n")


def write_test_rules(trace: TextIO, rules: Iterable) -> None:
    """The running test's own rules (`@pytest.mark.lockcheck(suppress=[...])`)."""
    for rule in rules:
        trace.write(plugin_meta.suppress_line(rule.text(), test=True) + "\n")


def write_class(trace: TextIO, cls: str) -> None:
    """Before the first event of class `cls`: its module-qualified name, when it has one (a
    rule may name the class by it, and only the live registry knows it)."""
    qualified = registry.qualified.get(cls.partition("/")[0])
    if qualified is not None and " " not in qualified and "\n" not in cls:
        trace.write(plugin_meta.class_line(cls.partition("/")[0], qualified) + "\n")


def write_stack(trace: TextIO, found: list) -> None:
    """After the event that made findings: the program's stack there (the first finding's), so the
    replay shows where the program was, as the plugin's report does."""
    for finding in found:
        stack = finding.details.get("stack")
        if stack:
            trace.write(plugin_meta.stack_line(stack) + "\n")
            return


def lines_written(trace: TextIO) -> int:
    """How many lines `trace` holds so far, read in a forked child at the fork: where the
    parent's part stops being the child's past (the child's `fork` record says so).

    Never by flushing or `tell()`: in the child either would write the parent's buffered lines
    into the parent's file a second time.  A `TraceOutput` counts what it wrote and what it
    gathers; a `StringIO` (before pytest_configure) holds it all; a forked child's own file is
    written line by line, so what its disk file holds is what it wrote.
    """
    count = getattr(trace, "lines", None)
    if callable(count):
        return int(count())
    getvalue = getattr(trace, "getvalue", None)
    if callable(getvalue):
        return getvalue().count("\n")
    name = getattr(trace, "name", None)
    if isinstance(name, str):
        try:
            with open(name, "rb") as f:
                return sum(block.count(b"\n") for block in iter(lambda: f.read(1 << 16), b""))
        except OSError:
            return 0
    return 0


def write_child_header(out: TextIO, child: int, parent: int, at: int, context: Optional[str], check: bool,
                       rules: Iterable) -> None:
    """The first lines of a forked child's own file: the format's header, the `fork` record (its
    second line, `plugin_meta.FORK_RECORD`), then the test running at the fork and that test's own
    rules, so its findings are named and accepted as the parent's would be."""
    out.write(f"#lockcheck-trace v1\n{plugin_meta.fork_line(child, parent, at)}\n")
    if context is not None:
        out.write(f"{plugin_meta.CONTEXT}{context}{'' if check else ' (lockcheck off)'}\n")
    else:
        out.write(plugin_meta.NO_CONTEXT + "\n")
    write_test_rules(out, rules)


#: the kinds of finding the plugin decides with more than the trace's events: a thread that
#: ended holding an RLock, a lock held at a fork by a thread the child does not have, a
#: test's own `order=` (or `lockcheck_order`), a cycle of waits
RECORDED = frozenset({F.HELD_AT_EXIT, F.HELD_AT_FORK, F.ORDER_VIOLATION, F.DEADLOCK})


def write_findings(trace: TextIO, found: Iterable) -> None:
    """After the event that made them (or at the moment a wait made them): the findings of the
    kinds `RECORDED`, as records the replay reports as they are (`plugin_replay.Replay.recorded`)."""
    for finding in found:
        if finding.kind in RECORDED:
            trace.write(plugin_meta.finding_line(_record(finding)) + "\n")


def _snapshot(snap) -> Optional[list]:  # type: ignore[no-untyped-def]
    return None if snap is None else [snap.name, snap.instance, snap.usage, snap.at]


def _record(finding) -> dict:  # type: ignore[no-untyped-def]
    details = {key: value for key, value in finding.details.items()
               if key != "stack" and isinstance(value, (str, int, float, bool, list, dict, type(None)))}
    record = {"kind": finding.kind, "task": finding.task, "lock": finding.lock, "held": finding.held,
              "cycle": finding.cycle, "site": finding.site, "next": _snapshot(finding.next),
              "prev": _snapshot(finding.prev), "held_locks": [_snapshot(snap) for snap in finding.held_locks],
              "details": details}
    stack = finding.details.get("stack")
    if stack:
        record["stack"] = [list(frame) for frame in stack]
    return record
