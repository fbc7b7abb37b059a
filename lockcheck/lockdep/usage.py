"""Lock usage bits: in which irq contexts and irq states a class was taken.

Bit numbers follow the kernel's `enum lock_usage_bit`
(kernel/locking/lockdep_internals.h): per state (HARDIRQ, SOFTIRQ)
`USED_IN`, `USED_IN_READ`, `ENABLED`, `ENABLED_READ`, then `USED`,
`USED_READ`.  "irq-safe" is a USED_IN bit, "irq-unsafe" an ENABLED bit.
"""

from __future__ import annotations

USED_IN_HARDIRQ = 0
USED_IN_HARDIRQ_READ = 1
ENABLED_HARDIRQ = 2
ENABLED_HARDIRQ_READ = 3
USED_IN_SOFTIRQ = 4
USED_IN_SOFTIRQ_READ = 5
ENABLED_SOFTIRQ = 6
ENABLED_SOFTIRQ_READ = 7
USED = 8
USED_READ = 9
#: bits below this one are irq-state bits checked by mark_lock_irq
USAGE_STATES = 8

READ_MASK = 1  # LOCK_USAGE_READ_MASK
DIR_MASK = 2  # LOCK_USAGE_DIR_MASK: set = ENABLED ("unsafe"), clear = USED_IN ("safe")
STATE_NAMES = ("HARDIRQ", "SOFTIRQ")

LOCKF_USED_IN_IRQ = (1 << USED_IN_HARDIRQ) | (1 << USED_IN_SOFTIRQ)
LOCKF_USED_IN_IRQ_READ = (1 << USED_IN_HARDIRQ_READ) | (1 << USED_IN_SOFTIRQ_READ)
LOCKF_ENABLED_IRQ = (1 << ENABLED_HARDIRQ) | (1 << ENABLED_SOFTIRQ)
LOCKF_ENABLED_IRQ_READ = (1 << ENABLED_HARDIRQ_READ) | (1 << ENABLED_SOFTIRQ_READ)
LOCKF_USED_IN_IRQ_ALL = LOCKF_USED_IN_IRQ | LOCKF_USED_IN_IRQ_READ
LOCKF_ENABLED_IRQ_ALL = LOCKF_ENABLED_IRQ | LOCKF_ENABLED_IRQ_READ
LOCKF_IRQ = LOCKF_USED_IN_IRQ | LOCKF_ENABLED_IRQ  # the write (non-READ) irq bits


def usage_str(bit: int) -> str:
    """The kernel's `usage_str[]` text: `IN-HARDIRQ-W`, `SOFTIRQ-ON-R`, `INITIAL USE`..."""
    if bit == USED:
        return "INITIAL USE"
    if bit == USED_READ:
        return "INITIAL READ USE"
    state = STATE_NAMES[bit >> 2]
    rw = "R" if bit & READ_MASK else "W"
    return f"{state}-ON-{rw}" if bit & DIR_MASK else f"IN-{state}-{rw}"


def state_name(bit: int) -> str:
    """`HARDIRQ`, `SOFTIRQ`, or the `-READ` variants (lockdep's `state_name`)."""
    name = STATE_NAMES[bit >> 2]
    return f"{name}-READ" if bit & READ_MASK else name


def exclusive_bit(new_bit: int) -> int:
    """The bit that conflicts with `new_bit`: same state, other direction, write variant."""
    state = new_bit & ~(READ_MASK | DIR_MASK)
    direction = new_bit & DIR_MASK
    return state | (direction ^ DIR_MASK)


def _usage_char(mask: int, bit: int) -> str:
    enabled = mask & (1 << (bit + DIR_MASK))
    used_in = mask & (1 << bit)
    if enabled:
        return "?" if used_in else "+"
    return "-" if used_in else "."


def usage_chars(mask: int) -> str:
    """The `{+.+.}` string of a class (lockdep's `get_usage_chars`).

    Per state, one character for the write pair and one for the read pair:
    `.` never in that irq nor taken with it enabled, `+` taken with it
    enabled, `-` taken inside that irq, `?` both.

    >>> usage_chars((1 << ENABLED_HARDIRQ) | (1 << ENABLED_SOFTIRQ))
    '+.+.'
    >>> usage_chars(1 << USED_IN_HARDIRQ)
    '-...'
    """
    return "".join(
        _usage_char(mask, bit)
        for bit in (USED_IN_HARDIRQ, USED_IN_HARDIRQ_READ, USED_IN_SOFTIRQ, USED_IN_SOFTIRQ_READ)
    )
