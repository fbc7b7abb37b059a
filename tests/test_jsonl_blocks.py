"""JSON Lines read as unchecked blocks (`source.Checking`): the translator is handed each block's whole
lines where they are -- no ASCII or NUL scan by the source, no copy to join a block to the line the block
before began -- and gives back a block that is not plain ASCII, for the source to decode as it does for
every reader.  Every way a file can come (lines cut across blocks, `\\r\\n`, no final newline, a `comm`
that stops the translation in a block's first line or later) and every way it can be bad (a byte that is
not UTF-8, a NUL, an over-long line, a byte order mark, UTF-8 names) must check, print and fail exactly as
the old way (`LOCKCHECK_JSONL_LT=0`) does: same message, same `FILE:LINE:COL`."""

from __future__ import annotations

import io
import json

import pytest

from lockcheck.commands.cli import main
from lockcheck.engine import fast_jsonl
from lockcheck.readers import source
from lockcheck.readers.source import Checking, Lines

pytestmark = pytest.mark.skipif(not fast_jsonl.available(), reason="the compiled translator is not built")


def trace(rounds: int = 40) -> list[bytes]:
    """JSON lines whose chains repeat, with the options the translator reads itself and an inversion."""
    lines = []
    for i in range(rounds):
        for task in ("kworker/0:1/7", "T2"):
            stamp = f', "ts": {1000 + i}.5, "cpu": {i % 3}' if i % 2 else ""
            lines += [f'{{"task": "{task}", "op": "acquire", "lock": "&mm->lock", "instance": "0x{i % 5:x}"{stamp}}}',
                      f'{{"task": "{task}", "op": "acquire", "lock": "B", "mode": "read", "at": "b+0x1/0x2"}}',
                      f'{{"task": "{task}", "op": "release", "lock": "B"{stamp}}}',
                      f'{{"task": "{task}", "op": "release", "lock": "&mm->lock", "instance": "0x{i % 5:x}"}}']
    lines += ['{"task": "T2", "op": "acquire", "lock": "B"}', '{"task": "T2", "op": "acquire", "lock": "&mm->lock"}',
              '{"task": "T2", "op": "release", "lock": "&mm->lock"}', '{"task": "T2", "op": "release", "lock": "B"}',
              '{"task": "T3", "op": "acquire", "lock": "&mm->lock"}', '{"task": "T3", "op": "acquire", "lock": "B"}',
              '{"task": "T3", "op": "release", "lock": "B"}', '{"task": "T3", "op": "release", "lock": "&mm->lock"}']
    return [line.encode() for line in lines]


def both_ways(path, monkeypatch, capsys) -> tuple:
    """Status, stdout and stderr of `lockcheck check --format json` translated and the old way (asserted alike)."""
    monkeypatch.setenv("LOCKCHECK_JOBS", "1")
    outcomes = []
    for translated in ("1", "0"):
        monkeypatch.setenv("LOCKCHECK_JSONL_LT", translated)
        status = main(["check", "--format", "json", "--no-config", "--input-format", "jsonl", str(path)])
        out, err = capsys.readouterr()
        outcomes.append((status, out, err))
    assert outcomes[0] == outcomes[1]
    return outcomes[0]


