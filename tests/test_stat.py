"""`lockcheck stat`: lock_stat's numbers from trace events, computed by hand for a small trace.

The trace below exercises nesting, a contended acquisition across CPUs, read
and write holds of one lock, a trylock, a nest_lock burst and a contention
still waiting when the trace ends.  Every expected number is worked out in
the comments next to it (times in microseconds; the kernel keeps
nanoseconds and prints `us` with two decimals).
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from lockcheck.commands.cli import main
from lockcheck.readers.lt import parse
from lockcheck.stat import collect as collect_mod
from lockcheck.stat import render
from lockcheck.stat.collect import collect
from lockcheck.stat.dump import DumpReader
from lockcheck.stat.model import LockTime, format_us

DATA = Path(__file__).parent / "data" / "lock_stat"

TRACE = """\
#lockcheck-trace v1
T1 acquire A@1 at=f_a+0x10/0x40 ts=1.000000 cpu=0
T1 acquired A@1 ts=1.000002 cpu=0
T1 acquire B ts=1.000010 cpu=0
T1 acquired B ts=1.000010 cpu=0
T1 release B ts=1.000030 cpu=0
T2 acquire A@1 ts=1.000040 cpu=1
T2 contended A@1 at=g_a+0x8/0x40 ts=1.000045 cpu=1
T1 release A@1 ts=1.000100 cpu=0
T2 acquired A@1 ts=1.000105 cpu=1
T2 release A@1 ts=1.000125 cpu=1
T3 acquire R@7 read ts=1.000200 cpu=0
T3 acquired R@7 ts=1.000201 cpu=0
T3 release R@7 ts=1.000210 cpu=0
T3 acquire R@7 read ts=1.000300 cpu=1
T3 acquired R@7 ts=1.000300 cpu=1
T3 release R@7 ts=1.000330 cpu=1
T4 acquire R@7 ts=1.000400 cpu=1
T4 acquired R@7 ts=1.000400 cpu=1
T4 release R@7 ts=1.000450 cpu=1
T1 acquire A@1 try ts=1.000500 cpu=1
T1 release A@1 ts=1.000507 cpu=1
T7 acquire M ts=1.000700 cpu=0
T7 acquire X@1 nest=M ts=1.000710 cpu=0
T7 acquire X@2 nest=M ts=1.000720 cpu=0
T7 release X@1 ts=1.000740 cpu=0
T7 release X@2 ts=1.000750 cpu=0
T7 release M ts=1.000760 cpu=0
T6 acquire C ts=1.000600 cpu=0
T6 acquired C ts=1.000600 cpu=0
T5 acquire C ts=1.000610 cpu=1
T5 contended C at=h_c+0x1/0x9 ts=1.000611 cpu=1
"""


def stats(text: str = TRACE):
    return collect(parse(text.splitlines(), "s.lt"))


def times_us(lt: LockTime) -> tuple:
    return (lt.nr, lt.min / 1000, lt.max / 1000, lt.total / 1000, lt.avg / 1000)


def test_nested_and_contended_lock_across_cpus() -> None:
    a = stats().classes["A"]
    # holds of A: T1 0 -> 100 (not contended: from acquire), T2 105 -> 125 (contended: from acquired),
    # T1's trylock 500 -> 507
    assert times_us(a.write_holdtime) == (3, 7, 100, 127, 42.333)
    # one contention, counted at `acquired`: 45 -> 105
    assert times_us(a.write_waittime) == (1, 60, 60, 60, 60)
    # con-bounce: A was last acquired on CPU 0, T2 waits on CPU 1; acq-bounce: T2's acquired on CPU 1.
    # The trylock on CPU 1 is no bounce (no lock_acquired for a trylock)
    assert a.bounces == [1, 0, 1, 0]
    # the waiter is at g_a, the holder it waited for took A at f_a
    assert a.contention_points == {("", "g_a+0x8/0x40"): 1}
    assert a.contending_points == {("", "f_a+0x10/0x40"): 1}
    b = stats().classes["B"]
    assert times_us(b.write_holdtime) == (1, 20, 20, 20, 20) and b.contentions == 0


def test_read_and_write_holds_are_split() -> None:
    r = stats().classes["R"]
    assert times_us(r.read_holdtime) == (2, 10, 30, 40, 20)
    assert times_us(r.write_holdtime) == (1, 50, 50, 50, 50)
    # read acquired on CPU 0 then CPU 1: one read bounce; the write acquired on CPU 1 after it: none
    assert r.bounces == [0, 1, 0, 0]
    assert [suffix for suffix, _ in r.rows()] == ["-W", "-R"]


def test_nest_lock_burst_is_one_held_lock() -> None:
    # X@2 is merged into X@1's held lock (hlock->references): one hold time, X@1's, 710 -> 740
    x = stats().classes["X"]
    assert times_us(x.write_holdtime) == (1, 30, 30, 30, 30)


def test_contention_never_acquired_by_trace_end() -> None:
    result = stats()
    c = result.classes["C"]
    # T5's wait never ends: its point and bounce are counted (at lock_contended), no contention (at lock_acquired)
    assert c.contentions == 0 and c.contention_points == {("", "h_c+0x1/0x9"): 1}
    assert c.bounces == [0, 0, 1, 0]
    # nor any hold: T6 still holds C, T5 never got it -- so lock_stat prints no row for C
    assert c.write_holdtime.nr == 0 and c.rows() == []
    assert result.open_waits == 1 and result.held_at_end == 2
    notes = " ".join(result.notes())
    assert "1 contention never acquired" in notes and "C (T5)" in notes


def test_text_rows_are_the_kernels() -> None:
    out = io.StringIO()
    result = stats()
    render.render_text(render.ordered(result.classes.values()), out)
    lines = out.getvalue().splitlines()
    assert lines[0] == "lock_stat version 0.4" and lines[1] == "-" * 221
    assert lines[2].split() == ["class", "name", *render.COLUMNS]
    a = next(i for i, line in enumerate(lines) if line.strip().startswith("A:"))
    assert lines[a] == (f"{'A:':>41}{1:14d} {1:14d}" + "".join(f" {v:>14}" for v in ("60.00",) * 4)
                        + f" {1:14d} {3:14d}" + "".join(f" {v:>14}" for v in ("7.00", "100.00", "127.00", "42.33")))
    # contention points, a rule as long as the name, contending points, then the dotted line
    assert lines[a + 1:a + 7] == [
        " " * 39 + "-",
        f"{'A':>40} {1:14d} {'':>29} g_a+0x8/0x40",
        " " * 39 + "-",
        f"{'A':>40} {1:14d} {'':>29} f_a+0x10/0x40",
        "",
        "." * 221,
    ]
    r_w = next(line for line in lines if line.strip().startswith("R-W:"))
    r_r = next(line for line in lines if line.strip().startswith("R-R:"))
    assert r_w.split()[1:] == ["0", "0", "0.00", "0.00", "0.00", "0.00", "0", "1", "50.00", "50.00", "50.00", "50.00"]
    assert r_r.split()[1:] == ["0", "0", "0.00", "0.00", "0.00", "0.00", "1", "2", "10.00", "30.00", "40.00", "20.00"]
    assert r_w.index("R-W:") == 37  # `%38s-W:`


def test_kernel_order_is_contentions_then_first_seen() -> None:
    names = [c.name for c in render.ordered(stats().classes.values()) if c.rows()]
    assert names == ["A", "B", "R", "M", "X"]


@pytest.mark.parametrize("key, first", [
    ("holdtime-total", "A"), ("acquisitions", "A"), ("holdtime-max", "A"), ("acq-bounces", "A"),
    ("class name", "A"), ("wait_total", "A"), ("holdtime-avg", "M"), ("holdtime-min", "M"),
])
def test_sort_by_any_column(key: str, first: str) -> None:
    # holdtime-avg (reads and writes together): M 60 > A 42.33 > R 30 = X 30 > B 20;
    # holdtime-min: M 60 is the largest minimum (A 7, X 30, B 20, R 10)
    classes = [c for c in render.ordered(stats().classes.values(), render.sort_key(key)) if c.rows()]
    assert classes[0].name == first


def test_unknown_sort_key_is_a_usage_error(tmp_path: Path) -> None:
    path = tmp_path / "s.lt"
    path.write_text(TRACE)
    err = io.StringIO()
    assert main(["stat", "--sort", "bogus", str(path)], stdout=io.StringIO(), stderr=err) == 2
    assert "unknown sort key 'bogus'" in err.getvalue()


def test_out_of_order_release_restarts_the_holds_above() -> None:
    # __lock_release of a lock that is not the innermost: reacquire_held_locks() -> __lock_acquire()
    # restarts the hold clock of every lock held above it (holdtime_stamp = now)
    result = stats("T1 acquire A ts=1.000000 cpu=0\nT1 acquire B ts=1.000010 cpu=0\nT1 acquire C ts=1.000020 cpu=0\n"
                   "T1 release B ts=1.000030 cpu=0\nT1 release A ts=1.000040 cpu=0\nT1 release C ts=1.000045 cpu=0\n")
    # A 0 -> 40 and B 10 -> 30 untouched; C restarted at 30 (B's release) and 40 (A's): 40 -> 45
    assert times_us(result.classes["A"].write_holdtime) == (1, 40, 40, 40, 40)
    assert times_us(result.classes["B"].write_holdtime) == (1, 20, 20, 20, 20)
    assert times_us(result.classes["C"].write_holdtime) == (1, 5, 5, 5, 5)
    assert result.reacquired == 2


def test_contending_point_is_the_holders_site_not_the_waiters() -> None:
    # lock->ip is set by __lock_acquired only: the waiter's own acquire (at waiter) does not replace
    # the holder's site before its lock_contended reads it
    trace = ("T1 acquire L at=holder ts=1.000000 cpu=0\nT1 acquired L ts=1.000000 cpu=0\n"
             "T2 acquire L at=waiter ts=1.000010 cpu=1\nT2 contended L at=waiter ts=1.000010 cpu=1\n"
             "T1 release L ts=1.000020 cpu=0\nT2 acquired L ts=1.000025 cpu=1\nT2 release L ts=1.000030 cpu=1\n")
    lock = stats(trace).classes["L"]
    assert lock.contention_points == {("", "waiter"): 1} and lock.contending_points == {("", "holder"): 1}
    # wait 10 -> 25; holds: T1 0 -> 20 (uncontended: from acquire), T2 25 -> 30 (from acquired)
    assert times_us(lock.write_waittime) == (1, 15, 15, 15, 15)
    assert times_us(lock.write_holdtime) == (2, 5, 20, 25, 12.5)
    # the same without `acquired` (a producer that writes only acquire/contended/release): the
    # holder's site is the acquire site before the waiter's
    lock = stats("\n".join(line for line in trace.splitlines() if " acquired " not in line)).classes["L"]
    assert lock.contending_points == {("", "holder"): 1}


def test_wait_given_up_counts_a_hold_and_no_wait() -> None:
    # mutex_lock_killable() interrupted: lock_acquire, lock_contended, then lock_release without
    # lock_acquired. The kernel records a hold from the acquire's stamp (the wait inside it) and no wait
    result = stats("T1 acquire M ts=1.000000 cpu=0\nT1 acquired M ts=1.000000 cpu=0\n"
                   "T2 acquire M ts=1.000010 cpu=1\nT2 contended M ts=1.000012 cpu=1\n"
                   "T2 release M ts=1.000050 cpu=1\nT1 release M ts=1.000100 cpu=0\n")
    m = result.classes["M"]
    assert m.contentions == 0 and m.bounces == [0, 0, 1, 0]  # a contended bounce: M was CPU 0's
    assert times_us(m.write_holdtime) == (2, 40, 100, 140, 70)  # T2 10 -> 50, T1 0 -> 100
    assert result.given_up_waits == 1 and result.open_waits == 0
    assert "1 wait given up" in " ".join(result.notes())


def test_rows_follow_hold_times_as_seq_stats_does() -> None:
    # Q held for write (0 -> 10) and waited for as a read (5 -> 12) whose hold is still open at the end:
    # seq_stats prints rows by hold times, so one `Q:` row, its write side, with no contention in it;
    # the read wait counts in contentions (the sort, the points) and in JSON
    result = stats("T1 acquire Q ts=1.000000 cpu=0\nT1 acquired Q ts=1.000000 cpu=0\n"
                   "T2 acquire Q read ts=1.000005 cpu=1\nT2 contended Q at=w ts=1.000005 cpu=1\n"
                   "T1 release Q ts=1.000010 cpu=0\nT2 acquired Q ts=1.000012 cpu=1\n")
    q = result.classes["Q"]
    assert [suffix for suffix, _ in q.rows()] == [""] and q.contentions == 1
    assert times_us(q.read_waittime) == (1, 7, 7, 7, 7) and q.bounces == [0, 1, 0, 1]
    lines = render.class_text(q).splitlines()
    assert lines[0].split() == ["Q:", "0", "0", "0.00", "0.00", "0.00", "0.00", "0", "1",
                                "10.00", "10.00", "10.00", "10.00"]
    assert lines[1:] == [" " * 39 + "-", f"{'Q':>40} {1:14d} {'':>29} w"]  # no contending point, no dotted line
    assert render.class_json(q)["read"]["waittime-total"] == 7.0 and render.class_json(q)["contentions"] == 1


def test_early_contended_order_is_accepted() -> None:
    # some producers write the wait before the acquire; it is applied when the acquire comes
    result = stats("T1 acquire A ts=1.0 cpu=0\nT2 contended A at=w ts=1.000010 cpu=1\n"
                   "T1 release A ts=1.000050 cpu=0\nT2 acquired A ts=1.000060 cpu=1\n"
                   "T2 acquire A ts=1.000060 cpu=1\nT2 release A ts=1.000100 cpu=1\n")
    a = result.classes["A"]
    assert times_us(a.write_waittime) == (1, 50, 50, 50, 50)
    assert times_us(a.write_holdtime) == (2, 40, 50, 90, 45)
    assert result.open_waits == 0


def test_cli_json_has_the_columns_as_keys(tmp_path: Path) -> None:
    path = tmp_path / "s.lt"
    path.write_text(TRACE)
    out, err = io.StringIO(), io.StringIO()
    assert main(["stat", "--format", "json", str(path)], stdout=out, stderr=err) == 0
    doc = json.loads(out.getvalue())
    assert doc["version"] == 2 and doc["columns"] == list(render.COLUMNS)
    a = doc["classes"][0]
    assert a["class name"] == "A"
    assert {k: a[k] for k in render.COLUMNS} == {
        "con-bounces": 1, "contentions": 1, "waittime-min": 60.0, "waittime-max": 60.0, "waittime-total": 60.0,
        "waittime-avg": 60.0, "acq-bounces": 1, "acquisitions": 3, "holdtime-min": 7.0, "holdtime-max": 100.0,
        "holdtime-total": 127.0, "holdtime-avg": 42.33}
    assert a["contention points"] == [{"count": 1, "ip": None, "symbol": "g_a+0x8/0x40"}]
    r = next(c for c in doc["classes"] if c["class name"] == "R")
    assert r["read"]["acquisitions"] == 2 and r["write"]["acquisitions"] == 1 and r["acquisitions"] == 3
    assert "C (T5)" in " ".join(doc["notes"]) and "C (T5)" in err.getvalue().replace("\n    ", " ")


def test_untimed_trace_says_so(tmp_path: Path) -> None:
    path = tmp_path / "u.lt"
    path.write_text("T1 acquire A\nT1 release A\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["stat", str(path)], stdout=out, stderr=err) == 0
    assert "no timestamps" in err.getvalue().replace("\n    ", " ")
    assert out.getvalue().splitlines()[-1].split()[1:9] == ["0", "0", "0.00", "0.00", "0.00", "0.00", "0", "1"]


def test_bounces_at_acquire_when_the_trace_has_no_acquired() -> None:
    # a producer without `acquired` (the pytest plugin, hand-written traces): bounces count at acquire
    result = stats("T1 acquire A ts=1 cpu=0\nT1 release A ts=2 cpu=0\nT2 acquire A ts=3 cpu=1\n"
                   "T2 release A ts=4 cpu=1\nT2 acquire A try ts=5 cpu=0\nT2 release A ts=6 cpu=0\n")
    assert result.classes["A"].bounces == [1, 0, 0, 0]


@pytest.mark.parametrize("ns, text", [(0, "0.00"), (4, "0.00"), (5, "0.01"), (994, "0.99"), (995, "1.00"),
                                      (1_234_567, "1234.57"), (875206410, "875206.41")])
def test_times_print_as_snprint_time(ns: int, text: str) -> None:
    assert format_us(ns) == text


def test_dump_renders_back_byte_for_byte() -> None:
    text = (DATA / "excerpt.txt").read_text()
    classes = list(DumpReader("excerpt.txt").parse(text.splitlines()))
    out = io.StringIO()
    render.render_text(classes, out)
    assert out.getvalue() == text
    tasklist = next(c for c in classes if c.name == "tasklist_lock")
    assert (tasklist.read_waittime.nr, tasklist.read_waittime.total) == (20, 72_910_790)
    assert tasklist.bounces == [43, 37, 0, 20]
    assert tasklist.contending_points == {("0000000058a1c937", "do_exit+0x3ca/0x85a"): 20}
    # classes the kernel printed under one name stay apart
    assert sum(c.name == "subsys mutex#1" for c in classes) == 5


def test_dump_class_of_points_only_reads_and_renders_back() -> None:
    # a class that waited and still holds its lock has no hold time: seq_stats prints its points under
    # no row (here after a class without points, and first after the header)
    text = (DATA / "excerpt.txt").read_text()
    lines = text.splitlines(keepends=True)
    first = lines.index(next(line for line in lines if line.strip().startswith("&ps2dev->wait:")))
    points_only = lines[:first] + lines[first + 1:]
    classes = list(DumpReader("p.txt").parse("".join(points_only).splitlines()))
    ps2 = classes[0]
    assert ps2.name == "&ps2dev->wait" and ps2.hidden_waits and not ps2.rows() and ps2.contentions == 0
    assert ps2.contention_points[("000000003b1a6333", "prepare_to_wait_event+0x11/0xa6")] == 73
    assert ps2.contending_points[("000000003fc99a93", "__wake_up_common_lock+0x48/0x8e")] == 84
    out = io.StringIO()
    render.render_text(classes, out)
    assert out.getvalue() == "".join(points_only)


def test_dump_is_detected_and_sorted_like_a_trace(tmp_path: Path) -> None:
    out = io.StringIO()
    assert main(["stat", "--sort", "acquisitions", "--top", "2", str(DATA / "excerpt.txt")],
                stdout=out, stderr=io.StringIO()) == 0
    rows = [line.split(":")[0].strip() for line in out.getvalue().splitlines() if line.endswith(tuple("0123456789"))
            and ":" in line]
    assert rows == ["sb_writers-R", "&ps2dev->wait"]


def test_malformed_dump_line_is_one_error(tmp_path: Path) -> None:
    lines = (DATA / "excerpt.txt").read_text().splitlines()
    lines[6] = "    this is not a lock_stat line"
    path = tmp_path / "bad.txt"
    path.write_text("\n".join(lines) + "\n")
    err = io.StringIO()
    assert main(["stat", str(path)], stdout=io.StringIO(), stderr=err) == 2
    assert err.getvalue().startswith(f"{path}:7:5: expected a lock_stat class line")
    assert len(err.getvalue().splitlines()) == 1


def test_state_is_bounded_per_task(monkeypatch) -> None:
    # every task contends once and never acquires, and holds more than the kernel's depth:
    # memory stays at one wait and MAX_LOCK_DEPTH locks per task, and MAX_TASKS tasks
    monkeypatch.setattr(collect_mod, "MAX_TASKS", 10)
    lines = []
    for t in range(50):
        lines += [f"T{t} acquire L{i}@{t} ts={t}.{i:06d}" for i in range(60)]
        lines += [f"T{t} contended W@{t} ts={t}.5", f"T{t} contended W@{t + 1} ts={t}.6"]
    result = collect_mod.LockStats()
    for ev in parse(lines, "b.lt"):
        result.feed(ev)
        assert len(result._tasks) <= 10
        assert all(len(task.held) <= collect_mod.MAX_LOCK_DEPTH for task in result._tasks.values())
    result.finish()
    assert result.dropped_deep == 50 * 12 and result.dropped_tasks == 40
    assert result.open_waits == 100  # 50 replaced waits + 50 still open at the end


FTRACE = """\
# tracer: nop
  init-1     [000] ...2.  5.000000: lock_acquire: 00000000e9bc521e trace_types_lock
  init-1     [000] ...2.  5.000005: contention_begin: 00000000a467ae70 (flags=SPIN|MUTEX)
  init-1     [000] ...2.  5.000012: lock_acquired: 00000000e9bc521e trace_types_lock
  init-1     [000] ...2.  5.000015: contention_end: 00000000a467ae70 (ret=0)
  init-1     [000] ...1.  5.000040: lock_release: 00000000e9bc521e trace_types_lock
  cat-7      [001] ...2.  5.000100: contention_begin: 00000000deadbeef (flags=SPIN|READ)
  cat-7      [001] ...2.  5.000130: contention_end: 00000000deadbeef (ret=0)
  cat-7      [001] ...2.  5.000200: lock_acquire: 0000000011111111 &p->pi_lock
  cat-7      [001] ...2.  5.000201: lock_contended: 0000000011111111 &p->pi_lock
  cat-7      [001] ...2.  5.000209: lock_acquired: 0000000011111111 &p->pi_lock
  cat-7      [001] ...1.  5.000210: lock_release: 0000000011111111 &p->pi_lock
