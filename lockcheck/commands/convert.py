"""`lockcheck convert`: any supported input written as one `.lt` trace, runs and names kept.

Each input file is a run of its own when checked, so the `.lt` output keeps
it one: every run starts with a `#lockcheck-run format=FORMAT from=FILE`
line (docs/trace-format.md), which also carries what a file start of that
format means (a capture that started mid-flight, a format without irq
context).  Without it, two files would become one run and a task's locks
would seem held across them, inventing dependencies.

Tasks keep the name reports print: ftrace and perf key held-lock stacks by
pid but show `comm/pid`, and the `.lt` TASK is that name, fixed for the
whole run at its first sight (so a comm change does not split a task).
Two tasks that would print alike get the key appended (`name#key`).
"""

from __future__ import annotations

from typing import Iterable, Optional, TextIO

from lockcheck.errors import TraceError
from lockcheck.events import RUN, Event
from lockcheck.kernel.boot import DIRECTORY_HOOKS
from lockcheck.readers.lt import HEADER
from lockcheck.readers.lt_write import format_event, format_run


class TaskNames:
    """The `.lt` TASK of each task key within one run."""

    def __init__(self) -> None:
        self._by_key: dict[str, str] = {}
        self._used: set[str] = set()

    def reset(self) -> None:
        self._by_key.clear()
        self._used.clear()

    def name(self, ev: Event) -> str:
        name = self._by_key.get(ev.task)
        if name is None:
            name = ev.comm if ev.comm and _is_token(ev.comm) else ev.task
            if name in self._used:
                name = f"{name}#{ev.task}"
            self._by_key[ev.task] = name
            self._used.add(name)
        return name


def _is_token(text: str) -> bool:
    """Whether `text` can be a `.lt` TASK as it is."""
    return not text.startswith("#") and not any(ch in text for ch in ' \t"\r\n')


def convert(paths: list[str], input_format: str, out: TextIO) -> list[str]:
    """Write the inputs as one `.lt` trace to `out`; the notes of what was left out."""
    from lockcheck.readers import ReadContext, read_all

    names = TaskNames()
    pending: list[Optional[str]] = [None]  # the run line to write before the run's first event
    logs: list[str] = []

    def opened(name: str, module) -> None:
        pending[0] = format_run(module.NAME, name)
        names.reset()
        if getattr(module, "TAKES_REPORTS", False):
            logs.append(f"{name}: a kernel log holds no lock events (`lockcheck check` reads its lockdep reports)")

    def dump(name: str, lines) -> None:
        logs.append(f"{name}: a /proc/lockdep dump holds no lock events (`lockcheck check` merges it into "
                    "the graph)")

    context = ReadContext(on_open=opened, on_dump=dump, directory_hooks=DIRECTORY_HOOKS)
    out.write(HEADER + "\n")
    for ev in read_all(paths, input_format, context):
        if ev.op == RUN:
            pending[0] = format_event(ev)
            names.reset()
            continue
        if pending[0] is not None:
            out.write(pending[0] + "\n")
            pending[0] = None
        out.write(_line(ev, names) + "\n")
    return context.notes() + logs


def _line(ev: Event, names: TaskNames) -> str:
    """The `.lt` line of an event, with its task named; what `.lt` cannot carry is a TraceError."""
    if ev.task:
        ev = _renamed(ev, names.name(ev))
    try:
        return format_event(ev)
    except ValueError as err:
        # a name the format cannot spell (a blank in a task, a line break)
        raise TraceError(ev.file, ev.line, 1, f"cannot convert to .lt: {err}") from None


def _renamed(ev: Event, task: str) -> Event:
    if task == ev.task:
        return ev
    fields = {name: getattr(ev, name) for name in Event.__slots__}
    fields["task"] = task
    return Event(**fields)


def converted(paths: Iterable[str], input_format: str = "auto") -> str:
    """The `.lt` text of the inputs (for tests and scripts)."""
    import io

    buffer = io.StringIO()
    convert(list(paths), input_format, buffer)
    return buffer.getvalue()
