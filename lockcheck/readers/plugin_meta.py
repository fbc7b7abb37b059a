"""What a `.lt` trace recorded by the pytest plugin says besides its events.

The plugin decides with more than the events: the suppression rules it applies (the standard
library's own lock orders, `lockcheck.python.suppression_rules.DEFAULT_SUPPRESS`, and the user's
`lockcheck_suppress`), the module-qualified names those rules may name a class by, and the test
each event ran in.  The trace format has no field for any of that, so the recorder writes it as
comment lines -- `#lockcheck-plugin ...` and its `# context TEST` lines -- which every reader of
the format skips as comments, and `lockcheck check` reads back (`scan`) so that replaying the
trace gives the plugin's findings:

    #lockcheck-trace v1
    #lockcheck-plugin v1
    #lockcheck-plugin suppress circular-dependency logging._lock logging.*Handler.lock
    #lockcheck-plugin class FileHandler.lock logging.FileHandler.lock
    # context test_x.py::test_a
    #lockcheck-plugin suppress-test recursive-locking Foo.lock
    #lockcheck-plugin no-context

A forked child's own file (`TRACE.pidN`, appended to the trace at the end of the session, line
for line) says at its second line which process it was forked from and when, which the format
has no op for (a contract gap, read here so): `#lockcheck-plugin fork CHILD PARENT LINE` -- the
child `CHILD` began as `PARENT` was when `PARENT`'s own trace had `LINE` lines.  Its events
are checked against that state and its own, never against what the parent did later.

A finding the plugin decided with what no event says (a thread that ended holding an RLock, a
fork, a test's own order, a cycle of waits) follows the event that made it as
`#lockcheck-plugin finding {JSON}`; the replay reports it as made.

Both sides use this module: the recorder writes these lines, the check command reads them.
"""

from __future__ import annotations

import bisect
import json
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional

MARK = "#lockcheck-plugin"
#: the second line of a trace the plugin wrote
HEADER = f"{MARK} v1"
CONTEXT = "# context "
_OFF = " (lockcheck off)"
NO_CONTEXT = f"{MARK} no-context"


#: the line of a forked child's own file that holds its `fork` record (the first is `#lockcheck-trace v1`)
FORK_RECORD = 2


def fork_line(child: int, parent: int, line: int) -> str:
    """The record of a fork: process `child` began as `parent` was after `line` lines of its trace."""
    return f"{MARK} fork {child} {parent} {line}"


def suppress_line(rule: str, test: bool = False) -> str:
    """The line of one rule (`KIND CLASSGLOB...`): for the session, or (`test`) for the running test only."""
    return f"{MARK} {'suppress-test' if test else 'suppress'} {rule}"


def class_line(name: str, qualified: str) -> str:
    """The line that says class `name` is `qualified` by its module-qualified name."""
    return f"{MARK} class {name} {qualified}"


def stack_line(frames: Iterable[tuple[str, int, str]]) -> str:
    """The line after an event that made a finding: the program's stack there, innermost first
    (`Frame`s: file, line, function), as JSON."""
    return f"{MARK} stack " + json.dumps([list(frame) for frame in frames])


def finding_line(record: dict) -> str:
    """The line of a finding the plugin made with what the events cannot say (a thread that ended,
    a test's own order, a cycle of waits): its JSON record, after the last event before it."""
    return f"{MARK} finding " + json.dumps(record, default=str, separators=(",", ":"))


Rule = tuple[str, tuple[str, ...]]


@dataclass
class Fork:
    """A forked child's part of a merged trace: its file's line k is the trace's line `base + k`;
    it began as process `parent` was at that process's own line `at`."""

    pid: int
    parent: int
    at: int
    base: int
    #: the trace's last line of this part (set once the next part, or the end, is seen)
    end: int = 0


@dataclass
class PluginMeta:
    """What `scan` read: session rules, qualified names, and the test of each range of lines."""

    rules: list[Rule] = field(default_factory=list)
    qualified: dict[str, str] = field(default_factory=dict)
    #: line numbers where a test (or no test: None) begins, and the tests with their own rules
    starts: list[int] = field(default_factory=lambda: [0])
    tests: list[tuple[Optional[str], list[Rule]]] = field(default_factory=lambda: [(None, [])])
    #: line of an event that made a finding -> the program's stack there ((file, line, function), ...)
    stacks: dict[int, tuple[tuple[str, int, str], ...]] = field(default_factory=dict)
    #: the forked children's parts, in the trace's order (`Fork`); the first begins after the session's own
    forks: list[Fork] = field(default_factory=list)
    #: (line of the last event before it, or of the record itself, record) of each `finding` line
    findings: list[tuple[int, dict]] = field(default_factory=list)

    def child_at(self, line: int) -> Optional[Fork]:
        """The forked child whose part holds trace line `line`; None: the recording process's own."""
        for fork in self.forks:
            if fork.base < line <= fork.end:
                return fork
        return None

    def test_at(self, line: int) -> tuple[Optional[str], list[Rule]]:
        """The test that ran when line `line` was written, and its own rules."""
        return self.tests[bisect.bisect_right(self.starts, line) - 1]


