"""The ftrace reader: line shapes, irq context, nameless lines, the fast scanner vs the grammar, real captures."""

from __future__ import annotations

import lzma
from collections import Counter

import pytest
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from lockcheck.errors import TraceError
from lockcheck.events import ACQUIRE, READ, RELEASE, RREAD, WRITE
from lockcheck.readers import ftrace, ftrace_scan

from testdata import CAPTURES, ROOT as REPO

HEADER = """\
# tracer: nop
#
# entries-in-buffer/entries-written: 4/4   #P:2
#
#                                _-----=> irqs-off/BH-disabled
#                               / _----=> need-resched
#                              | / _---=> hardirq/softirq
#                              || / _--=> preempt-depth
#                              ||| / _-=> migrate-disable
#                              |||| /     delay
#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION
#              | |         |   |||||     |         |""".splitlines()


def read(lines, **kwargs):
    return list(ftrace.parse(lines, "t.ftrace", **kwargs))


def lock_events(events):
    return [e for e in events if e.op in ("acquire", "release", "contended", "acquired")]


# -- line shapes ------------------------------------------------------------------


def test_modern_line_with_header():
    events = read(HEADER + [
        "            bash-1234    [002] .....   123.456789: lock_acquire: 000000005b4e2a1c &mm->mmap_lock",
        "            bash-1234    [002] .....   123.456805: lock_release: 000000005b4e2a1c &mm->mmap_lock",
    ])
    assert [(e.task, e.op, e.lock, e.instance, e.mode, e.cpu, e.ts, e.line, e.comm) for e in events] == [
        ("1234", ACQUIRE, "&mm->mmap_lock", "0x000000005b4e2a1c", WRITE, 2, 123.456789, 13, "bash/1234"),
        ("1234", RELEASE, "&mm->mmap_lock", "0x000000005b4e2a1c", WRITE, 2, 123.456805, 14, "bash/1234"),
    ]
    assert events[0].file == "t.ftrace"


def test_old_four_column_layout_and_raw_pointers():
    (event,) = read(["            bash-1234  [002] ...2   123.456789: lock_acquire: ffff88007c2e8d38 &mm->mmap_sem"])
    assert (event.task, event.lock, event.instance) == ("1234", "&mm->mmap_sem", "0xffff88007c2e8d38")


def test_comms_with_dashes_blanks_and_unknown():
    events = read([
        "   kworker/u16:3-ev-87      [005] ..... 4567.000001: lock_acquire: 00000000c0ffee12 A",
        "   Web Content-4242    [001] ..... 4567.000002: lock_acquire: 00000000c0ffee13 B",
        "           <...>-87      [005] ..... 4567.000003: lock_release: 00000000c0ffee12 A",
        "           <...>-99      [000] ..... 4567.000004: lock_acquire: 00000000c0ffee14 C",
    ])
    assert [(e.task, e.comm) for e in events] == [
        ("87", "kworker/u16:3-ev/87"), ("4242", "Web Content/4242"), ("87", "kworker/u16:3-ev/87"), ("99", "<...>/99"),
    ]


def test_tgid_column_no_flags_and_trace_cmd_padding():
    events = read([
        "cpus=2",
        "            bash-1234    (   1230) [002] .....   123.456789: lock_acquire: 000000005b4e2a1c X",
        "            bash-1234    (-------) [002] .....   123.456790: lock_acquire: 000000005b4e2a1d Y",
        "            bash-1234  [002]   123.456791: lock_release:         0xffff88810a2b3c40 Z",
    ])
    assert [(e.task, e.lock, e.instance) for e in events] == [
        ("1234", "X", "0x000000005b4e2a1c"), ("1234", "Y", "0x000000005b4e2a1d"), ("1234", "Z", "0xffff88810a2b3c40"),
    ]


