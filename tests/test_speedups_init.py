"""LineFilter's constructor: its arguments are positional (fast_lt passes them so)."""

from __future__ import annotations

import pytest

speedups = pytest.importorskip("lockcheck.engine._speedups")


def test_a_keyword_argument_is_refused_not_dropped() -> None:
    """tp_init took `kwds` and never read it: a keyword (a name misspelt, an argument moved) was
    dropped without a word and the filter ran without it."""
    with pytest.raises(TypeError, match="keyword"):
        speedups.LineFilter(iter(()), {}, {}, set(), 0, 48, -1, (0, 0, 0, (0,) * 128), classes={})
