"""ftrace text output of the lock tracepoints: `trace`, `trace_pipe`, `trace-cmd report`.

The line format is defined by `grammars/ftrace.lark`; `scan()` is the
hand-written fast path for the common line shape (a property test holds it
to the grammar) and `scan_slow()` the grammar itself, which also produces the
`FILE:LINE:COL: message` errors.

What a line becomes
-------------------
- `lock_acquire`, `lock_release`, `lock_contended`, `lock_acquired` -> one
  `Event` each.  The instance is the `%p` address, written `0x` + the hex
  digits as printed (hashed `0x000000005b4e2a1c` or real
  `0xffff88803ebe85d8`); the class is the lock name.  `try ` sets
  `trylock`, `read ` sets the mode by `read_mode()` (below).
- A release/contended/acquired line with an EMPTY name (6.1 with hash-ptr
  off) is resolved to the name acquired at that address: by the same task
  first, else by any task holding it (`AddressNames`, bounded by the locks
  currently held).  If nobody holds it (acquired before the capture began)
  the event is still yielded, with the class `UNKNOWN_LOCK`, so the checker
  counts it among the releases of locks never seen acquired.
- A kprobe line with lockdep's `lock_acquire` arguments (`lockcheck
  capture` sets one up): any event name and argument order, recognised by
  its `subclass=`, `trylock=`, `read=` and `check=` arguments (`map=`,
  `nest_lock=`, `ip=`, `name=` are used when present; see `LockArgs`).  It
  is held per CPU until the `lock_acquire` line that follows it on that
  CPU, which then carries those arguments exactly (`Event.exact`): the
  subclass, read mode (read=2 a recursive reader), trylock, check and
  nest_lock (named after the held lock whose `map` it is) replace what the
  tracepoint line shows.  Probe lines nest like the acquisitions (an
  interrupt's pair comes between a task's probe and its tracepoint line), so
  a `lock_acquire` line takes the latest pending probe of its CPU with the
  same lock name (or, without names, the same address when the tracepoint
  prints real addresses).  A `lock_acquire` with no probe line (a missed
  probe hit) is read as usual.
- `contention_begin`/`contention_end` (lockdep-independent, 5.19+) and every
  other event: skipped and counted in `ReaderStats` -- except that with
  `contention=True` (`lockcheck stat`) the contention tracepoints become
  `CONTENTION_BEGIN`/`CONTENTION_END` events (address, flags, task, time).
- `CPU:N [LOST EVENTS]`: an `Event` with op `LOST_EVENTS`, task `""` and
  `cpu=N`: the checker forgets what tasks last seen on CPU N hold.
- `#` header lines, blank lines and the `trace-cmd report` preamble: nothing.

Tasks
-----
Held-lock stacks are keyed by the pid (`Event.task` is the pid as a string);
`Event.comm` is the task as lockdep's reports print it, `comm/pid` (`"%s/%d"`
of `print_deadlock_bug()` and friends; the last real comm seen for the pid when
ftrace prints `<...>`).  Pid 0 is the idle task of *each* CPU (ftrace prints
`<idle>-0` for swapper/0, swapper/1...), which run concurrently: their task
key is `0/CPU` and their display `swapper/CPU/0`.

Irq context
-----------
An interrupt runs on top of whatever task the CPU was running and ftrace
prints that task's comm-pid, so context comes from the flags column only.
Per line: hardirq = `h`/`H` (and NMI `z`/`Z`, which lockdep does not
distinguish from hardirq here); softirq = `s` or `H`; irqs off = `d`/`D` (or
hardirq); BH off = `b`/`D` (or softirq).  When a task's state differs from
the previous line of that task, `.lt` context events are yielded before the
lock event, with the same file/line: leaving hardirq `hardirq-exit`, leaving
softirq `softirq-exit`, entering softirq `softirqs-off` + `softirq-enter`,
entering hardirq `irqs-off` + `hardirq-enter`, then `irqs-on`/`irqs-off` and
`softirqs-on`/`softirqs-off` for what remains (see `context_transition`).
A task starts in process context with everything enabled, so a capture that
begins inside a handler simply enters it on its first line.

`s` on the old 4-character layout (before ~5.14) also marked merely
BH-disabled sections (`preempt_count() & SOFTIRQ_MASK`).  There, `s` is taken
as softirq *context* only when the task's previous line was already in hardirq
or softirq context (a softirq run from `irq_exit()`) or the comm is
`ksoftirqd/N`; otherwise as BH-disabled in process context.  A wrongly
assumed softirq context would mark locks taken under `spin_lock_bh()` as
softirq-used and produce false irq-inversion reports; the choice made instead
can only miss some softirq usage.  On the 5-character layout `s` means
"serving a softirq" and is trusted.  Lines without a flags column
(`irq-info` off, default `trace-cmd report`) carry no context.

Read mode policy
----------------
The tracepoint prints `read ` for both lockdep read modes, so `read_mode(name,
in_irq)` decides (`in_irq` is the kernel's `in_interrupt()`: hardirq,
softirq or BH disabled):

- recursive readers (`RREAD`): the RCU maps (`rcu_read_lock`,
  `rcu_read_lock_bh`, `rcu_read_lock_sched`, `rcu_callback`), SRCU maps
  (names ending in `srcu`), seqcount readers (names ending in `seqcount`,
  e.g. `tk_core.seq.seqcount`, `&____s->seqcount`), lockdep maps taken with
  `lock_map_acquire_read()` (names starting with `(`, e.g.
  `(wq_completion)events`), and every `read` in interrupt context: a queued
  rwlock_t reader (`tasklist_lock`...) is recursive there
  (`read_lock_is_recursive()`), and sleeping rwsems cannot be taken there;
- everything else is a plain reader (`READ`): rwsems (`&mm->mmap_lock`),
  percpu rwsems (`sb_writers`, `cpu_hotplug_lock`) and rwlock_t readers in
  process context (`binfmt_lock`, `tasklist_lock` in a syscall).

`RECURSIVE_READ_NAMES` lists the fixed names; pass another function with the
same signature as `read_policy` to `FtraceReader`/`parse` to override.
"""

