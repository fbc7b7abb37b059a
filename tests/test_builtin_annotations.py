"""The built-in annotation rules for kernel captures, no-check rules, chains dumps as inputs,
and the annotation options of `graph` and `diff`."""

from __future__ import annotations

import io
import json

import pytest

from lockcheck.kernel import state as kstate
from lockcheck.kernel.annotation_file import AnnotationRules
from lockcheck.commands.cli import main
from lockcheck.errors import TraceError

HEADER = "# tracer: nop\n#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"


def ftrace(*ops: str, pid: int = 7) -> str:
    """`acquire ADDR NAME` / `read ADDR NAME` / `release ADDR NAME` as ftrace lines of task demo/PID."""
    lines = []
    for i, op in enumerate(ops):
        what, addr, name = op.split(" ", 2)
        event = "lock_release" if what == "release" else "lock_acquire"
        flag = "read " if what == "read" else ""
        lines.append(f"            demo-{pid:<7} [000] ...1. {10 + i / 1000:.6f}: {event}: {addr} {flag}{name}")
    return HEADER + "\n".join(lines) + "\n"


def run(*args: str) -> tuple[int, dict, str]:
    out, err = io.StringIO(), io.StringIO()
    progress = ["--no-progress"] if args[0] == "check" else []
    status = main([args[0], "--format", "json", *progress, "--no-config", *args[1:]], stdout=out, stderr=err)
    return status, (json.loads(out.getvalue()) if out.getvalue().strip() else {}), err.getvalue()


# rcu_read_lock is taken with check=0: lockdep never records A -> rcu_read_lock -> B as a cycle
RCU_BOTH_WAYS = ftrace(
    "acquire 00a0 &a->lock", "read 00f0 rcu_read_lock", "release 00f0 rcu_read_lock", "release 00a0 &a->lock",
    "read 00f0 rcu_read_lock", "acquire 00a0 &a->lock", "release 00a0 &a->lock", "release 00f0 rcu_read_lock",
)


def test_builtin_rules_know_the_rcu_maps_are_not_validated(tmp_path):
    path = tmp_path / "t.ftrace"
    path.write_text(RCU_BOTH_WAYS)
    status, doc, _ = run("check", str(path))
    assert (status, doc["findings"]) == (0, [])
    assert any("of rcu_read_lock taken without validation (check=0) by rule <built-in kernel.annotations>" in n
               for n in doc["notes"])
    graph = tmp_path / "g.json"
    assert main(["graph", "--no-progress", "--no-config", "-q", str(path), "-o", str(graph)]) == 0
    assert json.loads(graph.read_text())["dependencies"] == []


def test_builtin_rules_can_be_turned_off(tmp_path):
    path = tmp_path / "t.ftrace"
    path.write_text(RCU_BOTH_WAYS)
    graph = tmp_path / "g.json"
    assert main(["graph", "--no-progress", "--no-config", "-q", "--no-builtin-annotations", str(path),
                 "-o", str(graph)]) == 0
    edges = {(e["from"], e["to"]) for e in json.loads(graph.read_text())["dependencies"]}
    assert ("&a->lock", "rcu_read_lock") in edges and ("rcu_read_lock", "&a->lock") in edges


def test_builtin_rules_leave_lt_traces_alone(tmp_path):
    """A .lt trace says `nocheck` itself: a no-check rule does not apply to it."""
    path = tmp_path / "t.lt"
    path.write_text("#lockcheck-trace v1\nT acquire A\nT acquire rcu_read_lock\nT release rcu_read_lock\n"
                    "T release A\nT acquire rcu_read_lock\nT acquire A\n")
    status, doc, _ = run("check", str(path))
    assert status == 1 and doc["findings"][0]["kind"] == "circular-dependency"


def test_no_check_like_patterns(tmp_path):
    rules = AnnotationRules.parse('no-check like "*srcu"\nno-check "*(&acpi_gbl_gpe_lock)"\n', "ann")
    assert rules.unchecked("&kvm->srcu") == "ann:1"
    assert rules.unchecked("&ssp->srcu_cb_mutex") is None
    assert rules.unchecked("*(&acpi_gbl_gpe_lock)") == "ann:2"  # a `*` outside `like` is part of the name
    assert rules.unchecked("*(&acpi_gbl_reference_count_lock)") is None
    builtin = AnnotationRules.builtin()
    for name in ("rcu_read_lock", "rcu_read_lock_bh", "rcu_read_lock_sched", "rcu_callback", "&fsnotify_mark_srcu",
                 "&dev->mutex"):
        assert builtin.unchecked(name), name
    assert builtin.unchecked("&mm->mmap_lock") is None


