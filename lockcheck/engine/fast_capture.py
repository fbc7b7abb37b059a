"""The fast path of ftrace captures and JSON Lines: chain-cache hits applied without an `Event`.

`lockcheck.engine.fast_lt` does this for `.lt`.  A capture goes through three
stages per line -- the ftrace reader (task identity, irq context from the
flags column, the address -> name map), the annotator (what the capture
cannot say, resolved against the kernel's state) and the checker -- and
most lines change nothing in any of them but a held stack, a chain key
and counters: a `lock_acquire` whose chain the checker has cached and that
the kernel's chains explain as captured, the release of the innermost lock,
`lock_acquired`/`lock_contended`, the contention tracepoints.  Here one loop
recognises such a line and does to the three stages' state exactly what
they would have done, and hands every other line, numbered as in the file,
to the reader (`FtraceReader.parse_numbered`), whose events then go through
the annotator and the checker as always.  A line is taken only when the
plain path would change nothing else: irq-context events (a flags column
unlike the task's last line's) that mark no usage bit and note nothing
(`fast_stages.context_hit`), a task the checker knows, no pending kprobe
arguments on its CPU, a named lock, a class the graph has, no new usage bit, a cached chain, no
class held twice, no annotation rule and an explained chain suffix (or no
state), a stack below lockdep's depth limit.  So the fast path can only be
equal to the plain one (tests/test_capturepath.py holds it to identical
findings, graph, statistics and notes).

JSON Lines go the same way (`jsonl_events`): the common object shapes are
applied from the decoded object without an `Event`; the rest is read by
`jsonl.parse`'s own code.

Ordering: the reader pulls lines from the filter only after the events of
the previous line it got went through the annotator and the checker, so a
fast line always sees their effect.  What the filter keeps of a task
(`_View`) is dropped whenever a line of that task goes the plain way (every
view when the line names no task: lost events).
"""

from __future__ import annotations

import functools
import gc
from types import ModuleType
from typing import Callable, Iterable, Iterator, Optional

from lockcheck.engine import capture_filter
from lockcheck.lockdep.checker import Checker
from lockcheck.events import (
    ACQUIRE, ACQUIRED, CONTENDED, IRQ_OPS, LOST_EVENTS, OWN_TASK_OPS, RELEASE, RUN, WRITE, Event)
from lockcheck.engine.fast_stages import (  # noqa: F401
    _Annotated, _View, _event, _only_unchecked, _pop_innermost, _push_hit, context_hit)

#: lines between two calls of the progress `tick` (a mask, as `hotpath.TICK`)
TICK = 0xFFFF
#: cached line pieces (heads, flags, bodies) are forgotten beyond this many
_CACHE_LIMIT = 1 << 16
#: heads cached (as `ftrace._HEAD_CACHE_LIMIT`: every new task brings new ones)
_HEAD_CACHE_LIMIT = 1 << 12


#: views of tasks kept at most: a long capture of short-lived tasks (fresh pids) would keep one per
#: task ever seen; as many as run at a time are enough (a dropped view is built again when needed)
_VIEW_LIMIT = 1 << 12

# what a body is, for the fast path
_SKIP, _SKIP_CONTENTION, _LOCK = 0, 1, 2


def parser(module: ModuleType, rules_module: ModuleType, checker: Checker, annotators, stats,
           tick: Optional[Callable[[str], None]] = None, annotated: bool = False, context=None
           ) -> Optional[Callable[[Iterable[str], str], Iterator[Event]]]:
    """The fast parse of a capture or JSON Lines file for `checker` (`parse(lines, file)`), or None.

    `annotators` is the session's `Annotators` (or None), `stats` the
    `ReaderStats` the plain reader would fill, `annotated`: the annotator
    transforms this file's events (a capture; JSON Lines are taken only
    when it does not).  Only the formats this module knows, read by their
    own rules, and a checker that sees cache hits only as hits
    (`Checker._inline_cache_hits`).  `context`: the `ReadContext`, whose
    `parallel` lets a large file be parsed in a second process.
    """
    if not checker._inline_cache_hits or rules_module is not module:
        return None
    name = getattr(module, "NAME", None)
    if name == "ftrace" and stats is not None:
        return functools.partial(ftrace_events, checker, annotators, stats, tick, context=context)
    if name == "jsonl" and not annotated:
        return functools.partial(jsonl_events, checker, tick, context=context)
    return None


