"""The text renderer against golden files and the examples' `text_in_order` fragments.

Findings are built by hand, as the checker would build them for the traces
of tests/data/examples; each rendering is compared whole with
tests/golden/NAME.txt.  `LOCKCHECK_UPDATE_GOLDEN=1` (re)writes the golden
files: review each one by eye against the kernel layouts of
the kernel's print_*_bug layout before accepting it.
"""

from __future__ import annotations

import io
import json
import os
from pathlib import Path
from typing import Callable, Optional

import pytest

from lockcheck.lockdep import findings as F
from lockcheck.lockdep.findings import ChainLink, Evidence, Finding, LockSnapshot
from lockcheck.report import RENDERERS, Summary
from lockcheck.report import text

GOLDEN = Path(__file__).parent / "golden"
from testdata import EXAMPLES
UPDATE = os.environ.get("LOCKCHECK_UPDATE_GOLDEN") == "1"


def render(findings: list[Finding], summary: Optional[Summary] = None) -> str:
    out = io.StringIO()
    text.render(findings, summary or Summary(events=8, tasks=2, classes=2, dependencies=2, version="0.1.0"), out)
    return out.getvalue()


def check_golden(name: str, rendered: str) -> None:
    path = GOLDEN / f"{name}.txt"
    if UPDATE:
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(rendered)
    assert path.exists(), f"no golden file {path}: run with LOCKCHECK_UPDATE_GOLDEN=1 and review it"
    assert rendered == path.read_text()


def ev(file: str, line: int, task: str, at: Optional[str] = None) -> Evidence:
    return Evidence(file, line, task, at)


def held(name: str, file: str, line: int, task: str, at: Optional[str] = None,
         instance: Optional[str] = None, usage: str = "+.+.", mode: int = 0) -> LockSnapshot:
    return LockSnapshot(name, instance, usage, at, mode, acquired=ev(file, line, task, at))


# -- hand-built findings, one per example ------------------------------------------


def mm_take_all_locks_rwlock() -> Finding:
    """examples/mm_take_all_locks-rwlock.lt: the second anon_vma rwlock, no nest annotation."""
    f, t = "mm_take_all_locks-rwlock.lt", "qemu-kvm/64239"
    first = held("&anon_vma->rwlock", f, 9, t, "mm_take_all_locks+0x146/0x190", "ffff8b9f79294a80")
    return Finding(
        kind=F.RECURSIVE, task=t, lock="&anon_vma->rwlock", held="&anon_vma->rwlock", location=f"{f}:10",
        next=LockSnapshot("&anon_vma->rwlock", "ffff8b9f79294100", "+.+.", "mm_take_all_locks+0x146/0x190"),
        prev=first,
        held_locks=[
            held("&mm->mmap_sem", f, 6, t, "do_mmu_notifier_register+0x13c/0x180", usage="++++"),
            held("mm_all_locks_mutex", f, 7, t, "mm_take_all_locks+0x3b/0x190"),
            held("&mapping->i_mmap_mutex", f, 8, t, "mm_take_all_locks+0xc6/0x190", "ffff8a01"),
            first,
        ],
        site="mm_take_all_locks+0x146/0x190",
    )


def abba() -> Finding:
    """examples/abba.lt: T1 took A then B; T2 holds B and takes A."""
    f = "abba.lt"
    return Finding(
        kind=F.CIRCULAR, task="T2", lock="A", held="B", cycle=["A", "B"], location=f"{f}:8",
        next=LockSnapshot("A", None, "+.+.", "g.c:21"),
        prev=held("B", f, 7, "T2", "g.c:20"),
        held_locks=[held("B", f, 7, "T2", "g.c:20")],
        chain=[
            ChainLink(1, "B", "+.+.", ev(f, 4, "T1", "f.c:11")),
            ChainLink(0, "A", "+.+.", ev(f, 8, "T2", "g.c:21")),
        ],
        site="g.c:21",
    )


