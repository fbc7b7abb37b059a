"""Public lockdep reports from syzbot (tests/data/kernel-log/syzkaller) read as their kind, task and classes.

Each `N-KIND.log` there is one report of syzkaller's report-parsing test
data (`N`), cut to that report; its `.source` names where it came from and
what it says, read from its lines by hand-written patterns (not by
lockcheck).  Three of them are damaged as syzkaller keeps them (cut short,
or two CPUs' output interleaved): their `notes:` say what the reader must
report as lost, instead of passing them as whole.
"""

from __future__ import annotations

from pathlib import Path

import pytest

from lockcheck.readers.splat import to_finding

from test_reader_kernel_log import DATA, LAYOUTS, expectations, lines_of, read_back

PUBLIC = sorted((DATA / "syzkaller").glob("*.log"))
#: a few of the layouts the reports are re-read in (all of them run on the hand-picked reports)
SOME = ("as published", "raw", "dmesg", "reply to a reply", "console junk")


def test_the_public_reports_are_there() -> None:
    assert len(PUBLIC) >= 30, PUBLIC
    kinds = {expectations(log)["kind"] for log in PUBLIC}
    assert {"circular-dependency", "inconsistent-lock-state", "suspicious-rcu-usage", "unlock-imbalance",
            "held-lock-freed", "held-at-exit", "irq-lock-inversion"} <= kinds


@pytest.mark.parametrize("layout", SOME)
@pytest.mark.parametrize("log", PUBLIC, ids=lambda p: p.stem)
def test_each_public_report_reads_as_its_kind_and_classes(log: Path, layout: str) -> None:
    expect = expectations(log)
    splats, _ = read_back(LAYOUTS[layout](lines_of(log)))
    assert len(splats) == 1
    splat = splats[0]
    finding = to_finding(splat)
    assert (finding.kind, finding.task, finding.lock) == (expect["kind"], expect["task"], expect["lock"])
    if "held" in expect:
        assert finding.held == expect["held"]
    if "cycle" in expect:
        assert finding.cycle == expect["cycle"].split(" -> ")
    if "check" in expect:
        assert finding.details["check"] == expect["check"]
    notes = [note for note in expect.get("notes", "").split("|") if note]
    assert len(splat.notes) == len(notes) and all(got.startswith(want) for got, want in zip(splat.notes, notes))
    assert splat.kernel and splat.kernel.split()[0][0].isdigit()
