"""A boot directory: what one boot of a lockdep kernel leaves behind, read as one input.

`lockcheck capture` writes such a directory, and the shared kernel captures
have the same layout:

    trace.ftrace.xz        the capture (ftrace text; any trace format will do)
    lockdep.txt            /proc/lockdep          \\
    lockdep_chains.txt     /proc/lockdep_chains    |  the boot's lockdep state
    lockdep_stats.txt      /proc/lockdep_stats     |  (lockcheck.kernel.state, kboot)
    dmesg.txt              the kernel log         /
    meta.txt               trace options, per-CPU ring-buffer stats, kprobe_events, kprobe_profile
    lock_stat.txt          /proc/lock_stat (for `lockcheck stat`)

A folder of a directory input is a boot when it holds a /proc/lockdep or
/proc/lockdep_chains dump *and* a trace (`boot_hook`, one of the directory
hooks of `lockcheck.readers.inputs`).  Its traces are checked with its own
state (not with `--lockdep-state`, which serves the other inputs), and the
state files are skipped with a note saying so, as is every other file that
is no trace.  `kprobe_profile` (its own file, or the section of meta.txt)
gives the missed hits of the lock_acquire probe: acquisitions whose
arguments the capture lacks.
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from lockcheck.errors import TraceError
from lockcheck.util import numbers
from lockcheck.kernel.bootfiles import ProbeProfile, parse_kprobe_profile


@dataclass
class Boot:
    """The files of one boot directory: its traces, its state, and the kprobe's profile."""

    directory: str
    traces: list[str] = field(default_factory=list)
    state_files: list[str] = field(default_factory=list)
    probes: list[ProbeProfile] = field(default_factory=list)
    probe_file: Optional[str] = None
    #: per-CPU ring-buffer losses meta.txt shows: (cpu, overrun, dropped)
    losses: list[tuple[str, int, int]] = field(default_factory=list)

    @property
    def name(self) -> str:
        return self.directory

    @classmethod
    def of(cls, traces: list[str], state: list[str]) -> "Boot":
        """The boot of TRACES whose state files (as the directory hook listed them) are STATE."""
        boot = cls(os.path.dirname(traces[0]) or ".", list(traces))
        for path in state:
            if os.path.basename(path).startswith(PROFILE_FILES):
                lines = _all_lines(path)
                probes = parse_kprobe_profile(lines, path)
                if probes:
                    boot.probes, boot.probe_file = probes, path
                boot.losses = ring_buffer_losses(lines, path)
            else:
                boot.state_files.append(path)
        return boot

    def notes(self) -> list[str]:
        """What was done with the boot, and what the probe missed."""
        out = [f"{self.directory} is a boot: {', '.join(os.path.basename(t) for t in self.traces)} checked with "
               f"its own state ({', '.join(os.path.basename(f) for f in self.state_files)})"]
        for cpu, overrun, dropped in self.losses:
            lost = [f"{overrun} overwritten (the capture starts later there)" if overrun else "",
                    f"{dropped} dropped" if dropped else ""]
            out.append(f"{self.directory}: the ring buffer of {cpu} lost events: "
                       f"{', '.join(part for part in lost if part)} (meta.txt)")
        for probe in self.probes:
            if probe.misses:
                out.append(f"{self.probe_file}: the kprobe {probe.event} missed {probe.misses} of "
                           f"{probe.hits + probe.misses} hits: those acquisitions have no arguments and are "
                           "annotated as in a capture without them")
        return out