def ftrace_events(checker: Checker, annotators, stats, tick: Optional[Callable[[str], None]],
                  lines: Iterable[str], file: str = "<trace>", context=None) -> Iterator[Event]:
    """The events of ftrace lines that need the plain path; the other lines applied here.

    Feed what this yields through the annotator to the checker before asking
    for the next one (as the session's pipeline does).  With a `context`
    that reads in parallel (`ReadContext.parallel`), a large file is parsed
    in a second process and its events applied by `fields_events`.
    """
    from lockcheck.readers import ftrace

    annotator = getattr(annotators, "current", annotators)
    batches = _worker_batches(ftrace, context, stats, lines, file)
    if batches is not None:
        yield from fields_events(checker, annotator, batches, tick, file)
        return
    reader = ftrace.FtraceReader(file, stats=stats)
    give_bytes = getattr(lines, "give_bytes", None)  # (source.Lines: the compiled filter splits blocks itself)
    reader.probe_known, lines = ftrace.lookahead(lines, reader._scan_any)
    misses = _ftrace_misses(checker, annotator, reader, stats, tick, lines, file, give_bytes)
    collecting = gc.isenabled()
    gc.disable()  # as hotpath.lt_events: a check makes no cycles per line, the collector's passes cost
    try:
        yield from reader.parse_numbered(misses, count_lines=False)
    finally:
        misses.close()
        if collecting:
            gc.enable()


