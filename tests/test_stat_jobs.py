"""`lockcheck stat --jobs N`: the inputs read in N processes give the table of `--jobs 1`.

A file's lock_stat table depends on that file only (a run's tasks and lock
objects end with it, `stat.collect`), so `stat` reads files in parallel and
adds their tables in input order.  These tests hold the two to the same
stdout and stderr on every input the suite has, one at a time and all at
once, in text and JSON, with `--compare`, and to the same first error when
an input is bad.
"""

from __future__ import annotations

import io
import os
from pathlib import Path

import pytest

from lockcheck.util import pool
from lockcheck.commands.cli import main
from lockcheck.errors import TraceError
from test_jobs import _suite_inputs
from testdata import ROOT


def _stat(args: list[str]) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["stat", *args], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def _same(args: list[str]) -> tuple[int, str, str]:
    one = _stat(["--jobs", "1", *args])
    two = _stat(["--jobs", "2", *args])
    assert two == one
    return one


@pytest.mark.slow
def test_every_suite_input_alone_and_all_together() -> None:
    every = [str(p) for p in _suite_inputs()]
    # what stat reads alone without an error (a /proc/lockdep_stats dump named alone is no trace for it)
    paths = [path for path in every if _stat([path])[0] == 0]
    assert len(paths) > 40
    status, out, err = _same(["--format", "json", *paths])
    assert status == 0 and '"acquisitions"' in out and "lockcheck: note:" in err


def test_a_folder_and_a_comparison_split(tmp_path: Path) -> None:
    contention = ROOT / "traces" / "contention"
    status, out, _ = _same(["--sort", "acquisitions", str(contention)])
    assert status == 0 and out
    status, out, _ = _same(["--compare", str(contention / "before"), str(contention / "after")])
    assert status == 0 and "%change" in out
    base, new = sorted(str(p) for p in (contention / "before").iterdir())[:2]
    status, out, _ = _same(["--compare", f"{base},{new}", f"{new},{base}"])
    assert status == 0 and "%change" in out


def test_the_first_bad_input_in_order_is_the_error(tmp_path: Path) -> None:
    good = sorted(str(p) for p in (ROOT / "tests" / "data" / "examples").glob("*.lt") if p.name != "malformed.lt")
    bad_early = tmp_path / "a.lt"
    bad_early.write_text("#lockcheck-trace v1\nt1 acquire A\nt1 bogus B\n")
    bad_late = tmp_path / "b.lt"
    bad_late.write_text("#lockcheck-trace v1\nt1 frobnicate\n")
    status, out, err = _same([*good[:3], str(bad_early), *good[3:6], str(bad_late)])
    assert status == 2 and out == ""
    assert err.startswith(f"{bad_early}:3:") and str(bad_late) not in err
    malformed = str(ROOT / "tests" / "data" / "examples" / "malformed.lt")
    status, _, err = _same([*good, malformed, str(bad_late)])
    assert status == 2 and err.startswith(f"{malformed}:3:4:")


def _fails(item: int) -> int:
    if item == 2:
        raise TraceError("f.lt", 4, 2, "no good", "t1 x")
    if item == 3:
        raise KeyError("three")
    return item * 10


def _unpicklable(item: int) -> int:
    class Local(Exception):
        pass

    raise Local(f"item {item}")


def test_ordered_map_keeps_order_and_errors() -> None:
    assert list(pool.ordered_map(_fails, [0, 1], 2)) == [0, 10]
    results = pool.ordered_map(_fails, [0, 1, 2, 3], 2)
    assert [next(results), next(results)] == [0, 10]
    with pytest.raises(TraceError) as info:
        next(results)
    assert (info.value.file, info.value.line, info.value.col, info.value.message, info.value.source) == \
        ("f.lt", 4, 2, "no good", "t1 x")
    with pytest.raises(KeyError):
        list(pool.ordered_map(_fails, [3, 0], 2))
    with pytest.raises(RuntimeError, match="Local: item 5"):
        list(pool.ordered_map(_unpicklable, [5, 6], 2))


def test_workers_are_really_other_processes() -> None:
    pids = set(pool.ordered_map(_pid, list(range(8)), 2))
    assert os.getpid() not in pids and len(pids) >= 1
    assert set(pool.ordered_map(_pid, [1], 2)) == {os.getpid()}  # one input: no pool
    assert pool.usable(1, 10) == 0 and pool.usable(4, 3) == 3


def _pid(_: int) -> int:
    return os.getpid()


def test_standard_input_is_read_in_this_process(monkeypatch) -> None:
    text = (ROOT / "traces" / "abba.lt").read_text()
    monkeypatch.setattr("sys.stdin", io.TextIOWrapper(io.BytesIO(text.encode())))
    status, out, _ = _stat(["--jobs", "2", "-", str(ROOT / "traces" / "abba.lt")])
    assert status == 0 and "class name" in out
