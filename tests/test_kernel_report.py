"""How far a boot's lockdep state is trusted: never past the kernel's own report.

Lockdep adds a chain to its cache *before* validating it
(`validate_chain` -> `lookup_chain_cache_add` -> `check_deadlock`), so the
chain of the acquisition it reported is in /proc/lockdep_chains too, and
after its first report it turns itself off (`debug_locks: 0`) and records
nothing more.  These hand-made boots check that the state never explains a
finding away that the kernel made, and that a capture going on after the
report is checked as without a state.
"""

from __future__ import annotations

import io
import json

import pytest

from lockcheck.kernel import bootfiles as kboot, state as kstate
from lockcheck.commands.cli import main

HEADER = "# tracer: nop\n#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"


def trace(*rows: tuple) -> str:
    """ftrace lines from (ts, comm, pid, op, address, name) rows; op is acquire/release."""
    lines = []
    for ts, comm, pid, op, addr, name in rows:
        event = "lock_acquire" if op == "acquire" else "lock_release"
        lines.append(f"{comm:>16}-{pid:<7} [000] ...1. {ts:12.6f}: {event}: {addr} {name}")
    return HEADER + "\n".join(lines) + "\n"


def proc_dumps(classes: list[tuple[str, list[str]]], chains: list[list[str]]) -> tuple[str, str]:
    keys = {name: f"{i + 1:016x}" for i, (name, _) in enumerate(classes)}
    lockdep = ["all lock classes:"]
    for name, after in classes:
        lockdep.append(f"{keys[name]} FD:    1 BD:    1 +.+.: {name}")
        lockdep += [f" -> [{keys[a]}] {a}" for a in after]
        lockdep.append("")
    text = ["all lock chains:"]
    for chain in chains:
        text += ["irq_context: 0"] + [f"[{keys[name]}] {name}" for name in chain] + [""]
    return "\n".join(lockdep) + "\n", "\n".join(text) + "\n"


def report_log(ts: float, title: str, task: str, lock: str) -> str:
    """A dmesg with one lockdep report, as lockdep prints it (the banner is line 3)."""
    body = ["=" * 44, f"WARNING: {title}", "6.1.0 #1 Not tainted", "-" * 44,
            f"{task} is trying to acquire lock:", f"ffff888003a0c0a8 ({lock}){{+.+.}}-{{3:3}}, at: demo+0x1c/0x30",
            "", "but task is already holding lock:"]
    return f"[{ts - 5:12.6f}] Linux version 6.1.0\n" + "".join(f"[{ts:12.6f}] {line}\n" for line in body)


def boot(tmp_path, classes, chains, *, debug_locks=None, log=None, name="boot"):
    folder = tmp_path / name
    folder.mkdir()
    lockdep, chains_text = proc_dumps(classes, chains)
    (folder / "lockdep.txt").write_text(lockdep)
    (folder / "lockdep_chains.txt").write_text(chains_text)
    if debug_locks is not None:
        (folder / "lockdep_stats.txt").write_text(f" lock-classes:   {len(classes)} [max: 8192]\n"
                                                  f" debug_locks:    {debug_locks}\n")
    if log is not None:
        (folder / "dmesg.txt").write_text(log)
    return folder


def check(tmp_path, text: str, *args: str) -> tuple[int, dict]:
    path = tmp_path / "trace.ftrace"
    path.write_text(text)
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--format", "json", "--no-progress", "--no-config", str(path), *args],
                  stdout=out, stderr=err)
    assert status != 2, err.getvalue()
    return status, json.loads(out.getvalue())


# -- a module takes eight objects of one class under an outer mutex, without nest_lock ---------

