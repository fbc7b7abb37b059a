"""Each lockdep rule of the core checker, on small `.lt` traces."""

from __future__ import annotations

import textwrap

import pytest

from lockcheck.lockdep.checker import MAX_LOCK_DEPTH, Checker, CheckerOptions
from lockcheck.lockdep.graph import DEP_EN, DEP_ER, DEP_SN, DEP_SR
from lockcheck.readers.lt import parse


def check(trace: str, **options) -> tuple[list, Checker]:
    lines = textwrap.dedent(trace).strip().splitlines()
    checker = Checker(options=CheckerOptions(**options))
    found = list(checker.run(parse(lines, "t.lt")))
    return found, checker


def kinds(trace: str, **options) -> list[tuple]:
    found, _ = check(trace, **options)
    return [(f.kind, f.lock) for f in found]


def edges(checker: Checker) -> dict:
    return {(a, b): d["dep"] for a, b, d in checker.graph.nx.edges(data=True)}


# -- classes, instances, subclasses ------------------------------------------------
def test_two_instances_of_one_class_nested_is_recursive_locking() -> None:
    assert kinds("""
        T1 acquire &dev->lock@1
        T1 acquire &dev->lock@2
    """) == [("recursive-locking", "&dev->lock")]


def test_subclass_is_a_class_of_its_own() -> None:
    found, checker = check("""
        T1 acquire &rq->lock@0
        T1 acquire &rq->lock@1 subclass=1
    """)
    assert found == []
    assert edges(checker) == {("&rq->lock", "&rq->lock/1"): DEP_EN}


def test_release_matches_instance_not_subclass() -> None:
    found, checker = check("""
        T1 acquire &rq->lock@0
        T1 acquire &rq->lock@1 subclass=1
        T1 release &rq->lock@1
        T1 release &rq->lock@0
    """)
    assert found == [] and checker.tasks["T1"].held == []


def test_release_of_another_instance_is_an_imbalance() -> None:
    assert kinds("""
        T1 acquire A@1
        T1 release A@2
    """) == [("unlock-imbalance", "A")]


# -- check_deadlock ------------------------------------------------------------------
def test_recursive_read_over_read_is_allowed() -> None:
    assert kinds("""
        T1 acquire L read
        T1 acquire L rread
    """) == []


def test_read_over_read_is_recursive_locking() -> None:
    assert kinds("""
        T1 acquire L read
        T1 acquire L read
    """) == [("recursive-locking", "L")]


def test_recursive_read_over_write_is_recursive_locking() -> None:
    assert kinds("""
        T1 acquire L
        T1 acquire L rread
    """) == [("recursive-locking", "L")]


def test_nest_lock_held_below_allows_same_class_without_dependencies() -> None:
    found, checker = check("""
        T1 acquire M
        T1 acquire X@1 nest=M
        T1 acquire Y
        T1 acquire X@2 nest=M
    """)
    assert found == []
    # X@2 sits under Y (no merge), is allowed by the held nest lock, and adds no Y -> X edge
    assert ("Y", "X") not in edges(checker)
    assert len(checker.tasks["T1"].held) == 4


def test_nest_merge_counts_references_and_any_instance_releases() -> None:
    found, checker = check("""
        T1 acquire M
        T1 acquire X@1 nest=M
        T1 acquire X@2 nest=M
        T1 acquire X@3 nest=M
    """)
    held = checker.tasks["T1"].held
    assert found == [] and len(held) == 2 and held[1].references == 3
    found, checker = check("""
        T1 acquire M
        T1 acquire X@1 nest=M
        T1 acquire X@2 nest=M
        T1 release X@2
        T1 release X@1
        T1 release M
    """)
    assert found == [] and checker.tasks["T1"].held == []


def test_nest_lock_not_held() -> None:
    found, _ = check("T1 acquire &anon_vma->rwsem@1 nest=&mm->mmap_sem")
    assert [(f.kind, f.lock, f.held) for f in found] == [("nest-lock-not-held", "&anon_vma->rwsem", "&mm->mmap_sem")]


def test_nest_lock_must_be_the_same_instance() -> None:
    assert kinds("""
        T1 acquire M@1
        T1 acquire X@1 nest=M@2
    """) == [("nest-lock-not-held", "X")]


# -- check_prevs_add -----------------------------------------------------------------
def test_dependency_on_nearest_held_lock_only() -> None:
    _, checker = check("""
        T1 acquire A
        T1 acquire B
        T1 acquire C
    """)
    assert edges(checker) == {("A", "B"): DEP_EN, ("B", "C"): DEP_EN}