def test_user_rules_add_to_the_builtin_ones(tmp_path):
    path = tmp_path / "t.ftrace"
    path.write_text(ftrace("acquire 00a0 &a->lock", "acquire 00b0 my_map", "release 00b0 my_map",
                           "release 00a0 &a->lock", "acquire 00b0 my_map", "acquire 00a0 &a->lock"))
    (tmp_path / "ann").write_text("no-check my_map\n")
    status, doc, _ = run("check", str(path), "--annotations", str(tmp_path / "ann"))
    assert (status, doc["findings"]) == (0, [])
    status, _, _ = run("check", str(path))
    assert status == 1


# -- /proc/lockdep_chains as an input --------------------------------------------------------


def chains_dump(*chains: list[str]) -> str:
    keys: dict[str, str] = {}
    lines = ["all lock chains:"]
    for chain in chains:
        lines.append("irq_context: 0")
        for name in chain:
            key = keys.setdefault(name, f"{len(keys) + 1:016x}")
            lines.append(f"[{key}] {name}")
        lines.append("")
    return "\n".join(lines) + "\n"


def test_a_chains_dump_builds_the_graph(tmp_path):
    path = tmp_path / "lockdep_chains.txt"
    # sb_writers was a trylock under i_mutex (touch_atime): its chain has no entry of its own, and the
    # dependency of [i_mutex, sb_writers, mount_lock] is sb_writers -> mount_lock only
    path.write_text(chains_dump(["A"], ["A", "B"], ["A", "rcu_read_lock", "C"], ["i_mutex"],
                                ["i_mutex", "sb_writers", "mount_lock"], ["sb_writers", "i_mutex"]))
    graph = tmp_path / "g.json"
    status, doc, err = run("check", str(path), "--save-graph", str(graph))
    assert (status, doc["findings"]) == (0, []), err
    edges = {(e["from"], e["to"]) for e in json.loads(graph.read_text())["dependencies"]}
    assert edges == {("A", "B"), ("A", "C"), ("sb_writers", "mount_lock"), ("sb_writers", "i_mutex")}
    assert any("merged 7 lock classes and 4 dependencies" in n for n in doc["notes"])


def test_two_chains_dumps_close_a_cycle(tmp_path):
    one, two = tmp_path / "m1", tmp_path / "m2"
    one.mkdir(), two.mkdir()
    (one / "lockdep_chains.txt").write_text(chains_dump(["A"], ["A", "B"]))
    (two / "lockdep_chains.txt").write_text(chains_dump(["B"], ["B", "A"]))
    status, doc, _ = run("check", str(one / "lockdep_chains.txt"), str(two / "lockdep_chains.txt"))
    assert status == 1 and doc["findings"][0]["kind"] == "circular-dependency"


def test_chains_add_what_proc_lockdep_does_not_print():
    """/proc/lockdep prints distance-1 dependencies only; a chain across a check=0 map shows another."""
    lockdep = ["all lock classes:", "0000000000000001 FD:    2 BD:    1 +.+.: A",
               "0000000000000002 FD:    1 BD:    1 ....: rcu_read_lock",
               "0000000000000003 FD:    1 BD:    1 +.+.: C", "0000000000000004 FD:    1 BD:    1 ....: &dev->mutex",
               "0000000000000005 FD:    1 BD:    1 +.+.: D"]
    state = kstate.LockdepState()
    for item in kstate.parse_lockdep(lockdep, "lockdep"):
        state.add(item)
    for item in kstate.parse_chains(chains_dump(["A", "rcu_read_lock", "C"], ["&dev->mutex", "D"]).splitlines(),
                                    "chains"):
        state.add(item)
    deps = [(d.before_name, d.after_name, d.distance) for d in kstate.dependencies(state)]
    # rcu_read_lock and &dev->mutex: never validated (no dependency, no usage), so no dependency from them
    assert deps == [("A", "C", 2)]


