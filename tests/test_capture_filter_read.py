"""The compiled capture filter's reading of a file's blocks (lockcheck/engine/_capturecore_read.h).

Past its first block, source.Lines hands the filter `(bytes, start, stop)` items it has not looked at
(`source.Checking`); the filter checks each itself and gives back one with a byte that is not ASCII or
a NUL before reading any of its lines, for the source to decode (or to name the bad line) as it does
for every reader.  Each capture here has such a line deep in the file: the check's findings, errors
and line numbers must be the Python loop's.
"""

from __future__ import annotations

import pytest

from lockcheck.engine import capture_filter
from test_capturepath import _filter, _filters_made, check_with_state, nested_round

pytestmark = pytest.mark.skipif(not capture_filter.compiled(), reason="the compiled filter is not built")


def _capture(odd_line: str, at: int) -> bytes:
    """A capture of ~300 kB (blocks of 64 kB) with `odd_line` in place of the line numbered `at`."""
    lines = []
    for i in range(3000):
        lines += nested_round(f"{5 + i / 1000:.6f}")
    lines[at - 1] = odd_line
    return ("\n".join(lines) + "\n").encode()


CASES = {
    # (a line with a NUL byte: an error, at its line and column)
    "nul": ("           bash-12 [000] ...1.  9.5: lock_acquire: 00000000a1 &p->pi\x00lock", 9001),
    # (a line that is not ASCII: decoded, its block read as str lines; the file goes on)
    "not-ascii": ("           bash-12 [000] ...1.  9.5: sched_switch: prev_comm=sshd \u00e9", 9001),
    # (one whose error names a column after a byte that is not ASCII: counted in characters)
    "not-ascii-error": ("          bash\u00e9-12 [000] ...1.  9.5: lock_acquire: zz &p->pi_lock", 9001),
    # (the same in the item that begins with the line the block before ended in)
    "nul-late": ("           bash-12 [000] ...1.  9.5: lock_acquire: 00000000a1 &p->pi\x00lock", 11999),
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_a_block_with_an_odd_byte_is_read_as_the_loop_reads_it(name, tmp_path, monkeypatch, capsys) -> None:
    path = tmp_path / "odd.ftrace"
    path.write_bytes(_capture(*CASES[name]))
    monkeypatch.setenv("LOCKCHECK_JOBS", "1")

    def check() -> tuple:
        return check_with_state(path, capsys)

    with _filter(False):
        loop = check()
    made: list = []
    with _filters_made(made):
        assert check() == loop
    # (the filter read the file's blocks itself: the lines it took are most of them)
    assert made and made[0].counts()["taken"] > 8900
    if name.startswith("nul") or name.endswith("error"):
        assert f":{CASES[name][1]}:" in loop[2]  # the bad line's error, numbered as in the file
