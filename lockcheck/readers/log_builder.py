"""One lockdep report being read: a `ReportBuilder` fills a `Splat` from its lines, in the order lockdep prints them.

Split from `lockcheck.readers.kernel_log`, which finds where reports start
and end in a log and hands each line of one to its builder (`feed`); a
handler per grammar tag (`_on_TAG`) keeps what the line says.
"""

from __future__ import annotations

import re
from typing import Optional

from lockcheck.lockdep import findings as F
from lockcheck.readers.log_lines import FOREIGN, FRAME, Parsed, kernel_ident, strip_ip
from lockcheck.readers.splat import Splat, SplatLink, SplatLock
from lockcheck.util import numbers
from lockcheck.util.wording import count


#: lockdep_rcu_suspicious(): `pr_err("%s:%d %s!\n", file, line, s)`
_RCU_SITE = re.compile(r"^(\S+\.[ch]:\d+) (.+!)$")
#: a line of the `dump_stack()` after `stack backtrace:`: a frame (`func+0x1/0x2`, `? f+...`, `[<addr>] f+...`,
#: a module in brackets after it), the stack's markers, the dump's header lines and registers
_DUMP_FRAME = re.compile(r"^(?:\? )?(?:\[<[0-9a-fA-Fx]+>\] )?(?:\? )?(?:[\w.$]+(?:\+0x[0-9a-f]+/0x[0-9a-f]+)? from )?"
                         r"[\w.$]+\+0x[0-9a-f]+/0x[0-9a-f]+(?: \([A-Z]\))?(?: \S+:\d+)?(?: \[\w+\])?$"
                         r"|^[\w.$]+ \S+:\d+ \[inline\]$"
                         r"|^</?(?:TASK|IRQ|SOFTIRQ|NMI|EOI|#DF|DB|MCE)>$|^[0-9a-f]{8,16}(?: [0-9a-f]{8,16})*$")
_DUMP_HEAD = re.compile(r"^(?:[A-Z][A-Z0-9]{1,3}: |Pid: \d+, comm: |Hardware name: |Tainted: |Call [Tt]race:|Workqueue: |Code: |Sched_ext: "
                        r"|Exception stack|Stack:|Backtrace:)")
_TITLE_WORDS = ("WARNING: ", "BUG: ", "INFO: ")
#: print_collision(): `pr_warn("%s/%d: ", ...)` then "Hash chain already cached but the contents don't match!"
_COLLISION_TASK = re.compile(r"^(\S(?:.*?\S)?/-?\d+): Hash chain already cached")


