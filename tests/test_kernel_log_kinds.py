"""Every lockdep report a kernel log holds is a finding and fails the run: Invalid wait context first.

A CI gate on dmesg must not pass a boot in which lockdep reported a bug, so
each kind is checked through the whole program (`lockcheck check`, exit 1) in
every output format, from the public reports in tests/data/kernel-log, as
published and as people paste them.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from lockcheck.commands import cli

from test_reader_kernel_log import DATA, expectations, lines_of, raw

WAIT_LOGS = sorted(DATA.glob("invalid-wait-*.log"))


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def write(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


def test_the_invalid_wait_context_reports_are_there() -> None:
    # both numberings: kernels with CONFIG_PROVE_RAW_LOCK_NESTING (context-{5:5}) and without ({4:4})
    contexts = {expectations(log)["context"] for log in WAIT_LOGS}
    # (and a hardirq's own context, {2:2}, where no held lock is the reason)
    assert len(WAIT_LOGS) >= 11 and {"4:4", "5:5", "2:2"} <= contexts


@pytest.mark.parametrize("log", WAIT_LOGS, ids=lambda p: p.stem)
def test_an_invalid_wait_context_pasted_without_time_stamps_fails_the_run(tmp_path: Path, log: Path) -> None:
    """As LKML mails quote it: the file starts with the `=====` rule (it was read as a broken `.lt`: exit 2)."""
    expect = expectations(log)
    lines = raw(lines_of(log))
    path = write(tmp_path / "splat.txt", lines)
    status, out, err = run("check", "--format", "json", path)
    assert (status, err) == (1, "")
    (finding,) = json.loads(out)["findings"]
    assert (finding["kind"], finding["task"], finding["lock"], finding["held"]) == (
        "invalid-wait-context", expect["task"], expect["lock"], expect.get("held"))
    assert finding["details"]["context"] == expect["context"]
    printed = [line for line in lines if "(" + expect["lock"] + "){" in line][0]
    assert finding["waits"] == printed.split("}-{")[1].split("}")[0]
    held = [line for line in lines if line.lstrip().startswith("#")]
    # syzbot prints a held lock once more per inlined frame: one entry per lock, as in `N locks held by`
    assert len(finding["held_locks"]) == len({line.split(":")[0].strip() for line in held})
    assert all(lock["waits"] for lock in finding["held_locks"])


def test_the_text_report_is_the_kernels_layout_with_wait_types_and_context(tmp_path: Path) -> None:
    path = write(tmp_path / "splat.txt", raw(lines_of(DATA / "invalid-wait-pl061.log")))
    status, out, _ = run("check", path)
    assert status == 1
    lines = out.splitlines()
    assert lines[1:3] == ["=" * 29, "[ BUG: Invalid wait context ]"]
    at = lines.index("swapper/0/1 is trying to lock:")
    assert lines[at + 1] == ("ffff0000039e4c88 (PL061Data::inner){....}-{3:3}, "
                             "at: rust_helper_spin_lock+0x10/0x1c")
    assert lines[at + 2: at + 5] == ["other info that might help us debug this:", "context-{5:5}",
                                     "3 locks held by swapper/0/1:"]
    assert lines[at + 7] == " #2: ffff0000050c04f8 (lock_class){....}-{2:2}, at: __irq_get_desc_lock+0x6c/0x94"
    assert "stack backtrace:" in lines[at + 8:]
    assert "1 finding (1 invalid-wait-context)" in out


@pytest.mark.parametrize("fmt", ["sarif", "github"])
def test_sarif_and_github_name_the_wait_types_and_the_context(tmp_path: Path, fmt: str) -> None:
    path = write(tmp_path / "dmesg.txt", lines_of(DATA / "invalid-wait-vmalloc.log"))
    status, out, _ = run("check", "--format", fmt, path)
    assert status == 1
    assert ("Invalid wait context: &vb->lock-{3:3} taken in context-{4:4}, holding rcu_read_lock-{1:2}"
            in out)
    if fmt == "sarif":
        assert json.loads(out)["runs"][0]["results"][0]["ruleId"] == "invalid-wait-context"


def test_a_ci_log_with_printk_levels_quoted_twice_in_a_mail(tmp_path: Path) -> None:
    """Intel's CI prints `<4> [222.857770] ` (level, blank, stamp); the mail quoted it as `>     > `."""
    lines = [f">     > <4> {line}" for line in lines_of(DATA / "invalid-wait-pmc.log")]
    status, out, _ = run("check", "--format", "json", write(tmp_path / "mail.txt", lines))
    assert status == 1
    (finding,) = json.loads(out)["findings"]
    assert (finding["kind"], finding["lock"], finding["held"]) == (
        "invalid-wait-context", "&pmcdev->lock", "tick_freeze_lock")


