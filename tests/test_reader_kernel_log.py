"""The kernel-log reader on real lockdep reports (tests/data/kernel-log), in every log layout.

Each `NAME.log` there is a public report transcribed as it was published
(its `NAME.source` names where, and states what the report says: kind,
task, lock, held lock, cycle).  Each is read back as it is, without its log
prefixes (a syzbot report), with dmesg time stamps, with time stamps and
caller ids, behind a syslog header, and pasted into a mail or a commit message
(quoted with `> `, indented) -- always the same one finding.
"""

from __future__ import annotations

import re
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockcheck.lockdep import findings as F
from lockcheck.readers import kernel_log
from lockcheck.readers.kernel_log import LogStats, classify, read_splats, split_prefix
from lockcheck.readers.splat import to_finding

DATA = Path(__file__).parent / "data" / "kernel-log"
LOGS = sorted(DATA.glob("*.log"))


def test_the_reports_are_there():
    # the tests below loop over LOGS: an empty list would pass them having read nothing
    assert len(LOGS) >= 13, f"only {len(LOGS)} kernel logs under {DATA}"


def expectations(log: Path) -> dict[str, str]:
    """The `key: value` lines of a report's `.source` file."""
    out = {}
    for line in log.with_suffix(".source").read_text(encoding="utf-8").splitlines():
        key, sep, value = line.partition(": ")
        if sep:
            out[key.strip()] = value.strip()
    return out


# -- the log layouts, made from a transcription (independently of the reader's own prefix code) --

_STAMP = re.compile(r"^\[ *\d+\.\d+\](?:\[ *[TC]\d+\])? ?")


def raw(lines: list[str]) -> list[str]:
    """The text printk was given: time stamps and caller ids off, continuation indents too."""
    out, width = [], 0
    for line in lines:
        match = _STAMP.match(line)
        if match:
            width = match.end()
            out.append(line[width:])
        elif width and line.startswith(" " * width):
            out.append(line[width:])
        else:
            out.append(line)
    return out


def stamped(lines: list[str], start: float = 12.0) -> list[str]:
    return [f"[{start + i / 1000:12.6f}] {line}" for i, line in enumerate(lines)]


def with_callers(lines: list[str], caller: str = "T123", start: float = 12.0) -> list[str]:
    return [f"[{start + i / 1000:12.6f}][{caller:>6}] {line}" for i, line in enumerate(lines)]


def syslog(lines: list[str]) -> list[str]:
    return [f"Jun 11 11:02:51 host kernel: {line}" for line in lines]


LAYOUTS = {
    "as published": lambda lines: lines,
    "raw": raw,
    "dmesg": lambda lines: stamped(raw(lines)),
    "callers": lambda lines: with_callers(raw(lines)),
    "syslog": lambda lines: syslog(raw(lines)),
    # pasted elsewhere: a mail reply (quoted once or twice), a commit message (indented), a tabbed block
    "mail reply": lambda lines: [f"> {line}" for line in stamped(raw(lines))],
    "reply to a reply": lambda lines: [f"> > {line}" for line in raw(lines)],
    "commit message": lambda lines: [f"    {line}" for line in raw(lines)],
    "indented dmesg": lambda lines: [f"  {line}" for line in stamped(raw(lines))],
    "tabbed": lambda lines: [f"\t{line}" for line in raw(lines)],
    # journalctl -o short-monotonic, caller ids spaced from the stamp, a quote three deep
    "journal monotonic": lambda lines: [f"[{149 + i / 1e6:12.6f}] host kernel: {line}"
                                        for i, line in enumerate(raw(lines))],
    "spaced caller": lambda lines: [f"[{149 + i / 1e6:12.6f}] [{'C1':>6}] {line}" for i, line in enumerate(raw(lines))],
    "quoted thrice": lambda lines: [f"> > > {line}" for line in with_callers(raw(lines))],
    # a serial console's or a CI runner's own prefix before every line, a clock in it or not
    "console junk": lambda lines: [f"serial0 {i % 60:02d}:00 | {line}" for i, line in enumerate(stamped(raw(lines)))],
    "runner junk": lambda lines: [f"[ci-runner-7] console: {line}" for line in raw(lines)],
    # /dev/kmsg records (`LEVEL,SEQ,USEC,FLAGS;`, `c` on a continued one) behind a syslog header
    "kmsg records": lambda lines: [f"Mar 31 19:37:52 host 4,{1072 + i},{209927860 + i},{'c' if i % 3 else '-'};{line}"
                                   for i, line in enumerate(raw(lines))],
}