def test_a_directory_of_two_machines_dumps_is_two_boots(tmp_path):
    one, two = tmp_path / "m1.lockdep_chains", tmp_path / "m2.lockdep_chains"
    one.write_text(chains_dump(["A", "B"]))
    two.write_text(chains_dump(["B", "A"]))
    assert kstate.group_boots([str(one), str(two)]) == [[str(one)], [str(two)]]


def test_a_stray_file_is_no_state(tmp_path):
    (tmp_path / "x").write_text("hello\n")
    with pytest.raises(TraceError):
        kstate.load(str(tmp_path / "x"))


# -- graph and diff take the annotation options ------------------------------------------------

NESTED = ftrace("acquire 00a0 &mm->mmap_lock", "acquire 00b0 &mm->mmap_lock", "acquire 00c0 &p->lock",
                "release 00c0 &p->lock", "release 00b0 &mm->mmap_lock", "release 00a0 &mm->mmap_lock")


def nested_state(tmp_path):
    folder = tmp_path / "boot"
    folder.mkdir()
    (folder / "lockdep.txt").write_text(
        "all lock classes:\n0000000000000001 FD:    1 BD:    1 +.+.: &mm->mmap_lock\n"
        " -> [0000000000000002] &mm->mmap_lock/1\n\n0000000000000002 FD:    1 BD:    1 +.+.: &mm->mmap_lock/1\n"
        " -> [0000000000000003] &p->lock\n\n0000000000000003 FD:    1 BD:    1 +.+.: &p->lock\n")
    (folder / "lockdep_chains.txt").write_text(chains_dump(["&mm->mmap_lock"], ["&mm->mmap_lock", "&mm->mmap_lock/1"],
                                                           ["&mm->mmap_lock", "&mm->mmap_lock/1", "&p->lock"]))
    (folder / "lockdep_stats.txt").write_text(" lock-classes:  3 [max: 8192]\n debug_locks:   1\n")
    return folder


def test_graph_takes_the_lockdep_state(tmp_path):
    path = tmp_path / "t.ftrace"
    path.write_text(NESTED)
    graph = tmp_path / "g.json"
    assert main(["graph", "--no-progress", "--no-config", "-q", str(path), "-o", str(graph),
                 "--lockdep-state", str(nested_state(tmp_path))]) == 0
    edges = {(e["from"], e["to"]) for e in json.loads(graph.read_text())["dependencies"]}
    assert edges == {("&mm->mmap_lock", "&mm->mmap_lock/1"), ("&mm->mmap_lock/1", "&p->lock")}


def test_diff_takes_the_lockdep_state(tmp_path):
    base, new = tmp_path / "base.ftrace", tmp_path / "new.ftrace"
    base.write_text(ftrace("acquire 00c0 &p->lock", "release 00c0 &p->lock"))
    new.write_text(NESTED)
    status, doc, _ = run("diff", str(base), str(new))
    assert status == 1 and [f["kind"] for f in doc["findings"]] == ["recursive-locking"]
    status, doc, _ = run("diff", str(base), str(new), "--lockdep-state", str(nested_state(tmp_path)))
    assert (status, doc["findings"]) == (0, [])


def test_graph_and_diff_take_annotation_rules(tmp_path):
    """An --annotations rule (no state at hand) resolves the nesting for graph and diff alike."""
    rules = tmp_path / "rules.annotations"
    rules.write_text("subclass &mm->mmap_lock by address order\n")
    base, new = tmp_path / "base.ftrace", tmp_path / "new.ftrace"
    base.write_text(ftrace("acquire 00c0 &p->lock", "release 00c0 &p->lock"))
    new.write_text(NESTED)
    status, doc, _ = run("diff", str(base), str(new), "--annotations", str(rules))
    assert (status, doc["findings"]) == (0, [])
    graph = tmp_path / "g.json"
    assert main(["graph", "--no-progress", "--no-config", "-q", str(new), "-o", str(graph),
                 "--annotations", str(rules)]) == 0
    edges = {(e["from"], e["to"]) for e in json.loads(graph.read_text())["dependencies"]}
    assert ("&mm->mmap_lock", "&mm->mmap_lock/1") in edges and ("&mm->mmap_lock/1", "&p->lock") in edges