def test_two_boots_reporting_one_invalid_wait_context_are_one_finding_seen_twice(tmp_path: Path) -> None:
    one = write(tmp_path / "boot1.log", lines_of(DATA / "invalid-wait-bcachefs-rt.log"))
    two = write(tmp_path / "boot2.log", [line.replace("&p->lock#2", "&p->lock#5")
                                         for line in lines_of(DATA / "invalid-wait-bcachefs-rt.log")])
    status, out, _ = run("check", "--format", "json", one, two)
    assert status == 1
    (finding,) = json.loads(out)["findings"]
    assert finding["count"] == 2


# -- lockdep's warnings, RCU, bad contention, chain_key collision ------------------------------------------

#: lockdep's WARN as 6.x prints it: the condition before `__warn()`'s line, then the dump (hlock_class())
DEBUG_WARN = ["------------[ cut here ]------------", "DEBUG_LOCKS_WARN_ON(1)",
              "WARNING: CPU: 1 PID: 4242 at kernel/locking/lockdep.c:232 hlock_class+0x6c/0x90",
              "Modules linked in:", "CPU: 1 PID: 4242 Comm: syz-executor.0 Not tainted 6.1.0-syzkaller #0",
              "Call Trace:", " <TASK>"]
#: before 4.15 the condition came after the WARNING line, which named no CPU
OLD_WARN = ["------------[ cut here ]------------",
            "WARNING: at kernel/lockdep.c:2995 check_flags+0x1c1/0x1d0()",
            "DEBUG_LOCKS_WARN_ON(!current->hardirqs_enabled)",
            "Modules linked in: kvm", "Pid: 0, comm: swapper Not tainted 3.2.0 #1"]
CAPACITY = ["BUG: MAX_LOCKDEP_CHAIN_HLOCKS too low!", "turning off the locking correctness validator.",
            "CPU: 0 UID: 0 PID: 77 Comm: kworker/0:2 Not tainted 6.12.0 #1"]
COLLISION = ["============================", "WARNING: chain_key collision", "6.1.0 #1 Not tainted",
             "----------------------------", "kworker/0:1/9: Hash chain already cached but the contents don't match!",
             "Held locks:", "Locks in cached chain:", "", "stack backtrace:"]
CONTENTION = ["=================================", "WARNING: bad contention detected!", "6.1.0 #1 Not tainted",
              "---------------------------------", "kworker/1:2/88 is trying to contend lock (&rq->__lock) at:",
              "[<ffffffff81110bcb>] raw_spin_rq_lock_nested+0x2b/0x40", "but there are no locks held!", "",
              "other info that might help us debug this:", "no locks held by kworker/1:2/88.", "",
              "stack backtrace:"]