def read_back(lines: list[str], file: str = "dmesg") -> tuple[list, LogStats]:
    stats = LogStats()
    splats = list(read_splats(lines, file, stats))
    return splats, stats


def lines_of(log: Path) -> list[str]:
    return log.read_text(encoding="utf-8").splitlines()


@pytest.mark.parametrize("layout", sorted(LAYOUTS))
@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_each_report_reads_back_as_its_finding(log: Path, layout: str) -> None:
    expect = expectations(log)
    splats, _ = read_back(LAYOUTS[layout](lines_of(log)))
    assert len(splats) == 1
    splat = splats[0]
    finding = to_finding(splat)
    assert splat.notes == []
    assert finding.kind == expect["kind"]
    assert finding.task == expect["task"]
    assert finding.lock == expect["lock"]
    assert finding.held == expect.get("held")
    if "cycle" in expect:
        assert finding.cycle == expect["cycle"].split(" -> ")
        assert finding.cycle[0] == finding.lock and finding.cycle[-1] == finding.held
    else:
        assert finding.cycle is None
    if "usage" in expect:
        prev_bit, new_bit = expect["usage"].split(" -> ")
        assert (finding.details["prev_bit"], finding.details["new_bit"]) == (prev_bit, new_bit)
    if "irqclass" in expect:
        assert finding.details["irqclass"] == expect["irqclass"]
    if "context" in expect:  # print_lock_invalid_wait_context: the task's wait context and the lock's wait types
        assert finding.details["context"] == expect["context"]
        if "held" in expect:  # the held lock whose inner wait type is below what the new lock needs
            assert finding.next.waits and finding.prev.waits and finding.next.waits > finding.prev.waits
        else:  # the context alone (a hardirq, a softirq) is the reason: below what the new lock needs
            assert finding.prev is None
            assert int(expect["context"].split(":")[1]) < int(finding.next.waits.split(":")[0])
    if "check" in expect:  # lockdep_rcu_suspicious: FILE:LINE of the check and what it says
        assert finding.details["check"] == expect["check"]
    if "safe" in expect:
        assert (finding.details["safe"].name, finding.details["unsafe"].name) == (expect["safe"], expect["unsafe"])
    assert finding.report is not None and finding.report.count == 1
    assert splat.kernel and splat.kernel.split()[0][0].isdigit()


def test_the_title_line_and_its_time_stamp_locate_the_report() -> None:
    splats, _ = read_back(lines_of(DATA / "circular-3-classes.log"), "boot.log")
    (splat,) = splats
    assert (splat.location, splat.ts) == ("boot.log:2", 2718.380180)


def test_the_chain_keeps_the_first_frame_past_lockdep_and_the_lock_primitives() -> None:
    (splat,) = read_back(lines_of(DATA / "circular-3-classes.log"))[0]
    sites = {link.depth: to_finding(splat).chain[i].evidence.at for i, link in enumerate(splat.chain)}
    assert sites == {2: "wg_noise_handshake_create_initiation+0xca/0x680",
                     1: "process_one_work+0x91b/0x17b0", 0: "flush_workqueue+0x115/0x1520"}


def test_other_callers_lines_inside_a_report_are_skipped_and_counted() -> None:
    # T9714, T9716 and T9717 print in the middle of T9712's report
    splats, stats = read_back(lines_of(DATA / "irq-inconsistent.log"))
    (splat,) = splats
    assert splat.details["registered"][1][-1] == "ret_from_fork+0x10/0x20"
    assert not any("loop" in frame for frame in splat.details["registered"][1])
    assert stats.other_lines >= 4


