"""Each lockdep rule is written once (`lockcheck.lockdep.rules`): change one, and every path
changes its verdict the same way.

The paths: the checker alone, the pure `.lt` fast path, ftrace and JSON Lines (their fast
path), `--jobs 2` (parts and merge), through the command as users run it.  Each test
mutates a rule with monkeypatch, runs every path, and asserts they agree with each other
and differ from the unmutated verdict -- so a path that kept a copy of the rule fails.

The compiled `.lt` core reads the boolean rules as tables `fast_lt._rule_tables` makes from
`rules` at the start of each run, and the depth limit from `rules`; it is included in every
mutation.  Its traces are built so that the compiled core's own decision matters (a stale table
makes it disagree: `test_a_stale_table_would_be_seen`).  A chain-key rule it cannot follow in C
makes it step aside for the pure path.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from lockcheck.commands.cli import main
from lockcheck.lockdep import rules
from lockcheck.lockdep.checker import check_events
from lockcheck.readers.lt import parse

# A trylock's dependencies: lockdep adds none for the trylock itself (validate_chain is not
# called).  T0 makes both classes known with their usage (so T1's lines are fast-path hits
# unless the rule says otherwise); T1 takes X then tries Y; T2 takes Y then X.
TRYLOCK = [
    ("T0", "acquire", "Y", False), ("T0", "release", "Y", False),
    ("T0", "acquire", "X", False), ("T0", "release", "X", False),
    ("T1", "acquire", "X", False), ("T1", "acquire", "Y", True), ("T1", "release", "Y", False),
    ("T1", "release", "X", False),
    ("T3", "acquire", "X", False), ("T3", "acquire", "Y", True), ("T3", "release", "Y", False),
    ("T3", "release", "X", False),
    ("T2", "acquire", "Y", False), ("T2", "acquire", "X", False), ("T2", "release", "X", False),
    ("T2", "release", "Y", False),
]


def _deep(depth: int) -> list[tuple]:
    """One task nesting `depth` locks, twice (the second time every chain is cached)."""
    rows = []
    for _ in range(2):
        rows += [("T1", "acquire", f"L{i}", False) for i in range(depth)]
        rows += [("T1", "release", f"L{i}", False) for i in reversed(range(depth))]
    return rows


def as_lt(rows: list[tuple]) -> str:
    return "".join(f"{task} {op} {lock}{' try' if trylock else ''}\n" for task, op, lock, trylock in rows)


def as_jsonl(rows: list[tuple]) -> str:
    return "".join(json.dumps({"task": task, "op": op, "lock": lock, **({"try": True} if trylock else {})}) + "\n"
                   for task, op, lock, trylock in rows)


def as_ftrace(rows: list[tuple]) -> str:
    pids = {}
    lines = ["# tracer: nop\n"]
    for n, (task, op, lock, trylock) in enumerate(rows):
        pid = pids.setdefault(task, 100 + len(pids))
        stamp = f"{1 + n / 1000:.6f}"
        if op == "acquire":
            lines.append(f"  t-{pid} [000] ..... {stamp}: lock_acquire: 00000000{pid:04x} {'try ' if trylock else ''}{lock}\n")
        else:
            lines.append(f"  t-{pid} [000] ..... {stamp}: lock_release: 00000000{pid:04x} {lock}\n")
    return "".join(lines)


def verdicts(tmp_path: Path, rows: list[tuple], monkeypatch: pytest.MonkeyPatch, compiled: bool) -> dict:
    """Every path's finding kinds for the trace `rows`."""
    found = {"checker": sorted(f.kind for f in check_events(parse(as_lt(rows).splitlines()))[0])}
    files = {"lt": as_lt(rows), "jsonl": as_jsonl(rows), "ftrace": as_ftrace(rows)}
    for name, text in files.items():
        path = tmp_path / f"t.{ 'txt' if name == 'ftrace' else name}"
        path.write_text(text)
        runs = {"": [], "-jobs2": ["--jobs", "2"]}
        for suffix, extra in runs.items():
            # (`.lt` and ftrace have compiled cores: `_speedups.LineFilter`, `_capturecore.CaptureFilter`)
            envs = {"-pure": "1"} if not compiled or name == "jsonl" else {"-pure": "1", "-compiled": "0"}
            for tag, pure in envs.items():
                monkeypatch.setenv("LOCKCHECK_PURE", pure)
                out, err = io.StringIO(), io.StringIO()
                fmt = {"lt": "lt", "jsonl": "jsonl", "ftrace": "ftrace"}[name]
                status = main(["check", "--format", "json", "--input-format", fmt, *extra, str(path)],
                              stdout=out, stderr=err)
                assert status in (0, 1), err.getvalue()
                kinds = sorted(f["kind"] for f in json.loads(out.getvalue())["findings"])
                found[f"{name}{suffix}{tag}"] = kinds
    return found


