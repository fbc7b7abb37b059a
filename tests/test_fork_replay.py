"""`lockcheck check` on a recording of forked children gives the plugin's verdict (issue 30):
each child is checked from the state its parent had at the fork plus its own events, never
against what the parent (or another child) did later -- two processes cannot deadlock each
other on their own copies of a lock -- while a cycle one child made, or closed over a
dependency it inherited, is still reported, named with its test."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest

pytest_plugins = ["pytester"]

TIMEOUT = 120

SUITE = """
    import multiprocessing
    import os
    import threading

    A = threading.Lock()
    B = threading.Lock()
    C = threading.Lock()
    D = threading.Lock()
    E = threading.Lock()
    F = threading.Lock()
    G = threading.Lock()
    H = threading.Lock()
    I = threading.Lock()
    J = threading.Lock()
    K = threading.Lock()
    L = threading.Lock()
    M = threading.Lock()
    N = threading.Lock()


    def in_child(fn):
        pid = os.fork()
        if pid == 0:
            try:
                fn()
            finally:
                os._exit(0)
        os.waitpid(pid, 0)


    def nest(outer, inner):
        with outer:
            with inner:
                pass


    def test_fork_then_parent_ab_child_ba():
        in_child(lambda: nest(B, A))  # the child never sees the parent's A -> B: it comes later
        nest(A, B)


    def test_multiprocessing_child_ba_then_parent_ab():
        child = multiprocessing.get_context("fork").Process(target=nest, args=(J, I))
        child.start()
        child.join()
        nest(I, J)


    def test_child_cd_then_parent_dc():
        in_child(lambda: nest(C, D))
        nest(D, C)


    def test_cycle_inside_one_child():
        in_child(lambda: (nest(E, F), nest(F, E)))


    def test_grandchild():
        def child():
            nest(K, L)  # before it forks: the grandchild's too
            in_child(lambda: (nest(L, K), nest(N, M)))  # L -> K real; N -> M: the child's M -> N comes later
            nest(M, N)
        in_child(child)


    def test_child_reverses_what_it_inherited():
        nest(G, H)  # before the fork: the child has G -> H too
        in_child(lambda: nest(H, G))