def abcd_chain() -> Finding:
    """examples/abcd-chain.lt: A->B (T1), B->C (T2), C->D (T3), T4 holds D and takes A; no sites."""
    f = "abcd-chain.lt"
    return Finding(
        kind=F.CIRCULAR, task="T4", lock="A", held="D", cycle=["A", "B", "C", "D"], location=f"{f}:15",
        next=LockSnapshot("A", None, "+.+.", None),
        prev=held("D", f, 14, "T4"),
        held_locks=[held("D", f, 14, "T4")],
        chain=[
            ChainLink(3, "D", "+.+.", ev(f, 11, "T3")),
            ChainLink(2, "C", "+.+.", ev(f, 7, "T2")),
            ChainLink(1, "B", "+.+.", ev(f, 3, "T1")),
            ChainLink(0, "A", "+.+.", ev(f, 15, "T4")),
        ],
    )


def rread_circular() -> Finding:
    """T1 took tasklist_lock (write) under &p->alloc_lock; T2 holds tasklist_lock with read_lock() and takes &p->alloc_lock."""
    f = "rread-circular.lt"
    tasklist = held("tasklist_lock", f, 6, "T2", "do_wait+0x1b/0x250", "ffffffff82a06040", "..++", mode=2)
    return Finding(
        kind=F.CIRCULAR, task="T2", lock="&p->alloc_lock", held="tasklist_lock",
        cycle=["&p->alloc_lock", "tasklist_lock"], location=f"{f}:7",
        next=LockSnapshot("&p->alloc_lock", "ffff888003a1c8e8", "+.+.", "wait_task_zombie+0x80/0x2b0"),
        prev=tasklist,
        held_locks=[tasklist],
        chain=[
            ChainLink(1, "tasklist_lock", "..++", ev(f, 3, "T1", "exit_notify+0x3a/0x1f0")),
            ChainLink(0, "&p->alloc_lock", "+.+.", ev(f, 7, "T2", "wait_task_zombie+0x80/0x2b0")),
        ],
        site="wait_task_zombie+0x80/0x2b0",
    )


def unlock_imbalance() -> Finding:
    """examples/unlock-imbalance.lt: A released twice."""
    return Finding(
        kind=F.UNLOCK_IMBALANCE, task="T1", lock="A", location="unlock-imbalance.lt:3",
        next=LockSnapshot("A", None, "+.+.", "h.c:99"), site="h.c:99",
    )


def nest_not_held() -> Finding:
    """examples/nest-not-held.lt: nest=&mm->mmap_sem claimed but not held."""
    return Finding(
        kind=F.NEST_NOT_HELD, task="T1", lock="&anon_vma->rwsem", held="&mm->mmap_sem",
        location="nest-not-held.lt:2", next=LockSnapshot("&anon_vma->rwsem", "0x1", "+.+.", None),
    )


def held_at_exit(task_exit: bool = False) -> Finding:
    """examples/held-at-exit.lt: T1 exits holding A."""
    return Finding(
        kind=F.HELD_AT_EXIT, task="T1", lock="A", location="held-at-exit.lt:4",
        held_locks=[held("A", "held-at-exit.lt", 1, "T1")],
        details={"task_exit": True} if task_exit else {},
    )


def held_lock_freed() -> Finding:
    f = "freed.lt"
    obj = held("&obj->lock", f, 2, "T1", "obj_get+0x12/0x40", "ffff888012345678")
    return Finding(
        kind=F.HELD_FREED, task="T1", lock="&obj->lock", location=f"{f}:3", next=obj,
        held_locks=[held("&dev->mutex", f, 1, "T1", "dev_ioctl+0x20/0x90", "ffff888010000010"), obj],
        site="obj_free+0x8/0x30",
    )


