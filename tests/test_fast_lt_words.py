"""The pure `.lt` loop reads what lockdep's rules say of an acquisition once per distinct text
(`fast_lt_words._scan_tail`): those verdicts must be the rules' of the run, mutated or not."""

from __future__ import annotations

import pytest

from lockcheck.engine import fast_lt_words as words
from lockcheck.lockdep import rules

NODES = {"A": {"usage": 0}, "A/1": {"usage": 0}}


def _info(text: str) -> tuple:
    info = words._scan_tail(text, NODES)
    assert info is not None and info[0] == words._ACQUIRE
    return info


@pytest.mark.parametrize("text, read, trylock", [("acquire A", 0, False), ("acquire A read try", 1, True),
                                                 ("acquire A@1 rread subclass=1", 2, False)])
def test_the_need_index_is_acquire_usage_s(text: str, read: int, trylock: bool) -> None:
    needs = [10, 20, 30, 40]
    assert _info(text)[-1] == needs.index(rules.acquire_usage(needs, read, trylock, True, False))


def test_a_mutated_acquire_usage_is_followed(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(rules, "acquire_usage", lambda needs, read, trylock, check, off: needs[3])
    assert _info("acquire A")[-1] == 3
    # a rule that does not just read one mask: the acquisition is not the fast path's
    monkeypatch.setattr(rules, "acquire_usage", lambda needs, read, trylock, check, off: needs[0] | needs[1])
    assert words._scan_tail("acquire A", NODES) is None


def test_the_rule_verdicts_are_the_run_s(monkeypatch: pytest.MonkeyPatch) -> None:
    assert _info("acquire A try")[12] is False  # validates_chain: a trylock is not validated
    monkeypatch.setattr(rules, "validates_chain", lambda trylock, check: bool(check))
    assert _info("acquire A try")[12] is True
    assert _info("acquire A nest=N")[13] and not _info("acquire A")[13]  # nest_lock_merges may merge
    # a rule that merges without a nest lock (at any depth, under any top class) is asked on every line
    monkeypatch.setattr(rules, "nest_lock_merges", lambda depth, top, cls, nest: depth > 3 and top != cls)
    assert _info("acquire A")[13]
