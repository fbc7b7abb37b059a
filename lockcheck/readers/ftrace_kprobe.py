"""lockdep's own `lock_acquire` arguments, from a kprobe line before each `lock_acquire` line.

`lockcheck capture` sets the probe up; its line carries `subclass=`,
`trylock=`, `read=` and `check=` (`map=`, `nest_lock=`, `ip=`, `name=`
when present), any event name and argument order.  The ftrace reader holds
such a line per CPU until the `lock_acquire` line that follows it on that
CPU (`ProbePairing`), which then carries those arguments exactly.

When the probe is known to be installed -- an argument line came within the
first `LOOKAHEAD` lines, or anywhere before -- a `lock_acquire` line with no
argument line is *unknown*: its hit was missed, or lost with a ring buffer's
events (`CPU:N [LOST EVENTS]`), or cut off where a CPU's buffer starts late
or a trace restarts.  Reading it as a plain acquisition guesses subclass 0,
no nest_lock and a blocking acquisition, and a wrong guess is a certain
false report (an `inconsistent-lock-state` of `&pcp->lock` from 2% missed
hits).  So it is yielded with `check=False` (lockdep's check=0: held, but no
usage bit and no dependency of its own) and `props["unknown"]`; the
annotator gives it back its plain reading when the kernel's state can
resolve it, and otherwise records a doubt that makes a finding about its
class uncertain.
"""

from __future__ import annotations

import itertools
from dataclasses import dataclass
from typing import Callable, Iterable, Iterator, Optional

from lockcheck.events import ACQUIRE, DOWNGRADE, MAX_SUBCLASS, READ, RREAD, SET_CLASS, SYNC, UNREGISTER, WRITE
from lockcheck.readers.lockdep_keys import LOCK_TYPE_NAMES, MAX_WAIT_TYPE

#: class given to a nameless release/contended/acquired whose address no task holds
UNKNOWN_LOCK = "<unknown>"

#: lines looked at, at a capture's start, for an argument line (the probe is installed)
LOOKAHEAD = 4096

#: `Event.props` of an acquisition whose argument line is missing
UNKNOWN_KEY = "unknown"

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
    #: the class keys the map carries (`wait_outer`/`wait_inner`/`lock_type` of the probe):
    #: `Event.props` `wait` and `type` (`lockcheck.readers.lockdep_keys`); None: not recorded
    props: Optional[dict] = None
    #: the map's lock_class_key (`key=`): which classes `lockdep_unregister_key()` zaps
    key: Optional[int] = None


#: the map's wait types and lock type, as `lockcheck capture` records them (u8 fields after `name`)
_CLASS_ARGS = ("wait_outer", "wait_inner", "lock_type")


def _class_props(values: dict) -> Optional[dict]:
    """`wait` (outer, inner) and `type` of a probe line's map fields; a wait_type_inner of 0
    (LD_WAIT_INV: the map has no wait type, as on a kernel before 5.9) says nothing."""
    numbers = [_number(values[key]) if key in values else None for key in _CLASS_ARGS]
    outer, inner, lock_type = numbers
    props: dict = {}
    if inner is not None and 0 < inner <= MAX_WAIT_TYPE and outer is not None and 0 <= outer <= MAX_WAIT_TYPE:
        props["wait"] = (outer, inner)
    if lock_type is not None and lock_type in LOCK_TYPE_NAMES and lock_type:
        props["type"] = lock_type
    return props or None


def _number(text: str) -> Optional[int]:
    """A probe argument's integer: `%u`, `%d` or `0x%x` (None when it is not one)."""
    try:
        return int(text, 16) if text[:2] in ("0x", "0X") else int(text)
    except ValueError:
        return None


