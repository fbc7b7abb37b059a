"""The chain cache (`lookup_chain_cache_add`'s hash of validated chains) as a set that counts its removals.

A compiled core (`lockcheck.engine._speedups`) keeps the chain keys it has
found in this set in a table of its own, a C array of the keys: a hit there
costs one probe, where a look-up of the set hashes an int and compares the
int object the set holds (two cache misses per acquisition, ~10% of a 10M
`.lt` run).  That copy stays true while the set only grows, which the core
cannot see for itself: a `clear` followed by as many `add`s leaves the set
looking the same.  So every operation that can remove a key bumps
`generation`, which the core reads whenever it gets control back from the
Python side, forgetting its copy when the number changed.
"""

from __future__ import annotations

from typing import Any, Iterable


class ChainCache(set):
    """A `set` of chain keys whose `generation` changes whenever a key may have left it."""

    def __init__(self, keys: Iterable[int] = ()) -> None:
        super().__init__(keys)
        #: bumped by every operation that may remove a key (the compiled core's copy is then stale)
        self.generation = 0

    def _removing(self) -> None:
        self.generation += 1

    def clear(self) -> None:
        self._removing()
        super().clear()

    def discard(self, key: Any) -> None:
        self._removing()
        super().discard(key)

    def remove(self, key: Any) -> None:
        self._removing()
        super().remove(key)

    def pop(self) -> Any:
        self._removing()
        return super().pop()

    def difference_update(self, *others: Iterable) -> None:
        self._removing()
        super().difference_update(*others)

    def intersection_update(self, *others: Iterable) -> None:
        self._removing()
        super().intersection_update(*others)

    def symmetric_difference_update(self, other: Iterable) -> None:
        self._removing()
        super().symmetric_difference_update(other)

    def __isub__(self, other: Any) -> "ChainCache":
        self._removing()
        return super().__isub__(other)

    def __iand__(self, other: Any) -> "ChainCache":
        self._removing()
        return super().__iand__(other)

    def __ixor__(self, other: Any) -> "ChainCache":
        self._removing()
        return super().__ixor__(other)
