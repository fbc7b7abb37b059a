"""Captures that carry lockdep's own arguments: a kprobe on lock_acquire before each lock_acquire line.

The kprobe line is the kernel's print_kprobe_event() output for the probe
`lockcheck capture` defines; with it a capture needs no state: subclass,
nest_lock, read mode, trylock and check are the kernel's.
"""

from __future__ import annotations

import io
import json

from lockcheck.commands.cli import main
from lockcheck.events import READ, RREAD, WRITE
from lockcheck.readers import ftrace

HEADER = "# tracer: nop\n#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"
_clock = iter(range(1, 1 << 30))


def line(task: str, body: str, cpu: int = 0, flags: str = "...1.") -> str:
    comm, _, pid = task.rpartition("-")
    return f"{comm:>16}-{pid:<7} [{cpu:03d}] {flags} {next(_clock) / 1000:12.6f}: {body}"


def probe(task: str, name: str, map_: int, subclass=0, trylock=0, read=0, check=1, nest=0, ip="f+0x1/0x2",
          cpu: int = 0, event: str = "lock_acquire_args", flags: str = "...1.", order=None, wait=None,
          key=None) -> str:
    """The kprobe line (x86_64 definition of `lockcheck capture`), arguments in ORDER; WAIT:
    (wait_outer, wait_inner, lock_type), the map's u8 fields the capture records on 5.16+."""
    args = {"map": f"0x{map_:x}", "subclass": subclass, "trylock": trylock, "read": read, "check": check,
            "nest_lock": f"0x{nest:x}", "ip": ip, "name": f'"{name}"'}
    if wait is not None:
        args.update(zip(("wait_outer", "wait_inner", "lock_type"), wait))
    if key is not None:
        args["key"] = f"0x{key:x}"
    text = " ".join(f"{key}={args[key]}" for key in (order or args))
    return line(task, f"{event}: (lock_acquire+0x0/0x212) {text}", cpu, flags)


def acquire(task: str, name: str, address: int, cpu: int = 0, flags: str = "...1.", tp: str = "") -> str:
    return line(task, f"lock_acquire: {address:016x} {tp}{name}", cpu, flags)


def release(task: str, name: str, address: int, cpu: int = 0) -> str:
    return line(task, f"lock_release: {address:016x} {name}", cpu)


def take(task: str, name: str, map_: int, **args) -> list[str]:
    """A probe line and its lock_acquire line (real addresses: hash-ptr off)."""
    return [probe(task, name, map_, **args), acquire(task, name, map_)]


def text(*parts) -> str:
    lines = []
    for part in parts:
        lines.extend(part if isinstance(part, list) else [part])
    return HEADER + "\n".join(lines) + "\n"


def check(tmp_path, trace: str, *args: str) -> tuple[int, dict]:
    path = tmp_path / "trace.ftrace"
    path.write_text(trace)
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--format", "json", "--no-progress", "--no-config", str(path), *args],
                  stdout=out, stderr=err)
    assert status != 2, err.getvalue()
    return status, json.loads(out.getvalue())


def events(trace: str, stats=None) -> list:
    return [ev for ev in ftrace.parse(trace.splitlines(), "t.ftrace", stats=stats) if ev.op == "acquire"]


MM, MM2, VMA, ALL = 0xffff888000ac8158, 0xffff888000ac9158, 0xffff888000b00000, 0xffffffff82a0c0e0


def test_the_arguments_become_the_events_annotations():
    trace = text(take("init-1", "&mm->mmap_lock", MM, ip="dup_mmap+0x5a/0x47b"),
                 take("init-1", "&mm->mmap_lock", MM2, subclass=1, ip="dup_mmap+0xf5/0x47b"),
                 take("init-1", "rcu_read_lock", 0xffffffff82000000, read=2, check=0),
                 take("init-1", "&anon_vma->rwsem", VMA, read=1, trylock=1))
    stats = ftrace.ReaderStats()
    evs = events(trace, stats)
    assert [(e.lock, e.subclass, e.mode, e.trylock, e.check, e.at, e.exact) for e in evs] == [
        ("&mm->mmap_lock", 0, WRITE, False, True, "dup_mmap+0x5a/0x47b", True),
        ("&mm->mmap_lock", 1, WRITE, False, True, "dup_mmap+0xf5/0x47b", True),
        ("rcu_read_lock", 0, RREAD, False, False, "f+0x1/0x2", True),
        ("&anon_vma->rwsem", 0, READ, True, True, "f+0x1/0x2", True),
    ]
    assert (stats.probe_lines, stats.args_paired, stats.acquisitions) == (4, 4, 4)
    assert "4 of 4 acquisitions carried lockdep's own arguments" in stats.notes()[0]