def depth_exceeded() -> Finding:
    f = "deep.lt"
    locks = [held(f"lock{i}", f, i + 1, "T1", instance=f"{0x1000 + 8 * i:x}") for i in range(48)]
    return Finding(
        kind=F.MAX_DEPTH, task="T1", lock="lock47", location=f"{f}:48", next=locks[-1],
        held_locks=locks, details={"depth": 48, "max": 48},
    )


def inconsistent() -> Finding:
    """examples/irq-inconsistent.lt: A taken with hardirqs on, then in a hardirq handler."""
    f = "irq-inconsistent.lt"
    return Finding(
        kind=F.INCONSISTENT, task="T1", lock="A", location=f"{f}:6",
        next=LockSnapshot("A", None, "+.+.", None),
        details={
            "prev_bit": "HARDIRQ-ON-W",
            "new_bit": "IN-HARDIRQ-W",
            "irq_state": "[HC1[1]:SC0[0]:HE0:SE1]",
            "usage_traces": {"HARDIRQ-ON-W": ev(f, 3, "T1")},
            "irq_events": {
                "stamp": 4,
                "hardirqs_enabled": [1, ev(f, 3, "T1")],
                "hardirqs_disabled": [4, ev(f, 5, "T1")],
                "softirqs_enabled": None,
                "softirqs_disabled": None,
            },
        },
    )


def irq_inversion() -> Finding:
    """B was taken with hardirqs on under A (A -> B); now A is taken in a hardirq: A became hardirq-safe."""
    f = "irq-inversion.lt"
    return Finding(
        kind=F.IRQ_INVERSION, task="T1", lock="A", held="B", location=f"{f}:9",
        next=held("A", f, 9, "T1", "irq_handler+0x10/0x40", usage="-.+."),
        held_locks=[held("A", f, 9, "T1", "irq_handler+0x10/0x40", usage="-.+.")],
        site="irq_handler+0x10/0x40",
        details={
            "irq_report": "inversion",
            "irqclass": "HARDIRQ",
            "forwards": True,
            "other": LockSnapshot("B", None, "+.+.", None),
            "path": [
                ChainLink(1, "B", "+.+.", ev(f, 3, "T1", "f.c:11")),
                ChainLink(0, "A", "-.+.", ev(f, 9, "T1", "irq_handler+0x10/0x40")),
            ],
            "class_usage_traces": {
                "A": {"IN-HARDIRQ-W": ev(f, 9, "T1", "irq_handler+0x10/0x40"), "SOFTIRQ-ON-W": ev(f, 2, "T1", "f.c:10")},
                "B": {"HARDIRQ-ON-W": ev(f, 3, "T1", "f.c:11")},
            },
        },
    )


def bad_irq_dependency() -> Finding:
    """S is hardirq-safe and S -> A; B -> U and U is hardirq-unsafe; T1 holds A and takes B."""
    f = "bad-irq.lt"
    return Finding(
        kind=F.IRQ_INVERSION, task="T1", lock="B", held="A", location=f"{f}:20",
        next=LockSnapshot("B", "ffff888000000b00", "+.+.", "h.c:31"),
        prev=held("A", f, 19, "T1", "h.c:30", "ffff888000000a00", usage="-.-."),
        held_locks=[held("A", f, 19, "T1", "h.c:30", "ffff888000000a00", usage="-.-.")],
        site="h.c:31",
        details={
            "irq_report": "bad_dependency",
            "irqclass": "HARDIRQ",
            "irq_state": "[HC0[0]:SC0[0]:HE0:SE1]",
            "safe": LockSnapshot("S", None, "-...", None),
            "unsafe": LockSnapshot("U", None, "+.+.", None),
            "safe_bit": "IN-HARDIRQ-W",
            "unsafe_bit": "HARDIRQ-ON-W",
            "usage_traces": {"IN-HARDIRQ-W": ev(f, 4, "T9", "irq.c:5"), "HARDIRQ-ON-W": ev(f, 12, "T2", "u.c:7")},
            "safe_path": [
                ChainLink(1, "S", "-...", ev(f, 5, "T9", "irq.c:6")),
                ChainLink(0, "A", "-.-.", ev(f, 19, "T1", "h.c:30")),
            ],
            "unsafe_path": [
                ChainLink(1, "U", "+.+.", ev(f, 15, "T3", "b.c:9")),
                ChainLink(0, "B", "+.+.", ev(f, 20, "T1", "h.c:31")),
            ],
            "class_usage_traces": {
                "S": {"IN-HARDIRQ-W": ev(f, 4, "T9", "irq.c:5")},
                "U": {"HARDIRQ-ON-W": ev(f, 12, "T2", "u.c:7"), "SOFTIRQ-ON-W": ev(f, 12, "T2", "u.c:7")},
            },
        },
    )


