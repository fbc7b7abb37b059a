"""The progress line on a terminal: share of the input read, rate, time left.

Drawn on stderr only when it is a terminal, in the place tqdm and rich
draw theirs (one line, redrawn with `\\r`, cleared at the end)::

    lockcheck:  42%|████████▍           | 12.3/29.1 MB [00:05<00:07, 231k events/s] trace.ftrace.xz

The share is of bytes: the inputs' sizes are known before reading, and a
compressed file counts by its compressed offset (what has been read of the
file on disk), so an xz capture shows true progress though its events are
several times its size.  When the size is not known (standard input) the
line shows the events read and the rate instead.

Why not tqdm or rich: the measure (bytes across several possibly
compressed files, read in another process) is lockcheck's own either way,
and what is left to draw is one formatted line; a dependency for it would
cost every user an install for no better output.

Checking the clock costs, so the line is considered every `EVERY` events
(the first time at once) and redrawn at most every `INTERVAL` seconds.
"""

from __future__ import annotations

import time
from typing import Callable, Iterable, Iterator, Optional, TextIO

from lockcheck.events import Event

#: events between two looks at the clock (a power of two minus one: a mask)
EVERY = 0xFFFF
#: seconds between two redraws
INTERVAL = 0.5
#: width of the bar, in characters
BAR = 20
#: the line never grows past this (a file name is cut from the left)
WIDTH = 100

_BLOCKS = " ▏▎▍▌▋▊▉█"


def is_terminal(stream: TextIO) -> bool:
    try:
        return stream.isatty()
    except (AttributeError, ValueError):
        return False


class ProgressLine:
    """Draws the progress of a stream of events on `stream`.

    `total` is the input size in bytes (None: unknown), `bytes_read()` how
    much of it has been read; `clock` is injectable for tests.
    """

    def __init__(self, stream: TextIO, total: Optional[int], bytes_read: Callable[[], int],
                 clock: Callable[[], float] = time.monotonic, name: Callable[[str], str] = str) -> None:
        self.stream = stream
        self.total = total if total else None
        self.bytes_read = bytes_read
        self.clock = clock
        self.name = name
        self.shown = False
        self._start = clock()
        self._last: Optional[float] = None
        self._count: Optional[Callable[[], int]] = None
        self._unicode = (getattr(stream, "encoding", None) or "").lower().replace("-", "").startswith("utf")

    def wrap(self, events: Iterable[Event], count: Optional[Callable[[], int]] = None) -> Iterator[Event]:
        """`events`, unchanged, drawing the line as they pass.

        `count()`, when given, is the number of events read so far, for a
        reader that applies some events without passing them on (the fast
        path, `lockcheck.engine.fast_lt`); it calls `tick` as it goes.
        """
        self._start = self.clock()
        self._last = None
        self._count = count
        passed = 0
        for ev in events:
            passed += 1
            if not passed & EVERY:
                self.tick(ev.file, passed)
            yield ev

    def tick(self, file: str, passed: int = 0) -> None:
        """Redraw the line if it is time (a reader calls this every so many lines)."""
        now = self.clock()
        if self._last is None or now - self._last >= INTERVAL:
            self._last = now
            self.draw(self._count() if self._count is not None else passed, now - self._start, file)

    def draw(self, events: int, elapsed: float, file: str) -> None:
        self.stream.write("\r" + self.line(events, elapsed, file) + "\033[K")
        self.stream.flush()
        self.shown = True

    def line(self, events: int, elapsed: float, file: str) -> str:
        """The text of the line (without the `\\r` and the clearing escape)."""
        rate = events / elapsed if elapsed > 0 else 0.0
        if self.total is None:
            text = f"lockcheck: {events:,} events [{_clock(elapsed)}, {_si(rate)} events/s]"
        else:
            done = min(self.bytes_read(), self.total)
            share = done / self.total
            left = elapsed * (self.total - done) / done if done else None
            text = (f"lockcheck: {share:4.0%}|{self.bar(share)}| {_size(done, self.total)} "
                    f"[{_clock(elapsed)}<{_clock(left)}, {_si(rate)} events/s]")
        room = WIDTH - len(text) - 1
        shown = self.name(file)
        if room > 8:
            text += " " + (shown if len(shown) <= room else "..." + shown[-(room - 3):])
        return text

    def bar(self, share: float) -> str:
        if not self._unicode:
            filled = int(share * BAR)
            return "#" * filled + " " * (BAR - filled)
        eighths = int(share * BAR * 8)
        full, part = divmod(eighths, 8)
        text = "█" * full + (_BLOCKS[part] if full < BAR else "")
        return text + " " * (BAR - len(text))

    def clear(self) -> None:
        if self.shown:
            self.stream.write("\r\033[K")
            self.stream.flush()
            self.shown = False


def _clock(seconds: Optional[float]) -> str:
    """`MM:SS` (or `H:MM:SS`), `?` when unknown."""
    if seconds is None:
        return "?"
    seconds = int(seconds)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02}:{secs:02}" if hours else f"{minutes:02}:{secs:02}"


def _si(value: float) -> str:
    """231k, 1.2M: a rate as people read it."""
    for unit, size in (("M", 1e6), ("k", 1e3)):
        if value >= size:
            return f"{value / size:.1f}{unit}" if value < 10 * size else f"{value / size:.0f}{unit}"
    return f"{value:.0f}"


def _size(done: int, total: int) -> str:
    """`12.3/29.1 MB`: bytes read of the total, in the total's unit (SI: a kB is 1000 bytes, as
    tqdm and rich count, and as the file size `ls -l` prints reads)."""
    for unit, size in (("GB", 10 ** 9), ("MB", 10 ** 6), ("kB", 10 ** 3)):
        if total >= size:
            return f"{done / size:.1f}/{total / size:.1f} {unit}"
    return f"{done}/{total} B"
