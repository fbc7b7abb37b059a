"""Python stacks in evidence and the Python-flavoured report, without a pytest subprocess.

`instrument()` runs plain code here; the pytester tests of the plugin's
output are in tests/test_plugin_report.py.
"""

from __future__ import annotations

import contextlib
import fnmatch
import io
import json
import threading

from lockcheck.python import instrument as pylocks
from lockcheck.lockdep.checker import Checker
from lockcheck.events import Event
from lockcheck.lockdep.findings import Evidence, Frame
from lockcheck.store.graphfile import graph_from_graphml, graph_from_json, graph_to_graphml, graph_to_json
from lockcheck.python.stacks import capture
from lockcheck.report import Summary, text
from lockcheck.python import report as python


@contextlib.contextmanager
def locked(lock):
    with lock:
        yield


def take_in_order(first, second) -> None:
    with locked(first):
        with locked(second):
            pass


def run_in_thread(target, *args) -> None:
    thread = threading.Thread(target=target, args=args)
    thread.start()
    thread.join(10)


def test_a_new_dependency_keeps_the_stack_of_the_code_under_test() -> None:
    with pylocks.instrument() as rec:
        a = threading.Lock()
        b = threading.Lock()
        run_in_thread(take_in_order, a, b)
    (prev, nxt, data), = rec.checker.graph.nx.edges(data=True)
    stack = data["evidence"].stack
    # innermost first: the helper, then its caller; no threading.py, contextlib or lockcheck
    assert [frame.function.rsplit(".", 1)[-1] for frame in stack] == ["locked", "take_in_order"]
    assert stack[0].file.endswith("test_python_report.py")
    assert stack[0].line == locked.__wrapped__.__code__.co_firstlineno + 2
    assert stack[1].line == take_in_order.__code__.co_firstlineno + 2


def test_stack_depth_limits_and_zero_turns_stacks_off() -> None:
    for depth, expected in ((1, ["locked"]), (0, None)):
        with pylocks.instrument(stack_depth=depth) as rec:
            a = threading.Lock()
            b = threading.Lock()
            take_in_order(a, b)
        (_, _, data), = rec.checker.graph.nx.edges(data=True)
        stack = data["evidence"].stack
        assert (stack and [frame.function.rsplit(".", 1)[-1] for frame in stack]) == expected


def test_a_finding_carries_its_stack_and_the_held_locks() -> None:
    with pylocks.instrument() as rec:
        a = threading.Lock()
        b = threading.Lock()
        take_in_order(a, b)
        with a:
            with b:
                pass
        with b:
            with a:  # closes the cycle: the held b was taken two lines up, by this frame
                pass
    (finding, _), = rec.findings
    here = test_a_finding_carries_its_stack_and_the_held_locks.__code__
    stack = finding.details["stack"]
    assert stack[0].function.endswith("test_a_finding_carries_its_stack_and_the_held_locks")
    assert stack[0].line == finding.prev.acquired.line + 1
    held = finding.details["held_stack"]
    assert held[0] == Frame(stack[0].file, finding.prev.acquired.line, stack[0].function)
    assert held[1:] == stack[1:]
    assert here.co_firstlineno < held[0].line < stack[0].line


def test_capture_stops_at_the_test_runner() -> None:
    import sys

    stack = capture(sys._getframe(), depth=50)
    assert stack[0].function.endswith("test_capture_stops_at_the_test_runner")
    assert all("_pytest" not in frame.file and "pluggy" not in frame.file for frame in stack)
    assert len(stack) == 1


def test_stacks_survive_saved_graphs() -> None:
    with pylocks.instrument() as rec:
        a = threading.Lock()
        b = threading.Lock()
        take_in_order(a, b)
    graph = rec.checker.graph
    (prev, nxt, data), = graph.nx.edges(data=True)
    doc = json.loads(json.dumps(graph_to_json(graph)))
    assert doc["dependencies"][0]["evidence"]["stack"][0] == data["evidence"].stack[0].to_json()
    for back in (graph_from_json(doc), graph_from_graphml(graph_to_graphml(graph))):
        assert back.nx.edges[prev, nxt]["evidence"] == data["evidence"]
        assert back.nx.edges[prev, nxt]["evidence"].stack == data["evidence"].stack