def test_try_and_read_prefixes_and_read_policy():
    events = read([
        "  cat-7  [000] ...2.  1.000001: lock_acquire: 0000000000000001 try read &mm->mmap_lock",
        "  cat-7  [000] ...2.  1.000002: lock_acquire: 0000000000000002 read rcu_read_lock",
        "  cat-7  [000] ...2.  1.000003: lock_acquire: 0000000000000003 try &pcp->lock",
        "  cat-7  [000] ...2.  1.000004: lock_acquire: 0000000000000004 read tasklist_lock",
        "  cat-7  [000] d.h2.  1.000005: lock_acquire: 0000000000000004 read tasklist_lock",
        "  cat-7  [000] ...2.  1.000006: lock_acquire: 0000000000000005 read tk_core.seq.seqcount",
        "  cat-7  [000] ...2.  1.000007: lock_acquire: 0000000000000006 tryhard",
    ])
    got = [(e.lock, e.trylock, e.mode) for e in lock_events(events)]
    assert got == [
        ("&mm->mmap_lock", True, READ), ("rcu_read_lock", False, RREAD), ("&pcp->lock", True, WRITE),
        ("tasklist_lock", False, READ), ("tasklist_lock", False, RREAD), ("tk_core.seq.seqcount", False, RREAD),
        ("tryhard", False, WRITE),
    ]


def test_read_policy_override():
    line = "  cat-7  [000] ...2.  1.0: lock_acquire: 01 read &mm->mmap_lock"
    (event,) = read([line], read_policy=lambda name, in_irq: RREAD)
    assert event.mode == RREAD


@pytest.mark.parametrize(("name", "in_irq", "mode"), [
    ("rcu_read_lock", False, RREAD), ("rcu_read_lock_bh", False, RREAD), ("rcu_read_lock_sched", False, RREAD),
    ("rcu_callback", False, RREAD), ("&____s->seqcount", False, RREAD), ("&fsnotify_mark_srcu", False, RREAD),
    ("(wq_completion)events", False, RREAD), ("tasklist_lock", True, RREAD), ("tasklist_lock", False, READ),
    ("sb_writers", False, READ), ("cpu_hotplug_lock", False, READ), ("binfmt_lock", False, READ),
])
def test_read_mode_policy(name, in_irq, mode):
    assert ftrace.read_mode(name, in_irq) == mode


def test_other_events_and_contention_are_skipped_and_counted():
    stats = ftrace.ReaderStats()
    events = read([
        "  init-1  [000] .....  5.845789: tracing_mark_write: lockcheck: workload begin",
        "  init-1  [000] ...2.  5.834976: contention_begin: 00000000a467ae70 (flags=SPIN|MUTEX)",
        "  init-1  [000] ...2.  5.834997: contention_end: 00000000a467ae70 (ret=0)",
        "  init-1  [000] ...2.  5.834998: sched_switch:",
        "",
        "   ",
    ], stats=stats)
    assert events == []
    assert stats.skipped == Counter({"tracing_mark_write": 1, "contention_begin": 1, "contention_end": 1,
                                     "sched_switch": 1})
    assert stats.contention == 2
    assert stats.notes()[0].startswith("skipped 4 lines of other events")


def test_lost_events_marker():
    stats = ftrace.ReaderStats()
    events = read(["CPU:1 [LOST 12 EVENTS]", "CPU:0 [LOST EVENTS]", "CPU:3 [7 EVENTS DROPPED]"], stats=stats)
    assert [(e.op, e.cpu, e.task) for e in events] == [(ftrace.LOST_EVENTS, 1, ""), (ftrace.LOST_EVENTS, 0, ""),
                                                       (ftrace.LOST_EVENTS, 3, "")]
    assert stats.lost_markers == 3


def test_idle_tasks_are_per_cpu():
    events = read([
        "  <idle>-0  [000] d.h2.  1.0: lock_acquire: 01 &rq->__lock",
        "  <idle>-0  [001] d.h2.  1.1: lock_acquire: 02 &rq->__lock",
    ])
    assert [(e.task, e.comm) for e in lock_events(events)] == [("0/0", "swapper/0/0"), ("0/1", "swapper/1/0")]


# -- irq context ------------------------------------------------------------------


def ops(events):
    return [e.op if e.op not in ("acquire", "release") else f"{e.op} {e.lock}" for e in events]


def test_hardirq_entry_and_exit_from_flags():
    events = read([
        "  cat-7  [000] ...1.  1.0: lock_acquire: 01 A",
        "  cat-7  [000] d.h2.  1.1: lock_acquire: 02 B",
        "  cat-7  [000] d.h2.  1.2: lock_release: 02 B",
        "  cat-7  [000] ...1.  1.3: lock_release: 01 A",
    ])
    assert ops(events) == ["acquire A", "irqs-off", "hardirq-enter", "acquire B", "release B",
                           "hardirq-exit", "irqs-on", "release A"]
    # the synthetic events carry the line that revealed the change
    assert [e.line for e in events] == [1, 2, 2, 2, 3, 4, 4, 4]


