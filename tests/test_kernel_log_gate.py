"""A CI gate on a kernel log fails on every lockdep report in it (issue 29's Done-when).

Every public report in tests/data/kernel-log -- damaged ones included (a report whose lock
lines the console lost is still a report the kernel made) -- makes `lockcheck check` exit 1
with the kind its `.source` names, in the layouts people hand it: as published, without time
stamps (as LKML mails quote it), behind a syslog prefix, and quoted in a reply.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from lockcheck.commands.cli import main

DATA = Path(__file__).parent / "data" / "kernel-log"
LOGS = sorted(log for log in DATA.rglob("*.log") if log.with_suffix(".source").exists())
_STAMP = re.compile(r"^\s*\[\s*\d+\.\d+\]\s?")

LAYOUTS = {
    "as published": lambda lines: lines,
    "no stamps": lambda lines: [_STAMP.sub("", line) for line in lines],
    "syslog": lambda lines: ["Dec  7 05:00:00 host kernel: " + line for line in lines],
    "quoted": lambda lines: ["> " + line for line in lines],
}


def _kind(log: Path) -> str:
    for line in log.with_suffix(".source").read_text().splitlines():
        if line.startswith("kind:"):
            return line.split(":", 1)[1].strip()
    raise AssertionError(f"{log}: its .source names no kind")


def test_every_public_report_is_here() -> None:
    assert len(LOGS) >= 56, LOGS


@pytest.mark.parametrize("layout", list(LAYOUTS))
@pytest.mark.parametrize("log", LOGS, ids=lambda p: str(p.relative_to(DATA)))
def test_a_report_fails_the_gate_with_its_kind(tmp_path: Path, log: Path, layout: str) -> None:
    lines = log.read_text(errors="replace").splitlines(True)
    path = tmp_path / "console.log"
    path.write_text("".join(LAYOUTS[layout](lines)))
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--format", "json", str(path)], stdout=out, stderr=err)
    assert status == 1, err.getvalue()
    kinds = {finding["kind"] for finding in json.loads(out.getvalue())["findings"]}
    assert _kind(log) in kinds, kinds
