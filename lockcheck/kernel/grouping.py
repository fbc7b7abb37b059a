"""One finding per distinct problem among kernel reports: what makes two reports the same problem.

The kernel prints a lockdep report each time a boot hits the problem, and a
fleet of boots (CI runs, a fuzzer) hits the same problem many times, with
classes numbered per boot: dynamically keyed classes of one name get `#2`,
`#3`... in the order they were registered, which changes from boot to boot
(`&(&k->k_lock)->rlock#3` today is `#5` tomorrow, and the first class of a
name prints none: `(wq_completion)wg-kex-wireguard1` in one boot is
`(wq_completion)wg-kex-wireguard1#8` in the next, once the device was
made eight times).  So a problem is keyed by its kind and its lock classes
with that numbering left out (`class_key`), and nothing else (not the task,
the call sites, the addresses):

- circular: the cycle's classes, rotated to start at the smallest, so the
  same cycle entered at another lock is the same problem;
- recursive: the class taken twice;
- irq reports: the class and the usage pair (`{IN-SOFTIRQ-W} ->
  {SOFTIRQ-ON-W}`), or the irq-safe and irq-unsafe classes and the irq
  state for an inversion, whichever way lockdep found it;
- the others: the kind and the lock (and the held lock where there is one).

syzbot buckets reports by a function name instead, which splits one bug
into several and merges unrelated ones; the lock classes are what the
report is about.

>>> from lockcheck.lockdep.findings import group_key_of
>>> group_key_of("circular-dependency", "B#2", None, ["B#2", "C", "A#7"], {})
('circular-dependency', ('A', 'B', 'C'))
"""

from __future__ import annotations

from lockcheck.lockdep.findings import Finding, group_key


class Groups:
    """Findings read from reports, one per problem; each later report of it counts and moves `last`.

    >>> from lockcheck.lockdep.findings import ReportOrigin
    >>> from lockcheck.lockdep.findings import Evidence
    >>> def read(file, line):
    ...     ev = Evidence(file, line, "t/1")
    ...     return Finding("recursive-locking", "t/1", "A#2", f"{file}:{line}", held="A#2",
    ...                    report=ReportOrigin(None, ev, ev))
    >>> groups = Groups()
    >>> groups.add(read("boot1.log", 10)), groups.add(read("boot2.log", 7))
    (True, False)
    >>> f = groups.findings[0]; (f.report.count, f.report.first.location, f.report.last.location)
    (2, 'boot1.log:10', 'boot2.log:7')
    """

    def __init__(self) -> None:
        self.by_key: dict[tuple, Finding] = {}
        self.findings: list[Finding] = []

    def add(self, finding: Finding) -> bool:
        """Count one report; True when it is the first of its problem (the finding to show)."""
        key = group_key(finding)
        known = self.by_key.get(key)
        if known is None:
            self.by_key[key] = finding
            self.findings.append(finding)
            return True
        origin, new = known.report, finding.report
        if origin is not None and new is not None:  # reports come in reading order
            origin.count += new.count
            origin.last = new.last
        return False

    def __contains__(self, key: tuple) -> bool:
        return key in self.by_key

