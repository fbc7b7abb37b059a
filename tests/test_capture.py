"""`lockcheck capture`: the printed set-up, and `--run` against a fake tracefs and /proc (`--root`).

We are not on a lockdep kernel, so `--run` is tested under a directory
laid out like one: tracefs files that record what was written to them, and
a workload that plays the kernel by filling the trace buffer.  The boot
directory it collects must then read as a boot.
"""

from __future__ import annotations

import io
import json
import lzma
import platform
import sys
from pathlib import Path

import pytest

from lockcheck.kernel import capture
from lockcheck.commands.cli import main


def run_cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize(("arch", "expected"), [
    ("x86_64", "p:lockcheck/lock_acquire_args lock_acquire map=%di:x64 subclass=%si:u32 trylock=%dx:s32 "
               "read=%cx:s32 check=%r8:s32 nest_lock=%r9:x64 ip=$stack1:symbol name=+0(+24(%di)):string "
               "key=+0(%di):x64 wait_outer=+32(%di):u8 wait_inner=+33(%di):u8 lock_type=+34(%di):u8"),
    ("arm64", "p:lockcheck/lock_acquire_args lock_acquire map=%x0:x64 subclass=%x1:u32 trylock=%x2:s32 "
              "read=%x3:s32 check=%x4:s32 nest_lock=%x5:x64 ip=%x6:symbol name=+0(+24(%x0)):string "
              "key=+0(%x0):x64 wait_outer=+32(%x0):u8 wait_inner=+33(%x0):u8 lock_type=+34(%x0):u8"),
])
def test_the_probe_reads_lock_acquires_seven_arguments(arch, expected):
    assert capture.probe_definition(arch) == expected
    # a kernel before 5.16 has no wait types and lock type after `name`: they are not read
    old = capture.probe_definition(arch, map_fields=False)
    assert old == expected.partition(" wait_outer=")[0]
    if not capture.has_map_fields(platform.release()):
        expected = old
    status, script, _ = run_cli("capture", "--arch", arch, "-o", "boot")
    assert status == 0
    assert f"echo '{expected}' >> $T/kprobe_events" in script
    for needed in ("echo 65536 > $T/buffer_size_kb", "echo 1 > $T/events/lock/enable",
                   "echo 1 > $T/events/lockcheck/lock_acquire_args/enable", "> $T/trace_marker",
                   'cat /proc/lockdep_chains > "$OUT/lockdep_chains.txt"', 'dmesg > "$OUT/dmesg.txt"'):
        assert needed in script, needed
    assert script.index("tracing_on    # start") < script.index("run the workload") < script.index("tracing_on    # stop\n")


def test_options_of_the_printed_set_up():
    status, script, _ = run_cli("capture", "--arch", "aarch64", "--name-offset", "16", "--buffer-kb", "1024")
    assert status == 0 and "name=+0(+16(%x0)):string" in script and "echo 1024 > $T/buffer_size_kb" in script
    status, script, _ = run_cli("capture", "--no-kprobe", "--arch", "riscv64")
    assert status == 0 and ">> $T/kprobe_events" not in script and "lockcheck/lock_acquire_args" not in script
    status, _, err = run_cli("capture", "--arch", "riscv64")
    assert status == 2 and "no argument registers known for riscv64" in err
    status, _, err = run_cli("capture", "--", "true")
    assert status == 2 and "needs --run" in err


HEADER = "# tracer: nop\n#           TASK-PID     CPU#  |||||  TIMESTAMP  FUNCTION\n"
MUTEX, VMA = 0xffffffff82a0c0e0, 0xffff888000b00000


