"""The compiled capture filter's copy of the chain keys it found in the chain cache
(lockcheck/engine/_capturecore_known.h) against the Python loop.

The filter answers "is this chain cached" from its own table of the keys it found in the checker's
`ChainCache`, which is true only while the set loses no key.  Here the Python side clears the set
while the filter waits on a line it handed over; the chains the filter had found must then be
validated again, as the Python loop alone does (a stale copy would count them as cache hits).
"""

from __future__ import annotations

from unittest import mock

import pytest

from lockcheck.engine import capture_filter, fast_capture as capturepath
from test_capturepath import _filter, _filters_made, _outcome

pytestmark = pytest.mark.skipif(not capture_filter.compiled(), reason="the compiled filter is not built")

BASH = "           bash-12 [000]"
PAIRS = [f"{BASH} ...1.  5.{i}: lock_{op}: 00000000a1 &p->pi_lock" for i, op in ((1, "acquire"), (2, "release"))]
PAIRS += [f"{BASH} d..2.  5.{i}: lock_{op}: 00000000b2 &rq->__lock" for i, op in ((3, "acquire"), (4, "release"))]
MARK = "# tracer: nop"  # (a line the filter hands the Python loop, which passes it on)


def _clearing(misses):
    """`fast_capture._ftrace_misses`, with the checker's chain cache cleared when the mark passes."""

    def wrapped(checker, *args, **kwargs):
        for item in misses(checker, *args, **kwargs):
            if item[1] == MARK:
                assert checker.chain_cache
                checker.chain_cache.clear()
            yield item

    return wrapped


@pytest.mark.parametrize("with_state", [False, True])
def test_a_chain_cache_cleared_by_python_is_asked_again(with_state) -> None:
    lines = PAIRS * 3 + [MARK] + PAIRS * 3
    with mock.patch.object(capturepath, "_ftrace_misses", _clearing(capturepath._ftrace_misses)):
        with _filter(False):
            loop = _outcome(lines, True, with_state)
        made: list = []
        with _filters_made(made):
            assert _outcome(lines, True, with_state) == loop
    assert made and made[0].counts()["taken"] >= 8  # (the filter took the pairs after the mark itself)
    with _filter(False):
        kept = _outcome(lines, True, with_state)
    assert loop["stats"].chain_hits < kept["stats"].chain_hits  # (the chains were validated again)
