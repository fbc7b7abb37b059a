"""Typed trace events: the vocabulary every reader produces and the checker consumes.

One `Event` mirrors one call of the kernel's lockdep hooks
(`lock_acquire(lock, subclass, trylock, read, check, nest_lock, ip)`,
`lock_release(lock, ip)`, the irq-state hooks, `debug_check_no_locks_freed`,
`lockdep_sys_exit`).  Readers of every input format (`.lt`, ftrace, perf,
JSON Lines, the pytest plugin's recorder) yield these and nothing else, so
the checker never knows where a trace came from.

Ops are plain interned strings equal to the `.lt` op names: comparing
`event.op is ACQUIRE` is the cheapest test Python has, and the hot path
runs it millions of times.
"""

from __future__ import annotations

from typing import Optional

# -- ops (the `.lt` spelling) -------------------------------------------------
ACQUIRE = "acquire"
RELEASE = "release"
CONTENDED = "contended"
ACQUIRED = "acquired"
HARDIRQ_ENTER = "hardirq-enter"
HARDIRQ_EXIT = "hardirq-exit"
SOFTIRQ_ENTER = "softirq-enter"
SOFTIRQ_EXIT = "softirq-exit"
IRQS_ON = "irqs-on"
IRQS_OFF = "irqs-off"
SOFTIRQS_ON = "softirqs-on"
SOFTIRQS_OFF = "softirqs-off"
FREE = "free"
EXIT = "exit"
#: not a `.lt` op: a capture lost events on CPU `cpu` (ftrace's `CPU:N [LOST EVENTS]`,
#: `#lockcheck-lost-events cpu=N` in a `.lt` file), so what that CPU's tasks hold is unknown
LOST_EVENTS = "lost-events"
#: not a `.lt` op: a run begins inside a file (`#lockcheck-run` in a `.lt` file, as
#: `lockcheck convert` writes one run per input).  `Event(task="", op=RUN, lock=SOURCE,
#: at=FORMAT, trylock=CAPTURE, check=IRQ_STATE)`: SOURCE is what the run was read from
#: (or None), FORMAT the input format it was read in (or None), CAPTURE whether it started
#: mid-flight, IRQ_STATE whether it carries irq context -- what a file start of that
#: format means (`lockcheck.readers.run_rules`)
RUN = "run"
#: not `.lt` ops, yielded only to `lockcheck stat` (readers' `contention=True`): the kernel's
#: lockdep-independent `contention_begin`/`contention_end` tracepoints (5.19+); `instance` is the
#: lock's address, `lock` None, `at` the tracepoint's flags (`SPIN|MUTEX`) or return value
CONTENTION_BEGIN = "contention-begin"
CONTENTION_END = "contention-end"
# -- the rest of lockdep (docs/trace-format.md, "The rest of lockdep") -----------------
SET_CLASS = "set-class"  #: lock_set_class: the held lock takes another class (and subclass)
SET_SUBCLASS = "set-subclass"  #: lock_set_subclass: the held lock takes another subclass
DOWNGRADE = "downgrade"  #: lock_downgrade: the held write lock becomes a read lock
SYNC = "sync"  #: lock_sync: validated as an acquisition, never held
PIN = "pin"  #: lock_pin_lock
UNPIN = "unpin"  #: lock_unpin_lock
ASSERT_HELD = "assert-held"  #: lockdep_assert_held (_write, _read)
ASSERT_NOT_HELD = "assert-not-held"  #: lockdep_assert_not_held
ASSERT_IRQS_ON = "assert-irqs-on"  #: lockdep_assert_irqs_enabled
ASSERT_IRQS_OFF = "assert-irqs-off"  #: lockdep_assert_irqs_disabled
UNREGISTER = "unregister"  #: lockdep_unregister_key / zap_class: LOCK names a class
TASK_EXIT = "task-exit"  #: do_exit's debug_check_no_locks_held

#: ops that name a lock
LOCK_OPS = frozenset({ACQUIRE, RELEASE, CONTENDED, ACQUIRED, FREE})
#: ... of them, those every reader and fast path has always read (the others go to the checker)
BASIC_LOCK_OPS = LOCK_OPS
#: ops that change the irq state of a task
IRQ_OPS = frozenset(
    {HARDIRQ_ENTER, HARDIRQ_EXIT, SOFTIRQ_ENTER, SOFTIRQ_EXIT, IRQS_ON, IRQS_OFF, SOFTIRQS_ON, SOFTIRQS_OFF}
)
#: the ops of "The rest of lockdep" that name a lock, and those that do not
MORE_LOCK_OPS = frozenset({SET_CLASS, SET_SUBCLASS, DOWNGRADE, SYNC, PIN, UNPIN, ASSERT_HELD, ASSERT_NOT_HELD,
                           UNREGISTER})
