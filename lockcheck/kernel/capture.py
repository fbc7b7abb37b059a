"""`lockcheck capture`: set up a capture of a lockdep kernel that needs no guessing, and collect the boot.

The lock tracepoints (`events/lock/`) print each `lock_acquire()` without
its subclass, nest_lock, check and read mode; lockdep's own arguments are
only in the registers at the call.  So the capture adds a kprobe on
`lock_acquire` that records them (`lockcheck/lock_acquire_args`), and the
ftrace reader pairs each probe line with the `lock_acquire` line that
follows it on the same CPU (`lockcheck.readers.ftrace`).  Then it collects
what the boot says about itself -- /proc/lockdep, /proc/lockdep_chains,
/proc/lockdep_stats, /proc/lock_stat, the kernel log, and the trace's
metadata -- into one directory that `lockcheck check DIR` reads as a boot
(`lockcheck.kernel.boot`).

Without `--run` the set-up is printed as a shell script to read or run by
hand; with `--run` (as root) it is performed: set up, run the workload
(`-- COMMAND...`, or wait `--duration` seconds), stop, collect, clean up.
`--root DIR` puts every path under DIR (a fake tracefs and /proc, for tests).

The kprobe
----------
`lock_acquire(struct lockdep_map *lock, unsigned int subclass, int trylock,
int read, int check, struct lockdep_map *nest_lock, unsigned long ip)` has
seven arguments.  At the probe (the function's first instruction) they are
in the calling convention's registers:

- x86_64 (System V): `%di %si %dx %cx %r8 %r9`, and the seventh on the
  stack above the return address: `$stack1`;
- arm64 (AAPCS64): `%x0` to `%x6`.

The lock's name is the string `lock->name` points to: `+0(+OFFSET(map))`,
where OFFSET is the offset of `name` in `struct lockdep_map`
(include/linux/lockdep_types.h): after `struct lock_class_key *key` and
`struct lock_class *class_cache[NR_LOCKDEP_CACHING_CLASSES]` with
NR_LOCKDEP_CACHING_CLASSES = 2, so 8 + 2 * 8 = 24 on a 64-bit kernel.
That is the layout of 6.1 (and of every kernel whose lockdep_map begins
with those two members; the fields after `name` -- wait types, lock_type,
lock-stat's cpu and ip -- do not move it).  Those next fields are recorded
too: `u8 wait_type_outer, wait_type_inner, lock_type` right after the
pointer (`wait_outer=+32`, `wait_inner=+33`, `lock_type=+34`), what
`check_wait_context()` compares, so a capture can show an invalid wait
context as the kernel sees it (a kernel before 5.9 has no wait types there:
its inner wait type reads as garbage or 0; 0 is read as "not recorded").
`--name-offset` changes them all for a kernel that differs.  A wrong offset shows at once: the probe's names do
not match the tracepoint's, and the reader pairs nothing.  Types:
`subclass` u32 (`unsigned int`, printed `%u`), `trylock`/`read`/`check` s32
(`int`, `%d`), `map`/`nest_lock` x64 (`0x%Lx`), `ip` symbol (`%pS`:
`dup_mmap+0xf5/0x47b`), `name` string (`"%s"`).

A probe hit is *missed* when it fires while another kprobe handler runs (an
NMI, or a lock taken by the tracing code itself); `kprobe_profile`'s third
column counts those, and meta.txt keeps it: those acquisitions have no
arguments, and only they fall back to inference.
"""

from __future__ import annotations

import itertools
import lzma
import os
import platform
import shlex
import subprocess
import sys
import time
from dataclasses import dataclass, field
from typing import Optional, TextIO

from lockcheck.errors import UsageError

#: the probe's group and event (events/lockcheck/lock_acquire_args/)
PROBE_GROUP, PROBE_EVENT = "lockcheck", "lock_acquire_args"
#: offset of `name` in struct lockdep_map on a 64-bit kernel (see the module docstring)
NAME_OFFSET = 24
#: registers of lock_acquire's seven arguments at its first instruction
ARG_REGISTERS = {
    "x86_64": ("%di", "%si", "%dx", "%cx", "%r8", "%r9", "$stack1"),
    "arm64": ("%x0", "%x1", "%x2", "%x3", "%x4", "%x5", "%x6"),
}
ARCH_ALIASES = {"amd64": "x86_64", "aarch64": "arm64"}
#: (argument, fetch type) of each of lock_acquire's arguments, in order
ARG_TYPES = (("map", "x64"), ("subclass", "u32"), ("trylock", "s32"), ("read", "s32"), ("check", "s32"),
             ("nest_lock", "x64"), ("ip", "symbol"))
