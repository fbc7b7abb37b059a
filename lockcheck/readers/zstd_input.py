"""zstd input read in bounded memory: a bounded output per call and a bounded window.

`lockcheck.readers.source` hands a stream whose magic bytes say zstd to
`frames`; what comes back has the `read1` its block reader uses.  zstd
support is the optional `zstandard` package.

Two things make a zstd decompressor's memory grow with the input when left
alone, and both are bounded here:

- its output per call: zstandard's `decompressobj` has no output limit, so
  it is fed `ZSTD_FEED` compressed bytes at a time (a 4-byte zstd block can
  stand for 128 KB: no call returns more than `ZSTD_FEED` / 4 * 128 KB,
  however the data was crafted; a 33 KB `.zst` of zeros once took 2.1 GB);
- its window: a frame declares how much history it refers back to, and the
  decompressor holds that much of the output (`zstd --long=27` or
  `--ultra -22`: 128 MB; `--long=31`: 2 GB).  A frame whose window is over
  `MAX_WINDOW` (8 MB, what `zstd -19` uses) is refused before it is
  decompressed, with how to recompress it.
"""

from __future__ import annotations

from typing import BinaryIO

from lockcheck.errors import TraceError

#: compressed bytes given to a zstd decompressor per call: bounds its output
ZSTD_FEED = 128
#: decompressed bytes a call aims at (the feed shrinks when the data is compressed more than that)
ZSTD_OUT = 1 << 16
#: the largest frame window accepted: zstd -19's (levels 1-19 use 8 MB or less)
MAX_WINDOW = 1 << 23
#: compressed bytes read from the stream at a time
_READ = ZSTD_FEED << 9
#: a zstd frame header is at most 18 bytes: enough to know the window
_HEADER = 18


def frames(stream: BinaryIO, name: str) -> ZstdFrames:
    """The decompressed bytes of the zstd frames of `stream`; TraceError without `zstandard`."""
    try:
        import zstandard
    except ImportError:
        raise TraceError(name, None, None, "zstd-compressed input needs the 'zstandard' package "
                                           "(pip install 'pylockdep[zstd]')") from None
    return ZstdFrames(stream, zstandard.ZstdDecompressor(max_window_size=MAX_WINDOW), name)


def window_error(name: str, window: int) -> TraceError:
    """The error for a frame whose window is over MAX_WINDOW: what it needs and how to recompress."""
    source = "zstd -dc" if name == "<stdin>" else f"zstd -dc {name}"  # standard input: piped in again
    return TraceError(name, None, None,
                      f"zstd frame needs a {_mib(window)} window, over the {_mib(MAX_WINDOW)} lockcheck "
                      f"reads in bounded memory (zstd --long or --ultra): recompress it with "
                      f"'{source} | zstd -19 -o NEW.zst' (level 19 or lower, no --long)")


def _mib(size: int) -> str:
    """A window size as people write it (`8 MiB`, `2048 MiB`)."""
    return f"{size >> 20} MiB" if size >= 1 << 20 else f"{size >> 10} KiB"


class ZstdFrames:
    """zstd frames decompressed one after the other, a bounded piece per `read1`; input that
    ends inside a frame is an EOFError.

    zstandard's own `stream_reader` reports a truncated frame as a clean end
    of data (still in 0.25): a half-copied `.zst` trace would read as a
    shorter (or empty) trace with exit status 0.  Here each frame's
    decompressor says whether its frame ended (`eof`), as gzip and lzma do.
    Each frame's header is read before the frame is, and a window over
    MAX_WINDOW is a TraceError (`window_error`); the decompressor's own
    `max_window_size` is the same limit, for what the header check cannot see.

    `read1` hands out the decompressor's output as it is (no buffer layer
    copying it again), from an offset, never by slicing off its front (which
    copied the rest at every read: quadratic in a frame's size).
    """

    def __init__(self, stream: BinaryIO, decompressor, name: str = "") -> None:
        self._stream = stream
        self._name = name
        self._new = decompressor.decompressobj
        self._frame = None  # the current frame's decompressor, None between frames
        self._pending = memoryview(b"")  # compressed bytes not fed yet
        self._out = b""
        self._at = 0  # how much of `_out` was handed out
        self._feed = 8  # compressed bytes fed per call: small until the ratio is known
        self._fed = self._made = 0  # compressed bytes fed so far, and what they decompressed to
        self._ended = False

    def read1(self, size: int = -1) -> bytes:
        """The next decompressed bytes (at most `size` when positive); b'' at the end."""
        while self._at >= len(self._out):
            if not self._decompress_more():
                return b""
        end = len(self._out) if size < 0 else min(len(self._out), self._at + size)
        piece = self._out if (self._at == 0 and end == len(self._out)) else self._out[self._at:end]
        self._at = end
        return piece

    read = read1  # callers read pieces; nothing here needs an exact count

    def close(self) -> None:
        """Close the compressed stream under it."""
        self._stream.close()

    def _decompress_more(self) -> bool:
        """Decompress the next feed into `_out`; False at the end of the last frame."""
        if not self._pending and not self._refill():
            if self._frame is not None:
                raise EOFError("compressed data is truncated")
            return False
        if self._frame is None:
            self._check_window()
            self._frame = self._new()
        data = self._pending[:self._feed]
        self._pending = self._pending[self._feed:]
        self._out = self._frame.decompress(data)
        self._at = 0
        # highly compressed data gets smaller bites, so that what a call returns stays near
        # ZSTD_OUT (a 100 MB trace at 10,000:1 held 1.3 MB per call otherwise: 1.3x the RSS).
        # The ratio is the stream's so far, not the last call's: a call that ends inside a block
        # returns nothing, and taking that for incompressible data fed ZSTD_FEED bytes next,
        # megabytes of output at once (the repetitive trace peaked 4 MB higher)
        self._fed += len(data)
        self._made += len(self._out)
        if self._made:  # (a frame header alone makes nothing: the ratio is not known yet)
            self._feed = max(8, min(ZSTD_FEED, ZSTD_OUT * self._fed // self._made))
        if self._frame.eof:
            unused = self._frame.unused_data
            if unused:  # the start of the next frame: it goes before what was not fed yet
                self._pending = memoryview(unused + bytes(self._pending))
            self._frame = None
        return True

    def _refill(self) -> bool:
        """Read more compressed bytes after what is pending; False at the end of the stream."""
        if self._ended:
            return False
        data = self._stream.read(_READ)
        if not data:
            self._ended = True
            return bool(self._pending)
        self._pending = memoryview(bytes(self._pending) + data) if self._pending else memoryview(data)
        return True

    def _check_window(self) -> None:
        """Refuse a frame whose header declares a window over MAX_WINDOW, before decompressing it."""
        while len(self._pending) < _HEADER and self._refill():
            pass
        import zstandard

        try:
            window = zstandard.get_frame_parameters(bytes(self._pending[:_HEADER])).window_size
        except zstandard.ZstdError:
            return  # not a frame header the parser knows: the decompressor says what is wrong
        if window > MAX_WINDOW:
            raise window_error(self._name, window)
