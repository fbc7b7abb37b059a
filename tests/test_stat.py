"""`lockcheck stat`: lock_stat-style contention and hold times from trace events."""

from __future__ import annotations

import io
import json

from lockcheck.cli import main
from lockcheck.readers.lt import parse
from lockcheck.stat import collect, render_text

TRACE = """\
T1 acquire A@1 ts=1.000000 cpu=0
T2 contended A@1 at=f.c:10 ts=1.000010 cpu=1
T1 release A@1 ts=1.000050 cpu=0
T2 acquired A@1 ts=1.000060 cpu=1
T2 acquire A@1 ts=1.000060 cpu=1
T2 acquire B ts=1.000070 cpu=1
T2 release B ts=1.000080 cpu=1
T2 release A@1 ts=1.000100 cpu=1
"""


def stats():
    return collect(parse(TRACE.splitlines(), "s.lt"))


def test_counts_contentions_waits_holds_and_bounces() -> None:
    a = stats().classes["A"]
    assert (a.acquisitions, a.contentions, a.acq_bounces, a.con_bounces) == (2, 1, 1, 1)
    assert round(a.wait.total * 1e6) == 50  # contended at 10us, acquired at 60us
    assert (round(a.hold.min * 1e6), round(a.hold.max * 1e6)) == (40, 50)
    assert a.contention_sites == {"f.c:10": 1}


def test_rows_sorted_by_contention() -> None:
    assert [row.name for row in stats().rows()] == ["A", "B"]


def test_text_layout_follows_lock_stat() -> None:
    out = io.StringIO()
    render_text(stats(), out)
    text = out.getvalue()
    assert text.startswith("lock_stat version 0.4")
    assert "class name    con-bounces    contentions   waittime-min" in text
    row = next(line for line in text.splitlines() if line.strip().startswith("A:"))
    assert row.split()[1:5] == ["1", "1", "50.00", "50.00"]
    assert "f.c:10" in text


def test_cli_json(tmp_path) -> None:
    path = tmp_path / "s.lt"
    path.write_text(TRACE)
    out = io.StringIO()
    assert main(["stat", "--format", "json", str(path)], stdout=out, stderr=io.StringIO()) == 0
    doc = json.loads(out.getvalue())
    assert doc["events"] == 8
    assert doc["classes"][0]["class"] == "A" and doc["classes"][0]["waittime"]["total_us"] == 50.0


def test_untimed_trace_says_so(tmp_path) -> None:
    path = tmp_path / "u.lt"
    path.write_text("T1 acquire A\nT1 release A\n")
    out = io.StringIO()
    assert main(["stat", str(path)], stdout=out, stderr=io.StringIO()) == 0
    assert "no ts= timestamps" in out.getvalue()