#: the u8 fields that follow `name` in struct lockdep_map (5.16+; wait types since 5.9): the
#: class's wait types, which the kernel's check_wait_context() reads, and its LD_LOCK_* type
MAP_CLASS_FIELDS = ("wait_outer", "wait_inner", "lock_type")
#: per-CPU ring buffer, KiB: a few seconds of a busy boot's lock events
DEFAULT_BUFFER_KB = 65536
TRACEFS_DIRS = ("sys/kernel/tracing", "sys/kernel/debug/tracing")
#: what the boot directory gets from /proc
PROC_FILES = (("lockdep", "lockdep.txt"), ("lockdep_chains", "lockdep_chains.txt"),
              ("lockdep_stats", "lockdep_stats.txt"), ("lock_stat", "lock_stat.txt"))


def probe_definition(arch: str, name_offset: int = NAME_OFFSET, map_fields: bool = True) -> str:
    """The kprobe_events line of the lock_acquire probe for ARCH.

    >>> probe_definition("arm64")  # doctest: +NORMALIZE_WHITESPACE
    'p:lockcheck/lock_acquire_args lock_acquire map=%x0:x64 subclass=%x1:u32 trylock=%x2:s32 read=%x3:s32
     check=%x4:s32 nest_lock=%x5:x64 ip=%x6:symbol name=+0(+24(%x0)):string key=+0(%x0):x64
     wait_outer=+32(%x0):u8 wait_inner=+33(%x0):u8 lock_type=+34(%x0):u8'
    """
    registers = ARG_REGISTERS[arch]
    args = [f"{name}={register}:{kind}" for (name, kind), register in zip(ARG_TYPES, registers)]
    args.append(f"name=+0(+{name_offset}({registers[0]})):string")
    args.append(f"key=+0({registers[0]}):x64")  # struct lockdep_map's first member, in every kernel
    if map_fields:
        args.extend(f"{name}=+{name_offset + 8 + at}({registers[0]}):u8" for at, name in enumerate(MAP_CLASS_FIELDS))
    return f"p:{PROBE_GROUP}/{PROBE_EVENT} lock_acquire " + " ".join(args)


def has_map_fields(release: str) -> bool:
    """Whether a kernel of RELEASE (`6.1.0-13-amd64`) has the wait types and lock type after
    `name` in struct lockdep_map (5.16 and later); an unreadable release is taken as recent."""
    parts = release.split(".", 2)
    try:
        major, minor = int(parts[0]), int("".join(itertools.takewhile(str.isdigit, parts[1])) or 0)
    except (ValueError, IndexError):
        return True
    return (major, minor) >= (5, 16)


#: the probes on lockdep's other calls about a lock: (event, function, [(argument, index of the
#: function's argument, fetch type; "name": the name of the map it points to)]); the ftrace
#: reader applies them to the lock (`lockcheck.readers.ftrace_kprobe.MAP_OPS`)
MAP_PROBES = (
    ("lock_set_class_args", "lock_set_class",  # (lock, name, key, subclass, ip); lock_set_subclass calls it
     (("map", 0, "x64"), ("class", 1, "string"), ("subclass", 3, "u32"), ("ip", 4, "symbol"))),
    ("lock_downgrade_args", "lock_downgrade", (("map", 0, "x64"), ("ip", 1, "symbol"))),
    # 6.4+ (synchronize_srcu(), lock_map_sync()): validated as an acquisition, never held
    ("lock_sync_args", "lock_sync", (("map", 0, "x64"), ("subclass", 1, "u32"), ("read", 2, "s32"),
                                     ("check", 3, "s32"), ("nest_lock", 4, "x64"), ("ip", 5, "symbol"),
                                     ("name", 0, "name"))),
    # a module's keys unregistered (zap_class() of every class made with that key)
    ("lockdep_unregister_key_args", "lockdep_unregister_key", (("key", 0, "x64"),)),
)


