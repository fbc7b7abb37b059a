"""JSON Lines checked by the `.lt` engine: each line translated into the `.lt` line of the same event.

Why (issue 23): one engine for every reader.  `lockcheck.engine.fast_lt` and
its compiled filter are the fastest way lockcheck applies events; a JSON
Lines file whose lines become the `.lt` lines of the very events the JSON
Lines reader reads goes through that engine unchanged, and needs no fast
path of its own to keep equal to the plain pipeline (before this, JSON Lines
ran 3.6x slower than `.lt` through `fast_capture.jsonl_events`).

The translation (`lockcheck.engine._jsonlt.Translator`, compiled) keeps
line numbers 1:1 -- a blank or comment line becomes an empty line -- so
evidence and errors name the JSON file's own lines.  It translates the
common flat objects itself; every other line goes to `_slow_line`: the JSON
Lines reader's own code (`jsonl.parse_numbered`, so a bad line raises its
`FILE:LINE:COL` error exactly as before, after the lines before it took
effect) and `lt_write.format_event`, whose line is read back and compared
with the event.  An event `.lt` cannot carry (a `comm`, an `at` on an op
whose `.lt` line takes none, a task with blanks) stops the translation
at that line, found as the file is read: the held stacks the `.lt` engine
left are made `HeldLock`s, and the rest of the file goes the old way
(`fast_capture.jsonl_events` from that line on).

The file is read as blocks the translator checks itself (`source.Checking`: no
scan or copy of them in the source), and the translator hands the `.lt` engine
each line's split beside its text (`_lt_hints.h`), so the engine does not split
it again; `LOCKCHECK_JSONL_HINTS=0` gives the text alone, for comparing.

Without the compiled translator (no compiler, `LOCKCHECK_PURE=1`) JSON Lines
keep the old way: a translation in Python would cost more than it saves.
"""

from __future__ import annotations

import itertools
import os
from typing import Callable, Iterable, Iterator, Optional

from lockcheck.engine import fast_lt
from lockcheck.errors import TraceError
from lockcheck.events import Event
from lockcheck.lockdep.checker import Checker
from lockcheck.readers.source import Checking


def available() -> bool:
    """Whether JSON Lines are translated here: both compiled cores built, `LOCKCHECK_PURE` unset,
    and not `LOCKCHECK_JSONL_LT=0` (the old way, for comparing)."""
    if os.environ.get("LOCKCHECK_JSONL_LT") == "0" or not fast_lt.compiled():
        return False
    return _translator() is not None


def _translator():
    try:
        from lockcheck.engine._jsonlt import Translator
    except ImportError:
        return None
    return Translator


def slow_line(file: str) -> Callable[[str, int], Optional[str]]:
    """`slow(line, lineno)` for the translator: the `.lt` text of one JSON line the compiled code
    did not translate ('' for a blank or comment line), the JSON Lines reader's `TraceError` for a
    bad one, None for an event `.lt` cannot carry (the translation stops there)."""
    from lockcheck.readers import jsonl
    from lockcheck.readers.lt_write import format_event

    def slow(line: str, lineno: int) -> Optional[str]:
        text = line.strip()
        if not text or text[0] == "#":
            return ""
        event = next(jsonl.parse_numbered(((lineno, line),), file))
        if event.comm is not None:
            return None
        try:
            written = format_event(event)
        except ValueError:
            return None
        if "\n" in written or "\r" in written:
            return None
        try:
            back = fast_lt._plain(written, file, lineno)
        except TraceError:
            return None
        return written if back == event else None

    return slow


def jsonl_lt_events(checker: Checker, tick: Optional[Callable[[str], None]], lines: Iterable[str],
                    file: str = "<trace>", context=None) -> Iterator[Event]:
    """The events of JSON Lines that need the full checker; the others applied by the `.lt` engine.

    Feed what this yields to the checker before asking for the next one (as
    `fast_lt.lt_events`).  `context` (the session's `ReadContext`) is not used:
    the translation is cheaper than handing the JSON decoding to a second
    process (`fast_capture.jsonl_events` with `context.parallel`), and the old
    way after a stop reads in this process.
    """
    source = iter(lines)  # (the old way goes on from where the translator stopped)
    checking = Checking(int)  # (its line count is the translator's, set once the translator has its reject)
    # each line's split handed on beside its text (the `.lt` core need not find it again), unless
    # LOCKCHECK_JSONL_HINTS=0 (the text alone, for comparing)
    hints = os.environ.get("LOCKCHECK_JSONL_HINTS") != "0"
    translator = _translator()(source, slow_line(file), checking.reject, hints)
    checking.lines_read = translator.lines_read
    give_bytes = getattr(lines, "give_bytes", None)
    if give_bytes is not None:
        # blocks as `(bytes, start, stop)`, unchecked and uncopied (the translator classifies every
        # byte anyway, and gives back a block that is not plain ASCII for the source to decode):
        # translated a block at a time, and the `.lt` engine splits the translation itself; the
        # source's line numbers count the lines translated
        give_bytes(checking)
    yield from fast_lt.lt_events(checker, translator, file, tick)
    stopped = translator.stopped_at()
    if not stopped:
        return
    yield from _old_way(checker, tick, source, lines, file, stopped, translator.rest(), give_bytes is not None)


def _old_way(checker: Checker, tick, source: Iterator, lines, file: str, start: int, rest: list,
             bytes_given: bool) -> Iterator[Event]:
    """The file from line `start` on, the old way (`fast_capture.jsonl_events`): `rest` holds that
    line and the rest of its block, `source` the rest of the file (blocks of bytes among its str
    lines when `bytes_given`: `lines.give_bytes` was called)."""
    from lockcheck.engine import fast_capture

    for task in checker.tasks.values():
        if task.held:
            fast_lt.materialize(task.held, file)  # the old way reads HeldLocks, not the engine's tuples
    counted = [start - 1]

    def numbered_lines() -> Iterator[str]:
        for line in itertools.chain(rest, source):
            if line.__class__ is bytes:
                for piece in line.decode("ascii").split("\n"):
                    counted[0] += 1
                    yield piece[:-1] if piece[-1:] == "\r" else piece
            else:
                counted[0] += 1
                yield line

    if bytes_given:
        lines.give_bytes(lambda: counted[0])
    yield from fast_capture.jsonl_events(checker, tick, numbered_lines(), file, start=start)
