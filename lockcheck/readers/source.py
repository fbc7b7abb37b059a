"""Opening trace inputs: files, `-` (stdin), compressed files.

Every format module reads decoded lines with their endings removed; this
module is the only place that deals with bytes.  It streams: a file is read
one line at a time (a line is capped at `MAX_LINE` bytes, so binary garbage
cannot eat the memory), and every problem is a `TraceError` naming the file
and, when there is one, the line and column.
"""

from __future__ import annotations

import gzip
import io
import lzma
import sys
import zlib
import itertools
from itertools import repeat
from typing import BinaryIO, Callable, Iterator, Optional

from lockcheck.errors import TraceError
from lockcheck.readers import zstd_input

STDIN = "-"
STDIN_NAME = "<stdin>"

#: longest line accepted, in bytes; longer is taken for binary data
MAX_LINE = 1 << 20

_GZIP_MAGIC = b"\x1f\x8b"
_XZ_MAGIC = b"\xfd7zXZ\x00"
_ZSTD_MAGIC = b"\x28\xb5\x2f\xfd"
_MAGIC_LEN = 6


def _decompress_errors() -> tuple[type[BaseException], ...]:
    """What a failing read or decompressor raises (zstandard's own error when installed)."""
    errors: tuple[type[BaseException], ...] = (EOFError, OSError, lzma.LZMAError, zlib.error)
    try:
        import zstandard
    except ImportError:
        return errors
    return errors + (zstandard.ZstdError,)


_DECOMPRESS_ERRORS = _decompress_errors()


def open_lines(path: str, positions: Optional[list] = None) -> tuple[str, Iterator[str]]:
    """The display name of `path` and its lines, decoded, without line endings.

    The file is opened now (so a missing file is reported at once) and
    closed when the lines are exhausted or the iterator is closed.  When
    `positions` is a list, a function giving the bytes of the file read so
    far (of the compressed file, for a compressed one) is appended to it, or
    None for standard input: what a progress line measures against its size.
    """
    name = STDIN_NAME if path == STDIN else path
    raw = _open_binary(path, name)
    closed_at: list[int] = []  # where the file was when it was closed

    def position() -> int:
        return closed_at[0] if closed_at else raw.tell()

    def close() -> None:
        if not closed_at and path != STDIN:
            try:
                closed_at.append(raw.tell())
            except (OSError, ValueError):  # a pipe named on the command line: no position
                pass
        _close(stream, path)

    if positions is not None:
        positions.append(None if path == STDIN else position)
    try:
        stream = _decompressed(raw, name)
    except BaseException:
        _close(raw, path)
        raise
    return name, Lines.opened(stream, name, close)


def _open_binary(path: str, name: str) -> BinaryIO:
    """The raw byte stream of `path`; OSErrors become `FILE: strerror`."""
    if path == STDIN:
        stdin = sys.stdin  # None when the shell closed it (`<&-`)
        buffer = getattr(stdin, "buffer", None) if stdin is not None else None
        if buffer is None:
            raise TraceError(name, None, None, "standard input is closed")
        return buffer
    try:
        return open(path, "rb")
    except OSError as err:
        raise TraceError(name, None, None, err.strerror or str(err)) from None


def _close(stream: BinaryIO, path: str) -> None:
    """Close what we opened; standard input stays open for whoever else reads it."""
    if path != STDIN:
        stream.close()


def _decompressed(raw: BinaryIO, name: str) -> BinaryIO:
    """`raw` itself, or a decompressing reader when its magic bytes say gzip, xz or zstd."""
    head = _read_exactly(raw, _MAGIC_LEN, name)
    if not head.startswith((_GZIP_MAGIC, _XZ_MAGIC, _ZSTD_MAGIC)) and _rewound(raw, len(head)):
        return raw  # a plain file read again from its start: no Python-level layer per read
    stream = io.BufferedReader(Prefixed(head, raw))
    if head.startswith(_GZIP_MAGIC):
        return gzip.GzipFile(fileobj=stream, mode="rb")  # type: ignore[return-value]
    if head.startswith(_XZ_MAGIC):
        return lzma.LZMAFile(stream, mode="rb")  # type: ignore[return-value]
    if head.startswith(_ZSTD_MAGIC):
        return zstd_input.frames(stream, name)  # type: ignore[return-value]
    return stream


