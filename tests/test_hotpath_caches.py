"""The fast path's shortcuts in reading a line, each against the reading it stands for.

`_stamp` judges `ts=` without building the float and keeps `cpu=` words
read: it must give exactly what `lt._seconds` / `lt._cpu` give, on
generated words that include the odd ones (signs, exponents, junk).
The whole-trace equality of the fast path and the plain one is
tests/test_hotpath.py's.

The fast path turns the cyclic garbage collector off while it reads: that
is only sound while a check makes no reference cycle per line, which the
last tests hold it to.
"""

from __future__ import annotations

import gc
import importlib.util
import io
import sys
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockcheck.engine import fast_lt as hotpath
from lockcheck.lockdep.checker import Checker
from lockcheck.readers import lt

ROOT = Path(__file__).resolve().parent.parent

_stamp_text = st.one_of(
    st.sampled_from(["1.5", "12", "0.000001", ".5", "5.", ".", "", "1e3", "-1", "+2", "nan", "inf", "1_0", "٣",
                     "1" * 65, "1.2.3", "0x10"]),
    st.text(alphabet="0123456789.e+-_ ", max_size=8),
)
_cpu_word = st.sampled_from(["", "cpu=0", "cpu=15", "cpu=-1", "cpu=", "cpu=1234567890", "cpu=٣", "cpux=1", "cpu=3 x"])


def _stamp_by_definition(stamp: str, info: tuple) -> tuple:
    """What `_stamp` stands for: the options after ` ts=`, read by `lt`'s own value readers."""
    text, blank, cpu_word = stamp.partition(" ")
    if lt._seconds(text) is None or info[1] & (hotpath._TS | hotpath._CPU):
        return False, None
    if not blank:
        return True, info[2]
    if not cpu_word.startswith("cpu="):
        return False, None
    cpu = lt._cpu(cpu_word[4:])
    return cpu is not None, cpu


@settings(max_examples=200, deadline=None)
@given(_stamp_text, _cpu_word, st.sampled_from([0, hotpath._TS, hotpath._CPU, hotpath._AT]),
       st.sampled_from([None, 4]))
def test_stamp_reads_as_the_value_readers(text: str, cpu_word: str, seen: int, cpu: object) -> None:
    stamp = f"{text} {cpu_word}" if cpu_word else text
    info = (hotpath._ACQUIRE, seen, cpu)
    for _ in range(2):  # the second time from the cache of cpu words
        assert hotpath._stamp(stamp, info) == _stamp_by_definition(stamp, info)


def _generated(events: int) -> list[str]:
    """A clean generated trace (benchmarks/gen_trace.py, the benchmarks' own generator)."""
    spec = importlib.util.spec_from_file_location("gen_trace", ROOT / "benchmarks" / "gen_trace.py")
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault("gen_trace", module)
    spec.loader.exec_module(module)
    out = io.StringIO()
    module.generate(out, events, 3, 300, 200, 12, 2)  # with 2 inversions: findings too
    return out.getvalue().splitlines(keepends=True)


@pytest.mark.parametrize("pure", ["1", "0"])
def test_a_check_makes_no_cyclic_garbage(pure: str, monkeypatch: pytest.MonkeyPatch) -> None:
    """What the collector would find after a check, the checker still alive: nothing."""
    monkeypatch.setenv("LOCKCHECK_PURE", pure)
    lines = _generated(20000)
    gc.collect()
    was_enabled = gc.isenabled()
    gc.disable()
    try:
        checker = Checker()
        found = list(checker.run(hotpath.lt_events(checker, iter(lines), "gen.lt")))
        assert found and checker.stats.events > 19000
        assert gc.collect() == 0
    finally:
        if was_enabled:
            gc.enable()


def test_the_collector_is_off_while_reading_and_on_again_after() -> None:
    lines = _generated(2000)
    checker = Checker()
    assert gc.isenabled()
    events = hotpath.lt_events(checker, iter(lines), "gen.lt")
    first = next(events)
    assert first is not None and not gc.isenabled()
    events.close()  # the reading abandoned halfway
    assert gc.isenabled()
    checker = Checker()
    list(checker.run(hotpath.lt_events(checker, iter(lines), "gen.lt")))
    assert gc.isenabled() and checker.stats.events > 1900