@pytest.mark.parametrize("lines, kind, task, lock", [
    (DEBUG_WARN, "lockdep-warning", "syz-executor.0/4242", "DEBUG_LOCKS_WARN_ON(1)"),
    (OLD_WARN, "lockdep-warning", "?", "DEBUG_LOCKS_WARN_ON(!current->hardirqs_enabled)"),
    (CAPACITY, "lockdep-warning", "kworker/0:2/77", "BUG: MAX_LOCKDEP_CHAIN_HLOCKS too low!"),
    (COLLISION, "lockdep-warning", "kworker/0:1/9", "chain_key collision"),
    (CONTENTION, "bad-contention", "kworker/1:2/88", "&rq->__lock"),
], ids=["debug-locks-warn-on", "old-warn", "capacity", "collision", "contention"])
@pytest.mark.parametrize("stamps", [False, True], ids=["pasted", "dmesg"])
def test_each_lockdep_warning_is_a_finding_that_fails_the_run(tmp_path: Path, lines: list[str], kind: str,
                                                              task: str, lock: str, stamps: bool) -> None:
    if stamps:
        lines = [f"[{100 + i / 1000:12.6f}] {line}" for i, line in enumerate(lines)]
    status, out, err = run("check", "--format", "json", write(tmp_path / "dmesg.txt", ["random: crng init done"]
                                                              + lines))
    assert (status, err) == (1, "")
    (finding,) = json.loads(out)["findings"]
    assert (finding["kind"], finding["task"], finding["lock"]) == (kind, task, lock)
    if kind == "lockdep-warning":
        assert finding["message"] == lock  # docs/cli.md: the condition as its message
    else:
        assert finding["at"] == "raw_spin_rq_lock_nested+0x2b/0x40"


def test_the_warning_says_where_lockdep_raised_it_in_every_format(tmp_path: Path) -> None:
    path = write(tmp_path / "dmesg.txt", DEBUG_WARN)
    status, out, _ = run("check", path)
    assert status == 1
    assert "DEBUG_LOCKS_WARN_ON(1)\nWARNING: at kernel/locking/lockdep.c:232 hlock_class+0x6c/0x90\n" in out
    assert "lockdep turned itself off here" in out
    status, out, _ = run("check", "--format", "github", path)
    assert "DEBUG_LOCKS_WARN_ON(1): raised at kernel/locking/lockdep.c:232" in out


PUBLIC_WARNINGS = sorted((DATA / "syzkaller").glob("*-lockdep-warning.log"))


@pytest.mark.parametrize("stamps", ["as published", "stripped"])
@pytest.mark.parametrize("log", PUBLIC_WARNINGS, ids=lambda p: p.stem)
def test_a_public_debug_locks_warn_on_fails_the_run(tmp_path: Path, log: Path, stamps: str) -> None:
    """syzbot's DEBUG_LOCKS_WARN_ON(...) reports (issue 26): time stamps (and caller ids) as syzbot
    kept them, and stripped off as a mail quotes the warning; a panic_on_warn dump follows."""
    expect = expectations(log)
    lines = lines_of(log)
    assert lines[0].startswith("[")  # stamped as published: the stripped run reads other lines
    if stamps == "stripped":
        lines = raw(lines)
        assert not any(line.startswith("[ ") and "]" in line[:16] for line in lines[:3])
    status, out, err = run("check", "--format", "json", write(tmp_path / "console.log", lines))
    assert (status, err) == (1, "")
    (finding,) = json.loads(out)["findings"]
    assert (finding["kind"], finding["task"], finding["lock"]) == ("lockdep-warning", expect["task"], expect["lock"])
    assert finding["message"] == expect["lock"] and finding["details"]["warned_at"] == expect["warned_at"]
    status, text, _ = run("check", write(tmp_path / "console.log", lines))
    assert status == 1 and "lockdep turned itself off here" in text and expect["lock"] in text