def test_trylocks_above_the_nearest_lock_get_dependencies_too() -> None:
    _, checker = check("""
        T1 acquire A
        T1 acquire B try
        T1 acquire C try
        T1 acquire D
    """)
    assert set(edges(checker)) == {("C", "D"), ("B", "D"), ("A", "D")}


def test_trylock_adds_no_dependency_and_is_not_checked() -> None:
    found, checker = check("""
        T1 acquire A
        T1 acquire A try
        T1 acquire B try
    """)
    assert found == [] and edges(checker) == {}


def test_nocheck_locks_are_tracked_never_validated() -> None:
    found, checker = check("""
        T1 acquire A
        T1 acquire N nocheck
        T1 acquire N nocheck
        T1 acquire B
        T1 release B
        T1 release N
        T1 release N
        T1 exit
    """)
    assert [(f.kind, f.lock) for f in found] == [("held-at-exit", "A")]
    # N is skipped as a prev: B depends on A
    assert edges(checker) == {("A", "B"): DEP_EN}


def test_dependency_types_follow_read_modes() -> None:
    _, checker = check("""
        T1 acquire A read
        T1 acquire B rread
        T1 release B
        T1 release A
        T1 acquire B
        T1 acquire C read
        T1 release C
        T1 release B
        T1 acquire C rread
        T1 acquire D
    """)
    assert edges(checker) == {("A", "B"): DEP_SR, ("B", "C"): DEP_EN, ("C", "D"): DEP_SN}
    _, checker = check("""
        T1 acquire A
        T1 acquire B rread
    """)
    assert edges(checker) == {("A", "B"): DEP_ER}


# -- check_noncircular -------------------------------------------------------------
def test_abba_reports_the_cycle_and_adds_no_edge() -> None:
    found, checker = check("""
        T1 acquire A
        T1 acquire B
        T1 release B
        T1 release A
        T2 acquire B
        T2 acquire A
    """)
    (f,) = found
    assert (f.kind, f.lock, f.held, f.cycle, f.location) == ("circular-dependency", "A", "B", ["A", "B"], "t.lt:6")
    assert ("B", "A") not in edges(checker)
    assert [(link.depth, link.cls, link.evidence.location) for link in f.chain] == [(1, "B", "t.lt:2"), (0, "A", "t.lt:6")]


def test_four_class_cycle_with_evidence_for_every_link() -> None:
    found, _ = check("""
        T1 acquire A
        T1 acquire B
        T1 release B
        T1 release A
        T2 acquire B
        T2 acquire C
        T2 release C
        T2 release B
        T3 acquire C
        T3 acquire D
        T3 release D
        T3 release C
        T4 acquire D
        T4 acquire A
    """)
    (f,) = found
    assert f.cycle == ["A", "B", "C", "D"]
    assert [(link.cls, link.evidence.task, link.evidence.line) for link in f.chain] == [
        ("D", "T3", 10), ("C", "T2", 6), ("B", "T1", 2), ("A", "T4", 14)]


def test_recursive_read_cycle_is_not_a_deadlock() -> None:
    # selftest rlock_ABBA2: RL(A); L(B) / L(B); RL(A)
    assert kinds("""
        T1 acquire A rread
        T1 acquire B
        T1 release B
        T1 release A
        T2 acquire B
        T2 acquire A rread
    """) == []


def test_recursive_read_then_write_cycle_is_a_deadlock() -> None:
    # selftest rlock_ABBA1: RL(A); L(B) / L(B); WL(A)
    assert kinds("""
        T1 acquire A rread
        T1 acquire B
        T1 release B
        T1 release A
        T2 acquire B
        T2 acquire A
    """) == [("circular-dependency", "A")]


def test_rwsem_read_cycle_is_a_deadlock() -> None:
    # selftest rwsem_ABBA2: RSL(A); ML(B) / ML(B); RSL(A)
    assert kinds("""
        T1 acquire A read
        T1 acquire B
        T1 release B
        T1 release A
        T2 acquire B
        T2 acquire A read
    """) == [("circular-dependency", "A")]


def test_chain_cache_keys_include_the_read_mode() -> None:
    # selftest rlock_chaincache_ABBA1: the write chain B, A is new although B, A(rread) was cached
    assert kinds("""
        T1 acquire A rread
        T1 acquire B
        T1 release B
        T1 release A
        T2 acquire B
        T2 acquire A rread
        T2 release A
        T2 release B
        T2 acquire B
        T2 acquire A
    """) == [("circular-dependency", "A")]