def _ftrace_misses(checker: Checker, annotator, reader, stats, tick, lines: Iterable[str],
                   file: str, give_bytes=None) -> Iterator[tuple[int, str]]:
    """The numbered lines the plain reader must read; every other line applied to the three stages
    (`give_bytes`: `source.Lines.give_bytes` of `lines`, asked when the compiled filter reads them)."""
    from lockcheck.readers import ftrace, ftrace_scan

    scan = ftrace.scan
    flags_state = ftrace.flags_state
    lock_events = ftrace.LOCK_EVENTS
    contention_events = ftrace.CONTENTION_EVENTS
    read_policy = reader.read_policy
    SOFTIRQ, HARDIRQ, BH_DISABLED = ftrace.SOFTIRQ, ftrace.HARDIRQ, ftrace.BH_DISABLED
    held_names = reader.held
    contexts = reader.context
    comms = reader.comms
    pending = reader.pending
    by_map = reader.by_map
    skipped = stats.skipped
    tasks = checker.tasks
    cstats = checker.stats
    partial = functools.partial
    ann = _Annotated(annotator) if annotator is not None else None
    heads: dict = {}  # head text -> (task or None: not for the fast path, display, cpu, cpu text)
    flag_cache: dict = {}  # flags text -> (flags or None, state, hardirq/softirq/in_irq code); None: not fast
    bodies: dict = {}  # body text -> (kind, op, instance, name, trylock, read, event)
    views: dict = {}
    lineno = 0
    events = hardirq_lines = softirq_lines = resolved = acquisitions = context_events = 0
    context_transition = ftrace.context_transition
    split = ftrace_scan.compiled_split()
    # the compiled filter applies the common lines itself and hands this loop the rest (None: this loop alone)
    cfilter = capture_filter.numbered(lines, (heads, flag_cache, bodies, views, ftrace_scan._SHAPES, lock_events),
                                      reader, stats, checker, ann,
                                      file, TICK if tick is not None else None, _event, _VIEW_LIMIT, give_bytes)
    try:
        for lineno, line in cfilter if cfilter is not None else enumerate(lines, 1):
            if tick is not None and not lineno & TICK:
                tick(file)
            if line[:1] == "#":
                if line.startswith("# tracer:"):
                    yield lineno, line  # a restart inside the file: the reader drops pending arguments
                continue
            got = split(line, heads, flag_cache, bodies) if split is not None else None
            if got is not None:  # every piece seen before, a time stamp scan takes: from the caches in C
                head, fl, timestamp, body = got
            else:
                end = line.find("] ")
                if end < 0:
                    views.clear()
                    yield lineno, line
                    continue
                head_text = line[:end]
                stamp, sep, text = line[end + 2:].partition(": ")
                flags_text, _, timestamp = stamp.lstrip(" ").rpartition(" ")
                head = heads.get(head_text)
                fl = flag_cache.get(flags_text)
                body = bodies.get(text)
                if head is None or fl is None or body is None:
                    record = scan(line)
                    if record is None or len(record[3]) > 5 or not sep:
                        head = heads.get(head_text)
                        if head is not None and head[0] is not None:
                            views.pop(head[0], None)
                        else:
                            views.clear()
                        yield lineno, line
                        continue
                    # what scan read of each piece is its reading in any line (it reads them apart)
                    if head is None:
                        comm, pid, cpu_text = record[0]
                        if len(cpu_text) > ftrace.MAX_CPU_DIGITS or comm == "<...>":
                            head = (None, None, None, cpu_text)
                        elif pid == "0":
                            cpu = int(cpu_text)
                            head = (f"0/{cpu}", f"swapper/{cpu}/0", cpu, cpu_text)
                        else:
                            head = (pid, f"{comm}/{pid}", int(cpu_text), cpu_text)
                        if len(heads) >= _HEAD_CACHE_LIMIT:
                            heads.clear()
                        heads[head_text] = head
                    if fl is None:
                        flags = record[1]
                        if flags is None:
                            fl = (None, 0, 0)
                        else:
                            state = flags_state(flags)
                            if len(flags) == 4 and state & SOFTIRQ and not state & HARDIRQ:
                                fl = (flags, -1, 0)  # the old layout's `s`: read with the task's history
                            else:
                                # 1: hardirq line, 2: softirq line, 4: in_interrupt() for the read policy
                                code = 5 if state & HARDIRQ else 6 if state & SOFTIRQ else 4 if state & BH_DISABLED else 0
                                fl = (flags, state, code)
                        if len(flag_cache) >= _CACHE_LIMIT:
                            flag_cache.clear()
                        flag_cache[flags_text] = fl
                    if body is None:
                        event, address, trylock, read, name = record[3]
                        op = lock_events.get(event)
                        if op is None:
                            kind = _SKIP_CONTENTION if event.rpartition(":")[2] in contention_events else _SKIP
                            body = (kind, None, None, None, False, False, event)
                        else:
                            body = (_LOCK, op, address if address[:2] == "0x" else "0x" + address, name, trylock,
                                    read, event)
                        if len(bodies) >= _CACHE_LIMIT:
                            bodies.clear()
                        bodies[text] = body
                # scan's time stamp test, per line (time stamps make lines unique)
                if not (timestamp.isascii() and timestamp.replace(".", "", 1).isdigit()) \
                        or timestamp[0] == "." or timestamp[-1] == "." or not sep:
                    task = head[0]
                    if task is not None:
                        views.pop(task, None)
                    else:
                        views.clear()
                    yield lineno, line
                    continue
            kind = body[0]
            if kind != _LOCK:
                if kind == _SKIP_CONTENTION:
                    if reader.contention:
                        views.clear()
                        yield lineno, line
                        continue
                    stats.contention += 1
                skipped[body[6]] += 1
                continue
            task = head[0]
            done = False
            while task is not None:  # a loop to leave by `break`: the plain way unless `done`
                if len(timestamp) > 40:
                    break
                state = fl[1]
                if state < 0:
                    break
                view = views.get(task)
                if view is None:
                    ctask = tasks.get(task)
                    if ctask is None:
                        break
                    if len(views) >= _VIEW_LIMIT:
                        views.clear()
                    view = views[task] = _View(ctask, ann.held_of.get(task) if ann is not None else None)
                _, op, instance, name, trylock, read, _ = body
                if fl[0] is not None:
                    old = contexts.get(task, 0)
                    if state != old:
                        # the reader's irq-context events first (`parse_numbered`), then the lock's
                        if op is ACQUIRE and (not name or reader.probe_known or (pending and pending.get(head[3]))):
                            break
                        ops = context_transition(old, state)
                        view = context_hit(checker, view, ann, task, ops, head[1], head[2], file, lineno,
                                           float(timestamp))
                        if view is None:
                            break
                        views[task] = view
                        contexts[task] = state
                        context_events += len(ops)
                key = (task, instance)
                cpu = head[2]
                code = fl[2]
                ctask = view.task
                if op is ACQUIRE:
                    if not name or reader.probe_known or (pending and pending.get(head[3])):
                        break  # a kprobe capture: paired or unknown, the reader decides
                    mode = read_policy(name, code >= 4) if read else WRITE
                    check = True
                    verdict = None
                    if ann is not None:
                        verdict = ann.decide(view, task, name, mode, trylock, True, file)
                        if verdict is None:
                            break
                        check = verdict[0]
                    if not _push_hit(checker, view, name, instance, mode, trylock, check,
                                     partial(_event, task, name, instance, mode, trylock, check, timestamp, cpu,
                                             file, lineno, head[1])):
                        break
                    if verdict is not None:
                        ann.acquire(view, task, name, instance, mode, trylock, cpu, file, verdict)
                    # -- the reader -----------------------------------------------------------------
                    entry = held_names.get(key)
                    if entry is None:
                        held_names[key] = [name, 1]
                    else:
                        entry[0] = name
                        entry[1] += 1
                    acquisitions += 1
                elif op is RELEASE:
                    entry = held_names.get(key)
                    if entry is None:
                        break
                    if not name:
                        name = entry[0]
                        named = True
                    else:
                        named = False
                    if not _pop_innermost(checker, view, name, instance, ann):
                        break
                    if named:
                        resolved += 1
                    if entry[1] > 1:
                        entry[1] -= 1
                    else:
                        del held_names[key]
                        if len(entry) > 2:
                            by_map.pop(entry[2], None)
                else:  # lock_contended, lock_acquired: the checker only counts them
                    if not name:
                        entry = held_names.get(key)
                        if entry is None:
                            break
                        resolved += 1
                    cstats.events += 1
                # -- what every lock line does: the reader's counts and names, the task's name and CPU
                events += 1
                if code & 1:
                    hardirq_lines += 1
                elif code & 2:
                    softirq_lines += 1
                display = head[1]
                comms[task] = display
                ctask.name = display
                if cpu is not None:
                    ctask.cpu = cpu
                done = True
                break
            if done:
                continue
            if task is not None:
                views.pop(task, None)
            else:
                views.clear()
            yield lineno, line
    finally:
        if cfilter is not None:
            counts = cfilter.counts()
            lineno = counts["lines"]
            events += counts["events"]
            hardirq_lines += counts["hardirq_lines"]
            softirq_lines += counts["softirq_lines"]
            resolved += counts["names_resolved"]
            acquisitions += counts["acquisitions"]
            stats.contention += counts["contention"]
            context_events += counts["context_events"]
        stats.lines += lineno
        stats.events += events
        stats.hardirq_lines += hardirq_lines
        stats.softirq_lines += softirq_lines
        stats.names_resolved += resolved
        stats.acquisitions += acquisitions
        stats.context_events += context_events


