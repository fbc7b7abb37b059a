"""`lockcheck check` on a trace the pytest plugin recorded: the plugin's findings, no others.

A recorded session (`pytest --lockcheck --lockcheck-trace=run.lt`) carries, in comment lines
(`lockcheck.readers.plugin_meta`), what the plugin decided with besides the events: its
suppression rules (the standard library's lock orders it accepts by default, the user's
`lockcheck_suppress`, each test's own), the qualified names they name classes by, and the test
each event ran in.  Here they become suppressions of the check and the test id after each
finding's task, as the plugin prints it (`MainThread/1 [test_x.py::test_a]`).
"""

from __future__ import annotations

import copy
import fnmatch
import os
from dataclasses import dataclass
from typing import Any, Optional

from lockcheck.commands import fork_replay
from lockcheck.lockdep import findings as F
from lockcheck.lockdep.findings import Finding, Frame, LockSnapshot
from lockcheck.readers import plugin_meta
from lockcheck.readers.plugin_meta import PluginMeta
from lockcheck.report.suppress import Config, Suppression

ORIGIN = "the pytest plugin's rules (recorded in the trace)"


@dataclass
class PluginSuppression(Suppression):
    """A rule of the plugin, matched as the plugin matches it (`lockcheck.python.suppression_rules.match`):
    every glob matches a class of the finding, by its name or its qualified name; a test's own
    rule only for findings made in that test.  Never listed as stale: the recording session chose them."""

    stale_listed = False

    meta: Optional[PluginMeta] = None
    file: str = ""
    test: Optional[str] = None

    def matches(self, finding: Finding) -> bool:
        if self.meta is None or not fnmatch.fnmatchcase(finding.kind, self.kind):
            return False
        where = _where(finding)
        if where is None or where[0] != self.file:
            return False
        if self.test is not None and self.meta.test_at(where[1])[0] != self.test:
            return False
        names = classes(finding, self.meta.qualified)
        return all(any(fnmatch.fnmatchcase(name, glob) for name in names) for glob in self.classes)


def classes(finding: Finding, qualified: dict[str, str]) -> set[str]:
    """The finding's classes and, for those the trace gave one, their qualified names."""
    names = {finding.lock, finding.held, *(finding.cycle or ())} - {None}
    for name in list(names):
        base, slash, subclass = name.partition("/")
        if base in qualified:
            names.add(qualified[base] + slash + subclass)
    return names  # type: ignore[return-value]


def recorded(path: str, meta: PluginMeta) -> list[Finding]:
    """The findings trace `path` holds as `#lockcheck-plugin finding` records: the plugin decided
    them with what its events cannot say (a thread that ended holding an RLock, a fork, a test's
    own order, a cycle of waits), so the replay reports them as made, at the event that made them."""
    found = []
    for line, record in meta.findings:
        kind = record.get("kind") if isinstance(record, dict) else None
        if not isinstance(kind, str) or kind not in F.MESSAGES or not all(
                isinstance(record.get(key), (str, type(None))) for key in ("task", "lock", "held", "site")):
            continue  # not what the recorder writes (`trace_meta`): a damaged line is no finding
        try:
            cycle = record.get("cycle")
            details = dict(record.get("details") or {})
            if record.get("stack"):
                details["stack"] = tuple(Frame(str(f[0]), int(f[1]), str(f[2])) for f in record["stack"])
            found.append(Finding(kind=record["kind"], task=str(record.get("task") or "?"),
                                 lock=str(record.get("lock") or ""), location=f"{path}:{line}",
                                 held=record.get("held"), cycle=[str(c) for c in cycle] if cycle else None,
                                 next=_snapshot(record.get("next")), prev=_snapshot(record.get("prev")),
                                 held_locks=[snap for snap in map(_snapshot, record.get("held_locks") or ()) if snap],
                                 site=record.get("site"), details=details))
        except (TypeError, ValueError, IndexError):
            continue  # not what the recorder writes: a damaged line is no finding
    return found


def _snapshot(value: Any) -> Optional[LockSnapshot]:
    if not isinstance(value, list) or len(value) != 4:
        return None
    name, instance, usage, at = value
    return LockSnapshot(str(name), None if instance is None else str(instance), str(usage or ""),
                        None if at is None else str(at))


def _where(finding: Finding) -> Optional[tuple[str, int]]:
    """(file, line) of the event that made the finding (`Finding.location`, `FILE:LINE`)."""
    file, _, line = (finding.location or "").rpartition(":")
    return (file, int(line)) if file and line.isdigit() else None