@pytest.mark.parametrize("block", [61, 200, 997, 1 << 16])
@pytest.mark.parametrize("newline", [b"\n", b"\r\n"])
@pytest.mark.parametrize("final", [True, False])
def test_lines_cut_across_blocks_and_endings(block, newline, final, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(source, "BLOCK", block)
    lines = trace()
    path = tmp_path / "t.jsonl"
    path.write_bytes(newline.join(lines) + (newline if final else b""))
    _, out, _ = both_ways(path, monkeypatch, capsys)
    report = json.loads(out)
    assert report["stats"]["events"] == len(lines)
    assert [f["kind"] for f in report["findings"]] == ["circular-dependency"]


@pytest.mark.parametrize("bad, message", [
    (b'{"task": "T2", "op": "acquire", "lock": "caf\xe9"}', "invalid UTF-8 (byte 0xe9)"),
    (b'{"task": "T2", "op": "acquire", "lock": "A\x00B"}', "NUL byte: binary data, not a text trace"),
    (b'{"task": "T2", "op": "acquire", "lock": "' + b"A" * 300 + b'"}', "line longer than 256 bytes"),
    (b'{"task": "T2", "op": "acquire", "lock": "' + "\u00e9".encode() * 200 + b'"}', "line longer than 256 bytes"),
])
@pytest.mark.parametrize("where", [0, 5, 77, 150])
@pytest.mark.parametrize("block", [128, 509])
def test_a_bad_line_fails_alike(bad, message, where, block, tmp_path, monkeypatch, capsys) -> None:
    """Wherever it falls in a block (its first line, begun in the block before, later): the same error,
    line and column, after the lines before it took effect."""
    monkeypatch.setattr(source, "BLOCK", block)
    monkeypatch.setattr(source, "MAX_LINE", 256)
    lines = trace()
    lines.insert(where, bad)
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    status, _, err = both_ways(path, monkeypatch, capsys)
    if "\u00e9".encode() in bad:  # (over 256 bytes, under 256 characters: too long only if cut across blocks)
        return
    assert status == 2 and message in err
    assert f"{path}:{where + 1}:" in err


@pytest.mark.parametrize("block", [64, 300, 1 << 16])
def test_utf8_names_a_byte_order_mark_and_comm_read_alike(block, tmp_path, monkeypatch, capsys) -> None:
    """Blocks that are not plain ASCII go back to the source, decoded there (the byte order mark of line 1
    dropped), between plain ones; a `comm` stops the translation and the old way reads the rest, blocks
    of bytes or decoded lines."""
    monkeypatch.setattr(source, "BLOCK", block)
    lines = trace(12)
    lines[0] = b"\xef\xbb\xbf" + lines[0]
    lines.insert(9, '{"task": "T2", "op": "acquire", "lock": "l\u00f6ck"}'.encode())
    lines.insert(10, '{"task": "T2", "op": "release", "lock": "l\u00f6ck"}'.encode())
    lines.insert(30, b'{"task": "T2", "op": "contended", "lock": "B", "comm": "bash/1"}')
    lines.insert(40, '{"task": "T9", "op": "acquire", "lock": "\u9501"}'.encode())
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines) + b"\n")
    _, out, _ = both_ways(path, monkeypatch, capsys)
    assert json.loads(out)["stats"]["events"] == len(lines)


@pytest.mark.parametrize("where", range(12))
def test_a_stop_in_any_line_of_a_block(where, tmp_path, monkeypatch, capsys) -> None:
    """A `comm` in a block's first line (begun in the block before) or any other: the rest of that block
    and the file go the old way, as bytes or decoded lines, none lost or read twice."""
    monkeypatch.setattr(source, "BLOCK", 150)
    lines = trace(8)
    lines.insert(where, b'{"task": "T2", "op": "contended", "lock": "B", "comm": "bash/1"}')
    lines.insert(where + 7, '{"task": "T2", "op": "acquire", "lock": "l\u00f6ck"}'.encode())
    path = tmp_path / "t.jsonl"
    path.write_bytes(b"\n".join(lines))
    _, out, _ = both_ways(path, monkeypatch, capsys)
    assert json.loads(out)["stats"]["events"] == len(lines)


def test_a_checking_consumer_gets_blocks_where_they_are_and_gives_back_what_is_not_plain(monkeypatch) -> None:
    """The items a `Checking` consumer gets: the line begun in the block before on its own, then the
    block's whole lines as (the block, start, stop); an item given back comes again as decoded lines."""
    monkeypatch.setattr(source, "BLOCK", 16)
    data = b"aaaa\nbbbbbbbbbbbbbbbbbbbbb\ncc\ndd\n\xc3\xa9e\nf"
    lines = Lines.opened(io.BytesIO(data), "x", lambda: None)
    taken = [0]
    checking = Checking(lambda: taken[0])
    lines.give_bytes(checking)
    seen = []
    for item in lines:
        if isinstance(item, tuple):
            data_, start, stop = item
            text = data_[start:stop]
            if not text.isascii():
                checking.reject(item)
                seen.append(("rejected", text))
                continue
            taken[0] += text.count(b"\n") + 1
            seen.append(("raw", text))
        else:
            taken[0] += 1
            seen.append(("str", item))
    assert seen == [("raw", b"aaaa"), ("raw", b"b" * 21), ("raw", b"cc"), ("raw", b"dd"),
                    ("rejected", b"\xc3\xa9e"), ("str", "\u00e9e"), ("raw", b"f")]


