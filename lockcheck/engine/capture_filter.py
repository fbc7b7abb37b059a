"""The compiled filter in front of the capture fast path's Python loop (`fast_capture._ftrace_misses`):
`lockcheck.engine._capturecore.CaptureFilter`, as `fast_lt` puts `_speedups.LineFilter` in front of
its own loop.

The filter applies the common capture lines itself -- an acquisition onto a cached chain, the
release of the innermost lock, `lock_contended`/`lock_acquired`, the lines the reader skips --
exactly as the Python loop would, and hands the loop every other line, numbered as in the file.
It decides no lockdep rule itself: it reads them as tables made here from `rules` when a run
starts (`rule_tables`), and steps aside (None) where a rule is one a table cannot carry, where
the core is not built, or with `LOCKCHECK_PURE=1`.
"""

from __future__ import annotations

import functools
from typing import Iterable, Iterator, Optional

from lockcheck.events import ACQUIRE, RELEASE, WRITE
from lockcheck.engine import fast_lt
from lockcheck.lockdep import rules
from lockcheck.lockdep.tasks import HeldLock, RecentLocks, TaskState
from lockcheck.readers.source import Checking


def _compiled():
    """The compiled filter's type, or None: not built, or not allowed (`fast_lt.compiled_cores_allowed`)."""
    if not fast_lt.compiled_cores_allowed():
        return None
    try:
        from lockcheck.engine._capturecore import CaptureFilter
    except ImportError:
        return None
    return CaptureFilter


def compiled() -> bool:
    """Whether the capture fast path runs its compiled filter here."""
    return _compiled() is not None


def runs() -> bool:
    """Whether a capture read now would run through the compiled filter: built, and lockdep's rules
    as `rules` has them now expressible as its tables (what `numbered` asks)."""
    return _compiled() is not None and rule_tables() is not None


def _usage_table() -> Optional[tuple]:
    """`rules.acquire_usage` with hardirqs on (the view's needs are already its task's for its
    hardirqs-off state), for read 0..2, trylock and check: `(index into the needs, -1)` or
    `(-1, mask)` when the rule reads no need; None: a rule no such table can carry."""
    probe_a = [1 << (3 * i) for i in range(8)]
    probe_b = [1 << (3 * i + 1) for i in range(8)]
    table = []
    for check in (False, True):
        for read in (0, 1, 2):
            for trylock in (False, True):
                a = rules.acquire_usage(probe_a, read, trylock, check, False)
                b = rules.acquire_usage(probe_b, read, trylock, check, False)
                if a in probe_a and probe_a.index(a) < 4 and b == probe_b[probe_a.index(a)]:
                    table.append((probe_a.index(a), -1))
                elif a == b and isinstance(a, int) and 0 <= a < 1 << 62:
                    table.append((-1, a))
                else:
                    return None
    return tuple(table)


def rule_tables() -> Optional[tuple]:
    """lockdep's rules the filter applies, as tables from `rules` now: `validates_chain` with check
    on and off (bit T: trylock T), `separate_irq_context` (`compiled_tables`'s), the usage table,
    `irq_transition_table`; None: not expressible (then the Python loop runs alone)."""
    usage = _usage_table()
    irq = rules.irq_transition_table()
    if usage is None or irq is None:
        return None
    validates = rules.compiled_tables()[0]
    unchecked = sum(1 << trylock for trylock in (0, 1) if rules.validates_chain(bool(trylock), False))
    return validates, unchecked, rules.compiled_tables()[1], usage, irq


def numbered(lines: Iterable[str], caches: tuple, reader, stats, checker, ann, file: str,
             tick_mask: Optional[int], event, view_limit: int, give_bytes=None) -> Optional[Iterator[tuple[int, str]]]:
    """The filter over `lines` (`(lineno, line)` of what the Python loop must handle), or None: it
    cannot run here.  `caches`: the loop's (heads, flag_cache, bodies, views); `ann`: its
    `_Annotated` (or None); `event`: what rebuilds an acquisition's event (`fast_stages._event`);
    `view_limit`: views kept at most (the loop's `_VIEW_LIMIT`); `give_bytes`: `source.Lines.give_bytes`
    of the lines, asked to hand the filter the rest of the file as `(bytes, start, stop)` blocks (it checks
    them itself, and makes a str only of a line it passes on)."""
    core = _compiled()
    if core is None:
        return None
    tables = rule_tables()
    if tables is None:
        return None
    from lockcheck.engine.fast_stages import _View, context_hit
    from lockcheck.readers.ftrace_context import context_transition

    make = (functools.partial, event, file, ACQUIRE, RELEASE, WRITE, _View, HeldLock, TaskState, RecentLocks,
            context_transition, context_hit, view_limit)
    from lockcheck.readers.ftrace_context import read_mode

    # (the source's blocks as `(bytes, start, stop)`, uncopied and unchecked: the filter checks each
    # itself, and gives back one that is not plain ASCII for the source to decode)
    checking = Checking(int)
    numbered = core(lines, caches, reader, stats, checker, ann, make, tables,
                    -1 if tick_mask is None else tick_mask, _irq() + (reader.read_policy is read_mode,),
                    checking.reject)
    checking.lines_read = numbered.lines_read
    if give_bytes is not None:
        give_bytes(checking)
    return numbered


def _irq() -> tuple:
    """What the filter applies an irq-context change with (`fast_held.irq_change`'s names and tables): the
    ops in `irq_transition_table`'s order, `Evidence`, `rules.USAGE_NEEDS`/`USED_ONLY` (`tasks.usage_needs`),
    the annotator's `context_after`, and the read shift of the usage bits the held locks are marked with (then:
    whether the reader's read policy is `read_mode`, a function of its two arguments the filter may ask once)."""
    from lockcheck.kernel.annotations import context_after
    from lockcheck.lockdep.findings import Evidence
    from lockcheck.lockdep.usage import READ_MASK

    return (rules.IRQ_TRANSITION_OPS, Evidence, rules.USAGE_NEEDS, rules.USED_ONLY, context_after, READ_MASK)
