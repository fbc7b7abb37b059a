"""/proc/lockdep and /proc/lockdep_chains: small texts and the real 6.1 dumps."""

from __future__ import annotations

import os
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockcheck.kernel import proc_lines, state as kstate
from lockcheck.errors import TraceError

from testdata import CAPTURES

LOCKDEP = """\
all lock classes:
000000007c9bff94 FD:    1 BD:   38 ....: (console_sem).lock

00000000bd959855 OPS:      12 FD:   21 BD:    9 +.+.: console_lock
 -> [000000004def5fcd] resource_lock
 -> [0000000016e3b623] &mm->page_table_lock/1

00000000189e1713 FD:    3 BD:    1 +.+.: subsys mutex#2
""".splitlines()

CHAINS = """\
all lock chains:
irq_context: 0
[000000007bf71908] cpu_hotplug_lock
[00000000a087c16d] static_call_mutex

irq_context: hardirq|softirq
[000000007c9bff94] (console_sem).lock
irq_context: 1
[00000000189e1713] subsys mutex#2
""".splitlines()


def test_lockdep_classes_and_edges():
    items = list(kstate.parse_lockdep(LOCKDEP, "lockdep"))
    classes = [i for i in items if isinstance(i, kstate.LockClass)]
    edges = [i for i in items if isinstance(i, kstate.Dependency)]
    assert [(c.key, c.name, c.forward, c.backward, c.usage, c.ops, c.line) for c in classes] == [
        ("000000007c9bff94", "(console_sem).lock", 1, 38, "....", None, 2),
        ("00000000bd959855", "console_lock", 21, 9, "+.+.", 12, 4),
        ("00000000189e1713", "subsys mutex#2", 3, 1, "+.+.", None, 8),
    ]
    assert classes[2].base == "subsys mutex" and classes[2].version == 2
    assert [(e.before_name, e.after_name, e.after_key) for e in edges] == [
        ("console_lock", "resource_lock", "000000004def5fcd"),
        ("console_lock", "&mm->page_table_lock/1", "0000000016e3b623"),
    ]


def test_chains():
    chains = list(kstate.parse_chains(CHAINS, "chains"))
    assert [(c.irq_context, c.names, c.line) for c in chains] == [
        (0, ("cpu_hotplug_lock", "static_call_mutex"), 2),
        (kstate.HARDIRQ_CHAIN | kstate.SOFTIRQ_CHAIN, ("(console_sem).lock",), 6),
        (kstate.SOFTIRQ_CHAIN, ("subsys mutex#2",), 8),
    ]


@pytest.mark.parametrize(("name", "split"), [
    ("&rq->__lock/1", ("&rq->__lock", 1, 1)), ("&type->s_umount_key#10/1", ("&type->s_umount_key", 10, 1)),
    ("(work_completion)(&(&x->work)->work)", ("(work_completion)(&(&x->work)->work)", 1, 0)),
    ("a/b", ("a/b", 1, 0)), ("#3", ("#3", 1, 0)),
])
def test_split_class_name(name, split):
    assert kstate.split_class_name(name) == split


def test_errors():
    with pytest.raises(TraceError) as info:
        list(kstate.parse_lockdep(["all lock classes:", "00ab FD: x BD: 1 ....: A"], "f"))
    assert (info.value.line, info.value.col) == (2, 10)
    with pytest.raises(TraceError):
        list(kstate.parse_lockdep(CHAINS, "f"))
    with pytest.raises(TraceError):
        list(kstate.parse_chains(LOCKDEP, "f"))


def test_load_files_and_sniffing(tmp_path):
    import gzip

    (tmp_path / "lockdep.txt.gz").write_bytes(gzip.compress("\n".join(LOCKDEP).encode()))
    (tmp_path / "lockdep_chains.txt").write_text("\n".join(CHAINS) + "\n")
    (tmp_path / "lockdep_stats.txt").write_text(" lock-classes:  3 [max: 8192]\n debug_locks:   1\n")
    state = kstate.load(str(tmp_path))
    assert (len(state.classes), len(state.edges), len(state.chains), len(state.files)) == (3, 2, 3, 2)
    assert (state.debug_locks, state.stats_file) == (1, str(tmp_path / "lockdep_stats.txt"))
    assert kstate.load(str(tmp_path / "lockdep_stats.txt")).stats == {"lock-classes": 3, "debug_locks": 1}
    (tmp_path / "other.txt").write_text("something else\n")
    with pytest.raises(TraceError):
        kstate.load(str(tmp_path / "other.txt"))