from __future__ import annotations

import functools
from collections import Counter
from dataclasses import dataclass, field
from typing import Callable, Iterable, Iterator, Optional

from lockcheck.errors import TraceError
from lockcheck.events import (
    ACQUIRE, ACQUIRED, CONTENDED, CONTENTION_BEGIN, CONTENTION_END, HARDIRQ_ENTER, HARDIRQ_EXIT, IRQS_OFF, IRQS_ON, READ, RELEASE, RREAD,
    SOFTIRQ_ENTER, SOFTIRQ_EXIT, SOFTIRQS_OFF, SOFTIRQS_ON, WRITE, Event,
)
from lockcheck.events import LOST_EVENTS as E_LOST_EVENTS
from lockcheck.util.grammar import grammar_text
from lockcheck.util.wording import count

NAME = "ftrace"
#: captures start mid-flight; parse() takes stats= (see lockcheck.readers)
CAPTURE = True
TAKES_STATS = True

#: op of the marker yielded for `CPU:N [LOST EVENTS]`: `Event(task="", op=LOST_EVENTS, cpu=N)`
LOST_EVENTS = E_LOST_EVENTS

#: class given to a nameless release/contended/acquired whose address no task holds
UNKNOWN_LOCK = "<unknown>"

#: tracepoint name -> op
LOCK_EVENTS = {
    "lock_acquire": ACQUIRE,
    "lock_release": RELEASE,
    "lock_contended": CONTENDED,
    "lock_acquired": ACQUIRED,
}
#: lockdep-independent contention tracepoints (5.19+): skipped, counted apart (or yielded, see parse)
CONTENTION_EVENTS = frozenset({"contention_begin", "contention_end"})
_CONTENTION_OPS = {"contention_begin": CONTENTION_BEGIN, "contention_end": CONTENTION_END}
#: parse() takes contention= (lockcheck stat asks for the contention tracepoints)
TAKES_CONTENTION = True


# -- statistics -------------------------------------------------------------------


