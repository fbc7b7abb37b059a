"""Lockdep's rules of one acquisition and of an irq-state change, with the kernel's names, written once.

What an acquisition does to a task's held stack and chain key, which
acquisitions are validated, which usage bits one sets, how deep a stack
may grow, what an irq-state op does to a task and which held locks it
marks: the checker (`lockdep.checker`, `lockdep.irq`) and every fast path
(`engine.fast_lt`, `engine.fast_capture`, the compiled `.lt` and capture
cores, `jobs.part`, the plugin's tracked locks) decide these the same way only if
they read them from one place.  So every one of them asks this module --
a call, or a table made here -- and none keeps its own copy.  A rule
changed here changes every path's verdict alike (tests/test_rules.py
mutates rules and checks that).

Readers that run per event bind what they need when a run starts
(`limits()`), so a rule read at run start is the rule of the whole run.
"""

from __future__ import annotations

from typing import NamedTuple, Optional, Sequence

from lockcheck import events as E
from lockcheck.lockdep.usage import ENABLED_HARDIRQ, ENABLED_SOFTIRQ, USED, USED_IN_HARDIRQ, USED_IN_SOFTIRQ

#: lockdep's MAX_LOCK_DEPTH: the 48th simultaneously held entry is reported (`__lock_acquire`)
MAX_LOCK_DEPTH = 48

#: the chain key of an empty stack (`INITIAL_CHAIN_KEY`); a key is never this value otherwise
INITIAL_CHAIN_KEY = -1


def limits() -> tuple[int, int]:
    """`(MAX_LOCK_DEPTH, depth a fast path may hold without the checker)`, read when a run starts:
    the acquisition that reaches the limit is reported by the checker, so fast paths stop one short."""
    return MAX_LOCK_DEPTH, MAX_LOCK_DEPTH - 1


def hlock_class(lock: str, subclass: int) -> str:
    """The validation class of `lock` taken with `subclass` (`look_up_lock_class` plus
    `__print_lock_name`'s `/N`): subclass 0 is the lock's own class."""
    return f"{lock}/{subclass}" if subclass else lock


def hlock_classes(lock: str) -> list[str]:
    """Every validation class `lock` may stand for, one per subclass: what `lockdep_unregister_key`
    zaps, and what a property of the lock (its wait types) reaches."""
    return [hlock_class(lock, subclass) for subclass in range(E.MAX_SUBCLASS + 1)]


#: the `/N` a subclass other than 0 adds to its class's name
_SUBCLASS_SUFFIXES = frozenset(str(subclass) for subclass in range(1, E.MAX_SUBCLASS + 1))


def class_lock(cls: str) -> str:
    """The lock a validation class belongs to: `hlock_class` undone (`NAME/N` -> `NAME`, N 1..MAX_SUBCLASS)."""
    base, slash, sub = cls.rpartition("/")
    return base if slash and base and sub in _SUBCLASS_SUFFIXES else cls


def softirq_context_tracked(preempt_rt: bool) -> bool:
    """`lockdep_softirq_enter()`/`_exit()` count `curr->softirq_context` except on PREEMPT_RT
    ("lockdep: Remove softirq accounting on PREEMPT_RT", 5.17), where softirqs run in threads: no
    lock there is softirq-safe, a chain in a softirq is no separate irq context, and the wait
    context in a softirq is the thread's (`task_wait_context()`)."""
    return not preempt_rt


def task_irq_context(hardirq_depth: int, softirq_depth: int) -> int:
    """`task_irq_context()`: 2 in a hardirq handler, 1 in a softirq, 0 in process context (or'ed)."""
    return (2 if hardirq_depth else 0) | (1 if softirq_depth else 0)


def separate_irq_context(top_irq_context: int, irq_context: int) -> bool:
    """`separate_irq_context()`: an acquisition in another irq context than the lock below it
    starts a new chain (the key restarts from INITIAL_CHAIN_KEY)."""
    return top_irq_context != irq_context