OUTER, OBJ = "&outer->mutex", "&obj->mutex"
TAKE_ALL = trace(
    (5.0, "demo_ba", 72, "acquire", "0100", OUTER),
    *[(5.0 + i / 1000, "demo_ba", 72, "acquire", f"02{i}0", OBJ) for i in range(1, 9)],
    *[(5.1 + i / 1000, "demo_ba", 72, "release", f"02{i}0", OBJ) for i in range(1, 9)],
    (5.2, "demo_ba", 72, "release", "0100", OUTER),
)
# the kernel validated [outer, obj], then added [outer, obj, obj] and reported it
TAKE_ALL_STATE = ([(OUTER, [OBJ]), (OBJ, [])], [[OUTER], [OUTER, OBJ], [OUTER, OBJ, OBJ]])
RECURSIVE_LOG = report_log(5.0025, "possible recursive locking detected", "demo_ba/72", OBJ)


def test_the_kernels_report_is_kept_when_its_log_says_so(tmp_path):
    folder = boot(tmp_path, *TAKE_ALL_STATE, debug_locks=0, log=RECURSIVE_LOG)
    status, doc = check(tmp_path, TAKE_ALL, "--lockdep-state", str(folder))
    assert status == 1
    [finding] = doc["findings"]
    assert (finding["kind"], finding["lock"], finding["task"]) == ("recursive-locking", OBJ, "demo_ba/72")
    # the kernel made it too: certain, and pointing at the kernel's own report
    assert "uncertain" not in finding
    assert finding["details"]["kernel_report"] == f"{folder / 'dmesg.txt'}:3"
    assert any("reported 'possible recursive locking detected' by demo_ba/72" in n for n in doc["notes"])
    assert not any("given nest_lock" in n for n in doc["notes"])


def test_a_chain_alone_does_not_prove_the_kernel_accepted_a_repeated_class(tmp_path):
    folder = boot(tmp_path, *TAKE_ALL_STATE)  # no lockdep_stats, no dmesg
    status, doc = check(tmp_path, TAKE_ALL, "--lockdep-state", str(folder))
    assert status == 1
    [finding] = doc["findings"]
    assert finding["kind"] == "recursive-locking" and "adds a chain before validating it" in finding["uncertain"]
    # and it may have been the report: nothing after it is taken from the state (no lost trylocks)
    assert not any("taken as trylocks" in n for n in doc["notes"])
    assert any("may have been a report" in n for n in doc["notes"])


def test_lockdep_off_at_an_unknown_point_means_no_state(tmp_path):
    folder = boot(tmp_path, *TAKE_ALL_STATE, debug_locks=0)
    status, doc = check(tmp_path, TAKE_ALL, "--lockdep-state", str(folder))
    assert status == 1 and doc["findings"][0]["kind"] == "recursive-locking"
    assert doc["findings"][0]["uncertain"]
    assert any("debug_locks: 0" in n and "was not used" in n for n in doc["notes"])


def test_a_lockdep_that_stayed_on_accepted_the_chain(tmp_path):
    """The same chains with lockdep still on: the repeat had a nest_lock, as in mm_take_all_locks()."""
    folder = boot(tmp_path, *TAKE_ALL_STATE, debug_locks=1)
    status, doc = check(tmp_path, TAKE_ALL, "--lockdep-state", str(folder))
    assert (status, doc["findings"]) == (0, [])
    assert any(f"of {OBJ} given nest_lock {OUTER}" in n for n in doc["notes"])


# -- a capture that goes on after the kernel's report ----------------------------------------

AFTER = trace(
    (5.0, "demo_ba", 72, "acquire", "0100", OUTER),
    (5.001, "demo_ba", 72, "acquire", "0210", OBJ),
    (5.002, "demo_ba", 72, "acquire", "0220", OBJ),
    (5.003, "demo_ba", 72, "release", "0220", OBJ),
    (5.004, "demo_ba", 72, "release", "0210", OBJ),
    (5.005, "demo_ba", 72, "release", "0100", OUTER),
    # lockdep is off from here on: no chain records what follows
    (6.0, "worker", 80, "acquire", "0a00", "&a->lock"),
    (6.001, "worker", 80, "acquire", "0b00", "&b->lock"),
    (6.002, "worker", 80, "release", "0b00", "&b->lock"),
    (6.003, "worker", 80, "release", "0a00", "&a->lock"),
    (6.1, "other", 81, "acquire", "0b00", "&b->lock"),
    (6.101, "other", 81, "acquire", "0a00", "&a->lock"),
    (6.102, "other", 81, "release", "0a00", "&a->lock"),
    (6.103, "other", 81, "release", "0b00", "&b->lock"),
    # a repeated class the chains show as accepted, from an earlier part of the boot: after the
    # report the state says nothing, so it is what an annotation could explain, as without state
    (7.0, "kworker", 90, "acquire", "0c00", "&c->lock"),
    (7.001, "kworker", 90, "acquire", "0c10", "&c->lock"),
    (7.002, "kworker", 90, "release", "0c10", "&c->lock"),
    (7.003, "kworker", 90, "release", "0c00", "&c->lock"),
)
AFTER_STATE = ([(OUTER, [OBJ]), (OBJ, []), ("&a->lock", []), ("&b->lock", []), ("&c->lock", [])],
               [[OUTER], [OUTER, OBJ], [OUTER, OBJ, OBJ], ["&c->lock"], ["&c->lock", "&c->lock"]])


