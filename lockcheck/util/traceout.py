"""Writing a trace file as a program runs: plain, or compressed when the name says so.

The pytest plugin streams every lock event of a session to `--lockcheck-trace
FILE`; a lock-heavy suite writes hundreds of megabytes of very repetitive
lines, so a name ending in `.gz`, `.xz` or `.zst` is compressed on the way
out (the readers detect all three by their magic bytes).

Why not `gzip.open(path, "wt")`: the traced program may fork.  A child
inherits the writer, and when the child drops or closes it, a stdlib
compressing file writes its pending compressed data and trailer into the
file the parent is still writing -- the parent's trace is corrupt.  A
`TraceOutput` remembers the process that opened it and does nothing
(writes, flushes, closes) in any other process; the child keeps or opens
its own.
"""

from __future__ import annotations

import lzma
import os
import zlib
from typing import Any, Optional

#: text is compressed and written in chunks of about this many characters
CHUNK = 1 << 16

#: name suffix -> compression
COMPRESSIONS = {".gz": "gzip", ".xz": "xz", ".zst": "zstd"}


def compression_of(path: str) -> Optional[str]:
    """`gzip`, `xz` or `zstd` from the file name's suffix; None: write plain text."""
    return COMPRESSIONS.get(os.path.splitext(path)[1].lower())


def _compressor(kind: Optional[str]) -> Any:
    """An object with `compress(bytes) -> bytes` and `flush() -> bytes`, or None for plain text."""
    if kind == "gzip":
        return zlib.compressobj(6, zlib.DEFLATED, 31)  # wbits 16+15: a gzip member
    if kind == "xz":
        return lzma.LZMACompressor(lzma.FORMAT_XZ, preset=1)
    if kind == "zstd":
        import zstandard

        return zstandard.ZstdCompressor(level=3).compressobj()
    return None


class TraceOutput:
    """A text sink for trace lines: `write(str)`, `flush()`, `close()`, like a text file.

    Lines are gathered in memory, encoded as UTF-8, compressed when the
    file name asks for it, and written in chunks; `flush()` pushes what is
    gathered (through the compressor's sync point, so a reader sees every
    line written so far).  Only the process that opened it writes.
    """

    def __init__(self, path: str, compression: Optional[str] = None) -> None:
        self.path = path
        self.compression = compression
        self._compressor = _compressor(compression)
        self._file = open(path, "wb", buffering=0)
        self._pid = os.getpid()
        self._parts: list[str] = []
        self._size = 0
        self._lines = 0  # lines pushed to the file so far (`lines`)
        self.closed = False

    def write(self, text: str) -> int:
        if self.closed:
            return 0  # the program goes on after its trace was finished: that is not an error
        self._parts.append(text)
        self._size += len(text)
        if self._size >= CHUNK:
            self._push(sync=False)
        return len(text)

    def lines(self) -> int:
        """Lines written so far, pushed or gathered: a forked child reads it at the fork (where
        the parent's trace stops being its past) without writing the parent's lines itself."""
        return self._lines + sum(part.count("\n") for part in self._parts)

    def flush(self) -> None:
        if not self.closed and os.getpid() == self._pid:
            self._push(sync=True)

    def close(self) -> None:
        if self.closed:
            return
        self.closed = True
        if os.getpid() != self._pid:
            return  # a forked child: the parent's file is not ours to finish
        self._push(sync=False)
        if self._compressor is not None:
            self._raw(self._compressor.flush())
        self._file.close()

    def _push(self, sync: bool) -> None:
        if os.getpid() != self._pid:
            self._parts.clear()
            self._size = 0
            return
        text = "".join(self._parts)
        self._lines += text.count("\n")
        data = text.encode("utf-8", "surrogateescape")
        self._parts.clear()
        self._size = 0
        comp = self._compressor
        if comp is None:
            self._raw(data)
            return
        out = comp.compress(data)
        if sync:
            out += _sync_flush(comp, self.compression)
        self._raw(out)

    def _raw(self, data: bytes) -> None:
        view = memoryview(data)
        while view:  # a regular file takes it all at once; a pipe may not
            view = view[self._file.write(view):]

    def __enter__(self) -> "TraceOutput":
        return self

    def __exit__(self, *exc: Any) -> None:
        self.close()


def _sync_flush(comp: Any, kind: Optional[str]) -> bytes:
    """What makes every byte compressed so far decodable, without ending the stream."""
    if kind == "gzip":
        return comp.flush(zlib.Z_SYNC_FLUSH)
    if kind == "zstd":
        import zstandard

        return comp.flush(zstandard.COMPRESSOBJ_FLUSH_BLOCK)
    return b""  # xz has no sync point short of ending the stream: lines appear at close


def open_trace_output(path: str) -> TraceOutput:
    """A `TraceOutput` for `path`, compressed by its suffix (`.gz`, `.xz`, `.zst`)."""
    return TraceOutput(path, compression_of(path))
