"""What a capture cannot say, resolved between the reader and the checker.

ftrace and perf print `lock_acquire` without its `subclass`, `nest_lock` or
`check` argument, and with one `read` flag for both read modes.  Lockdep
itself had those arguments, and what it did with them is in the same boot's
`/proc/lockdep` (classes, `NAME/N` for subclass N) and `/proc/lockdep_chains`
(every held-lock chain it validated).  `annotate(events, state, rules)` is a
stream transformer that keeps its own per-task view of the held classes and
uses that evidence, or the rules of an annotation file, to fill in what the
trace lacks.  Every change is counted and reported as a note.

The chain oracle
----------------
For every acquisition that is not a trylock and has `check` set, the kernel
looks up the chain key of the held locks of the current irq context plus the
new one (`validate_chain` -> `lookup_chain_cache_add`) and records a new chain
in /proc/lockdep_chains.  The key hashes class and read state only -- not the
irq context, so a chain first seen in process context also covers the same
classes in an interrupt -- and a capture sees a *suffix* of the real held
stack (whatever was taken before tracing began lies below).  So an
acquisition of X with seen stack S is explained by the kernel's state when
`S + [X]` (class names without `#N`) is a suffix of some chain.  Per
acquisition:

1. X's class is already held (lockdep would say "recursive locking"):
   - `S + [X/N]` is a chain suffix for a subclass N that /proc/lockdep lists
     -> `subclass=N` (`mmap_write_lock_nested(.., SINGLE_DEPTH_NESTING)`,
     `spin_lock_nested(&dentry->d_lock, DENTRY_D_LOCK_NESTED)`);
   - else `S + [X]` is a chain suffix (the kernel validated it and did not
     complain): both reads -> the new one is a recursive reader; otherwise
     it was taken with a nest_lock -> `nest=` the nearest held lock below
     X's first entry (`mm_take_all_locks` under `&mm->mmap_lock`);
   - else X is the top of the stack: the kernel merged it into that entry
     under a nest_lock before validating anything -> `nest=` as above.
2. X is not held: `S + [X]` matches -> unchanged; else `S + [X/N]` matches ->
   `subclass=N` (`inode_lock_nested(dir, I_MUTEX_PARENT)`).
3. Nothing matches: the kernel never validated this acquisition.  A class
   that /proc/lockdep shows with no dependency and no usage was taken with
   `check=0` (`rcu_read_lock`, SRCU in 6.1) -> `check=False`; any other
   was a trylock whose `try ` flag the capture lost (6.1 with hash-ptr off
   prints none) -> `trylock=True`.

Annotation rules (`--annotations FILE`, grammars/annotations.lark) apply
first and need no state: `recursive-read C`, `subclass C by address order`
(the k-th lock of class C held at once is subclass k) and `nest C under P`.

Uncertainty
-----------
Without a state, what the trace cannot say is still unknown: the annotator
remembers, per class, why a finding about it could be explained by an
annotation (a same-class nesting the capture shows without subclass, a read
acquisition whose READ/RREAD mode was guessed from the name, a capture with
no trylock at all), and `mark_uncertain()` tags the findings with that
reason after the run.  Only capture formats (ftrace, perf) are concerned:
a `.lt` trace carries its annotations.
"""

from __future__ import annotations

import functools
import re
from collections import Counter
from dataclasses import dataclass, field
from typing import Iterable, Iterator, Optional

from lockcheck import events as E
from lockcheck.lockdep import findings as F
from lockcheck.events import Event, MAX_SUBCLASS
from lockcheck.lockdep.findings import Finding
from lockcheck.kernel.state import LockdepState, split_class_name
from lockcheck.util.wording import count as plural

# -- rules ------------------------------------------------------------------------