def read_meta(path: str) -> Optional[PluginMeta]:
    """The plugin's lines of trace `path` (a regular file, maybe compressed, or standard input),
    or None when the plugin did not write it.  Read once more before the check: the rules apply
    from its first finding."""
    from lockcheck.readers.source import STDIN

    if path == STDIN:
        from lockcheck.commands.plugin_stdin import stdin_meta

        return stdin_meta()  # kept whole when it is a plugin trace, to be read again
    if not os.path.isfile(path):
        return None  # a pipe named on the command line: not read twice
    return plugin_meta.scan_input(path)


class Replay:
    """The plugin traces among a check's paths, their rules put into the check's `Config`, their
    forked children checked each as the process it was (`lockcheck.commands.fork_replay`)."""

    def __init__(self, paths: list[str]) -> None:
        from lockcheck.readers.source import STDIN, STDIN_NAME

        #: by the name findings give their input (`<stdin>` for standard input), and its path
        self.metas: dict[str, PluginMeta] = {}
        self.paths: dict[str, str] = {}
        for path in paths:
            meta = read_meta(path)
            if meta is not None:
                name = STDIN_NAME if path == STDIN else path
                self.metas[name] = meta
                self.paths[name] = path
        #: the keys of the findings the check's own pass made in the sessions' parts (`own`)
        self._seen: set = set()

    @property
    def forks(self) -> bool:
        """A trace holds forked children's parts (checked by `after`)."""
        return any(meta.forks for meta in self.metas.values())

    @property
    def whole(self) -> bool:
        """The check runs in one process (no `--jobs` split): `after` has findings to add."""
        return any(meta.forks or meta.findings for meta in self.metas.values())

    def snapshot(self, checker: Any) -> Any:
        """The checker before the first event, for the children's checks (None: no child to check)."""
        return copy.deepcopy(checker) if self.forks else None

    def own(self, finding: Finding) -> bool:
        """A finding of the check's own pass it keeps: not one made in a forked child's part, which
        that pass checks against the parent's whole run (`children` checks those)."""
        where = _where(finding)
        meta = self.metas.get(where[0]) if where is not None else None
        if meta is not None and meta.forks and fork_replay.in_child(meta, where[1]):  # type: ignore[index]
            return False
        self._seen.add(finding.key())
        return True

    def after(self, initial: Any, transform: Any = None, known: Any = ()) -> list[Finding]:
        """What the check's own pass cannot find: each forked child's findings, checked from its
        parent's state at the fork (`initial`: the checker before the first event; None when no
        trace has children), and the findings the plugin recorded as made (`recorded`).  One of
        a problem already found (by the session, another child, or the pass) is not repeated, nor
        a recorded one the baselines hold (`known`: their keys)."""
        found = []
        for name, meta in self.metas.items():
            made = fork_replay.check_children(self.paths[name], meta, initial, transform) if initial is not None else []
            for finding in made + [f for f in recorded(name, meta) if f.key() not in known]:
                if finding.key() not in self._seen:
                    self._seen.add(finding.key())
                    found.append(finding)
        return found

    def in_trace_order(self, findings: list[Finding]) -> None:
        """`findings` sorted by where in a plugin trace they were made, when `after` added any: a
        recorded or a child's finding is made at its own line, before or after the pass's ones
        (`--first` keeps the earliest).  Findings of other inputs keep their place after them."""
        if not self.whole or len(findings) < 2:
            return
        names = list(self.metas)

        def position(finding: Finding) -> tuple[int, int]:
            where = _where(finding)
            if where is None or where[0] not in self.metas:
                return (len(names), 0)
            return (names.index(where[0]), where[1])

        findings.sort(key=position)

    def install(self, config: Config) -> None:
        """The rules first (the plugin applies them before the user's own of a `--suppress` file)."""
        rules: list[Suppression] = []
        for path, meta in self.metas.items():
            rules += [PluginSuppression(kind, globs, ORIGIN, meta=meta, file=path) for kind, globs in meta.rules]
            # the plugin holds as many locks as Python does: a depth past lockdep's limit is a note
            # of its summary (`Recorder.too_deep`), never a finding
            rules.append(PluginSuppression(F.MAX_DEPTH, (), ORIGIN, meta=meta, file=path))
            for test, own in meta.tests:
                rules += [PluginSuppression(kind, globs, ORIGIN, meta=meta, file=path, test=test) for kind, globs in own]
        config.suppressions[:0] = rules

    def label(self, finding: Finding) -> None:
        """The test that made `finding` after its task, as the plugin names the task."""
        where = _where(finding)
        if where is None or where[0] not in self.metas:
            return
        meta = self.metas[where[0]]
        stack = meta.stacks.get(where[1])
        if stack and "stack" not in finding.details:
            finding.details["stack"] = tuple(Frame(*frame) for frame in stack)
        test = meta.test_at(where[1])[0]
        if test is not None:
            finding.details["test"] = test
            if not finding.task.endswith(f" [{test}]"):
                finding.task = f"{finding.task} [{test}]"
