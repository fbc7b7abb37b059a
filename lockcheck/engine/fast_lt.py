"""The fast path: `.lt` lines applied to a checker without an `Event` per line.

Most lines of a real trace change nothing but a task's state: an
acquisition whose chain lockdep has already validated (a chain-cache hit,
no new usage bit), the release of the innermost lock, a release further
down whose re-acquired locks all land on cached chains
(`release_out_of_order`), an irq-state change that marks no usage bit
(`irq_change`: its evidence deferred, read back by `tasks.irq_event` only
when a report cites it), an exit holding nothing.  For those, the
plain pipeline builds an `Event` (reader), then a `HeldLock` (checker) and
throws both away a few lines later.  Here one loop reads such a line,
interns nothing it does not need, and does what `Checker.feed` would do to
the task's state -- push or pop, chain key, irq state, statistics --
without either object.  Everything else (new tasks, chain-cache misses,
new usage bits, notes, findings, `nocheck`, directives, lines `scan_fast`
would not take) is handed on as an `Event` to the full checker, which
stays the one place lockdep's semantics live.  So the fast path can only
ever be *equal* to the plain one: `tests/test_hotpath.py` and
`tests/test_hotpath_irq.py` hold it to identical findings, graph,
statistics and task state.

The fast path keeps its pushes on the task's stack as plain tuples
(`_entry`); before the full checker looks at a task, `materialize` turns
them into `HeldLock`s whose events are read back from their lines only if
a report or a new dependency needs them.
"""

from __future__ import annotations

import functools
import gc
import os
from types import ModuleType
from typing import Callable, Iterable, Iterator, Optional

from lockcheck import events as E
from lockcheck.engine.fast_held import (
    RELEASE, CLS, HARDIRQS_OFF, INSTANCE, IRQ_CONTEXT, LINE, LINENO, LOCK, NEST, PREV_KEY, READ, REFERENCES, SUBCLASS, TRYLOCK,
    irq_change, irq_evidence, release_out_of_order)
from lockcheck.lockdep import rules
from lockcheck.lockdep.checker import Checker
from lockcheck.events import LOST_EVENTS, RUN, Event
from lockcheck.readers import lt
from lockcheck.readers import lockdep_keys as more
from lockcheck.lockdep.tasks import HeldLock, usage_needs
from lockcheck.lockdep.usage import ENABLED_HARDIRQ, ENABLED_SOFTIRQ, READ_MASK

#: `.lt` mode words -> lockdep's read argument
_MODES = {"write": 0, "read": 1, "rread": 2}
#: the directive lines (`#lockcheck-run`, `#lockcheck-lost-events`)
_DIRECTIVES = tuple(lt.DIRECTIVES)



def materialize(held: list, file: str) -> None:
    """Turn the fast path's tuple entries of a held stack into `HeldLock`s, in place.

    An entry holds what a `HeldLock` holds but its event: the text of
    the release that pops it, the line and its number, from which the
    event is read back (by `lt.scan_fast`, which takes every line the fast
    path takes) only when a report or a new dependency asks for it.
    """
    # the fast path only pushes, pops and rewrites the top entry, so its tuples are the top of
    # the stack: stop at the first HeldLock (a deep stack is not walked again at every miss)
    for i in range(len(held) - 1, -1, -1):
        entry = held[i]
        if entry.__class__ is not tuple:
            break
        hlock = HeldLock.deferred(functools.partial(lt.scan_fast, entry[LINE], file, entry[LINENO]),
                                  entry[CLS], entry[LOCK], entry[INSTANCE], entry[SUBCLASS], entry[READ],
                                  entry[TRYLOCK], True, entry[NEST], entry[IRQ_CONTEXT],
                                  entry[HARDIRQS_OFF], entry[REFERENCES])
        hlock.prev_chain_key = entry[PREV_KEY]
        held[i] = hlock


def applies(checker: Checker) -> bool:
    """Whether the fast path may run for this checker: one that sees cache hits only as hits."""
    return checker._inline_cache_hits