def _rewound(raw: BinaryIO, size: int) -> bool:
    """Whether `raw`, a file we opened, went back over the `size` bytes just read (a pipe cannot:
    its magic bytes are replayed by `Prefixed` instead; standard input is never rewound)."""
    if raw is getattr(sys.stdin, "buffer", None):
        return False
    try:
        if not raw.seekable():
            return False
        raw.seek(-size, io.SEEK_CUR)
    except (OSError, ValueError):
        return False
    return True


def _read_exactly(raw: BinaryIO, size: int, name: str) -> bytes:
    """Up to `size` bytes, looping because a pipe may deliver them one at a time."""
    head = b""
    try:
        while len(head) < size:
            chunk = raw.read(size - len(head))
            if not chunk:
                break
            head += chunk
    except OSError as err:
        raise TraceError(name, None, None, err.strerror or str(err)) from None
    return head


class Prefixed(io.RawIOBase):
    """A raw stream that replays the magic bytes already read, then the rest.

    Sniffing the compression must not need a seekable input: stdin is a pipe.
    """

    def __init__(self, head: bytes, rest: BinaryIO) -> None:
        super().__init__()
        self._head = head
        self._rest = rest

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: bytearray) -> int:  # type: ignore[override]
        if self._head:
            size = min(len(buffer), len(self._head))
            buffer[:size] = self._head[:size]
            self._head = self._head[size:]
            return size
        read = getattr(self._rest, "read1", self._rest.read)
        data = read(len(buffer))
        buffer[:len(data)] = data
        return len(data)


#: bytes read from the stream at a time; lines are split and decoded a block at a time.  64 KiB, not
#: more: a 256 KiB block is an allocation glibc serves by mmap, so each block paid its page faults
#: (~0.35 s of system time on a 10M-event .lt file), and a block that fits in L2 leaves the compiled
#: core's tables there while it splits the block
BLOCK = 1 << 16


class Lines(itertools.chain):
    """The decoded lines of an opened input: an iterator (a chain of per-block lists, at C speed).

    `give_bytes(lines_read)` asks for the rest in blocks instead, for a
    consumer that splits lines itself (the compiled core of
    `lockcheck.engine.fast_lt`): from the next block on, a block of whole lines that
    are all ASCII, without NUL and short comes as one `bytes` item -- its
    lines joined by `\n`, each with the `\r` of a `\r\n` ending still on it
    -- and any other block as its decoded lines, as before.  Whatever would be
    an error is one the same way.  `lines_read()` is how many lines the
    consumer has taken: the line number errors count from (the lines of a
    block are not counted twice).

    A consumer that checks the bytes itself (the JSON Lines translator, which
    classifies every byte anyway) gives a `Checking` instead of a bare count:
    then a block comes as `(bytes, start, stop)` items, its whole lines
    `bytes[start:stop]` unchecked and uncopied (the line begun in the block
    before, as an item of its own first), and one the consumer finds is not
    plain it gives back (`Checking.reject`) before taking any of its lines:
    that item then comes decoded, or raises its first bad line's error, as
    any other reader's block.
    """

    _blocks: Iterator
    _want_bytes: list

    @classmethod
    def opened(cls, stream: BinaryIO, name: str, close: Callable[[], None]) -> "Lines":
        """The lines of `stream` (closed at the end, or by `close()`)."""
        want_bytes: list = [None]
        blocks = _blocks(stream, name, close, want_bytes)
        lines = cls.from_iterable(blocks)
        lines._blocks = blocks
        lines._want_bytes = want_bytes
        return lines

    def give_bytes(self, lines_read: Callable[[], int]) -> bool:
        """From the next block on, ASCII blocks as `bytes`, or every block as `(bytes, start, stop)` items
        for a `Checking` consumer (see the class); True: done."""
        self._want_bytes[0] = lines_read
        return True

    def close(self) -> None:
        """Stop reading and close the stream (as a generator's `close`)."""
        self._blocks.close()


