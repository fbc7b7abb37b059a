"""Kernel logs through the whole program: grouping, JSON, text, the graph, cycles across reports."""

from __future__ import annotations

import doctest
import io
import json
from pathlib import Path

import pytest

from lockcheck.commands import cli
from lockcheck.kernel import grouping
from lockcheck.lockdep import observed
from lockcheck.lockdep.findings import group_key_of
from lockcheck.kernel import log_findings as logreports, splat_deps as splat_graph
from lockcheck.readers import splat as splats
from lockcheck.readers import kernel_log, log_builder, log_lines
from lockcheck.report import kernel_reports

from test_reader_kernel_log import DATA, LOGS, expectations, lines_of, raw, stamped, with_callers


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def unwrapped(text: str) -> str:
    """Text with wrapped notes joined back: a continuation line starts with four blanks."""
    return text.replace("\n    ", " ")


def write(path: Path, lines: list[str]) -> str:
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    return str(path)


@pytest.mark.parametrize("module", [splats, grouping, observed, splat_graph, logreports, kernel_log, log_lines,
                                    log_builder, kernel_reports])
def test_docstring_examples(module) -> None:
    assert doctest.testmod(module).failed == 0


def test_a_log_holding_every_report_twice_reports_each_problem_once_with_count_two(tmp_path: Path) -> None:
    once = [line for log in LOGS for line in ["random: crng init done"] + raw(lines_of(log))]
    log = write(tmp_path / "console.log", stamped(once + once))
    status, out, _ = run("check", "--format", "json", log)
    assert status == 1
    doc = json.loads(out)
    found = doc["findings"]
    assert len(found) == len(LOGS)
    per_report = len(once)
    for finding, source in zip(found, LOGS):
        expect = expectations(source)
        assert (finding["kind"], finding["lock"], finding["task"]) == (expect["kind"], expect["lock"], expect["task"])
        assert finding["from_report"] is True and finding["count"] == 2
        assert finding["first"]["file"] == finding["last"]["file"] == log
        assert finding["last"]["line"] == finding["first"]["line"] + per_report
        assert finding["last"]["ts"] > finding["first"]["ts"]
        assert finding["location"] == f"{log}:{finding['first']['line']}"
    assert any(note.startswith(f"read {2 * len(LOGS)} lockdep reports ({len(LOGS)} distinct problems)")
               for note in doc["notes"])


def test_grouping_leaves_the_per_boot_class_numbers_out_across_a_directory(tmp_path: Path) -> None:
    boots = tmp_path / "boots"
    boots.mkdir()
    report = raw(lines_of(DATA / "circular-6-classes.log"))
    renumbered = [line.replace("sb_writers#3", "sb_writers#7") for line in report]
    write(boots / "boot1.log", with_callers(report, "T6618", 57.0))
    write(boots / "boot2.log", stamped(["Linux version 5.14.0-rc7+"] + renumbered, 3.0))
    write(boots / "clean.log", stamped(["Linux version 5.14.0-rc7+", "Freeing unused kernel memory"]))
    status, out, _ = run("check", str(boots))
    assert status == 1
    assert out.count("WARNING: possible circular locking dependency detected") == 1
    first, last = str(boots / "boot1.log"), str(boots / "boot2.log")
    assert (f"NOTE: read from a kernel report (5.14.0-rc7+ #749 Tainted: G            E), seen 2 times: "
            f"first {first}:6 [57.005000], last {last}:7 [3.006000]") in unwrapped(out)
    assert "read 2 lockdep reports (1 distinct problem) from 3 kernel logs" in out


def test_the_text_report_is_lockcheck_s_layout_and_says_where_the_report_was_read(tmp_path: Path) -> None:
    log = write(tmp_path / "dmesg.txt", lines_of(DATA / "circular-3-classes.log"))
    status, out, _ = run("check", log)
    assert status == 1
    lines = out.splitlines()
    assert lines[1:5] == ["=" * 54, "WARNING: possible circular locking dependency detected",
                          f"lockcheck {__import__('lockcheck').__version__}  {log}", "-" * 54]
    # the NOTE line is wrapped at 80 columns like every note: lines[5] and its continuations
    note = unwrapped("\n".join(lines[5:])).splitlines()[0]
    assert note == (f"NOTE: read from a kernel report (5.5.0-rc7-next-20200124+ #10 Not tainted), "
                    f"seen once: {log}:2 [2718.380180]")
    assert len(lines[5]) <= 80  # a path longer than a line is never broken, so only the first is bounded
    assert "-> #1 ((work_completion)(&peer->transmit_handshake_work)){+.+.}:" in lines
    assert "  (wq_completion)wg-kex-wireguard1 --> (work_completion)(&peer->transmit_handshake_work) --> " \
           "&wg->static_identity.lock" in lines
    assert " #4: ffff88805ffdce80 (&wg->static_identity.lock){++++}, at: wg_set_device+0xfb7/0x1490" in lines


