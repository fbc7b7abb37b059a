"""Numeric fields of every input are read by one helper (`lockcheck.util.numbers`): ASCII digits,
a length bound, a `FILE:LINE:COL` error.  Each case here was an internal error (issue 30):
`int()` refuses 4,300+ digits, `²` passes `str.isdigit()` and then fails `int()`, a time stamp
near 1e300 made `stat` overflow, and a closed standard input had no `.buffer`."""

from __future__ import annotations

import io
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockcheck.commands.cli import main
from lockcheck.errors import TraceError
from lockcheck.kernel.boot import ring_buffer_losses
from lockcheck.kernel.bootfiles import find_report, parse_kprobe_profile, parse_stats
from lockcheck.util import numbers

from testdata import CAPTURES

HUGE = "9" * 5000


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("text, ok", [("0", True), ("12345678901234567890", True), ("1" * 21, False),
                                      ("²", False), ("٣", False), ("", False), ("-1", False), (HUGE, False)])
def test_is_count(text, ok):
    assert numbers.is_count(text) is ok


@pytest.mark.parametrize("text, message", [(HUGE, "5000 digits"), ("²", "ASCII digits"), ("x1", "not a number")])
def test_count_error_names_the_position(text, message):
    with pytest.raises(TraceError) as err:
        numbers.count(text, "f", 3, 7, "hits")
    assert err.value.format().startswith("f:3:7: hits") and message in err.value.message


@pytest.mark.parametrize("text", ["1e300", HUGE + ".5", "1" * 400, "٣.5", "inf", "nan", ".5", "1.2.3"])
def test_seconds_refuses_what_is_no_finite_time(text):
    with pytest.raises(TraceError):
        numbers.seconds(text, "f", 1, 1)


@pytest.mark.parametrize("value, message", [(HUGE, "5000 digits"), ("²", "ASCII digits")])
def test_lockdep_stats(value, message):
    with pytest.raises(TraceError) as err:
        parse_stats([" chain lookup misses: 1", f" lock-classes:   {value} [max: 8192]"], "stats.txt")
    assert (err.value.file, err.value.line, err.value.col) == ("stats.txt", 2, 18) and message in err.value.message


@pytest.mark.parametrize("value", [HUGE, "²"])
def test_kprobe_profile_and_ring_buffer_stats(value):
    with pytest.raises(TraceError) as err:
        parse_kprobe_profile(["--- kprobe_profile", f"  lock_acquire_args   5   {value}"], "meta.txt")
    assert (err.value.line, err.value.col) == (2, 27)
    with pytest.raises(TraceError) as err:
        ring_buffer_losses(["--- per_cpu/cpu1/stats", "entries: 5", f"overrun: {value}"], "meta.txt")
    assert (err.value.line, err.value.col) == (3, 10)


def test_dmesg_stamp_and_pid():
    banner = "WARNING: possible recursive locking detected"
    with pytest.raises(TraceError) as err:
        find_report([f"[{HUGE}.5] {banner}"], "dmesg.txt")
    assert (err.value.line, err.value.col) == (1, 2)
    with pytest.raises(TraceError) as err:
        find_report([f"[ 1.5] {banner}", f"[ 1.5] demo/{HUGE} is trying to acquire lock:"], "dmesg.txt")
    assert err.value.line == 2 and "pid" in err.value.message
    # a Unicode digit is no digit of a pid: the line names no task, as any other text
    report = find_report([f"[ 1.5] {banner}", "[ 1.5] demo/²² is trying to acquire lock:"], "dmesg.txt")
    assert report is not None and report.pid is None


@pytest.mark.parametrize("value", [HUGE, "²"])
def test_boot_directory_with_a_bad_stats_number(tmp_path, value):
    boot = tmp_path / "boot"
    boot.mkdir()
    for item in (CAPTURES / "clean").iterdir():
        (boot / item.name).write_bytes(item.read_bytes())
    stats = (boot / "lockdep_stats.txt").read_text().splitlines()
    stats[0] = stats[0].split(":")[0] + ":  " + value
    (boot / "lockdep_stats.txt").write_text("\n".join(stats) + "\n")
    status, _, err = run("check", "--no-config", "--no-progress", str(boot))
    assert status == 2 and "internal error" not in err, err
    assert f"{boot / 'lockdep_stats.txt'}:1:" in err


@pytest.mark.parametrize("stamps", [("1e300", "1.7e308"), ("-1e308", "1e308"), ("0", "9.3e9")])
def test_stat_with_time_stamps_out_of_range(tmp_path, stamps):
    path = tmp_path / "t.lt"
    path.write_text(f"T1 acquire A ts={stamps[0]}\nT1 release A ts={stamps[1]}\n")
    status, _, err = run("stat", "--no-progress", str(path))
    assert status == 2 and "internal error" not in err and "OverflowError" not in err, err
    assert f"{path}:" in err and "out of range" in err


def test_stat_at_the_edge_of_the_range(tmp_path):
    path = tmp_path / "t.lt"
    path.write_text("T1 acquire A ts=0\nT1 release A ts=9.2e9\n")
    status, out, err = run("stat", "--no-progress", str(path))
    assert status == 0, err


@pytest.mark.parametrize("command", ["check", "stat"])
def test_closed_standard_input(command):
    proc = subprocess.run([sys.executable, "-m", "lockcheck", command, "-"],
                          stdin=subprocess.DEVNULL, capture_output=True, text=True,
                          preexec_fn=lambda: os.close(0), cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 2, proc.stderr
    assert "<stdin>: standard input is closed" in proc.stderr and "internal error" not in proc.stderr