def order_violation() -> Finding:
    f = "order.lt"
    return Finding(
        kind=F.ORDER_VIOLATION, task="T1", lock="&dev->mutex", held="&sb->s_umount", location=f"{f}:2",
        next=LockSnapshot("&dev->mutex", None, "+.+.", "dev.c:40"),
        prev=held("&sb->s_umount", f, 1, "T1", "super.c:12"),
        held_locks=[held("&sb->s_umount", f, 1, "T1", "super.c:12")],
        site="dev.c:40",
        details={"declared": ["&dev->mutex", "&sb->s_umount"], "declared_at": "lockorder.toml:3"},
    )


CASES: dict[str, Callable[[], Finding]] = {
    "recursive-mm_take_all_locks": mm_take_all_locks_rwlock,
    "circular-abba": abba,
    "circular-abcd-chain": abcd_chain,
    "circular-rread": rread_circular,
    "unlock-imbalance": unlock_imbalance,
    "nest-not-held": nest_not_held,
    "held-at-exit": held_at_exit,
    "held-at-task-exit": lambda: held_at_exit(task_exit=True),
    "held-lock-freed": held_lock_freed,
    "lock-depth-exceeded": depth_exceeded,
    "inconsistent-lock-state": inconsistent,
    "irq-inversion": irq_inversion,
    "bad-irq-dependency": bad_irq_dependency,
    "order-violation": order_violation,
}


@pytest.mark.parametrize("name", sorted(CASES))
def test_golden(name: str) -> None:
    finding = CASES[name]()
    summary = Summary(events=10, tasks=1, classes=4, dependencies=3, version="0.1.0")
    check_golden(name, render([finding], summary))


def test_golden_several_findings_with_notes() -> None:
    summary = Summary(events=24, tasks=5, classes=6, dependencies=5, version="0.1.0",
                      notes=["3 releases of locks never seen acquired"], suppressed=2)
    check_golden("several", render([abba(), unlock_imbalance(), abcd_chain()], summary))


def test_golden_uncertain() -> None:
    finding = abba()
    finding.uncertain = "T1 and T2 may be the same thread (ftrace pid reuse)"
    check_golden("uncertain", render([finding]))


# -- targeted checks of the kernel layouts ---------------------------------------------


def test_no_findings_is_one_summary_line() -> None:
    summary = Summary(events=1, tasks=1, classes=1, dependencies=0, version="0.1.0")
    assert render([], summary) == "lockcheck: no problems found in 1 event, 1 task, 1 lock class, 0 dependencies\n"


def test_summary_line_counts_kinds() -> None:
    out = render([abba(), mm_take_all_locks_rwlock()])
    assert out.endswith(
        "\nlockcheck: 2 findings (1 circular-dependency, 1 recursive-locking) "
        "in 8 events, 2 tasks, 2 lock classes, 2 dependencies\n"
    )


