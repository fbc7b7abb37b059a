"""The annotation transformer (lockcheck.kernel.annotations), annotation rules, and /proc/lockdep dumps as inputs."""

from __future__ import annotations

import io
import json

import pytest

from lockcheck.kernel import state as kstate
from lockcheck.kernel.annotation_file import AnnotationRules
from lockcheck.kernel.annotations import Annotator, annotate
from lockcheck.commands.cli import main
from lockcheck.events import RREAD
from lockcheck.readers import ftrace

HEADER = "# tracer: nop\n#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"


def ftrace_text(*ops: str) -> str:
    """`acquire ADDR NAME` / `try ADDR NAME` / `read ADDR NAME` / `release ADDR` as ftrace lines of task demo-7."""
    lines = []
    for i, op in enumerate(ops):
        what, addr, *name = op.split(" ", 2)
        stamp = f"{10 + i / 1000:.6f}"
        if what == "release":
            lines.append(f"            demo-7       [000] ...1. {stamp}: lock_release: {addr} {name[0] if name else ''}")
        else:
            flag = {"acquire": "", "try": "try ", "read": "read "}[what]
            lines.append(f"            demo-7       [000] ...1. {stamp}: lock_acquire: {addr} {flag}{name[0]}")
    return HEADER + "\n".join(lines) + "\n"


def dump(classes: list[tuple[str, str, list[str]]], chains: list[list[str]]) -> tuple[str, str]:
    """(/proc/lockdep, /proc/lockdep_chains) texts: classes as (name, usage, [after names])."""
    keys = {name: f"{i + 1:016x}" for i, (name, _, _) in enumerate(classes)}
    lockdep = ["all lock classes:"]
    for name, usage, after in classes:
        lockdep.append(f"{keys[name]} FD:    1 BD:    1 {usage}: {name}")
        lockdep += [f" -> [{keys[a]}] {a}" for a in after]
        lockdep.append("")
    text_chains = ["all lock chains:"]
    for chain in chains:
        text_chains.append("irq_context: 0")
        text_chains += [f"[{keys[name]}] {name}" for name in chain]
        text_chains.append("")
    return "\n".join(lockdep) + "\n", "\n".join(text_chains) + "\n"


def write_state(tmp_path, classes, chains, name="boot"):
    folder = tmp_path / name
    folder.mkdir()
    lockdep, chains_text = dump(classes, chains)
    (folder / "lockdep.txt").write_text(lockdep)
    (folder / "lockdep_chains.txt").write_text(chains_text)
    return folder


def run(tmp_path, trace: str, *args: str) -> tuple[int, dict, str]:
    path = tmp_path / "trace.ftrace"
    path.write_text(trace)
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--format", "json", "--no-progress", "--no-config", str(path), *args],
                  stdout=out, stderr=err)
    return status, (json.loads(out.getvalue()) if out.getvalue() else {}), err.getvalue()


def events_of(trace: str, state=None, rules=None):
    annotator = Annotator(state, rules)
    annotator.capture = True
    evs = [ev for ev in annotator.run(ftrace.parse(trace.splitlines(), "t.ftrace")) if ev.op == "acquire"]
    return evs, annotator


# a dup_mmap()-like nesting: the child's mmap_lock is taken as SINGLE_DEPTH_NESTING
NESTED = ftrace_text("acquire 00a0 &mm->mmap_lock", "acquire 00b0 &mm->mmap_lock", "acquire 00c0 &p->lock",
                     "release 00c0", "release 00b0", "release 00a0")
NESTED_STATE = ([("&mm->mmap_lock", "+.+.", ["&mm->mmap_lock/1"]), ("&mm->mmap_lock/1", "+.+.", ["&p->lock"]),
                 ("&p->lock", "+.+.", [])],
                [["&mm->mmap_lock"], ["&mm->mmap_lock", "&mm->mmap_lock/1"],
                 ["&mm->mmap_lock", "&mm->mmap_lock/1", "&p->lock"]])


def test_a_subclass_comes_from_the_chains(tmp_path):
    folder = write_state(tmp_path, *NESTED_STATE)
    evs, annotator = events_of(NESTED, kstate.load(str(folder)))
    assert [ev.subclass for ev in evs] == [0, 1, 0]
    assert any("1 acquisition of &mm->mmap_lock given subclass 1 from /proc/lockdep" in n
               for n in annotator.notes())


def test_check_with_the_state_is_clean_and_without_it_uncertain(tmp_path):
    folder = write_state(tmp_path, *NESTED_STATE)
    status, doc, _ = run(tmp_path, NESTED, "--lockdep-state", str(folder))
    assert (status, doc["findings"]) == (0, [])
    status, doc, _ = run(tmp_path, NESTED)
    assert status == 1
    [finding] = doc["findings"]
    assert finding["kind"] == "recursive-locking" and "nest_lock" in finding["uncertain"]