def test_each_problem_is_reported_once() -> None:
    found, checker = check("""
        T1 acquire A
        T1 acquire B
        T1 release B
        T1 release A
        T2 acquire B
        T2 acquire A
        T2 release A
        T2 release B
        T3 acquire C
        T3 acquire B
        T3 acquire A
    """)
    assert [f.kind for f in found] == ["circular-dependency"]


def test_first_stops_after_the_first_finding() -> None:
    assert kinds("""
        T1 acquire A
        T1 release A
        T1 release A
        T1 release B
    """, first=True) == [("unlock-imbalance", "A")]


def test_checking_goes_on_after_a_finding() -> None:
    assert kinds("""
        T1 acquire A
        T1 release A
        T1 release A
        T1 acquire B@1
        T1 acquire B@2
    """) == [("unlock-imbalance", "A"), ("recursive-locking", "B")]


# -- chain cache -----------------------------------------------------------------------
def test_repeated_stacks_hit_the_chain_cache() -> None:
    _, checker = check("\n".join(["T1 acquire A", "T1 acquire B", "T1 release B", "T1 release A"] * 50))
    assert checker.stats.chains == 2  # [A] and [A, B], each validated once
    assert checker.stats.chain_hits == 98


# -- release ---------------------------------------------------------------------------
def test_out_of_order_release_re_stacks_and_revalidates() -> None:
    found, checker = check("""
        T1 acquire A
        T1 acquire B
        T1 acquire C
        T1 release B
    """)
    assert found == []
    assert [h.cls for h in checker.tasks["T1"].held] == ["A", "C"]
    # C re-acquired directly under A: a new dependency
    assert ("A", "C") in edges(checker)


def test_unlock_imbalance_names_the_released_lock() -> None:
    found, _ = check("""
        T1 acquire A
        T1 release A
        T1 release A at=h.c:99
    """)
    (f,) = found
    assert (f.kind, f.lock, f.location, f.site) == ("unlock-imbalance", "A", "t.lt:3", "h.c:99")


def test_lenient_start_counts_releases_never_seen_acquired() -> None:
    found, checker = check("""
        T1 release A
        T1 acquire B
        T1 release B
        T1 release B
    """, lenient_start=True)
    assert [(f.kind, f.lock) for f in found] == [("unlock-imbalance", "B")]
    assert checker.stats.unknown_releases == 1


# -- exit, free, depth -------------------------------------------------------------------
def test_held_at_exit_names_the_most_recent_lock() -> None:
    found, _ = check("""
        T1 acquire A
        T1 acquire B
        T1 release B
        T1 acquire C
        T1 exit
    """)
    (f,) = found
    assert (f.kind, f.lock) == ("held-at-exit", "C")
    assert [s.name for s in f.held_locks] == ["A", "C"]


def test_exit_with_nothing_held_is_fine() -> None:
    assert kinds("T1 acquire A\nT1 release A\nT1 exit") == []


def test_freeing_a_held_lock() -> None:
    assert kinds("""
        T1 acquire A@1
        T1 free A@2
        T1 free A@1
    """) == [("held-lock-freed", "A")]


def test_max_lock_depth_is_reported_not_a_crash() -> None:
    lines = [f"T1 acquire L{i}" for i in range(MAX_LOCK_DEPTH + 2)]
    found, checker = check("\n".join(lines))
    assert [(f.kind, f.lock) for f in found] == [("lock-depth-exceeded", f"L{MAX_LOCK_DEPTH - 1}")]
    assert len(checker.tasks["T1"].held) == MAX_LOCK_DEPTH + 2


# -- irq contexts separate chains ---------------------------------------------------------
def test_hardirq_locks_do_not_depend_on_the_interrupted_tasks_locks() -> None:
    found, checker = check("""
        T1 irqs-off
        T1 acquire A
        T1 hardirq-enter
        T1 acquire B
        T1 release B
        T1 hardirq-exit
        T1 release A
        T1 irqs-on
    """)
    assert found == [] and edges(checker) == {}


def test_hardirq_taking_a_class_the_task_holds_with_irqs_on_is_inconsistent() -> None:
    # the chain [A] in hardirq context has the same key as [A] in process context (lockdep's
    # chain key restarts at an irq boundary), so it is the usage bits that catch this
    assert kinds("""
        T1 acquire A@1
        T1 hardirq-enter
        T1 acquire A@2
    """) == [("inconsistent-lock-state", "A")]


def test_unknown_op_in_events_is_an_error() -> None:
    from lockcheck.events import Event

    with pytest.raises(ValueError):
        Checker().feed(Event("T1", "bogus"))
