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

from lockcheck.errors import TraceError
from lockcheck.readers import source, zstd_input


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
    frames = zstd_input.ZstdFrames(io.BytesIO(data), decompressor)
    size = lines = 0
    while True:
        block = frames.read1(source.BLOCK)
        assert len(block) <= source.BLOCK
        if not block:
            return size, lines
        size += len(block)
        lines += block.count(b"\n")


#: the most a call may return: a 4-byte zstd block stands for at most 128 KB
BOUND = zstd_input.ZSTD_FEED // 4 * (128 << 10) + (128 << 10)


@pytest.mark.parametrize("chunk", [b"\0" * 4096, b"\n" * 4096, b"T1 acquire A\nT1 release A\n" * 64])
def test_a_zstd_bomb_is_decompressed_a_bounded_piece_at_a_time(chunk):
    total = (64 << 20) // len(chunk) * len(chunk)
    data = _bomb(chunk, total)
    assert len(data) < total // 1000  # a bomb indeed
    decompressor = _Recording()
    size, lines = _read_all(data, decompressor)
    assert size == total and lines == chunk.count(b"\n") * (total // len(chunk))
    assert max(decompressor.inputs) <= zstd_input.ZSTD_FEED
    assert max(decompressor.outputs) <= BOUND
    # at this ratio the feed shrinks so that a call returns about ZSTD_OUT, not megabytes
    assert sorted(decompressor.outputs)[len(decompressor.outputs) // 2] <= 4 * zstd_input.ZSTD_OUT
    # and stays small when a call ends inside a block and returns nothing: the feed follows the
    # stream's ratio, not the last call's (that empty call once fed 128 bytes next: 4 MB out)
    assert max(decompressor.inputs[10:]) <= 16
    assert max(decompressor.outputs) <= 4 * (128 << 10)


def test_frames_and_their_boundaries_survive_small_feeds():
    """Frames one after the other, split anywhere by the feed, read back byte for byte."""
    text = b"".join(b"T%d acquire L%d\nT%d release L%d\n" % (i % 3, i, i % 3, i) for i in range(20000))
    data = b"".join(zstandard.ZstdCompressor().compress(text[i:i + 7777]) for i in range(0, len(text), 7777))
    frames = zstd_input.ZstdFrames(io.BytesIO(data), zstandard.ZstdDecompressor())
    assert b"".join(iter(lambda: frames.read1(999), b"")) == text


def test_a_truncated_frame_is_still_an_error():
    data = zstandard.ZstdCompressor().compress(b"T1 acquire A\n" * 10000)
    frames = zstd_input.ZstdFrames(io.BytesIO(data[:-5]), zstandard.ZstdDecompressor())
    with pytest.raises(EOFError):
        while frames.read1():
            pass


# -- the window -------------------------------------------------------------------------------------


def _streamed(data: bytes, **params) -> bytes:
    """`data` compressed as a stream (no content size in the header: the window is declared)."""
    compressor = zstandard.ZstdCompressor(compression_params=zstandard.ZstdCompressionParameters(**params))
    compress = compressor.compressobj()
    return compress.compress(data) + compress.flush()


TRACE = b"T1 acquire A\nT1 acquire B\nT1 release B\nT1 release A\n" * 2000


def test_the_window_of_zstd_19_is_accepted():
    """Level 19 (and so every lower level) declares an 8 MB window: within MAX_WINDOW."""
    data = _streamed(TRACE, compression_level=19)
    assert zstandard.get_frame_parameters(data).window_size == zstd_input.MAX_WINDOW == 8 << 20
    frames = zstd_input.frames(io.BytesIO(data), "t.lt.zst")
    assert b"".join(iter(frames.read1, b"")) == TRACE


@pytest.mark.parametrize("window_log", [24, 27, 31])
def test_a_frame_with_a_larger_window_is_refused_before_it_is_decompressed(window_log):
    """`zstd --long=27`, `--ultra -22`, `--long=31`: the decompressor would hold up to 2 GB."""
    data = _streamed(TRACE, window_log=window_log)
    assert zstandard.get_frame_parameters(data).window_size == 1 << window_log
    decompressor = _Recording()
    decompressor.real = zstandard.ZstdDecompressor(max_window_size=zstd_input.MAX_WINDOW)
    with pytest.raises(TraceError) as caught:
        zstd_input.ZstdFrames(io.BytesIO(data), decompressor, "big.zst").read1()
    assert decompressor.inputs == []  # refused from its header: not one byte decompressed
    err = caught.value
    assert err.line is None and err.format().startswith("big.zst: zstd frame needs a ")
    assert f"{1 << (window_log - 20)} MiB window" in err.message and "zstd -19" in err.message


def test_a_later_frame_with_a_larger_window_is_refused_after_the_first_is_read():
    data = _streamed(TRACE, compression_level=3) + _streamed(TRACE, window_log=27)
    frames = zstd_input.ZstdFrames(io.BytesIO(data), zstandard.ZstdDecompressor(), "two.zst")
    read = []
    with pytest.raises(TraceError, match="128 MiB window"):
        while True:
            read.append(frames.read1())
    assert b"".join(read) == TRACE


def test_the_decompressor_itself_has_the_limit():
    """What the header check cannot see (a header it does not parse) still meets the same bound."""
    data = _streamed(TRACE, window_log=27)
    decompressor = zstandard.ZstdDecompressor(max_window_size=zstd_input.MAX_WINDOW)
    with pytest.raises(zstandard.ZstdError, match="too much memory"):
        decompressor.decompressobj().decompress(data)


def test_check_refuses_a_large_window_with_one_clean_line(tmp_path, capsys):
    from lockcheck.commands.cli import main

    path = tmp_path / "long.lt.zst"
    path.write_bytes(_streamed(TRACE, window_log=31))
    status = main(["check", str(path)])
    err = capsys.readouterr().err
    assert status == 2 and "Traceback" not in err
    lines = [line for line in err.splitlines() if not line.startswith("lockcheck: ")]
    assert lines == [zstd_input.window_error(str(path), 1 << 31).format()]
    assert "2048 MiB window" in lines[0] and "recompress" in lines[0]
