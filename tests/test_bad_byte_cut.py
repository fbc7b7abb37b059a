"""A bad byte cuts a trace at its line: everything before it takes effect and is reported.

The contract (cli.md): a malformed line is one `FILE:LINE:COL` error, exit
2, and the lines before it still count.  Inputs are read in blocks
(`lockcheck.readers.source.BLOCK`); a NUL or an invalid UTF-8 byte used to
drop the whole block it fell in, so an AB-BA followed by a bad line in the
same 256 KB block gave "no verdict" and no finding, and a bad byte in a
later block left the summary counting the events of the earlier blocks
only.  The property: for every input format, any valid prefix holding an
AB-BA, then any bad byte in a line after it, at any block size (so at any
block position), the prefix's finding is reported and the error names the
bad line.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path
from typing import Callable

from hypothesis import HealthCheck, given, settings, strategies as st

from lockcheck.commands.cli import main
from lockcheck.readers import source

from testdata import DATA

KERNEL_LOG = (DATA / "kernel-log" / "circular-2-classes.log").read_text()


def _lt(lines: list[str]) -> list[str]:
    return lines


def _lt_abba() -> list[str]:
    return ["T1 acquire A", "T1 acquire B", "T1 release B", "T1 release A",
            "T2 acquire B", "T2 acquire A", "T2 release A", "T2 release B"]


def _lt_filler(i: int) -> str:
    return f"T3 {'acquire' if i % 2 == 0 else 'release'} C{i // 2 % 7}"


def _jsonl_abba() -> list[str]:
    return [json.dumps({"task": task, "op": op, "lock": lock}) for task, op, lock in (
        ("T1", "acquire", "A"), ("T1", "acquire", "B"), ("T1", "release", "B"), ("T1", "release", "A"),
        ("T2", "acquire", "B"), ("T2", "acquire", "A"), ("T2", "release", "A"), ("T2", "release", "B"))]


def _jsonl_filler(i: int) -> str:
    return json.dumps({"task": "T3", "op": "acquire" if i % 2 == 0 else "release", "lock": f"C{i // 2 % 7}"})


def _perf_line(i: int, comm: str, tid: int, op: str, lock: str) -> str:
    return f"{comm:>16} {tid:>5} [000] {10 + i / 1000:12.6f}: lock:lock_{op}: 0x{abs(hash(lock)) % 4096:x} {lock}"


def _perf_abba() -> list[str]:
    steps = (("a", 1, "acquire", "A"), ("a", 1, "acquire", "B"), ("a", 1, "release", "B"),
             ("a", 1, "release", "A"), ("b", 2, "acquire", "B"), ("b", 2, "acquire", "A"),
             ("b", 2, "release", "A"), ("b", 2, "release", "B"))
    return [_perf_line(i, comm, tid, op, lock) for i, (comm, tid, op, lock) in enumerate(steps)]


def _perf_filler(i: int) -> str:
    return _perf_line(100 + i, "c", 3, "acquire" if i % 2 == 0 else "release", f"C{i // 2 % 7}")


def _ftrace_abba() -> list[str]:
    return ["# tracer: nop", "#"] + [
        f"{comm}-{tid:<6} [000] ....  {10 + i / 1000:.6f}: lock_{op}: 0x{ord(lock):x} {lock}"
        for i, (comm, tid, op, lock) in enumerate((
            ("a", 1, "acquire", "A"), ("a", 1, "acquire", "B"), ("a", 1, "release", "B"),
            ("a", 1, "release", "A"), ("b", 2, "acquire", "B"), ("b", 2, "acquire", "A"),
            ("b", 2, "release", "A"), ("b", 2, "release", "B")))]


def _ftrace_filler(i: int) -> str:
    return f"c-3      [000] ....  {20 + i / 1000:.6f}: lock_{'acquire' if i % 2 == 0 else 'release'}: 0x99 C"


def _kernel_abba() -> list[str]:
    return KERNEL_LOG.splitlines()


def _kernel_filler(i: int) -> str:
    return f"[  200.{i:06d}] filler line {i}"


#: format -> (name, the AB-BA lines, a filler line, line ending)
FORMATS: dict[str, tuple[str, Callable[[], list[str]], Callable[[int], str], str]] = {
    "lt": ("t.lt", _lt_abba, _lt_filler, "\n"),
    "lt-crlf": ("t.lt", _lt_abba, _lt_filler, "\r\n"),
    "jsonl": ("t.jsonl", _jsonl_abba, _jsonl_filler, "\n"),
    "perf": ("t.perf", _perf_abba, _perf_filler, "\n"),
    "ftrace": ("t.ftrace", _ftrace_abba, _ftrace_filler, "\n"),
    "kernel-log": ("t.log", _kernel_abba, _kernel_filler, "\n"),
}

#: bytes no text trace holds: NUL, a lone continuation byte, an impossible lead byte, a truncated
#: sequence, an overlong encoding, an encoded surrogate
BAD_BYTES = [b"\x00", b"\x80", b"\xff", b"\xe2\x82", b"\xc0\xaf", b"\xed\xa0\x80"]


def _check(path: Path) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--no-config", "--no-progress", "--format", "json", str(path)], stdout=out, stderr=err)
    return status, json.loads(out.getvalue()), err.getvalue()


@settings(max_examples=60, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fmt=st.sampled_from(sorted(FORMATS)), before=st.integers(0, 40), after=st.integers(0, 40),
       bad=st.sampled_from(BAD_BYTES), column=st.integers(0, 20), block=st.integers(8, 4096))
def test_a_bad_byte_cuts_at_its_line(tmp_path_factory, monkeypatch, fmt, before, after, bad, column, block):
    name, abba, filler, ending = FORMATS[fmt]
    monkeypatch.setattr(source, "BLOCK", block)
    good = abba() + [filler(i) for i in range(after)]
    if fmt != "kernel-log" and fmt != "ftrace":
        good = [filler(i) for i in range(2 * before)] + good  # whole acquire-release pairs
    text = filler(99).encode()
    column = min(column, len(text))
    bad_line = text[:column] + bad + text[column:]
    path = tmp_path_factory.mktemp("cut") / name
    path.write_bytes(ending.join(good).encode() + ending.encode() + bad_line + ending.encode()
                     + filler(98).encode() + ending.encode())
    status, doc, err = _check(path)
    assert status == 2, err
    assert "internal error" not in err and "Traceback" not in err, err
    assert [f["kind"] for f in doc["findings"]] == ["circular-dependency"], (doc, err)
    errors = [line for line in err.splitlines() if not line.startswith("lockcheck: ")]
    assert len(errors) == 1, err
    match = re.match(re.escape(str(path)) + r":(\d+):(\d+): ", errors[0])
    assert match is not None, err
    assert int(match.group(1)) == len(good) + 1, err
    assert int(match.group(2)) == column + 1, err


def test_a_later_block_keeps_the_events_of_every_line_before_the_bad_one(tmp_path, monkeypatch):
    """The summary counts every good line: a bad byte in the third block does not hide the second."""
    monkeypatch.setattr(source, "BLOCK", 4096)
    lines = [_lt_filler(i) for i in range(2000)] + _lt_abba()
    path = tmp_path / "t.lt"
    path.write_bytes(("\n".join(lines) + "\n").encode() + b"T1 acq\xffuire X\n")
    status, doc, err = _check(path)
    assert status == 2, err
    assert doc["stats"]["events"] == len(lines)
    assert [f["kind"] for f in doc["findings"]] == ["circular-dependency"]
    assert f"{path}:{len(lines) + 1}:7: invalid UTF-8" in err