def test_after_the_report_the_capture_is_checked_without_the_state(tmp_path):
    log = report_log(5.0025, "possible recursive locking detected", "demo_ba/72", OBJ)
    folder = boot(tmp_path, *AFTER_STATE, debug_locks=0, log=log)
    status, doc = check(tmp_path, AFTER, "--lockdep-state", str(folder))
    kinds = sorted((f["kind"], f["lock"]) for f in doc["findings"])
    # the kernel's report, and what it could no longer see: not relabelled as lost trylocks
    assert kinds == [("circular-dependency", "&a->lock"), ("recursive-locking", "&c->lock"), ("recursive-locking", OBJ)]
    by_lock = {f["lock"]: f for f in doc["findings"]}
    assert "uncertain" not in by_lock[OBJ] and "uncertain" not in by_lock["&a->lock"]
    assert "nest_lock annotations" in by_lock["&c->lock"]["uncertain"]
    assert not any("taken as trylocks" in n for n in doc["notes"])
    cut = next(n for n in doc["notes"] if "turned lockdep off" in n)
    assert "was used up to" in cut and "trace.ftrace:" in cut


def test_before_the_report_the_state_still_resolves(tmp_path):
    """The same boot: the acquisitions before the report are resolved from the state."""
    early = trace(
        (1.0, "init", 1, "acquire", "0a00", "&a->lock"),
        (1.001, "init", 1, "acquire", "0a10", "&a->lock"),  # [&a->lock, &a->lock/1] is a chain
        (1.002, "init", 1, "release", "0a10", "&a->lock"),
        (1.003, "init", 1, "release", "0a00", "&a->lock"),
    )
    state = ([("&a->lock", ["&a->lock/1"]), ("&a->lock/1", [])], [["&a->lock"], ["&a->lock", "&a->lock/1"]])
    folder = boot(tmp_path, *state, debug_locks=0, log=report_log(9.0, "possible recursive locking detected",
                                                                  "x/9", "&z->lock"))
    status, doc = check(tmp_path, early, "--lockdep-state", str(folder))
    assert (status, doc["findings"]) == (0, [])
    assert any("given subclass 1" in n for n in doc["notes"])
    assert any("was used for the whole capture" in n for n in doc["notes"])


# -- the detector --------------------------------------------------------------------------


@pytest.mark.parametrize(("banner", "title"), [
    ("WARNING: possible circular locking dependency detected", "possible circular locking dependency detected"),
    ("WARNING: HARDIRQ-safe -> HARDIRQ-unsafe lock order detected",
     "HARDIRQ-safe -> HARDIRQ-unsafe lock order detected"),
    ("WARNING: bad unlock balance detected!", "bad unlock balance detected!"),
    ("BUG: MAX_LOCKDEP_CHAINS too low!", "MAX_LOCKDEP_CHAINS too low!"),
])
def test_report_banners(banner, title):
    report = kboot.find_report(["[    1.000000] boot", f"[    2.500000] {banner}"], "log")
    assert (report.title, report.ts, report.line) == (title, 2.5, 2)