def is_plugin_trace(first_lines: list[str]) -> bool:
    """A trace whose second line is the plugin's `#lockcheck-plugin v1`."""
    return len(first_lines) >= 2 and first_lines[1].rstrip("\r\n") == HEADER


def _rule(text: str) -> Optional[Rule]:
    parts = text.split()
    return (parts[0], tuple(parts[1:])) if parts else None


def scan(lines: Iterable[str]) -> PluginMeta:
    """The plugin's lines of a trace (every other line is skipped: only `#` lines are looked at)."""
    meta = PluginMeta()
    event = 0  # the line of the last event
    lineno = 0
    for lineno, line in enumerate(lines, 1):
        if not line.startswith("#"):
            event = lineno
            continue
        line = line.rstrip("\r\n")
        if line.startswith(CONTEXT):
            test = line[len(CONTEXT):]
            test = test.removesuffix(_OFF)
            meta.starts.append(lineno)
            meta.tests.append((test, []))
        elif line == NO_CONTEXT:
            meta.starts.append(lineno)
            meta.tests.append((None, []))
        elif line.startswith(MARK + " "):
            word, _, rest = line[len(MARK) + 1:].partition(" ")
            if word == "suppress" and _rule(rest):
                meta.rules.append(_rule(rest))  # type: ignore[arg-type]
            elif word == "suppress-test" and _rule(rest):
                meta.tests[-1][1].append(_rule(rest))  # type: ignore[arg-type]
            elif word == "stack" and event and event not in meta.stacks:
                meta.stacks[event] = _frames(rest)
            elif word == "class" and " " in rest:
                name, _, qualified = rest.rpartition(" ")
                meta.qualified.setdefault(name, qualified)
            elif word == "fork":
                _fork(meta, rest, lineno)
            elif word == "finding":
                record = _record(rest)
                if record is not None:
                    meta.findings.append((event or lineno, record))
    if meta.forks:
        meta.forks[-1].end = lineno
    return meta


def scan_input(path: str) -> Optional[PluginMeta]:
    """`scan` of an input that can be read again (a file, maybe compressed, or a spooled standard
    input); None when the plugin did not write it or it cannot be read (the check says why)."""
    from lockcheck.errors import TraceError
    from lockcheck.readers.source import open_lines

    try:
        _, lines = open_lines(path)
    except (OSError, TraceError):
        return None
    try:
        head = [next(lines, ""), next(lines, "")]
        if not is_plugin_trace(head):
            return None
        return scan(_chain(head, lines))
    except (OSError, TraceError, UnicodeDecodeError, EOFError):
        return None
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()


def _chain(head: list[str], rest: Iterable[str]) -> Iterator[str]:
    yield from head
    yield from rest


def _fork(meta: PluginMeta, text: str, lineno: int) -> None:
    """A `fork CHILD PARENT LINE` record at trace line `lineno` (its file's line `FORK_RECORD`)."""
    parts = text.split()
    if len(parts) != 3 or not all(part.isascii() and part.isdigit() and len(part) < 20 for part in parts):
        return
    base = lineno - FORK_RECORD
    if meta.forks:
        meta.forks[-1].end = base
    meta.forks.append(Fork(int(parts[0]), int(parts[1]), int(parts[2]), base))


def _record(text: str) -> Optional[dict]:
    """A `finding` line's record; None when it is not the JSON object the recorder writes."""
    try:
        record = json.loads(text)
    except ValueError:
        return None
    return record if isinstance(record, dict) and isinstance(record.get("kind"), str) else None


def _frames(text: str) -> tuple[tuple[str, int, str], ...]:
    """The frames of a `stack` line; none when it is not the JSON the recorder writes."""
    try:
        frames = json.loads(text)
        return tuple((str(f[0]), int(f[1]), str(f[2])) for f in frames)
    except (ValueError, TypeError, IndexError):
        return ()