def test_any_event_name_and_argument_order():
    order = ["name", "ip", "nest_lock", "check", "read", "trylock", "subclass", "map"]
    trace = text(probe("bash-9", "&x->lock", MM, subclass=2, event="my_probe", order=order),
                 acquire("bash-9", "&x->lock", MM))
    [ev] = events(trace)
    assert (ev.subclass, ev.exact) == (2, True)


def test_a_nest_lock_names_the_held_lock_whose_map_it_is(tmp_path):
    # mm_take_all_locks(): many anon_vma locks under mm_all_locks_mutex, each with nest_lock = that mutex
    trace = text(take("init-1", "mm_all_locks_mutex", ALL),
                 *[take("init-1", "&anon_vma->rwsem", VMA + i * 0x100, nest=ALL) for i in range(3)],
                 *[release("init-1", "&anon_vma->rwsem", VMA + i * 0x100) for i in range(3)],
                 release("init-1", "mm_all_locks_mutex", ALL))
    evs = events(trace)
    assert evs[2].nest == ("mm_all_locks_mutex", f"0x{ALL:016x}")
    status, doc = check(tmp_path, trace)
    assert (status, doc["findings"]) == (0, []), doc["findings"]
    assert any("annotations of 4 captured acquisitions: 4 from the capture" in n for n in doc["notes"])
    assert doc["stats"]["annotations"] == {"acquisitions": 4, "capture": 4, "state": 0, "rule": 0, "none": 0,
                                           "state_changed": 0}


def test_a_repeat_without_nest_lock_is_the_kernels_report_and_certain(tmp_path):
    trace = text(take("demo_ba-72", "&outer->mutex", ALL),
                 *[take("demo_ba-72", "&obj->mutex", VMA + i * 0x100) for i in range(3)])
    status, doc = check(tmp_path, trace)
    [finding] = doc["findings"]
    assert (finding["kind"], finding["lock"], finding["task"]) == ("recursive-locking", "&obj->mutex", "demo_ba/72")
    assert "uncertain" not in finding


def test_the_subclass_of_the_capture_needs_no_state(tmp_path):
    trace = text(take("init-1", "&mm->mmap_lock", MM), take("init-1", "&mm->mmap_lock", MM2, subclass=1),
                 release("init-1", "&mm->mmap_lock", MM2), release("init-1", "&mm->mmap_lock", MM))
    status, doc = check(tmp_path, trace)
    assert (status, doc["findings"]) == (0, [])
    # the same capture without the probe lines: a recursive locking that only an annotation could explain
    bare = "\n".join(row for row in trace.splitlines() if "lock_acquire_args" not in row) + "\n"
    status, doc = check(tmp_path, bare)
    assert status == 1 and doc["findings"][0]["uncertain"]


def test_an_interrupt_between_a_probe_and_its_lock_acquire_line():
    """The irq's probe and lock_acquire lines come between the task's: pairs nest like the calls."""
    trace = text(probe("init-1", "&a->lock", MM, subclass=1),
                 probe("init-1", "&rq->__lock", 0xffff88803ebe85d8, flags="d.h1."),
                 acquire("init-1", "&rq->__lock", 0xffff88803ebe85d8, flags="d.h1."),
                 release("init-1", "&rq->__lock", 0xffff88803ebe85d8),
                 acquire("init-1", "&a->lock", MM))
    evs = events(trace)
    assert [(e.lock, e.subclass, e.exact) for e in evs] == [("&rq->__lock", 0, True), ("&a->lock", 1, True)]


def test_pairs_stay_on_their_cpu_and_hashed_addresses_pair_by_name():
    trace = text(probe("a-1", "&a->lock", MM, subclass=1, cpu=0), probe("b-2", "&b->lock", MM2, subclass=2, cpu=1),
                 line("b-2", "lock_acquire: 000000005b4e2a1c &b->lock", 1),
                 line("a-1", "lock_acquire: 00000000deadbeef &a->lock", 0))
    evs = events(trace)
    assert [(e.lock, e.subclass) for e in evs] == [("&b->lock", 2), ("&a->lock", 1)]


