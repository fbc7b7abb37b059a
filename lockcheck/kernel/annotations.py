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

from collections import Counter
from typing import Iterable, Iterator, Optional

from lockcheck import events as E
from lockcheck.events import Event, MAX_SUBCLASS
from lockcheck.kernel.state import LockdepState, split_class_name
from lockcheck.kernel.annotation_file import BUILTIN_RULES, AnnotationRules
from lockcheck.readers.ftrace_kprobe import UNKNOWN_KEY
from lockcheck.lockdep.rules import hlock_class
from lockcheck.kernel.annotation_trust import FULL, NONE, STATE_CHANGED, UNKNOWN, UNTIL_REPORT, AnnotatorVerdicts

# -- the kernel's state, indexed ---------------------------------------------------


def state_key(name: str) -> str:
    """A /proc class name as the trace can know it: `#N` dropped, `/S` kept."""
    base, _, sub = split_class_name(name)
    return hlock_class(base, sub)


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

    def subclass_explaining(self, stack: tuple[str, ...], lock: str) -> Optional[int]:
        """The first subclass N > 0 (ascending) of `lock` that /proc/lockdep lists and whose
        `stack + ("lock/N",)` is a chain suffix, or None.

        The one place this reading lives: the annotator's `_resolve` asks it, and the capture
        filter's compiled core asks it too (once per stack and class: it keeps the answers)."""
        for sub in self.subclasses.get(lock, ()):
            if stack + (hlock_class(lock, sub),) in self.suffixes:
                return sub
        return None


# -- the transformer ----------------------------------------------------------------

#: why a repeated class is still reported although a chain of the state contains it
UNPROVEN_CHAIN = ("{lock} was taken while held and /proc/lockdep_chains has that chain, but lockdep adds a "
                  "chain before validating it, so the chain of a report is there too: without "
                  "/proc/lockdep_stats (debug_locks) or the boot's dmesg it cannot be told whether the kernel "
                  "accepted it (a nest_lock) or reported it")

#: why a finding about a class with unknown acquisitions (no kprobe argument line) is uncertain
UNKNOWN_ACQUISITION = ("{lock} was also acquired without its kprobe argument line (a missed probe hit, lost events, "
                       "a CPU buffer that starts late or a restart): those acquisitions were read as unknown (no "
                       "usage bit, no dependency of their own), so what they held or hid is not known (give "
                       "--lockdep-state)")

#: held entry fields
_KEY, _LOCK, _INSTANCE, _CTX, _READ = range(5)


#: how long before the kernel's report (dmesg timestamp, seconds) the state stops being trusted:
#: for every acquisition, and for the reporting task's acquisitions of the reported lock
REPORT_SLACK, REPORT_TASK_SLACK = 0.1, 1.0

#: what the state is worth (`Annotator.validity`)



def context_after(ctx: int, op: str) -> int:
    """A task's irq nesting as the annotator counts it (0x100 a hardirq level, 1 a softirq level)
    after the irq op `op`: the annotator's `_irq`, and the capture fast path's
    (`fast_stages.context_hit`), which applies a line's context events without events."""
    if op == E.HARDIRQ_ENTER:
        return ctx + 0x100
    if op == E.HARDIRQ_EXIT:
        return max(ctx - 0x100, 0)
    if op == E.SOFTIRQ_ENTER:
        return ctx + 1
    if op == E.SOFTIRQ_EXIT:
        return max(ctx - 1, 0) if ctx & 0xFF else ctx
    return ctx

class Annotator(AnnotatorVerdicts):
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
        self.ctx[ev.task] = context_after(self.ctx.get(ev.task, 0), ev.op)

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
        if ev.props is not None and ev.props.get(UNKNOWN_KEY) and self._unknown(ev):
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

    def _unknown(self, ev: Event) -> bool:
        """An acquisition whose kprobe argument line is missing (`lockcheck.readers.ftrace_kprobe`):
        True when it stays unknown (check=0, a doubt on its class); False when the trusted state
        reads it as in a capture without arguments (`check` given back)."""
        if self.index is not None and self.trusted:
            ev.check = True
            ev.props = None
            return False
        self.sources["none"] += 1
        lock = ev.lock
        self._add_doubt(lock, UNKNOWN_ACQUISITION.format(lock=lock))
        return True

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
        key = hlock_class(ev.lock, ev.subclass)
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
            sub = index.subclass_explaining(stack, lock)
            if sub is not None:
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
            sub = index.subclass_explaining(stack, lock)
            if sub is not None:
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
        tails += [hlock_class(lock, sub) for sub in subs]
        keys = [entry[_KEY] for entry in entries]
        for pos in range(len(entries) - 1, -1, -1):
            entry = entries[pos]
            alternatives = [entry[_LOCK]] + [hlock_class(entry[_LOCK], sub) for sub in index.subclasses.get(entry[_LOCK], ())]
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

def annotate(events: Iterable[Event], state: Optional[LockdepState] = None,
             rules: Optional[AnnotationRules] = None, annotator: Optional[Annotator] = None) -> Iterator[Event]:
    """The transformer: events with subclass/nest/read mode/trylock filled in from `state` and `rules`.

    Pass an `annotator` to read its notes and `mark_uncertain` afterwards.
    """
    annotator = annotator if annotator is not None else Annotator(state, rules)
    return annotator.run(events)