def _translated_items(data: bytes) -> tuple[list, int]:
    """The items the translator yields for `data` read as a `Checking` consumer's blocks (as
    fast_jsonl.jsonl_lt_events reads a file), and the blocks the source read."""
    reads = [0]
    stream = io.BytesIO(data)
    read1 = stream.read1

    def counted(size: int = -1) -> bytes:
        reads[0] += 1
        return read1(size)

    stream.read1 = counted  # type: ignore[method-assign]
    lines = Lines.opened(stream, "t.jsonl", lambda: None)
    checking = Checking(int)
    translator = fast_jsonl._translator()(iter(lines), fast_jsonl.slow_line("t.jsonl"), checking.reject, True)
    checking.lines_read = translator.lines_read
    lines.give_bytes(checking)
    return list(translator), reads[0]


def test_the_line_begun_in_the_block_before_is_yielded_with_the_next_blocks_lines() -> None:
    # each source block after the first comes as two items (the line the block before began, then its
    # own whole lines): the translator yields them as one block for the `.lt` core (an item costs ~3 us)
    lines = trace(rounds=700)
    data = b"\n".join(lines) + b"\n"
    items, reads = _translated_items(data)
    assert reads >= 5 and len(data) > 4 * source.BLOCK
    assert len(items) <= reads, (len(items), reads)
    text = b"\n".join(block for block, _hints in items).split(b"\n")
    assert len(text) == len(lines)
    assert all(len(hints) == 12 * (block.count(b"\n") + 1) for block, hints in items)


def test_lines_waiting_for_the_next_block_come_out_before_the_sources_error() -> None:
    # a short run of lines waits for the next item's; when the source raises instead, those lines are
    # yielded first (every line before an error takes effect), then its error
    from lockcheck.errors import TraceError

    line = b'{"task": "T1", "op": "acquire", "lock": "A"}\n{"task": "T1", "op": "release", "lock": "A"}'

    def items():
        yield (line, 0, len(line))
        raise TraceError("t.jsonl", 3, 1, "cannot read: compressed data is truncated")

    translator = fast_jsonl._translator()(items(), fast_jsonl.slow_line("t.jsonl"), Checking(int).reject, False)
    out = [next(translator)]  # (the lines first)
    with pytest.raises(TraceError, match="truncated"):
        next(translator)
    assert out == [b"T1 acquire A\nT1 release A"]


@pytest.mark.parametrize("bad", [b'{"task": "T2", "op": "acquire", "lock": "caf\xe9"}',
                                 b'{"task": "T2", "op": "acquire", "lock": "A\x00B"}',
                                 '{"task": "T2", "op": "acquire", "lock": "caf\u00e9"}\n{"task": "T2", "op": "release", '
                                 '"lock": "caf\u00e9"}'.encode()])
@pytest.mark.parametrize("where", [120, 500, 1000])
def test_a_byte_that_is_not_plain_chunks_into_a_block(bad, where, tmp_path, monkeypatch, capsys) -> None:
    # a block's masks are built a chunk (4 KiB) ahead of its lines: a byte that is not plain ASCII found
    # after lines of the block were read gives the block back all the same, what those lines wrote dropped
    # (read again decoded, each once), and checks, prints and fails as the old way does
    lines = trace(rounds=200)
    lines.insert(where, bad)
    data = b"\n".join(lines) + b"\n"
    assert len(data) > source.BLOCK and len(b"\n".join(lines[:where])) % source.BLOCK > 8192
    path = tmp_path / "t.jsonl"
    path.write_bytes(data)
    status, out, err = both_ways(path, monkeypatch, capsys)
    if b"\\u" in bad or b"\xc3" in bad:
        assert status != 2 and json.loads(out)["stats"]["events"] == len(lines) + 1
    else:
        assert status == 2 and f"{path}:{where + 1}:" in err
