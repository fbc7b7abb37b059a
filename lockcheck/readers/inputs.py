"""What each input is: a trace, a /proc/lockdep dump, or a file that is no trace.

A command line names files, directories and `-`.  `expand` turns them into
`Input`s, one per file, in order:

- a file or `-` named on the command line is taken as a trace (or, when its
  first line says so, a dump) and read; what does not read is an error;
- a directory is walked (hidden entries left out, sorted), and each file in
  it is looked at on its own: its first lines decide whether it is a trace
  (some registered format claims them), a dump, or neither.  A file that is
  neither is *skipped* with a note saying what it looks like (`not a trace
  (looks like a JSON document)`); a kernel log is an input of its own format
  (`kernel-log`: its lockdep reports are read), so a boot directory with its
  dmesg.txt next to the trace just works; a file that cannot be opened, or a
  folder that cannot be listed, is an error `Input`, reported in its turn
  while the others are still read.  Symbolic links are followed (a link to a
  folder that is already being walked is not walked twice); a named pipe,
  socket or device in a directory is skipped unread, since opening one
  can block forever or consume what another reader expects.

A named path that is not a regular file (a pipe from `<(zcat trace.gz)`,
`/dev/stdin`) is read exactly once, like `-`: it is not looked at first to
see whether it is a dump, since that look would consume what it holds.

A directory hook (`DirectoryHook`, passed to `expand`) is the place to give a whole directory a meaning beyond
its files (a boot: a trace with the /proc/lockdep dumps of the same boot):
each hook gets the directory and its inputs and returns them, changed or not.
"""

from __future__ import annotations

import os
import re
import stat
from dataclasses import dataclass, field
from typing import Callable, Optional, Sequence

from lockcheck.errors import TraceError
from lockcheck.readers import source
from lockcheck.readers.formats import sniff_format
from lockcheck.readers.kernel_log import KERNEL_LOG_WORDS

TRACE = "trace"
DUMP = "dump"
LOCK_STAT = "lock_stat"
SKIP = "skip"
ERROR = "error"

#: how many non-blank lines are looked at (ftrace output opens with ~12 comment lines)
HEAD_LINES = 32
#: how many lines, blank ones included, `head_lines` looks at at most (readers.SNIFF_MAX_LINES)
HEAD_MAX_LINES = 100_000


@dataclass
class Input:
    """One file to read, and what it is.

    `kind` is TRACE, DUMP (/proc/lockdep or /proc/lockdep_chains: `check`
    merges it), LOCK_STAT (a /proc/lock_stat dump: `stat` reads it), SKIP (a
    file of a directory that is no trace) or ERROR (`error` says why it
    cannot be read).  `looks_like` says what a file that is not a trace is.  `directory` is the
    directory named on the command line that it was found in (None for a
    file named itself); `state` lists dumps a directory hook attached to this
    trace (the /proc/lockdep of its boot).
    """

    path: str
    kind: str = TRACE
    directory: Optional[str] = None
    looks_like: str = ""
    error: Optional[TraceError] = None
    state: list[str] = field(default_factory=list)

    def skip_note(self) -> str:
        """The note for a command that leaves this input out."""
        return f"{self.path}: not a trace (looks like {self.looks_like})"


#: `hook(directory, inputs) -> inputs`: what gives a whole directory a meaning beyond its files
#: (`lockcheck.kernel.boot.boot_hook`); the commands pass theirs down, so this wing needs no kernel
DirectoryHook = Callable[[str, list[Input]], list[Input]]

#: suffixes that name a trace: such a file named on the command line is not sniffed for a dump
TRACE_SUFFIXES = (".lt", ".ftrace", ".perf", ".jsonl")


def expand(paths: list[str], hooks: Sequence[DirectoryHook] = ()) -> list[Input]:
    """One `Input` per file: directories walked and each file classified (`hooks` applied to each
    directory, in order), named files kept."""
    inputs: list[Input] = []
    for path in paths:
        if path != source.STDIN and os.path.isdir(path):
            inputs.extend(expand_directory(path, hooks))
        elif path != source.STDIN and not path.endswith(TRACE_SUFFIXES) and os.path.isfile(path) and (
                dump := _named_dump(path)):
            inputs.append(Input(path, DUMP, looks_like=dump))
        else:
            inputs.append(Input(path, TRACE))
    return inputs