@dataclass
class AnnotationRules:
    """The annotation rules of an annotation file, by class (origins are `FILE:LINE`)."""

    nest_under: dict[str, tuple[str, str]] = field(default_factory=dict)  #: C -> (P, origin)
    subclass_by_address: dict[str, str] = field(default_factory=dict)  #: C -> origin
    recursive_read: dict[str, str] = field(default_factory=dict)  #: C -> origin
    #: `no-check C`: C -> origin; `no-check like "P"`: P -> origin (captures only: see `unchecked`)
    no_check: dict[str, str] = field(default_factory=dict)
    no_check_like: dict[str, str] = field(default_factory=dict)
    #: statements of the file that are not annotation rules (a declared order)
    other_statements: int = 0

    @property
    def empty(self) -> bool:
        """No rule that applies to every trace (the no-check rules concern captures only)."""
        return not (self.nest_under or self.subclass_by_address or self.recursive_read)

    @classmethod
    def from_order(cls, order) -> "AnnotationRules":
        """The rules of a parsed `lockcheck.order.OrderFile` (the grammar and parser are shared)."""
        rules = cls()
        for child, parent, line in order.nest_under:
            rules.nest_under[child] = (parent, f"{order.file}:{line}")
        for name, line in order.subclass_by_address.items():
            rules.subclass_by_address[name] = f"{order.file}:{line}"
        for name, line in order.recursive_read.items():
            rules.recursive_read[name] = f"{order.file}:{line}"
        for name, line in order.no_check.items():
            rules.no_check[name] = f"{order.file}:{line}"
        for name, line in order.no_check_like.items():
            rules.no_check_like[name] = f"{order.file}:{line}"
        rules.other_statements = len(order.edges) + len(order.pseudo) + len(order.nestable)
        return rules

    @classmethod
    def parse(cls, text: str, file: str = "annotations") -> "AnnotationRules":
        from lockcheck.lockdep.order import parse_order

        return cls.from_order(parse_order(text, file))

    @classmethod
    def load(cls, path: str) -> "AnnotationRules":
        from lockcheck.lockdep.order import load_order

        return cls.from_order(load_order(path))

    @classmethod
    def builtin(cls) -> "AnnotationRules":
        """lockcheck's own rules for Linux kernel captures (`lockcheck/kernel/kernel.annotations`)."""
        from importlib import resources

        text = resources.files("lockcheck.kernel").joinpath(BUILTIN_FILE).read_text(encoding="utf-8")
        return cls.parse(text, f"<built-in {BUILTIN_FILE}>")

    def merge(self, other: "AnnotationRules") -> "AnnotationRules":
        """These rules, then OTHER's (a later file overrides an earlier one for the same class)."""
        merged = AnnotationRules()
        for name in ("nest_under", "subclass_by_address", "recursive_read", "no_check", "no_check_like"):
            getattr(merged, name).update(getattr(self, name))
            getattr(merged, name).update(getattr(other, name))
        merged.other_statements = self.other_statements + other.other_statements
        return merged

    def unchecked(self, lock: str) -> Optional[str]:
        """The origin of a no-check rule naming LOCK, or None.

        >>> rules = AnnotationRules(no_check_like={"*srcu": "f:2"})
        >>> rules.unchecked("&fsnotify_mark_srcu"), rules.unchecked("&ssp->srcu_cb_mutex")
        ('f:2', None)
        """
        cache = self.__dict__.setdefault("_unchecked", {})
        if lock in cache:
            return cache[lock]
        origin = self.no_check.get(lock)
        if origin is None:
            for pattern, where in self.no_check_like.items():
                if _like(pattern).fullmatch(lock):
                    origin = where
                    break
        cache[lock] = origin
        return origin


#: the built-in rules' file, shipped in the package (documented in docs/annotations.md)
BUILTIN_FILE = "kernel.annotations"
#: an `Annotator`'s rules when they are the built-in ones, not read yet (`Annotator.rules` reads them).
#: They are no-check rules only, which concern captures only (tests/test_startup.py holds the
#: file to that), so until a capture needs them they are known to be `empty` with no statement
#: of another kind: nothing needs to parse them for a `.lt` trace.
BUILTIN_RULES = "<built-in rules>"


@functools.lru_cache(maxsize=256)
def _like(pattern: str) -> "re.Pattern[str]":
    """A `no-check like` pattern as a regex: `*` is any run of characters, everything else literal."""
    return re.compile(".*".join(re.escape(part) for part in pattern.split("*")), re.DOTALL)


@dataclass
class AnnotationOptions:
    """The command-line options that make an Annotator (`check`, `graph` and `diff` share them)."""

    lockdep_state: list[str] = field(default_factory=list)
    annotations: Optional[str] = None
    builtin: bool = True

    def rules(self) -> AnnotationRules:
        rules = AnnotationRules.builtin() if self.builtin else AnnotationRules()
        if self.annotations:
            rules = rules.merge(AnnotationRules.load(self.annotations))
        return rules

    def annotators(self) -> "Annotators":
        """The annotators of a run, before its inputs are known (`Annotators.add_boots` adds the boots')."""
        return Annotators(self.annotator())

    def annotator(self, extra_state: Optional[LockdepState] = None) -> "Annotator":
        """An Annotator with these rules and state (EXTRA_STATE: a boot directory's own, used instead)."""
        state = extra_state
        if state is None and self.lockdep_state:
            from lockcheck.kernel import state as kstate

            state = kstate.load(*self.lockdep_state)
        # the built-in rules alone are parsed only if used: a plain `.lt` check never needs them
        # (they concern captures only) and their parser is most of a check's start-up
        rules = self.rules() if self.annotations or not self.builtin else BUILTIN_RULES
        return Annotator(state, rules)


# -- the kernel's state, indexed ---------------------------------------------------


def state_key(name: str) -> str:
    """A /proc class name as the trace can know it: `#N` dropped, `/S` kept."""
    base, _, sub = split_class_name(name)
    return f"{base}/{sub}" if sub else base