"""


@pytest.mark.parametrize("mode", ["auto", "lockdep", "tracepoint"])
def test_contention_tracepoints(tmp_path: Path, mode: str) -> None:
    path = tmp_path / "t.ftrace"
    path.write_text(FTRACE)
    out, err = io.StringIO(), io.StringIO()
    assert main(["stat", "--format", "json", "--contention", mode, str(path)], stdout=out, stderr=err) == 0
    classes = {c["class name"]: c for c in json.loads(out.getvalue())["classes"]}
    if mode == "tracepoint":
        # the mutex's slow-path wait (5 -> 15 us) belongs to the lock being acquired; the reader-writer
        # spinlock no held lock explains is known by its type and address (30 us, a read wait)
        assert classes["trace_types_lock"]["contentions"] == 1 and classes["trace_types_lock"]["waittime-max"] == 10
        assert classes["rwlock@0x00000000deadbeef"]["read"]["waittime-total"] == 30.0
        assert classes["&p->pi_lock"]["contentions"] == 0
        assert "wait times from 2 contention_begin/contention_end pairs" in err.getvalue().replace("\n    ", " ")
    else:
        # lock_stat's own: only lock_contended/lock_acquired count (1 -> 9 us); the pairs are noted
        assert classes["&p->pi_lock"]["contentions"] == 1 and classes["&p->pi_lock"]["waittime-max"] == 8
        assert classes["trace_types_lock"]["contentions"] == 0 and "rwlock@0x00000000deadbeef" not in classes
        assert "2 contention_begin/contention_end pairs not used" in err.getvalue().replace("\n    ", " ")
    # holds are lockdep's either way: no lock_contended for trace_types_lock, so its hold runs from
    # lock_acquire (0 -> 40); &p->pi_lock was contended, so its hold runs from lock_acquired (209 -> 210)
    assert classes["trace_types_lock"]["holdtime-total"] == 40.0
    assert classes["&p->pi_lock"]["holdtime-total"] == 1.0


def test_contention_tracepoints_only_when_asked() -> None:
    from lockcheck.readers import ftrace

    ops = [e.op for e in ftrace.parse(FTRACE.splitlines(), "t")]
    assert "contention-begin" not in ops
    ops = [e.op for e in ftrace.parse(FTRACE.splitlines(), "t", contention=True)]
    assert ops.count("contention-begin") == ops.count("contention-end") == 2


def test_freed_lock_object_starts_afresh() -> None:
    # A@1 is freed and a new A@1 initialised on CPU 1: no bounce against the old object's CPU 0
    trace = ("T1 acquire A@1 ts=1 cpu=0\nT1 acquired A@1 ts=1 cpu=0\nT1 release A@1 ts=2 cpu=0\nT1 free A@1 ts=3 cpu=0\n"
             "T2 acquire A@1 ts=4 cpu=1\nT2 acquired A@1 ts=4 cpu=1\nT2 release A@1 ts=5 cpu=1\n")
    assert stats(trace).classes["A"].bounces == [0, 0, 0, 0]
    assert stats(trace.replace("T1 free A@1 ts=3 cpu=0\n", "")).classes["A"].bounces == [1, 0, 0, 0]


def test_dump_and_trace_together_are_flagged(tmp_path: Path) -> None:
    trace = tmp_path / "s.lt"
    trace.write_text(TRACE)
    err = io.StringIO()
    assert main(["stat", str(DATA / "excerpt.txt"), str(trace)], stdout=io.StringIO(), stderr=err) == 0
    assert "set them side by side with --compare DUMP TRACE" in err.getvalue().replace("\n    ", " ")


@pytest.mark.parametrize("boot", ["clean", "clean-nohash"])
def test_real_dumps_render_back_byte_for_byte(boot: str) -> None:
    import lzma

    from testdata import CAPTURES

    path = CAPTURES / boot / "lock_stat.txt.xz"
    out = io.StringIO()
    assert main(["stat", str(path)], stdout=out, stderr=io.StringIO()) == 0
    assert out.getvalue() == lzma.open(path, "rt").read()
