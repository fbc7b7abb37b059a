"""Suppression rules of the live-Python checker: `KIND CLASSGLOB...`, one rule a line.

The recorder files a finding a rule accepts among the suppressed ones instead of the test's
(`Recorder.suppressed`).  Here: the rules the standard library needs, parsing, matching.
"""

from __future__ import annotations

import difflib
import fnmatch
from typing import Any, NamedTuple, Optional

from lockcheck.lockdep import findings as F
from lockcheck.lockdep.findings import Finding
from lockcheck.python.sites import registry

#: the standard library's own lock orders, which no program under test can change:
#: - same-class nesting ordered on purpose (lockdep's `lock_set_cmp_fn`):
#:   `concurrent.futures._AcquireFutures` takes Future conditions sorted by id();
#: - logging: `logging.config` (fileConfig, dictConfig) holds the module lock while it shuts
#:   the old handlers down (each handler's lock), and `FileHandler.close` (and the close of
#:   MemoryHandler, SocketHandler, SysLogHandler) holds its handler's lock while `Handler.close`
#:   takes the module lock -- an inversion inside the stdlib itself (every Python 3.10-3.13),
#:   reported by any run that configures logging twice.
#: - multiprocessing: a `SemLock`'s finalizer (run by the garbage collector: an interrupt context,
#:   `lockcheck.python.interrupts`) unregisters it with the resource tracker under `ResourceTracker._lock`,
#:   which the tracker also takes in plain code -- the stdlib's own irq-unsafe use (CPython 3.13
#:   answers the re-entry with `ReentrantCallError` rather than deadlock), reported by any test
#:   whose garbage collection happens to run inside the tracker (test_logging's test_config15_ok).
#: They name the classes by their qualified names, so only the stdlib's own classes match: a
#: third-party handler whose `emit` logs (taking the module lock under its handler lock, as
#: opentelemetry-sdk's LoggingHandler does) inverts against dictConfig in its own code, and is
#: reported.
DEFAULT_SUPPRESS = ["recursive-locking concurrent.futures._base.Future._condition",
                    "circular-dependency logging._lock logging.*Handler.lock",
                    "inconsistent-lock-state multiprocessing.resource_tracker.ResourceTracker._lock"]

class Rule(NamedTuple):
    """One parsed rule: a kind glob, class globs, and where it was written (`origin`: shown
    when the rule matched nothing in a session; `DEFAULT` for the standard library's own)."""

    kind: str
    globs: tuple[str, ...]
    origin: str = "lockcheck_suppress"

    def text(self) -> str:
        return " ".join((self.kind, *self.globs))


DEFAULT = "default"
#: every kind a finding may have (`lockcheck.lockdep.findings.MESSAGES`)
KINDS = tuple(F.MESSAGES)


class RuleError(ValueError):
    """A rule that can never match as meant: its kind is no kind (a misspelling, most often)."""


def check_kind(kind: str) -> None:
    """Raise `RuleError` naming `kind` when it is, or matches, no kind of finding (with the
    nearest kind: `circular-dependancy` -> did you mean `circular-dependency`?)."""
    if any(fnmatch.fnmatchcase(known, kind) for known in KINDS):
        return
    close = difflib.get_close_matches(kind, KINDS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else f" (kinds: {', '.join(KINDS)})"
    raise RuleError(f"{kind!r} is not a kind of finding{hint}")


def parse_rules(lines: list[str], origin: str = "lockcheck_suppress") -> list[Rule]:
    """The rules of `lines` (`KIND CLASSGLOB...`); blank lines and `#` comments are no rule, and a
    line repeated (a suggested line pasted twice) is one rule.  A kind that is no kind raises
    `RuleError` (the standard library's rules are not checked: `origin` `DEFAULT`)."""
    rules: dict[tuple, Rule] = {}
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        if origin != DEFAULT:
            check_kind(parts[0])
        rules.setdefault((parts[0], tuple(parts[1:])), Rule(parts[0], tuple(parts[1:]), origin))
    return list(rules.values())


def from_config(suppressions: list[Any]) -> list[Rule]:
    """The rules of `[tool.lockcheck] suppress` (`lockcheck.report.suppress.Suppression`s: the CLI's
    own reading of pyproject.toml), each kind checked as `parse_rules` checks it."""
    rules = []
    for item in suppressions:
        check_kind(item.kind)
        rules.append(Rule(item.kind, tuple(item.classes), item.origin))
    return rules


def match(rules: list[Rule], finding: Finding) -> Optional[int]:
    """The index of the first rule that accepts `finding`, or None.

    `KIND CLASSGLOB...`: the kind matches and every glob matches a class of the finding.  A rule
    may name a class by its module-qualified name (`registry.qualified`), which stays the same
    when lines move."""
    if not rules:
        return None
    classes = {finding.lock, finding.held, *(finding.cycle or ())} - {None}
    qualified = registry.qualified
    if qualified:
        for cls in list(classes):
            base, slash, subclass = cls.partition("/")
            if base in qualified:
                classes.add(qualified[base] + slash + subclass)
    for i, (kind, globs, _) in enumerate(rules):
        if not fnmatch.fnmatchcase(finding.kind, kind):
            continue
        if all(any(fnmatch.fnmatchcase(cls, glob) for cls in classes) for glob in globs):
            return i
    return None


def stale(rules: list[Rule], hits: list[int]) -> list[Rule]:
    """The rules written by the user (not the defaults) that accepted no finding: to remove."""
    return [rule for rule, n in zip(rules, hits) if not n and rule.origin != DEFAULT]