def iterate_chain_key(key: int, cls: str, read: int) -> int:
    """`iterate_chain_key()`: the key of a stack one acquisition longer (class and read mode
    hashed in; the C path hashes the same tuple the same way, `_tuplehash.h`)."""
    return hash((key, cls, read))


def validates_chain(trylock: bool, check: bool) -> bool:
    """`validate_chain()`'s guard: a trylock, or a lock taken with `check=0` (lockdep's
    `nocheck`), adds no dependency and is not looked up in the chain cache."""
    return not trylock and check


def prevs_walk_stops(check: bool, trylock: bool) -> bool:
    """`check_prevs_add()`: the walk down the held stack stops after the first checked entry
    that is not a trylock (it added its own dependencies on the locks below it already);
    a trylock's dependencies are recorded, and the walk goes on below it."""
    return check and not trylock


def chain_cacheable(depth: int, limit: int) -> bool:
    """Whether the chain of a stack `depth` deep is cached once validated, under the run's
    depth `limit` (MAX_LOCK_DEPTH, or the plugin's own).  The kernel stops there; deeper
    chains are validated each time (a first-in first-out release of thousands of held locks
    would otherwise cache a new chain for every lock that moves)."""
    return depth < limit


def nest_lock_merges(depth: int, top_cls: str, cls: str, nest: object) -> bool:
    """`__lock_acquire()`'s `nest_lock` merge: the same class as the top entry, taken under
    a nest lock, adds a reference to it instead of a new entry (`mm_take_all_locks()`)."""
    return bool(depth) and nest is not None and top_cls == cls


def mark_usage_hardirqs_off(hardirqs_off: bool, sync: bool) -> bool:
    """`mark_usage()`'s `!hlock->hardirqs_off && !hlock->sync`: a lock_sync() is taken as with
    hardirqs off (no critical section, so no irq-enabled usage); its USED_IN usage stands."""
    return hardirqs_off or sync


def usage_index(read: int, trylock: bool, hardirqs_off: bool) -> int:
    """Where `usage_needs` keeps the mask for an acquisition of this kind."""
    return (1 if read else 0) | (2 if trylock else 0) | (4 if hardirqs_off else 0)


def hardirqs_off(hardirqs_enabled: bool, hardirq_depth: int) -> bool:
    """Whether an acquisition happens with hardirqs off (lockdep's `hlock->hardirqs_off`): they
    are disabled, or the task is in a hardirq handler."""
    return not hardirqs_enabled or hardirq_depth > 0


#: where `usage_needs`' masks for acquisitions with hardirqs off begin (its second half)
HARDIRQS_OFF_NEEDS = usage_index(0, False, True)


def needs_now(needs: Sequence[int], hardirqs_off: bool) -> Sequence[int]:
    """The half of a task's `usage_need` that its acquisitions use now, by (read, trylock)."""
    return needs[HARDIRQS_OFF_NEEDS:] if hardirqs_off else needs[:HARDIRQS_OFF_NEEDS]


def nocheck_usage(read: int) -> int:
    """What a `check=0` acquisition marks: LOCK_USED (or LOCK_USED_READ) only (`mark_usage`)."""
    return 1 << (USED + (1 if read else 0))


def acquire_usage(needs: list[int], read: int, trylock: bool, check: bool, hardirqs_off: bool) -> int:
    """The usage bits an acquisition sets, given its task's `usage_needs`."""
    if check:
        return needs[usage_index(read, trylock, hardirqs_off)]
    return nocheck_usage(read)


