"""`lockcheck stat` on a real capture against the same boot's /proc/lock_stat.

lock_stat counts from boot, the trace covers a window of it, so per class
the trace can count at most what the dump counts; where a class was used
only inside the window, the counts agree exactly.  Times are not held to
an order: the trace's clock is ftrace's `global` clock, lock_stat's
`local_clock()`.  The README explains each difference ("A capture against
its boot's own /proc/lock_stat"); its figures are checked here against what
`stat` computes.
"""

from __future__ import annotations

import io

import pytest

from lockcheck.commands.cli import main
from lockcheck.stat.inputs import fold_name, load_one
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


def test_the_readmes_comparison_of_clean_with_its_dump_is_measured() -> None:
    """Every figure of the README's "A capture against its boot's own /proc/lock_stat" is what
    `stat` computes from tests/data/kernel-6.1/clean, so the explanation cannot drift from the data."""
    from testdata import ROOT

    readme = " ".join((ROOT / "docs" / "stat.md").read_text(encoding="utf-8").split())
    clean = CAPTURES / "clean"
    raw_dump = load_one(str(clean / "lock_stat.txt.xz"))
    raw_trace = load_one(str(clean / "trace.ftrace.xz"))
    dump = {c.name: c for c in raw_dump.folded().classes}
    trace = {c.name: c for c in raw_trace.folded().classes}

    def total(stats, column: str) -> int:
        return stats.total_row().value(column)

    contended = [name for name, stats in dump.items() if stats.contentions]
    quiet = [name for name in contended if name not in trace or not trace[name].contentions]
    unused = [name for name in quiet if name not in trace]
    assert (f"The dump has {len(dump)} classes ({len(raw_dump.classes)} before folding `#N`/`/N`), the trace "
            f"{len(trace)}, every one of them in the dump; the dump's {len(dump) - len(trace)} others were not "
            f"taken in the window. {len(quiet)} of the dump's {len(contended)} contended classes had no "
            f"contention in it, {len(unused)} of them not even an acquisition") in readme
    assert set(trace) <= set(dump)

    acq = [sum(total(side[name], "acquisitions") for name in trace) for side in (trace, dump)]
    con = [sum(side[name].contentions for name in trace) for side in (trace, dump)]
    assert f"the trace saw {acq[0]:,} of {acq[1]:,} acquisitions and {con[0]} of {con[1]} contentions" in readme

    notes = " ".join(raw_trace.notes)
    assert "2 releases of locks acquired before the trace began" in notes and "2 locks still held" in notes
    assert "2 releases of locks taken before tracing began, and 2 locks still held when it stopped" in readme

    # times: the longest hold of a row in the window beyond the longest of the whole boot (the clocks)
    longer = {name for name, stats in trace.items()
              for row in ("write_row", "read_row")
              if getattr(stats, row)().hold.max > getattr(dump[name], row)().hold.max}
    pi_trace, pi_dump = trace["&p->pi_lock"].write_row().wait, dump["&p->pi_lock"].write_row().wait
    rename = (trace["rename_lock.seqcount"].read_row().hold.max, dump["rename_lock.seqcount"].read_row().hold.max)
    assert pi_trace.nr == 1 and pi_trace.max > pi_dump.max
    assert (f"The one `&p->pi_lock` wait of the window lasts {pi_trace.max // 1000:,} µs in the trace, longer "
            f"than any of the boot's {pi_dump.nr} in lock_stat (max {pi_dump.max / 1000:,.2f} µs), and "
            f"{len(longer)} classes have a hold longer than lock_stat's longest of the whole boot (a "
            f"`rename_lock.seqcount` read of {rename[0] // 1000:,} µs across a clock jump, "
            f"{rename[1] / 1000:.2f} µs at most in lock_stat)") in readme

    # bounces that lockdep_init_map() makes or hides
    mm = (trace["&mm->mmap_lock"].write_row().acq_bounces, dump["&mm->mmap_lock"].write_row().acq_bounces)
    assert f"(`&mm->mmap_lock` write acq-bounces {mm[0]} against {mm[1]}," in readme
    tty = (dump["&tty->winsize_mutex"].total_row(), trace["&tty->winsize_mutex"].total_row())
    assert tty[0].hold.nr == tty[1].hold.nr
    assert (f"(`&tty->winsize_mutex`: {tty[0].acq_bounces} against {tty[1].acq_bounces}, its {tty[0].hold.nr} "
            "acquisitions all in the window)") in readme

    # names: lock_stat cuts them at 37 characters, a trace does not; folding cuts the trace's alike
    long = sorted((name for name in (c.name for c in raw_trace.classes) if len(name) > 37), key=len)
    dumped = {c.name for c in raw_dump.classes}
    cut = [fold_name(name) for name in long]
    assert all(len(name) == 37 and name in dumped for name in cut)
    assert (f"named by a `per_cpu()` expansion of {' and '.join(str(len(name)) for name in long)} characters in "
            f"the trace, are `{cut[0]}` and `{cut[1]}` in the dump") in readme

    # lock_stat's own zero waits: contention points counted, contentions not
    rq = dump["&rq->__lock"]
    assert (f"`&rq->__lock` has {sum(rq.contention_points.values())} contention points but {rq.contentions} "
            "contentions in the dump") in readme
