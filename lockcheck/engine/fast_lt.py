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

from lockcheck.engine.fast_held import (
    RELEASE, CLS, HARDIRQS_OFF, INSTANCE, IRQ_CONTEXT, LINE, LINENO, LOCK, NEST, PREV_KEY, READ, REFERENCES, SUBCLASS, TRYLOCK,
    find_held, irq_change, irq_evidence, release_out_of_order)
from lockcheck.lockdep import rules
from lockcheck.lockdep.checker import Checker
from lockcheck.events import LOST_EVENTS, OTHER_TASKS_OPS, RUN, UNREGISTER, Event
from lockcheck.readers import lt
from lockcheck.readers import lockdep_keys as more
from lockcheck.lockdep.tasks import HeldLock, usage_needs
from lockcheck.lockdep.usage import READ_MASK
from lockcheck.engine.fast_lt_words import (  # noqa: F401  (_AT, _TS, _CPU, _stamp: tests read them here)
    NOT_FAST, _ACQUIRE, _AT, _CACHE_LIMIT, _CPU, _EXIT, _IRQ, _RELEASE, _TS, _scan_tail, _stamp, _stamp_cpu,
    _stamp_fits)

#: what the loop's `stamp_cpu` is on a line without ` ts=`
NO_STAMP = object()
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


def _settle(stats, events: int, hits: int, take: Callable[[], tuple[int, int]]) -> int:
    """The events and chain hits counted so far, the loop's and the compiled core's (`take()`), added
    to the checker's statistics before it sees an event; 0, the loop's counts from now on."""
    more_events, more_hits = take()
    stats.events += events + more_events
    stats.chain_hits += hits + more_hits
    return 0


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