def kernel_trace() -> str:
    """What the kernel would put in the buffer: mm_take_all_locks() with nest_locks, one probe hit missed."""
    rows, ts = [], 5.0

    def line(body):
        nonlocal ts
        ts += 0.000010
        rows.append(f"            init-1       [000] ...1. {ts:12.6f}: {body}")

    def take(name, map_, nest=0, probed=True):
        if probed:
            line(f"lock_acquire_args: (lock_acquire+0x0/0x212) map=0x{map_:x} subclass=0 trylock=0 read=0 "
                 f"check=1 nest_lock=0x{nest:x} ip=mm_take_all_locks+0x4c/0x1f0 name=\"{name}\"")
        line(f"lock_acquire: {map_:016x} {name}")

    line("tracing_mark_write: lockcheck: capture begin")
    take("mm_all_locks_mutex", MUTEX)
    for i in range(4):
        take("&anon_vma->rwsem", VMA + 0x100 * i, nest=MUTEX)
    take("&anon_vma->rwsem", VMA + 0x400, nest=MUTEX, probed=False)  # the missed hit: no arguments
    for i in range(5):
        line(f"lock_release: {VMA + 0x100 * i:016x} &anon_vma->rwsem")
    line(f"lock_release: {MUTEX:016x} mm_all_locks_mutex")
    return HEADER + "\n".join(rows) + "\n"


def fake_kernel(root: Path, *, lock_events: bool = True) -> Path:
    """A tracefs and /proc laid out like a lockdep kernel's, and /dev/kmsg."""
    tracefs = root / "sys" / "kernel" / "tracing"
    for sub in (["events", "lock"] if lock_events else ["events"]), ["events", "lockcheck", "lock_acquire_args"], \
            ["events", "lockcheck", "lock_set_class_args"], \
            ["per_cpu", "cpu0"], ["per_cpu", "cpu1"]:
        (tracefs.joinpath(*sub)).mkdir(parents=True, exist_ok=True)
    for name in ("tracing_on", "trace", "buffer_size_kb", "kprobe_events", "trace_marker",
                 "events/lockcheck/lock_acquire_args/enable", "events/lockcheck/lock_set_class_args/enable"):
        (tracefs / name).write_text("")
    if lock_events:
        (tracefs / "events/lock/enable").write_text("0\n")
    (tracefs / "kprobe_profile").write_text("  lock_acquire_args" + " " * 30 + "5               1\n")
    (tracefs / "trace_options").write_text("print-parent\nhash-ptr\n")
    (tracefs / "trace_clock").write_text("local [global]\n")
    (tracefs / "per_cpu/cpu0/stats").write_text("entries: 14\noverrun: 0\n")
    (tracefs / "per_cpu/cpu1/stats").write_text("entries: 0\noverrun: 3\ndropped events: 0\n")
    proc = root / "proc"
    proc.mkdir()
    (proc / "lockdep").write_text("all lock classes:\n0000000000000001 FD:    2 BD:    1 +.+.: mm_all_locks_mutex\n"
                                  " -> [0000000000000002] &anon_vma->rwsem\n\n"
                                  "0000000000000002 FD:    1 BD:    2 +.+.: &anon_vma->rwsem\n")
    (proc / "lockdep_chains").write_text("all lock chains:\nirq_context: 0\n[0000000000000001] mm_all_locks_mutex\n\n"
                                         "irq_context: 0\n[0000000000000001] mm_all_locks_mutex\n"
                                         "[0000000000000002] &anon_vma->rwsem\n")
    (proc / "lockdep_stats").write_text(" lock-classes:   2 [max: 8192]\n debug_locks:    1\n")
    (proc / "lock_stat").write_text("lock_stat version 0.4\n")
    (proc / "version").write_text("Linux version 6.1.0 (fake)\n")
    (proc / "cmdline").write_text("console=ttyS0\n")
    (root / "dev").mkdir()
    (root / "dev" / "kmsg").write_text("5,0,0,-;Linux version 6.1.0 (fake)\n6,1,4841479,-;Run /init as init process\n"
                                       " SUBSYSTEM=cpu\n")
    return tracefs