"""


def check(trace: str, *args: str) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lockcheck", "check", "--no-config", *args, trace],
                          check=False, capture_output=True, text=True, timeout=TIMEOUT)


@pytest.mark.slow
@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
@pytest.mark.parametrize("name", ["run.lt", "run.lt.gz"])
def test_replay_of_forked_children_is_the_plugins_verdict(pytester: pytest.Pytester, name: str) -> None:
    pytester.makepyfile(test_forks=SUITE)
    trace = str(pytester.path / name)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:logging", "-p", "no:randomly",
                                           "--lockcheck", f"--lockcheck-trace={trace}", timeout=TIMEOUT)
    result.assert_outcomes(passed=3, failed=3)
    result.stdout.fnmatch_lines(["FAILED test_forks.py::test_cycle_inside_one_child - lockcheck*",
                                 "FAILED test_forks.py::test_child_reverses_what_it_inherited - lockcheck*"])
    replay = check(trace, "--format", "json")
    assert replay.returncode == 1, replay.stderr
    found = sorted((f["kind"], sorted(f["cycle"]), f["details"].get("test"))
                   for f in json.loads(replay.stdout)["findings"])
    assert found == [
        ("circular-dependency", ["test_forks.E", "test_forks.F"], "test_forks.py::test_cycle_inside_one_child"),
        ("circular-dependency", ["test_forks.G", "test_forks.H"], "test_forks.py::test_child_reverses_what_it_inherited"),
        ("circular-dependency", ["test_forks.K", "test_forks.L"], "test_forks.py::test_grandchild"),
    ]
    text = check(trace)
    assert text.returncode == 1
    assert "[test_forks.py::test_cycle_inside_one_child]" in text.stdout
    assert " in test_child_reverses_what_it_inherited.<locals>.<lambda>" in text.stdout  # the child's stack


def _write(tmp_path, lines: list[str]) -> str:
    trace = tmp_path / "forks.lt"
    trace.write_text("\n".join(["#lockcheck-trace v1", "#lockcheck-plugin v1", *lines]) + "\n")
    return str(trace)


def _cycles(trace: str) -> list[tuple[list[str], str]]:
    replay = check(trace, "--format", "json")
    assert replay.returncode in (0, 1), replay.stderr
    return sorted((sorted(f["cycle"]), f["task"]) for f in json.loads(replay.stdout)["findings"])


def _child(pid: int, parent: int, at: int, *events: str) -> list[str]:
    return [f"# forked child: pid{pid}", f"#lockcheck-plugin fork {pid} {parent} {at}", *events]


def test_a_grandchild_has_its_parents_and_grandparents_past_only(tmp_path) -> None:
    """Session (line numbers of its own file): A->B at 3-6, fork of 11 at 6, then C->D; child 11:
    forks 12 after its own D->C (line 5 of its file); grandchild 12: B->A (inherited A->B: real)
    and C->D (the session's C->D came after the fork of 11: not the grandchild's; its own D->C,
    inherited from 11, with its C->D is real only in 12)."""
    lines = ["T acquire A", "T acquire B", "T release B", "T release A",  # lines 3-6
             "T acquire C", "T acquire D", "T release D", "T release C",  # 7-10
             *_child(11, 1, 6, "pid11:T acquire D", "pid11:T acquire C", "pid11:T release C", "pid11:T release D"),
             *_child(12, 11, 6, "pid12:T acquire B", "pid12:T acquire A", "pid12:T release A", "pid12:T release B",
                     "pid12:T acquire C", "pid12:T acquire D", "pid12:T release D", "pid12:T release C")]
    found = _cycles(_write(tmp_path, lines))
    assert found == [(["A", "B"], "pid12:T"), (["C", "D"], "pid12:T")]


def test_without_fork_records_the_children_are_checked_as_before(tmp_path) -> None:
    """A trace whose children carry no `fork` record (an older plugin): one checker, as before."""
    lines = ["T acquire A", "T acquire B", "T release B", "T release A",
             "# forked child: pid11", "# forked from pid 1", "pid11:T acquire B", "pid11:T acquire A"]
    assert _cycles(_write(tmp_path, lines)) == [(["A", "B"], "pid11:T")]


def test_two_children_of_one_fork_point_are_not_each_others(tmp_path) -> None:
    """Two children forked at the same point: one takes A->B, the other B->A -- no cycle; the same
    inversion found in both is one finding."""
    lines = ["T acquire X", "T release X",
             *_child(11, 1, 4, "pid11:T acquire A", "pid11:T acquire B", "pid11:T release B", "pid11:T release A"),
             *_child(12, 1, 4, "pid12:T acquire B", "pid12:T acquire A", "pid12:T release A", "pid12:T release B"),
             *_child(13, 1, 4, *_abba("pid13:T"), *_abba("pid13:T", reverse=True)),
             *_child(14, 1, 4, *_abba("pid14:T"), *_abba("pid14:T", reverse=True))]
    assert _cycles(_write(tmp_path, lines)) == [(["C", "D"], "pid13:T")]


def _abba(task: str, reverse: bool = False) -> list[str]:
    a, b = ("D", "C") if reverse else ("C", "D")
    return [f"{task} acquire {a}", f"{task} acquire {b}", f"{task} release {b}", f"{task} release {a}"]


@pytest.mark.skipif(not hasattr(os, "fork"), reason="fork is POSIX-only")
def test_locks_the_plugin_takes_while_merging_the_children_are_not_written(pytester: pytest.Pytester) -> None:
    """The parent merges its children's files at the session's end; a lock taken then (an import
    inside the merge takes `logging._lock`, which every fork point holds) would land among a
    child's lines and be replayed as the parent's, from that fork point: a recursive locking the
    program never did.  The conftest makes the merge take that lock once per child."""
    pytester.makeconftest("""
        import logging
        from lockcheck.python import plugin_children

        _read = plugin_children._fork_record

        def _fork_record_taking_logging_lock(path):
            logging.getLogger("merging." + path.rsplit(".", 1)[1])  # a new logger: under logging._lock
            return _read(path)

        plugin_children._fork_record = _fork_record_taking_logging_lock
    """)
    pytester.makepyfile(test_children="""
        import os

        def test_forks_twice():
            for _ in range(2):
                pid = os.fork()
                if pid == 0:
                    os._exit(0)
                os.waitpid(pid, 0)
    """)
    trace = pytester.path / "locks.lt"
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "--lockcheck", f"--lockcheck-trace={trace}",
                                           timeout=TIMEOUT)
    result.assert_outcomes(passed=1)
    text = trace.read_text()
    assert text.count("# forked child: pid") == 2
    replay = subprocess.run([sys.executable, "-m", "lockcheck", "check", str(trace)],
                            capture_output=True, text=True, timeout=TIMEOUT)
    assert replay.returncode == 0, replay.stdout + replay.stderr


def test_a_childs_lines_get_its_prefix_without_being_parsed(tmp_path) -> None:
    """The merge renames a child's tasks in the text: comments and plugin lines pass as they are, a last line the child did not finish becomes a comment (one
    line still: the fork records' line numbers hold); what comes out reads as the same events."""
    import io

    from lockcheck.python.plugin_children import ForkedChildren
    from lockcheck.readers import lt

    child = (b"#lockcheck-trace v1\n#lockcheck-plugin fork 12 11 3\n# context t.py::test_x\n"
             b"MainThread/1 acquire m.A@0x4 at=t.py:5\nworker-2/7 acquire m.B@0x5\n"
             b"worker-2/7 release m.B@0x5\nMainThread/1 release m.A@0x4\nMainThread/1 acq")
    merger = ForkedChildren()
    merger.trace_file = out = io.StringIO()
    merger._append_child("pid12", iter(io.BytesIO(child)))
    lines = out.getvalue().splitlines()
    assert len(lines) == child.count(b"\n") + 1
    assert lines[0] == "# forked child: pid12 (its tasks are named pid12:TASK)"
    assert lines[1:3] == ["#lockcheck-plugin fork 12 11 3", "# context t.py::test_x"]
    assert lines[-1] == "# (a line the child did not finish)"
    events = list(lt.parse(lines, "merged.lt"))
    assert [(ev.task, ev.op, ev.lock) for ev in events] == [
        ("pid12:MainThread/1", "acquire", "m.A"), ("pid12:worker-2/7", "acquire", "m.B"),
        ("pid12:worker-2/7", "release", "m.B"), ("pid12:MainThread/1", "release", "m.A")]
