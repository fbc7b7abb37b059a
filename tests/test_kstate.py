"""/proc/lockdep and /proc/lockdep_chains: small texts and the real 6.1 dumps."""

from __future__ import annotations


import pytest

from lockcheck.kernel import state as kstate
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