def map_probe_definitions(arch: str, name_offset: int = NAME_OFFSET) -> list[str]:
    """The kprobe_events lines of the lock_set_class and lock_downgrade probes for ARCH.

    >>> map_probe_definitions("x86_64")[0]
    'p:lockcheck/lock_set_class_args lock_set_class map=%di:x64 class=+0(%si):string subclass=%cx:u32 ip=%r8:symbol'
    """
    registers = ARG_REGISTERS[arch]
    lines = []
    for event, function, args in MAP_PROBES:
        fetched = [f"{name}=+0({registers[at]}):string" if kind == "string"
                   else f"{name}=+0(+{name_offset}({registers[at]})):string" if kind == "name"
                   else f"{name}={registers[at]}:{kind}" for name, at, kind in args]
        lines.append(f"p:{PROBE_GROUP}/{event} {function} " + " ".join(fetched))
    return lines


def machine_arch() -> str:
    machine = platform.machine()
    return ARCH_ALIASES.get(machine, machine)


@dataclass
class CaptureOptions:
    arch: str = field(default_factory=machine_arch)
    buffer_kb: int = DEFAULT_BUFFER_KB
    name_offset: int = NAME_OFFSET
    #: record the map's wait types and lock type (the running kernel's release says whether it has them)
    map_fields: bool = field(default_factory=lambda: has_map_fields(platform.release()))
    kprobe: bool = True
    output: Optional[str] = None
    duration: float = 10.0
    command: list[str] = field(default_factory=list)
    root: str = "/"


@dataclass(frozen=True)
class Step:
    """One write into tracefs: PATH (relative to it) gets VALUE; `append` for kprobe_events."""

    path: str
    value: str
    why: str
    append: bool = False
    may_fail: bool = False


def setup_steps(options: CaptureOptions) -> list[Step]:
    steps = [
        Step("tracing_on", "0", "stop tracing while setting up"),
        Step("trace", "", "empty the ring buffer"),
        Step("buffer_size_kb", str(options.buffer_kb), "per-CPU buffer: events lost to an overrun are lost for good"),
    ]
    if options.kprobe:
        steps += [
            Step("kprobe_events", f"-:{PROBE_GROUP}/{PROBE_EVENT}", "remove a probe left by an earlier capture",
                 append=True, may_fail=True),
            Step("kprobe_events", probe_definition(options.arch, options.name_offset, options.map_fields),
                 f"lockdep's arguments of every lock_acquire() ({options.arch} registers)", append=True),
            Step(f"events/{PROBE_GROUP}/{PROBE_EVENT}/enable", "1", "record the probe"),
        ]
        for (event, function, _), definition in zip(MAP_PROBES, map_probe_definitions(options.arch, options.name_offset)):
            steps += [
                Step("kprobe_events", f"-:{PROBE_GROUP}/{event}", "remove a probe left by an earlier capture",
                     append=True, may_fail=True),
                # optional: a kernel that refuses them still gives every acquisition's arguments
                Step("kprobe_events", definition, f"{function}(): a held lock's new class, or its downgrade",
                     append=True, may_fail=True),
                Step(f"events/{PROBE_GROUP}/{event}/enable", "1", "record the probe", may_fail=True),
            ]
    steps += [
        Step("events/lock/enable", "1", "lock_acquire, lock_release, lock_contended, lock_acquired"),
        Step("trace_marker", "lockcheck: capture begin", "a marker in the trace"),
        Step("tracing_on", "1", "start"),
    ]
    return steps


def stop_steps() -> list[Step]:
    return [Step("trace_marker", "lockcheck: capture end", "a marker in the trace"),
            Step("tracing_on", "0", "stop")]


def cleanup_steps(options: CaptureOptions) -> list[Step]:
    steps = [Step("events/lock/enable", "0", "lock events off")]
    if options.kprobe:
        for event in (PROBE_EVENT, *(probe[0] for probe in MAP_PROBES)):
            optional = event != PROBE_EVENT
            steps += [Step(f"events/{PROBE_GROUP}/{event}/enable", "0", "probe off", may_fail=optional),
                      Step("kprobe_events", f"-:{PROBE_GROUP}/{event}", "remove the probe", append=True,
                           may_fail=optional)]
    return steps


# -- printing the set-up ----------------------------------------------------------------