@pytest.mark.parametrize("name", sorted(CASES))
def test_rules_as_long_as_title(name: str) -> None:
    lines = render([CASES[name]()]).splitlines()
    for i, line in enumerate(lines):
        if line and set(line) == {"="}:
            assert len(lines[i + 1]) == len(line)
            assert lines[i + 3] == "-" * len(line)
            assert lines[i + 2].startswith("lockcheck 0.1.0  ")


def test_header_is_kernel_frame() -> None:
    lines = render([abba()]).splitlines()
    assert lines[:5] == [
        "",
        "=" * 54,
        "WARNING: possible circular locking dependency detected",
        "lockcheck 0.1.0  abba.lt",
        "-" * 54,
    ]


def test_lock_line_without_instance_has_old_leading_blank() -> None:
    out = render([abba()])
    assert "\n (A){+.+.}, at: g.c:21\n" in out
    assert "\n #0:  (B){+.+.}, at: g.c:20\n" in out


def test_lock_line_without_site_prints_trace_location() -> None:
    out = render([abcd_chain()])
    assert "T4 is trying to acquire lock:\n (A){+.+.}, at: abcd-chain.lt:15\n" in out
    assert "but task is already holding lock:\n (D){+.+.}, at: abcd-chain.lt:14\n" in out


def test_chain_entries_say_where_each_dependency_was_seen() -> None:
    out = render([abba()])
    assert "\n-> #1 (B){+.+.}:\n       abba.lt:4 (T1)\n       f.c:11\n" in out
    assert "\n-> #0 (A){+.+.}:\n       abba.lt:8 (T2)\n       g.c:21\n" in out


def test_two_cycle_has_no_chain_line_and_longer_cycles_do() -> None:
    assert "Chain exists of:" not in render([abba()])
    assert "Chain exists of:\n  A --> C --> D\n\n" in render([abcd_chain()])


def test_rread_holder_prints_rlock() -> None:
    out = render([rread_circular()])
    assert "  rlock(tasklist_lock);\n" in out
    assert f"{' ' * 31}lock(tasklist_lock);\n" in out
    assert "  lock(&p->alloc_lock);\n" in out


def test_recursive_report_ends_with_nesting_notation_hint() -> None:
    out = render([mm_take_all_locks_rwlock()])
    assert " *** DEADLOCK ***\n\n May be due to missing lock nesting notation\n\n4 locks held by qemu-kvm/64239:\n" in out


def test_uncertain_note_follows_header() -> None:
    finding = abba()
    finding.uncertain = "guessed"
    lines = render([finding]).splitlines()
    assert lines[5] == "NOTE: uncertain: guessed"


def test_bad_irq_title_rule_follows_expanded_title() -> None:
    lines = render([bad_irq_dependency()]).splitlines()
    assert lines[2] == "WARNING: HARDIRQ-safe -> HARDIRQ-unsafe lock order detected"
    assert lines[1] == "=" * len(lines[2])


def test_depth_line() -> None:
    out = render([depth_exceeded()])
    assert "\nBUG: MAX_LOCK_DEPTH too low!\n" in out
    assert "\ndepth: 48  max: 48!\n48 locks held by T1:\n" in out


def test_renderer_registry() -> None:
    assert RENDERERS["text"] is text
    assert set(RENDERERS) >= {"text", "json"}


# -- the examples' expected fragments ------------------------------------------------


def in_order(rendered: str, fragments: list[str]) -> None:
    pos = 0
    for fragment in fragments:
        found = rendered.find(fragment, pos)
        assert found >= 0, f"{fragment!r} not found after offset {pos}:\n{rendered[pos:]}"
        pos = found + len(fragment)


@pytest.mark.parametrize(
    "example, build",
    [("abba", abba), ("abcd-chain", abcd_chain), ("mm_take_all_locks-rwlock", mm_take_all_locks_rwlock)],
)
def test_text_in_order(example: str, build: Callable[[], Finding]) -> None:
    expect = EXAMPLES / f"{example}.expect"
    in_order(render([build()]), json.loads(expect.read_text())["text_in_order"])
