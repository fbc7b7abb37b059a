"""Readers: every input format becomes one stream of `lockcheck.events.Event`.

`read(path)` and `read_all(paths)` are the only entries the rest of
lockcheck uses.  They open the input (a file, possibly gzip/xz/zstd-compressed,
`-` for standard input, or -- for `read_all` -- a directory, each of its files
classified on its own: see `inputs`), pick a format by sniffing the first
non-blank lines unless one is forced, and stream events line by line.  When
no format claims the lines, text that looks like something else (a kernel
log, a JSON document) is "not a trace (looks like ...)"; anything else is
read as `.lt`, whose parser then names the line and column that is wrong.

A format is a module with:

- `NAME`: the `--input-format` value (`lt`, `ftrace`, `perf`, `jsonl`, ...);
- `sniff(lines: list[str]) -> bool`: whether the first non-blank lines look
  like this format;
- `parse(lines: Iterable[str], file: str) -> Iterator[Event]`: events from
  decoded lines (line endings stripped), raising `TraceError` with file,
  line and column for anything malformed.

Optionally, a module sets `CAPTURE = True` when its traces are captures
that start mid-flight (ftrace, perf: releases of locks taken before the
capture began are expected), `IRQ_STATE = False` when its traces carry no
irq context at all (perf: nothing says whether a lock was taken in a
handler or with irqs on, so no irq usage may be inferred), `CONTENTION =
False` when its `contended`/`acquired` are counted only, never checked for
bad contention (the default for captures, and JSON Lines: their fast path,
`engine.fast_capture`, counts them without the checker), and
`TAKES_STATS = True` when its `parse` accepts `stats=` (a `ReaderStats` it
fills with skipped lines and the like).
A format whose inputs hold reports rather than events (`kernel-log`: the
kernel's own lockdep reports) sets `TAKES_REPORTS = True`: its `parse`
takes `reports=`, the context's `ReportSink`, and yields no events;
`PARALLEL = False` keeps a module's files out of the reader process.

Register a new format by adding its module to `formats.FORMAT_MODULES`, in
sniffing priority order.
"""

from __future__ import annotations

import itertools
import os
from dataclasses import dataclass, field
from types import ModuleType
from typing import Callable, Iterable, Iterator, Optional, Union

from lockcheck.errors import TraceError, UsageError
from lockcheck.events import Event
from lockcheck.readers import inputs, parallel, source
from lockcheck.readers.formats import formats, sniff_format
from lockcheck.readers.inputs import Input



@dataclass
class ReadContext:
    """What the readers learn on the way that the rest of a run needs.

    `formats` lists `(file, format name)` as each input is opened;
    `on_open(file, module)` is called at that moment, before the file's
    first event (the session starts a run there, with capture rules for a
    capture); `stats` collects what capture readers skipped or resolved.
    """

    formats: list[tuple[str, str]] = field(default_factory=list)
    on_open: Optional[Callable[[str, ModuleType], None]] = None
    #: files of a directory that are no trace, as `inputs.Input`s (kind SKIP or DUMP)
    skipped: list = field(default_factory=list)
    #: when a list, an input that fails (unreadable, malformed) is recorded here and
    #: the next input is read; when None, the TraceError propagates
    errors: Optional[list] = None
    stats: object = None
    #: parse large files in a second process (`lockcheck.readers.parallel`)
    parallel: bool = False
    #: `fast(module, rules_module) -> parse or None`: a parse that applies the lines it can to
    #: the checker itself and yields only the rest as events (`lockcheck.engine.fast_lt`); asked once a
    #: file's format (and the format whose rules its transform follows) is known
    fast: Optional[Callable[[ModuleType, ModuleType], Optional[Callable[[Iterator[str], str], Iterator[Event]]]]] = None
    #: `transform(module, events) -> events`, applied to each file's events once
    #: its format is known (the session's annotations for captures)
    transform: Optional[Callable[[ModuleType, Iterator[Event]], Iterable[Event]]] = None
    #: where formats that hold reports (`kernel-log`) send them (a `kernel_log.ReportSink`)
    reports: Optional[object] = None
    #: `on_dump(name, lines)`: an input that is a /proc/lockdep or /proc/lockdep_chains dump
    #: although it was taken for a trace (standard input, which cannot be looked at twice);
    #: without it such an input is "not a trace (looks like a /proc/lockdep dump)"
    on_dump: Optional[Callable[[str, Iterator[str]], None]] = None
    #: what gives a directory named as a path a meaning beyond its files (`inputs.expand`)
    directory_hooks: tuple = ()

    def __post_init__(self) -> None:
        self._tell: Optional[Callable[[], int]] = None
        self._bytes_done = 0
        if self.stats is None:
            from lockcheck.readers.ftrace import ReaderStats

            self.stats = ReaderStats()

    def notes(self) -> list[str]:
        """What was left unread: files of directories that are no trace."""
        return [item.skip_note() for item in self.skipped]

    # -- how far the reading is, for a progress line ------------------------------
    def reading(self, tell: Optional[Callable[[], int]]) -> None:
        """A file is being read; `tell()` gives its bytes read so far (None: unknown, stdin)."""
        self._tell = tell

    def done_reading(self, path: str) -> None:
        """The file at `path` is read: all its bytes count as read."""
        self._tell = None
        if path != source.STDIN:
            try:
                self._bytes_done += os.path.getsize(path)
            except OSError:
                pass

    def bytes_read(self) -> int:
        """Bytes of the input files read so far (compressed bytes for compressed files)."""
        tell = self._tell
        try:
            return self._bytes_done + (tell() if tell is not None else 0)
        except (OSError, ValueError):  # a file closed between the check and the call
            return self._bytes_done