def test_a_missed_probe_hit_is_unknown_not_plain(tmp_path):
    """The probe is installed (its lines are there): an acquisition without one is unknown, lockdep's
    check=0 reading -- held, but no usage bit and no dependency of its own."""
    trace = text(take("demo-7", "&outer->mutex", ALL), take("demo-7", "&obj->mutex", VMA),
                 acquire("demo-7", "&obj->mutex", VMA + 0x100))  # its probe hit was missed
    stats = ftrace.ReaderStats()
    evs = events(trace, stats)
    assert [(e.exact, e.check, bool(e.props and e.props.get("unknown"))) for e in evs] == [
        (True, True, False), (True, True, False), (False, False, True)]
    assert stats.unknown == 1 and "1 did not (missed probe hits" in stats.notes()[0]
    status, doc = check(tmp_path, trace)
    assert (status, doc["findings"]) == (0, [])  # check=0: the kernel's check_deadlock does not run for it
    assert any("2 from the capture (lock_acquire arguments), 1 left as captured" in n for n in doc["notes"])


def test_a_finding_resting_on_an_unknown_acquisition_is_uncertain(tmp_path):
    # the unknown acquisition is held when the same class is taken with its arguments
    trace = text(acquire("demo-7", "&obj->mutex", VMA), take("demo-7", "&obj->mutex", VMA + 0x100))
    status, doc = check(tmp_path, trace)
    [finding] = doc["findings"]
    assert finding["kind"] == "recursive-locking"
    assert "without its kprobe argument line" in finding["uncertain"]


DATA = __import__("pathlib").Path(__file__).parent / "data" / "kprobe" / "missed-hits.ftrace"


def test_missed_hits_lost_events_and_a_restart_give_no_certain_false_finding(tmp_path):
    """tests/data/kprobe/missed-hits.ftrace: the real pattern of a kprobe capture checked without state
    (an irq's missed hit on &pcp->lock made a certain `inconsistent-lock-state`), plus a lost-events
    marker and a restart that cut argument lines from their lock_acquire lines."""
    stats = ftrace.ReaderStats()
    evs = events(DATA.read_text(), stats)
    assert [(e.lock, e.exact, e.check) for e in evs] == [
        ("&pcp->lock", True, True), ("&pcp->lock", False, False), ("&zone->lock", False, False),
        ("&pcp->lock", True, True), ("&zone->lock", False, False)]
    assert (stats.unknown, stats.args_unpaired, stats.lost_markers, stats.restarts) == (3, 2, 1, 1)
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--format", "json", "--no-progress", "--no-config", str(DATA)], stdout=out, stderr=err)
    doc = json.loads(out.getvalue())
    assert (status, doc["findings"]) == (0, []), doc["findings"]


def test_a_cpu_buffer_that_starts_late_loses_its_first_argument_lines():
    # CPU 1's buffer begins after CPU 0's: its first lock_acquire has no argument line
    trace = text(take("a-1", "&a->lock", MM, cpu=0), acquire("b-2", "&b->lock", MM2, cpu=1))
    evs = events(trace)
    assert [(e.lock, e.check) for e in evs] == [("&a->lock", True), ("&b->lock", False)]


def test_a_clock_going_back_on_a_cpu_is_a_restart():
    lines = [probe("a-1", "&a->lock", MM, subclass=1), acquire("a-1", "&a->lock", MM)]
    back = "    a-1       [000] ...1.     0.000001: lock_acquire: {:016x} &b->lock".format(MM2)
    trace = text(lines, probe("a-1", "&b->lock", MM2, subclass=2), back)
    stats = ftrace.ReaderStats()
    evs = events(trace, stats)
    assert stats.restarts == 1 and [(e.lock, e.subclass, e.check) for e in evs] == [
        ("&a->lock", 1, True), ("&b->lock", 0, False)]


def test_without_probe_lines_nothing_is_unknown():
    trace = text(acquire("a-1", "&a->lock", MM))
    [ev] = events(trace)
    assert ev.check and ev.props is None


def test_a_nest_lock_taken_before_the_capture_began(tmp_path):
    trace = text(*[take("init-1", "&anon_vma->rwsem", VMA + i * 0x100, nest=ALL) for i in range(2)])
    evs = events(trace)
    assert evs[1].nest == (ftrace.UNKNOWN_LOCK, f"0x{ALL:x}")
    status, doc = check(tmp_path, trace)
    assert (status, doc["findings"]) == (0, [])
    status, doc = check(tmp_path, trace, "--strict-start")
    assert [f["kind"] for f in doc["findings"]] == ["nest-lock-not-held"]