def test_a_class_list_alone_gives_no_subclass(tmp_path):
    """Without a chain showing NAME then NAME/N, a /N class is no evidence for this nesting."""
    classes, _ = NESTED_STATE
    folder = write_state(tmp_path, classes, [["&p->lock"]])
    evs, _ = events_of(NESTED, kstate.load(str(folder)))
    assert evs[1].subclass == 0


def test_a_repeated_class_the_kernel_merged_gets_a_nest_lock(tmp_path):
    # mm_take_all_locks: many anon_vma locks under mm_all_locks_mutex, the chain shows the class once
    trace = ftrace_text("try 0090 &z->lock", "release 0090", "acquire 0010 &mm->mmap_lock", "acquire 0020 mm_all_locks_mutex",
                        "acquire 0031 &anon_vma->rwsem", "acquire 0032 &anon_vma->rwsem",
                        "acquire 0033 &anon_vma->rwsem", "try 0040 &x->lock", "acquire 0050 &y->lock",
                        "release 0050", "release 0040", "release 0033", "release 0032", "release 0031",
                        "release 0020", "release 0010")
    classes = [("&mm->mmap_lock", "+.+.", ["mm_all_locks_mutex"]),
               ("mm_all_locks_mutex", "+.+.", ["&anon_vma->rwsem"]), ("&anon_vma->rwsem", "+.+.", ["&y->lock"]),
               ("&x->lock", "+.+.", []), ("&y->lock", "+.+.", []), ("&z->lock", "+.+.", [])]
    chains = [["&mm->mmap_lock", "mm_all_locks_mutex", "&anon_vma->rwsem"],
              ["&mm->mmap_lock", "mm_all_locks_mutex", "&anon_vma->rwsem", "&x->lock", "&y->lock"]]
    folder = write_state(tmp_path, classes, chains)
    # a capture that showed a trylock: silence about a repeated top class is a nest_lock merge
    evs, annotator = events_of(trace, kstate.load(str(folder)))
    assert [ev.nest for ev in evs[3:6]] == [None, ("mm_all_locks_mutex", "0x0020"), ("mm_all_locks_mutex", "0x0020")]
    assert not evs[7].trylock  # [.., &anon_vma->rwsem, &x->lock, &y->lock] matched: the merge kept the stack right
    status, doc, _ = run(tmp_path, trace, "--lockdep-state", str(folder))
    assert (status, doc["findings"]) == (0, [])


def test_an_unvalidated_acquisition_is_a_lost_trylock_or_check0(tmp_path):
    # the capture printed no `try `: the kernel has no chain [&a, &b], so &b was a trylock;
    # rcu_read_lock has no dependency and no usage: check=0
    trace = ftrace_text("acquire 00a0 &a", "acquire 00b0 &b", "read 00c0 rcu_read_lock", "release 00c0",
                        "release 00b0", "release 00a0", "acquire 00b0 &b", "acquire 00a0 &a",
                        "release 00a0", "release 00b0")
    classes = [("&a", "+.+.", []), ("&b", "+.+.", ["&a"]), ("rcu_read_lock", "....", [])]
    folder = write_state(tmp_path, classes, [["&a"], ["&b"], ["&b", "&a"]])
    evs, annotator = events_of(trace, kstate.load(str(folder)))
    assert evs[1].trylock and not evs[2].check
    status, doc, _ = run(tmp_path, trace, "--lockdep-state", str(folder))
    assert (status, doc["findings"]) == (0, [])
    status, doc, _ = run(tmp_path, trace)
    assert status == 1 and doc["findings"][0]["kind"] == "circular-dependency"


def test_a_held_lock_is_revised_when_only_its_subclass_explains_what_follows(tmp_path):
    trace = ftrace_text("acquire 0010 sb_writers", "acquire 0020 &dir", "acquire 0030 &inode",
                        "release 0030", "release 0020", "release 0010")
    classes = [("sb_writers", "+.+.", ["&dir", "&dir/1"]), ("&dir", "+.+.", []), ("&dir/1", "+.+.", ["&inode"]),
               ("&inode", "+.+.", [])]
    chains = [["sb_writers", "&dir"], ["sb_writers", "&dir/1"], ["sb_writers", "&dir/1", "&inode"]]
    folder = write_state(tmp_path, classes, chains)
    evs, annotator = events_of(trace, kstate.load(str(folder)))
    assert not evs[2].trylock
    assert any("held &dir taken as &dir/1" in n for n in annotator.notes())


# -- rules --------------------------------------------------------------------------------

RULES = """\
# annotation rules (grammars/annotations.lark)
nest &anon_vma->rwsem under &mm->mmap_lock
subclass &rq->__lock by address order
recursive-read tasklist_lock
"""