def test_the_irq_reports_keep_their_details() -> None:
    (inversion,) = read_back(lines_of(DATA / "irq-inversion.log"))[0]
    finding = to_finding(inversion)
    assert finding.details["forwards"] is True
    assert (finding.details["safe"], finding.details["unsafe"]) == ("&ctx->ctx_lock", "&pid->wait_pidfd")
    assert [link.cls for link in finding.details["path"]] == ["&pid->wait_pidfd", "&ctx->ctx_lock"]
    (bad,) = read_back(lines_of(DATA / "irq-safe-unsafe.log"))[0]
    finding = to_finding(bad)
    assert finding.details["irq_state"] == "[HC0[0]:SC0[0]:HE0:SE1]"
    assert [link.cls for link in finding.details["safe_path"]] == ["&dev->event_lock", "&client->buffer_lock"]
    assert [link.cls for link in finding.details["unsafe_path"]] == ["&new->fa_lock"]
    assert finding.details["usage_traces"]["IN-HARDIRQ-W"].at == "input_event+0x7b/0xb0"


def test_the_kinds_own_lines() -> None:
    (unlock,) = read_back(lines_of(DATA / "unlock-imbalance.log"))[0]
    assert to_finding(unlock).details["site"] == "ipmr_mfc_seq_stop+0xe4/0x140"
    (freed,) = read_back(lines_of(DATA / "held-lock-freed.log"))[0]
    assert to_finding(freed).details == {"mem_from": "000000007fcba654", "mem_to": "00000000499fef26"}
    (exit_,) = read_back(lines_of(DATA / "held-at-exit.log"))[0]
    assert to_finding(exit_).details["task_exit"] is True
    (user,) = read_back(lines_of(DATA / "user-return.log"))[0]
    assert to_finding(user).details["task_exit"] is False


# -- several reports, other output, truncation -------------------------------------------------


def test_several_reports_in_one_console_log_with_output_between() -> None:
    lines: list[str] = []
    for log in LOGS:
        lines += ["systemd[1]: Started Daily apt upgrade.", "EXT4-fs (sda1): mounted filesystem"]
        lines += raw(lines_of(log))
    lines = stamped(lines)
    splats, stats = read_back(lines)
    assert [s.kind for s in splats] == [expectations(log)["kind"] for log in LOGS]
    assert all(not s.notes for s in splats)
    assert stats.other_lines >= 2 * len(LOGS)


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_a_report_cut_short_gives_what_it_printed_with_a_note(log: Path) -> None:
    lines = raw(lines_of(log))
    expect = expectations(log)
    title = next(i for i, line in enumerate(lines) if classify(line).tag in kernel_log._TITLE_KINDS)
    lock_line = next(i for i, line in enumerate(lines) if i > title and classify(line).tag in
                     ("lock_line", "release_head", "held_entry"))
    for cut in range(title + 1, len(lines)):
        splats, _ = read_back(lines[:cut])
        assert len(splats) == 1
        splat = splats[0]
        complete = not splat.notes
        if cut > lock_line and expect["kind"] != F.HELD_AT_EXIT:
            assert to_finding(splat).lock == expect["lock"]
        if not complete:
            assert any("cut short" in note or "lost lines" in note for note in splat.notes)


#: sentences that only a lockdep report prints, after its title (lockdep.c's print_*_bug functions)
_REPORT_ONLY = ("*** DEADLOCK ***", "May be due to missing lock nesting notation",
                "the existing dependency chain (in reverse order) is:", "which lock already depends on the new lock.",
                "but there are no more locks to release!")


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_a_report_whose_start_the_log_lost_is_noted_not_passed_over(log: Path) -> None:
    """A log that begins inside a report (a dmesg whose ring buffer wrapped, a paste of a report's
    middle): its kind, task and lock came before the cut, so nothing is read, but where its
    remaining lines say they are a lockdep report, a note says so (one per report) instead of
    the log passing as clean -- unless they hold a circular report's chain entries, which are
    read as a partial report (test_kernel_log_partial)."""
    lines = stamped(raw(lines_of(log)))
    splats, stats = read_back(lines)
    assert stats.headless == 0 and len(splats) == 1  # a whole report is no headless part
    title = next(i for i, line in enumerate(lines) if split_prefix(line)[2].startswith(("WARNING: ", "[ ")))
    for cut in range(title + 1, len(lines)):
        rest = lines[cut:]
        says = [i for i, line in enumerate(rest, 1) if split_prefix(line)[2].strip() in _REPORT_ONLY]
        splats, stats = read_back(rest, "wrapped.log")
        if any(classify(split_prefix(line)[2]).tag in ("chain_entry", "chain_head") for line in rest):
            [splat] = splats
            assert splat.details["partial"] and splat.chain and (stats.headless, stats.notes) == (0, []), cut
            continue
        assert splats == [], cut
        assert stats.headless == (1 if says else 0), cut
        if says:
            [note] = stats.notes
            assert note.startswith(f"wrapped.log:{says[0]}: part of a lockdep report whose start is not in the log")