def test_evidence_without_a_stack_reads_and_prints_as_before() -> None:
    evidence = Evidence("t.lt", 3, "T1", "f.c:1")
    assert evidence.to_json() == {"file": "t.lt", "line": 3, "task": "T1", "at": "f.c:1"}
    assert repr(evidence) == "Evidence(file='t.lt', line=3, task='T1', at='f.c:1', ts=None)"
    assert evidence.with_stack(None) is evidence
    assert Evidence.from_json(evidence.to_json()) == evidence


def kernel_findings() -> list:
    """A trace's findings (no Python anywhere): an AB-BA and a same-class nesting."""
    checker = Checker()
    found = []
    line = 0
    for task, held in (("T1", ("A", "B")), ("T2", ("B", "A")), ("T3", ("C", "C"))):
        for i, lock in enumerate(held):
            line += 1
            found += checker.feed(Event(task, "acquire", lock, f"0x{i}", file="t.lt", line=line, at=f"f.c:{i}"))
        for i, lock in reversed(list(enumerate(held))):
            found += checker.feed(Event(task, "release", lock, f"0x{i}"))
    return found


def test_without_stacks_the_python_report_is_the_kernel_report_plus_advice() -> None:
    """The Python extras live in the plugin's renderer; the kernel layout underneath is untouched."""
    for finding in kernel_findings():
        kernel, pythonic = io.StringIO(), io.StringIO()
        text.print_finding(finding, Summary(), kernel)
        python.print_finding(finding, Summary(), pythonic)
        expected = kernel.getvalue().replace(
            " May be due to missing lock nesting notation\n",
            " May be due to missing lock nesting notation: in Python, lockcheck.nested()\n"
            " on the inner lock, a declared order, or a suppression (see How to fix)\n")
        assert pythonic.getvalue().startswith(expected)
        assert "\nHow to fix:\n" in pythonic.getvalue()[len(expected):]
        assert pythonic.getvalue().rstrip().endswith(f"lockcheck_suppress = {python.suppression(finding)}")


def test_suppression_rules_match_exactly_the_classes_of_the_finding() -> None:
    circular, recursive = kernel_findings()
    assert python.suppression(circular) == "circular-dependency A B"
    assert python.suppression(recursive) == "recursive-locking C"
    odd = "cache[0] *lock? my file.py:3"
    recursive.lock = recursive.held = odd
    rule = python.suppression(recursive)
    kind, *globs = rule.split()
    assert kind == "recursive-locking" and len(globs) == 1
    assert fnmatch.fnmatchcase(odd, globs[0])
    assert not fnmatch.fnmatchcase("cache0 Xlock! my file.py:3", globs[0])
    assert python.suppression(recursive, key_of=lambda cls: f"pkg.{cls}").startswith("recursive-locking pkg.")


def test_split_task_finds_the_test() -> None:
    assert python.split_task("MainThread/1 [t.py::test_a[1-2]]") == ("MainThread/1", "t.py::test_a[1-2]")
    assert python.split_task("T1") == ("T1", None)
    assert python.by_whom("gw0:Thread-3/7 [t.py::test_b]") == "by gw0:Thread-3/7 in test t.py::test_b"
    assert python.by_whom("MainThread/1") == "by MainThread/1 (outside any test)"


def test_a_saved_graph_with_a_bad_stack_is_one_error_line(tmp_path) -> None:
    from lockcheck.errors import LockcheckError
    from lockcheck.store.graphfile import load_graph

    doc = {"lockcheck-graph": 1, "classes": [{"name": "A"}, {"name": "B"}],
           "dependencies": [{"from": "A", "to": "B", "dep": ["EN"],
                             "evidence": {"file": "t.py", "line": 3, "task": "T1",
                                          "stack": [{"file": "t.py", "line": "three", "function": "f"}]}}]}
    path = tmp_path / "g.json"
    path.write_text(json.dumps(doc))
    try:
        load_graph(str(path))
    except LockcheckError as err:
        assert "stack" in str(err) and "line" in str(err) and str(err).startswith(str(path))
    else:
        raise AssertionError("a bad stack was accepted")
