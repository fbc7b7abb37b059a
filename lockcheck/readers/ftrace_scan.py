"""One ftrace line read without the grammar: `scan`, the reader's fast path, compiled where built.

Most lines of a capture are one of a few shapes (`comm-pid [cpu] flags
time: lock_acquire: address name`), and their pieces -- the head, the flags
column, the text after the time -- repeat endlessly: only the time stamp is
new on each line.  `scan_pure` reads a line with `str.find`/`partition` and
three bounded caches, one per piece; whatever it accepts it reads exactly as
the grammar (`ftrace_grammar.scan_slow`) does (tests/test_reader_ftrace.py
proves it on generated lines).  The compiled `scan` (`_ftscan.c`) only
splits a line and looks its pieces up in those same caches: a line whose
pieces are all known is answered there, any other goes to `scan_pure`,
which reads it and fills the caches.  So the compiled scanner has no reading
of its own to drift, and `LOCKCHECK_PURE=1` (or no compiler) leaves
`scan_pure` in its place.
"""

from __future__ import annotations

import importlib
import os
from types import ModuleType
from typing import Optional

from lockcheck.events import ACQUIRE, ACQUIRED, CONTENDED, RELEASE
from lockcheck.readers.ftrace_kprobe import _scan_probe

#: tracepoint name -> op
LOCK_EVENTS = {
    "lock_acquire": ACQUIRE,
    "lock_release": RELEASE,
    "lock_contended": CONTENDED,
    "lock_acquired": ACQUIRED,
}

#
# A scanned event line is the tuple (head, flags, timestamp, body) with
#   head = (comm, pid, cpu)                           e.g. ("init", "1", "000")
#   body = (event, address, trylock, read, name)      e.g. ("lock_acquire", "0000abcd", False, True, "rcu_read_lock")
# strings as printed; flags None when absent; address None, trylock/read False
# and name None for other events; name "" when empty.  Heads and bodies
# repeat a lot, so `scan` caches them (bounded), and so can the reader.

_FLAG_SETS = (frozenset(".dDbX"), frozenset(".NnpLlBb"), frozenset(".ZzHhs"),
              frozenset(".0123456789abcdef"), frozenset(".0123456789abcdef"))
_HEX = frozenset("0123456789abcdefABCDEF")
_CACHE_LIMIT = 1 << 16
#: heads (`comm-pid [cpu]`) cached: far fewer are live at once than bodies, and every new task brings
#: new ones, so a long capture of short-lived tasks would fill a cache the size of the others'
#: (~50 MB) where this many serve every task running at a time (a miss costs one parse of the head)
_HEAD_CACHE_LIMIT = 1 << 12
_HEADS: dict[str, tuple] = {}
_BODIES: dict[str, tuple] = {}
_FLAGS: dict[str, Optional[str]] = {}
#: a lock event's text with its address cut out -> (event, trylock, read, name): a capture touching
#: many lock instances (every inode's, every socket's) prints a new body on almost every line, which
#: then reads as one of the shapes seen before once its address is read apart
_SHAPES: dict[str, tuple] = {}


def _digits(text: str) -> bool:
    return bool(text) and text.isascii() and text.isdigit()


