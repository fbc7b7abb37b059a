"""zstd input is streamed with a bounded output per decompressor call, as gzip and xz are.

zstandard's decompressor objects have no output limit: fed a 256 KB block
of compressed data, one call returned all of it decompressed (a 33 KB
`.zst` of zeros took 2.1 GB; 100 MB of trace at 10,000:1 peaked at 223 MB
against 23 MB plain), and slicing the front off that output at every read
made a run of newlines quadratic (200 MB of newlines in 6.5 KB: 124 s).
These tests count bytes per call instead of timing anything.
"""

from __future__ import annotations

import io

import pytest

zstandard = pytest.importorskip("zstandard")

from lockcheck.readers import source  # noqa: E402


def _bomb(chunk: bytes, total: int) -> bytes:
    """`total` bytes of `chunk` repeated, zstd-compressed at the highest ratio."""
    compress = zstandard.ZstdCompressor(level=19).compressobj()
    parts = [compress.compress(chunk) for _ in range(total // len(chunk))]
    return b"".join(parts) + compress.flush()


class _Recording:
    """A ZstdDecompressor whose frame decompressors record the size of every call's output."""

    def __init__(self) -> None:
        self.real = zstandard.ZstdDecompressor()
        self.outputs: list[int] = []
        self.inputs: list[int] = []

    def decompressobj(self):
        frame = self.real.decompressobj()
        recording = self

        class Frame:
            def decompress(self, data):
                out = frame.decompress(data)
                recording.inputs.append(len(data))
                recording.outputs.append(len(out))
                return out

            @property
            def eof(self):
                return frame.eof

            @property
            def unused_data(self):
                return frame.unused_data

        return Frame()


def _read_all(data: bytes, decompressor: _Recording) -> tuple[int, int]:
    """The decompressed size and the number of newlines of `data`, read the way inputs are."""
    frames = io.BufferedReader(source._ZstdFrames(io.BytesIO(data), decompressor))
    size = lines = 0
    while True:
        block = frames.read1(source.BLOCK)
        if not block:
            return size, lines
        size += len(block)
        lines += block.count(b"\n")


#: the most a call may return: a 4-byte zstd block stands for at most 128 KB
BOUND = source.ZSTD_FEED // 4 * (128 << 10) + (128 << 10)


@pytest.mark.parametrize("chunk", [b"\0" * 4096, b"\n" * 4096, b"T1 acquire A\nT1 release A\n" * 64])
def test_a_zstd_bomb_is_decompressed_a_bounded_piece_at_a_time(chunk):
    total = (64 << 20) // len(chunk) * len(chunk)
    data = _bomb(chunk, total)
    assert len(data) < total // 1000  # a bomb indeed
    decompressor = _Recording()
    size, lines = _read_all(data, decompressor)
    assert size == total and lines == chunk.count(b"\n") * (total // len(chunk))
    assert max(decompressor.inputs) <= source.ZSTD_FEED
    assert max(decompressor.outputs) <= BOUND
    # at this ratio the feed shrinks so that a call returns about ZSTD_OUT, not megabytes
    assert sorted(decompressor.outputs)[len(decompressor.outputs) // 2] <= 4 * source.ZSTD_OUT


def test_frames_and_their_boundaries_survive_small_feeds():
    """Frames one after the other, split anywhere by the feed, read back byte for byte."""
    text = b"".join(b"T%d acquire L%d\nT%d release L%d\n" % (i % 3, i, i % 3, i) for i in range(20000))
    data = b"".join(zstandard.ZstdCompressor().compress(text[i:i + 7777]) for i in range(0, len(text), 7777))
    frames = io.BufferedReader(source._ZstdFrames(io.BytesIO(data), zstandard.ZstdDecompressor()))
    assert frames.read() == text


def test_a_truncated_frame_is_still_an_error():
    data = zstandard.ZstdCompressor().compress(b"T1 acquire A\n" * 10000)
    frames = io.BufferedReader(source._ZstdFrames(io.BytesIO(data[:-5]), zstandard.ZstdDecompressor()))
    with pytest.raises(EOFError):
        frames.read()