def ring_buffer_losses(lines: list[str], file: str = "<meta.txt>") -> list[tuple[str, int, int]]:
    """(cpu, overrun, dropped events) of each `--- per_cpu/cpuN/stats` section of a meta.txt that lost any.

    >>> ring_buffer_losses(["--- per_cpu/cpu1/stats", "entries: 5", "overrun: 7", "dropped events: 0"])
    [('cpu1', 7, 0)]
    """
    found: dict[str, list[int]] = {}
    cpu = None
    for lineno, line in enumerate(lines, 1):
        if line.startswith("--- "):
            parts = line[4:].split("/")
            cpu = parts[1] if len(parts) == 3 and parts[0] == "per_cpu" and parts[2] == "stats" else None
        elif cpu is not None:
            name, _, value = line.partition(":")
            value = value.strip()
            if name.strip() in ("overrun", "dropped events") and numbers.looks_numeric(value):
                count = numbers.count(value, file, lineno, numbers.column_of(line, value, len(name) + 1), name.strip())
                found.setdefault(cpu, [0, 0])[name.strip() == "dropped events"] = count
    return [(cpu, overrun, dropped) for cpu, (overrun, dropped) in found.items() if overrun or dropped]


#: files whose kprobe_profile says what the lock_acquire probe missed
PROFILE_FILES = ("meta", "kprobe_profile")
#: what a boot's state file is, by how it starts (lockcheck.kernel.state.dump_kind)
_STATE_KINDS = {"lockdep": "/proc/lockdep", "chains": "/proc/lockdep_chains", "stats": "/proc/lockdep_stats",
                "log": "the kernel log"}


def _all_lines(path: str) -> list[str]:
    from lockcheck.readers.source import open_lines

    _, lines = open_lines(path)
    return list(lines)


def boot_hook(directory: str, inputs: list) -> list:
    """The `lockcheck.readers.inputs` directory hook: each folder holding a trace and a
    /proc/lockdep or /proc/lockdep_chains dump is a boot.

    A folder is a boot when it holds a capture (ftrace, perf) and a dump.
    Its captures get the folder's state files (`Input.state`: the dumps,
    /proc/lockdep_stats, the kernel log, and meta.txt or kprobe_profile for
    the probe's misses); those files are then skipped, with a note saying
    they are the boot's state, instead of being merged as dumps -- except
    the kernel log, which is also read as an input of its own (its lockdep
    reports are findings).
    """
    from lockcheck.kernel import state as kstate
    from lockcheck.readers import inputs as kinds

    folders: dict[str, list] = {}
    for item in inputs:
        folders.setdefault(os.path.dirname(item.path), []).append(item)
    for folder_items in folders.values():
        captures = [item for item in folder_items if item.kind == kinds.TRACE and _is_capture(item.path)]
        if not captures or not any(item.kind == kinds.DUMP for item in folder_items):
            continue
        state = []
        for item in folder_items:
            name = os.path.basename(item.path)
            try:
                kind = kstate.dump_kind(kinds.head_lines(item.path, 8))
            except TraceError:
                kind = None
            if item.kind == kinds.TRACE:
                if kind == "log":  # the kernel log: read as an input of its own, and the state's report
                    state.append(item.path)
                continue
            if item.kind in (kinds.DUMP, kinds.SKIP) and kind in _STATE_KINDS:
                what = _STATE_KINDS[kind]
            elif name.startswith(PROFILE_FILES) and item.kind == kinds.SKIP:
                what = "capture metadata" if name.startswith("meta") else "kprobe_profile"
            else:
                continue
            state.append(item.path)
            item.kind = kinds.SKIP
            item.looks_like = f"{what}, the state of this boot's capture"
        for capture in captures:
            capture.state = list(state)
    return inputs


def _is_capture(path: str) -> bool:
    """Whether a trace is a capture (ftrace, perf): a kernel log or a `.lt` trace is no boot's capture."""
    from lockcheck.readers import inputs, sniff_format

    try:
        module = sniff_format(inputs.head_lines(path))
    except TraceError:
        return False
    return bool(getattr(module, "CAPTURE", False))


def boots_of(traces: list) -> list[Boot]:
    """The boots among expanded inputs: traces sharing a state list are one boot."""
    groups: dict[tuple, list[str]] = {}
    for item in traces:
        if getattr(item, "state", None):
            groups.setdefault(tuple(item.state), []).append(item.path)
    return [Boot.of(paths, list(state)) for state, paths in groups.items()]


#: the directory hooks a command passes to `lockcheck.readers.inputs.expand`: a boot is a folder
DIRECTORY_HOOKS = (boot_hook,)
