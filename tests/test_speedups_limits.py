"""The `.lt` core's limits on a stamp (`ts=` characters, `cpu=` digits) are the reader's, read from
Python when the core is imported (_grammar_limits.h), not numbers of its own.

In a child whose limits are changed before the core is imported, a repeated chain's late line with
a stamp past them -- a line the core applies itself at the usual limits -- must fail as the pure
reader fails it.
"""

from __future__ import annotations

import os
import subprocess
import sys

import pytest

from lockcheck.engine import fast_lt as hotpath

pytestmark = pytest.mark.skipif(not hotpath.compiled(), reason="the compiled core is not built here")

CHILD = """
import sys
import lockcheck.events as events
events.MAX_CPU_DIGITS = int(sys.argv[2])
import lockcheck.readers.lt as lt
lt.MAX_SECONDS_CHARS = int(sys.argv[3])
from lockcheck.commands.cli import main
sys.exit(main(["check", "--format", "json", "--no-config", "--input-format", "lt", sys.argv[1]]))
"""

CASES = {
    # (cpu digits, ts characters): the stamp on the late line
    "ts-past-lowered": ((1, 4), "ts=10.25"),
    "cpu-past-lowered": ((1, 4), "ts=1.5 cpu=12"),
    # a limit raised past what digits alone say is finite: 350 digits read as inf, refused
    "ts-inf-under-raised": ((9, 400), "ts=" + "1" * 350),
}


def rounds(stamp: str) -> list[str]:
    lines = ["T1 acquire A ts=1.5 cpu=3", "T1 acquire B ts=2.5", "T1 release B", "T1 release A"] * 20
    lines[-3] = f"T1 acquire B {stamp}"  # (a chain the core has cached by then)
    return lines


def run(path: str, limits: tuple, pure: bool) -> tuple:
    env = dict(os.environ, LOCKCHECK_PURE="1" if pure else "0", LOCKCHECK_JOBS="1")
    done = subprocess.run([sys.executable, "-c", CHILD, path, *map(str, limits)], capture_output=True, text=True,
                          env=env, timeout=120)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_stamp_past_the_limits_fails_alike(tmp_path, name) -> None:
    limits, stamp = CASES[name]
    lines = rounds(stamp)
    path = tmp_path / "t.lt"
    path.write_text("\n".join(["#lockcheck-trace v1"] + lines) + "\n")
    compiled, pure = run(str(path), limits, False), run(str(path), limits, True)
    assert compiled == pure
    assert compiled[0] == 2 and f":{len(lines) - 2 + 1}:" in compiled[2], compiled


@pytest.mark.parametrize("stamp", ["ts=10.25", "ts=1.5 cpu=12"])
def test_the_core_applies_that_line_itself_at_the_usual_limits(stamp, monkeypatch) -> None:
    # (else the cases above would hold with the core passing every stamped line on to Python)
    from tests.test_speedups_overlay import _passed_on
    lines = rounds(stamp)
    passed, _ = _passed_on(lines, True, monkeypatch)
    assert len(lines) - 2 not in passed, passed