@pytest.mark.parametrize(("boot", "classes", "edges", "chains"), [
    ("clean", 392, 947, 1831), ("clean-nohash", 389, 930, 1817),
])
def test_real_dumps(boot, classes, edges, chains):
    state = kstate.load(str(CAPTURES / boot))
    assert (len(state.classes), len(state.edges), len(state.chains)) == (classes, edges, chains)
    names = state.class_names()
    assert "&rq->__lock" in names and "&pool->lock/1" in names
    assert all(e.before_name in names for e in state.edges)
    assert sum(1 for c in state.chains if c.irq_context) > 50


# -- the common lines read without the grammar (`proc_lines.scan`) -------------------------

_PIECES = ["000000007c9bff94", "00000000bd959855", "DEADbeef", "0x1f", "g1", "", " ", "  ", "FD:", "BD:", "OPS:",
           "1", "38", "123456789", "1234567890", "+.+.", "....", "-.-?", "+", "*", ":", ": ", "->", " -> ", "[", "]",
           "irq_context:", "irq_context: ", "0", "hardirq", "softirq", "hardirq|softirq", "hardirq|", "|softirq",
           "console_lock", "&(&zone->lock)->rlock", "subsys mutex#2", "rcu_read_lock/1", "\u00e9t\u00e9", "\t", "\r",
           "all lock classes:", "all lock chains:"]


@st.composite
def _proc_lines(draw) -> str:
    """Lines of the four common shapes, with any piece now and then swapped for another (near misses)."""
    key, name = draw(st.sampled_from(_PIECES[:6])), draw(st.sampled_from(_PIECES[35:41]))
    number = st.sampled_from(["1", "38", "123456789", "1234567890", "01"])
    gap = st.sampled_from([" ", "  ", "    "])
    shape = draw(st.sampled_from(["class", "class-ops", "edge", "context", "entry"]))
    if shape.startswith("class"):
        parts = [key]
        if shape == "class-ops":
            parts += [draw(gap), "OPS:", draw(st.sampled_from(["", " ", "   "])), draw(number)]
        parts += [draw(gap), "FD:", draw(st.sampled_from(["", " ", "   "])), draw(number), draw(gap), "BD:",
                  draw(st.sampled_from(["", " ", "   "])), draw(number), draw(gap),
                  draw(st.sampled_from(["+.+.", "....", "-.-?", "+", "...."])), ":", draw(gap), name]
    elif shape == "edge":
        parts = [draw(gap), "->", draw(gap), "[", key, "]", draw(gap), name]
    elif shape == "context":
        parts = ["irq_context:", draw(gap), draw(st.sampled_from(["0", "3", "hardirq", "softirq", "hardirq|softirq",
                                                                   "1234567890", "hardirq|"]))]
    else:
        parts = ["[", key, "]", draw(gap), name]
    for _ in range(draw(st.integers(0, 2))):
        parts[draw(st.integers(0, len(parts) - 1))] = draw(st.sampled_from(_PIECES))
    return "".join(parts).rstrip()


def _by_grammar(line: str):
    try:
        return kstate.parse_with_grammar(line, "f", 1)
    except TraceError as err:
        return err


@settings(max_examples=int(os.environ.get("LOCKCHECK_EXAMPLES", "300")), deadline=None)
@given(_proc_lines())
def test_common_lines_are_read_as_the_grammar_reads_them(line: str) -> None:
    fast = proc_lines.scan(line)
    if fast is not None:
        assert fast == _by_grammar(line)


def test_the_common_shapes_are_read_without_the_grammar() -> None:
    """Each shape the real dumps are made of is the scanner's, so the grammar reads only the rest."""
    for line in ["000000007c9bff94 FD:    1 BD:   38 ....: (console_sem).lock",
                 "000000007c9bff94 OPS:   12 FD:    1 BD:   38 +.+.: subsys mutex#2",
                 " -> [000000004def5fcd] resource_lock", "irq_context: hardirq|softirq", "irq_context: 0",
                 "[000000007bf71908] cpu_hotplug_lock", "all lock classes:", "all lock chains:"]:
        assert proc_lines.scan(line) == _by_grammar(line)
    for line in ["all lock classes: ", "all lock chains", "000000007c9bff94 FD: 1234567890 BD: 1 ....: x",
                 "irq_context: 1234567890", "[zz] x"]:
        assert proc_lines.scan(line) is None


@pytest.mark.parametrize("name", ["lockdep.txt.xz", "lockdep_chains.txt.xz"])
def test_a_real_dump_reads_the_same_without_the_scanner(name, monkeypatch) -> None:
    path = str(Path(__file__).parent / "data" / "kernel-6.1" / "clean" / name)
    fast = kstate.load(path)
    monkeypatch.setattr(proc_lines, "scan", lambda line: None)
    plain = kstate.load(path)
    assert (fast.classes, fast.edges, fast.chains) == (plain.classes, plain.edges, plain.chains)
    assert fast.classes or fast.chains