def parser(module: ModuleType, checker: Checker, tick: Optional[Callable[[str], None]] = None,
           foreign: Optional[Callable[[str], bool]] = None
           ) -> Optional[Callable[[Iterable[str], str], Iterator[Event]]]:
    """The fast parse of a format for `checker` (`parse(lines, file)`), or None: none for that format.

    `tick(file)`, if given, is called every `TICK` lines (a progress line).
    `foreign(task)`, if given, says which tasks another process checks
    (`lockcheck.jobs`): once the checker has dropped one event of such a
    task, its further lines are skipped here, unread.
    """
    if getattr(module, "NAME", None) == "lt":
        return functools.partial(lt_events, checker, tick=tick, foreign=foreign)
    return None


#: lines between two calls of the progress `tick` (a power of two minus one: a mask)
TICK = 0xFFFF


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


def _holds(held: list, lock: str, instance: Optional[str]) -> bool:
    """`Checker.lock_is_held` over a stack of tuples and `HeldLock`s (`HeldLock.matches`)."""
    for entry in held:
        if entry.__class__ is tuple:
            if entry[LOCK] == lock and (entry[INSTANCE] == instance
                                        or (entry[REFERENCES] and entry[SUBCLASS] == 0)):
                return True
        elif entry.matches(lock, instance):
            return True
    return False


# What `_scan_tail` makes of the text after the task: (op kind, bits of the options seen, cpu, ...).
_ACQUIRE, _RELEASE, _STATS, _IRQ, _EXIT = 1, 2, 3, 4, 5
# (`contended` and `acquired` are the checker's: a lock not held is bad contention, `lockdep.more_ops`)
_KINDS = {"acquire": _ACQUIRE, "release": _RELEASE, E.EXIT: _EXIT,
          **{op: _IRQ for op in E.IRQ_OPS}}


