"""The compiled core reading files itself (blocks of bytes) against the plain pipeline and pure Python.

`source.Lines.give_bytes` hands the compiled core a file's rest as blocks of
whole ASCII lines; the core splits them and reads the text after the task
itself.  Every way a file can come -- lines cut across blocks, `\\r\\n`
endings, no newline at the end, gzip, xz, standard input -- must check the
same, and every way it can be bad -- a byte that is not UTF-8, a NUL, an
over-long line -- must fail with the same message at the same place, as on
the plain pipeline and the pure-Python fast path.
"""

from __future__ import annotations

import gzip
import io
import json
import lzma
import sys

import pytest

from lockcheck.engine import fast_lt as hotpath
from lockcheck.commands.cli import main
from lockcheck.readers import source

pytestmark = pytest.mark.skipif(not hotpath.compiled(), reason="the compiled core is not built here")

#: how each file is checked: (LOCKCHECK_FASTPATH, LOCKCHECK_PURE)
WAYS = {"plain": ("0", "0"), "pure": ("1", "1"), "compiled": ("1", "0")}


def trace_lines(rounds: int = 60) -> list[str]:
    """A trace whose chains repeat (so the fast path applies most lines), with every option the
    core reads itself and some it hands on: at=, modes, try, ts=, cpu=, subclass=, irq lines."""
    lines = ["#lockcheck-trace v1"]
    for i in range(rounds):
        for t, task in enumerate(("kworker/0:1/7", "T2", "sshd/53881")):
            address = f"0xffff8a{(i * 7 + t) % 5:02x}"
            stamp = f" ts={1000 + i}.{t:03d} cpu={t}" if i % 3 else ""
            lines += [
                f"{task} acquire &mm->lock@{address} at=do_fault+0x1a/0x80{stamp}",
                f"{task} acquire H@{address} at=h+0x1/0x2",
                f"{task} release H@{address}{stamp}",
                f"{task} acquire B read",
                f"{task} acquire C@{address} try at=c+0x2/0x10",
                f"{task} acquire D@1 rread{stamp}",
                f"{task} contended D@1 at=d+0x3/0x10",
                f"{task} acquired D@1{stamp}",
                f"{task} acquire E subclass=1",
                f"{task} release E",
                f"{task} release D@1 at=d+0x4/0x10",
                f"{task} release C@{address}{stamp}",
                f"{task} release B",
                f"{task} release &mm->lock@{address}",
            ]
            if i % 7 == t:
                lines += [f"{task} irqs-off", f"{task} acquire F", f"{task} release F", f"{task} irqs-on"]
    # one inversion near the end, for a finding that names lines read by the core
    lines += ["T2 acquire H@9", "T2 acquire &mm->lock@9", "T2 release &mm->lock@9", "T2 release H@9"]
    return lines


def check(path: str, way: str, monkeypatch, capsys, stdin: bytes = b"") -> tuple:
    """Status, JSON report and stderr of `lockcheck check` on `path` one way."""
    fastpath, pure = WAYS[way]
    monkeypatch.setenv("LOCKCHECK_FASTPATH", fastpath)
    monkeypatch.setenv("LOCKCHECK_PURE", pure)
    monkeypatch.setenv("LOCKCHECK_JOBS", "1")
    if path == "-":
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    status = main(["check", "--format", "json", "--no-config", "--input-format", "lt", path])
    out, err = capsys.readouterr()
    return status, json.loads(out) if out.strip() else None, err


def same_every_way(path: str, monkeypatch, capsys, stdin: bytes = b"") -> tuple:
    """The one outcome of the three ways (asserted alike)."""
    outcomes = {way: check(path, way, monkeypatch, capsys, stdin) for way in WAYS}
    assert outcomes["pure"] == outcomes["plain"]
    assert outcomes["compiled"] == outcomes["plain"]
    return outcomes["plain"]


@pytest.mark.parametrize("block", [1 << 18, 997, 61])
@pytest.mark.parametrize("newline", ["\n", "\r\n"])
@pytest.mark.parametrize("final", [True, False])
def test_lines_cut_across_blocks_and_endings(block, newline, final, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(source, "BLOCK", block)
    lines = trace_lines()
    path = tmp_path / "t.lt"
    path.write_bytes((newline.join(lines) + (newline if final else "")).encode())
    status, report, _ = same_every_way(str(path), monkeypatch, capsys)
    assert report["stats"]["events"] == len(lines) - 1
    assert [f["kind"] for f in report["findings"]] == ["circular-dependency"]


@pytest.mark.parametrize("compress", [gzip.compress, lzma.compress], ids=["gzip", "xz"])
def test_compressed_input(compress, tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(source, "BLOCK", 333)
    lines = trace_lines()
    path = tmp_path / "t.lt.z"
    path.write_bytes(compress(("\n".join(lines) + "\n").encode()))
    status, report, _ = same_every_way(str(path), monkeypatch, capsys)
    assert report["stats"]["events"] == len(lines) - 1 and report["findings"]


def test_standard_input(monkeypatch, capsys) -> None:
    monkeypatch.setattr(source, "BLOCK", 509)
    lines = trace_lines()
    status, report, _ = same_every_way("-", monkeypatch, capsys, ("\n".join(lines) + "\n").encode())
    assert report["stats"]["events"] == len(lines) - 1 and report["findings"]


def test_blank_lines_and_comments_between_blocks(tmp_path, monkeypatch, capsys) -> None:
    monkeypatch.setattr(source, "BLOCK", 64)
    lines = []
    for line in trace_lines(20):
        lines += [line, "", "# a comment", "\r", ""]
    path = tmp_path / "t.lt"
    path.write_text("\n".join(lines) + "\n\n\n")
    status, report, _ = same_every_way(str(path), monkeypatch, capsys)
    assert report["findings"]


@pytest.mark.parametrize("bad, message", [
    (b"T2 acquire caf\xe9", "invalid UTF-8 (byte 0xe9)"),
    (b"T2 acquire A\x00B", "NUL byte: binary data, not a text trace"),
    (b"T2 acquire " + b"A" * 300, "line longer than 256 bytes: not a text trace"),
])
@pytest.mark.parametrize("where", [5, 1500])
def test_a_bad_line_fails_alike(bad, message, where, tmp_path, monkeypatch, capsys) -> None:
    """Before or after the core has been given the file's blocks: the same error, line and column."""
    monkeypatch.setattr(source, "BLOCK", 128)
    monkeypatch.setattr(source, "MAX_LINE", 256)
    lines = [line.encode() for line in trace_lines()]
    lines.insert(where, bad)
    path = tmp_path / "t.lt"
    path.write_bytes(b"\n".join(lines) + b"\n")
    status, report, err = same_every_way(str(path), monkeypatch, capsys)
    assert status == 2 and message in err
    assert f"{path}:{where + 1}:" in err