def scan_pure(line: str) -> Optional[tuple]:
    """The fields of a common-shape event line, or None to leave the line to the grammar.

    One function of `str.find`/`partition` and three bounded caches; whatever
    it accepts it reads exactly as `scan_slow` does (tests/test_reader_ftrace.py
    proves it on generated lines).
    """
    end = line.find("] ")
    if end < 0:
        return None
    text = line[:end]
    head = _HEADS.get(text)
    if head is None:  # "<comm>-<pid> [(<tgid>) ][<cpu>"
        start = text.rfind("[")
        if start < 1 or text[start - 1] != " ":
            return None
        cpu = text[start + 1:]
        rest = text[:start].rstrip(" ")
        if rest[-1:] == ")":  # (tgid)
            open_ = rest.rfind("(")
            tgid = rest[open_ + 1:-1].lstrip(" ")
            if open_ < 1 or rest[open_ - 1] != " " or not (_digits(tgid) or (tgid and not tgid.strip("-"))):
                return None
            rest = rest[:open_].rstrip(" ")
        dash = rest.rfind("-")
        pid = rest[dash + 1:]
        comm = rest[:dash].lstrip(" ")
        if not _digits(cpu) or dash < 0 or not _digits(pid) or not comm or comm[0].isspace() or comm[-1].isspace():
            return None
        head = (comm, pid, cpu)
        if len(_HEADS) >= _HEAD_CACHE_LIMIT:
            _HEADS.clear()
        _HEADS[text] = head
    stamp, sep, text = line[end + 2:].partition(": ")
    if not sep:
        return None
    flags, _, timestamp = stamp.lstrip(" ").rpartition(" ")
    if flags:  # "d.h2. " -- validated once per distinct column
        checked = _FLAGS.get(flags, "")
        if checked == "":
            checked = flags.rstrip(" ")
            if not 4 <= len(checked) <= 5 or any(ch not in chars for ch, chars in zip(checked, _FLAG_SETS)):
                checked = None
            if len(_FLAGS) < _CACHE_LIMIT:
                _FLAGS[flags] = checked
        if checked is None:
            return None
        flags = checked
    else:
        flags = None
    if not (timestamp.isascii() and timestamp.replace(".", "", 1).isdigit()) or timestamp[0] == "." or timestamp[-1] == ".":
        return None
    body = _BODIES.get(text)
    if body is None:
        body = _lock_body(text)
    if body is None:  # "<event>: <address> [try ][read ]<name>" or "<event>: <anything>"
        event, sep, payload = text.lstrip(" ").partition(":")
        if not sep or payload[:1] not in ("", " "):
            return None
        op = LOCK_EVENTS.get(event)
        if op is None:
            if not event.isascii() or not event.isidentifier():
                return None
            if payload[1:2] == "(":
                probe = _scan_probe(payload[1:])
                if probe is False:
                    return None
                if probe is not None:  # not cached: a probe's arguments differ from line to line
                    return (head, flags, timestamp, (event, None, False, False, None) + probe)
            body = (event, None, False, False, None)
        else:
            address, _, tail = payload.lstrip(" ").partition(" ")
            bare = address[2:] if address[:2] == "0x" else address
            if not bare or not _HEX.issuperset(bare):
                return None
            tail = tail.lstrip(" ")
            trylock = read = False
            if op is ACQUIRE:
                if tail[:4] == "try ":
                    trylock = True
                    tail = tail[4:]
                if tail[:5] == "read ":
                    read = True
                    tail = tail[5:]
                if tail[:1] == " ":
                    return None
            body = (event, address, trylock, read, tail.rstrip(" "))
            start = text.index(address, len(text) - len(payload))
            if len(_SHAPES) >= _CACHE_LIMIT:
                _SHAPES.clear()
            _SHAPES[text[:start] + "\0" + text[start + len(address):]] = (event, trylock, read, body[4])
        if len(_BODIES) >= _CACHE_LIMIT:
            _BODIES.clear()
        _BODIES[text] = body
    return (head, flags, timestamp, body)


def _lock_body(text: str) -> Optional[tuple]:
    """The body of a lock event whose shape (its text but the address) was read before, with this
    text's address if it is one (as the full reading below checks it); None: read it in full."""
    colon = text.find(": ")
    if colon < 0:
        return None
    start = colon + 2
    while text[start:start + 1] == " ":
        start += 1
    end = text.find(" ", start)
    if end < 0:
        return None
    shape = _SHAPES.get(text[:start] + "\0" + text[end:])
    if shape is None:
        return None
    address = text[start:end]
    bare = address[2:] if address[:2] == "0x" else address
    if not bare or not _HEX.issuperset(bare):
        return None
    event, trylock, read, name = shape
    return (event, address, trylock, read, name)


def _ftscan() -> ModuleType:
    """The compiled half (ImportError: not built).  By name: it imports nothing, and an import
    statement naming a module the import graph cannot see would stand for its package, whose
    `__init__` imports every reader (tests/test_house.py would see a circle that is not there)."""
    return importlib.import_module("lockcheck.readers._ftscan")


def _compiled() -> Optional[object]:
    """The compiled scanner bound to `scan_pure`'s caches, or None (not built, or LOCKCHECK_PURE=1)."""
    if os.environ.get("LOCKCHECK_PURE") == "1":
        return None
    try:
        compiled = _ftscan()
    except ImportError:
        return None
    compiled.setup(_HEADS, _FLAGS, _BODIES, scan_pure)
    return compiled.scan


#: the scanner the reader uses
scan = _compiled() or scan_pure


def compiled_split() -> Optional[object]:
    """`_ftscan.split(line, heads, flags, bodies)` where the compiled scanner is in use, else None: a
    line's head, flags and text looked up in a caller's own caches, and its time stamp, in one call
    (the capture fast path's caches hold what it made of each piece)."""
    if scan is scan_pure:
        return None
    return _ftscan().split