@dataclass
class ReaderStats:
    """What a reader saw besides the events it yielded (for the CLI's closing note).

    One object per input; `merge()` adds another (a directory of traces).
    """

    lines: int = 0  #: lines read, headers and blanks included
    events: int = 0  #: lock events yielded (context and lost markers excluded)
    context_events: int = 0  #: synthetic irq-context events yielded
    skipped: Counter = field(default_factory=Counter)  #: other event name -> lines
    contention: int = 0  #: contention_begin/contention_end lines (also skipped)
    hardirq_lines: int = 0  #: lock events that ran in hardirq context
    softirq_lines: int = 0  #: lock events that ran in softirq context (not hardirq)
    names_resolved: int = 0  #: nameless lines resolved by address
    names_unresolved: int = 0  #: nameless lines no held lock explained (UNKNOWN_LOCK)
    lost_markers: int = 0  #: `CPU:N [LOST EVENTS]` lines
    slow_lines: int = 0  #: lines the fast scanner left to the grammar
    acquisitions: int = 0  #: lock_acquire lines
    probe_lines: int = 0  #: kprobe lines with lockdep's lock_acquire arguments
    args_paired: int = 0  #: acquisitions that got their arguments from such a line
    args_unpaired: int = 0  #: argument lines no lock_acquire line followed
    nest_unknown: int = 0  #: nest_locks not held in the capture (taken before it began)

    @property
    def skipped_lines(self) -> int:
        return sum(self.skipped.values())

    def merge(self, other: "ReaderStats") -> None:
        for name in ("lines", "events", "context_events", "contention", "hardirq_lines", "softirq_lines",
                     "names_resolved", "names_unresolved", "lost_markers", "slow_lines", "acquisitions",
                     "probe_lines", "args_paired", "args_unpaired", "nest_unknown"):
            setattr(self, name, getattr(self, name) + getattr(other, name))
        self.skipped.update(other.skipped)

    def notes(self) -> list[str]:
        """Sentences for the closing note, e.g. `skipped 444 lines of other events (...)`."""
        out = []
        if self.skipped:
            kinds = ", ".join(f"{name}: {n}" for name, n in self.skipped.most_common())
            out.append(f"skipped {count(self.skipped_lines, 'line')} of other events ({kinds})")
        if self.names_resolved or self.names_unresolved:
            out.append(f"resolved {count(self.names_resolved, 'nameless lock line')} by address"
                       + (f", {self.names_unresolved} unresolved" if self.names_unresolved else ""))
        if self.probe_lines:
            missing = self.acquisitions - self.args_paired
            text = (f"{self.args_paired} of {self.acquisitions} acquisitions carried lockdep's own arguments "
                    "(a kprobe on lock_acquire)")
            if missing:
                text += (f"; {missing} did not (missed probe hits): their annotations are inferred as in a "
                         "capture without arguments")
            if self.args_unpaired:
                text += f"; {self.args_unpaired} argument lines had no lock_acquire line after them"
            out.append(text)
        if self.lost_markers:
            out.append(f"{count(self.lost_markers, 'lost-events marker')}: the stacks of those CPUs were reset")
        return out


# -- lockdep's arguments from a kprobe on lock_acquire ------------------------------

#: arguments that make a probe line a record of lock_acquire(lock, subclass, trylock, read, check, nest_lock, ip)
LOCK_ARGS_REQUIRED = frozenset({"subclass", "trylock", "read", "check"})


@dataclass(frozen=True)
class LockArgs:
    """lockdep's arguments of one lock_acquire() call, as a kprobe line printed them."""

    map: Optional[int]  #: the lockdep_map's address (`map=` or `lock=`)
    subclass: int
    trylock: int
    read: int  #: 0 exclusive, 1 reader, 2 recursive reader
    check: int
    nest_lock: Optional[int]  #: the nest_lock's map address; None or 0: none
    ip: Optional[str]  #: the caller (`dup_mmap+0xf5/0x47b`, or hex)
    name: Optional[str]  #: the map's name (None when absent or `(fault)`)


def _number(text: str) -> Optional[int]:
    """A probe argument's integer: `%u`, `%d` or `0x%x` (None when it is not one)."""
    try:
        return int(text, 16) if text[:2] in ("0x", "0X") else int(text)
    except ValueError:
        return None


def lock_args(args: tuple) -> Optional[LockArgs]:
    """The LockArgs of a probe line's (name, value) pairs, or None when it is another probe.

    >>> lock_args((("map", "0xff"), ("subclass", "1"), ("trylock", "0"), ("read", "2"), ("check", "1"),
    ...            ("nest_lock", "0x0"), ("ip", "f+0x1/0x2"), ("name", '"&x->lock"')))
    LockArgs(map=255, subclass=1, trylock=0, read=2, check=1, nest_lock=None, ip='f+0x1/0x2', name='&x->lock')
    """
    values = dict(args)
    if not LOCK_ARGS_REQUIRED.issubset(values):
        return None
    numbers = {key: _number(values[key]) for key in LOCK_ARGS_REQUIRED}
    if None in numbers.values():
        return None
    name = values.get("name")
    if name is not None:
        name = name[1:-1] if len(name) >= 2 and name[0] == name[-1] == '"' else None
    lock = values.get("map", values.get("lock"))
    nest = values.get("nest_lock", values.get("nest"))
    return LockArgs(_number(lock) if lock is not None else None, numbers["subclass"], numbers["trylock"],  # type: ignore[arg-type]
                    numbers["read"], numbers["check"], (_number(nest) or None) if nest is not None else None,  # type: ignore[arg-type]
                    values.get("ip"), name)


#: pending probe lines kept per CPU (more means lock_acquire lines are not being traced)
_PENDING_LIMIT = 64


# -- read mode policy -------------------------------------------------------------

#: read-acquired lockdep maps that are always recursive readers (read=2)
RECURSIVE_READ_NAMES = frozenset({
    "rcu_read_lock", "rcu_read_lock_bh", "rcu_read_lock_sched", "rcu_callback",
    "rcu_read_lock_trace", "rcu_tasks_trace",
})