def lt_events(checker: Checker, lines: Iterable[str], file: str = "<trace>",
              tick: Optional[Callable[[str], None]] = None,
              foreign: Optional[Callable[[str], bool]] = None) -> Iterator[Event]:
    """The events of `.lt` lines that need the full checker; the others applied to `checker` here.

    Feed what this yields to `checker.feed` before asking for the next one
    (as `Checker.run` does): the fast lines after it depend on its effect.
    The text after the task is read once per distinct text (`_scan_tail`,
    cached, with the verdicts of the rules that depend on it alone; the time
    stamps that make each line unique are read apart, by `_stamp_cpu`, once
    per line); per task, what the fast path needs of its state (stack,
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
    nest_lock_merges, _, separate_irq_context, iterate_chain_key, _ = _rules()
    # separate_irq_context over the four irq contexts (`rules.task_irq_context`'s), for this run
    separate = [[separate_irq_context(top, ctx) for ctx in range(4)] for top in range(4)]
    tuple_hash = rules.chain_key_is_tuple_hash()
    transitions = checker.irq.transitions  # rules.irq_transition, as the run started
    task_view: dict = {}  # task key -> (TaskState, held, irq_context, hardirqs_off, usage needs, acquired_ever)
    tails: dict = {}  # text after the task -> what _scan_tail read
    events = hits = 0
    compiled = _compiled_filter()
    if compiled is not None:
        # the compiled core applies the common lines itself and passes on the others, numbered;
        # it splits the rest of a file itself, given blocks of bytes (source.Lines.give_bytes)
        numbered = compiled(lines, task_view, tails, cache, initial, depth_limit, TICK if tick is not None else -1,
                            _rule_tables(), classes, (file, irq_evidence, usage_needs, READ_MASK, quick), checker)
        give_bytes = getattr(lines, "give_bytes", None)
        if give_bytes is not None:
            give_bytes(numbered.lines_read)
        take = numbered.take
        # (before an event: the counts alone -- the core flushed what that line's checker may look at)
        counts = numbered.counts
        # a view set or dropped through the core: the other tasks' views it found stand
        set_view, drop_view = numbered.set_view, numbered.drop_view
    else:
        numbered = enumerate(lines, 1)
        take = counts = _nothing_taken
        set_view = task_view.__setitem__

        def drop_view(key: str, pop=task_view.pop) -> None:
            pop(key, None)
    # The cyclic garbage collector is off while the lines are read: a check makes no reference
    # cycles per line (what it drops is freed by reference counting), but the collector's passes
    # over the young objects it makes cost ~5-15% of a check; on again at the end (or when the
    # reading is abandoned: the generator's `finally`).  tests/test_hotpath_caches.py holds a
    # check to making no cyclic garbage, the benchmarks hold 10M events to a flat RSS.
    views_get, tails_get = task_view.get, tails.get
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
            # (a strip and one compare: the two subscripts and tests of the last and first character
            # cost ~280 instructions a line more, callgrind)
            line = line.rstrip("\r\n")
            if not line:
                continue
            if line < "$" and line[0] in " \t#":  # (a first character below `$` only)
                first = line[0]
                if first != "#":
                    if not line.strip(" \t"):
                        continue  # blanks and tabs only: a blank line, not one for the grammar (20M: 275 s)
                else:
                    if line.startswith(_DIRECTIVES) or lineno == 1:
                        ev = parse_line(line, file, lineno) if lineno != 1 else _plain(line, file, lineno)
                        if ev is not None:
                            events = hits = _settle(stats, events, hits, counts)
                            task_view.clear()
                            yield ev
                    continue
            task_key, _, tail = line.partition(" ")
            view = views_get(task_key)
            if view is None:
                if task_key in task_view:
                    continue  # another process's task (`foreign`): a view of None
                task = tasks.get(task_key)
                if task is not None and not task.hardirq_threaded and not task.pins and not checker.irq.preempt_rt:
                    # (threaded hardirqs, pins, PREEMPT_RT softirqs: every line the checker's)
                    view = _view(task)
                    set_view(task_key, view)
            if view is not None:
                # time stamps make lines unique: the rest is looked up, the stamp read apart
                if " ts=" not in tail:
                    rest = tail
                    stamp_cpu = NO_STAMP
                else:
                    rest, _, stamp = tail.partition(" ts=")
                    stamp_cpu = _stamp_cpu(stamp)
                    if stamp_cpu is NOT_FAST:
                        view = None
            if view is not None:
                task, held = view[0], view[1]
                if held:
                    top = held[-1]
                    if top.__class__ is tuple and top[0] == rest and not top[REFERENCES]:
                        # the plain release of the innermost lock, recognised by its text
                        held.pop()
                        task.chain_key = top[PREV_KEY]
                        if stamp_cpu is not None and stamp_cpu is not NO_STAMP:
                            task.cpu = stamp_cpu
                        events += 1
                        continue
                info = tails_get(rest)
                if info is None:
                    info = _scan_tail(rest, classes)
                    if info is not None:
                        if len(tails) >= _CACHE_LIMIT:
                            tails.clear()
                        tails[rest] = info
                if info is not None:
                    if stamp_cpu is NO_STAMP:
                        cpu = info[2]
                    elif _stamp_fits(info, stamp_cpu):
                        cpu = info[2] if stamp_cpu is None else stamp_cpu
                    else:
                        info = None
                if info is not None:
                    kind = info[0]
                    if kind == _ACQUIRE:
                        # -- Checker.feed + lock_acquire, for a chain-cache hit -------------------------
                        _, _, _, release, cls, lock, instance, read, trylock, subclass, nest, node, validated, \
                            may_merge, need = info
                        depth = len(held)
                        if depth < depth_limit:
                            if depth:
                                top = held[-1]
                                if top.__class__ is tuple:
                                    top_cls, top_context = top[CLS], top[IRQ_CONTEXT]
                                else:
                                    top_cls, top_context = top.cls, top.irq_context
                                if may_merge and nest_lock_merges(depth, top_cls, cls, nest):
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
                            # (view[4]: the task's usage needs for its hardirqs-off state, acquire_usage's)
                            if (not view[4][need] & ~node["usage"]
                                    and (nest is None or _holds(held, nest[0], nest[1]))):
                                prev_key = chain_key = task.chain_key
                                if depth and separate[top_context][irq_context]:
                                    chain_key = initial
                                # (iterate_chain_key's own hash while it is the tuple's: a call less)
                                chain_key = hash((chain_key, cls, read)) if tuple_hash \
                                    else iterate_chain_key(chain_key, cls, read)
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
                        if irq_change(task, held, info[3], classes, transitions, line, file, lineno):
                            if cpu is not None:
                                task.cpu = cpu
                            set_view(task_key, _view(task))
                            events += 1
                            continue
                    elif kind == _EXIT:
                        # -- Checker._op_exit of a task holding nothing: nothing to report -------------
                        if not held:
                            if cpu is not None:
                                task.cpu = cpu
                            events += 1
                            continue
                    elif not checker.contention_checked or (
                            view[5] is None and held and find_held(held, info[3], info[4]) is not None):
                        # -- contended, acquired: counted (`more_ops.lock_contended`), checked only
                        # when contention is and then of a lock the task holds (a capture's task, which
                        # may hold one taken before it began, is the checker's, as the compiled core's)
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
            if ev.op in OTHER_TASKS_OPS:  # (unregister reads every task's held classes)
                for other in tasks.values():
                    if other.held:
                        materialize(other.held, file)
            events = hits = _settle(stats, events, hits, counts)
            if ev.op is LOST_EVENTS or ev.op is RUN:
                task_view.clear()  # other tasks' stacks and irq states change, or the tasks go
            else:
                drop_view(ev.task)
            yield ev
            if checker.stopped:  # --first: from here on the checker only counts events
                break
            if ev.op is UNREGISTER:
                # classes forgotten: one that comes back is a new node, not the one the texts read
                tails.clear()
                if compiled is not None:
                    numbered.forget_classes()
            if ev.op is not LOST_EVENTS and ev.op is not RUN:
                task = tasks.get(ev.task)  # its view again, at once (the compiled core only looks views up)
                if task is not None:
                    if not task.hardirq_threaded and not task.pins and not checker.irq.preempt_rt:
                        set_view(ev.task, _view(task))
                elif foreign is not None and foreign(ev.task):
                    set_view(ev.task, None)  # the compiled core skips its lines too
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
    hardirqs_off = rules.hardirqs_off(task.hardirqs_enabled, hardirq_depth)
    return (task, task.held, rules.task_irq_context(hardirq_depth, task.softirq_depth), hardirqs_off,
            rules.needs_now(task.usage_need, hardirqs_off), task.acquired_ever)


def _nothing_taken() -> tuple[int, int]:
    return 0, 0


def _rules() -> tuple:
    """lockdep's rules the loop applies, as `rules` has them now (bound once: the hot path)."""
    return (rules.nest_lock_merges, rules.acquire_usage, rules.separate_irq_context, rules.iterate_chain_key,
            rules.validates_chain)


def _rule_tables() -> tuple:
    """`rules.compiled_tables()` as the `.lt` core takes them (validates, separate, merges), and
    `rules.irq_transition_table()` (its `apply_irq`)."""
    return rules.compiled_tables()[:3] + (rules.irq_transition_table(),)


def compiled_cores_allowed() -> bool:
    """Whether a compiled core may run at all (this one, the capture filter's): not with
    `LOCKCHECK_PURE=1`, nor under a chain-key rule, an irq transition or a hardirqs-off rule the
    cores cannot follow."""
    return (os.environ.get("LOCKCHECK_PURE") != "1" and rules.chain_key_is_tuple_hash()
            and rules.usage_rules_as_compiled() and rules.irq_transition_table() is not None)


def _compiled_filter():
    """The compiled core's line filter (`lockcheck.engine._speedups`), or None: not built, or not
    allowed (`compiled_cores_allowed`)."""
    if not compiled_cores_allowed():
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