def test_softirq_irqs_off_and_hardirq_over_softirq():
    events = read([
        "  cat-7  [000] ..s1.  1.0: lock_acquire: 01 S",
        "  cat-7  [000] d.H2.  1.1: lock_acquire: 02 H",
        "  cat-7  [000] ..s1.  1.2: lock_release: 01 S",
        "  cat-7  [000] d..1.  1.3: lock_acquire: 03 P",
        "  cat-7  [000] ...1.  1.4: lock_release: 03 P",
    ])
    assert ops(events) == [
        "softirqs-off", "softirq-enter", "acquire S",
        "irqs-off", "hardirq-enter", "acquire H",
        "hardirq-exit", "irqs-on", "release S",
        "softirq-exit", "irqs-off", "softirqs-on", "acquire P",
        "irqs-on", "release P",
    ]


def test_capture_starting_inside_a_handler():
    events = read(["  <idle>-0  [001] d.h3.  5.835316: lock_release: 00000000b07a0d58 hrtimer_bases.lock"])
    assert ops(events) == ["irqs-off", "hardirq-enter", "release hrtimer_bases.lock"]


def test_four_column_s_is_bh_disabled_unless_after_an_irq():
    events = read([
        "  cat-7  [000] ..s1  1.0: lock_acquire: 01 A",  # spin_lock_bh in process context
        "  cat-7  [000] d.h1  1.1: lock_acquire: 02 B",
        "  cat-7  [000] ..s1  1.2: lock_acquire: 03 C",  # softirq run from irq_exit()
        "  ksoftirqd/0-9  [000] ..s1  1.3: lock_acquire: 04 D",
    ])
    assert ops(events) == [
        "softirqs-off", "acquire A",
        "irqs-off", "hardirq-enter", "softirqs-on", "acquire B",  # `h`, not `H`: BH was enabled again
        "hardirq-exit", "softirqs-off", "softirq-enter", "irqs-on", "acquire C",
        "softirqs-off", "softirq-enter", "acquire D",
    ]


# -- nameless lines (6.1 with hash-ptr off) -----------------------------------------


def test_empty_names_resolved_by_address():
    stats = ftrace.ReaderStats()
    events = read([
        "  init-1  [001] ...1.  3.880539: lock_release: ffffffff81dbec10 ",
        "  init-1  [001] ...2.  3.881107: lock_acquire: ffff8880001e40d8 &newf->file_lock",
        "  init-1  [001] ...2.  3.881125: lock_acquired: ffff8880001e40d8 ",
        "  cat-2   [000] ...2.  3.881126: lock_contended: ffff8880001e40d8",
        "  init-1  [001] ...2.  3.881132: lock_release: ffff8880001e40d8 ",
    ], stats=stats)
    assert [(e.op, e.lock) for e in events] == [
        ("release", ftrace.UNKNOWN_LOCK), ("acquire", "&newf->file_lock"), ("acquired", "&newf->file_lock"),
        ("contended", "&newf->file_lock"), ("release", "&newf->file_lock"),
    ]
    assert (stats.names_resolved, stats.names_unresolved) == (3, 1)


def test_address_map_is_bounded_by_held_locks():
    reader = ftrace.FtraceReader()
    lines = []
    for n in range(1000):
        lines.append(f"  a-1  [000] ...1.  1.{n:06d}: lock_acquire: {n:016x} L{n}")
        lines.append(f"  a-1  [000] ...1.  1.{n:06d}: lock_release: {n:016x} ")
    lines.append("  a-1  [000] ...1.  2.0: lock_acquire: 01 R")
    lines.append("  a-1  [000] ...1.  2.0: lock_acquire: 01 R")
    lines.append("  a-1  [000] ...1.  2.0: lock_release: 01 ")
    events = list(reader.parse(lines))
    assert len(reader.held) == 1
    assert events[-1].lock == "R"


# -- errors ------------------------------------------------------------------------