def run_rules(module: ModuleType) -> dict[str, bool]:
    """How a checker starts a run of a trace in this format (`Checker.open_trace` keywords)."""
    return {"capture": bool(getattr(module, "CAPTURE", False)),
            "irq_state": bool(getattr(module, "IRQ_STATE", True)),
            "contention": bool(getattr(module, "CONTENTION", not getattr(module, "CAPTURE", False)))}


#: how many non-blank lines `sniff` sees (ftrace output opens with ~12 comment lines)
SNIFF_LINES = 32
#: how many lines, blank ones included, format detection reads at most
SNIFF_MAX_LINES = 100_000


def read(path: str, input_format: str = "auto", context: Optional[ReadContext] = None) -> Iterator[Event]:
    """Events of one trace (a file or `-`), in file order, streamed.

    `input_format` is a registered NAME or `auto`: the first non-blank lines
    are buffered, shown to each format's `sniff` in priority order, and
    replayed, so standard input is read once.  `.lt` is the fallback when no
    format claims the input.  An unknown forced format is a UsageError, raised
    here rather than when the events are first read.
    """
    module = None if input_format == "auto" else _forced(input_format)
    return _events(path, module, context)


def read_all(paths: Iterable[Union[str, Input]], input_format: str = "auto",
             context: Optional[ReadContext] = None) -> Iterator[Event]:
    """Events of every trace in `paths`, one file after the other.

    `paths` are command-line names (directories are expanded by
    `inputs.expand`, each file classified) or `inputs.Input`s already
    expanded.  Files of a directory that are no trace, and /proc/lockdep
    dumps (the session merges those itself), are left out and listed in
    `context.skipped`.
    """
    if input_format != "auto":
        _forced(input_format)
    return _read_each(list(paths), input_format, context)


def _read_each(paths: list[Union[str, Input]], input_format: str,
               context: Optional[ReadContext]) -> Iterator[Event]:
    for path in paths:
        try:
            items = inputs.expand([path], context.directory_hooks if context else ()) \
                if isinstance(path, str) else [path]
        except TraceError as err:  # a directory without files
            items = [Input(path if isinstance(path, str) else path.path, inputs.ERROR, error=err)]
        for item in items:
            yield from _read_input(item, input_format, context)


def _read_input(item: Input, input_format: str, context: Optional[ReadContext]) -> Iterator[Event]:
    """The events of one input; a skipped one noted, a failing one recorded when the context collects errors."""
    if item.kind in (inputs.SKIP, inputs.DUMP, inputs.LOCK_STAT):
        if context is not None:
            context.skipped.append(item)
        return
    try:
        if item.kind == inputs.ERROR:
            raise item.error  # type: ignore[misc]
        yield from read(item.path, input_format, context)
    except TraceError as err:
        if context is None or context.errors is None:
            raise
        context.errors.append(err)


def _forced(input_format: str) -> ModuleType:
    """The module of a format named on the command line."""
    known = formats()
    if input_format not in known:
        raise UsageError(f"unknown input format {input_format!r} (choose from auto, {', '.join(known)})")
    return known[input_format]