def expand_directory(directory: str, hooks: Sequence[DirectoryHook] = ()) -> list[Input]:
    """Every file under `directory`, each classified by its first lines; `hooks` applied."""
    walk_errors: list[Input] = []
    inputs = [classify(path, directory) for path in _files_under(directory, walk_errors)]
    for hook in hooks:
        inputs = hook(directory, inputs)
    inputs.extend(walk_errors)
    if not walk_errors and not any(item.kind in (TRACE, DUMP) for item in inputs):
        # `lockcheck check results/` on the wrong folder must not pass silently
        what = f"none of its {len(inputs)} files is" if len(inputs) != 1 else "its one file is not"
        error = TraceError(directory, None, None, f"no trace in this directory ({what} a trace)"
                           if inputs else "no trace in this directory (it holds no files)")
        inputs.append(Input(directory, ERROR, directory, error=error))
    return inputs


def _files_under(directory: str, errors: list[Input]) -> list[str]:
    """Every file under `directory`, sorted, hidden entries left out; links followed.

    A folder that cannot be listed (no permission) goes to `errors`: skipping
    it silently would let a run that read half the traces report "no
    problems".  A folder reached again through a link (a loop, or two links
    to one place) is walked once.
    """
    found = []
    seen: set[tuple[int, int]] = set()

    def refused(err: OSError) -> None:
        name = err.filename or directory
        errors.append(Input(name, ERROR, directory, error=TraceError(name, None, None, err.strerror or str(err))))

    for root, dirs, files in os.walk(directory, onerror=refused, followlinks=True):
        try:
            info = os.stat(root)
        except OSError:
            dirs[:] = []
            continue
        if (info.st_dev, info.st_ino) in seen:
            dirs[:] = []
            continue
        seen.add((info.st_dev, info.st_ino))
        dirs[:] = [d for d in dirs if not d.startswith(".")]
        found.extend(os.path.join(root, f) for f in files if not f.startswith("."))
    found.sort()
    errors.sort(key=lambda item: item.path)
    return found


#: what a directory entry that is no regular file is, for its skip note
_SPECIAL_FILES = ((stat.S_ISFIFO, "a named pipe"), (stat.S_ISSOCK, "a socket"), (stat.S_ISCHR, "a device"),
                  (stat.S_ISBLK, "a device"))


def classify(path: str, directory: Optional[str] = None) -> Input:
    """What the file at `path` is, from its first non-blank lines (a pipe, socket or device: unread)."""
    try:
        mode = os.stat(path).st_mode
    except OSError:
        mode = 0  # opening it says why it does not read (a dangling link: No such file or directory)
    for is_kind, what in _SPECIAL_FILES:
        if is_kind(mode):
            return Input(path, SKIP, directory, looks_like=f"{what}, not read")
    try:
        head, cut = _head(path, HEAD_LINES)
    except TraceError as err:
        if err.line is None:  # could not even be opened
            return Input(path, ERROR, directory, error=err)
        return Input(path, SKIP, directory, looks_like=_unreadable(err))
    if cut and not head:  # only blank lines as far as looked: read it as a trace would be
        return Input(path, TRACE, directory)
    if _dump_title(head):
        return Input(path, DUMP, directory, looks_like=looks_like(head))
    if head and head[0].startswith(LOCK_STAT_TITLE):
        return Input(path, LOCK_STAT, directory, looks_like=looks_like(head))
    if sniff_format(head) is not None:
        return Input(path, TRACE, directory)
    return Input(path, SKIP, directory, looks_like=looks_like(head))


def head_lines(path: str, count: int = HEAD_LINES) -> list[str]:
    """The first `count` non-blank lines of a file (decompressed); TraceError if it does not read.

    At most HEAD_MAX_LINES lines are looked at: a file that opens with a
    gigabyte of newlines (a few KB as zstd) must not be read whole just to see
    what it is (it was, line by line in Python: 200 MB of newlines, 50 s).
    """
    return _head(path, count)[0]