def test_other_probes_are_skipped_and_counted():
    stats = ftrace.ReaderStats()
    trace = text(line("x-1", "my_open: (do_sys_open+0x0/0x10) dfd=0xffffff9c"), acquire("x-1", "A", MM))
    [ev] = events(trace, stats)
    assert not ev.exact and stats.skipped["my_open"] == 1 and stats.probe_lines == 0


def test_a_subclass_lockdep_has_no_table_for_is_an_error_at_its_column(tmp_path):
    # the kernel says "looking up invalid subclass" for 8 and over; convert once wrote such a
    # subclass into a .lt that check then refused
    trace = text(take("init-1", "&mm->mmap_lock", MM, subclass=9), release("init-1", "&mm->mmap_lock", MM))
    path = tmp_path / "trace.ftrace"
    path.write_text(trace)
    row = trace.splitlines()[2]
    for command in (["check", "--no-progress", "--no-config"], ["convert", "-o", str(tmp_path / "out.lt")]):
        err = io.StringIO()
        status = main([*command, str(path)], stdout=io.StringIO(), stderr=err)
        col = row.index("subclass=9") + len("subclass=") + 1
        assert status == 2 and f"trace.ftrace:3:{col}: subclass must be 0..7" in err.getvalue()
    assert not (tmp_path / "out.lt").exists()


RQ, PCP = 0xffff888000d00000, 0xffff888000d01000


def test_the_maps_wait_types_give_the_kernels_invalid_wait_context(tmp_path):
    # a spinlock_t (wait 3:3, a sleeping lock on PREEMPT_RT) taken under a raw_spinlock_t (2:2):
    # what check_wait_context() reports as "[ BUG: Invalid wait context ]"
    trace = text(take("kworker/0:1-42", "&rq->__lock", RQ, wait=(2, 2, 0)),
                 take("kworker/0:1-42", "&pcp->lock", PCP, wait=(3, 3, 0)),
                 release("kworker/0:1-42", "&pcp->lock", PCP), release("kworker/0:1-42", "&rq->__lock", RQ))
    status, doc = check(tmp_path, trace)
    assert status == 1
    assert [f["kind"] for f in doc["findings"]] == ["invalid-wait-context"]
    # the same order with wait types lockdep allows, and a map that recorded none (inner 0), is clean
    for waits in (((3, 3, 0), (2, 2, 0)), ((2, 2, 0), (0, 0, 0))):
        trace = text(take("kworker/0:1-42", "&rq->__lock", RQ, wait=waits[0]),
                     take("kworker/0:1-42", "&pcp->lock", PCP, wait=waits[1]),
                     release("kworker/0:1-42", "&pcp->lock", PCP), release("kworker/0:1-42", "&rq->__lock", RQ))
        assert check(tmp_path, trace) == (0, check(tmp_path, trace)[1]) and not check(tmp_path, trace)[1]["findings"]


def test_wait_types_survive_convert(tmp_path):
    trace = text(take("init-1", "&rq->__lock", RQ, wait=(2, 2, 0)), take("init-1", "&pcp->lock", PCP, wait=(3, 3, 1)))
    path = tmp_path / "trace.ftrace"
    path.write_text(trace)
    out = io.StringIO()
    assert main(["convert", str(path)], stdout=out, stderr=io.StringIO()) == 0
    lines = [row for row in out.getvalue().splitlines() if " acquire " in row]
    assert "wait=2:2" in lines[0] and "type=" not in lines[0]
    assert "wait=3:3" in lines[1] and "type=percpu" in lines[1]


R1, R2, R3 = 0xffff888000e00000, 0xffff888000e01000, 0xffff888000e02000


def set_class(task: str, map_: int, name: str, subclass: int) -> str:
    return line(task, f'lock_set_class_args: (lock_set_class+0x0/0x1a0) map=0x{map_:x} class="{name}" '
                      f"subclass={subclass} ip=double_unlock_balance+0x5a/0x90")