def agreed(found: dict) -> list[str]:
    kinds = {tuple(v) for v in found.values()}
    assert len(kinds) == 1, f"the paths disagree: {found}"
    return list(kinds.pop())


def test_the_trylock_rule_is_read_by_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    kernel = agreed(verdicts(tmp_path, TRYLOCK, monkeypatch, compiled=True))
    assert kernel == []  # a trylock adds no dependency: no cycle
    # the mutation: trylocks validated like blocking acquisitions (`validate_chain` called)
    monkeypatch.setattr(rules, "validates_chain", lambda trylock, check: bool(check))
    mutated = agreed(verdicts(tmp_path, TRYLOCK, monkeypatch, compiled=True))
    assert mutated == ["circular-dependency"]


@pytest.mark.parametrize("limit", [6, 9])
def test_the_depth_limit_is_read_by_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, limit: int) -> None:
    rows = _deep(8)
    assert agreed(verdicts(tmp_path, rows, monkeypatch, compiled=True)) == []
    monkeypatch.setattr(rules, "MAX_LOCK_DEPTH", limit)
    mutated = agreed(verdicts(tmp_path, rows, monkeypatch, compiled=True))
    assert mutated == (["lock-depth-exceeded"] if limit <= 8 else [])


# -- the wait-context rules (`rules.task_wait_context`, `rules.wait_context_checked`) ---------------
# every path of tests/test_wait_context.py: the checker, `.lt` pure and compiled, JSON Lines, --jobs 2

def test_the_threaded_hardirq_rule_is_read_by_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_wait_context import agreed as same, every_path, row_trace

    text = row_trace("HARDIRQ", "spin")  # a spinlock_t in a threaded hardirq: allowed
    assert same(every_path(tmp_path, text, monkeypatch)) == []
    # the mutation: a threaded handler is a hardirq like any other (spin)
    original = rules.task_wait_context
    monkeypatch.setattr(rules, "task_wait_context", lambda hard, soft, threaded: original(hard, soft, False))
    assert same(every_path(tmp_path, text, monkeypatch)) == ["invalid-wait-context"]


def test_the_trylock_wait_rule_is_read_by_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_wait_context import agreed as same, every_path

    text = "".join(f"T{n} acquire raw wait=2:2\nT{n} acquire m wait=4:4 try\nT{n} release m\nT{n} release raw\n"
                   for n in range(3))
    assert same(every_path(tmp_path, text, monkeypatch)) == []
    monkeypatch.setattr(rules, "wait_context_checked", lambda inner, trylock: bool(inner))
    assert same(every_path(tmp_path, text, monkeypatch)) == ["invalid-wait-context"]


# -- usage_skip() and cmp_fn (`rules.usage_skip`, `rules.cmp_fn_orders`): tests/test_selftest_local_lock.py

def test_the_usage_skip_rule_is_read_by_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_selftest_local_lock import ROWS, _local_lock
    from test_wait_context import agreed as same, every_path

    text = _local_lock(ROWS["local_lock_2"][0])  # the kernel's SUCCESS: a local_lock is skipped
    assert same(every_path(tmp_path, text, monkeypatch)) == []
    monkeypatch.setattr(rules, "usage_skip", lambda lock_type, wait_inner: False)
    assert same(every_path(tmp_path, text, monkeypatch)) == ["irq-lock-inversion"]


def test_the_cmp_fn_rule_is_read_by_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_selftest_local_lock import _double
    from test_wait_context import agreed as same, every_path

    text = _double("0x10", "0x20")
    assert same(every_path(tmp_path, text, monkeypatch)) == []
    monkeypatch.setattr(rules, "cmp_fn_orders", lambda cmp, subclass, prev, nxt: False)
    assert same(every_path(tmp_path, text, monkeypatch)) == ["recursive-locking"]