def print_script(options: CaptureOptions, out: TextIO) -> None:
    """The whole capture as a shell script, to read or to run as root."""
    output = options.output or "lockcheck-boot"
    w = out.write
    w("#!/bin/sh\n# lockcheck capture: lock events of a lockdep kernel with lockdep's own arguments\n")
    w(f"# (lockcheck capture --run does all of this; `lockcheck check {output}` reads the result)\nset -e\n")
    w("T=/sys/kernel/tracing; [ -d $T/events ] || T=/sys/kernel/debug/tracing\n")
    w(f"OUT={shlex.quote(output)}; mkdir -p \"$OUT\"\n\n")
    for step in setup_steps(options):
        _print_step(w, step)
    w("\n# ... run the workload here ...\n\n")
    for step in stop_steps():
        _print_step(w, step)
    w("\n# collect the boot (lockcheck check \"$OUT\" reads it as one)\n")
    w("cat $T/trace | xz > \"$OUT/trace.ftrace.xz\"\n")
    for proc, name in PROC_FILES:
        w(f"cat /proc/{proc} > \"$OUT/{name}\"\n")
    w("dmesg > \"$OUT/dmesg.txt\"\n")
    w("{ uname -a; cat /proc/cmdline; for f in $T/per_cpu/cpu*/stats; do echo \"--- ${f#$T/}\"; cat $f; done\n"
      "  for f in trace_options trace_clock kprobe_events kprobe_profile; do echo \"--- $f\"; cat $T/$f; done\n"
      "} > \"$OUT/meta.txt\"\n\n")
    for step in cleanup_steps(options):
        _print_step(w, step)


def _print_step(w, step: Step) -> None:
    redirect = ">>" if step.append else ">"
    tail = " 2>/dev/null || true" if step.may_fail else ""
    w(f"echo {shlex.quote(step.value)} {redirect} $T/{step.path}{tail}    # {step.why}\n")


# -- performing it ------------------------------------------------------------------------