class StateIndex:
    """What the annotator asks of a LockdepState: chain suffixes, subclasses, unvalidated classes."""

    def __init__(self, state: LockdepState) -> None:
        self.files = list(state.files)
        self.suffixes: set[tuple[str, ...]] = set()
        for chain in state.chains:
            names = tuple(state_key(name) for name in chain.names)
            for i in range(len(names)):
                self.suffixes.add(names[i:])
        #: base name -> subclasses > 0 that /proc/lockdep lists, ascending
        subs: dict[str, set[int]] = {}
        usage: dict[str, bool] = {}
        for cls in state.classes:
            base, _, sub = split_class_name(cls.name)
            if sub:
                subs.setdefault(base, set()).add(sub)
            usage[base] = usage.get(base, False) or cls.usage.strip(".") != ""
        self.subclasses = {base: sorted(values) for base, values in subs.items()}
        in_deps: set[str] = set()
        for dep in state.edges:
            in_deps.add(split_class_name(dep.before_name)[0])
            in_deps.add(split_class_name(dep.after_name)[0])
        #: classes lockdep registered but never validated: no dependency, no irq usage (check=0 maps)
        self.unvalidated = {base for base, used in usage.items() if not used and base not in in_deps}
        self.has_chains = bool(state.chains)

    def explains(self, stack: tuple[str, ...]) -> bool:
        return stack in self.suffixes


# -- the transformer ----------------------------------------------------------------

#: why a repeated class is still reported although a chain of the state contains it
UNPROVEN_CHAIN = ("{lock} was taken while held and /proc/lockdep_chains has that chain, but lockdep adds a "
                  "chain before validating it, so the chain of a report is there too: without "
                  "/proc/lockdep_stats (debug_locks) or the boot's dmesg it cannot be told whether the kernel "
                  "accepted it (a nest_lock) or reported it")

#: held entry fields
_KEY, _LOCK, _INSTANCE, _CTX, _READ = range(5)


#: how long before the kernel's report (dmesg timestamp, seconds) the state stops being trusted:
#: for every acquisition, and for the reporting task's acquisitions of the reported lock
REPORT_SLACK, REPORT_TASK_SLACK = 0.1, 1.0

#: what the state is worth (`Annotator.validity`)
FULL = "full"  #: lockdep stayed on (debug_locks: 1, or a kernel log from the boot on without a report)
UNTIL_REPORT = "until-report"  #: lockdep reported and turned off: trusted up to that report
NONE = "none"  #: lockdep turned off at a point the inputs do not show
UNKNOWN = "unknown"  #: no /proc/lockdep_stats, no whole kernel log: assumed on, but no chain proves acceptance

#: where the annotations of an acquisition came from (`Annotator.sources`; STATE_CHANGED counts
#: those of "state" it changed, the others it confirmed as captured)
SOURCES = ("capture", "state", "rule", "none")
STATE_CHANGED = "state_changed"