def test_the_softirq_rt_rule_is_read_by_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_preempt_rt import _text, lt_paths
    from test_wait_context import agreed as same
    from lockcheck.readers import lockdep_keys as more

    text = _text(more.RT_HEADER)
    assert same(lt_paths(tmp_path, text, monkeypatch)) == []
    monkeypatch.setattr(rules, "softirq_context_tracked", lambda preempt_rt: True)
    assert same(lt_paths(tmp_path, text, monkeypatch)) == ["inconsistent-lock-state", "invalid-wait-context"]


# -- the irq-context chain head (`rules.separate_irq_context`), read by the compiled core too -----
# T5 caches the chain [B] in a hardirq; T1 then takes B in a hardirq above A.  Lockdep starts a
# new chain there (a hit on T5's chain, no A -> B); without the rule it validates A -> B, and T2's
# B -> A closes a cycle.

def _irq_head_trace() -> str:
    return ("T5 hardirq-enter\nT5 acquire B\nT5 release B\nT5 hardirq-exit\n"
            "T1 acquire A\nT1 hardirq-enter\nT1 acquire B\nT1 release B\nT1 hardirq-exit\nT1 release A\n"
            "T2 irqs-off\nT2 acquire B\nT2 acquire A\nT2 release A\nT2 release B\nT2 irqs-on\n")


def test_the_irq_context_head_rule_is_read_by_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_wait_context import agreed as same, every_path

    assert same(every_path(tmp_path, _irq_head_trace(), monkeypatch)) == ["irq-lock-inversion"]
    monkeypatch.setattr(rules, "separate_irq_context", lambda top, ctx: False)
    assert same(every_path(tmp_path, _irq_head_trace(), monkeypatch)) == ["circular-dependency"]


@pytest.mark.parametrize("rule", ["validates_chain", "separate_irq_context"])
def test_a_stale_table_would_be_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, rule: str) -> None:
    """The two tests above have teeth for the compiled core: given the unmutated tables while the
    rule is mutated, it disagrees with the other paths."""
    from lockcheck.engine import fast_lt
    from test_wait_context import every_path

    if not fast_lt.compiled():
        pytest.skip("no compiled core to hold")
    kernel_tables = fast_lt._rule_tables()
    monkeypatch.setattr(fast_lt, "_rule_tables", lambda: kernel_tables)
    if rule == "validates_chain":
        monkeypatch.setattr(rules, "validates_chain", lambda trylock, check: bool(check))
        text = as_lt(TRYLOCK)
    else:
        monkeypatch.setattr(rules, "separate_irq_context", lambda top, ctx: False)
        text = _irq_head_trace()
    found = every_path(tmp_path, text, monkeypatch)
    assert {tuple(kinds) for key, kinds in found.items() if key.endswith("0")} != {tuple(found["checker"])}


# T1 tries Y alone first (its line's pieces are then in the capture filter's caches), then under X: that
# second trylock is the compiled capture filter's to decide, and whether it is validated decides X -> Y.
TRYLOCK_AGAIN = [
    ("T0", "acquire", "Y", False), ("T0", "release", "Y", False),
    ("T0", "acquire", "X", False), ("T0", "release", "X", False),
    ("T1", "acquire", "Y", True), ("T1", "release", "Y", False),
    ("T1", "acquire", "X", False), ("T1", "acquire", "Y", True), ("T1", "release", "Y", False),
    ("T1", "release", "X", False),
    ("T2", "acquire", "Y", False), ("T2", "acquire", "X", False), ("T2", "release", "X", False),
    ("T2", "release", "Y", False),
]