@functools.lru_cache(maxsize=4096)
def read_mode(name: str, in_irq: bool) -> int:
    """The lockdep read mode of a `read ` acquisition of NAME (see the module docstring).

    >>> read_mode("rcu_read_lock", False) == RREAD
    True
    >>> read_mode("&mm->mmap_lock", False) == READ
    True
    >>> read_mode("tasklist_lock", True) == RREAD
    True
    """
    if in_irq or name in RECURSIVE_READ_NAMES:
        return RREAD
    if name.endswith(("seqcount", "srcu")) or name.startswith("("):
        return RREAD
    return READ


ReadPolicy = Callable[[str, bool], int]


# -- irq context ------------------------------------------------------------------

#: context state bits, as told to the checker
HARDIRQ, SOFTIRQ, IRQS_DISABLED, BH_DISABLED = 1, 2, 4, 8


@functools.lru_cache(maxsize=None)
def context_transition(old: int, new: int) -> tuple[str, ...]:
    """The `.lt` context ops that take a task from state OLD to state NEW.

    >>> context_transition(0, HARDIRQ | IRQS_DISABLED)
    ('irqs-off', 'hardirq-enter')
    >>> context_transition(HARDIRQ | IRQS_DISABLED, 0)
    ('hardirq-exit', 'irqs-on')
    """
    ops: list[str] = []
    cur = old
    if cur & HARDIRQ and not new & HARDIRQ:
        ops.append(HARDIRQ_EXIT)
        cur &= ~HARDIRQ
    if cur & SOFTIRQ and not new & SOFTIRQ:
        ops.append(SOFTIRQ_EXIT)
        cur &= ~SOFTIRQ
    if new & SOFTIRQ and not cur & SOFTIRQ:
        if not cur & BH_DISABLED:
            ops.append(SOFTIRQS_OFF)
        ops.append(SOFTIRQ_ENTER)  # __do_softirq: BH off, hardirqs as they are
        cur |= SOFTIRQ | BH_DISABLED
    if new & HARDIRQ and not cur & HARDIRQ:
        if not cur & IRQS_DISABLED:
            ops.append(IRQS_OFF)
        ops.append(HARDIRQ_ENTER)
        cur |= HARDIRQ | IRQS_DISABLED
    if (cur ^ new) & IRQS_DISABLED:
        ops.append(IRQS_OFF if new & IRQS_DISABLED else IRQS_ON)
    if (cur ^ new) & BH_DISABLED:
        ops.append(SOFTIRQS_OFF if new & BH_DISABLED else SOFTIRQS_ON)
    return tuple(ops)


_IRQOFF_CHARS = {"d": IRQS_DISABLED, "D": IRQS_DISABLED | BH_DISABLED, "b": BH_DISABLED}
_HARDSOFT_CHARS = {
    "h": HARDIRQ | IRQS_DISABLED, "z": HARDIRQ | IRQS_DISABLED, "Z": HARDIRQ | IRQS_DISABLED,
    "H": HARDIRQ | IRQS_DISABLED | SOFTIRQ | BH_DISABLED, "s": SOFTIRQ | BH_DISABLED,
}


@functools.lru_cache(maxsize=None)
def flags_state(flags: str) -> int:
    """The context state a flags column says (5-column layout; see `FtraceReader` for 4)."""
    return _IRQOFF_CHARS.get(flags[0], 0) | _HARDSOFT_CHARS.get(flags[2], 0)


# -- address -> name ----------------------------------------------------------------
#
# Nameless lines (6.1, hash-ptr off) are named from the locks currently held:
# `FtraceReader.held` maps (task, instance) -> [name, count], counted up by
# acquire and down by release, so it is bounded by the locks held at once.  A
# lookup prefers the same task's acquisition, then any task holding that
# address (a linear search, only for nameless lines the task itself does not
# explain).


# -- scanning one line --------------------------------------------------------------
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


def _digits(text: str) -> bool:
    return bool(text) and text.isascii() and text.isdigit()


def scan(line: str) -> Optional[tuple]:
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
        if len(_BODIES) >= _CACHE_LIMIT:
            _BODIES.clear()
        _BODIES[text] = body
    return (head, flags, timestamp, body)


def _is_arg_start(text: str, pos: int) -> bool:
    """Whether TEXT[pos:] is ` NAME=`: a blank, then an argument name and `=` (the grammar's lookahead)."""
    if text[pos:pos + 1] != " ":
        return False
    eq = text.find("=", pos + 1)
    name = text[pos + 1:eq]
    return eq > pos + 1 and name.isascii() and name.isidentifier()