MORE_PLAIN_OPS = frozenset({ASSERT_IRQS_ON, ASSERT_IRQS_OFF, TASK_EXIT})
LOCK_OPS = LOCK_OPS | MORE_LOCK_OPS
ALL_OPS = LOCK_OPS | IRQ_OPS | {EXIT} | MORE_PLAIN_OPS
#: ops whose effect reaches past the task that names them (every task's held stack is read or
#: emptied, classes are forgotten: a fast path's per-task or per-class state is stale after one)
OTHER_TASKS_OPS = frozenset({LOST_EVENTS, RUN, UNREGISTER})
#: ... and the ops that change the state of their own task only
OWN_TASK_OPS = frozenset(ALL_OPS - OTHER_TASKS_OPS)

# -- modes: lockdep's `read` argument -------------------------------------------
WRITE = 0  #: exclusive
READ = 1  #: non-recursive reader (down_read on an rwsem)
RREAD = 2  #: recursive reader (read_lock on an rwlock_t, rcu_read_lock)
MODE_NAMES = {WRITE: "write", READ: "read", RREAD: "rread"}
MODES_BY_NAME = {name: mode for mode, name in MODE_NAMES.items()}

#: lockdep's MAX_LOCKDEP_SUBCLASSES
MAX_SUBCLASS = 7

#: most decimal digits an event's `cpu` may have (no machine has a billion CPUs; Python refuses to
#: convert numbers of thousands of digits): the `.lt` and JSON Lines readers' limit, and the JSON Lines
#: translator's and the compiled cores' (lockcheck/engine/_grammar_limits.h reads it at import)
MAX_CPU_DIGITS = 9


class Event:
    """One lock operation of one task, with where it was read from.

    `lock` is the class name as written in the trace (without `/N`: the
    subclass is its own field, as in `lock_acquire`), `instance` the lock
    object within that class (None: the class's single instance).
    `nest` is the nest_lock as a `(class, instance)` pair.  `comm` is an
    optional display name for the task when the key is not readable (ftrace
    keys stacks by pid and prints the last comm seen).
    """

    __slots__ = (
        "task", "op", "lock", "instance", "mode", "trylock", "subclass", "nest",
        "check", "at", "ts", "cpu", "file", "line", "comm", "exact", "props",
    )

    def __init__(
        self,
        task: str,
        op: str,
        lock: Optional[str] = None,
        instance: Optional[str] = None,
        mode: int = WRITE,
        trylock: bool = False,
        subclass: int = 0,
        nest: Optional[tuple[str, Optional[str]]] = None,
        check: bool = True,
        at: Optional[str] = None,
        ts: Optional[float] = None,
        cpu: Optional[int] = None,
        file: str = "<trace>",
        line: int = 0,
        comm: Optional[str] = None,
        exact: bool = False,
        props: Optional[dict] = None,
    ) -> None:
        self.task = task
        self.op = op
        self.lock = lock
        self.instance = instance
        self.mode = mode
        self.trylock = trylock
        self.subclass = subclass
        self.nest = nest
        self.check = check
        self.at = at
        self.ts = ts
        self.cpu = cpu
        self.file = file
        self.line = line
        self.comm = comm
        self.exact = exact
        #: what "The rest of lockdep" adds to an event, None when nothing (most events):
        #: `wait` (OUTER, INNER), `type` and `cmp` of an acquisition's class, `class` of
        #: set-class, `threaded` of hardirq-enter, `held` (mode word) of assert-held
        self.props = props

    def _key(self) -> tuple:
        return tuple(getattr(self, name) for name in self.__slots__)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, Event):
            return NotImplemented
        return self._key() == other._key()

    def __hash__(self) -> int:
        return hash(self._key())

    def __repr__(self) -> str:
        fields = ", ".join(
            f"{name}={getattr(self, name)!r}"
            for name in self.__slots__
            if getattr(self, name) not in (None, False) or name in ("task", "op")
        )
        return f"Event({fields})"

    @property
    def location(self) -> str:
        """`FILE:LINE`, the form every report and the JSON contract use."""
        return f"{self.file}:{self.line}"

    @property
    def class_name(self) -> Optional[str]:
        """The validation class as reports print it: `NAME` or `NAME/N`."""
        if self.lock is None:
            return None
        return class_name(self.lock, self.subclass)


def class_name(lock: str, subclass: int = 0) -> str:
    """Lockdep prints a subclass as a `/N` suffix of the class name (`__print_lock_name`).

    >>> class_name("&rq->lock", 1)
    '&rq->lock/1'
    """
    return f"{lock}/{subclass}" if subclass else lock


def lock_text(lock: str, instance: Optional[str]) -> str:
    """A lock as the `.lt` format writes it (quoting names that need it)."""
    text = quote_token(lock)
    return f"{text}@{instance}" if instance is not None else text


_NEEDS_QUOTES = frozenset(' \t"@\\')


def quote_token(text: str) -> str:
    """Quote a class name or site the way the `.lt` grammar reads it back."""
    if text and not any(ch in _NEEDS_QUOTES for ch in text) and not text.startswith("#") and "=" not in text:
        return text
    escaped = text.replace("\\", "\\\\").replace('"', '\\"')
    return f'"{escaped}"'