def _head(path: str, count: int) -> tuple[list[str], bool]:
    """`head_lines`, and whether the look stopped at HEAD_MAX_LINES before finding `count` lines."""
    _, lines = source.open_lines(path)
    head: list[str] = []
    seen = 0
    try:
        for seen, line in enumerate(lines, 1):
            if line.strip():
                head.append(line)
                if len(head) >= count:
                    break
            if seen >= HEAD_MAX_LINES:
                return head, True
    except TraceError:
        if not head:
            raise
        # a bad line after good ones: the file is judged by the lines before it, and reading it
        # reports what they hold and then the bad line's error (the contract)
    finally:
        lines.close()  # type: ignore[attr-defined]
    return head, False


def _unreadable(err: TraceError) -> str:
    """What a file whose first lines do not decode looks like."""
    if "NUL byte" in err.message or "UTF-8" in err.message or "longer than" in err.message:
        return "binary data"
    return f"something unreadable ({err.message})"


def _named_dump(path: str) -> Optional[str]:
    """What a dump named on the command line is (`a /proc/lockdep dump`), or None for any other file."""
    try:
        head = head_lines(path, 1)
    except TraceError:
        return None  # reading it as a trace reports the problem
    return looks_like(head) if _dump_title(head) else None


def _dump_title(head: list[str]) -> bool:
    return bool(head) and head[0].strip() in _DUMP_TITLES


def is_dump_head(head: list[str]) -> bool:
    """Whether these first non-blank lines open a /proc/lockdep or /proc/lockdep_chains dump."""
    return _dump_title(head)


# -- what a file that is no trace looks like -----------------------------------------------
PLAIN_TEXT = "plain text"
#: first lines of the kernel's dumps (kstate.LOCKDEP_TITLE, CHAINS_TITLE; stat.dump.TITLE)
_DUMP_TITLES = {"all lock classes:": "/proc/lockdep", "all lock chains:": "/proc/lockdep_chains"}
LOCK_STAT_TITLE = "lock_stat version"
_DMESG = re.compile(r"^\s*(<\d+>)?\[\s*\d+\.\d+\]")


#: the column headings of `perf lock contention` (`contended  total wait  max wait  avg wait  type  caller`)
#: and `perf lock report` (`Name  acquired  contended  avg wait (ns)  total wait (ns) ...`): summaries
#: of a recording, not its events -- what lockcheck reads is that recording through `perf script`
_PERF_LOCK = re.compile(r"^\s*(?:contended\s+total wait\s+max wait|Name\s+acquired\s+contended)\b")
PERF_LOCK_HINT = ("`perf lock contention` / `perf lock report` output, a summary; lockcheck reads the events: "
                  "`perf record -e 'lock:*' -- CMD`, then give it the output of `perf script`")


def looks_like(head: list[str]) -> str:
    """A few words naming what these first lines are, for `not a trace (looks like ...)`."""
    if not head:
        return "an empty file"
    first = head[0].strip()
    if sum(1 for line in head if _DMESG.match(line)) * 2 > len(head) or any(
            line.startswith(KERNEL_LOG_WORDS) for line in head[:3]):
        return "a kernel log"
    if any(_PERF_LOCK.match(line) for line in head[:5]):
        return PERF_LOCK_HINT
    if first.startswith(("{", "[")):
        return "a JSON document"
    if first.startswith("<?xml") or first.startswith("<graphml"):
        return "an XML document"
    if first.startswith(("digraph", "graph ", "strict digraph")):
        return "a Graphviz graph"
    if first in _DUMP_TITLES:
        return f"a {_DUMP_TITLES[first]} dump"
    if first.startswith(LOCK_STAT_TITLE):
        return "a /proc/lock_stat dump"
    if first.startswith("lock-classes:"):
        return "a /proc/lockdep_stats dump"
    return PLAIN_TEXT