def _events(path: str, module: Optional[ModuleType], context: Optional[ReadContext]) -> Iterator[Event]:
    tells: list = []
    name, lines = source.open_lines(path, tells)
    if context is not None:
        context.reading(tells[0])
    try:
        head, lines = _peek(lines)
        if module is None and context is not None and context.on_dump is not None and inputs.is_dump_head(head):
            context.on_dump(name, lines)
            return
        if module is None:
            module = detect(head, name)
        if context is None:
            yield from module.parse(lines, name)
            return
        context.formats.append((name, module.NAME))
        if context.on_open is not None:
            context.on_open(name, module)
        fast = context.fast(module, _runs_format(module, head)) if context.fast is not None else None
        if fast is not None:
            events = fast(lines, name)
        elif context.parallel and getattr(module, "PARALLEL", True) and parallel.worth_it(path):
            close = getattr(lines, "close", None)
            if close is not None:
                close()
            offset = [0]
            context.reading(lambda: offset[0])
            events = parallel.read_in_worker(path, module, context.stats, offset)
        else:
            kwargs: dict = {}
            if getattr(module, "TAKES_STATS", False):
                kwargs["stats"] = context.stats
            if getattr(module, "TAKES_REPORTS", False):
                kwargs["reports"] = context.reports
            events = module.parse(lines, name, **kwargs)
        if context.transform is not None:
            events = context.transform(_runs_format(module, head), events)
        yield from events
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()
        if context is not None:
            context.done_reading(path)


def _runs_format(module: ModuleType, head: list[str]) -> ModuleType:
    """The format whose rules a file's transform follows: a `.lt` file that `convert`
    wrote from a capture says so on its `#lockcheck-run format=...` lines (the first
    capture format among those in its first lines wins)."""
    if module.NAME != "lt":
        return module
    known = formats()
    for line in head:
        if line.lstrip().startswith("#lockcheck-run"):
            for word in line.split():
                other = known.get(word[len("format="):]) if word.startswith("format=") else None
                if other is not None and getattr(other, "CAPTURE", False):
                    return other
    return module


def detect(head: list[str], name: str = "<trace>") -> ModuleType:
    """The format of a trace whose first non-blank lines are `head`.

    The first registered format whose `sniff` accepts them; else, when they
    look like something known that is no trace (a kernel log, JSON, ...), a
    TraceError saying so; else `.lt`, whose parser names what is wrong.
    """
    module = sniff_format(head)
    if module is not None:
        return module
    what = inputs.looks_like(head)
    if head and what != inputs.PLAIN_TEXT:
        raise TraceError(name, None, None, f"not a trace (looks like {what})")
    return formats()["lt"]


def _peek(lines: Iterator[str]) -> tuple[list[str], Iterator[str]]:
    """The first SNIFF_LINES non-blank lines, and an iterator that still yields every line.

    Blank lines are counted, not kept, and at most SNIFF_MAX_LINES lines are
    looked at: a file that opens with a gigabyte of newlines (a few hundred
    KB compressed) must not be held in memory to decide its format.
    """
    head: list[str] = []
    blanks_before: list[int] = []  # blank lines before each line of `head`
    blank = 0
    try:
        for seen, line in enumerate(lines, 1):
            if line.strip(" \t"):
                head.append(line)
                blanks_before.append(blank)
                blank = 0
                if len(head) >= SNIFF_LINES:
                    break
            else:
                blank += 1
            if seen >= SNIFF_MAX_LINES:
                break
    except TraceError as err:
        if not head:
            raise
        # a bad line among the first: the lines before it are read (and reported) first, then
        # its error is raised, as for a bad line anywhere else
        return head, _Peeked.of(_replay(head, blanks_before, blank), _raising(err))
    return head, _Peeked.of(_replay(head, blanks_before, blank), lines)


def _raising(err: TraceError) -> Iterator[str]:
    """No lines, then `err`: the rest of an input whose reading already failed there."""
    raise err
    yield  # pragma: no cover  (a generator)


class _Peeked(itertools.chain):
    """The lines `_peek` looked at, then the rest: a chain that passes `give_bytes` on to the rest
    (`source.Lines.give_bytes`: the compiled fast path reads the rest as blocks of bytes)."""

    _rest: Iterator[str]

    @classmethod
    def of(cls, head: Iterator[str], rest: Iterator[str]) -> "_Peeked":
        peeked = cls(head, rest)
        peeked._rest = rest
        return peeked

    def give_bytes(self, lines_read: Callable[[], int]) -> bool:
        """Ask the rest for blocks of bytes from its next block on; False: it cannot."""
        give = getattr(self._rest, "give_bytes", None)
        return give(lines_read) if give is not None else False


def _replay(head: list[str], blanks_before: list[int], trailing: int) -> Iterator[str]:
    """The lines `_peek` consumed, blank ones as "" (every reader skips a blank line alike)."""
    for line, blanks in zip(head, blanks_before):
        yield from itertools.repeat("", blanks)
        yield line
    yield from itertools.repeat("", trailing)