@pytest.mark.parametrize(("line", "col"), [
    ("  bash-1234  [002] .....   123.456789: lock_acquire: zz &mm->mmap_lock", 54),
    ("  bash-1234  [002] .....   123.456789 lock_acquire: 00 A", 38),
    ("  bash-1234  [002] .....   123.456789: lock_acquire: 00 try  A", 62),
    ("  bash-1234  [0x2] .....   1.0: lock_acquire: 00 A", 3),
    ("this is not a trace", 1),
    ("  bash-1234  [002] .....   123.456789: lock_release:", 53),
])
def test_malformed_lines_give_file_line_col(line, col):
    with pytest.raises(TraceError) as info:
        read(["# tracer: nop", line])
    error = info.value
    assert (error.file, error.line, error.col) == ("t.ftrace", 2, col)
    assert error.format().startswith(f"t.ftrace:2:{col}: ")
    assert error.source == line


def test_sniff():
    assert ftrace.sniff(HEADER[:3])
    assert ftrace.sniff(["", "  bash-1  [000] .... 1.0: lock_acquire: 01 A"])
    assert ftrace.sniff(["cpus=2", "  bash-1  [000] 1.0: lock_acquire: 0x01 A"])
    assert not ftrace.sniff(["T1 acquire A"])
    assert not ftrace.sniff(['{"task": "T1", "op": "acquire", "lock": "A"}'])
    assert not ftrace.sniff(["            bash    1234 [002]   123.456789: lock:lock_acquire: 0xffff8881 A"])


def test_sample_capture_reads():
    lines = (REPO / "traces" / "sample.ftrace").read_text().splitlines()
    events = read(lines)
    assert {e.lock for e in lock_events(events)} >= {"&a->lock", "&b->lock"}
    assert any(e.op == "hardirq-enter" for e in events)


# -- the fast scanner agrees with the grammar --------------------------------------

COMM_CHARS = st.sampled_from(list("abcdkworker/u:0123456789-_.<>[]() ") + ["<...>", "-1", " [1]", "-2 [3] "])
comms = st.lists(COMM_CHARS, min_size=1, max_size=8).map("".join)
numbers = st.integers(0, 99999).map(str)
flag_columns = st.one_of(
    st.tuples(*(st.sampled_from(sorted(chars)) for chars in ftrace_scan._FLAG_SETS)).map("".join),
    st.tuples(*(st.sampled_from(sorted(chars)) for chars in ftrace_scan._FLAG_SETS[:4])).map("".join),
    st.text("dDhsH.123 x", min_size=0, max_size=6),
)
events_ = st.sampled_from(["lock_acquire", "lock_release", "lock_contended", "lock_acquired", "contention_begin",
                           "tracing_mark_write", "lock_acquire_x", "lock:lock_acquire", "9bad", ""])
addresses = st.one_of(st.sampled_from(["000000005b4e2a1c", "ffff88803ebe85d8", "0x01", "0x", "zz", "", "0xAB"]),
                      st.text("0123456789abcdefx", min_size=1, max_size=6))
names = st.one_of(
    st.sampled_from(["&mm->mmap_lock", "(wq_completion)events", "subsys mutex#2", "a: b", "", " ", "try", "read x"]),
    st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=10),
)
prefixes = st.sampled_from(["", "try ", "read ", "try read ", "read try ", "try  ", " "])
blanks = st.sampled_from([" ", "  ", "     ", "\t", ""])


@st.composite
def ftrace_lines(draw):
    comm = draw(comms)
    parts = [draw(st.sampled_from(["", "   ", "\t"])), comm.rjust(16) if draw(st.booleans()) else comm,
             "-", draw(numbers), draw(blanks)]
    if draw(st.booleans()):
        parts += [draw(st.sampled_from(["(   1230)", "(-------)", "(x)", "(12"])), draw(blanks)]
    parts += ["[", draw(st.sampled_from(["000", "1", "x", ""])), "]", draw(blanks)]
    if draw(st.booleans()):
        parts += [draw(flag_columns), draw(blanks)]
    parts += [draw(st.sampled_from(["5.834099", "12", "1.", ".5", "1.2.3", "x"])), draw(st.sampled_from([":", ""])),
              draw(blanks), draw(events_), draw(st.sampled_from([":", ""])), draw(blanks), draw(addresses),
              draw(blanks), draw(prefixes), draw(names), draw(st.sampled_from(["", " ", "  "]))]
    return "".join(parts)