def test_a_stale_capture_table_would_be_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The capture filter (`_capturecore.CaptureFilter`) decides with the tables `capture_filter.rule_tables`
    makes from `rules` at the start of a run: given the unmutated ones while the trylock rule is mutated,
    its ftrace verdict differs from every other path's (so the mutation tests above hold it too)."""
    from lockcheck.engine import capture_filter

    if not capture_filter.compiled():
        pytest.skip("no compiled capture filter to hold")
    assert agreed(verdicts(tmp_path, TRYLOCK_AGAIN, monkeypatch, compiled=True)) == []
    kernel_tables = capture_filter.rule_tables()
    monkeypatch.setattr(rules, "validates_chain", lambda trylock, check: bool(check))
    assert agreed(verdicts(tmp_path, TRYLOCK_AGAIN, monkeypatch, compiled=True)) == ["circular-dependency"]
    monkeypatch.setattr(capture_filter, "rule_tables", lambda: kernel_tables)
    stale = verdicts(tmp_path, TRYLOCK_AGAIN, monkeypatch, compiled=True)
    assert stale["ftrace-compiled"] == [] and stale["ftrace-pure"] == ["circular-dependency"]


def test_the_capture_usage_table_follows_the_rule(monkeypatch: pytest.MonkeyPatch) -> None:
    """`rules.acquire_usage` is read into the capture filter's usage table: a mutation moves it."""
    from lockcheck.engine import capture_filter

    before = capture_filter.rule_tables()
    original = rules.acquire_usage
    monkeypatch.setattr(rules, "acquire_usage", lambda needs, read, trylock, check, hardirqs_off: (
        rules.nocheck_usage(read) if trylock else original(needs, read, trylock, check, hardirqs_off)))
    after = capture_filter.rule_tables()
    assert after is not None and after[3] != before[3]
    assert after[3][6 + 1] == (-1, rules.nocheck_usage(0))  # checked, read 0, trylock


def test_a_usage_rule_no_table_carries_sends_the_capture_filter_aside(monkeypatch: pytest.MonkeyPatch) -> None:
    from lockcheck.engine import capture_filter

    assert capture_filter.rule_tables() is not None
    monkeypatch.setattr(rules, "acquire_usage", lambda needs, read, trylock, check, hardirqs_off: needs[0] | needs[1])
    assert capture_filter.rule_tables() is None


def test_the_nest_lock_merge_rule_is_read_by_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from test_wait_context import agreed as same, every_path

    def take_all(task: str, n: int) -> str:  # mm_take_all_locks(): n of one class under a nest lock
        return (f"{task} acquire N\n" + "".join(f"{task} acquire A@{i} nest=N\n" for i in range(n))
                + "".join(f"{task} release A@{i}\n" for i in range(n)) + f"{task} release N\n")

    text = take_all("T1", 2) + take_all("T2", 60)
    assert same(every_path(tmp_path, text, monkeypatch)) == []
    monkeypatch.setattr(rules, "nest_lock_merges", lambda depth, top, cls, nest: False)
    assert same(every_path(tmp_path, text, monkeypatch)) == ["lock-depth-exceeded"]


def test_a_chain_key_rule_the_core_cannot_follow_sends_it_aside(tmp_path: Path,
                                                              monkeypatch: pytest.MonkeyPatch) -> None:
    from lockcheck.engine import fast_lt
    from test_wait_context import agreed as same, every_path

    assert same(every_path(tmp_path, _irq_head_trace(), monkeypatch)) == ["irq-lock-inversion"]
    monkeypatch.setattr(rules, "iterate_chain_key", lambda key, cls, read: hash((key, cls, read, "other")))
    monkeypatch.setenv("LOCKCHECK_PURE", "0")
    assert not fast_lt.compiled()
    assert same(every_path(tmp_path, _irq_head_trace(), monkeypatch)) == ["irq-lock-inversion"]


# -- hardirqs off (`rules.hardirqs_off`, `rules.HARDIRQS_OFF_NEEDS`), which no table carries -------
# T1 uses L in a hardirq; T2 takes it with hardirqs disabled: lockdep marks no HARDIRQ-ON there.

_HARDIRQS_OFF_TRACE = ("T1 hardirq-enter\nT1 acquire L\nT1 release L\nT1 hardirq-exit\n"
                       "T2 irqs-off\nT2 acquire L\nT2 release L\nT2 irqs-on\n" * 2)