def _scan_tail(tail: str, classes: dict) -> Optional[tuple]:
    """The text of a line after `TASK `, read as `scan_fast` reads it; None: not for the fast path.

    `(_ACQUIRE, seen, cpu, release, cls, lock, instance, read, trylock, subclass, nest, class node)`,
    `(_RELEASE, seen, cpu, release, lock, instance)`, `(_STATS, seen, cpu)`, `(_IRQ, seen, cpu, op)`
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
        return (kind, seen, cpu, "release " + parts[1], cls, lock, instance, read, trylock, subclass, nest, node)
    if kind == _RELEASE:
        return (kind, seen, cpu, "release " + parts[1], lock, instance)
    return (kind, seen, cpu)


#: what `_scan_tail` reads in `release CLASS@INSTANCE` (the lock itself is the held entry's)
_PLAIN_RELEASE = (_RELEASE, 0, None)


def _stamp(stamp: str, info: tuple) -> tuple[bool, Optional[int]]:
    """The end of a line after ` ts=`: `T` or `T cpu=N`, on a line whose rest `info` read.

    The same reading as `_scan_tail` of the whole line: options are
    independent words, so the rest's reading stands, and a `ts=` or `cpu=`
    also in the rest is a repeat (not fast: False).
    """
    stamp, blank, cpu_word = stamp.partition(" ")
    if info[1] & (_TS | _CPU):
        return False, None
    # digits with at most one point are a finite float (`lt._seconds`'s verdict) without
    # building it; anything else (signs, exponents, junk) is left to it
    if not (len(stamp) <= 64 and stamp.isascii() and stamp.replace(".", "", 1).isdigit()) \
            and lt._seconds(stamp) is None:
        return False, None
    if not blank:
        return True, info[2]
    if not _TAKES_BY_KIND[info[0]] & _CPU:
        return False, None
    cpu = _CPU_WORDS.get(cpu_word, _UNREAD)
    if cpu is _UNREAD:
        cpu = lt._cpu(cpu_word[4:]) if cpu_word.startswith("cpu=") else None
        if len(_CPU_WORDS) >= _CACHE_LIMIT:
            _CPU_WORDS.clear()
        _CPU_WORDS[cpu_word] = cpu
    return cpu is not None, cpu


#: `cpu=N` word -> N (None: not a cpu= word the fast path takes); a machine has few CPUs
_CPU_WORDS: dict = {}
_UNREAD = object()


_TAKES_BY_KIND = {_ACQUIRE: _TAKES["acquire"], _RELEASE: _TAKES["release"], _STATS: _TAKES["acquired"],
                  _IRQ: _TS | _CPU, _EXIT: _TS | _CPU}


def lt_events(checker: Checker, lines: Iterable[str], file: str = "<trace>",
              tick: Optional[Callable[[str], None]] = None,
              foreign: Optional[Callable[[str], bool]] = None) -> Iterator[Event]:
    """The events of `.lt` lines that need the full checker; the others applied to `checker` here.

    Feed what this yields to `checker.feed` before asking for the next one
    (as `Checker.run` does): the fast lines after it depend on its effect.
    The text after the task is read once per distinct text (`_scan_tail`,
    cached; the time stamps that make each line unique are read apart, by
    `_stamp`); per task, what the fast path needs of its state (stack,
    irq state, usage masks) is looked up once and kept until a line of that
    task goes to the full checker, which may change any of it.
    """
    tasks = checker.tasks
    cache = checker.chain_cache
    classes = checker.graph._node
    quick = checker.quick_reacquire
    stats = checker.stats
    scan = lt.scan_fast
    parse_line = lt.parse_line
    initial = rules.INITIAL_CHAIN_KEY
    depth_limit = checker.fast_depth
    nest_lock_merges, acquire_usage, separate_irq_context, iterate_chain_key, validates_chain = _rules()
    task_view: dict = {}  # task key -> (TaskState, held, irq_context, hardirqs_off, usage needs, acquired_ever)
    tails: dict = {}  # text after the task -> what _scan_tail read
    events = hits = 0
    compiled = _compiled_filter()
    if compiled is not None:
        # the compiled core applies the common lines itself and passes on the others, numbered;
        # it splits the rest of a file itself, given blocks of bytes (source.Lines.give_bytes)
        numbered = compiled(lines, task_view, tails, cache, initial, depth_limit, TICK if tick is not None else -1,
                            _rule_tables(), classes, (file, irq_evidence, usage_needs, 1 << ENABLED_HARDIRQ, 1 << ENABLED_SOFTIRQ,
                                      READ_MASK, quick), checker)
        give_bytes = getattr(lines, "give_bytes", None)
        if give_bytes is not None:
            give_bytes(numbered.lines_read)
        take = numbered.take
    else:
        numbered = enumerate(lines, 1)
        take = _nothing_taken
    # The cyclic garbage collector is off while the lines are read: a check makes no reference
    # cycles per line (what it drops is freed by reference counting), but the collector's passes
    # over the young objects it makes cost ~5-15% of a check; on again at the end (or when the
    # reading is abandoned: the generator's `finally`).  tests/test_hotpath_caches.py holds a
    # check to making no cyclic garbage, the benchmarks hold 10M events to a flat RSS.
    collecting = gc.isenabled()
    gc.disable()
    try:
        for lineno, line in numbered:
            if not line:
                continue
            if tick is not None and not lineno & TICK:
                stats.events += events
                stats.chain_hits += hits
                events, hits = take()
                tick(file)
            last = line[-1]
            if last == "\n" or last == "\r":
                line = line.rstrip("\r\n")
                if not line:
                    continue
            first = line[0]
            if (first == " " or first == "\t") and not line.strip(" \t"):
                continue  # blanks and tabs only: a blank line, not one for the grammar (20M: 275 s)
            if first == "#":
                if line.startswith(_DIRECTIVES) or lineno == 1:
                    ev = parse_line(line, file, lineno) if lineno != 1 else _plain(line, file, lineno)
                    if ev is not None:
                        stats.events += events
                        stats.chain_hits += hits
                        events, hits = take()
                        stats.events += events
                        stats.chain_hits += hits
                        events = hits = 0
                        task_view.clear()
                        yield ev
                continue
            task_key, _, tail = line.partition(" ")
            view = task_view.get(task_key)
            if view is None:
                if task_key in task_view:
                    continue  # another process's task (`foreign`): a view of None
                task = tasks.get(task_key)
                if task is not None and not task.hardirq_threaded and not task.pins and not checker.irq.preempt_rt:
                    # (threaded hardirqs, pins, PREEMPT_RT softirqs: every line the checker's)
                    view = task_view[task_key] = _view(task)
            if view is not None:
                cut = tail.find(" ts=")  # time stamps make lines unique: the rest is looked up
                rest = tail if cut < 0 else tail[:cut]
                held = view[1]
                if held:
                    top = held[-1]
                    if top.__class__ is tuple and top[0] == rest and not top[REFERENCES]:
                        # the plain release of the innermost lock, recognised by its text
                        if cut < 0:
                            cpu = None
                        else:
                            fast, cpu = _stamp(tail[cut + 4:], _PLAIN_RELEASE)
                            if not fast:
                                top = None
                        if top is not None:
                            held.pop()
                            view[0].chain_key = top[PREV_KEY]
                            if cpu is not None:
                                view[0].cpu = cpu
                            events += 1
                            continue
                info = tails.get(rest)
                if info is None:
                    info = _scan_tail(rest, classes)
                    if info is not None:
                        if len(tails) >= _CACHE_LIMIT:
                            tails.clear()
                        tails[rest] = info
                cpu = None
                if info is not None:
                    if cut < 0:
                        cpu = info[2]
                    else:
                        fast, cpu = _stamp(tail[cut + 4:], info)
                        if not fast:
                            info = None
                if info is not None:
                    task, held = view[0], view[1]
                    kind = info[0]
                    if kind == _ACQUIRE:
                        # -- Checker.feed + lock_acquire, for a chain-cache hit -------------------------
                        _, _, _, release, cls, lock, instance, read, trylock, subclass, nest, node = info
                        depth = len(held)
                        if depth < depth_limit:
                            if depth:
                                top = held[-1]
                                if top.__class__ is tuple:
                                    top_cls, top_context = top[CLS], top[IRQ_CONTEXT]
                                else:
                                    top_cls, top_context = top.cls, top.irq_context
                                if nest_lock_merges(depth, top_cls, cls, nest):
                                    # nest_lock merge: one more reference on the top entry
                                    if top.__class__ is tuple:
                                        held[-1] = top[:REFERENCES] + ((top[REFERENCES] or 1) + 1,) + top[LINE:]
                                    else:
                                        top.references = (top.references or 1) + 1
                                    if cpu is not None:
                                        task.cpu = cpu
                                    if view[5] is not None:
                                        view[5].add((lock, instance))
                                    events += 1
                                    continue
                            irq_context = view[2]
                            # (view[4]: the task's usage needs for its hardirqs-off state)
                            if (not acquire_usage(view[4], read, trylock, True, False) & ~node["usage"]
                                    and (nest is None or _holds(held, nest[0], nest[1]))):
                                prev_key = chain_key = task.chain_key
                                if depth and separate_irq_context(top_context, irq_context):
                                    chain_key = initial
                                chain_key = iterate_chain_key(chain_key, cls, read)
                                validated = validates_chain(trylock, True)
                                if not validated or chain_key in cache:
                                    if validated:
                                        hits += 1  # (validate_chain returns at once for a trylock)
                                    held.append((release, cls, lock, instance, prev_key, irq_context, read,
                                                 trylock, view[3], nest, subclass, 0, line, lineno))
                                    task.chain_key = chain_key
                                    if cpu is not None:
                                        task.cpu = cpu
                                    if view[5] is not None:
                                        view[5].add((lock, instance))
                                    events += 1
                                    continue
                    elif kind == _RELEASE:
                        # -- Checker.feed's release of the innermost lock (lock_release's, merged) ------
                        if held:
                            top = held[-1]
                            if top.__class__ is tuple:
                                references = top[REFERENCES]
                                if top[RELEASE] == info[3] and not references:
                                    held.pop()
                                    task.chain_key = top[PREV_KEY]
                                elif references and top[LOCK] == info[4] and (top[INSTANCE] == info[5]
                                                                            or top[SUBCLASS] == 0):
                                    if references > 1:
                                        held[-1] = top[:REFERENCES] + (references - 1,) + top[LINE:]
                                    else:
                                        held.pop()
                                        task.chain_key = top[PREV_KEY]
                                else:
                                    top = None
                            elif top.lock == info[4] and top.instance == info[5] and not top.references:
                                held.pop()
                                task.chain_key = top.prev_chain_key
                            else:
                                top = None
                            released = top is not None
                            if not released and quick:
                                # -- lock_release of a lock further down, every re-acquired chain a hit ----
                                moved = release_out_of_order(task, held, info[4], info[5], classes, cache)
                                released = moved >= 0
                                if released:
                                    hits += moved
                            if released:
                                if cpu is not None:
                                    task.cpu = cpu
                                events += 1
                                continue
                    elif kind == _IRQ:
                        # -- irq.py's handler, when it marks no usage bit and notes nothing ------------
                        if irq_change(task, held, info[3], classes, line, file, lineno):
                            if cpu is not None:
                                task.cpu = cpu
                            task_view[task_key] = _view(task)
                            events += 1
                            continue
                    elif kind == _EXIT:
                        # -- Checker._op_exit of a task holding nothing: nothing to report -------------
                        if not held:
                            if cpu is not None:
                                task.cpu = cpu
                            events += 1
                            continue
                    else:  # contended, acquired: statistics, not validation
                        if cpu is not None:
                            task.cpu = cpu
                        events += 1
                        continue
            # -- everything else: an Event for the full checker --------------------------------
            ev = scan(line, file, lineno)
            if ev is None:
                ev = parse_line(line, file, lineno)
                if ev is None:
                    continue
            task = tasks.get(ev.task)
            if task is not None and task.held:
                materialize(task.held, file)
            stats.events += events
            stats.chain_hits += hits
            events, hits = take()
            stats.events += events
            stats.chain_hits += hits
            events = hits = 0
            if ev.op is LOST_EVENTS or ev.op is RUN:
                task_view.clear()  # other tasks' stacks and irq states change, or the tasks go
            else:
                task_view.pop(ev.task, None)
            yield ev
            if checker.stopped:  # --first: from here on the checker only counts events
                break
            if ev.op is not LOST_EVENTS and ev.op is not RUN:
                task = tasks.get(ev.task)  # its view again, at once (the compiled core only looks views up)
                if task is not None:
                    if not task.hardirq_threaded and not task.pins and not checker.irq.preempt_rt:
                        task_view[ev.task] = _view(task)
                elif foreign is not None and foreign(ev.task):
                    task_view[ev.task] = None  # the compiled core skips its lines too
        if compiled is not None:
            numbered.stop()
        for lineno, line in numbered:
            ev = _plain(line, file, lineno)
            if ev is not None:
                yield ev
    finally:
        if collecting:
            gc.enable()
        stats.events += events
        stats.chain_hits += hits
        events, hits = take()
        stats.events += events
        stats.chain_hits += hits


def _view(task) -> tuple:
    """What the fast path needs of a task's state, until the full checker next changes it:
    `(TaskState, held, irq_context, hardirqs_off, usage needs by (read, trylock), acquired_ever)`."""
    hardirq_depth = task.hardirq_depth
    hardirqs_off = not task.hardirqs_enabled or hardirq_depth > 0
    return (task, task.held, rules.task_irq_context(hardirq_depth, task.softirq_depth), hardirqs_off,
            task.usage_need[4:] if hardirqs_off else task.usage_need[:4], task.acquired_ever)


def _nothing_taken() -> tuple[int, int]:
    return 0, 0


def _rules() -> tuple:
    """lockdep's rules the loop applies, as `rules` has them now (bound once: the hot path)."""
    return (rules.nest_lock_merges, rules.acquire_usage, rules.separate_irq_context, rules.iterate_chain_key,
            rules.validates_chain)


def _rule_tables() -> tuple[int, int, int]:
    """`rules.compiled_tables()` as the `.lt` core takes them (validates, separate, merges)."""
    return rules.compiled_tables()[:3]


def _compiled_filter():
    """The compiled core's line filter (`lockcheck.engine._speedups`), or None: not built,
    `LOCKCHECK_PURE=1`, or a chain-key rule the core cannot follow."""
    if os.environ.get("LOCKCHECK_PURE") == "1" or not rules.chain_key_is_tuple_hash():
        return None
    try:
        from lockcheck.engine._speedups import LineFilter
    except ImportError:
        return None
    return LineFilter


def compiled() -> bool:
    """Whether the fast path runs its compiled core here."""
    return _compiled_filter() is not None


def _plain(line: str, file: str, lineno: int):
    """The event of one line as `lt.parse` reads it (None: blank, comment)."""
    line = line.rstrip("\r\n")
    if not line or (line[0] == "#" and not line.startswith(_DIRECTIVES)):
        return more.header_event(line, file, lineno) if line else None
    return lt.scan_fast(line, file, lineno) or lt.parse_line(line, file, lineno)