class Checking:
    """What a consumer that checks its blocks itself gives `Lines.give_bytes`: its line count (see `Lines`).

    Why (issue 23): the JSON Lines translator classifies every byte of a
    block anyway, so the source's own ASCII and NUL scans of it, and the two
    copies that join a block to the line the block before ended in, were
    paid for nothing (~300 instructions a JSON line).
    """

    __slots__ = ("lines_read", "rejected")

    def __init__(self, lines_read: Callable[[], int]) -> None:
        self.lines_read = lines_read
        self.rejected: Optional[tuple] = None

    def __call__(self) -> int:
        return self.lines_read()

    def reject(self, item: tuple) -> None:
        """Give back a `(bytes, start, stop)` item the consumer took none of: it comes again decoded."""
        self.rejected = item


def _blocks(stream: BinaryIO, name: str, close: Callable[[], None], want_bytes: list) -> Iterator:
    """Decoded lines of `stream`, a block in memory at a time; closes it at the end.

    Yields an iterable of lines per block (`Lines` flattens them).
    Splitting and decoding happen per block of whole lines, in C; only a
    block that fails (invalid UTF-8, a NUL byte) is looked at line by line,
    to name the line and column of the problem.  Memory is bounded by the
    block size plus one line (at most `MAX_LINE`).  Once `want_bytes[0]` is
    set (the consumer's count of lines taken), a block `_plain_block` accepts
    comes as `(bytes,)` (`Lines.give_bytes`).
    """
    try:
        read = getattr(stream, "read1", stream.read)
        carry = b""
        lineno = 0  # lines yielded so far
        while True:
            lines_read = want_bytes[0]
            if lines_read is not None:
                # the consumer took every line yielded before it asked for more: its count is
                # this one, without counting the newlines of the blocks of bytes here
                lineno = lines_read()
            try:
                block = read(BLOCK)
            except _DECOMPRESS_ERRORS as err:
                raise TraceError(name, lineno + 1, _column_after(carry), f"cannot read: {_reason(err)}") from None
            if not block:
                break
            end = block.rfind(b"\n")
            if end < 0:
                carry += block
                if len(carry) >= MAX_LINE:
                    raise _too_long(name, lineno + 1, carry)
                continue
            if lines_read.__class__ is Checking:
                # the whole lines where they are, the line the block before began first, on its own
                start = 0
                if carry:
                    start = block.find(b"\n") + 1
                    head = carry + block[:start - 1]
                    yield from _unchecked(lines_read, name, (head, 0, len(head)))
                carry = block[end + 1:]
                if want_bytes[0] is lines_read:
                    if start <= end:
                        yield from _unchecked(lines_read, name, (block, start, end))
                    continue
                # (it stopped taking blocks on the head line: the rest of the block as before)
                lines_read = want_bytes[0]
                if lines_read is not None:
                    lineno = lines_read()
                if start > end:
                    continue
                chunk = block[start:end]
            else:
                # (one copy: `carry + block[:end]` copied the block twice, ~160 instructions a `.lt` line)
                chunk = b"".join((carry, memoryview(block)[:end])) if carry else block[:end]
                carry = block[end + 1:]
            if lines_read is not None and _plain_block(chunk):
                yield (chunk,)
                continue
            if not chunk.strip(b"\n"):  # a run of empty lines: no decoding, no list
                blanks = len(chunk) + 1
                lineno += blanks
                yield repeat("", blanks)
                continue
            lines, error = _decode_block(chunk, name, lineno)
            lineno += len(lines)
            yield lines
            if error is not None:
                raise error
        if carry and lines_read.__class__ is Checking:
            yield from _unchecked(lines_read, name, (carry, 0, len(carry)))
        elif carry:
            if lines_read is not None and _plain_block(carry):
                yield (carry,)
            else:
                lines, error = _decode_block(carry, name, lineno)
                yield lines
                if error is not None:
                    raise error
    finally:
        close()