def jsonl_events(checker: Checker, tick: Optional[Callable[[str], None]], lines: Iterable[str],
                 file: str = "<trace>", context=None, start: int = 1) -> Iterator[Event]:
    """The events of JSON Lines that need the checker's full path; the other lines applied here.

    Feed what this yields to the checker before asking for the next one
    (a large file read in parallel: as `ftrace_events`).  `start`: the number
    of the first line (`lockcheck.engine.fast_jsonl` hands on the rest of a
    file whose events `.lt` cannot carry).
    """
    from lockcheck.readers import jsonl

    batches = _worker_batches(jsonl, context, None, lines, file) if start == 1 else None
    if batches is not None:
        yield from fields_events(checker, None, batches, tick, file)
        return

    misses = _jsonl_misses(checker, tick, lines, file, start)
    collecting = gc.isenabled()
    gc.disable()  # as ftrace_events
    try:
        yield from jsonl.parse_numbered(misses, file)
    finally:
        misses.close()
        if collecting:
            gc.enable()


def _jsonl_misses(checker: Checker, tick, lines: Iterable[str], file: str, start: int = 1
                  ) -> Iterator[tuple[int, str]]:
    """The numbered lines the JSON Lines reader must read; the common hits applied to the checker."""
    from lockcheck.util.jsontext import JsonError, loads
    from lockcheck.readers.jsonl import common_fields

    tasks = checker.tasks
    cstats = checker.stats
    partial = functools.partial
    views: dict = {}
    for lineno, line in enumerate(lines, start):
        if tick is not None and not lineno & TICK:
            tick(file)
        fields = None
        obj = None
        if line[:1] == "{" and "\\u" not in line:  # escapes: the reader checks them for lone surrogates
            try:
                obj = loads(line)
            except JsonError:
                pass
            else:
                fields = common_fields(obj)
        if fields is None:
            task = op = None
            if obj.__class__ is dict:
                task, op = obj.get("task"), obj.get("op")
            if task.__class__ is str and op.__class__ is str and op in OWN_TASK_OPS:
                views.pop(task, None)  # an event that changes its own task's state only
            else:
                views.clear()
            yield lineno, line
            continue
        task, op, lock, instance, mode, at, ts, cpu, comm = fields
        view = views.get(task)
        if view is None:
            ctask = tasks.get(task)
            if ctask is not None and not checker.stopped:
                if len(views) >= _VIEW_LIMIT:
                    views.clear()
                view = views[task] = _View(ctask, None)
        if view is not None:
            ctask = view.task
            if op is ACQUIRE:
                if _push_hit(checker, view, lock, instance, mode, False, True,
                             partial(Event, task, ACQUIRE, lock, instance, mode, False, 0, None, True, at, ts, cpu,
                                     file, lineno, comm)):
                    if comm is not None:
                        ctask.name = comm
                    if cpu is not None:
                        ctask.cpu = cpu
                    continue
            elif op is RELEASE:
                if _pop_innermost(checker, view, lock, instance, None):
                    if comm is not None:
                        ctask.name = comm
                    if cpu is not None:
                        ctask.cpu = cpu
                    continue
            elif (op is CONTENDED or op is ACQUIRED) and not checker.contention_checked:  # counted
                cstats.events += 1
                if comm is not None:
                    ctask.name = comm
                if cpu is not None:
                    ctask.cpu = cpu
                continue
        views.pop(task, None)
        yield lineno, line