def test_each_headless_part_is_noted_once() -> None:
    report = raw(lines_of(DATA / "circular-3-classes.log"))
    tail = report[report.index("other info that might help us debug this:"):]
    other = [f"usb 1-1: event {i}" for i in range(250)]  # far enough apart to be two reports
    splats, stats = read_back(stamped(tail + other + tail))
    assert splats == [] and stats.headless == 2 and len(stats.notes) == 2
    # and the closing note of a run says what was not read
    from lockcheck.kernel.log_findings import ReportCollector

    collector = ReportCollector(None)
    collector.log_done("dmesg", stats)
    assert collector.notes()[0].startswith("read no lockdep report from 1 kernel log, and 2 parts of reports "
                                           "whose start is not in the log; skipped ")


_PRINTED_CLASS = re.compile(r"\((\S[^\n]*?)\)\{[-+.?]*\}|lock\(([^\n]*?)\);")


@pytest.mark.parametrize("log", LOGS, ids=lambda p: p.stem)
def test_the_text_report_of_a_report_cut_short_makes_nothing_up(log: Path) -> None:
    """Wherever the log ends, every class the text report names is one the log printed so far:
    a part the log lost (the held lock, the chain, the held-lock list, the scenario built from
    them) is said to be missing, never filled in with another class."""
    import io

    from lockcheck.report import Summary, text

    lines = raw(lines_of(log))
    title = next(i for i, line in enumerate(lines) if classify(line).tag in kernel_log._TITLE_KINDS)
    heading = re.sub(r"^(WARNING: |\[ (INFO|BUG): )|( \])$", "", lines[title].strip())
    for cut in range(title + 1, len(lines) + 1):
        splats, _ = read_back(lines[:cut])
        if splats[0].lock is None and not splats[0].held_locks:
            continue  # no lock printed yet: such a report is only a note (logreports.ReportCollector)
        out = io.StringIO()
        text.print_finding(to_finding(splats[0]), Summary(), out)
        # the report's own title, whatever was lost (`[ BUG: Invalid wait context ]` is the kernel's to this day)
        assert f"WARNING: {heading}\n" in out.getvalue() or f"\n{lines[title].strip()}\n" in out.getvalue(), cut
        seen = "\n".join(lines[:cut])
        for match in _PRINTED_CLASS.finditer(out.getvalue()):
            name = match.group(1) or match.group(2)
            assert f"({name})" in seen or f"({name}){{" in seen or f" {name} " in seen, (cut, name)
        if cut < len(lines) and splats[0].held_count is None:
            assert "no locks held by" not in out.getvalue(), cut


def test_another_report_starting_cuts_the_first_short() -> None:
    first = raw(lines_of(DATA / "circular-4-classes.log"))[:30]
    second = raw(lines_of(DATA / "recursive.log"))
    splats, _ = read_back(stamped(first + second))
    assert [s.kind for s in splats] == [F.CIRCULAR, F.RECURSIVE]
    assert "another report starts" in splats[0].notes[0]
    assert to_finding(splats[0]).cycle is None  # -> #0 never came
    assert splats[1].notes == []


def test_lost_console_lines_are_noted() -> None:
    lines = raw(lines_of(DATA / "circular-4-classes.log"))
    start = lines.index("-> #2 (sb_writers){.+.+}:")
    end = lines.index("-> #1 ((completion)&req.done){+.+.}:")
    lines = lines[:start] + lines[end:]
    held = lines.index("1 lock held by syz-executor7/8848:")
    del lines[held + 1]
    (splat,) = read_back(lines)[0]
    assert "lost lines: chain entries -> #2 are missing" in splat.notes
    assert "lost lines: 0 of 1 held lock printed" in splat.notes
    finding = to_finding(splat)
    assert finding.cycle is None and finding.lock == "console_lock" and len(finding.chain) == 3


