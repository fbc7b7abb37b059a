"""The `.lt` core's limits on a stamp (`ts=` characters, `cpu=` digits) are the reader's, read from
Python when the core is imported (_grammar_limits.h), not numbers of its own.

In a child whose limits are lowered before the core is imported, a repeated chain's late line with
a stamp past them -- a line the core would apply itself -- must fail as the pure reader fails it.
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
events.MAX_CPU_DIGITS = 1
import lockcheck.readers.lt as lt
lt.MAX_SECONDS_CHARS = 4
from lockcheck.commands.cli import main
sys.exit(main(["check", "--format", "json", "--no-config", "--input-format", "lt", sys.argv[1]]))
"""


def run(path: str, pure: bool) -> tuple:
    env = dict(os.environ, LOCKCHECK_PURE="1" if pure else "0", LOCKCHECK_JOBS="1")
    done = subprocess.run([sys.executable, "-c", CHILD, path], capture_output=True, text=True, env=env, timeout=120)
    return done.returncode, done.stdout, done.stderr


@pytest.mark.parametrize("stamp, column", [("ts=10.25", "ts"), ("ts=1.5 cpu=12", "cpu")])
def test_a_stamp_past_the_lowered_limits_fails_alike(tmp_path, stamp, column) -> None:
    rounds = ["T1 acquire A ts=1.5 cpu=3", "T1 acquire B ts=2.5", "T1 release B", "T1 release A"] * 20
    rounds[-3] = f"T1 acquire B {stamp}"  # (a chain the core has cached by then)
    path = tmp_path / "t.lt"
    path.write_text("\n".join(["#lockcheck-trace v1"] + rounds) + "\n")
    compiled, pure = run(str(path), False), run(str(path), True)
    assert compiled == pure
    assert compiled[0] == 2 and f":{len(rounds) - 2 + 1}:" in compiled[2], compiled