def slow_or_error(line):
    try:
        return ftrace.scan_slow(line)
    except TraceError:
        return "error"


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.one_of(ftrace_lines(), st.text(max_size=60)))
@example("            init-1       [000] ...1.     5.834099: lock_release: 00000000e9bc521e trace_types_lock")
@example("  a-1 [2]-5 [000] ..... 1.0: lock_acquire: 01 A")
@example("  a] b-5 [000] ..... 1.0: lock_acquire: 01 A")
def test_fast_scanner_agrees_with_grammar(line):
    fast = ftrace.scan(line)
    if fast is not None:
        assert fast == slow_or_error(line)


_STAMPS = ["5.834099", "12", "1.", ".5", "1.2.3", "x", "", "00012345.678901", "1\u0663"]


kernel_lines = st.builds(
    lambda comm, pid, cpu, flags, event, name: f"{comm:>16}-{pid:<7} [{cpu:03d}] {flags} 5.1: {event}: 0005b4e2a1c {name}",
    st.sampled_from(["bash", "kworker/0:1", "<...>", "a b"]), numbers, st.integers(0, 255), flag_columns,
    st.sampled_from(sorted(ftrace.LOCK_EVENTS) + ["contention_begin"]),
    st.sampled_from(["&mm->mmap_lock", "read rcu_read_lock", "try &x->y", "", "caf\u00e9"]))