class Annotator:
    """Per-task held classes and the resolutions made; `annotate()` runs one over a stream."""

    def __init__(self, state: Optional[LockdepState] = None,
                 rules: "Optional[AnnotationRules | str]" = None) -> None:
        self.index = StateIndex(state) if state is not None and state.chains else None
        self.state = state
        self.state_files = ", ".join(state.files) if state is not None else ""
        #: the rules, or BUILTIN_RULES until they are first needed (`rules`)
        self._rules = rules or AnnotationRules()
        #: class -> whether any rule names it (`_apply_rules`)
        self._ruled: dict[str, bool] = {}
        #: set by the session when the current input is a capture (ftrace, perf)
        self.capture = False
        self.held: dict[str, list[list]] = {}
        self.ctx: dict[str, int] = {}
        self.cpu: dict[str, Optional[int]] = {}
        #: (what, class, detail) -> count of acquisitions changed
        self.changes: Counter = Counter()
        #: class -> why a finding about it may be explained by a missing annotation
        self.doubts: dict[str, list[str]] = {}
        #: capture file -> [acquisitions, trylocks]
        self.tries: dict[str, list[int]] = {}
        #: acquisitions of captures by where their annotations came from (SOURCES)
        self.sources: Counter = Counter()
        self.report = state.report if state is not None else None
        self.validity = self._validity(state) if self.index is not None else NONE
        #: a report the capture cannot be cut at (a log without time stamps that lost its task or
        #: lock line): a repeated class in a chain may be that report, as when nothing is known
        report = self.report
        self.unlocatable = (self.validity == UNTIL_REPORT and report is not None and report.ts is None
                            and (report.pid is None or report.lock is None))
        #: the state is in use now (False from the kernel's report on)
        self.trusted = self.validity in (FULL, UNKNOWN, UNTIL_REPORT)
        #: file -> first line checked without the state (the kernel's report, or the file's start)
        self.untrusted_from: dict[str, int] = {}
        #: where the state stopped being used: (file, line, ts) of the first event after the cut
        self.cut: Optional[tuple[str, int, Optional[float]]] = None

    @property
    def rules(self) -> AnnotationRules:
        """The annotation rules (the built-in ones are read here, when first asked for)."""
        rules = self._rules
        if rules is BUILTIN_RULES:
            rules = self._rules = AnnotationRules.builtin()
        return rules  # type: ignore[return-value]

    def _rules_empty(self) -> bool:
        """`rules.empty`, without reading the built-in rules (no-check rules only: empty)."""
        return self._rules is BUILTIN_RULES or self.rules.empty

    @staticmethod
    def _validity(state: LockdepState) -> str:
        """How far a state's chains can be trusted (see docs/annotations.md)."""
        if state.report is not None:
            return UNTIL_REPORT
        if state.debug_locks == 0:
            return NONE
        if state.debug_locks == 1 or state.log_from_boot:
            return FULL
        return UNKNOWN

    def start_trace(self) -> None:
        """Another trace file begins: its tasks hold nothing yet (what was learnt carries over)."""
        self.held.clear()
        self.ctx.clear()
        self.cpu.clear()

    def open_trace(self, module) -> None:
        """A trace file of format MODULE begins (`ReadContext.on_open`): captures (ftrace, perf)
        are what the state and the no-check rules are for."""
        self.start_trace()
        self.capture = bool(getattr(module, "CAPTURE", False))

    # -- stream ---------------------------------------------------------------
    def transform(self, module, events: Iterable[Event]) -> Iterable[Event]:
        """The per-file hook of `lockcheck.readers.ReadContext`: only captures, or
        traces with rules or a lockdep state to apply, go through `run`."""
        if self.index is None and self._rules_empty() and not getattr(module, "CAPTURE", False):
            return events
        return self.run(events)

    def run(self, events: Iterable[Event]) -> Iterator[Event]:
        held_of = self.held
        idle = self.index is None and self.rules.empty  # only captures need watching then
        for ev in events:
            op = ev.op
            if idle and not self.capture and op != E.RUN:
                yield ev
                continue
            if op is E.ACQUIRE or op == E.ACQUIRE:
                held = held_of.get(ev.task)
                if held is None:
                    held = held_of[ev.task] = []
                if ev.cpu is not None:
                    self.cpu[ev.task] = ev.cpu
                if self.trusted and self.validity == UNTIL_REPORT:
                    self._check_cut(ev)
                self._acquire(ev, held)
            elif op == E.RELEASE:
                held = held_of.get(ev.task)
                if held:
                    self._release(ev, held)
            elif op in E.IRQ_OPS:
                self._irq(ev)
            elif op == E.LOST_EVENTS:
                for task, cpu in self.cpu.items():
                    if cpu == ev.cpu:
                        held_of.pop(task, None)
                        self.ctx.pop(task, None)
            elif op == E.RUN:  # `#lockcheck-run` in a .lt file: a file start inside the file
                self.start_trace()
                self.capture = ev.trylock
            yield ev

    def _check_cut(self, ev: Event) -> None:
        """Stop trusting the state at the kernel's report: lockdep recorded nothing after it.

        The report's acquisition itself precedes its dmesg line by the time the
        kernel takes to print it, so the cut comes REPORT_SLACK seconds early
        for every event, and REPORT_TASK_SLACK early for the reporting task's
        acquisitions of the reported lock.  A log without timestamps cuts at
        the reporting task's first acquisition of that lock.
        """
        report = self.report
        assert report is not None
        ts = ev.ts
        mine = (report.pid is not None and ev.task == str(report.pid) and report.lock is not None
                and ev.lock == split_class_name(report.lock)[0])
        if report.ts is not None and ts is not None:
            cut = ts >= report.ts - REPORT_SLACK or (mine and ts >= report.ts - REPORT_TASK_SLACK)
        else:
            cut = mine
        if cut:
            self._stop_trusting(ev)

    def _stop_trusting(self, ev: Event) -> None:
        """From EV on, the state is not used (lockdep was, or may have been, off)."""
        self.trusted = False
        self.cut = (ev.file, ev.line, ev.ts)
        self.untrusted_from.setdefault(ev.file, ev.line)

    def _irq(self, ev: Event) -> None:
        ctx = self.ctx.get(ev.task, 0)
        op = ev.op
        if op == E.HARDIRQ_ENTER:
            ctx += 0x100
        elif op == E.HARDIRQ_EXIT:
            ctx = max(ctx - 0x100, 0)
        elif op == E.SOFTIRQ_ENTER:
            ctx += 1
        elif op == E.SOFTIRQ_EXIT:
            ctx = max(ctx - 1, 0) if ctx & 0xFF else ctx
        self.ctx[ev.task] = ctx

    def _release(self, ev: Event, held: list) -> None:
        lock, instance = ev.lock, ev.instance
        for i in range(len(held) - 1, -1, -1):
            entry = held[i]
            if entry[_LOCK] == lock and (entry[_INSTANCE] == instance or len(entry) > 5 and entry[5]):
                if len(entry) > 5 and entry[5]:  # a nest-merged entry: one reference less
                    entry[5] -= 1
                    if entry[5]:
                        return
                del held[i]
                return

    def _stack(self, held: list, ctx: int) -> list:
        """The held entries of the current irq context (the kernel's chain), outermost first."""
        i = len(held)
        while i and held[i - 1][_CTX] == ctx:
            i -= 1
        return held[i:]

    def _acquire(self, ev: Event, held: list) -> None:
        lock = ev.lock
        ctx = self.ctx.get(ev.task, 0)
        if self.capture:
            counts = self.tries.get(ev.file)
            if counts is None:
                counts = self.tries[ev.file] = [0, 0]
            counts[0] += 1
            if ev.trylock:
                counts[1] += 1
        if ev.exact:  # lockdep's own arguments came with the capture: nothing to infer
            self.sources["capture"] += 1
            self._push(ev, held, ctx)
            return
        same = [entry for entry in held if entry[_KEY] == lock]
        ruled = self._apply_rules(ev, held, same)
        # the kernel's state, where it is trusted
        use_state = self.index is not None and self.trusted
        if use_state and ev.check and ev.subclass == 0 and (ev.nest is None or not same):
            before = (ev.subclass, ev.nest, ev.mode, ev.trylock, ev.check)
            self._resolve(ev, held, ctx, same)
            if self.capture and (ev.subclass, ev.nest, ev.mode, ev.trylock, ev.check) != before:
                self.sources[STATE_CHANGED] += 1
        if self.capture:
            self.sources["rule" if ruled else "state" if use_state else "none"] += 1
            if not use_state:
                if self.index is not None and ev.file not in self.untrusted_from:
                    self.untrusted_from[ev.file] = ev.line
                self._doubt(ev, same)
        self._push(ev, held, ctx)

    def _apply_rules(self, ev: Event, held: list, same: list) -> bool:
        """The annotation rules (`--annotations`, built-in); whether one changed the acquisition."""
        rules = self.rules
        lock = ev.lock
        ruled = self._ruled.get(lock)
        if ruled is None:
            ruled = self._ruled[lock] = (rules.unchecked(lock) is not None or lock in rules.recursive_read
                                         or lock in rules.subclass_by_address or lock in rules.nest_under)
        if not ruled:  # most classes: no rule names them (one lookup instead of four)
            return False
        changed = False
        if self.capture and ev.check:
            origin = rules.unchecked(lock)
            if origin is not None:
                ev.check = False
                self.changes[("check0", lock, "rule " + origin)] += 1
                changed = True
        if ev.mode == E.READ and lock in rules.recursive_read:
            ev.mode = E.RREAD
            self.changes[("rread", lock, "rule " + rules.recursive_read[lock])] += 1
            changed = True
        if ev.subclass == 0 and ev.nest is None:
            if same and lock in rules.subclass_by_address:
                ev.subclass = min(sum(1 for entry in held if entry[_LOCK] == lock), MAX_SUBCLASS)
                self.changes[("subclass", lock, f"{ev.subclass} by rule {rules.subclass_by_address[lock]}")] += 1
                changed = True
            elif lock in rules.nest_under:
                parent = rules.nest_under[lock][0]
                for entry in reversed(held):
                    if entry[_LOCK] == parent:
                        ev.nest = (parent, entry[_INSTANCE])
                        if same:
                            self.changes[("nest", lock, f"{parent} by rule {rules.nest_under[lock][1]}")] += 1
                            changed = True
                        break
        return changed

    def _push(self, ev: Event, held: list, ctx: int) -> None:
        key = f"{ev.lock}/{ev.subclass}" if ev.subclass else ev.lock
        if held and ev.nest is not None:
            top = held[-1]
            if top[_KEY] == key and top[_CTX] == ctx:  # merged into the top entry (references)
                if len(top) == 5:
                    top.append(1)
                top[5] = (top[5] or 1) + 1
                return
        held.append([key, ev.lock, ev.instance, ctx, ev.mode])

    def _resolve(self, ev: Event, held: list, ctx: int, same: list) -> None:
        if ev.trylock or not ev.check:
            return
        index = self.index
        lock = ev.lock
        stack = tuple(entry[_KEY] for entry in self._stack(held, ctx))
        subs = index.subclasses.get(lock, ())
        if same and ev.mode == E.RREAD and all(entry[_READ] for entry in same):
            same = []  # read-after-read of a recursive reader: lockdep's check_deadlock lets it pass
        if same:
            for sub in subs:
                if index.explains(stack + (f"{lock}/{sub}",)):
                    ev.subclass = sub
                    self.changes[("subclass", lock, str(sub))] += 1
                    return
            if index.explains(stack + (lock,)):
                if self.validity == UNKNOWN or self.unlocatable:
                    # lockdep adds a chain to its cache *before* validating it
                    # (validate_chain -> lookup_chain_cache_add -> check_deadlock), so
                    # the chain it reported is in the dump too: only a lockdep that
                    # stayed on proves this one was accepted
                    # -- and if it was the report, lockdep recorded nothing after it
                    self._add_doubt(lock, UNPROVEN_CHAIN.format(lock=lock))
                    self._stop_trusting(ev)
                    return
                if ev.mode and all(entry[_READ] for entry in same):
                    if ev.mode != E.RREAD:
                        ev.mode = E.RREAD
                        self.changes[("rread", lock, "read-after-read the kernel accepted")] += 1
                    return
                self._nest(ev, held, same)
                return
            if stack and stack[-1] == lock and not self._no_trylock_yet(ev):
                # the kernel merged it into the top entry under a nest_lock before validating a chain;
                # in a capture that lost its `try ` flags the same silence means a trylock (below)
                self._nest(ev, held, same)
                return
        else:
            if index.explains(stack + (lock,)):
                return
            for sub in subs:
                if index.explains(stack + (f"{lock}/{sub}",)):
                    ev.subclass = sub
                    self.changes[("subclass", lock, str(sub))] += 1
                    return
        if self._revise(ev, held, ctx, same, subs):
            return
        if lock in index.unvalidated:
            ev.check = False
            self.changes[("check0", lock, "")] += 1
        else:
            ev.trylock = True
            self.changes[("trylock", lock, "")] += 1

    def _no_trylock_yet(self, ev: Event) -> bool:
        counts = self.tries.get(ev.file)
        return counts is not None and counts[1] == 0

    def _revise(self, ev: Event, held: list, ctx: int, same: list, subs) -> bool:
        """No chain explains the acquisition: maybe a held lock had another subclass.

        An earlier acquisition that matched a chain as subclass 0 may really have
        been `NAME/N` (`[sb_writers, &type->i_mutex_dir_key]` is a chain, and so is
        `[sb_writers, &type->i_mutex_dir_key/1, &sb->s_type->i_mutex_key]`): try one
        held entry of this irq context at a time with another subclass, nearest first,
        and keep the first reading that explains this acquisition.  The checker
        already took that entry as it was; only later chains are matched better.
        """
        index = self.index
        entries = self._stack(held, ctx)
        lock = ev.lock
        tails = [lock] if not same else []
        tails += [f"{lock}/{sub}" for sub in subs]
        keys = [entry[_KEY] for entry in entries]
        for pos in range(len(entries) - 1, -1, -1):
            entry = entries[pos]
            alternatives = [entry[_LOCK]] + [f"{entry[_LOCK]}/{sub}" for sub in index.subclasses.get(entry[_LOCK], ())]
            for alt in alternatives:
                if alt == entry[_KEY]:
                    continue
                trial = tuple(keys[:pos] + [alt] + keys[pos + 1:])
                for tail in tails:
                    if index.explains(trial + (tail,)):
                        entry[_KEY] = alt
                        self.changes[("revised", entry[_LOCK], alt)] += 1
                        if tail != lock:
                            ev.subclass = int(tail.rpartition("/")[2])
                            self.changes[("subclass", lock, str(ev.subclass))] += 1
                        return True
        return False

    def _nest(self, ev: Event, held: list, same: list) -> None:
        """nest_lock: the nearest held lock below the first entry of the class."""
        first = held.index(same[0])
        for entry in reversed(held[:first]):
            if entry[_LOCK] != ev.lock and entry[_READ] != E.RREAD:
                ev.nest = (entry[_LOCK], entry[_INSTANCE])
                self.changes[("nest", ev.lock, entry[_KEY])] += 1
                return
        # nothing serialises it that the trace shows (taken before the capture): a recursive hold
        self.changes[("unexplained", ev.lock, "")] += 1

    def _doubt(self, ev: Event, same: list) -> None:
        lock = ev.lock
        reasons = self.doubts.get(lock)
        if reasons is not None and len(reasons) >= 3:
            return
        if same and ev.subclass == 0 and ev.nest is None \
                and not (ev.mode == E.RREAD and all(e[_READ] for e in same)):
            self._add_doubt(lock, f"the capture cannot show subclass or nest_lock annotations, and {lock} was "
                                  "taken while held: a *_nested() or nest_lock annotation may explain it "
                                  "(give --lockdep-state or an annotation rule)")
        elif ev.mode and lock not in self.rules.recursive_read:
            mode = "recursive reads" if ev.mode == E.RREAD else "plain reads"
            self._add_doubt(lock, f"the capture does not tell read from recursive-read: read acquisitions of "
                                  f"{lock} were taken as {mode} by name (give --lockdep-state or a "
                                  "recursive-read rule)")

    def _add_doubt(self, lock: str, reason: str) -> None:
        reasons = self.doubts.setdefault(lock, [])
        kind = reason[:20]
        if not any(r[:20] == kind for r in reasons):
            reasons.append(reason)

    # -- after the run --------------------------------------------------------
    def lost_try_files(self) -> list[str]:
        """Captures with many acquisitions and not one trylock: their `try ` flags were lost."""
        return [file for file, (n, tries) in self.tries.items() if n >= 1000 and tries == 0]

    def mark_uncertain(self, findings: list[Finding]) -> int:
        """Tag findings an annotation could explain with the reason; how many.

        Only what was checked without a trusted state can be uncertain (the
        doubts are recorded there).  A finding the kernel's own report made
        too is certain: it gets `details["kernel_report"]` instead.
        """
        lost = self.lost_try_files()
        marked = 0
        for finding in findings:
            if finding.uncertain is not None or finding.kind in (F.UNLOCK_IMBALANCE, F.ORDER_VIOLATION):
                continue
            if self._kernel_reported(finding):
                finding.details["kernel_report"] = self.report.location  # type: ignore[union-attr]
                continue
            reasons = []
            names = list(finding.cycle) if finding.cycle else [n for n in (finding.lock, finding.held) if n]
            for name in names:
                base = name.rpartition("/")[0] if name.rpartition("/")[2].isdigit() else name
                for reason in self.doubts.get(base, ()):
                    if reason not in reasons:
                        reasons.append(reason)
            if lost and self._stateless(finding) and finding.kind in (F.CIRCULAR, F.RECURSIVE, F.INCONSISTENT,
                                                                      F.IRQ_INVERSION):
                reasons.append(f"{', '.join(lost)} has no trylock at all: the capture lost the `try ` flag "
                               "(6.1 with hash-ptr off prints none), so trylocks look like blocking acquisitions")
            if reasons:
                finding.uncertain = "; ".join(reasons)
                marked += 1
        return marked

    def _stateless(self, finding: Finding) -> bool:
        """Whether a finding was made where the state was not used."""
        if self.index is None:
            return True
        file, _, line = finding.location.rpartition(":")
        start = self.untrusted_from.get(file)
        return start is not None and line.isdigit() and int(line) >= start

    def _kernel_reported(self, finding: Finding) -> bool:
        """Whether the kernel's own report (from the boot's log) is this finding: same kind and lock."""
        report = self.report
        if report is None or report.lock is None or finding.message.lower() != report.title.lower():
            return False
        mine, theirs = split_class_name(finding.lock), split_class_name(report.lock)
        return (mine[0], mine[2]) == (theirs[0], theirs[2])

    def notes(self) -> list[str]:
        out = self._validity_notes()
        source = "/proc/lockdep_chains"
        for (what, lock, detail), count in sorted(self.changes.items(), key=lambda kv: (-kv[1], kv[0])):
            acq = f"{count} acquisition{'s' if count != 1 else ''} of {lock}"
            if what == "subclass":
                how = detail if " by rule " in detail else f"{detail} from {source}"
                out.append(f"{acq} given subclass {how}")
            elif what == "nest":
                how = detail if " by rule " in detail else f"{detail} (a repeated class the kernel accepted, {source})"
                out.append(f"{acq} given nest_lock {how}")
            elif what == "rread":
                out.append(f"{acq} taken as recursive reads ({detail})")
            elif what == "trylock":
                out.append(f"{acq} taken as trylocks: {source} has no chain for them, so the kernel did not "
                           "validate them (a `try ` flag the capture lost)")
            elif what == "check0" and detail:
                out.append(f"{acq} taken without validation (check=0) by {detail}")
            elif what == "check0":
                out.append(f"{acq} taken without validation (check=0): /proc/lockdep shows the class with no "
                           "dependency and no usage")
            elif what == "revised":
                out.append(f"{count} held {lock} taken as {detail} afterwards: only a chain of {source} with "
                           f"{detail} explains what was acquired on top of it")
            elif what == "unexplained":
                out.append(f"{acq} repeat a held class with nothing held below that could be its nest_lock")
        if self._rules is not BUILTIN_RULES and self.rules.other_statements:
            out.append(f"the annotation file also declares {plural(self.rules.other_statements, 'lock order')}; "
                       "give it to --order to enforce them")
        counts = self.source_counts()
        if counts:
            changed = counts.get(STATE_CHANGED, 0)
            labels = (("capture", "from the capture (lock_acquire arguments)"),
                      ("state", f"from the kernel's state ({changed} changed by it)"),
                      ("rule", "by rule"), ("none", "left as captured"))
            parts = [f"{counts[key]} {label}" for key, label in labels if counts.get(key)]
            out.append(f"annotations of {plural(counts['acquisitions'], 'captured acquisition')}: "
                       f"{', '.join(parts)}")
        return out

    def source_counts(self) -> dict[str, int]:
        """Where the annotations of the captured acquisitions came from: `acquisitions` in all,
        then per SOURCES (`capture`, `state`, `rule`, `none`) and `state_changed`; {} without any."""
        return source_counts([self.sources])

    def _validity_notes(self) -> list[str]:
        """How far the state was trusted, and why."""
        state = self.state
        if self.index is None or state is None:
            return []
        if self.validity == UNTIL_REPORT:
            report = self.report
            assert report is not None
            when = f" [{report.ts:12.6f}]" if report.ts is not None else ""
            by = f" by {report.task}" if report.task else ""
            text = (f"the kernel reported '{report.title}'{by} at {report.location}{when} and turned lockdep "
                    f"off: lockdep recorded no chain after it, so {', '.join(state.files)} ")
            if self.cut is None:
                return [text + "was used for the whole capture (it ends before the report)"]
            return [text + f"was used up to {self.cut[0]}:{self.cut[1]} only; later acquisitions were checked "
                           "without it"]
        if self.validity == NONE:
            where = state.stats_file or "the state"
            return [f"lockdep turned itself off in that boot (debug_locks: 0 in {where}) and no kernel log "
                    f"says when: {', '.join(state.files)} was not used (give the boot's dmesg)"]
        if self.validity == UNKNOWN:
            if state.log_file is not None:
                why = (f"no /proc/lockdep_stats came with the state and {state.log_file} does not go back to "
                       "the boot (no 'Linux version' line: a report may have scrolled out)")
            else:
                why = "no /proc/lockdep_stats or kernel log came with the state"
            text = (f"{why}: lockdep is assumed to have "
                    "stayed on, but a repeated class in a chain is not taken as accepted (lockdep adds a chain "
                    "before validating it)")
            if self.cut is not None:
                text += (f"; the first such repeat, at {self.cut[0]}:{self.cut[1]}, may have been a report that "
                         "turned lockdep off, so the state was not used after it")
            return [text]
        return []



