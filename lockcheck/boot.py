"""A boot directory: what one boot of a lockdep kernel leaves behind, read as one input.

`lockcheck capture` writes such a directory, and the shared kernel captures
have the same layout:

    trace.ftrace.xz        the capture (ftrace text; any trace format will do)
    lockdep.txt            /proc/lockdep          \\
    lockdep_chains.txt     /proc/lockdep_chains    |  the boot's lockdep state
    lockdep_stats.txt      /proc/lockdep_stats     |  (lockcheck.kstate, kboot)
    dmesg.txt              the kernel log         /
    meta.txt               trace options, per-CPU ring-buffer stats, kprobe_events, kprobe_profile
    lock_stat.txt          /proc/lock_stat (for `lockcheck stat`)

A directory is a boot when it holds a /proc/lockdep or /proc/lockdep_chains
dump *and* a trace.  Its traces are checked with its own state (not with
`--lockdep-state`, which serves the other inputs); every other file is
skipped with a note saying what it is.  `kprobe_profile` (its own file, or
the section of meta.txt) gives the missed hits of the lock_acquire probe:
acquisitions whose arguments the capture lacks.

>>> sorted(BOOT_FILE_KINDS)[:3]
['dmesg', 'kprobe_profile', 'lock_stat']
"""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import Optional

from lockcheck.errors import TraceError
from lockcheck.kboot import ProbeProfile, parse_kprobe_profile

#: what the non-trace files of a boot are, for the notes (by how they start or are named)
BOOT_FILE_KINDS = {
    "lockdep": "/proc/lockdep", "chains": "/proc/lockdep_chains", "stats": "/proc/lockdep_stats",
    "log": "the kernel log", "dmesg": "the kernel log", "meta": "capture metadata",
    "kprobe_profile": "kprobe_profile", "lock_stat": "/proc/lock_stat (read by `lockcheck stat`)",
}


@dataclass
class Boot:
    """The files of one boot directory, sorted by what they are."""

    directory: str
    traces: list[str] = field(default_factory=list)
    state_files: list[str] = field(default_factory=list)
    #: (file, what it is) of the files neither traced nor state
    skipped: list[tuple[str, str]] = field(default_factory=list)
    probes: list[ProbeProfile] = field(default_factory=list)
    probe_file: Optional[str] = None

    @property
    def name(self) -> str:
        return self.directory

    def notes(self) -> list[str]:
        """What was done with each file, and what the probe missed."""
        out = [f"{self.directory} is a boot: {', '.join(os.path.basename(t) for t in self.traces)} checked with "
               f"its own state ({', '.join(os.path.basename(f) for f in self.state_files)})"]
        if self.skipped:
            out.append(f"{self.directory}: skipped " + ", ".join(f"{os.path.basename(f)} ({what})"
                                                             for f, what in self.skipped))
        for probe in self.probes:
            if probe.misses:
                out.append(f"{self.probe_file}: the kprobe {probe.event} missed {probe.misses} of "
                           f"{probe.hits + probe.misses} hits: those acquisitions have no arguments and are "
                           "annotated as in a capture without them")
        return out


def _kind(path: str) -> tuple[Optional[str], list[str]]:
    """(what a file is, its first lines): a dump kind, `trace`, `meta`, `kprobe_profile`, `lock_stat`, or None."""
    from lockcheck import kstate
    from lockcheck.readers import formats
    from lockcheck.readers.source import open_lines

    try:
        _, lines = open_lines(path)
    except TraceError:
        return None, []
    try:
        head, _ = kstate._head(lines, 32)
    except (TraceError, UnicodeDecodeError):
        return None, []
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()
    base = os.path.basename(path)
    if base.startswith("kprobe_profile"):
        return "kprobe_profile", head
    if base.startswith("meta"):
        return "meta", head
    if base.startswith("lock_stat") or (head and head[0].startswith("lock_stat version")):
        return "lock_stat", head
    kind = kstate.dump_kind(head)
    if kind is not None:
        return kind, head
    for module in formats().values():
        if module.NAME != "lt" and module.sniff(head):
            return "trace", head
    if head and head[0].startswith("#lockcheck-trace"):
        return "trace", head
    return None, head


def find_boot(directory: str) -> Optional[Boot]:
    """The boot in DIRECTORY (its files only, not subdirectories), or None when it is not one."""
    try:
        names = sorted(name for name in os.listdir(directory) if not name.startswith("."))
    except OSError:
        return None
    boot = Boot(directory)
    for name in names:
        path = os.path.join(directory, name)
        if not os.path.isfile(path):
            continue
        kind, head = _kind(path)
        if kind == "trace":
            boot.traces.append(path)
        elif kind in ("lockdep", "chains", "stats", "log"):
            boot.state_files.append(path)
        elif kind in ("meta", "kprobe_profile"):
            probes = parse_kprobe_profile(_all_lines(path))
            if probes:
                boot.probes, boot.probe_file = probes, path
            boot.skipped.append((path, BOOT_FILE_KINDS[kind]))
        elif kind is not None:
            boot.skipped.append((path, BOOT_FILE_KINDS[kind]))
        else:
            boot.skipped.append((path, "not a trace"))
    has_dump = any(_kind(path)[0] in ("lockdep", "chains") for path in boot.state_files)
    return boot if boot.traces and has_dump else None


def _all_lines(path: str) -> list[str]:
    from lockcheck.readers.source import open_lines

    _, lines = open_lines(path)
    return list(lines)


def split_boots(paths: list[str]) -> tuple[list[Boot], list[str]]:
    """(boots, other inputs): each directory that is a boot, or holds boots below it, gives them;
    the rest of such a directory's traces and every other path stay inputs as they were."""
    from lockcheck.readers.source import STDIN, is_trace_name

    boots: list[Boot] = []
    rest: list[str] = []
    for path in paths:
        if path == STDIN or not os.path.isdir(path):
            rest.append(path)
            continue
        found: list[Boot] = []
        loose: list[str] = []
        for root, dirs, files in os.walk(path):
            dirs[:] = sorted(d for d in dirs if not d.startswith("."))
            boot = find_boot(root)
            if boot is not None:
                found.append(boot)
            else:
                loose.extend(os.path.join(root, f) for f in sorted(files) if is_trace_name(f))
        if not found:
            rest.append(path)  # a plain directory of traces, expanded as before
            continue
        boots.extend(found)
        rest.extend(loose)
    return boots, rest


def annotators_for(paths: list[str], options) -> tuple["Annotators", list[str], list[str]]:
    """The annotators of a run: one per boot among PATHS (with the boot's own state), one
    (`options`: `AnnotationOptions`) for everything else; and (the boots' traces, the other inputs).
    """
    from lockcheck import kstate
    from lockcheck.annotations import Annotators

    boots, rest = split_boots(paths)
    annotators = Annotators(options.annotator())
    traces: list[str] = []
    for boot in boots:
        annotators.add(boot, options.annotator(kstate.load(*boot.state_files)))
        traces.extend(boot.traces)
    return annotators, traces, rest
