"""A kernel report survives being re-rendered: read a splat, print it in the kernel's layout, read that back.

The text report of a finding read from a log is the kernel's own layout, so
it is itself a kernel log: read back, it must give the same finding -- the
same kind, task and locks, every chain entry with all its frames and its
`-{n:n}` wait types, and the `stack backtrace:` dump whole.  Anything the
renderer drops or the reader misreads shows here.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from lockcheck.commands import cli

from test_reader_kernel_log import DATA

LOGS = sorted(DATA.glob("*.log"))
#: what a re-rendering keeps (locations and notes name the file read, which differs)
KEPT = ("kind", "task", "lock", "held", "cycle", "message", "waits", "backtrace", "partial", "held_locks")


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def kept(path: str) -> list[dict]:
    status, out, err = run("check", "--format", "json", path)
    assert status == 1, err
    findings = json.loads(out)["findings"]
    docs = []
    for finding in findings:
        doc = {key: finding[key] for key in KEPT if key in finding}
        if "held_locks" in doc:  # where each was taken in the log read: another file
            doc["held_locks"] = [{k: v for k, v in lock.items() if k != "acquired"} for lock in doc["held_locks"]]
        doc["chain"] = [{key: link.get(key) for key in ("class", "depth", "waits", "frames")}
                        for link in finding.get("chain", [])]
        docs.append(doc)
    return docs


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_a_report_printed_in_the_kernels_layout_reads_back_the_same(tmp_path: Path, log: Path) -> None:
    first = kept(str(log))
    status, text, _ = run("check", str(log))
    assert status == 1
    again = tmp_path / "rendered.log"
    again.write_text(text, encoding="utf-8")
    assert kept(str(again)) == first


@pytest.mark.parametrize("name", ["circular-2-classes", "circular-5-classes"])
def test_chain_entries_keep_every_frame_and_their_wait_types(name: str) -> None:
    log = DATA / f"{name}.log"
    (finding,) = json.loads(run("check", "--format", "json", str(log))[1])["findings"]
    text = log.read_text(encoding="utf-8")
    assert all(link.get("waits") for link in finding["chain"]) == ("}-{" in text)
    for link in finding["chain"]:
        assert len(link["frames"]) > 3
        assert all(frame in text for frame in link["frames"])
    assert all(line.strip() in text for line in finding["backtrace"]) and len(finding["backtrace"]) >= 4
    assert finding["backtrace"][0].startswith("CPU: ") or finding["backtrace"][0] == "Call Trace:"
    _, rendered, _ = run("check", str(log))
    for link in finding["chain"]:
        head = f"-> #{link['depth']} ({link['class']})"
        assert head in rendered
        if link.get("waits"):
            assert f"-{{{link['waits']}}}:" in rendered
        assert "\n".join(" " * 7 + frame for frame in link["frames"]) in rendered
