"""The compiled capture filter's reading of a time stamp at an irq-context change
(lockcheck/engine/_capturecore_irq.h `stamp_float`) against the Python loop and the plain path.

The filter reads the stamp of a line whose flags column changes the task's irq context itself (the
irq-state change it records cites it): an integer of its digits divided by a power of ten where both
are exact doubles, else float().  Each stamp here is read either way (many digits, few, none after the
point, more than the fast way takes), and the recorded irq events must cite what float() reads.
"""

from __future__ import annotations

import pytest

from lockcheck.engine import capture_filter
from test_capturepath import filter_counts

pytestmark = pytest.mark.skipif(not capture_filter.compiled(), reason="the compiled filter is not built")

STAMPS = ["5.834099", "7", "0.000001", "123456.123456789", "99999999999.9999", "1234567890123456.5",
          "0000012.5000000000", "0.1", "0.30000000000000004", "8.000000000000000000001"]


def _capture(stamp: str) -> list[str]:
    """A task moving into and out of hardirq context, its lines the filter takes after the first round,
    the last change at `stamp`."""
    lines = []
    for i in range(3):
        at = f"5.{i}" if i < 2 else stamp
        lines += [f"           bash-12 [000] ...1.  {at}: lock_acquire: 00000000a1 &p->pi_lock",
                  f"           bash-12 [000] ...1.  {at}: lock_release: 00000000a1 &p->pi_lock",
                  f"           bash-12 [000] d.h1.  {at}: lock_acquire: 00000000b2 &rq->__lock",
                  f"           bash-12 [000] d.h1.  {at}: lock_release: 00000000b2 &rq->__lock"]
    return lines


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("stamp", STAMPS)
def test_an_irq_change_cites_the_stamp_float_reads(stamp, with_state) -> None:
    loop, counts = filter_counts(_capture(stamp), with_state)
    assert counts["context_events"]  # (the filter applied irq-context changes itself)
