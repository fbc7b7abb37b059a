"""Suppression rules of the live-Python checker: `KIND CLASSGLOB...`, one rule a line.

The recorder files a finding a rule accepts among the suppressed ones instead of the test's
(`Recorder.suppressed`).  Here: the rules the standard library needs, parsing, matching.
"""

from __future__ import annotations

import fnmatch

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

#: one parsed rule: (kind glob, class globs)
Rule = tuple[str, list[str]]


def parse_rules(lines: list[str]) -> list[Rule]:
    """The rules of `lines`; blank lines and `#` comments are no rule."""
    rules = []
    for line in lines:
        if not line.strip() or line.lstrip().startswith("#"):
            continue
        parts = line.split()
        rules.append((parts[0], parts[1:]))
    return rules


def matches(rules: list[Rule], finding: Finding) -> bool:
    """`KIND CLASSGLOB...`: the kind matches and every glob matches a class of the finding.

    A rule may name a class by its module-qualified name (`registry.qualified`), which stays
    the same when lines move."""
    if not rules:
        return False
    classes = {finding.lock, finding.held, *(finding.cycle or ())} - {None}
    qualified = registry.qualified
    if qualified:
        for cls in list(classes):
            base, slash, subclass = cls.partition("/")
            if base in qualified:
                classes.add(qualified[base] + slash + subclass)
    for kind, globs in rules:
        if not fnmatch.fnmatchcase(finding.kind, kind):
            continue
        if all(any(fnmatch.fnmatchcase(cls, glob) for cls in classes) for glob in globs):
            return True
    return False