def test_rules_parse_through_the_shared_grammar():
    rules = AnnotationRules.parse(RULES, "ann")
    assert rules.nest_under == {"&anon_vma->rwsem": ("&mm->mmap_lock", "ann:2")}
    assert rules.subclass_by_address == {"&rq->__lock": "ann:3"}
    assert rules.recursive_read == {"tasklist_lock": "ann:4"}


def test_rules_annotate_without_a_state(tmp_path):
    trace = ftrace_text("acquire 0010 &mm->mmap_lock", "acquire 0031 &anon_vma->rwsem",
                        "acquire 0032 &anon_vma->rwsem", "acquire 00a0 &rq->__lock", "acquire 00b0 &rq->__lock",
                        "read 00c0 tasklist_lock", "read 00c0 tasklist_lock",
                        "release 00c0", "release 00c0", "release 00b0", "release 00a0",
                        "release 0032", "release 0031", "release 0010")
    evs, annotator = events_of(trace, rules=AnnotationRules.parse(RULES, "ann"))
    assert evs[2].nest == ("&mm->mmap_lock", "0x0010")
    assert [ev.subclass for ev in evs[3:5]] == [0, 1]
    assert evs[5].mode == RREAD
    (tmp_path / "ann").write_text(RULES)
    status, doc, _ = run(tmp_path, trace, "--annotations", str(tmp_path / "ann"))
    assert (status, doc["findings"]) == (0, []), doc["findings"]
    assert any("given subclass 1 by rule" in n for n in doc["notes"])
    status, doc, _ = run(tmp_path, trace)
    assert status == 1 and all(f.get("uncertain") for f in doc["findings"])


def test_a_lt_trace_is_left_alone(tmp_path):
    path = tmp_path / "t.lt"
    path.write_text("#lockcheck-trace v1\nT acquire A\nT acquire A\n")
    out = io.StringIO()
    assert main(["check", "--format", "json", "--no-config", str(path)], stdout=out, stderr=io.StringIO()) == 1
    [finding] = json.loads(out.getvalue())["findings"]
    assert "uncertain" not in finding


def test_annotate_is_a_plain_transformer():
    trace = ftrace_text("acquire 00a0 A", "release 00a0")
    evs = list(annotate(ftrace.parse(trace.splitlines(), "t"), None, None))
    assert [ev.op for ev in evs] == ["acquire", "release"]


# -- dumps as inputs ---------------------------------------------------------------------------


def test_usage_chars_become_usage_bits():
    from lockcheck.lockdep.usage import ENABLED_HARDIRQ, ENABLED_SOFTIRQ, USED, USED_IN_SOFTIRQ

    assert kstate.usage_bits("+.?.") == [ENABLED_HARDIRQ, USED_IN_SOFTIRQ, ENABLED_SOFTIRQ, USED]


def test_two_acyclic_dumps_close_a_cycle_together(tmp_path):
    one = tmp_path / "machine1.lockdep"
    two = tmp_path / "machine2.lockdep"
    one.write_text(dump([("A", "+.+.", ["B"]), ("B", "+.+.", [])], [])[0])
    two.write_text(dump([("B", "+.+.", ["A"]), ("A", "+.+.", [])], [])[0])
    for path in (one, two):  # each alone is fine
        out = io.StringIO()
        assert main(["check", "--format", "json", "--no-config", str(path)], stdout=out, stderr=io.StringIO()) == 0
    out = io.StringIO()
    status = main(["check", "--format", "json", "--no-config", str(one), str(two)], stdout=out,
                  stderr=io.StringIO())
    doc = json.loads(out.getvalue())
    assert status == 1
    [finding] = doc["findings"]
    assert finding["kind"] == "circular-dependency" and sorted(finding["cycle"]) == ["A", "B"]
    files = {link["evidence"]["file"] for link in finding["chain"]} | {finding["location"].rsplit(":", 1)[0]}
    assert files == {str(one), str(two)}
    assert any("merged 2 lock classes and 1 dependency of" in n for n in doc["notes"])


def test_a_state_dir_alone_is_an_input(tmp_path):
    folder = write_state(tmp_path, *NESTED_STATE)
    out = io.StringIO()
    assert main(["check", "--format", "json", "--no-config", "--lockdep-state", str(folder)], stdout=out,
                stderr=io.StringIO()) == 0
    assert json.loads(out.getvalue())["findings"] == []


def test_check_needs_some_input():
    err = io.StringIO()
    assert main(["check"], stdout=io.StringIO(), stderr=err) == 2
    assert "give a trace" in err.getvalue()


@pytest.mark.parametrize("boot", ["clean"])
def test_a_real_dump_is_acyclic(boot):
    from testdata import CAPTURES

    folder = CAPTURES / boot
    out = io.StringIO()
    assert main(["check", "--format", "json", "--no-config", str(folder / "lockdep.txt.xz")], stdout=out,
                stderr=io.StringIO()) == 0