def test_run_against_a_fake_kernel_collects_a_boot(tmp_path):
    root = tmp_path / "root"
    tracefs = fake_kernel(root)
    sample = tmp_path / "kernel-trace"
    sample.write_text(kernel_trace())
    out = tmp_path / "boot"
    # the workload plays the kernel: it fills the trace buffer
    play = f"import shutil; shutil.copy({str(sample)!r}, {str(tracefs / 'trace')!r})"
    status, _, err = run_cli("capture", "--run", "--root", str(root), "-o", str(out), "--arch", "x86_64",
                             "--buffer-kb", "4096", "--", sys.executable, "-c", play)
    assert status == 0, err
    # what it wrote into tracefs
    assert (tracefs / "buffer_size_kb").read_text() == "4096\n"
    events = [probe[0] for probe in capture.MAP_PROBES]
    defined = [line for event, definition in zip(events, capture.map_probe_definitions("x86_64"))
               for line in (f"-:lockcheck/{event}", definition)]
    assert (tracefs / "kprobe_events").read_text().splitlines() == [
        "-:lockcheck/lock_acquire_args",
        capture.probe_definition("x86_64", map_fields=capture.has_map_fields(platform.release())),
        *defined, "-:lockcheck/lock_acquire_args", *(f"-:lockcheck/{event}" for event in events)]
    assert capture.map_probe_definitions("x86_64")[2] == (
        "p:lockcheck/lock_sync_args lock_sync map=%di:x64 subclass=%si:u32 read=%dx:s32 check=%cx:s32 "
        "nest_lock=%r8:x64 ip=%r9:symbol name=+0(+24(%di)):string")
    assert capture.map_probe_definitions("x86_64")[3] == (
        "p:lockcheck/lockdep_unregister_key_args lockdep_unregister_key key=%di:x64")
    assert (tracefs / "tracing_on").read_text() == "0\n"  # stopped again
    assert (tracefs / "events/lock/enable").read_text() == "0\n"
    assert (tracefs / "trace_marker").read_text() == "lockcheck: capture end\n"
    # what it collected
    assert sorted(p.name for p in out.iterdir()) == ["dmesg.txt", "lock_stat.txt", "lockdep.txt",
                                                    "lockdep_chains.txt", "lockdep_stats.txt", "meta.txt",
                                                    "trace.ftrace.xz"]
    assert lzma.open(out / "trace.ftrace.xz", "rt").read() == sample.read_text()
    assert (out / "dmesg.txt").read_text() == ("[    0.000000] Linux version 6.1.0 (fake)\n"
                                               "[    4.841479] Run /init as init process\n")
    meta = (out / "meta.txt").read_text()
    assert "--- kprobe_profile\n  lock_acquire_args" in meta and "--- per_cpu/cpu0/stats\nentries: 14" in meta
    # and `lockcheck check DIR` reads it as a boot: the nest_locks come from the capture itself
    status, report, err = run_cli("check", "--format", "json", "--no-progress", "--no-config", str(out))
    assert status == 0, err
    doc = json.loads(report)
    assert doc["findings"] == []
    notes = "\n".join(doc["notes"])
    assert f"{out} is a boot: trace.ftrace.xz checked with its own state" in notes
    assert "the kprobe lock_acquire_args missed 1 of 6 hits" in notes
    assert "5 of 6 acquisitions carried lockdep's own arguments" in notes
    assert "the ring buffer of cpu1 lost events: 3 overwritten" in notes
    assert "lock_stat.txt: not a trace (looks like a /proc/lock_stat dump)" in notes
    assert "lockdep_chains.txt: not a trace (looks like /proc/lockdep_chains, the state of this boot's capture" in notes


def test_run_needs_an_output_and_a_lockdep_kernel(tmp_path):
    root = tmp_path / "root"
    fake_kernel(root, lock_events=False)
    status, _, err = run_cli("capture", "--run", "--root", str(root), "--arch", "x86_64")
    assert status == 2 and "-o DIR" in err
    status, _, err = run_cli("capture", "--run", "--root", str(root), "-o", str(tmp_path / "b"), "--arch", "x86_64",
                             "--duration", "0")
    assert status == 2 and "no lock tracepoints" in err and "CONFIG_LOCKDEP" in err
    status, _, err = run_cli("capture", "--run", "--root", str(tmp_path / "nothing"), "-o", str(tmp_path / "b"),
                             "--duration", "0", "--arch", "x86_64")
    assert status == 2 and "no tracefs" in err


def test_kmsg_records():
    assert capture.kmsg_line("4,7,123456789,c;WARNING: possible recursive locking detected") == \
        "[  123.456789] WARNING: possible recursive locking detected"
    assert capture.kmsg_line("garbage") is None


@pytest.mark.parametrize(("release", "has"), [("6.1.0-13-amd64", True), ("5.16.0", True), ("5.15.0-91-generic", False),
                                              ("4.19.0", False), ("6.12.3+", True), ("unknown", True)])
def test_the_map_fields_are_read_on_kernels_that_have_them(release, has):
    assert capture.has_map_fields(release) is has