@pytest.mark.parametrize("fmt", ["text", "json", "sarif", "github"])
def test_every_renderer_takes_findings_read_from_reports(tmp_path: Path, fmt: str) -> None:
    logs = [write(tmp_path / f"{log.stem}.log", lines_of(log)) for log in LOGS]
    status, out, err = run("check", "--format", fmt, *logs)
    assert status == 1, err
    assert err == ""
    if fmt in ("json", "sarif"):
        json.loads(out)


def test_a_dmesg_without_reports_is_a_clean_kernel_log(tmp_path: Path) -> None:
    log = write(tmp_path / "dmesg.txt", stamped(["Linux version 6.8.0", "Command line: ro quiet splash"]))
    status, out, err = run("check", log)
    assert (status, err) == (0, "")
    assert "read no lockdep report from 1 kernel log" in out


# -- dependencies into the graph -----------------------------------------------------------


def circular(task: str, classes: list[str], ts: float) -> list[str]:
    """A circular report in the modern layout: `classes` is the cycle from `-> #0` (the lock acquired)."""
    n = len(classes) - 1
    lines = ["=" * 54, "WARNING: possible circular locking dependency detected", "6.8.0 #1 Not tainted", "-" * 54,
             f"{task} is trying to acquire lock:", f"ffff888000000001 ({classes[0]}){{+.+.}}-{{3:3}}, at: g+0x1/0x2",
             "", "but task is already holding lock:",
             f"ffff888000000002 ({classes[-1]}){{+.+.}}-{{3:3}}, at: f+0x1/0x2", "",
             "which lock already depends on the new lock.", "", "",
             "the existing dependency chain (in reverse order) is:"]
    for depth in range(n, -1, -1):
        lines += ["", f"-> #{depth} ({classes[depth]}){{+.+.}}-{{3:3}}:", "       __mutex_lock+0x9f/0xed0",
                  f"       site_{depth}+0x10/0x40"]
    lines += ["", "other info that might help us debug this:", "", f"1 lock held by {task}:",
              f" #0: ffff888000000002 ({classes[-1]}){{+.+.}}-{{3:3}}, at: f+0x1/0x2", "", "stack backtrace:"]
    return stamped(lines, ts)


def test_two_reports_whose_chains_together_close_a_cycle_give_that_cycle(tmp_path: Path) -> None:
    # boot 1: A -> B -> C (its own cycle closes with C -> A); boot 2: C -> D -> A (closes with A -> C).
    # Neither report shows A -> B -> C -> D -> A; their chains together do.
    boot1 = write(tmp_path / "boot1.log", circular("t1/11", ["&a->lock", "&b->lock", "&c->lock"], 5.0))
    boot2 = write(tmp_path / "boot2.log", circular("t2/22", ["&c->lock", "&d->lock", "&a->lock"], 7.0))
    status, out, _ = run("check", "--format", "json", boot1, boot2)
    assert status == 1
    found = json.loads(out)["findings"]
    assert [f.get("from_report", False) for f in found] == [True, True, False]
    joined = found[2]
    assert joined["kind"] == "circular-dependency"
    rotated = group_key_of("circular-dependency", None, None, joined["cycle"], {})
    assert rotated == ("circular-dependency", ("&a->lock", "&b->lock", "&c->lock", "&d->lock"))
    links = {(link["class"], link["evidence"]["file"]) for link in joined["chain"]}
    assert {file for _, file in links} == {boot1, boot2}
    # each report alone: no such cycle
    for log in (boot1, boot2):
        alone = json.loads(run("check", "--format", "json", log)[1])["findings"]
        assert [f.get("from_report") for f in alone] == [True]


def test_a_saved_graph_of_one_boot_is_a_baseline_for_the_next(tmp_path: Path) -> None:
    boot1 = write(tmp_path / "boot1.log", circular("t1/11", ["&a->lock", "&b->lock", "&c->lock"], 5.0))
    boot2 = write(tmp_path / "boot2.log", circular("t2/22", ["&c->lock", "&d->lock", "&a->lock"], 7.0))
    graph = str(tmp_path / "boot1.json")
    status, _, err = run("graph", boot1, "-o", graph)
    assert status == 0 and "3 lock classes, 2 dependencies, 1 finding" in err
    doc = json.loads(Path(graph).read_text())
    edges = {(e["from"], e["to"]) for e in doc["dependencies"]}
    assert edges == {("&a->lock", "&b->lock"), ("&b->lock", "&c->lock")}
    status, out, _ = run("check", "--format", "json", "--baseline", graph, boot2)
    kinds = [(f["kind"], f.get("from_report", False)) for f in json.loads(out)["findings"]]
    assert kinds == [("circular-dependency", True), ("circular-dependency", False)]