def mark_usage_bits(in_hardirq: bool, in_softirq: bool, softirqs_on: bool) -> list[int]:
    """`mark_usage()` for each `usage_index`, in one irq state: USED_IN_{HARD,SOFT}IRQ in a
    handler (not for trylocks), ENABLED_HARDIRQ when taken with hardirqs on (and
    ENABLED_SOFTIRQ if softirqs are on too), and USED; the _READ variants for readers."""
    needs = []
    for index in range(8):
        read = index & 1
        trylock = index & 2
        hardirqs_off = index & 4
        needed = 1 << (USED + read)
        if not trylock:
            if in_hardirq:
                needed |= 1 << (USED_IN_HARDIRQ + read)
            if in_softirq:
                needed |= 1 << (USED_IN_SOFTIRQ + read)
        if not hardirqs_off:
            needed |= 1 << (ENABLED_HARDIRQ + read)
            if softirqs_on and not in_softirq:
                needed |= 1 << (ENABLED_SOFTIRQ + read)
        needs.append(needed)
    return needs


#: `mark_usage_bits` for the eight irq states, by (in hardirq, in softirq, softirqs on)
USAGE_NEEDS = {(h, s, e): mark_usage_bits(h, s, e) for h in (False, True) for s in (False, True)
               for e in (False, True)}

#: a task whose irq state the trace does not tell: USED (or USED_READ) only
USED_ONLY = [nocheck_usage(index & 1) for index in range(8)]


# -- irq-state transitions ------------------------------------------------------------------------

#: the irq-state ops, in the order of `irq_transition_table` (and of the capture core's OP_*)
IRQ_TRANSITION_OPS = (E.IRQS_OFF, E.IRQS_ON, E.SOFTIRQS_OFF, E.SOFTIRQS_ON, E.HARDIRQ_ENTER, E.SOFTIRQ_ENTER,
                      E.HARDIRQ_EXIT, E.SOFTIRQ_EXIT)
#: what an irq-state op leaves besides its change (`IrqTransition.note`): nothing; an exit without its
#: enter (a capture that starts inside a handler: a note, ignored); `irqs-on` inside a hardirq handler
#: (`lockdep_hardirqs_on_prepare()`'s DEBUG_LOCKS_WARN_ON(lockdep_hardirq_context()): a warning)
NOTE_NONE, NOTE_UNMATCHED_EXIT, NOTE_IRQS_ON_IN_HARDIRQ = range(3)


class IrqTransition(NamedTuple):
    """What one irq-state op does to a task (`irq_transition`)."""

    hardirq_step: int  #: added to the hardirq depth (+1 enter, -1 exit)
    softirq_step: int  #: added to the softirq depth
    hardirqs_enabled: bool  #: after the op
    softirqs_enabled: bool
    marks: int  #: the usage bits `mark_held_locks` sets on every checked held lock (_READ for a reader), in bit order
    recorded: bool  #: a real on/off transition, stamped in `curr->irqtrace` (`++trace->irq_events`)
    note: int  #: NOTE_*: what the checker notes or reports besides
    refresh: bool  #: the state `mark_usage_bits` reads (a handler, softirqs on) may change: needs recomputed