class Capture:
    """`--run`: perform the steps under `options.root`, run the workload, collect the boot."""

    def __init__(self, options: CaptureOptions, stderr: TextIO = sys.stderr) -> None:
        self.options = options
        self.stderr = stderr
        self.root = options.root
        self.tracefs = self._tracefs()

    def _path(self, *parts: str) -> str:
        return os.path.join(self.root, *parts)

    def _tracefs(self) -> str:
        for candidate in TRACEFS_DIRS:
            path = self._path(candidate)
            if os.path.isdir(os.path.join(path, "events")):
                return path
        raise UsageError(f"lockcheck capture: no tracefs under {self._path('sys/kernel')} "
                         "(mount -t tracefs nodev /sys/kernel/tracing)")

    def check_kernel(self) -> None:
        """What the kernel must have: lock tracepoints (lockdep), kprobe events, /proc/lockdep."""
        if not os.path.isdir(os.path.join(self.tracefs, "events", "lock")):
            raise UsageError("lockcheck capture: this kernel has no lock tracepoints (events/lock): it needs "
                             "CONFIG_LOCKDEP (CONFIG_PROVE_LOCKING or CONFIG_LOCK_STAT)")
        if self.options.kprobe and not os.path.exists(os.path.join(self.tracefs, "kprobe_events")):
            raise UsageError("lockcheck capture: this kernel has no kprobe_events (CONFIG_KPROBE_EVENTS); "
                             "--no-kprobe captures without lockdep's arguments")
        if self.options.kprobe and self.options.arch not in ARG_REGISTERS:
            raise UsageError(f"lockcheck capture: no argument registers known for {self.options.arch} "
                             f"(known: {', '.join(ARG_REGISTERS)}); --no-kprobe captures without them")
        if not os.path.exists(self._path("proc", "lockdep")):
            print("lockcheck capture: no /proc/lockdep (CONFIG_PROVE_LOCKING): the boot will have no state",
                  file=self.stderr)

    def write(self, step: Step) -> None:
        path = os.path.join(self.tracefs, step.path)
        try:
            with open(path, "a" if step.append else "w", encoding="utf-8") as stream:
                stream.write(step.value + "\n" if step.value or step.append else step.value)
        except OSError as err:
            if step.may_fail:
                return
            raise UsageError(f"lockcheck capture: {path}: {err.strerror} ({step.why})") from None

    def run(self) -> str:
        """The whole capture; the boot directory written."""
        options = self.options
        if options.output is None:
            raise UsageError("lockcheck capture --run: give the boot directory to write with -o DIR")
        if options.root == "/" and hasattr(os, "geteuid") and os.geteuid() != 0:
            raise UsageError("lockcheck capture --run: tracefs and /proc/lockdep need root")
        self.check_kernel()
        os.makedirs(options.output, exist_ok=True)
        for step in setup_steps(options):
            self.write(step)
        try:
            self.workload()
        finally:
            for step in stop_steps():
                self.write(step)
        self.collect(options.output)
        for step in cleanup_steps(options):
            self.write(step)
        return options.output

    def workload(self) -> None:
        if self.options.command:
            try:
                subprocess.run(self.options.command, check=False)
            except OSError as err:
                raise UsageError(f"lockcheck capture: {self.options.command[0]}: {err.strerror}") from None
        elif self.options.duration > 0:
            time.sleep(self.options.duration)

    # -- collecting ---------------------------------------------------------------------
    def collect(self, output: str) -> None:
        with open(os.path.join(self.tracefs, "trace"), "rb") as source, \
                lzma.open(os.path.join(output, "trace.ftrace.xz"), "wb", preset=1) as target:
            while True:
                chunk = source.read(1 << 20)
                if not chunk:
                    break
                target.write(chunk)
        for proc, name in PROC_FILES:
            path = self._path("proc", proc)
            if os.path.exists(path):
                with open(path, "rb") as source, open(os.path.join(output, name), "wb") as target:
                    target.write(source.read())
        with open(os.path.join(output, "dmesg.txt"), "w", encoding="utf-8") as target:
            target.writelines(line + "\n" for line in read_kmsg(self._path("dev", "kmsg")))
        with open(os.path.join(output, "meta.txt"), "w", encoding="utf-8") as target:
            target.write(self.meta())

    def meta(self) -> str:
        """What says how the capture was made: kernel, command line, ring-buffer stats, options, probe."""
        parts = [f"lockcheck capture arch={self.options.arch} bufkb={self.options.buffer_kb} "
                 f"kprobe={int(self.options.kprobe)} name_offset={self.options.name_offset}\n"]
        for proc in ("version", "cmdline"):
            parts.append(_read_text(self._path("proc", proc)))
        per_cpu = os.path.join(self.tracefs, "per_cpu")
        if os.path.isdir(per_cpu):
            for cpu in sorted(os.listdir(per_cpu), key=lambda name: (len(name), name)):
                parts.append(f"--- per_cpu/{cpu}/stats\n" + _read_text(os.path.join(per_cpu, cpu, "stats")))
        for name in ("trace_options", "trace_clock", "kprobe_events", "kprobe_profile"):
            parts.append(f"--- {name}\n" + _read_text(os.path.join(self.tracefs, name)))
        return "".join(part if part.endswith("\n") or not part else part + "\n" for part in parts)


def _read_text(path: str) -> str:
    try:
        with open(path, encoding="utf-8", errors="replace") as stream:
            return stream.read()
    except OSError:
        return ""


def kmsg_line(record: str) -> Optional[str]:
    """A /dev/kmsg record (`prio,seq,usec,flags[,...];text`) as dmesg prints it: `[    5.140900] text`.

    >>> kmsg_line("6,339,5140900,-;NET: Registered protocol family 10")
    '[    5.140900] NET: Registered protocol family 10'
    >>> kmsg_line(" SUBSYSTEM=net") is None
    True
    """
    head, sep, text = record.partition(";")
    fields = head.split(",")
    if not sep or len(fields) < 3 or not fields[2].isdigit():
        return None
    usec = int(fields[2])
    return f"[{usec // 1000000:5d}.{usec % 1000000:06d}] {text}"


def read_kmsg(path: str) -> list[str]:
    """The kernel log from /dev/kmsg (each read() returns one record; a regular file works too)."""
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError:
        return []
    data = bytearray()
    try:
        while True:
            try:
                chunk = os.read(fd, 16384)
            except BlockingIOError:
                break
            except BrokenPipeError:  # records overwritten while reading: go on with the next
                continue
            if not chunk:
                break
            data += chunk
            if not chunk.endswith(b"\n"):
                data += b"\n"
    finally:
        os.close(fd)
    lines = (kmsg_line(record) for record in data.decode("utf-8", errors="replace").splitlines())
    return [line for line in lines if line is not None]
