"""A class held twice in a capture (lockcheck/engine/_capturecore_take.h `decide`, fast_stages
`_Annotated.decide`) against the plain path.

A trylock of a class the task holds already (`try &dentry->d_lock` under another d_lock) is, under a
trusted kernel state, what any trylock is: the annotator's `_resolve` leaves a trylock as it came and
lockdep validates no trylock's chain.  So the filter takes it.  A plain re-acquisition of the class
is the annotator's to resolve: the filter takes it when the state gives it a subclass whose chain the
kernel has (`&dentry->d_lock/1` under `&dentry->d_lock`), as `_resolve` reads it first; any other
reading (no subclass explains it: a nest_lock, a revision...) and, without the state, its doubts are
the annotator's: those go to Python.
"""

from __future__ import annotations

import pytest

from lockcheck.engine import capture_filter
from test_capturepath import filter_counts

pytestmark = pytest.mark.skipif(not capture_filter.compiled(), reason="the compiled filter is not built")

BASH = "           bash-12 [000] ...1."
D1 = "00000000a1 &dentry->d_lock"
D2 = "00000000a2 &dentry->d_lock"


def _nested(second: str, first: str = D1, tail: tuple = ()) -> list[str]:
    """FIRST taken, then SECOND (the same class at another address), both released (three times:
    the chains cached after the first), then TAIL."""
    return [line for i in range(3) for line in (
        f"{BASH}  5.{i}1: lock_acquire: {first}", f"{BASH}  5.{i}2: lock_acquire: {second}",
        f"{BASH}  5.{i}3: lock_release: {second.split()[0]} ", f"{BASH}  5.{i}4: lock_release: {first}")] + list(tail)


PI1, PI2 = "00000000b1 &p->pi_lock", "00000000b2 &p->pi_lock"
CASES = {
    "trylock": _nested("00000000a2 try &dentry->d_lock"),
    "plain": _nested(D2),  # (subclass 1: the kernel has [d_lock, d_lock/1])
    # (held at the end: the HeldLock, its event read back, the annotator's "CLASS/1" entry compared)
    "plain-held-at-end": _nested(D2, tail=(f"{BASH}  6.1: lock_acquire: {D1}", f"{BASH}  6.2: lock_acquire: {D2}")),
    # (a third one: no chain has [d_lock, d_lock/1, d_lock/1]; the Python loop's)
    "three": _nested(D2, tail=(f"{BASH}  6.1: lock_acquire: {D1}", f"{BASH}  6.2: lock_acquire: {D2}",
                               f"{BASH}  6.3: lock_acquire: 00000000a3 &dentry->d_lock")),
    "no-subclass": _nested(PI2, PI1),  # (the state lists no &p->pi_lock/N: the annotator's other readings)
}


@pytest.mark.parametrize("with_state", [False, True])
@pytest.mark.parametrize("name", sorted(CASES))
def test_a_class_held_twice_checks_as_the_plain_path(name, with_state) -> None:
    filter_counts(CASES[name], with_state)


@pytest.mark.parametrize("name", ["trylock", "plain"])
def test_a_class_held_twice_is_taken_under_the_state(name) -> None:
    loop, counts = filter_counts(CASES[name], True)
    # (the first round goes to Python -- nothing cached yet -- the later two's acquisitions the filter takes)
    assert counts["acquisitions"] >= 4
    if name == "plain":
        assert loop["annotator"][3][("subclass", "&dentry->d_lock", "1")] == 3  # (changes: one a round)


@pytest.mark.parametrize("name, with_state", [("no-subclass", True), ("trylock", False), ("plain", False)])
def test_what_the_annotator_resolves_goes_to_python(name, with_state) -> None:
    _, counts = filter_counts(CASES[name], with_state)
    assert counts["acquisitions"] <= 2  # (the outer d_lock, the later rounds' only)


def test_the_python_loop_decides_a_trylock_of_a_held_class_alike() -> None:
    """fast_stages' `decide` (the Python loop's, and the filter's model) passes the trylock on under the
    state, and not the plain re-acquisition nor, without the state, the trylock."""
    from lockcheck.kernel.per_boot import AnnotationOptions
    from lockcheck.readers import ftrace
    from test_capturepath import _annotated_view, _state, capturepath

    for state, trylock, passes in ((_state(), True, True), (_state(), False, False), (None, True, False)):
        annotator = AnnotationOptions().annotator(state)
        annotator.open_trace(ftrace)
        annotator._ruled["&dentry->d_lock"] = False
        ann = capturepath._Annotated(annotator)
        view = _annotated_view(annotator, ["&dentry->d_lock"])
        verdict = ann.decide(view, "t", "&dentry->d_lock", 0, trylock, True, "x")
        assert (verdict is not None) == passes, (state is not None, trylock)


def test_the_filter_asks_the_index_which_subclass_explains_a_class_held_twice(monkeypatch) -> None:
    """The reading "the first subclass whose chain the kernel has" lives in
    `StateIndex.subclass_explaining` alone: changed there, the filter (which only keeps its answers)
    and the annotator change alike."""
    from lockcheck.kernel.annotations import StateIndex

    asked = []

    def none_explains(self, stack, lock):
        asked.append((stack, lock))
        return None

    monkeypatch.setattr(StateIndex, "subclass_explaining", none_explains)
    loop, counts = filter_counts(CASES["plain"], True)
    assert ((("&dentry->d_lock",), "&dentry->d_lock")) in asked
    assert counts["acquisitions"] <= 2  # (no subclass: the annotator's other readings, Python's)
    assert not loop["annotator"][3][("subclass", "&dentry->d_lock", "1")]
