"""The chain cache counts the operations that may remove a key: the compiled `.lt` core's copy of it
(`known` in lockcheck/engine/_speedups.c) is forgotten when that count changes."""

from __future__ import annotations

import pickle

import pytest

from lockcheck.lockdep.chain_cache import ChainCache
from lockcheck.lockdep.checker import Checker


@pytest.mark.parametrize("remove", [
    lambda c: c.clear(), lambda c: c.discard(1), lambda c: c.remove(1), lambda c: c.pop(),
    lambda c: c.difference_update({1}), lambda c: c.intersection_update({2}),
    lambda c: c.symmetric_difference_update({1}), lambda c: c.__isub__({1}), lambda c: c.__iand__({2}),
    lambda c: c.__ixor__({1}),
])
def test_every_removal_bumps_the_generation(remove) -> None:
    cache = ChainCache([1, 2])
    before = cache.generation
    remove(cache)
    assert cache.generation == before + 1


def test_adding_keeps_the_generation() -> None:
    cache = ChainCache()
    cache.add(3)
    cache.update({4, 5})
    cache |= {6}
    assert cache.generation == 0 and cache == {3, 4, 5, 6}


def test_the_checker_keeps_one_and_it_pickles() -> None:
    cache = Checker().chain_cache
    assert isinstance(cache, ChainCache)
    cache.update({7, 8})
    cache.clear()
    cache.add(9)
    copy = pickle.loads(pickle.dumps(cache))
    assert copy == {9} and copy.generation == 1 and isinstance(copy, ChainCache)