@pytest.mark.parametrize("lines, task, lock", [
    (DEBUG_WARN, "syz-executor.0/4242", "DEBUG_LOCKS_WARN_ON(1)"),
    (OLD_WARN, "?", "DEBUG_LOCKS_WARN_ON(!current->hardirqs_enabled)"),
], ids=["debug-locks-warn-on", "old-warn"])
def test_a_lockdep_warning_behind_a_serial_consoles_prefix(tmp_path: Path, lines: list[str], task: str,
                                                           lock: str) -> None:
    """A console server's own clock before every line (it changes from line to line): the warning's
    lines have no `WARNING: ` title to find it by, so its first line is looked for (it was missed)."""
    junk = [f"serial0 {i % 60:02d}:00 | [{100 + i / 1000:12.6f}] {line}" for i, line in enumerate(lines)]
    status, out, _ = run("check", "--format", "json", write(tmp_path / "console.txt", junk))
    assert status == 1
    (finding,) = json.loads(out)["findings"]
    assert (finding["kind"], finding["task"], finding["lock"]) == ("lockdep-warning", task, lock)


def test_the_public_warnings_are_there() -> None:
    assert len(PUBLIC_WARNINGS) >= 2
    assert all(expectations(log)["lock"].startswith("DEBUG_LOCKS_WARN_ON(") for log in PUBLIC_WARNINGS)


def test_suspicious_rcu_usage_in_the_kernels_layout(tmp_path: Path) -> None:
    status, out, _ = run("check", write(tmp_path / "dmesg.txt", lines_of(DATA / "rcu-ip-tunnel.log")))
    assert status == 1
    lines = out.splitlines()
    assert lines[2] == "WARNING: suspicious RCU usage"
    assert "net/ipv4/ip_tunnel.c:221 RCU-list traversed in non-reader section!!" in lines
    assert " #0: ffffffff86fc7cb0 (rtnl_mutex){+.+.}-{3:3}, at: rtnetlink_rcv_msg+0x377/0xf60" in lines


# -- log prefixes, perf lock summaries ----------------------------------------------------------------------

PREFIXES = {
    "a harness's stamp before the kernel's": lambda i, line: f"[{101 + i / 1e6:.6f}] [{12 + i / 100:8.2f}] {line}",
    "kernel: without a date or host": lambda i, line: f"kernel: [{149 + i / 10:9.1f}] {line}",
    "syslog with a one-blank day": lambda i, line: f"Mar 3 10:00:01 host kernel: [{149 + i / 10:9.1f}] {line}",
    "printk level, blank, stamp": lambda i, line: f"<4> [{222 + i / 1e6:.6f}] {line}",
    "journalctl -o short-monotonic": lambda i, line: f"[{149 + i / 1e6:12.6f}] host kernel: {line}",
    "/dev/kmsg records": lambda i, line: f"4,{1072 + i},{209927860 + i},-;{line}",
    "serial console junk": lambda i, line: f"ttyS0@{i % 60:02d}s > [{149 + i / 1e6:12.6f}][  T99] {line}",
}


@pytest.mark.parametrize("prefix", sorted(PREFIXES))
@pytest.mark.parametrize("log", ["invalid-wait-vmalloc", "recursive"])
def test_each_prefix_shape_is_read_as_a_kernel_log(tmp_path: Path, prefix: str, log: str) -> None:
    lines = [PREFIXES[prefix](i, line) for i, line in enumerate(raw(lines_of(DATA / f"{log}.log")))]
    status, out, err = run("check", "--format", "json", write(tmp_path / "log.txt", lines))
    assert (status, err) == (1, "")
    (finding,) = json.loads(out)["findings"]
    expect = expectations(DATA / f"{log}.log")
    assert (finding["kind"], finding["task"], finding["lock"]) == (expect["kind"], expect["task"], expect["lock"])


@pytest.mark.parametrize("head", [
    " contended   total wait     max wait     avg wait         type   caller",
    "                Name   acquired  contended   avg wait (ns) total wait (ns)   max wait (ns)   min wait (ns)",
])
def test_perf_lock_summaries_say_that_perf_script_output_is_what_is_read(tmp_path: Path, head: str) -> None:
    path = write(tmp_path / "perf.txt", [head, "", "      1234     12.34 ms      1.23 ms     10.00 us     spinlock   f"])
    status, _, err = run("check", path)
    assert status == 2
    assert "not a trace (looks like `perf lock contention` / `perf lock report` output" in err
    assert "perf script" in err and "unknown op" not in err