def irq_transition(op: str, in_hardirq: bool, in_softirq: bool, hardirqs_enabled: bool,
                   softirqs_enabled: bool) -> Optional[IrqTransition]:
    """An irq-state op in an irq state (in a hardirq / softirq handler, hardirqs / softirqs enabled);
    None: `op` is none.  `lockdep_hardirqs_off()`/`lockdep_softirqs_off()` record an ON -> OFF
    transition only; `lockdep_hardirqs_on()` (`redundant_hardirqs_on` when on already) marks the held
    locks ENABLED_HARDIRQ, then ENABLED_SOFTIRQ when softirqs are on outside a softirq -- except in a
    hardirq handler, where `lockdep_hardirqs_on_prepare()` warns and marks nothing; `lockdep_softirqs_on()`
    (`redundant_softirqs_on`) marks them ENABLED_SOFTIRQ when hardirqs are on, outside any handler;
    `lockdep_hardirq_enter()`/`_exit()` and `lockdep_softirq_enter()`/`_exit()` count the handlers (an
    exit without its enter changes nothing).  The checker (`lockdep.irq`) applies this; the fast paths
    (`fast_held.irq_change`, the compiled cores through `irq_transition_table`) apply it when it
    marks nothing new and notes nothing."""
    hard_step = soft_step = marks = note = 0
    he, se = bool(hardirqs_enabled), bool(softirqs_enabled)
    recorded = False
    if op == E.IRQS_OFF:
        recorded, he = he, False
    elif op == E.IRQS_ON:
        if not he:
            recorded = he = True
            if in_hardirq:
                note = NOTE_IRQS_ON_IN_HARDIRQ
            else:
                marks = 1 << ENABLED_HARDIRQ | (1 << ENABLED_SOFTIRQ if se and not in_softirq else 0)
    elif op == E.SOFTIRQS_OFF:
        recorded, se = se, False
    elif op == E.SOFTIRQS_ON:
        if not se:
            recorded = se = True
            if not in_softirq and hardirqs_enabled and not in_hardirq:
                marks = 1 << ENABLED_SOFTIRQ
    elif op == E.HARDIRQ_ENTER:
        hard_step = 1
    elif op == E.SOFTIRQ_ENTER:
        soft_step = 1
    elif op == E.HARDIRQ_EXIT:
        hard_step, note = (-1, NOTE_NONE) if in_hardirq else (0, NOTE_UNMATCHED_EXIT)
    elif op == E.SOFTIRQ_EXIT:
        soft_step, note = (-1, NOTE_NONE) if in_softirq else (0, NOTE_UNMATCHED_EXIT)
    else:
        return None
    refresh = bool(hard_step or soft_step or se != bool(softirqs_enabled))
    return IrqTransition(hard_step, soft_step, he, se, marks, recorded, note, refresh)


def irq_transitions_by_state() -> dict[tuple, IrqTransition]:
    """`irq_transition` over its whole domain, keyed by its arguments: what the checker and the Python
    fast paths look an op up in, made when a run starts (`IrqValidator.transitions`)."""
    return {(op, hard, soft, he, se): irq_transition(op, hard, soft, he, se)  # type: ignore[misc]
            for op in IRQ_TRANSITION_OPS for hard in (False, True) for soft in (False, True)
            for he in (False, True) for se in (False, True)}


#: `irq_transition_table`'s entry bits (engine/_rules.h keeps the same): the state after, the depth
#: steps, recorded, needs refreshed, the checker's (a note), and the usage bits marked from bit 16 up
IRQT_HE, IRQT_SE, IRQT_HARD_IN, IRQT_HARD_OUT, IRQT_SOFT_IN, IRQT_SOFT_OUT, IRQT_RECORD, IRQT_REFRESH, \
    IRQT_CHECKER = (1 << bit for bit in range(9))
IRQT_MARKS_SHIFT = 16


def irq_transition_table() -> Optional[tuple[int, ...]]:
    """`irq_transition` over its whole domain, for the compiled cores (read at the start of a run):
    entry 16*OP + 8*IN_HARDIRQ + 4*IN_SOFTIRQ + 2*HARDIRQS_ENABLED + SOFTIRQS_ENABLED (OP by
    `IRQ_TRANSITION_OPS`), of IRQT_* bits; None: a transition no entry can carry (a step of more
    than one, a usage bit past USED_READ), then the cores step aside."""
    table = []
    transitions = irq_transitions_by_state()
    for op in IRQ_TRANSITION_OPS:
        for state in range(16):
            t = transitions[(op, bool(state & 8), bool(state & 4), bool(state & 2), bool(state & 1))]
            if t is None or t.hardirq_step not in (-1, 0, 1) or t.softirq_step not in (-1, 0, 1) \
                    or not 0 <= t.marks < 1 << IRQT_MARKS_SHIFT:
                return None
            table.append((IRQT_HE if t.hardirqs_enabled else 0) | (IRQT_SE if t.softirqs_enabled else 0)
                         | {1: IRQT_HARD_IN, -1: IRQT_HARD_OUT, 0: 0}[t.hardirq_step]
                         | {1: IRQT_SOFT_IN, -1: IRQT_SOFT_OUT, 0: 0}[t.softirq_step]
                         | (IRQT_RECORD if t.recorded else 0) | (IRQT_REFRESH if t.refresh else 0)
                         | (IRQT_CHECKER if t.note else 0) | t.marks << IRQT_MARKS_SHIFT)
    return tuple(table)