def test_capacity_warnings_and_an_invalid_wait_context_are_reports() -> None:
    lines = stamped(["BUG: MAX_LOCKDEP_ENTRIES too low!", "turning off the locking correctness validator.",
                     "Please attach the output of /proc/lock_stat to the bug report",
                     "=============================", "[ BUG: Invalid wait context ]", "6.1.0 #1 Not tainted"])
    splats, stats = read_back(lines, "boot.log")
    # the capacity BUG turned lockdep off: a lockdep-warning; the cut-short report is a report, never a note
    assert [(s.kind, s.line) for s in splats] == [(F.LOCKDEP_WARNING, 1), (F.INVALID_WAIT, 5)]
    assert splats[0].details == {"message": "BUG: MAX_LOCKDEP_ENTRIES too low!"}
    assert stats.notes == []


def test_max_lock_depth_is_read_as_lock_depth_exceeded() -> None:
    held = [f" #{i}: ffff8880{i:08x} (&lock{i}){{+.+.}}-{{3:3}}, at: f{i}+0x10/0x20" for i in range(48)]
    lines = ["BUG: MAX_LOCK_DEPTH too low!", "turning off the locking correctness validator.",
             "depth: 48  max: 48!", "48 locks held by kworker/0:1/42:"] + held + ["INFO: lockdep is turned off."]
    (splat,) = read_back(stamped(lines))[0]
    finding = to_finding(splat)
    assert (finding.kind, finding.lock, finding.details) == (F.MAX_DEPTH, "&lock47", {"depth": 48, "max": 48})
    assert splat.notes == []


# -- detection ---------------------------------------------------------------------------------


def test_sniff_takes_dmesg_with_and_without_reports_and_syzbot_text() -> None:
    report = raw(lines_of(DATA / "recursive.log"))
    assert kernel_log.sniff(report[:32])
    assert kernel_log.sniff(stamped(["Linux version 6.8.0 (gcc 13.2)", "Command line: ro quiet"]))
    assert kernel_log.sniff(["SeaBIOS (version 1.16)", "Booting from Hard Disk 0...",
                             "[    0.000000] Linux version 6.8.0"])
    assert not kernel_log.sniff(["#lockcheck-trace v1", "T1 acquire A"])
    assert not kernel_log.sniff(["hello", "world"])


def test_split_prefix_knows_the_common_log_headers() -> None:
    body = "WARNING: possible recursive locking detected"
    for line in (f"[   19.690212] {body}", f"[ 2718.380180][ T3699] {body}", f"[  414.275945][T17509] {body}",
                 f"[ 1740.381206][    C0] {body}", f"<4>[   12.000001] {body}", f"Jun 11 11:02:51 host kernel: {body}",
                 f"Sat Apr 22 18:53:56 2023 kern.warn kernel: [   26.161693] {body}",
                 f"2016-03-26T20:52:22.526425+00:00 mira108 kernel: {body}", body):
        assert split_prefix(line)[2] == body, line


# -- the fast path outside reports is held to the grammar ------------------------------------

_TITLES = [
    "possible recursive locking detected", "possible circular locking dependency detected",
    "inconsistent lock state", "possible irq lock inversion dependency detected",
    "SOFTIRQ-safe -> SOFTIRQ-unsafe lock order detected", "bad unlock balance detected!",
    "Nested lock was not taken", "held lock freed!", "kworker/0:1/42 still has locks held!",
    "lock held when returning to user space!", "Invalid wait context",
]
_OPENERS = ["WARNING: ", "[ INFO: ", "[ BUG: ", "BUG: ", "INFO: ", "", "WARNING:", "[INFO: "]
_CAPACITY = ["BUG: MAX_LOCKDEP_KEYS too low!", "BUG: looking up invalid subclass: 9",
             "INFO: trying to register non-static key.", "BUG: MAX_STACK_TRACE_ENTRIES too low!"]


