"""Where the compiled core finds a line's ` ts=` (find_stamp, _lt_line.h): the first one, at any place.

The core splits a line's text after the task at its first ` ts=` (the stamp read apart, the rest
looked up), 16 places a step where SSE2 is, its last step overlapping the one before.  A stamp at
every distance from the text's start and end, blanks before a `t` that start no stamp (` try`,
` t`), a `ts=` with no blank before it: the compiled core must check each alike with the plain
pipeline.
"""

from __future__ import annotations

import json

import pytest

from lockcheck.commands.cli import main
from lockcheck.engine import fast_lt as hotpath

pytestmark = pytest.mark.skipif(not hotpath.compiled(), reason="the compiled core is not built here")


def lines() -> list[str]:
    """Chains that repeat (so the core applies them) with stamps at many places."""
    out = ["#lockcheck-trace v1"]
    for i in range(40):
        task = f"t{i % 3}/1"
        pad = "x" * (i % 23)  # moves the stamp across the 16-byte steps
        stamp = f" ts={1000 + i}.5 cpu={i % 4}" if i % 4 else ""
        out += [
            f"{task} acquire A{pad}@0x{i % 5} at=f+0x1/0x2{stamp}",
            f"{task} acquire B try at=ts=g+0x{i % 3}/0x9{stamp}",
            f"{task} acquire C{pad} read{stamp}",
            f"{task} release C{pad}{stamp}",
            f"{task} release B{stamp}",
            f"{task} release A{pad}@0x{i % 5}",
            f"{task} acquire A@0x1 ts=0.5",
            f"{task} acquire D ts=1.0",
            f"{task} release D ts=2.0 cpu=1",
            f"{task} release A@0x1",
        ]
    # one inversion of A then D, for a finding that names lines the core read
    out += ["t0/1 acquire D", "t0/1 acquire A@9", "t0/1 release A@9", "t0/1 release D"]
    return out


def check(path: str, fastpath: str, monkeypatch, capsys) -> tuple:
    monkeypatch.setenv("LOCKCHECK_FASTPATH", fastpath)
    monkeypatch.setenv("LOCKCHECK_PURE", "0")
    monkeypatch.setenv("LOCKCHECK_JOBS", "1")
    status = main(["check", "--format", "json", "--no-config", "--input-format", "lt", path])
    out, err = capsys.readouterr()
    return status, json.loads(out), err


def test_stamps_found_alike_at_every_place(tmp_path, monkeypatch, capsys) -> None:
    trace = lines()
    path = tmp_path / "t.lt"
    path.write_text("\n".join(trace) + "\n")
    compiled = check(str(path), "1", monkeypatch, capsys)
    plain = check(str(path), "0", monkeypatch, capsys)
    assert compiled == plain
    assert compiled[1]["stats"]["events"] == len(trace) - 1
    assert [f["kind"] for f in compiled[1]["findings"]] == ["circular-dependency"]


def test_the_core_applies_the_stamped_lines_itself(monkeypatch) -> None:
    # alike results alone would hold if the core found no stamp and passed every stamped line on to
    # Python: the repeated chains' stamped lines must be applied in C, at every place of the stamp
    from tests.test_speedups_overlay import _passed_on
    trace = lines()[1:]
    passed, _ = _passed_on(trace, True, monkeypatch)
    stamped = [number for number, line in enumerate(trace, 1) if " ts=" in line]
    warm = [number for number in stamped if number > 4 * 10]  # (after the first rounds' new chains)
    late_passed = set(passed) & set(warm)
    assert len(late_passed) < len(warm) / 4, (len(late_passed), len(warm))