class ReportBuilder:
    """Fills one Splat from its lines, in the order lockdep prints them."""

    def __init__(self, splat: Splat, parsed: Parsed) -> None:
        self.splat = splat
        self.expect: Optional[str] = None  # what the next lock line fills
        self.frames: Optional[list[str]] = None  # where frames go
        self.path: Optional[list] = None  # the `-> (CLASS){..} {` blocks being read
        self.ident_next = True
        self.complete = False
        self.backtraces = 0
        self.dumping = False  #: the report is read; the lines of its `stack backtrace:` dump follow
        self.idle = 0
        self.last_lock: Optional[SplatLock] = None
        self.advanced = splat.line  #: the last line that added to the report
        self._title(parsed)

    def _title(self, parsed: Parsed) -> None:
        splat, tag = self.splat, parsed.tag
        if tag == "bad_irq_dependency":
            splat.details["irqclass"] = parsed.tokens["IRQCLASS"][0]
        elif tag == "task_exit":
            splat.task = parsed.tokens["TASK"][0]
            splat.details["task_exit"] = True
        elif tag == "task_exit_old":
            splat.details["task_exit"] = True
        elif tag == "too_low":
            self.ident_next = False
        elif tag == "chain_key_collision":
            splat.details["message"] = "chain_key collision"

    # the lines ------------------------------------------------------------------------
    def feed(self, parsed: Parsed, lineno: int) -> None:
        splat = self.splat
        splat.end = lineno
        tag = parsed.tag
        if self.ident_next:
            self.ident_next = False
            if tag not in ("rule_dash", "rule_eq"):
                splat.kernel = kernel_ident(parsed.text)
                return
        if tag in (FRAME, FOREIGN):
            self.idle = 0 if self._bare_line(parsed) else self.idle + 1
            return
        handler = getattr(self, f"_on_{tag}", None)
        if handler is None:
            self.idle += 1
            return
        self.idle = 0
        if handler(parsed, lineno) is False:
            self.idle += 1

    def _count(self, parsed: Parsed, lineno: int, text: str, what: str) -> int:
        """A number of a report line (`-> #N`, ` #N:`, `N locks held`...): ASCII digits of a bounded
        length, else a TraceError at its line and column (a 5,000-digit `#N` is the input's fault)."""
        return numbers.count(text, self.splat.file, lineno, numbers.column_of(parsed.text, text), what)

    def _set_expect(self, what: Optional[str]) -> None:
        self.expect, self.frames = what, None

    def _on_rule_eq(self, parsed: Parsed, lineno: int) -> None:
        pass

    def _on_rule_dash(self, parsed: Parsed, lineno: int) -> None:
        pass

    def _task(self, parsed: Parsed) -> None:
        if "TASK" in parsed.tokens:
            self.splat.task = parsed.tokens["TASK"][0]
        if "IRQSTATE" in parsed.tokens:
            self.splat.details["irq_state"] = parsed.tokens["IRQSTATE"][0].strip()

    def _on_acquire_head(self, parsed: Parsed, lineno: int) -> None:
        self._task(parsed)
        self._set_expect("lock")

    _on_acquire_irq_head = _on_takes_head = _on_changed_head = _on_lock_head = _on_acquire_head

    def _on_freeing_head(self, parsed: Parsed, lineno: int) -> None:
        self._task(parsed)
        start, _, end = parsed.tokens["RANGE"][0].partition("-")
        self.splat.details["mem_from"], self.splat.details["mem_to"] = start, end or start
        self._set_expect("lock")

    def _on_release_head(self, parsed: Parsed, lineno: int) -> None:
        self._task(parsed)
        self.splat.lock = SplatLock(parsed.tokens["RELEASED_NAME"][0], line=lineno)
        self._set_expect("site")

    _on_contend_head = _on_release_head  # print_lock_contention_bug: the lock, then its print_ip_sym line

    def _on_leaving_head(self, parsed: Parsed, lineno: int) -> None:
        self._task(parsed)
        self._set_expect(None)

    _on_exiting_head = _on_leaving_head

    def _on_holding(self, parsed: Parsed, lineno: int) -> None:
        self._set_expect("held")

    _on_also_holding = _on_holding

    def _on_not_holding(self, parsed: Parsed, lineno: int) -> None:
        self._set_expect("nest")

    def _bare_line(self, parsed: Parsed) -> bool:
        """A frame, or the bare line a head announced (`print_ip_sym`, the nest lock's name); False: not ours."""
        if self.expect in ("site", "nest"):
            key = self.expect
            self.splat.details[key] = strip_ip(parsed.text) if key == "site" else parsed.text
            self._set_expect(None)
            return True
        if parsed.tag == FRAME and self.frames is not None:
            self.frames.append(parsed.text)
            return True
        return self._kind_line(parsed.text)

    def _kind_line(self, text: str) -> bool:
        """The one free-text line of the reports that print one: RCU's `FILE:LINE CHECK!` and the
        task of a chain_key collision (`TASK: Hash chain already cached...`)."""
        splat = self.splat
        if splat.kind == F.RCU_USAGE and "rcu_site" not in splat.details:
            match = _RCU_SITE.match(text)
            if match is not None:
                splat.details["rcu_site"], splat.details["check"] = match.group(1), match.group(2)
                return True
        elif splat.kind == F.LOCKDEP_WARNING and splat.task is None:
            match = _COLLISION_TASK.match(text)
            if match is not None:
                splat.task = match.group(1)
                return True
        return False

    def _on_lock_line(self, parsed: Parsed, lineno: int) -> Optional[bool]:
        lock = parsed.locks[0]
        last = self.last_lock
        if self.expect is None and last is not None and (last.name, last.instance) == (lock.name, lock.instance):
            last.at = lock.at  # syzbot prints the line once more per inlined frame: the last is the function
            return None
        splat, what = self.splat, self.expect
        if what == "lock":
            splat.lock = lock
        elif what == "held":
            splat.held = lock
        elif what in ("safe", "unsafe", "other"):
            splat.details[what] = lock
        else:
            return False
        self.last_lock = lock
        self._set_expect(None)
        return None

    def _on_new_dependency(self, parsed: Parsed, lineno: int) -> None:
        prev, nxt = parsed.locks
        self.splat.details["dependency"] = (prev, nxt)

    def _on_chain_head(self, parsed: Parsed, lineno: int) -> None:
        self.splat.details["chain_head"] = True  # the first entry that follows is `-> #N`, the held lock
        self._set_expect(None)

    def _on_chain_entry(self, parsed: Parsed, lineno: int) -> None:
        link = SplatLink(self._count(parsed, lineno, parsed.tokens["INT"][0], "chain entry number"), parsed.locks[0])
        self.splat.chain.append(link)
        self.expect, self.frames = None, link.frames

    def _on_other_info(self, parsed: Parsed, lineno: int) -> None:
        self._set_expect(None)

    def _on_chain_exists(self, parsed: Parsed, lineno: int) -> None:
        self._set_expect(None)

    def _on_chain_names(self, parsed: Parsed, lineno: int) -> None:
        self.splat.chain_exists = parsed.tokens["CHAIN_FIRST"] + parsed.tokens.get("CHAIN_NEXT", [])

    def _on_scenario_lock(self, parsed: Parsed, lineno: int) -> None:
        self.splat.scenario.append((parsed.tokens["LOCK_VERB"][0], parsed.tokens["SCENARIO_CLASS"][0],
                                    parsed.indent > 20))

    def _on_held_head(self, parsed: Parsed, lineno: int) -> None:
        self.splat.held_count = self._count(parsed, lineno, parsed.tokens["HELD_COUNT"][0].split()[0], "lock count")
        self._task_end(parsed)
        self._set_expect(None)
        self._held_done()

    def _on_no_locks_held(self, parsed: Parsed, lineno: int) -> None:
        self.splat.held_count = 0
        self._task_end(parsed)
        self._set_expect(None)
        self._held_done()

    def _task_end(self, parsed: Parsed) -> None:
        if self.splat.task is None and "TASK_END" in parsed.tokens:
            self.splat.task = parsed.tokens["TASK_END"][0]

    def _on_held_entry(self, parsed: Parsed, lineno: int) -> None:
        index = self._count(parsed, lineno, parsed.tokens["INT"][0], "held lock number")
        held = self.splat.held_locks
        lock = parsed.locks[0] if parsed.locks else SplatLock("<RELEASED>", line=lineno)
        if index == len(held) - 1 and (held[-1].name, held[-1].instance) == (lock.name, lock.instance):
            held[-1].at = lock.at  # an inlined frame's line again
            return
        held.append(lock)
        self._held_done()

    def _held_done(self) -> None:
        """`lock held when returning to user space!` (and MAX_LOCK_DEPTH) end with the held list."""
        splat = self.splat
        if splat.held_count is not None and len(splat.held_locks) >= splat.held_count:
            if (splat.kind == F.HELD_AT_EXIT and not splat.details.get("task_exit")) or splat.kind == F.MAX_DEPTH:
                self.complete = True

    def _on_backtrace(self, parsed: Parsed, lineno: int) -> None:
        self.backtraces += 1
        if self.splat.kind == F.NEST_NOT_HELD and self.backtraces == 1:
            self._set_expect(None)
            return
        self.complete = True
        self._start_dump([])

    def _on_call_trace(self, parsed: Parsed, lineno: int) -> None:
        """`Call Trace:` after the whole held-lock list: the dump_stack() of a report whose
        `stack backtrace:` line was left out of a paste (a commit message, a mail)."""
        splat = self.splat
        if splat.held_count is not None and len(splat.held_locks) >= splat.held_count:
            self.complete = True
            self._start_dump([parsed.text])

    def _start_dump(self, lines: list[str]) -> None:
        self.splat.details["backtrace"] = lines
        self.dumping = True

    def dump_line(self, body: str, lineno: int) -> bool:
        """One more line of the report's stack dump, kept as printed; False: the dump ended before it
        (the walker then reads that line as any other).  `</TASK>` is the dump's last line."""
        text = body.rstrip()
        bare = text.strip()
        if bare.startswith(_TITLE_WORDS) or not (_DUMP_FRAME.match(bare) or _DUMP_HEAD.match(bare)):
            self.dumping = False
            return False
        self.splat.details["backtrace"].append(text)
        self.splat.end = self.advanced = lineno
        if bare == "</TASK>":
            self.dumping = False
        return True

    # print_usage_bug
    def _on_usage_change(self, parsed: Parsed, lineno: int) -> None:
        self.splat.details["prev_bit"], self.splat.details["new_bit"] = parsed.tokens["USAGE_BIT"][:2]

    def _on_registered_at(self, parsed: Parsed, lineno: int) -> None:
        frames: list[str] = []
        self.splat.details["registered"] = (lineno, frames)
        self.expect, self.frames = None, frames

    def _on_irq_stamp(self, parsed: Parsed, lineno: int) -> None:
        self.splat.details.setdefault("irq_events", {})["stamp"] = self._count(parsed, lineno, parsed.tokens["INT"][0],
                                                                                 "irq event stamp")
        self._set_expect(None)

    def _on_irq_event(self, parsed: Parsed, lineno: int) -> None:
        words = parsed.tokens["IRQ_EVENT"][0].split()  # hardirqs last enabled
        key = f"{words[0]}_{words[-1]}"
        site = strip_ip(parsed.tokens["SITE"][0])
        self.splat.details.setdefault("irq_events", {})[key] = (
            self._count(parsed, lineno, parsed.tokens["INT"][0], "irq event number"), lineno, site)

    # print_irq_inversion_bug / print_bad_irq_dependency
    def _on_took_unsafe(self, parsed: Parsed, lineno: int) -> None:
        self.splat.details["forwards"] = True
        self.splat.details["irqclass"] = parsed.tokens["IRQCLASS"][0]
        self._set_expect("other")

    def _on_taken_by_safe(self, parsed: Parsed, lineno: int) -> None:
        self._on_took_unsafe(parsed, lineno)
        self.splat.details["forwards"] = False

    def _on_connects_safe(self, parsed: Parsed, lineno: int) -> None:
        self._set_expect("safe")

    def _on_to_unsafe(self, parsed: Parsed, lineno: int) -> None:
        self._set_expect("unsafe")

    def _on_became_safe(self, parsed: Parsed, lineno: int) -> None:
        frames: list[str] = []
        self.splat.details["safe_at"] = (lineno, frames)
        self.expect, self.frames = None, frames

    def _on_became_unsafe(self, parsed: Parsed, lineno: int) -> None:
        frames: list[str] = []
        self.splat.details["unsafe_at"] = (lineno, frames)
        self.expect, self.frames = None, frames

    def _on_ellipsis(self, parsed: Parsed, lineno: int) -> None:
        pass

    def _paths(self, key: str) -> None:
        self.path = self.splat.details.setdefault(key, [])
        self._set_expect(None)

    def _on_shortest_deps(self, parsed: Parsed, lineno: int) -> None:
        self._paths("path")

    def _on_safe_deps(self, parsed: Parsed, lineno: int) -> None:
        self._paths("safe_path")

    def _on_unsafe_deps(self, parsed: Parsed, lineno: int) -> None:
        self._paths("unsafe_path")

    def _on_safe_deps_tail(self, parsed: Parsed, lineno: int) -> None:
        pass

    _on_unsafe_deps_tail = _on_safe_deps_tail

    def _on_class_open(self, parsed: Parsed, lineno: int) -> None:
        if self.path is not None:
            self.path.append((parsed.locks[0], []))
        self._set_expect(None)

    def _on_usage_at(self, parsed: Parsed, lineno: int) -> None:
        self.frames = []  # the usage traces of a class block are read, not kept

    def _on_acquired_at(self, parsed: Parsed, lineno: int) -> None:
        self.frames = self.path[-1][1] if self.path else None

    def _on_class_close(self, parsed: Parsed, lineno: int) -> None:
        self.frames = None

    _on_key_at = _on_class_close

    # print_lock_invalid_wait_context: `context-{N:N}`, the task's wait context (task_wait_context())
    def _on_wait_context(self, parsed: Parsed, lineno: int) -> None:
        outer, inner = parsed.tokens["INT"][:2]
        self.splat.details["context"] = (f"{self._count(parsed, lineno, outer, 'wait type')}:"
                                         f"{self._count(parsed, lineno, inner, 'wait type')}")
        self._set_expect(None)

    # MAX_LOCK_DEPTH
    def _on_depth(self, parsed: Parsed, lineno: int) -> None:
        depth, limit = parsed.tokens["INT"][:2]
        self.splat.details["depth"] = self._count(parsed, lineno, depth, "lock depth")
        self.splat.details["max"] = self._count(parsed, lineno, limit, "lock depth limit")

    # lines that carry nothing lockcheck keeps
    def _ignore(self, parsed: Parsed, lineno: int) -> None:
        pass

    _on_depends = _on_cmp_fn = _on_scenario_head = _on_deadlock = _on_nesting_hint = _on_cpu_columns = _ignore
    _on_scenario_irq_disable = _on_scenario_interrupt = _on_no_more_locks = _on_would_create = _ignore
    _on_inverse_ordering = _on_turning_off = _on_turned_off = _on_lockdep_internal = _ignore
    _on_no_locks = _ignore

    def _partial(self) -> None:
        """A chain read without its report's header: the locks of the header, from the chain where it says."""
        splat = self.splat
        links = splat.links_by_depth()
        splat.notes.insert(0, "partial: the start of this report (its title, task and locks) is not in the log; "
                              "what it gives is the dependencies of the chain entries it holds")
        if links and links[0].depth == 0 and splat.lock is None:
            splat.lock = SplatLock(links[0].lock.name, links[0].lock.usage, line=links[0].lock.line,
                                   waits=links[0].lock.waits)
        if splat.details.get("chain_head") and splat.chain and splat.held is None:
            top = splat.chain[0].lock  # printed first: `-> #N`, the class the task already held
            splat.held = SplatLock(top.name, top.usage, line=top.line, waits=top.waits)

    # the end ---------------------------------------------------------------------------
    def finish(self, why: Optional[str]) -> Splat:
        """The report as read; `why` says what cut it short (None: it ended as printed)."""
        splat = self.splat
        if not self.complete and why is not None:
            splat.notes.append(f"cut short at {splat.file}:{splat.end} ({why}): "
                               f"it gives what it printed before")
        if splat.details.get("partial"):
            self._partial()
        if splat.kind == F.CIRCULAR:
            depths = sorted(link.depth for link in splat.chain)
            expected = set(range((max(depths) + 1) if depths else 0))
            missing = sorted(expected - set(depths))
            if missing:
                splat.notes.append("lost lines: chain entries " + ", ".join(f"-> #{d}" for d in missing)
                                   + " are missing")
            elif not depths and self.complete:
                splat.notes.append("lost lines: no dependency chain")
        if splat.held_count is not None and len(splat.held_locks) < splat.held_count and self.complete:
            splat.notes.append(f"lost lines: {len(splat.held_locks)} of {count(splat.held_count, 'held lock')} printed")
        return splat
