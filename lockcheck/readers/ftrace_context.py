"""What the ftrace line's columns say beyond the lock: the read mode of a `read ` acquisition
(`read_mode`) and the irq context of the flags column (`flags_state`, `context_transition`).
The why of both is in `lockcheck.readers.ftrace`'s docstring."""

from __future__ import annotations

import functools
from typing import Callable

from lockcheck.events import (
    HARDIRQ_ENTER, HARDIRQ_EXIT, IRQS_OFF, IRQS_ON, READ, RREAD, SOFTIRQ_ENTER, SOFTIRQ_EXIT, SOFTIRQS_OFF,
    SOFTIRQS_ON,
)


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
