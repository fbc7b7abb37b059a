"""The text after the task of an `.lt` line, read for the fast path (`fast_lt.lt_events`).

`_scan_tail` reads the options once per distinct text (the loop caches what it
makes); `_stamp` reads the ` ts=` end that makes each line unique.  Both read a
line exactly as `lt.scan_fast` does or decline it (None, False): a declined line
goes to the grammar, which reports or reads it.  No lockdep rule is decided
here but the class of a lock taken with a subclass (`rules.hlock_class`).
"""

from __future__ import annotations

import sys
from typing import Optional

from lockcheck import events as E
from lockcheck.lockdep import rules
from lockcheck.readers import lt

#: `.lt` mode words -> lockdep's read argument
_MODES = {"write": 0, "read": 1, "rread": 2}
# Option words: what each sets, as a bit (a repeated one sends the line to the grammar).
_AT, _TS, _CPU, _MODE, _TRY, _SUBCLASS, _NEST = 1, 2, 4, 8, 16, 32, 64
#: the options each op takes on the fast path (the spec's table; others go to the grammar)
_TAKES = {"acquire": 127, "release": _AT | _TS | _CPU, "contended": _AT | _TS | _CPU, "acquired": _TS | _CPU,
          **{op: _AT | _TS | _CPU for op in (E.IRQS_ON, E.IRQS_OFF, E.SOFTIRQS_ON, E.SOFTIRQS_OFF)},
          **{op: _TS | _CPU for op in (E.HARDIRQ_ENTER, E.HARDIRQ_EXIT, E.SOFTIRQ_ENTER, E.SOFTIRQ_EXIT, E.EXIT)}}
#: cached words and lock fields are forgotten beyond this many (addresses are unbounded)
_CACHE_LIMIT = 1 << 16


def _option(word: str) -> Optional[tuple[int, object]]:
    """What an option word sets, as `scan_fast` reads it (`(bit, value)`); None: not for the fast path."""
    if '"' in word or "\t" in word:
        return None
    if word.startswith("at="):
        return (_AT, None) if len(word) > 3 else None
    if word.startswith("ts="):
        return (_TS, None) if lt._seconds(word[3:]) is not None else None
    if word.startswith("cpu="):
        cpu = lt._cpu(word[4:])
        return (_CPU, cpu) if cpu is not None else None
    if word.startswith("subclass="):
        subclass = lt._subclass(word[9:])
        return (_SUBCLASS, subclass) if subclass is not None else None
    if word.startswith("nest="):
        nest = _lock_field(word[5:])
        return (_NEST, nest) if nest is not None else None
    if word == "try":
        return (_TRY, True)
    mode = _MODES.get(word)
    return (_MODE, mode) if mode is not None else None


def _lock_field(field: str) -> Optional[tuple[str, Optional[str]]]:
    """`CLASS[@INSTANCE]` as `scan_fast` splits it; None: not a plain lock field."""
    lock, at_sign, instance = field.partition("@")
    if not lock or "=" in lock or (at_sign and not instance) or '"' in field or "\t" in field:
        return None
    return lock, (instance if at_sign else None)



# What `_scan_tail` makes of the text after the task: (op kind, bits of the options seen, cpu, ...).
_ACQUIRE, _RELEASE, _STATS, _IRQ, _EXIT = 1, 2, 3, 4, 5
# (`contended` and `acquired`: counted, and when contention is checked, applied only for a lock the
# task holds -- a lock not held is bad contention, `lockdep.more_ops`, the checker's)
_KINDS = {"acquire": _ACQUIRE, "release": _RELEASE, "contended": _STATS, "acquired": _STATS, E.EXIT: _EXIT,
          **{op: _IRQ for op in E.IRQ_OPS}}


def _scan_tail(tail: str, classes: dict) -> Optional[tuple]:
    """The text of a line after `TASK `, read as `scan_fast` reads it; None: not for the fast path.

    `(_ACQUIRE, seen, cpu, release, cls, lock, instance, read, trylock, subclass, nest, class node,
    validates_chain, nest_lock_merges on some stack, where acquire_usage reads a view's needs)`,
    `(_RELEASE, seen, cpu, release, lock, instance)`, `(_STATS, seen, cpu, lock, instance)`, `(_IRQ, seen, cpu, op)`
    (an irq-state op) or `(_EXIT, seen, cpu)`; `seen` has the bit of each option given, `release`
    is the text of the plain release of that lock.  An acquisition of a class the graph lacks is
    not for the fast path.
    """
    parts = tail.split(" ")
    kind = _KINDS.get(parts[0])
    if kind is None:
        return None
    first = 1 if kind >= _IRQ else 2  # irq-state ops and exit name no lock
    known = None
    if first == 2:
        if len(parts) < 2:
            return None
        known = _lock_field(parts[1])
        if known is None:
            return None
    takes = _TAKES[parts[0]]
    seen = read = subclass = 0
    trylock = False
    cpu = nest = None
    for word in parts[first:]:
        code = _option(word)
        if code is None:
            return None
        bit, value = code
        if seen & bit or not takes & bit:
            return None
        seen |= bit
        if bit == _MODE:
            read = value
        elif bit == _CPU:
            cpu = value
        elif bit == _TRY:
            trylock = True
        elif bit == _SUBCLASS:
            subclass = value
        elif bit == _NEST:
            nest = value
    if kind == _IRQ:
        return (kind, seen, cpu, parts[0])
    if kind == _EXIT:
        return (kind, seen, cpu)
    lock, instance = known  # type: ignore[misc]
    if kind == _ACQUIRE:
        cls = rules.hlock_class(lock, subclass)
        node = classes.get(cls)
        if node is None:
            return None
        # and two rules' verdicts on it for this run (the compiled core reads its own tables)
        validated = rules.validates_chain(trylock, True)
        may_merge = nest is not None or _merges_without_nest(rules.nest_lock_merges)
        need = _need_index(read, trylock)
        if need is None:
            return None
        return (kind, seen, cpu, "release " + parts[1], cls, lock, instance, read, trylock, subclass, nest, node,
                validated, may_merge, need)
    if kind == _RELEASE:
        return (kind, seen, cpu, "release " + parts[1], lock, instance)
    return (kind, seen, cpu, lock, instance)