# -- events parsed in a second process ------------------------------------------------------


def _fields_event(fields: tuple, check: bool) -> Event:
    """The event of a reader's field tuple as the checker got it (`check` as annotated)."""
    ev = Event(*fields)
    ev.check = check
    return ev


def _worker_batches(module: ModuleType, context, stats, lines, file: str) -> Optional[Iterator[list]]:
    """The batches of field tuples of `file` parsed in a second process (`readers.parallel`), when the
    session reads in parallel and the file is worth it; None: read it here.

    Not when the compiled capture filter runs: it reads and applies a capture in one process
    in a third of the wall time (and a fifth of the CPU) that a reader process and this
    process's per-event Python take together (1M-event capture: 2.0 s against 5.9 s)."""
    from lockcheck.readers import parallel

    if context is None or not context.parallel or not parallel.worth_it(file) or capture_filter.runs():
        return None
    close = getattr(lines, "close", None)
    if close is not None:
        close()
    offset = [0]
    context.reading(lambda: offset[0])
    return parallel.read_batches_in_worker(file, module, stats, offset)


def fields_events(checker: Checker, annotator, batches: Iterable[list], tick: Optional[Callable[[str], None]],
                  file: str) -> Iterator[Event]:
    """The events among a reader's field tuples (`Event(*fields)`) that need the plain path; the
    others applied to the annotator (None: none runs) and the checker here.

    What the ftrace fast path does per line, done on what a reader process
    sends: the reader's own work (task identity, irq context events, names
    by address) is done there, so an irq context change arrives as events of
    its own and the lock event after it can still be a hit.
    """
    tasks = checker.tasks
    cstats = checker.stats
    partial = functools.partial
    ann = _Annotated(annotator) if annotator is not None else None
    views: dict = {}
    collecting = gc.isenabled()
    gc.disable()  # as ftrace_events
    try:
        for number, batch in enumerate(batches, 1):
            if tick is not None and not number & 31:
                tick(file)
            for fields in batch:
                task, op, name, instance, mode, trylock, subclass, nest, check = fields[:9]
                done = False
                view = None
                while True:  # a loop to leave by `break`: the plain way unless `done`
                    if (len(fields) > 15 and (fields[15] or (len(fields) > 16 and fields[16]))) or subclass \
                            or nest is not None:
                        break
                    view = views.get(task)
                    if view is None:
                        ctask = tasks.get(task)
                        if ctask is None or checker.stopped:
                            break
                        if len(views) >= _VIEW_LIMIT:
                            views.clear()
                        view = views[task] = _View(ctask, ann.held_of.get(task) if ann is not None else None)
                    ctask = view.task
                    cpu = fields[11]
                    if op == ACQUIRE:
                        verdict = None
                        if ann is not None:
                            verdict = ann.decide(view, task, name, mode, trylock, check, fields[12])
                            if verdict is None:
                                break
                            check = verdict[0]
                        if not _push_hit(checker, view, name, instance, mode, trylock, check,
                                         partial(_fields_event, fields, check)):
                            break
                        if verdict is not None:
                            ann.acquire(view, task, name, instance, mode, trylock, cpu, fields[12], verdict)
                    elif op == RELEASE:
                        if not _pop_innermost(checker, view, name, instance, ann):
                            break
                    elif (op == CONTENDED or op == ACQUIRED) and not checker.contention_checked:
                        cstats.events += 1
                    elif op in IRQ_OPS:
                        view = context_hit(checker, view, ann, task, (op,), fields[14], cpu, fields[12], fields[13],
                                           fields[10], fields[9])
                        if view is None:
                            break
                        views[task] = view
                        done = True
                        break
                    else:
                        break
                    comm = fields[14]
                    if comm is not None:
                        ctask.name = comm
                    if cpu is not None:
                        ctask.cpu = cpu
                    done = True
                    break
                if done:
                    continue
                if op == LOST_EVENTS or op == RUN:
                    views.clear()  # other tasks' stacks and irq states change
                else:
                    views.pop(task, None)
                yield Event(*fields)
    finally:
        if collecting:
            gc.enable()