def test_the_hardirqs_off_rule_is_read_by_every_path_and_sends_the_cores_aside(
        tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    from lockcheck.engine import fast_lt
    from test_wait_context import agreed as same, every_path

    assert rules.usage_rules_as_compiled()
    assert same(every_path(tmp_path, _HARDIRQS_OFF_TRACE, monkeypatch)) == []
    # the mutation: an acquisition never counts as taken with hardirqs off
    monkeypatch.setattr(rules, "hardirqs_off", lambda hardirqs_enabled, hardirq_depth: False)
    assert not rules.usage_rules_as_compiled()
    monkeypatch.setenv("LOCKCHECK_PURE", "0")
    assert not fast_lt.compiled_cores_allowed()  # the cores' `rules_hardirqs_off` would no longer be the rule
    assert same(every_path(tmp_path, _HARDIRQS_OFF_TRACE, monkeypatch)) == ["inconsistent-lock-state"]


# -- the plugin's hit path (python/_tracked.c) reads the same tables ---------------------------

def _plugin(mode: str, pure: bool) -> dict:
    import os
    import subprocess
    import sys

    script = Path(__file__).parent / "data" / "tracked" / "rule_mutation.py"
    root = Path(__file__).resolve().parent.parent
    env = dict(os.environ, PYTHONPATH=str(root), LOCKCHECK_PURE="1" if pure else "0", PYTHONHASHSEED="0")
    proc = subprocess.run([sys.executable, str(script), mode], env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stderr[-2000:]
    return json.loads(proc.stdout)


def test_the_trylock_rule_is_read_by_the_plugin_compiled_and_pure() -> None:
    for pure in (False, True):
        assert _plugin("kernel", pure)["kinds"] == []
        assert _plugin("mutated", pure)["kinds"] == ["circular-dependency"]
    stale = _plugin("stale", pure=False)
    if stale["core"]:  # the compiled core given the kernel's tables disagrees: the test sees it
        assert stale["kinds"] == []


# -- the irq-state transitions (`rules.irq_transition`), read by both compiled cores too -----------
# T0 takes A in a softirq (A is softirq-safe); T1 holds A with hardirqs and softirqs off and turns
# softirqs on before it lets A go.  `lockdep_softirqs_on()` marks the held locks softirq-unsafe only
# when hardirqs are on too: nothing to report.  The mutation marks them whatever the hardirqs, and A
# is inconsistent -- which a compiled core sees only if it reads the rule (`apply_irq`, `irq_here`).

def _softirqs_on_lt() -> str:
    # (T2 does it first with B, no softirq-safe lock: the compiled cores take a line whose text they saw)
    text = "T0 softirq-enter\nT0 acquire A\nT0 release A\nT0 softirq-exit\n"
    for n, lock in ((2, "B"), (1, "A")):
        text += (f"T{n} acquire C\nT{n} release C\nT{n} irqs-off\nT{n} softirqs-off\nT{n} acquire {lock}\n"
                 f"T{n} softirqs-on\nT{n} release {lock}\nT{n} irqs-on\n")
    return text


def _softirqs_on_ftrace() -> str:
    rows = [(100, "..s..", "acquire", "A"), (100, "..s..", "release", "A")]
    for pid, lock in ((102, "B"), (101, "A")):
        rows += [(pid, ".....", "acquire", "C"), (pid, ".....", "release", "C"), (pid, "D....", "acquire", lock),
                 (pid, "d....", "release", lock), (pid, ".....", "acquire", "C"), (pid, ".....", "release", "C")]
    return "# tracer: nop\n" + "".join(
        f"  t-{pid} [000] {flags} {1 + n / 1000:.6f}: lock_{op}: 00000000000{lock} {lock}\n"
        for n, (pid, flags, op, lock) in enumerate(rows))


def _irq_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> dict:
    """Every path's finding kinds: `every_path` of the `.lt` trace, and the ftrace capture's, pure and
    compiled, in one process and with `--jobs 2`."""
    from test_wait_context import every_path

    found = every_path(tmp_path, _softirqs_on_lt(), monkeypatch)
    path = tmp_path / "t.txt"
    path.write_text(_softirqs_on_ftrace())
    for jobs in ([], ["--jobs", "2"]):
        for pure in ("1", "0"):
            monkeypatch.setenv("LOCKCHECK_PURE", pure)
            out, err = io.StringIO(), io.StringIO()
            status = main(["check", "--format", "json", "--input-format", "ftrace", *jobs, str(path)],
                          stdout=out, stderr=err)
            assert status in (0, 1), err.getvalue()
            found[f"ftrace{jobs}{pure}"] = sorted(f["kind"] for f in json.loads(out.getvalue())["findings"])
    return found


def _softirqs_on_marks_always(monkeypatch: pytest.MonkeyPatch) -> None:
    from lockcheck.lockdep.usage import ENABLED_SOFTIRQ

    original = rules.irq_transition

    def mutated(op: str, in_hardirq: bool, in_softirq: bool, hardirqs_enabled: bool, softirqs_enabled: bool):
        t = original(op, in_hardirq, in_softirq, hardirqs_enabled, softirqs_enabled)
        if op == "softirqs-on" and not softirqs_enabled and not in_hardirq and not in_softirq:
            t = t._replace(marks=1 << ENABLED_SOFTIRQ)
        return t

    monkeypatch.setattr(rules, "irq_transition", mutated)


def test_the_irq_transition_rule_is_read_by_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert agreed(_irq_paths(tmp_path, monkeypatch)) == []
    _softirqs_on_marks_always(monkeypatch)
    assert agreed(_irq_paths(tmp_path, monkeypatch)) == ["inconsistent-lock-state"]


def _stale_tables(monkeypatch: pytest.MonkeyPatch, mutate) -> None:
    """Both compiled cores given the rule tables of the kernel's rules, then the rule mutated."""
    from lockcheck.engine import capture_filter, fast_lt

    if not fast_lt.compiled() or not capture_filter.compiled():
        pytest.skip("no compiled cores to hold")
    lt_tables, capture_tables = fast_lt._rule_tables(), capture_filter.rule_tables()
    mutate(monkeypatch)
    monkeypatch.setattr(fast_lt, "_rule_tables", lambda: lt_tables)
    monkeypatch.setattr(capture_filter, "rule_tables", lambda: capture_tables)


def test_a_stale_irq_table_would_be_seen(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    """The test above has teeth for both compiled cores: given the kernel's irq transition table while
    the rule is mutated, the `.lt` core and the capture filter each miss what every other path reports."""
    _stale_tables(monkeypatch, _softirqs_on_marks_always)
    found = _irq_paths(tmp_path, monkeypatch)
    compiled = {key for key in found if key.endswith("0")}  # (JSON Lines runs through the `.lt` core)
    assert {tuple(kinds) for key, kinds in found.items() if key not in compiled} == {("inconsistent-lock-state",)}
    assert {tuple(found[key]) for key in compiled} == {()} and {"t.lt[]0", "ftrace[]0"} <= compiled


# A second mutation, of the state an op leaves rather than the bits it marks: `hardirq-exit` ends no
# handler.  B, taken after T0's handler returned, is then taken in a hardirq, and T1 takes it with
# hardirqs on: inconsistent.  (T2 does it all first with C: lines the compiled cores saw.)

def _hardirq_exit_lt() -> str:
    text = ""
    for n, lock in ((2, "C"), (0, "B")):
        text += (f"T{n} hardirq-enter\nT{n} acquire A\nT{n} release A\nT{n} hardirq-exit\n"
                 f"T{n} acquire {lock}\nT{n} release {lock}\n")
    return text + "T1 irqs-off\nT1 irqs-on\nT1 acquire B\nT1 release B\n"


def _hardirq_exit_ftrace() -> str:
    rows = []
    for pid, lock in ((102, "C"), (100, "B")):
        rows += [(pid, "d.h..", "acquire", "A"), (pid, "d.h..", "release", "A"), (pid, ".....", "acquire", lock),
                 (pid, ".....", "release", lock)]
    rows += [(101, ".....", "acquire", "B"), (101, ".....", "release", "B")]
    return "# tracer: nop\n" + "".join(
        f"  t-{pid} [000] {flags} {1 + n / 1000:.6f}: lock_{op}: 00000000000{lock} {lock}\n"
        for n, (pid, flags, op, lock) in enumerate(rows))


def _hardirq_exit_stays(monkeypatch: pytest.MonkeyPatch) -> None:
    original = rules.irq_transition

    def mutated(op: str, in_hardirq: bool, in_softirq: bool, hardirqs_enabled: bool, softirqs_enabled: bool):
        t = original(op, in_hardirq, in_softirq, hardirqs_enabled, softirqs_enabled)
        return t._replace(hardirq_step=0, refresh=False) if op == "hardirq-exit" and in_hardirq else t

    monkeypatch.setattr(rules, "irq_transition", mutated)


def _hardirq_exit_paths(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> tuple[dict, dict]:
    """`every_path` of the `.lt` trace; the ftrace capture's kinds, pure ("1") and compiled ("0")."""
    from test_wait_context import every_path

    found = every_path(tmp_path, _hardirq_exit_lt(), monkeypatch)
    path = tmp_path / "t.txt"
    path.write_text(_hardirq_exit_ftrace())
    captured = {}
    for pure in ("1", "0"):
        monkeypatch.setenv("LOCKCHECK_PURE", pure)
        out, err = io.StringIO(), io.StringIO()
        status = main(["check", "--format", "json", "--input-format", "ftrace", str(path)], stdout=out, stderr=err)
        assert status in (0, 1), err.getvalue()
        captured[pure] = sorted(f["kind"] for f in json.loads(out.getvalue())["findings"])
    return found, captured


def test_the_irq_state_an_op_leaves_is_read_by_every_path(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    found, captured = _hardirq_exit_paths(tmp_path, monkeypatch)
    assert agreed(found) == [] and captured == {"1": [], "0": []}
    _hardirq_exit_stays(monkeypatch)
    found, captured = _hardirq_exit_paths(tmp_path, monkeypatch)
    assert agreed(found) == ["inconsistent-lock-state"]
    # (the capture also warns: its flags say the handler ended, its state says not)
    assert captured["1"] == captured["0"] and "inconsistent-lock-state" in captured["0"]


def test_a_stale_table_of_the_state_an_op_leaves_would_be_seen(tmp_path: Path,
                                                                monkeypatch: pytest.MonkeyPatch) -> None:
    _stale_tables(monkeypatch, _hardirq_exit_stays)
    found, captured = _hardirq_exit_paths(tmp_path, monkeypatch)
    assert {found[key] == [] for key in found if key.endswith("0")} == {True}
    assert {tuple(found[key]) for key in found if not key.endswith("0")} == {("inconsistent-lock-state",)}
    assert "inconsistent-lock-state" in captured["1"] and "inconsistent-lock-state" not in captured["0"]


def test_the_irq_table_is_the_rule_over_its_domain(monkeypatch: pytest.MonkeyPatch) -> None:
    """Each entry of `irq_transition_table` decodes to `irq_transition` of its op and state; a transition
    no entry can carry sends the compiled cores aside."""
    from lockcheck.engine import fast_lt

    table = rules.irq_transition_table()
    assert table is not None and len(table) == 128
    for index, entry in enumerate(table):
        op, state = rules.IRQ_TRANSITION_OPS[index >> 4], index & 15
        t = rules.irq_transition(op, bool(state & 8), bool(state & 4), bool(state & 2), bool(state & 1))
        assert t is not None
        step = {rules.IRQT_HARD_IN: 1, rules.IRQT_HARD_OUT: -1, 0: 0}
        assert step[entry & (rules.IRQT_HARD_IN | rules.IRQT_HARD_OUT)] == t.hardirq_step
        assert {rules.IRQT_SOFT_IN: 1, rules.IRQT_SOFT_OUT: -1, 0: 0}[
            entry & (rules.IRQT_SOFT_IN | rules.IRQT_SOFT_OUT)] == t.softirq_step
        assert (bool(entry & rules.IRQT_HE), bool(entry & rules.IRQT_SE)) == (t.hardirqs_enabled, t.softirqs_enabled)
        assert entry >> rules.IRQT_MARKS_SHIFT == t.marks
        assert bool(entry & rules.IRQT_RECORD) == t.recorded and bool(entry & rules.IRQT_REFRESH) == t.refresh
        assert bool(entry & rules.IRQT_CHECKER) == bool(t.note)
    original = rules.irq_transition
    monkeypatch.setattr(rules, "irq_transition", lambda op, *state: (
        original(op, *state)._replace(hardirq_step=2) if op == "hardirq-enter" else original(op, *state)))
    assert rules.irq_transition_table() is None
    monkeypatch.setenv("LOCKCHECK_PURE", "0")
    assert not fast_lt.compiled_cores_allowed()