#: nest_lock_merges rule -> whether it merges an acquisition that names no nest lock (`_merges_without_nest`)
_WITHOUT_NEST: dict = {}


def _merges_without_nest(rule) -> bool:
    """Whether `rule` (`rules.nest_lock_merges`, or a replacement) merges any acquisition without a
    nest lock, asked of it once: lockdep's merges only one that names its nest lock, so the loop
    need not ask it per line of the others; a rule that may gets asked on every acquisition."""
    verdict = _WITHOUT_NEST.get(rule)
    if verdict is None:
        verdict = _WITHOUT_NEST[rule] = any(
            rule(depth, top, cls, None) for depth in (1, 2, 7) for top, cls in (("a", "a"), ("a", "b"), ("", "a")))
    return verdict


#: needs whose masks say where they are (`_need_index`)
_PROBE = [1, 2, 4, 8]


def _need_index(read: int, trylock: bool) -> Optional[int]:
    """Where `rules.acquire_usage` finds a checked acquisition's mask among a view's needs (the
    four of its task's hardirqs state), found by asking it; None: it does not just read one
    (then the acquisition is the checker's).  (Four distinct masks as the probe: a rule whose
    choice of mask depends on the masks' values would not be followed.)"""
    found = rules.acquire_usage(_PROBE, read, trylock, True, False)
    return _PROBE.index(found) if type(found) is int and found in _PROBE else None


#: what `_scan_tail` reads in `release CLASS@INSTANCE` (the lock itself is the held entry's)
_PLAIN_RELEASE = (_RELEASE, 0, None)


def _stamp(stamp: str, info: tuple) -> tuple[bool, Optional[int]]:
    """The end of a line after ` ts=`: `T` or `T cpu=N`, on a line whose rest `info` read.

    The same reading as `_scan_tail` of the whole line: options are
    independent words, so the rest's reading stands, and a `ts=` or `cpu=`
    also in the rest is a repeat (not fast: False).  (`lt_events` reads
    the stamp apart, `_stamp_cpu`, then asks `_stamp_fits`: the same.)
    """
    cpu = _stamp_cpu(stamp)
    if cpu is NOT_FAST or not _stamp_fits(info, cpu):
        return False, None
    return True, (info[2] if cpu is None else cpu)


#: what `_stamp_cpu` says of a stamp the fast path does not read
NOT_FAST = object()


#: the longest stamp `_stamp_cpu` reads as finite by its digits alone: lt.MAX_SECONDS_CHARS as the
#: reader had it when this module was imported (the compiled core's too), but no more than 308
#: characters (sys.float_info.max_10_exp: a longer string of digits may be inf, `lt._seconds`'s to judge)
_SECONDS_CHARS = min(lt.MAX_SECONDS_CHARS, sys.float_info.max_10_exp)


def _stamp_cpu(stamp: str) -> object:
    """The end of a line after ` ts=` read by itself: None for `T`, N for `T cpu=N`, else NOT_FAST
    (not a finite number of seconds, or not `cpu=` a CPU number after it)."""
    seconds, blank, cpu_word = stamp.partition(" ")
    # digits with at most one point are a finite float (`lt._seconds`'s verdict) without
    # building it; anything else (signs, exponents, junk) is left to it
    if not (len(seconds) <= _SECONDS_CHARS and seconds.isascii() and seconds.replace(".", "", 1).isdigit()) \
            and lt._seconds(seconds) is None:
        return NOT_FAST
    if not blank:
        return None
    cpu = _CPU_WORDS.get(cpu_word, _UNREAD)
    if cpu is _UNREAD:
        cpu = lt._cpu(cpu_word[4:]) if cpu_word.startswith("cpu=") else None
        if len(_CPU_WORDS) >= _CACHE_LIMIT:
            _CPU_WORDS.clear()
        _CPU_WORDS[cpu_word] = cpu
    return NOT_FAST if cpu is None else cpu


def _stamp_fits(info: tuple, cpu: object) -> bool:
    """Whether a stamp `_stamp_cpu` read as `cpu` may end a line whose rest `info` read: no
    `ts=` or `cpu=` in the rest (a repeat), and `cpu=` only after an op that takes it."""
    return not info[1] & (_TS | _CPU) and (cpu is None or bool(_TAKES_BY_KIND[info[0]] & _CPU))


#: `cpu=N` word -> N (None: not a cpu= word the fast path takes); a machine has few CPUs
_CPU_WORDS: dict = {}
_UNREAD = object()


_TAKES_BY_KIND = {_ACQUIRE: _TAKES["acquire"], _RELEASE: _TAKES["release"], _STATS: _TAKES["acquired"],
                  _IRQ: _TS | _CPU, _EXIT: _TS | _CPU}