def lock_args(args: tuple) -> Optional[LockArgs]:
    """The LockArgs of a probe line's (name, value) pairs, or None when it is another probe.

    >>> lock_args((("map", "0xff"), ("subclass", "1"), ("trylock", "0"), ("read", "2"), ("check", "1"),  # doctest: +NORMALIZE_WHITESPACE
    ...            ("nest_lock", "0x0"), ("ip", "f+0x1/0x2"), ("name", '"&x->lock"')))
    LockArgs(map=255, subclass=1, trylock=0, read=2, check=1, nest_lock=None, ip='f+0x1/0x2', name='&x->lock', props=None,
             key=None)
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
                    values.get("ip"), name, _class_props(values) if "wait_inner" in values else None,
                    _number(values["key"]) if "key" in values else None)


#: pending probe lines kept per CPU (more means lock_acquire lines are not being traced)
_PENDING_LIMIT = 64


def lookahead(lines: Iterable, scan: Callable[[str], Optional[tuple]]) -> tuple[bool, Iterator]:
    """Whether the first LOOKAHEAD lines (or `(number, line)` pairs) hold a lock_acquire argument
    line that SCAN reads, and the lines, all of them, to read on."""
    it = iter(lines)
    first: list = []
    failed: Optional[Exception] = None
    try:
        for item in itertools.islice(it, LOOKAHEAD):
            first.append(item)
    except Exception as err:  # a bad byte: the lines before it are read first, then the error, in order
        failed = err
    found = False
    for item in first:
        line = item if isinstance(item, str) else item[1]
        if "subclass=" in line and "check=" in line:
            record = scan(line)
            if record is not None and len(record[3]) > 5 and lock_args(record[3][6]) is not None:
                found = True
                break
    # (a chain of the two, when reading did not fail: a generator here costs a resumption per line)
    return found, _then(first, failed, it) if failed is not None else itertools.chain(first, it)


def _then(first: list, failed: Optional[Exception], rest: Iterator) -> Iterator:
    """FIRST, then the error reading stopped at (if any), else the REST."""
    yield from first
    if failed is not None:
        raise failed
    yield from rest


class ProbePairing:
    """The reader's half that pairs argument lines with their `lock_acquire` lines.

    Needs `stats` (ReaderStats), `file`, `pending` (cpu -> [LockArgs]) and
    `by_map` (a held lock's map address -> (name, instance)) of the reader.
    """

    stats: object
    file: str
    pending: dict
    by_map: dict
    clocks: dict
    #: an argument line was seen (or comes within the first LOOKAHEAD lines): a lock_acquire
    #: line without one is unknown
    probe_known: bool = False

    def _drop_pending(self, cpu: Optional[int]) -> None:
        """Argument lines of CPU (every CPU: None) that lost their lock_acquire lines (lost events,
        a restart): counted unpaired, not paired with a later line."""
        for key in list(self.pending):
            if cpu is None or (key is not None and key.isdigit() and int(key) == cpu):
                stack = self.pending.pop(key)
                self.stats.args_unpaired += len(stack)  # type: ignore[attr-defined]

    def _clock(self, cpu: Optional[int], ts: float) -> None:
        """A CPU's ring buffer is in time order: its clock going back is a restart of the trace
        (`trace_pipe` read again, captures concatenated), and the argument lines pending on it are cut."""
        last = self.clocks.get(cpu)
        self.clocks[cpu] = ts
        if last is not None and ts < last:
            self.stats.restarts += 1  # type: ignore[attr-defined]
            if cpu is not None:
                self._drop_pending(cpu)

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
        stats = self.stats
        for i in range(len(stack) - 1, -1, -1):
            args = stack[i]
            if args.name is not None and name:
                same = args.name == name
            elif args.map is not None and real:
                same = args.map == address
            else:
                same = True
            if same:
                stats.args_unpaired += len(stack) - 1 - i  # type: ignore[attr-defined]
                del stack[i:]
                stats.args_paired += 1  # type: ignore[attr-defined]
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
                self.stats.nest_unknown += 1  # type: ignore[attr-defined]
        if args.map is not None:
            if len(entry) == 2:
                entry.append(args.map)
            self.by_map[args.map] = (name, instance)
        if args.key:
            self.keys.setdefault(args.key, set()).add(name)
        mode = RREAD if args.read >= 2 else READ if args.read else WRITE
        if args.props:
            return make(task, ACQUIRE, name, instance, mode, bool(args.trylock), args.subclass, nest,
                        bool(args.check), args.ip, ts, cpu, self.file, lineno, display, True, dict(args.props))
        return make(task, ACQUIRE, name, instance, mode, bool(args.trylock), args.subclass, nest, bool(args.check),
                    args.ip, ts, cpu, self.file, lineno, display, True)

    def _unknown(self, make, task: str, name: str, instance: str, mode: int, trylock: bool, ts: Optional[float],
                 cpu: Optional[int], lineno: int, display: str):
        """The event of a lock_acquire line whose argument line is missing (see the module docstring)."""
        self.stats.unknown += 1  # type: ignore[attr-defined]
        return make(task, ACQUIRE, name, instance, mode, trylock, 0, None, False, None, ts, cpu, self.file, lineno,
                    display, False, {UNKNOWN_KEY: True})


    def map_op(self, make, event: str, values: dict, task_info: tuple, ts: Optional[float], lineno: int):
        """The events of a `lock_set_class`/`lock_downgrade`/`lock_sync`/`lockdep_unregister_key`
        probe line (`lockcheck capture`), None for another probe.  A held lock is found by its
        map's address; one held since before the capture began is counted (`map_ops_unknown`)
        and left as it was."""
        op = MAP_OPS.get(event.rpartition(":")[2])
        if op is None:
            return None
        task, display, cpu = task_info
        if op == UNREGISTER:  # every class seen with that key: zap_class() of each
            names = sorted(self.keys.pop(_number(values.get("key", "")) or 0, ()))
            self.stats.map_ops += len(names)  # type: ignore[attr-defined]
            return [make(task, UNREGISTER, name, None, WRITE, False, 0, None, True, None, ts, cpu, self.file,
                         lineno, display, True) for name in names]
        address = _number(values.get("map", ""))
        if op == SYNC:
            args = lock_args(tuple(values.items()) + (("trylock", "0"),))
            if args is None or args.name is None or not 0 <= args.subclass <= MAX_SUBCLASS:
                self.stats.map_ops_unknown += 1  # type: ignore[attr-defined]
                return []
            nest = self.by_map.get(args.nest_lock) if args.nest_lock else None
            mode = RREAD if args.read >= 2 else READ if args.read else WRITE
            self.stats.map_ops += 1  # type: ignore[attr-defined]
            return [make(task, SYNC, args.name, f"0x{address or 0:x}", mode, False, args.subclass, nest,
                         bool(args.check), args.ip, ts, cpu, self.file, lineno, display, True)]
        held = self.by_map.get(address) if address is not None else None
        if held is None:
            self.stats.map_ops_unknown += 1  # type: ignore[attr-defined]
            return []
        name, instance = held
        if op == DOWNGRADE:
            self.stats.map_ops += 1  # type: ignore[attr-defined]
            return [make(task, op, name, instance, WRITE, False, 0, None, True, values.get("ip"), ts, cpu, self.file,
                         lineno, display, True)]
        subclass = _number(values.get("subclass", "0"))
        new = values.get("class", "")
        new = new[1:-1] if len(new) >= 2 and new[0] == new[-1] == '"' else ""
        if subclass is None or not 0 <= subclass <= MAX_SUBCLASS or not new:
            self.stats.map_ops_unknown += 1  # type: ignore[attr-defined]
            return []
        self.stats.map_ops += 1  # type: ignore[attr-defined]
        self.by_map[address] = (new, instance)  # lock_set_class() renames the map: later lines print NEW
        entry = self.held.get((task, instance))  # type: ignore[attr-defined]
        if entry is not None:
            entry[0] = new
        return [make(task, SET_CLASS, name, instance, WRITE, False, subclass, None, True, values.get("ip"), ts, cpu,
                     self.file, lineno, display, True, {"class": new})]


#: the probes on lockdep's calls that change a held lock (`lockcheck capture`), by event name;
#: `lock_set_subclass()` is `lock_set_class()` with the map's own name and key
MAP_OPS = {"lock_set_class_args": SET_CLASS, "lock_downgrade_args": DOWNGRADE, "lock_sync_args": SYNC,
           "lockdep_unregister_key_args": UNREGISTER}


# -- scanning a probe line (the fast scanner's half; the grammar's `probe_event`) ----------


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