@settings(max_examples=400, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(st.lists(st.one_of(kernel_lines, ftrace_lines(), st.text(max_size=60)), min_size=1, max_size=6),
       st.lists(st.sampled_from(_STAMPS), min_size=1, max_size=4))
def test_compiled_scanner_is_the_pure_one(lines, stamps):
    """`scan` (compiled where built) answers what `scan_pure` answers, line for line, whether the
    line's pieces are cached or not: each line is read again with other time stamps, so the second
    reading of its head, flags and text comes from the caches the first one filled."""
    for line in lines:
        for stamp in [None, "5.834099"] + stamps:
            if stamp is not None:
                cut = line.find(": ")
                blank = line.rfind(" ", 0, cut)
                if cut < 0 or blank < 0:
                    continue
                line = line[:blank + 1] + stamp + line[cut:]
            assert ftrace_scan.scan(line) == ftrace_scan.scan_pure(line), line


def test_the_compiled_scanner_is_used_where_built():
    import importlib.util
    import os

    built = importlib.util.find_spec("lockcheck.readers._ftscan") is not None
    assert (ftrace_scan.scan is not ftrace_scan.scan_pure) == (built and os.environ.get("LOCKCHECK_PURE") != "1")
    assert ftrace.scan is ftrace_scan.scan and ftrace.FtraceReader.scan is ftrace_scan.scan


# kprobe lines: "(SITE) ARG=VALUE ...", and near misses of every part
probe_sites = st.one_of(st.sampled_from(["(lock_acquire+0x0/0x212)", "(ffffffff81123450)"]),
                        st.sampled_from(["()", "(a b)", "((x)", "(x", "(lock_acquire+0x4/0x20) ", "(x)y"]))
arg_names = st.one_of(st.sampled_from(["map", "subclass", "nest_lock", "name", "_x1"]),
                      st.sampled_from(["1x", "", "a-b", "é"]))
arg_values = st.one_of(
    st.sampled_from(["0xffff888000ac8158", "1", "-1", "0x0", "(fault)", '"&mm->mmap_lock"', '"subsys mutex#2"',
                     '""', '"a" b"', '"a b=c"', '"x', "dup_mmap+0xf5/0x47b", "f+0x1/0x2 [mod]", "f [a b]", "f []",
                     "f [m]x", "", " ", '"q" z=1"', "a\tb"]),
    st.text(st.sampled_from(list('ab =["] 0x')), max_size=8),
)


@st.composite
def probe_payloads(draw):
    blank = st.one_of(st.just(" "), st.sampled_from(["  ", ""]))
    args = "".join(f"{draw(blank)}{draw(arg_names)}={draw(arg_values)}" for _ in range(draw(st.integers(0, 4))))
    return f"{draw(probe_sites)}{args}{draw(st.one_of(st.just(''), st.just(' ')))}"


@st.composite
def good_probe_payloads(draw):
    """Well-formed probe payloads: names and strings of any characters, symbols with modules."""
    text = st.text(st.characters(blacklist_categories=("Cs",), blacklist_characters="\n\r"), max_size=8)
    values = st.one_of(st.integers(-5, 1 << 64).map(str), st.integers(0, 1 << 64).map(hex), text.map('"{}"'.format),
                       st.sampled_from(["(fault)", "f+0x1/0x2 [mod]", "0xffffffff81000000"]))
    args = "".join(f" {name}={draw(values)}" for name in draw(st.lists(st.sampled_from(
        ["map", "subclass", "trylock", "read", "check", "nest_lock", "ip", "name"]), min_size=1, max_size=8)))
    return f"{draw(probe_sites)}{args}"


@settings(max_examples=600, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(event=st.sampled_from(["lock_acquire_args", "p", "x9", "lock_acquire"]),
       payload=st.one_of(probe_payloads(), good_probe_payloads()))
@example(event="p", payload='(lock_acquire+0x0/0x212) map=0xffff888000ac8158 subclass=1 trylock=0 read=0 check=1 '
                            'nest_lock=0x0 ip=dup_mmap+0xf5/0x47b name="&mm->mmap_lock"')
@example(event="p", payload='(x) name="a" b=1" c=2')
def test_fast_scanner_agrees_with_grammar_on_probe_lines(event, payload):
    line = f"            demo-7       [000] ...1.     5.834099: {event}: {payload}"
    fast = ftrace.scan(line)
    if fast is not None:
        assert fast == slow_or_error(line)


def test_a_well_formed_probe_line_takes_the_fast_path():
    line = ('  demo-7  [000] ...1.  1.000: lock_acquire_args: (lock_acquire+0x0/0x212) map=0xffff888000ac8158 '
            'subclass=1 trylock=0 read=0 check=1 nest_lock=0x0 ip=dup_mmap+0xf5/0x47b name="&mm->mmap_lock"')
    fast = ftrace.scan(line)
    assert fast is not None and fast == ftrace.scan_slow(line)
    assert fast[3][5:] == ("lock_acquire+0x0/0x212", (
        ("map", "0xffff888000ac8158"), ("subclass", "1"), ("trylock", "0"), ("read", "0"), ("check", "1"),
        ("nest_lock", "0x0"), ("ip", "dup_mmap+0xf5/0x47b"), ("name", '"&mm->mmap_lock"')))


@settings(max_examples=200, deadline=None)
@given(comm=st.text("abcXYZ09/:-_. <>", min_size=1, max_size=15).filter(lambda c: c.strip() == c),
       pid=numbers, cpu=st.integers(0, 255),
       flags=st.tuples(*(st.sampled_from(sorted(chars)) for chars in ftrace_scan._FLAG_SETS)).map("".join),
       event=st.sampled_from(sorted(ftrace.LOCK_EVENTS)), prefix=st.sampled_from(["", "try ", "read ", "try read "]),
       name=st.sampled_from(["&mm->mmap_lock", "(wq_completion)events", "subsys mutex#2", "rcu_read_lock", ""]))
def test_kernel_shaped_lines_take_the_fast_path(comm, pid, cpu, flags, event, prefix, name):
    if event != "lock_acquire":
        prefix = ""
    line = f"{comm:>16}-{pid:<7} [{cpu:03d}] {flags} {12345.678901:12.6f}: {event}: 000000005b4e2a1c {prefix}{name}"
    fast = ftrace.scan(line)
    assert fast is not None
    assert fast == ftrace.scan_slow(line)
    assert fast[0] == (comm, pid, f"{cpu:03d}")


# -- real captures -------------------------------------------------------------------


def capture_lines(boot):
    with lzma.open(CAPTURES / boot / "trace.ftrace.xz", "rt", encoding="utf-8") as handle:
        return handle.read().splitlines()


@pytest.mark.parametrize(("boot", "lock_lines", "skipped"), [
    ("clean", 48183 + 48183 + 21020 + 110, 446),
    ("clean-nohash", 41722 + 41723 + 17322 + 56, 408),
])
def test_real_capture_counts(boot, lock_lines, skipped):
    stats = ftrace.ReaderStats()
    events = list(ftrace.parse(capture_lines(boot), boot, stats=stats))
    assert stats.events == lock_lines == len(lock_events(events))
    assert stats.skipped_lines == skipped
    assert stats.slow_lines == 0  # every line of a real capture takes the fast path
    assert stats.hardirq_lines > 10000 and stats.softirq_lines > 5000
    enters = Counter(e.op for e in events)
    assert enters["hardirq-enter"] - enters["hardirq-exit"] in (0, 1, 2)
    if boot == "clean-nohash":
        assert stats.names_resolved > 50000 and stats.names_unresolved < 10
    else:
        assert stats.names_resolved == stats.names_unresolved == 0


def test_names_resolved_by_address_match_the_printed_names():
    """Blank the names of the hashed capture's non-acquire lines; the reader must restore them."""
    lines = capture_lines("clean")
    blanked = []
    for line in lines:
        for event in (": lock_release: ", ": lock_acquired: ", ": lock_contended: "):
            at = line.find(event)
            if at >= 0:
                start = at + len(event)
                line = line[:line.index(" ", start) + 1]
                break
        blanked.append(line)
    original = lock_events(list(ftrace.parse(lines)))
    stats = ftrace.ReaderStats()
    restored = lock_events(list(ftrace.parse(blanked, stats=stats)))
    unknown = [e for e in restored if e.lock == ftrace.UNKNOWN_LOCK]
    assert len(unknown) == stats.names_unresolved < 60  # released before tracing began
    wrong = [(a.line, a.lock, b.lock) for a, b in zip(original, restored) if b.lock not in (a.lock, ftrace.UNKNOWN_LOCK)]
    assert wrong == []


def test_real_capture_lock_lines_never_fall_to_the_grammar():
    """The fast path's speed is the benchmarks' business; what a test can hold is that it is
    taken: every lock event line of a real capture is read by `scan`, not left to the grammar."""
    lines = [line for line in capture_lines("clean")[12:20012] if " lock_" in line]
    assert len(lines) > 10000
    left = [line for line in lines if ftrace.scan(line) is None]
    assert left == []


@pytest.mark.parametrize("limit", [1, 1 << 12])
def test_a_cached_head_names_a_task_as_a_head_read_afresh(limit, monkeypatch):
    """`<...>` takes the last real comm seen for the pid, whether the earlier heads came from the
    (bounded, so sometimes cleared) head cache or were read again."""
    monkeypatch.setattr(ftrace, "_HEAD_CACHE_LIMIT", limit)
    lines = ["  bash-12  [001] ....  1.0: lock_acquire: 00ab foo\n",
             "  sh-12  [001] ....  1.1: lock_release: 00ab foo\n",
             "  bash-12  [001] ....  1.2: lock_acquire: 00ab foo\n",
             "  <...>-12  [001] ....  1.3: lock_release: 00ab foo\n"]
    assert [e.comm for e in read(lines)] == ["bash/12", "sh/12", "bash/12", "bash/12"]


@pytest.mark.parametrize("body", ["lock_acquire: {} &mm->mmap_lock", "lock_acquire: {} try read rcu_read_lock",
                                  "lock_release:  {}  &x->y ", "lock_contended: {} A", "lock_acquire: {} "])
def test_a_known_shape_with_a_new_address_reads_as_in_full(body):
    """A capture touching many lock instances prints a new body on almost every line; once a shape
    (the body but its address) is known, a new line of it is read from that (`ftrace_scan._SHAPES`),
    and must read as the full reading does -- an address that is none included."""
    from lockcheck.readers import ftrace_scan

    head = "            bash-12      [000] ...1.  5.1: "
    addresses = ["ffff888000000001", "0x1f", "zz", "0x", "0xg1", "ABCDEF", "ffff888000000002", "1-2"]
    for _ in range(2):  # (the second time every shape is known)
        for address in addresses:
            line = head + body.format(address)
            assert ftrace_scan.scan_pure(line) == slow_or_error(line) or (
                ftrace_scan.scan_pure(line) is None), line
            fast = ftrace.scan(line)
            if fast is not None:
                assert fast == slow_or_error(line), line
    assert any(key.startswith(body.split(":")[0]) for key in ftrace_scan._SHAPES) or body.endswith("{} ")