def _balance(*annotation: str) -> str:
    """The scheduler's double_lock_balance(): this_rq taken again nested under busiest, then
    double_unlock_balance() gives it back its subclass 0 (`lock_set_subclass()`), then a third
    rq lock is taken nested."""
    me = "migration/0-12"
    return text(take(me, "&rq->__lock", R1), release(me, "&rq->__lock", R1),
                take(me, "&rq->__lock", R2), take(me, "&rq->__lock", R1, subclass=1),
                release(me, "&rq->__lock", R2), *annotation,
                take(me, "&rq->__lock", R3, subclass=1), release(me, "&rq->__lock", R3),
                release(me, "&rq->__lock", R1))


def test_lock_set_subclass_from_the_capture_keeps_the_scheduler_quiet(tmp_path):
    status, doc = check(tmp_path, _balance())
    assert status == 1 and [f["kind"] for f in doc["findings"]] == ["recursive-locking"]
    status, doc = check(tmp_path, _balance(set_class("migration/0-12", R1, "&rq->__lock", 0)))
    assert (status, doc["findings"]) == (0, [])
    assert any("1 lock_set_class/lock_downgrade call applied" in note for note in doc["notes"])


def test_a_set_class_of_a_lock_taken_before_the_capture_is_counted_not_guessed(tmp_path):
    status, doc = check(tmp_path, text(take("init-1", "&rq->__lock", R1), set_class("init-1", R2, "x", 0),
                                       release("init-1", "&rq->__lock", R1)))
    assert (status, doc["findings"]) == (0, [])
    assert any("1 more were about a lock not held in the capture" in note for note in doc["notes"])


def test_lock_downgrade_from_the_capture(tmp_path):
    me = "init-1"
    downgrade = line(me, f"lock_downgrade_args: (lock_downgrade+0x0/0x100) map=0x{R1:x} ip=f+0x1/0x2")
    trace = text(take(me, "&mm->mmap_lock", R1), downgrade, release(me, "&mm->mmap_lock", R1))
    assert [ev.op for ev in ftrace.parse(trace.splitlines(), "t.ftrace")] == ["acquire", "downgrade", "release"]



KEY_A, KEY_B = 0xffffffffc0a01000, 0xffffffffc0a02000


def unregister(task: str, key: int) -> str:
    return line(task, f"lockdep_unregister_key_args: (lockdep_unregister_key+0x0/0x200) key=0x{key:x}")


def test_a_module_reloaded_is_new_classes_not_a_cycle(tmp_path):
    # the module's locks A -> B, the module unloaded (its keys unregistered: zap_class()),
    # loaded again and taking B -> A: new classes of the same names, no cycle
    me = "insmod-300"
    first = [take(me, "mod_a", R1, key=KEY_A), take(me, "mod_b", R2, key=KEY_B),
             release(me, "mod_b", R2), release(me, "mod_a", R1)]
    again = [take(me, "mod_b", R2, key=KEY_B), take(me, "mod_a", R1, key=KEY_A),
             release(me, "mod_a", R1), release(me, "mod_b", R2)]
    status, doc = check(tmp_path, text(*first, *again))
    assert status == 1 and [f["kind"] for f in doc["findings"]] == ["circular-dependency"]
    status, doc = check(tmp_path, text(*first, unregister(me, KEY_A), unregister(me, KEY_B), *again))
    assert (status, doc["findings"]) == (0, [])


def test_lock_sync_is_validated_never_held(tmp_path):
    me = "kworker/1:2-90"
    sync = line(me, f"lock_sync_args: (lock_sync+0x0/0x100) map=0x{R3:x} subclass=0 read=0 check=1 "
                    f'nest_lock=0x0 ip=synchronize_srcu+0x2a/0x100 name="&ssp->srcu_gp_mutex"')
    events = [ev.op for ev in ftrace.parse(text(take(me, "&rq->__lock", R1), sync,
                                                release(me, "&rq->__lock", R1)).splitlines(), "t.ftrace")]
    assert events == ["acquire", "sync", "release"]
    # a sync under a lock it depends on the other way round closes a cycle, as an acquisition would
    status, doc = check(tmp_path, text(take(me, "&ssp->srcu_gp_mutex", R3), take(me, "&rq->__lock", R1),
                                       release(me, "&rq->__lock", R1), release(me, "&ssp->srcu_gp_mutex", R3),
                                       take(me, "&rq->__lock", R1), sync, release(me, "&rq->__lock", R1)))
    assert status == 1 and [f["kind"] for f in doc["findings"]] == ["circular-dependency"]