def test_a_suspicious_rcu_warning_leaves_lockdep_on():
    assert kboot.find_report(["[ 1.0] WARNING: suspicious RCU usage", "[ 1.0] x/1 is doing y"]) is None


def test_report_without_stamps_and_with_caller_ids():
    report = kboot.find_report([
        "[    3.1] [  T42] WARNING: possible recursive locking detected",
        "[    3.1] [  T42] kworker/0:1/42 is trying to acquire lock:",
        "[    3.1] [  T42] ffff8880 (&(&zone->lock)->rlock#2/1){..-.}-{2:2}, at: f+0x1/0x2",
    ])
    assert (report.comm, report.pid, report.lock, report.task) == ("kworker/0:1", 42, "&(&zone->lock)->rlock#2/1",
                                                                  "kworker/0:1/42")
    plain = kboot.find_report(["WARNING: bad unlock balance detected!", "-----", "a/3 is trying to release lock "
                                                                                 "(&x->lock) at:"])
    assert (plain.ts, plain.pid, plain.lock) == (None, 3, "&x->lock")


def test_state_directory_reads_stats_and_log(tmp_path):
    folder = boot(tmp_path, *TAKE_ALL_STATE, debug_locks=0, log=RECURSIVE_LOG)
    state = kstate.load(str(folder))
    assert state.debug_locks == 0 and state.report.lock == OBJ and state.log_file.endswith("dmesg.txt")
    assert len(state.files) == 2  # the dumps; stats and log are facts about them


def test_kprobe_profile_in_meta_and_alone():
    meta = ["scenario=none", "--- kprobe_events", "p:lockcheck/lock_acquire_args lock_acquire",
            "--- kprobe_profile", "  lock_acquire_args                                    123456               7",
            "--- trace_clock", "local [global]"]
    assert kboot.parse_kprobe_profile(meta) == [kboot.ProbeProfile("lock_acquire_args", 123456, 7)]
    assert kboot.parse_kprobe_profile(["  p  10  0"]) == [kboot.ProbeProfile("p", 10, 0)]


def test_docstring_examples():
    import doctest

    from lockcheck.kernel import after_report, annotation_file, boot, capture
    from lockcheck.readers import ftrace

    for module in (kboot, kstate, after_report, annotation_file, boot, capture, ftrace):
        failed, tried = doctest.testmod(module)
        assert tried and not failed, module.__name__


def test_a_boot_reports_the_kernels_report_once(tmp_path):
    """In a boot directory the kernel log is an input too: its report and the capture's copy are one finding."""
    stamp = "[    5.002500]"
    splat = [f"{stamp} ffff888003a0c0b0 ({OBJ}){{+.+.}}-{{3:3}}, at: demo+0x10/0x30", f"{stamp} ",
             f"{stamp} other info that might help us debug this:", f"{stamp}  Possible unsafe locking scenario:",
             f"{stamp} ", f"{stamp}        CPU0", f"{stamp}        ----", f"{stamp}   lock({OBJ});",
             f"{stamp}   lock({OBJ});", f"{stamp} ", f"{stamp}  *** DEADLOCK ***", f"{stamp} ",
             f"{stamp}  May be due to missing lock nesting notation", f"{stamp} ",
             f"{stamp} 2 locks held by demo_ba/72:",
             f"{stamp}  #0: ffff888003a0c000 ({OUTER}){{+.+.}}-{{3:3}}, at: demo+0x8/0x30",
             f"{stamp}  #1: ffff888003a0c0b0 ({OBJ}){{+.+.}}-{{3:3}}, at: demo+0x10/0x30", f"{stamp} ",
             f"{stamp} stack backtrace:", f"{stamp} CPU: 0 PID: 72 Comm: demo_ba Not tainted 6.1.0 #1"]
    folder = boot(tmp_path, *TAKE_ALL_STATE, debug_locks=0, log=RECURSIVE_LOG + "\n".join(splat) + "\n")
    (folder / "trace.ftrace").write_text(TAKE_ALL)
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--format", "json", "--no-progress", "--no-config", str(folder)], stdout=out, stderr=err)
    assert status == 1, err.getvalue()
    [finding] = json.loads(out.getvalue())["findings"]
    assert (finding["kind"], finding["lock"]) == ("recursive-locking", OBJ)
    assert finding["location"] == f"{folder / 'dmesg.txt'}:3"
    assert finding["details"]["captured_at"].startswith(f"{folder / 'trace.ftrace'}:")