# -- wait contexts (CONFIG_PROVE_RAW_LOCK_NESTING) ---------------------------------------------

#: `enum lockdep_wait_type` with CONFIG_PROVE_RAW_LOCK_NESTING (a kernel without it folds CONFIG
#: into SPIN and prints SLEEP as 3, MAX as 4: docs/trace-format.md)
LD_WAIT_INV, LD_WAIT_FREE, LD_WAIT_SPIN, LD_WAIT_CONFIG, LD_WAIT_SLEEP, LD_WAIT_MAX = range(6)
#: `enum lockdep_lock_type`
LD_LOCK_NORMAL, LD_LOCK_PERCPU, LD_LOCK_WAIT_OVERRIDE = range(3)


def task_wait_context(hardirq_depth: int, softirq_depth: int, hardirq_threaded: bool) -> int:
    """`task_wait_context()`: what a task may wait on where it runs -- spin in a hardirq handler
    (config when it runs as a thread: `hardirq_threaded`), config in a softirq (always threaded
    on RT), anything (LD_WAIT_MAX) in process context."""
    if hardirq_depth:
        return LD_WAIT_CONFIG if hardirq_threaded else LD_WAIT_SPIN
    if softirq_depth:
        return LD_WAIT_CONFIG
    return LD_WAIT_MAX


def wait_context_checked(inner: int, trylock: bool) -> bool:
    """`check_wait_context()`'s guard: a class of unknown wait type (LD_WAIT_INV) and a trylock are
    not checked; every other acquisition is, `nocheck` (`rcu_read_lock()`) included."""
    return bool(inner) and not trylock


def check_wait_context(curr_inner: int, held: list[tuple[int, int]], outer: int, inner: int) -> int:
    """`check_wait_context()`: 0 when taking a lock of wait types `outer:inner` is valid, else the
    strictest wait context found (what it violates).  `curr_inner` is `task_wait_context()`,
    `held` the `(wait_type_inner, lock_type)` of the locks held in the current irq context,
    bottom up: the context is the smallest inner wait type among them (a larger one, as RCU's
    outer-smaller-than-inner, does not loosen it), reset by a wait-override map; the lock's
    outer wait type (its inner one when it has none) must not exceed it."""
    if not outer:
        outer = inner
    for prev_inner, lock_type in held:
        if prev_inner:
            curr_inner = min(curr_inner, prev_inner)
            if lock_type == LD_LOCK_WAIT_OVERRIDE:
                curr_inner = prev_inner
    return curr_inner if outer > curr_inner else 0


def print_waits(outer: int, inner: int) -> str:
    """The `-{O:I}` the kernel prints after a class name (`print_lock_name()`): outer ?: inner."""
    return f"{outer or inner}:{inner}"


# -- class properties read by the dependency and usage searches ---------------------------------

def instance_order(instance: object) -> tuple:
    """How `cmp=instance` sorts an instance: numbers (`0x` hex too) by value, before any other
    text, which sorts as text (docs/trace-format.md); a lock without an instance sorts first."""
    if instance is None:
        return (0, 0, "")
    text = str(instance)
    try:
        return (1, int(text, 0), "")
    except ValueError:
        return (2, 0, text)


def cmp_fn_orders(cmp: object, subclass: int, prev_instance: object, next_instance: object) -> bool:
    """`class->cmp_fn && class->cmp_fn(prev->instance, next->instance) < 0` of `check_deadlock()` and
    `check_prev_add()`: a held lock of a class with a comparison function, sorting before the one
    taken, is no recursion and adds no dependency.  `lockdep_set_lock_cmp_fn()` sets it on the map's
    subclass-0 class only (`lock->class_cache[0]`), so the subclasses of the class have none."""
    return bool(cmp) and not subclass and instance_order(prev_instance) < instance_order(next_instance)


