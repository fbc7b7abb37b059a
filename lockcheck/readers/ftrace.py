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
  prints real addresses).  Once the probe is known to be installed (an
  argument line in the first lines, or seen before), a `lock_acquire` with
  no argument line (a missed hit, lost events, a CPU buffer starting late,
  a restart) is *unknown*: `check=False` and `props["unknown"]` (see
  `lockcheck.readers.ftrace_kprobe`).  A lost-events marker or a restart (a
  `# tracer:` header again, a CPU's clock going back) drops the pending
  argument lines of its CPUs.
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

from typing import Iterable, Iterator, Optional

from lockcheck.errors import TraceError
from lockcheck.events import ACQUIRE, CONTENTION_BEGIN, CONTENTION_END, RELEASE, WRITE, Event, MAX_SUBCLASS
from lockcheck.events import MAX_CPU_DIGITS  # (most digits of a CPU number, every reader's)
from lockcheck.events import LOST_EVENTS as E_LOST_EVENTS
from lockcheck.readers.ftrace_context import (  # noqa: F401 (re-exported)
    BH_DISABLED, HARDIRQ, IRQS_DISABLED, RECURSIVE_READ_NAMES, SOFTIRQ, ReadPolicy, context_transition, flags_state,
    read_mode,
)
from lockcheck.readers.ftrace_grammar import _describe, _parser, scan_slow  # noqa: F401 (re-exported)
from lockcheck.readers.ftrace_kprobe import (  # noqa: F401 (re-exported)
    LOCK_ARGS_REQUIRED, UNKNOWN_LOCK, LockArgs, ProbePairing, _PENDING_LIMIT, _scan_probe, lock_args, lookahead,
)
from lockcheck.readers.ftrace_scan import (  # noqa: F401 (re-exported)
    LOCK_EVENTS, _CACHE_LIMIT, _HEAD_CACHE_LIMIT, scan, scan_pure,
)
from lockcheck.readers.ftrace_stats import ReaderStats

NAME = "ftrace"
#: captures start mid-flight; parse() takes stats= (see lockcheck.readers)
CAPTURE = True
TAKES_STATS = True

#: op of the marker yielded for `CPU:N [LOST EVENTS]`: `Event(task="", op=LOST_EVENTS, cpu=N)`
LOST_EVENTS = E_LOST_EVENTS

#: tracepoint name -> op: LOCK_EVENTS (lockcheck.readers.ftrace_scan)
#: lockdep-independent contention tracepoints (5.19+): skipped, counted apart (or yielded, see parse)
CONTENTION_EVENTS = frozenset({"contention_begin", "contention_end"})
_CONTENTION_OPS = {"contention_begin": CONTENTION_BEGIN, "contention_end": CONTENTION_END}
#: parse() takes contention= (lockcheck stat asks for the contention tracepoints)
TAKES_CONTENTION = True



# -- address -> name ----------------------------------------------------------------
#
# Nameless lines (6.1, hash-ptr off) are named from the locks currently held:
# `FtraceReader.held` maps (task, instance) -> [name, count], counted up by
# acquire and down by release, so it is bounded by the locks held at once.  A
# lookup prefers the same task's acquisition, then any task holding that
# address (a linear search, only for nameless lines the task itself does not
# explain).


# -- scanning one line: lockcheck.readers.ftrace_scan (`scan`, compiled where built) -----------

# -- the reader ---------------------------------------------------------------------


def _check_number(text: str, line: str, file: str, lineno: int, what: str, limit: int = MAX_CPU_DIGITS) -> None:
    """A TraceError at `text` in `line` when it is longer than `limit` characters."""
    if len(text) > limit:
        raise TraceError(file, lineno, line.find(text) + 1, f"{what} too long ({len(text)} digits)", source=line)


def _seconds(timestamp: Optional[str], line: str, file: str, lineno: int) -> Optional[float]:
    """A line's time stamp in seconds; 1e40 s and longer is a corrupt line (float() would make it inf)."""
    if timestamp is None:
        return None
    _check_number(timestamp, line, file, lineno, "timestamp", 40)
    return float(timestamp)


class FtraceReader(ProbePairing):
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
        self.keys: dict[int, set[str]] = {}  # a lock_class_key's address -> the names acquired with it
        self.clocks: dict[Optional[int], float] = {}  # cpu -> last time stamp (kprobe captures)

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
        """The events of LINES; an argument line among the first `LOOKAHEAD` makes the probe known
        from the first line on (a CPU whose buffer starts late loses its first argument lines)."""
        found, lines = lookahead(lines, self._scan_any)
        self.probe_known = self.probe_known or found
        yield from self.parse_numbered(enumerate(lines, 1), fields)

    def _scan_any(self, line: str) -> Optional[tuple]:
        """A line's record by either scanner; None when it breaks the grammar."""
        record = self.scan(line)
        if record is None:
            try:
                record = self.scan_slow(line)
            except TraceError:
                return None
        return record if len(record) == 4 else None

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
                    if line.startswith("# tracer:") and (events or stats.events):
                        stats.restarts += 1  # a trace concatenated or restarted: what was pending is cut
                        self._drop_pending(None)
                        self.clocks.clear()
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
                        self._drop_pending(int(record[1]))
                        yield make("", LOST_EVENTS, None, None, WRITE, False, 0, None, True, None, None,
                                   int(record[1]), file, lineno, None)
                        continue
                    if record[0] == "preamble":
                        continue
                head, flags, timestamp, body = record
                if len(body) > 5:  # a kprobe line
                    args = lock_args(body[6])
                    if args is None:
                        ts = _seconds(timestamp, line, file, lineno)
                        made = self.map_op(make, body[0], dict(body[6]), self._task(*head), ts, lineno)
                        if made is None:
                            skipped[body[0]] += 1
                        else:
                            yield from made
                        continue
                    if not 0 <= args.subclass <= MAX_SUBCLASS:  # the kernel: "looking up invalid subclass"
                        at = line.find("subclass=") + len("subclass=") + 1
                        raise TraceError(file, lineno, at, f"subclass must be 0..{MAX_SUBCLASS} "
                                         f"(lockdep's MAX_LOCKDEP_SUBCLASSES), not {args.subclass}", source=line)
                    stack = pending.get(head[2])
                    if stack is None:
                        stack = pending[head[2]] = []
                    elif len(stack) >= _PENDING_LIMIT:
                        del stack[0]
                        stats.args_unpaired += 1
                    stack.append(args)
                    stats.probe_lines += 1
                    self.probe_known = True
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
                ts = _seconds(timestamp, line, file, lineno)
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
                    if self.probe_known and ts is not None:  # acquisitions only: none takes the fast path
                        self._clock(cpu, ts)
                    args = self._paired(pending.get(head[2]), instance, name) if pending else None
                    if args is not None:
                        yield self._exact(make, args, entry, task, name, instance, ts, cpu, lineno, display)
                        continue
                    if self.probe_known:
                        yield self._unknown(make, task, name, instance, read_policy(name, in_irq) if read else WRITE,
                                            trylock, ts, cpu, lineno, display)
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