def test_a_kernel_log_that_lost_its_start_does_not_prove_lockdep_stayed_on(tmp_path):
    """A dmesg whose ring buffer wrapped (no `Linux version` line) may have lost the report."""
    tail = "".join(f"[{4711 + i:12.6f}] usb 1-1: event {i}\n" for i in range(3))
    folder = boot(tmp_path, *TAKE_ALL_STATE, log=tail)
    status, doc = check(tmp_path, TAKE_ALL, "--lockdep-state", str(folder))
    assert status == 1 and "adds a chain before validating it" in doc["findings"][0]["uncertain"]
    assert any("does not go back to the boot" in n for n in doc["notes"])
    # the same log from the boot on: lockdep stayed on, the repeat was accepted (a nest_lock)
    whole = tmp_path / "whole"
    whole.mkdir()
    folder = boot(whole, *TAKE_ALL_STATE, log="[    0.000000] Linux version 6.1.0\n" + tail)
    status, doc = check(whole, TAKE_ALL, "--lockdep-state", str(folder))
    assert (status, doc["findings"]) == (0, [])


def test_a_report_the_capture_cannot_be_cut_at_proves_no_repeat(tmp_path):
    """A log without time stamps whose report lost its task line: where the capture reaches the
    report is unknown, so a repeated class in a chain is not taken as accepted (it may be the report)."""
    log = ("Linux version 6.1.0\n" + "=" * 44 + "\nWARNING: possible recursive locking detected\n"
           "6.1.0 #1 Not tainted\n" + "-" * 44 + "\n")
    folder = boot(tmp_path, *TAKE_ALL_STATE, debug_locks=0, log=log)
    status, doc = check(tmp_path, TAKE_ALL, "--lockdep-state", str(folder))
    assert status == 1
    [finding] = doc["findings"]
    assert finding["kind"] == "recursive-locking" and finding["lock"] == OBJ
    assert not any("given nest_lock" in n for n in doc["notes"])


# -- a cycle closed after the report, judged by the dependencies /proc/lockdep still lists ----

def _after_report_cycle(tmp_path, a_after: list[str], b_after: list[str]) -> dict:
    """AFTER's boot with &a->lock and &b->lock given those dependencies in /proc/lockdep."""
    classes = [(OUTER, [OBJ]), (OBJ, []), ("&a->lock", a_after), ("&b->lock", b_after), ("&c->lock", [])]
    log = report_log(5.0025, "possible recursive locking detected", "demo_ba/72", OBJ)
    folder = boot(tmp_path, classes, AFTER_STATE[1], debug_locks=0, log=log)
    status, doc = check(tmp_path, AFTER, "--lockdep-state", str(folder))
    assert status == 1
    [finding] = [f for f in doc["findings"] if f["kind"] == "circular-dependency"]
    assert finding["lock"] == "&a->lock"
    return finding


def test_a_cycle_the_dump_lacks_a_dependency_of_was_made_with_lockdep_off(tmp_path):
    """/proc/lockdep has &a->lock -> &b->lock but not the &b->lock -> &a->lock that closed the
    cycle: it was made after lockdep stopped recording, so the kernel could not report it."""
    finding = _after_report_cycle(tmp_path, ["&b->lock"], [])
    assert "uncertain" not in finding
    off = finding["details"]["lockdep_off"]
    assert "not reported by the kernel" in off and "dmesg.txt:3" in off
    assert "&b->lock -> &a->lock is not in" in off and "&a->lock -> &b->lock" not in off