def percpu_wait_invalid(lock_type: int, wait_inner: int) -> bool:
    """`usage_skip()`'s `DEBUG_LOCKS_WARN_ON(entry->class->wait_type_inner < LD_WAIT_CONFIG)`: a
    `local_lock_t` class whose inner wait type is free or spin (an unknown one, a trace that did
    not say, is not judged)."""
    return lock_type == LD_LOCK_PERCPU and LD_WAIT_INV < wait_inner < LD_WAIT_CONFIG


def usage_skip(lock_type: int, wait_inner: int) -> bool:
    """`usage_skip()`: the irq-usage searches (`check_irq_usage()`, `check_usage_forwards()`,
    `check_usage_backwards()`) pass over a percpu (`local_lock_t`) or wait-override class and every
    path through it -- a local_lock is per CPU, and an override map is no lock; a percpu class
    with a bad inner wait type is searched (after lockdep's warning, `percpu_wait_invalid`)."""
    if lock_type == LD_LOCK_NORMAL:
        return False
    return not percpu_wait_invalid(lock_type, wait_inner)


# -- the boolean rules as the compiled cores read them ----------------------------------------


def compiled_tables() -> tuple[int, int, int, int]:
    """The boolean rules above over their whole domain, as bit masks, read by the compiled cores
    (`engine/_speedups.c`, `python/_tracked.c`) at the start of a run instead of deciding them
    in C: `validates_chain` (bit T: trylock T, check on), `separate_irq_context` (bit 4*TOP+CTX,
    the four irq contexts), `nest_lock_merges` on a non-empty stack (bit 2*NEST+SAME: a nest lock
    given, the top entry's class), and `task_irq_context` (2 bits at 2*(2*HARD+SOFT))."""
    validates = sum(1 << trylock for trylock in (0, 1) if validates_chain(bool(trylock), True))
    separate = sum(1 << (4 * top + ctx) for top in range(4) for ctx in range(4) if separate_irq_context(top, ctx))
    merges = sum(1 << (2 * nest + same) for nest in (0, 1) for same in (0, 1)
                 if nest_lock_merges(1, "A", "A" if same else "B", ("N", None) if nest else None))
    contexts = sum((task_irq_context(hard, soft) & 3) << (2 * (2 * hard + soft)) for hard in (0, 1) for soft in (0, 1))
    return validates, separate, merges, contexts


def usage_rules_as_compiled() -> bool:
    """The compiled cores read a task's hardirqs-off state, the half of its `usage_need` that
    selects and an acquisition's usage index as `_rules.h` writes them (`rules_hardirqs_off`,
    `RULES_HARDIRQS_OFF_NEEDS`, `rules_usage_index`): they run only while `hardirqs_off`,
    `HARDIRQS_OFF_NEEDS` and `usage_index` say the same over the cores' domain."""
    return (HARDIRQS_OFF_NEEDS == 4
            and all(hardirqs_off(enabled, depth) == (not enabled or depth > 0)
                    for enabled in (False, True) for depth in range(8))
            and all(usage_index(read, bool(trylock), bool(off)) == (off << 2 | trylock << 1 | (1 if read else 0))
                    for read in (0, 1, 2) for trylock in (0, 1) for off in (0, 1)))


def chain_key_is_tuple_hash() -> bool:
    """The compiled cores hash a chain key as CPython hashes the tuple (`_tuplehash.h`), which a
    table cannot carry: they run only while `iterate_chain_key` gives that hash."""
    samples = ((INITIAL_CHAIN_KEY, "A", 0), (123456789, "&mm->mmap_lock", 2), (-7, "B/1", 1))
    return all(iterate_chain_key(key, cls, read) == hash((key, cls, read)) for key, cls, read in samples)