def test_held_lists_enter_the_graph_in_order_past_unvalidated_locks(tmp_path: Path) -> None:
    log = write(tmp_path / "dmesg.log", lines_of(DATA / "irq-safe-unsafe.log"))
    graph = str(tmp_path / "g.json")
    run("graph", log, "-o", graph)
    doc = json.loads(Path(graph).read_text())
    edges = {(e["from"], e["to"]) for e in doc["dependencies"]}
    # held: &evdev->mutex, &dev->event_lock, rcu_read_lock x3 (passed over), &client->buffer_lock, rcu_read_lock
    assert ("&evdev->mutex", "&dev->event_lock") in edges
    assert ("&dev->event_lock", "&client->buffer_lock") in edges
    assert not any("rcu_read_lock" in edge for edge in edges)
    # the reported dependency itself is not added
    assert ("&client->buffer_lock", "&new->fa_lock") not in edges
    usage = {cls["name"]: cls["usage"] for cls in doc["classes"]}
    assert usage["&dev->event_lock"] == ["IN-HARDIRQ-W", "IN-SOFTIRQ-W", "INITIAL USE"]
    assert usage["&new->fa_lock"] == ["IN-HARDIRQ-R", "HARDIRQ-ON-R", "SOFTIRQ-ON-R", "INITIAL USE"]


def test_diff_of_two_boots_logs_lists_what_the_second_adds(tmp_path: Path) -> None:
    boot1 = write(tmp_path / "boot1.log", circular("t1/11", ["&a->lock", "&b->lock", "&c->lock"], 5.0)
                  + stamped(raw(lines_of(DATA / "recursive.log")), 9.0))
    # boot 2 hits boot 1's recursive locking again, and closes a new cycle with boot 1's chain
    boot2 = write(tmp_path / "boot2.log", stamped(raw(lines_of(DATA / "recursive.log")), 3.0)
                  + circular("t2/22", ["&c->lock", "&d->lock", "&a->lock"], 7.0))
    status, out, err = run("diff", "--format", "json", boot1, boot2)
    assert status == 1, err
    doc = json.loads(out)
    added = {(e["from"], e["to"]) for e in doc["dependencies"]["added"]}
    assert added == {("&c->lock", "&d->lock"), ("&d->lock", "&a->lock")}
    new = [(f["kind"], f.get("from_report", False), f["only_with_base"]) for f in doc["findings"]]
    assert sorted(new) == [("circular-dependency", False, True), ("circular-dependency", True, False)]
    # a saved graph of boot 1 is the same BASE, its reports included
    graph = str(tmp_path / "boot1.json")
    run("graph", boot1, "-o", graph)
    status, out, _ = run("diff", "--format", "json", graph, boot2)
    assert sorted((f["kind"], f.get("from_report", False)) for f in json.loads(out)["findings"]) == [
        ("circular-dependency", False), ("circular-dependency", True)]


def test_sarif_and_github_say_a_finding_is_the_kernels_report_and_how_often(tmp_path: Path) -> None:
    once = raw(lines_of(DATA / "recursive.log"))
    log = write(tmp_path / "console.log", stamped(once + once))
    sarif = json.loads(run("check", "--format", "sarif", log)[1])
    (result,) = sarif["runs"][0]["results"]
    props = result["properties"]
    assert (props["fromReport"], props["count"], props["kernel"]) == (True, 2, "4.16.0+ #174 Not tainted")
    assert props["lastReport"] == f"{log}:{2 + len(once)}"
    assert "the kernel's own report, seen 2 times" in result["message"]["text"]
    github = run("check", "--format", "github", log)[1]
    assert "the kernel's own report, seen 2 times" in github


def test_the_readmes_dmesg_example_is_what_lockcheck_prints() -> None:
    import os

    import lockcheck

    root = Path(__file__).parent.parent
    readme = (root / "docs" / "kernel.md").read_text(encoding="utf-8")
    command = "$ lockcheck check tests/data/kernel-log/recursive.log\n"
    shown = readme[readme.index(command) + len(command):]
    shown = shown[:shown.index("```")]
    cwd = os.getcwd()
    os.chdir(root)
    try:
        status, out, _ = run("check", "tests/data/kernel-log/recursive.log")
    finally:
        os.chdir(cwd)
    assert status == 1
    assert out == shown.replace("lockcheck 0.1.0", f"lockcheck {lockcheck.__version__}")