def _scan_probe(text: str):
    """`(SITE) ARG=VALUE ...` of a kprobe line -> (site, ((arg, value), ...)); None when TEXT is not a
    probe's (the grammar's `other_event`), False when it breaks the grammar (left to it for the message).

    The same reading as the grammar's `probe_event` (tests/test_reader_ftrace.py proves it).
    """
    close = text.find(")")
    site = text[1:close]
    if close < 2 or "(" in site or any(ch.isspace() for ch in site) or not _is_arg_start(text, close + 1):
        return None
    args = []
    pos, end = close + 1, len(text)
    while pos < end:
        if text[pos] != " ":
            return False
        while pos < end and text[pos] == " ":
            pos += 1
        eq = text.find("=", pos)
        name = text[pos:eq]
        if eq <= pos or not (name.isascii() and name.isidentifier()):
            return False
        pos = eq + 1
        if text[pos:pos + 1] == '"':  # to the first quote that ends the line or starts the next argument
            quote = pos
            while True:
                quote = text.find('"', quote + 1)
                if quote < 0:
                    return False
                if quote + 1 == end or _is_arg_start(text, quote + 1):
                    break
            value, pos = text[pos:quote + 1], quote + 1
        else:
            stop = pos
            while stop < end and not text[stop].isspace():
                stop += 1
            if stop == pos:
                return False
            if text[stop:stop + 2] == " [":  # a module's symbol: "func+0x1/0x2 [mod]"
                bracket = text.find("]", stop + 2)
                module = text[stop + 2:bracket]
                if bracket > stop + 2 and not any(ch.isspace() for ch in module):
                    stop = bracket + 1
            value, pos = text[pos:stop], stop
        args.append((name, value))
    return (site, tuple(args))


@functools.lru_cache(maxsize=None)
def _parser():
    from lark import Lark

    return Lark(grammar_text("ftrace.lark"), parser="lalr", lexer="contextual", maybe_placeholders=False)


_TERMINAL_NAMES = {
    "COMM": "a comm", "PID": "a pid", "TGID": "a (tgid)", "CPU": "a [cpu] column", "FLAGS": "irq flags",
    "TIMESTAMP": "a timestamp", "ADDRESS": "a lock address", "NAME": "a lock name", "TRY": "'try '",
    "READ": "'read '", "ACQUIRE": "lock_acquire", "LOCK_OP": "a lock event", "EVENT_NAME": "an event name",
    "COLON": "':'", "_SP": "a blank", "LOST_TEXT": "LOST EVENTS", "INT": "a number", "REST": "event text",
    "PREAMBLE": "a trace-cmd preamble line", "LSQB": "'['", "RSQB": "']'", "$END": "end of line",
    "PROBE_SITE": "a probe's (site)", "ARG_NAME": "an argument name", "ARG_VALUE": "an argument value",
    "EQUAL": "'='",
    "<END-OF-FILE>": "end of line", "MINUS": "'-'", "LOST_CPU": "'CPU:N [LOST EVENTS]'",
}


def _describe(expected: Iterable[str]) -> str:
    names = sorted({_TERMINAL_NAMES.get(name, name) for name in expected})
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def scan_slow(line: str, file: str = "<trace>", lineno: int = 0) -> tuple:
    """A line as the grammar reads it: an event tuple (see `scan`), `("lost", cpu)` or `("preamble",)`.

    Raises `TraceError` with the column of the first character the grammar
    cannot take.
    """
    from lark import Token
    from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

    try:
        tree = _parser().parse(line)
    except UnexpectedCharacters as exc:
        message = f"unexpected {line[exc.pos_in_stream]!r}; expected {_describe(exc.allowed or ())}"
        raise TraceError(file, lineno, exc.column, message, source=line) from None
    except UnexpectedToken as exc:
        if exc.token.type == "$END":
            column, what = len(line) + 1, "end of line"
        else:
            text = str(exc.token)
            column, what = exc.column, repr(text if len(text) <= 20 else text[:17] + "...")
        raise TraceError(file, lineno, column, f"unexpected {what}; expected {_describe(exc.expected)}",
                         source=line) from None
    except UnexpectedInput as exc:  # pragma: no cover - other lark errors
        raise TraceError(file, lineno, getattr(exc, "column", None), str(exc).splitlines()[0], source=line) from None
    node = tree.children[0]
    if node.data == "lost_line":
        return ("lost", next(tok for tok in node.children if isinstance(tok, Token) and tok.type == "INT").value)
    if node.data == "preamble":
        return ("preamble",)
    fields = {tok.type: tok.value for tok in node.children if isinstance(tok, Token)}
    event = node.children[-1].children[0]
    head = (fields["COMM"], fields["PID"], fields["CPU"][1:-1])
    if event.data == "other_event":
        return (head, fields.get("FLAGS"), fields["TIMESTAMP"], (event.children[0].value, None, False, False, None))
    if event.data == "probe_event":
        name, site = event.children[0].value, event.children[1].value[1:-1]
        args = tuple((arg.children[0].value, arg.children[1].value) for arg in event.children[2:])
        return (head, fields.get("FLAGS"), fields["TIMESTAMP"], (name, None, False, False, None, site, args))
    tokens = {tok.type: tok.value for tok in event.children if isinstance(tok, Token)}
    for sub in event.children:
        if not isinstance(sub, Token):  # acquire_flags
            tokens.update((tok.type, tok.value) for tok in sub.children)
    name = tokens.get("ACQUIRE") or tokens["LOCK_OP"]
    return (head, fields.get("FLAGS"), fields["TIMESTAMP"],
            (name, tokens["ADDRESS"], "TRY" in tokens, "READ" in tokens, tokens.get("NAME", "")))


