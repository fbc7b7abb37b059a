"""A trace the pytest plugin recorded, read from standard input: its plugin lines read first.

`lockcheck check` reads a recorded trace's `#lockcheck-plugin` lines before it checks the
events (`plugin_replay.read_meta`): the rules apply from the first finding on, a forked
child's part is checked again from its parent's state.  A file is simply read twice; standard
input (a pipe, a redirect) is read once.  So its head is looked at first: a trace whose second
line is `#lockcheck-plugin v1` (of a compressed input: its decompressed head, read through a
recording of the bytes, which are then given back) is kept whole in a temporary file (deleted when closed), scanned, and handed
to the check from its start, named `<stdin>` as before; any other input goes on streaming,
its head put back in front of the rest.  `sys.stdin` is replaced by that stream, which is what
the readers read (`readers.source`); nothing else of the process reads standard input.
"""

from __future__ import annotations

import io
import sys
import tempfile
from typing import Any, BinaryIO, Optional

from lockcheck.readers import plugin_meta
from lockcheck.readers.plugin_meta import PluginMeta
from lockcheck.readers.source import Prefixed

#: the most bytes read to find the head's two lines (a longer first line: no plugin trace)
HEAD_LIMIT = 1 << 16
_COMPRESSED = (b"\x1f\x8b", b"\xfd7zXZ\x00", b"\x28\xb5\x2f\xfd")
_MISSING = object()


def stdin_meta() -> Optional[PluginMeta]:
    """The plugin lines of standard input, or None when it is no plugin trace (or closed).

    Once per process: a check done again (a `--jobs` fallback) finds the answer on `sys.stdin`.
    """
    stdin = sys.stdin
    known = getattr(stdin, "lockcheck_meta", _MISSING)
    if known is not _MISSING:
        rewind()
        return known  # type: ignore[return-value]
    buffer = getattr(stdin, "buffer", None) if stdin is not None else None
    if buffer is None:
        return None  # closed: the check itself says so
    try:
        head = _head(buffer)
    except (OSError, ValueError):
        return None
    if head.startswith(_COMPRESSED):  # its second line is in the decompressed bytes
        head, text = _decompressed_head(head, buffer)
    else:
        text = head
    lines = text.split(b"\n", 2)
    plugin = len(lines) >= 2 and lines[1].rstrip(b"\r").decode("utf-8", "replace") == plugin_meta.HEADER
    if not plugin:
        _replace(io.BufferedReader(Prefixed(head, buffer)))  # streams on, as before
        return None
    spool: Any = tempfile.TemporaryFile()  # noqa: SIM115 - standard input from now on, open to the end
    spool.write(head)
    while True:
        chunk = buffer.read(1 << 20)
        if not chunk:
            break
        spool.write(chunk)
    spool.seek(0)
    _replace(spool)
    from lockcheck.readers.source import STDIN

    meta = plugin_meta.scan_input(STDIN)
    spool.seek(0)
    sys.stdin.lockcheck_meta = meta  # type: ignore[union-attr]
    return meta


def rewind() -> None:
    """Standard input (spooled by `stdin_meta`) from its start again: a forked child's check reads it."""
    buffer = getattr(sys.stdin, "buffer", None)
    if getattr(sys.stdin, "lockcheck_meta", None) is not None and buffer is not None:
        buffer.seek(0)


def _head(buffer: BinaryIO) -> bytes:
    """The first bytes, up to the end of the second line (a pipe may deliver them piecemeal)."""
    return _two_lines(buffer, stop=lambda head: head.startswith(_COMPRESSED))


def _two_lines(stream: Any, stop: Any = None, into: Optional[bytearray] = None) -> bytes:
    """What `stream` gives up to the end of its second line (at most HEAD_LIMIT bytes), read as it
    comes; `stop(read_so_far)` true ends it sooner (a compressed head: its lines are not text).
    `into`, when given, holds what was read even if a read raises."""
    text = bytearray() if into is None else into
    read = getattr(stream, "read1", stream.read)
    while text.count(b"\n") < 2 and len(text) < HEAD_LIMIT:
        chunk = read(HEAD_LIMIT - len(text))
        if not chunk:
            break
        text += chunk
        if stop is not None and stop(text):
            break
    return bytes(text)


class _Recording(io.RawIOBase):
    """The head already read, then standard input, as a decompressor reads them: every byte is
    kept to be read again (`replay`)."""

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        super().__init__()
        self._source = Prefixed(head, rest)
        self._unread = len(head)  # of the head, not taken yet
        self._seen = bytearray()

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        size = self._source.readinto(buffer)
        taken = bytes(buffer[:size])
        if self._unread:  # the head is still the head; only what comes after it is new
            from_head = min(size, self._unread)
            self._unread -= from_head
            taken = taken[from_head:]
        self._seen += taken
        return size

    def replay(self, head: bytes) -> bytes:
        """`head` and everything read from standard input after it."""
        return head + bytes(self._seen)


def _decompressed_head(head: bytes, rest: BinaryIO) -> tuple[bytes, bytes]:
    """(the compressed bytes read so far, the start of what they decompress to): enough of a
    compressed standard input to see its second line, without keeping the rest of it."""
    from lockcheck.errors import TraceError
    from lockcheck.readers.source import STDIN_NAME, _decompressed

    recording = _Recording(head, rest)
    text = bytearray()
    try:
        _two_lines(_decompressed(recording, STDIN_NAME), into=text)  # type: ignore[arg-type]
    except (TraceError, OSError, EOFError, ValueError):
        pass  # the check itself reports a broken input, from these same bytes
    return recording.replay(head), bytes(text)


#: the standard input streams replaced: kept, since a text stream that is collected closes its
#: buffer -- the process's own standard input
_REPLACED: list = []


def _replace(buffer: Any) -> None:
    """`sys.stdin` read from `buffer`; its plugin lines not known yet (None: no plugin trace)."""
    stream = io.TextIOWrapper(buffer, encoding="utf-8", errors="surrogateescape")
    stream.lockcheck_meta = None  # type: ignore[attr-defined]
    _REPLACED.append(sys.stdin)
    sys.stdin = stream