def _unchecked(checking: Checking, name: str, item: tuple) -> Iterator:
    """`item`, whole lines `bytes[start:stop]`, for `checking`'s consumer; if it gives the item back
    (or the item is too long to be given: MAX_LINE bytes or more), its lines decoded, then its first bad
    line's error, as `_blocks` yields a block it does not vouch for."""
    data, start, stop = item
    if stop - start < MAX_LINE:
        yield (item,)
        if checking.rejected is None:
            return
        checking.rejected = None
    lines, error = _decode_block(data[start:stop], name, checking())
    yield lines
    if error is not None:
        raise error


def _plain_block(chunk: bytes) -> bool:
    """Whether a block's lines decode to themselves: ASCII, no NUL, none too long (shorter than
    MAX_LINE in all), so that it cannot hold an error or a byte order mark."""
    return len(chunk) < MAX_LINE and chunk.isascii() and b"\x00" not in chunk


def _decode_block(chunk: bytes, name: str, lineno: int) -> tuple[list[str], Optional[TraceError]]:
    """The lines of `chunk` (whole lines joined by `\n`, the last without it), decoded, and the
    error of its first bad line, if any.

    A block with a bad line gives the lines before it and that line's error:
    everything before a bad line takes effect and is reported (the contract),
    so the caller yields the good lines first and raises after them.
    """
    if b"\x00" in chunk:
        return _lines_before_error(chunk, name, lineno)
    try:
        text = chunk.decode("utf-8")
    except UnicodeDecodeError:
        return _lines_before_error(chunk, name, lineno)
    if "\r" in text:
        text = text.replace("\r\n", "\n")
        if text.endswith("\r"):
            text = text[:-1]
    lines = text.split("\n")
    if lineno == 0 and lines[0].startswith("\ufeff"):
        lines[0] = lines[0][1:]  # a byte order mark some Windows editors write
    if len(chunk) >= MAX_LINE and max(map(len, lines)) >= MAX_LINE:
        for i, line in enumerate(lines):
            if len(line) >= MAX_LINE:
                return lines[:i], _too_long(name, lineno + i + 1, line.encode("utf-8"))
    return lines, None


def _too_long(name: str, lineno: int, start: bytes) -> TraceError:
    """The error for a line of MAX_LINE bytes or more, at the column where the limit is passed."""
    return TraceError(name, lineno, _column_after(start[:MAX_LINE]),
                      f"line longer than {MAX_LINE} bytes: not a text trace")


def _column_after(partial: bytes) -> int:
    """The column just after the characters of `partial`, the bytes of a line read so far."""
    return len(partial.decode("utf-8", "replace")) + 1


def _lines_before_error(chunk: bytes, name: str, lineno: int) -> tuple[list[str], TraceError]:
    """The decoded lines of a block before its first bad line, and that line's error."""
    good: list[str] = []
    for i, raw in enumerate(chunk.split(b"\n"), lineno + 1):
        try:
            good.append(_decode(raw[:-1] if raw.endswith(b"\r") else raw, name, i))
        except TraceError as err:
            return good, err
    raise AssertionError("a block failed to decode but none of its lines did")  # pragma: no cover


def _reason(err: BaseException) -> str:
    """A short cause for a read or decompression failure."""
    if isinstance(err, EOFError):
        return "compressed data is truncated"
    if isinstance(err, OSError) and err.strerror:
        return err.strerror
    return str(err) or type(err).__name__


def _decode(raw: bytes, name: str, lineno: int) -> str:
    """UTF-8 text of one line without `\\n` or `\\r\\n`, or a TraceError at the bad byte."""
    if raw.endswith(b"\n"):
        raw = raw[:-2] if raw.endswith(b"\r\n") else raw[:-1]
    if b"\x00" in raw:
        col = len(raw[:raw.index(b"\x00")].decode("utf-8", "replace")) + 1
        raise TraceError(name, lineno, col, "NUL byte: binary data, not a text trace")
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        col = len(raw[:err.start].decode("utf-8")) + 1
        raise TraceError(name, lineno, col, f"invalid UTF-8 (byte 0x{raw[err.start]:02x})") from None
    if lineno == 1 and text.startswith("\ufeff"):
        text = text[1:]  # a byte order mark some Windows editors write
    return text
