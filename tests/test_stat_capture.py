"""`lockcheck stat` on a real capture against the same boot's /proc/lock_stat.

lock_stat counts from boot, the trace covers a window of it, so per class
the trace can count at most what the dump counts; where a class was used
only inside the window, the counts agree exactly.  Times are not compared:
the trace's clock is ftrace's `global` clock, lock_stat's `local_clock()`
(README, "A capture against its boot's own /proc/lock_stat").
"""

from __future__ import annotations

import io

import pytest

from lockcheck.cli import main
from lockcheck.stat.inputs import load_one
from testdata import CAPTURES

#: classes whose every acquisition in the boot happened inside the traced window
WHOLLY_TRACED = ("&tty->winsize_mutex", "&f->f_pos_lock")


@pytest.fixture(scope="module", params=["clean", "clean-nohash"])
def boot(request):
    path = CAPTURES / request.param
    dump = {c.name: c for c in load_one(str(path / "lock_stat.txt.xz")).folded().classes}
    trace = {c.name: c for c in load_one(str(path / "trace.ftrace.xz")).folded().classes}
    return dump, trace


def test_every_traced_class_is_a_class_of_the_boot(boot) -> None:
    dump, trace = boot
    assert len(trace) == 84 and len(dump) == 301
    assert set(trace) <= set(dump)


@pytest.mark.parametrize("column", ["contentions", "acquisitions", "con-bounces"])
def test_the_window_counts_no_more_than_the_boot(boot, column: str) -> None:
    dump, trace = boot
    for name, stats in trace.items():
        for side in ("write_row", "read_row"):
            assert getattr(stats, side)().value(column) <= getattr(dump[name], side)().value(column), (name, side)


def test_classes_used_only_in_the_window_agree(boot) -> None:
    dump, trace = boot
    for name in WHOLLY_TRACED:
        assert trace[name].total_row().value("acquisitions") == dump[name].total_row().value("acquisitions") > 0
        assert trace[name].contentions == dump[name].contentions == 0


def test_compare_sets_the_dump_beside_the_trace() -> None:
    clean = CAPTURES / "clean"
    out, err = io.StringIO(), io.StringIO()
    status = main(["stat", "--compare", "--top", "1", "--metrics", "contentions,acquisitions",
                   str(clean / "lock_stat.txt.xz"), str(clean / "trace.ftrace.xz")], stdout=out, stderr=err)
    assert status == 0
    rows = out.getvalue().splitlines()[-2:]
    assert rows == [f"{'95.00':>10}{'':6}{'-27.4':>10}% {'69.00':>10}{'':6}  lock_stat.&rcu_state.gp_wq.contentions",
                    f"{'1467':>10}{'':6}{'-37.6':>10}% {'915.00':>10}{'':6}  lock_stat.&rcu_state.gp_wq.acquisitions"]
    assert "classes folded" in err.getvalue()