def test_the_text_report_says_lockdep_was_off_when_the_kernel_could_not_report_the_cycle(tmp_path):
    """Not only JSON: the text report of the certain cycle says why the kernel did not report it
    (issue 26), right under its header; a cycle the kernel checked itself says nothing of the kind."""
    _after_report_cycle(tmp_path, ["&b->lock"], [])  # builds the boot folder and the trace
    out = io.StringIO()
    status = main(["check", "--no-progress", "--no-config", str(tmp_path / "trace.ftrace"),
                   "--lockdep-state", str(tmp_path / "boot")], stdout=out, stderr=io.StringIO())
    assert status == 1
    text = out.getvalue()
    report = text[text.index("WARNING: possible circular locking dependency detected"):]
    lines = report.splitlines()
    note = " ".join(line.removeprefix("NOTE: ").strip() for line in lines[3:7] if not line.startswith("-"))
    assert lines[3].startswith("NOTE: not reported by the kernel: lockdep was off after its report at")
    assert "dmesg.txt:3" in note and "&b->lock -> &a->lock is not in" in note
    assert "uncertain" not in report.split("stack backtrace:")[0]


def test_a_cycle_the_dump_has_every_dependency_of_was_checked_by_the_kernel(tmp_path):
    """Both dependencies are in /proc/lockdep: lockdep added the second only after
    check_noncircular() found no cycle, so it judged this one no deadlock: uncertain."""
    finding = _after_report_cycle(tmp_path, ["&b->lock"], ["&a->lock"])
    assert "lists every dependency of this cycle" in finding["uncertain"]
    assert "lockdep_off" not in finding.get("details", {})


def test_without_proc_lockdep_the_chains_do_not_judge_a_later_cycle(tmp_path):
    """Only /proc/lockdep's list is exact (a chain's last pair may be the reported, never added,
    dependency): with the chains alone the cycle is neither marked nor labelled."""
    folder = tmp_path / "boot"
    folder.mkdir()
    _, chains = proc_dumps(AFTER_STATE[0], AFTER_STATE[1])
    (folder / "lockdep_chains.txt").write_text(chains)
    (folder / "lockdep_stats.txt").write_text(" lock-classes:   5 [max: 8192]\n debug_locks:    0\n")
    (folder / "dmesg.txt").write_text(report_log(5.0025, "possible recursive locking detected", "demo_ba/72", OBJ))
    status, doc = check(tmp_path, AFTER, "--lockdep-state", str(folder))
    [finding] = [f for f in doc["findings"] if f["kind"] == "circular-dependency"]
    assert status == 1 and "uncertain" not in finding and "lockdep_off" not in finding.get("details", {})


def test_a_missing_dependency_made_while_lockdep_was_on_makes_the_cycle_uncertain():
    """`after_report.judge` on its own: the cycle [A, B] (A -> B made at t:5, B -> A closing it at
    t:50); /proc/lockdep lists neither.  With the cut at t:10 lockdep was on at t:5 and did not take
    A -> B: uncertain; with the cut before t:5 both were made with lockdep off: labelled."""
    from lockcheck.kernel import after_report
    from lockcheck.lockdep.findings import ChainLink, Evidence, Finding

    def finding() -> Finding:
        links = [ChainLink(1, "B", "", Evidence("t", 5, "T1")), ChainLink(0, "A", "", Evidence("t", 50, "T2"))]
        return Finding(kind="circular-dependency", task="T2", lock="A", held="B", location="t:50",
                       cycle=["A", "B"], chain=links)

    state = kstate.LockdepState(classes=[], edges=[kstate.Dependency("1", "A", "3", "C")], files=["lockdep.txt"])
    early = finding()
    reason = after_report.judge(early, state, "dmesg.txt:3", lambda file, line: line < 10)
    assert reason and "A -> B was made at t:5" in reason and "lockdep_off" not in early.details
    late = finding()
    assert after_report.judge(late, state, "dmesg.txt:3", lambda file, line: line < 2) is None
    assert "A -> B, B -> A is not in lockdep.txt" in late.details["lockdep_off"]
    # with B -> A and A -> B both listed, lockdep checked the cycle itself
    state.edges += [kstate.Dependency("1", "A", "2", "B"), kstate.Dependency("2", "B/0", "1", "A")]
    assert "lists every dependency" in after_report.judge(finding(), state, "dmesg.txt:3")