# -- the reader ---------------------------------------------------------------------

#: most digits of a CPU number (Python refuses to convert numbers of thousands of digits)
MAX_CPU_DIGITS = 9


def _check_number(text: str, line: str, file: str, lineno: int, what: str, limit: int = MAX_CPU_DIGITS) -> None:
    """A TraceError at `text` in `line` when it is longer than `limit` characters."""
    if len(text) > limit:
        raise TraceError(file, lineno, line.find(text) + 1, f"{what} too long ({len(text)} digits)", source=line)



class FtraceReader:
    """Events from the lines of one ftrace capture; `stats` fills as it goes.

    >>> reader = FtraceReader("t")
    >>> [e.op for e in reader.parse(["  bash-12  [001] d.h1.  1.5: lock_acquire: 00ab foo"])]
    ['irqs-off', 'hardirq-enter', 'acquire']
    >>> reader.stats.hardirq_lines
    1
    """

    def __init__(self, file: str = "<trace>", read_policy: Optional[ReadPolicy] = None,
                 stats: Optional[ReaderStats] = None, contention: bool = False) -> None:
        self.file = file
        self.contention = contention  # yield contention_begin/end as events
        self.read_policy = read_policy or read_mode
        self.stats = stats if stats is not None else ReaderStats()
        self.held: dict[tuple[str, str], list] = {}  # (task, instance) -> [name, count]
        self.context: dict[str, int] = {}  # task -> state told to the checker
        self.comms: dict[str, str] = {}  # task -> last display name
        self.pending: dict[str, list[LockArgs]] = {}  # cpu -> probe records awaiting their lock_acquire
        self.by_map: dict[int, tuple[str, str]] = {}  # a held lock's map address -> (name, instance)

    def _task(self, comm: Optional[str], pid: Optional[str], cpu: Optional[str]) -> tuple[str, str, Optional[int]]:
        cpu_number = int(cpu) if cpu is not None else None
        if pid is None:  # perf -F without tid: the comm is all there is
            task = display = comm or "?"
        elif pid == "0" and cpu_number is not None:
            task, display = f"0/{cpu_number}", f"swapper/{cpu_number}/0"
        else:
            task = pid
            if comm is None:
                display = pid
            elif comm == "<...>":
                display = self.comms.get(task) or f"<...>/{pid}"
            else:
                display = f"{comm}/{pid}"
        self.comms[task] = display
        return (task, display, cpu_number)

    #: the line scanners (a subclass for another text format swaps them)
    scan = staticmethod(scan)
    scan_slow = staticmethod(scan_slow)

    def parse(self, lines: Iterable[str], fields: bool = False) -> Iterator[Event]:
        return self.parse_numbered(enumerate(lines, 1), fields)

    def parse_numbered(self, numbered: Iterable[tuple[int, str]], fields: bool = False,
                       count_lines: bool = True) -> Iterator[Event]:
        """`parse` of `(line number, line)` pairs: the capture fast path (`lockcheck.engine.fast_capture`)
        hands on only the lines it does not apply itself, numbered as in the file, and counts
        `stats.lines` itself (`count_lines=False`)."""
        file = self.file
        make = _fields if fields else Event  # constructor tuples for a reader process
        scan, scan_slow = self.scan, self.scan_slow
        stats = self.stats
        held = self.held
        context = self.context
        read_policy = self.read_policy
        skipped = stats.skipped
        tasks: dict[tuple, tuple] = {}  # head -> (task, display, cpu)
        bodies: dict[tuple, tuple] = {}  # body -> (op, instance, name, trylock, read)
        flag_states: dict[str, int] = {}
        pending = self.pending
        comms = self.comms
        lineno = 0
        events = hardirq_lines = softirq_lines = resolved = context_events = acquisitions = 0
        try:
            for lineno, line in numbered:
                if line[:1] == "#":
                    continue
                record = scan(line)
                if record is None:
                    stripped = line.strip()
                    if not stripped or stripped[0] == "#":
                        continue
                    stats.slow_lines += 1
                    record = scan_slow(line, file, lineno)
                    if record[0] == "lost":
                        stats.lost_markers += 1
                        _check_number(record[1], line, file, lineno, "CPU number")
                        yield make("", LOST_EVENTS, None, None, WRITE, False, 0, None, True, None, None,
                                   int(record[1]), file, lineno, None)
                        continue
                    if record[0] == "preamble":
                        continue
                head, flags, timestamp, body = record
                if len(body) > 5:  # a kprobe line
                    args = lock_args(body[6])
                    if args is None:
                        skipped[body[0]] += 1
                        continue
                    stack = pending.get(head[2])
                    if stack is None:
                        stack = pending[head[2]] = []
                    elif len(stack) >= _PENDING_LIMIT:
                        del stack[0]
                        stats.args_unpaired += 1
                    stack.append(args)
                    stats.probe_lines += 1
                    continue
                known_body = bodies.get(body)
                if known_body is None:
                    event = body[0]
                    op = LOCK_EVENTS.get(event)
                    if op is None:
                        tracepoint = event.rpartition(":")[2]  # perf keeps the `lock:` system
                        if tracepoint in CONTENTION_EVENTS:
                            stats.contention += 1
                            if self.contention:
                                yield self._contention(line, head, timestamp, event, lineno)
                                continue
                        skipped[event] += 1
                        continue
                    address = body[1]
                    known_body = (op, address if address[:2] == "0x" else "0x" + address, body[4], body[2], body[3])
                    if len(bodies) >= _CACHE_LIMIT:
                        bodies.clear()
                    bodies[body] = known_body
                op, instance, name, trylock, read = known_body
                task_info = tasks.get(head)
                if task_info is None or head[0] == "<...>":
                    if head[2] is not None:
                        _check_number(head[2], line, file, lineno, "CPU number")
                    task_info = self._task(*head)
                    if len(tasks) >= _HEAD_CACHE_LIMIT:
                        tasks.clear()
                    tasks[head] = task_info
                    task, display, cpu = task_info
                else:
                    task, display, cpu = task_info
                    # what `_task` records for a `<...>` line, as if the head were read again: a head
                    # read from the cache says what one read afresh (after a clear) would say
                    comms[task] = display
                if timestamp is None:
                    ts = None
                elif len(timestamp) <= 40:
                    ts = float(timestamp)
                else:  # 1e40 s: a corrupt line, and float() would make it inf
                    _check_number(timestamp, line, file, lineno, "timestamp", 40)
                in_irq = False
                if flags is not None:
                    state = flag_states.get(flags)
                    if state is None:
                        state = flag_states[flags] = flags_state(flags)
                    if state:
                        if len(flags) == 4 and state & SOFTIRQ and not state & HARDIRQ:
                            state = self._old_softirq(task, head[0], state)
                        if state & HARDIRQ:
                            hardirq_lines += 1
                            in_irq = True
                        elif state & SOFTIRQ:
                            softirq_lines += 1
                            in_irq = True
                        elif state & BH_DISABLED:
                            in_irq = True
                    old = context.get(task, 0)
                    if state != old:
                        context[task] = state
                        for context_op in context_transition(old, state):
                            context_events += 1
                            yield make(task, context_op, None, None, WRITE, False, 0, None, True, None, ts,
                                       cpu, file, lineno, display)
                key = (task, instance)
                entry = held.get(key)
                if op is ACQUIRE:
                    if not name:
                        name = self._named(entry[0] if entry is not None else self._holder(instance))
                    if entry is None:
                        entry = held[key] = [name, 1]
                    else:
                        entry[0] = name
                        entry[1] += 1
                    events += 1
                    acquisitions += 1
                    args = self._paired(pending.get(head[2]), instance, name) if pending else None
                    if args is not None:
                        yield self._exact(make, args, entry, task, name, instance, ts, cpu, lineno, display)
                        continue
                    yield make(task, op, name, instance, read_policy(name, in_irq) if read else WRITE, trylock,
                               0, None, True, None, ts, cpu, file, lineno, display)
                    continue
                if entry is not None:
                    if not name:
                        name = entry[0]
                        resolved += 1
                    if op is RELEASE:
                        if entry[1] > 1:
                            entry[1] -= 1
                        else:
                            del held[key]
                            if len(entry) > 2:
                                self.by_map.pop(entry[2], None)
                elif not name:
                    name = self._named(self._holder(instance))
                events += 1
                yield make(task, op, name, instance, WRITE, False, 0, None, True, None, ts, cpu, file, lineno,
                           display)
        finally:
            if count_lines:
                stats.lines += lineno
            stats.events += events
            stats.context_events += context_events
            stats.hardirq_lines += hardirq_lines
            stats.softirq_lines += softirq_lines
            stats.names_resolved += resolved
            stats.acquisitions += acquisitions

    def _paired(self, stack: Optional[list], instance: str, name: str) -> Optional[LockArgs]:
        """The pending probe record of this CPU that this lock_acquire line belongs to (taken off).

        The latest one with the same name (or, without a name, the same map
        address when the tracepoint prints real addresses); records above it
        had no lock_acquire line and are dropped.
        """
        if not stack:
            return None
        address = int(instance, 16)
        real = address >= 1 << 32  # a hashed %p prints 32 significant bits
        for i in range(len(stack) - 1, -1, -1):
            args = stack[i]
            if args.name is not None and name:
                same = args.name == name
            elif args.map is not None and real:
                same = args.map == address
            else:
                same = True
            if same:
                self.stats.args_unpaired += len(stack) - 1 - i
                del stack[i:]
                self.stats.args_paired += 1
                return args
        return None

    def _exact(self, make, args: LockArgs, entry: list, task: str, name: str, instance: str, ts: Optional[float],
               cpu: Optional[int], lineno: int, display: str):
        """The event of a lock_acquire line with lockdep's own arguments."""
        nest = None
        if args.nest_lock:
            nest = self.by_map.get(args.nest_lock)
            if nest is None:  # held since before the capture began
                nest = (UNKNOWN_LOCK, f"0x{args.nest_lock:x}")
                self.stats.nest_unknown += 1
        if args.map is not None:
            if len(entry) == 2:
                entry.append(args.map)
            self.by_map[args.map] = (name, instance)
        mode = RREAD if args.read >= 2 else READ if args.read else WRITE
        return make(task, ACQUIRE, name, instance, mode, bool(args.trylock), args.subclass, nest, bool(args.check),
                    args.ip, ts, cpu, self.file, lineno, display, True)

    def _contention(self, line: str, head: tuple, timestamp: Optional[str], event: str, lineno: int) -> Event:
        """A contention_begin/end line as an event: `ADDR (flags=F)` / `ADDR (ret=N)` after the name."""
        payload = line.partition(event + ":")[2].split(None, 1)
        address = payload[0] if payload else ""
        detail = payload[1].strip(" ()") if len(payload) > 1 else ""
        task, display, cpu = self._task(*head)
        op = _CONTENTION_OPS[event.rpartition(":")[2]]
        return Event(task, op, None, address if address[:2] == "0x" else "0x" + address, WRITE, False, 0, None,
                     True, detail.partition("=")[2] or None, float(timestamp) if timestamp is not None else None,
                     cpu, self.file, lineno, display)

    def _holder(self, instance: str) -> Optional[str]:
        """The name any task holds INSTANCE under (a linear search; rare)."""
        for (_, address), entry in self.held.items():
            if address == instance:
                return entry[0]
        return None

    def _named(self, known: Optional[str]) -> str:
        if known is None:
            self.stats.names_unresolved += 1
            return UNKNOWN_LOCK
        self.stats.names_resolved += 1
        return known

    def _old_softirq(self, task: str, comm: str, state: int) -> int:
        """`s` on the 4-column layout: softirq context only after hardirq/softirq or in ksoftirqd."""
        if self.context.get(task, 0) & (HARDIRQ | SOFTIRQ) or comm.startswith("ksoftirqd/"):
            return state
        return state & ~SOFTIRQ


#: `parse(..., fields=True)` yields constructor tuples (see lockcheck.readers.parallel)
PARSES_FIELDS = True


def _fields(*args):
    """The arguments of `Event(...)` as a tuple: what `fields=True` yields instead of the event."""
    return args


def parse(lines: Iterable[str], file: str = "<trace>", stats: Optional[ReaderStats] = None,
          read_policy: Optional[ReadPolicy] = None, fields: bool = False,
          contention: bool = False) -> Iterator[Event]:
    """Events from ftrace text lines (the format-module entry; see `FtraceReader`)."""
    return FtraceReader(file, read_policy, stats, contention).parse(lines, fields)


def sniff(lines: list[str]) -> bool:
    """An ftrace header (`# tracer:`, the `TASK-PID` column line) or an ftrace event line first."""
    for line in lines:
        text = line.strip()
        if not text:
            continue
        if text.startswith("#"):
            if text.startswith("# tracer:") or "TASK-PID" in text:
                return True
            continue
        if scan(line) is not None:
            return True
        try:
            record = scan_slow(line)
        except TraceError:
            return False
        if record[0] == "preamble":
            continue
        return True
    return False