@settings(max_examples=300, deadline=None)
@given(opener=st.sampled_from(_OPENERS), title=st.sampled_from(_TITLES), close=st.sampled_from(["", " ]", "]"]),
       capacity=st.sampled_from(_CAPACITY), which=st.booleans(), noise=st.text(max_size=3))
def test_may_start_accepts_every_line_the_grammar_reads_as_a_title(opener, title, close, capacity, which,
                                                                 noise) -> None:
    line = (opener + title + close) if which else capacity
    if noise:
        line = line[:len(line) // 2] + noise + line[len(line) // 2:]
    tag = classify(line).tag
    if tag in kernel_log._TITLE_KINDS or tag in kernel_log._OTHER_TITLES or tag in kernel_log._CAPACITY:
        assert kernel_log._may_start(line)


def test_a_callers_report_abandoned_under_other_callers_output_is_closed_where_it_stopped() -> None:
    report = raw(lines_of(DATA / "recursive.log"))[:12]  # up to the scenario: no held list, no backtrace
    other = [f"[{20 + i / 1000:12.6f}][  T999] usb 1-1: event {i}" for i in range(250)]
    second = with_callers(raw(lines_of(DATA / "recursive.log")), "T7", 30.0)
    splats, stats = read_back(with_callers(report, "T1", 10.0) + other + second)
    assert [s.kind for s in splats] == [F.RECURSIVE, F.RECURSIVE]
    first, again = splats
    assert first.notes and "nothing more of it in the 200 lines that follow" in first.notes[0]
    assert first.end == 12 and again.notes == []
    assert stats.other_lines >= 250


def test_a_paste_without_its_stack_backtrace_line_ends_at_the_call_trace() -> None:
    """Commit messages quote a report with `stack backtrace:` and the CPU line left out."""
    lines = [line for line in raw(lines_of(DATA / "recursive.log"))
             if line.strip() not in ("stack backtrace:",) and not line.startswith(("CPU:", "Hardware name:"))]
    (splat,) = read_back([f"  {line}" for line in lines])[0]
    assert splat.notes == [] and splat.held_count == len(splat.held_locks) == 2
    # before the held list is complete, a Call Trace line does not end the report
    cut = [line for line in lines if not line.lstrip().startswith("#1:")]
    (short,) = read_back(cut)[0]
    assert any("cut short" in note or "lost lines" in note for note in short.notes)


@pytest.mark.parametrize("pattern, replacement, what", [
    (r"-> #1 ", "-> #{n} ", "chain entry number"),
    (r" #0: ", " #{n}: ", "held lock number"),
    (r"\d+ locks? held by", "{n} locks held by", "lock count"),
])
@pytest.mark.parametrize("digits", ["7" * 5000, "٣"])
def test_a_number_lockdep_never_prints_is_an_error_at_its_line(pattern, replacement, what, digits):
    """`-> #N`, ` #N:`, `N locks held`: 5,000 digits (over int()'s limit) or non-ASCII digits were an
    internal error; now a TraceError naming the line, as every other number of an input."""
    from lockcheck.errors import TraceError

    text = (DATA / "circular-2-classes.log").read_text()
    bad = re.sub(pattern, replacement.format(n=digits), text, count=1)
    lineno = next(i for i, line in enumerate(bad.splitlines(), 1) if digits in line)
    with pytest.raises(TraceError) as caught:
        list(read_splats(bad.splitlines(), "x.log"))
    assert caught.value.line == lineno and what in str(caught.value)


@pytest.mark.parametrize("site", [", at: ", ", at:"])
def test_an_empty_at_keeps_the_lock_name(site):
    """A held-lock line whose `at:` is empty (no symbol, or cut by a paste) gave the lock `?`."""
    text = (DATA / "circular-2-classes.log").read_text()
    bad = text.replace(", at: [<ffffffff83542c29>] lo_compat_ioctl+0x109/0x140", site, 1)
    assert bad != text
    [splat] = read_splats(bad.splitlines(), "x.log")
    finding = to_finding(splat)
    assert (finding.lock, finding.held) == ("&bdev->bd_mutex", "&lo->lo_ctl_mutex#2")