class Annotators:
    """The Annotator of each input: one per boot directory (its own state), one for all the rest.

    Stands in for a single Annotator in a run (`open_trace`, `transform`,
    `mark_uncertain`, `notes`): the file being opened picks the annotator
    that its events go through, and a finding is marked by the annotator of
    the file it was found in.
    """

    def __init__(self, default: Annotator) -> None:
        self.default = default
        self.current = default
        self.by_file: dict[str, Annotator] = {}
        self.boots: list[tuple[object, Annotator]] = []

    @property
    def rules(self) -> AnnotationRules:
        return self.default.rules

    def add_boots(self, traces: list, options: AnnotationOptions) -> None:
        """An annotator for each boot among TRACES (expanded `lockcheck.readers.inputs.Input`s)."""
        from lockcheck.kernel import state as kstate
        from lockcheck.kernel.boot import boots_of

        for boot in boots_of(traces):
            self.add(boot, options.annotator(kstate.load(*boot.state_files)))

    def add(self, boot, annotator: Annotator) -> None:
        """A boot (`lockcheck.kernel.boot.Boot`) whose traces go through ANNOTATOR."""
        self.boots.append((boot, annotator))
        for path in boot.traces:
            self.by_file[path] = annotator

    def open_trace(self, name: str, module) -> None:
        self.current = self.by_file.get(name, self.default)
        self.current.open_trace(module)

    def transform(self, module, events: Iterable[Event]) -> Iterable[Event]:
        return self.current.transform(module, events)

    def mark_uncertain(self, findings: list[Finding]) -> int:
        groups: dict[int, tuple[Annotator, list[Finding]]] = {}
        for finding in findings:
            annotator = self.by_file.get(finding.location.rpartition(":")[0], self.default)
            groups.setdefault(id(annotator), (annotator, []))[1].append(finding)
        return sum(annotator.mark_uncertain(group) for annotator, group in groups.values())

    @staticmethod
    def fold_kernel_reports(findings: list[Finding]) -> list[Finding]:
        """FINDINGS without the capture's copies of a report the kernel log also gave.

        A boot's kernel log is read as an input too: its lockdep report is a
        finding of its own.  The capture's finding that matched it
        (`details["kernel_report"]`, the report's `FILE:LINE`) is the same
        problem; it is left out, and the report's finding says where the
        capture shows it (`details["captured_at"]`).
        """
        at_report = {f.location: f for f in findings if "kernel_report" not in f.details}
        kept = []
        for finding in findings:
            report = at_report.get(finding.details.get("kernel_report", ""))
            if report is not None and report.kind == finding.kind:
                report.details.setdefault("captured_at", finding.location)
                continue
            kept.append(finding)
        return kept

    def source_counts(self) -> dict[str, int]:
        """`Annotator.source_counts` over every annotator of the run (the JSON `stats.annotations`)."""
        return source_counts([self.default.sources] + [annotator.sources for _, annotator in self.boots])

    def notes(self) -> list[str]:
        out = self.default.notes() if self.default.sources or self.default.changes else []
        for boot, annotator in self.boots:
            out += boot.notes()  # type: ignore[attr-defined]
            out += [f"{boot.name}: {note}" for note in annotator.notes()]  # type: ignore[attr-defined]
        return out


def source_counts(counters: list[Counter]) -> dict[str, int]:
    """Annotators' `sources` counters summed, with `acquisitions` first; {} when they counted none."""
    total: Counter = Counter()
    for counter in counters:
        total.update(counter)
    acquisitions = sum(total[key] for key in SOURCES)
    if not acquisitions:
        return {}
    return {"acquisitions": acquisitions, **{key: total[key] for key in SOURCES + (STATE_CHANGED,)}}


def annotate(events: Iterable[Event], state: Optional[LockdepState] = None,
             rules: Optional[AnnotationRules] = None, annotator: Optional[Annotator] = None) -> Iterator[Event]:
    """The transformer: events with subclass/nest/read mode/trylock filled in from `state` and `rules`.

    Pass an `annotator` to read its notes and `mark_uncertain` afterwards.
    """
    annotator = annotator if annotator is not None else Annotator(state, rules)
    return annotator.run(events)