def test_convert_and_stat_say_a_kernel_log_has_no_lock_events(tmp_path: Path) -> None:
    log = write(tmp_path / "dmesg.log", lines_of(DATA / "recursive.log"))
    for command in ("convert", "stat"):
        status, _, err = run(command, log)
        assert status == 0
        assert "a kernel log holds no lock events (`lockcheck check` reads its lockdep reports)" in " ".join(err.split())


def test_a_report_pasted_into_a_mail_reply_is_read_from_the_saved_mail(tmp_path: Path) -> None:
    """A mail saved as text: headers and prose, then the report quoted with `> ` (and indented dmesg)."""
    report = stamped(raw(lines_of(DATA / "circular-5-classes.log")), 19.69)
    mail = ["From: someone@example.org", "Subject: Re: lockdep splat on boot", "", "On Fri, you wrote:",
            "> While testing I got the following lockdep report:", ">"] + [f"> {line}" for line in report]
    log = write(tmp_path / "reply.eml", mail + ["", "Thanks, looking into it."])
    status, out, err = run("check", "--format", "json", log)
    assert status == 1, err
    (finding,) = json.loads(out)["findings"]
    assert finding["cycle"] == expectations(DATA / "circular-5-classes.log")["cycle"].split(" -> ")
    assert finding["first"]["ts"] == pytest.approx(19.691)
    indented = write(tmp_path / "commit.txt", [f"    {line}" for line in raw(lines_of(DATA / "recursive.log"))])
    status, out, _ = run("check", "--format", "json", indented)
    assert (status, [f["kind"] for f in json.loads(out)["findings"]]) == (1, ["recursive-locking"])


def test_a_kernel_report_of_another_bug_is_a_clean_kernel_log(tmp_path: Path) -> None:
    """A syzbot report of a KASAN bug (no time stamps) is a kernel log without lockdep reports, not an error."""
    log = write(tmp_path / "kasan.txt", ["BUG: KASAN: use-after-free in foo+0x1/0x2", "Read of size 8 at addr ffff8880",
                                         "", "Call Trace:", " dump_stack+0x1/0x2"])
    status, out, err = run("check", log)
    assert (status, err) == (0, "")
    assert "read no lockdep report from 1 kernel log" in out


BUCKETS = DATA / "buckets"


def test_syzbots_buckets_of_real_reports_are_regrouped_by_their_lock_classes() -> None:
    """Eight real syzbot reports under seven titles (tests/data/kernel-log/buckets.source) are five
    problems: one cycle entered at two locks (and with a `#8` in one boot) is one; one title over
    two different cycles is two."""
    status, out, err = run("check", "--format", "json", str(BUCKETS))
    assert status == 1, err
    doc = json.loads(out)
    # keyed as grouped: the cycle rotated to start at its smallest class, `#N` left out
    found = {group_key_of(f["kind"], f["lock"], f["held"], f["cycle"], {})[1]: f for f in doc["findings"]}
    counts = {key: (f["count"], sorted(Path(f[end]["file"]).name for end in ("first", "last")))
              for key, f in found.items()}
    assert counts == {
        ("&wg->static_identity.lock", "(wq_completion)wg-kex-wireguard1",
         "(work_completion)(&peer->transmit_handshake_work)"): (2, ["deadlock-in-peer_remove_after_dead.log", "deadlock-in-wg_set_device.log"]),
        ("&pipe->mutex/1", "console_lock", "(completion)&req.done", "sb_writers"):
            (2, ["deadlock-in-vcs_read.log", "deadlock-in-vcs_write.log"]),
        ("&xt[i].mutex", "rtnl_mutex", "sk_lock-AF_INET"):
            (2, ["deadlock-in-do_ip_getsockopt.log", "deadlock-in-do_ip_setsockopt.log"]),
        ("&bdev->bd_mutex", "&lo->lo_ctl_mutex"): (1, ["deadlock-in-blkdev_reread_part.log"] * 2),
        ("&bdev->bd_mutex", "loop_index_mutex", "&lo->lo_ctl_mutex"):
            (1, ["deadlock-in-blkdev_reread_part-2.log"] * 2),
    }
    assert any(note.startswith("read 8 lockdep reports (5 distinct problems) from 8 kernel logs")
               for note in doc["notes"])
