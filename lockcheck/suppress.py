"""Suppressions and class aliases: `--suppress FILE` and `[tool.lockcheck]` in pyproject.toml.

A suppression accepts a known finding by kind and classes (glob patterns,
`fnmatch` syntax); an alias maps lock names that carry instance details
(`inode#1234`, `conn-0x7f3a`) to one class.  Both are TOML::

    [tool.lockcheck]                  # in pyproject.toml; a --suppress file
    order = "lockcheck.order"         # has the same keys at its top level
    suppress = [
      {kind = "circular-dependency", classes = ["&mm->mmap_sem", "&sb->*"], reason = "LKML 2023-04"},
      {kind = "recursive-locking", classes = ["&rq->lock*"]},
    ]

    [[tool.lockcheck.alias]]
    pattern = 'inode#\\d+'           # a regex matched against the whole lock name
    class = "inode"                   # may use \\1 / \\g<name> from the pattern

A suppression matches a finding when its `kind` (a glob, default `*`)
matches the finding's kind and every pattern in `classes` matches at least
one class of the finding (the cycle's classes, or `lock` and `held`); a
subclass suffix `/N` is part of the class name, so `X*` also matches `X/1`.

Aliases rewrite events before the checker sees them (`apply_aliases`):
the lock (and a `nest=` lock) gets the alias class, and the original name
becomes the instance, so two differently named locks stay two lock objects
of one class, as lockdep sees `inode->i_rwsem` of two inodes.

Every suppression and alias that matched nothing is listed by
`Config.stale_notes()`, so stale entries get removed.
"""

from __future__ import annotations

import fnmatch
import os
import re
import sys
from dataclasses import dataclass, field
from typing import Any, Iterable, Iterator, Optional

from lockcheck.errors import TraceError, UsageError
from lockcheck.events import Event
from lockcheck.findings import Finding

_MISS = object()

if sys.version_info >= (3, 11):
    import tomllib
else:  # pragma: no cover - Python 3.10
    import tomli as tomllib


@dataclass
class Suppression:
    """One accepted finding pattern; `hits` counts the findings it suppressed."""

    kind: str
    classes: tuple[str, ...]
    origin: str
    reason: Optional[str] = None
    hits: int = 0

    def matches(self, finding: Finding) -> bool:
        if not fnmatch.fnmatchcase(finding.kind, self.kind):
            return False
        names = finding_classes(finding)
        return all(any(fnmatch.fnmatchcase(name, pattern) for name in names) for pattern in self.classes)

    def describe(self) -> str:
        return f"kind={self.kind}, classes=[{', '.join(self.classes)}]"


@dataclass
class Alias:
    """`pattern` (a regex matched against a whole lock name) -> `cls`."""

    pattern: re.Pattern
    cls: str
    origin: str
    hits: int = 0

    def apply(self, name: str) -> Optional[str]:
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        try:
            return match.expand(self.cls)
        except (re.error, IndexError) as err:
            raise UsageError(f"{self.origin}: class {self.cls!r} does not fit pattern "
                             f"{self.pattern.pattern!r}: {err}") from None


@dataclass
class Config:
    """Everything `[tool.lockcheck]` and `--suppress` files say, merged."""

    suppressions: list[Suppression] = field(default_factory=list)
    aliases: list[Alias] = field(default_factory=list)
    order: Optional[str] = None
    files: list[str] = field(default_factory=list)

    def extend(self, other: "Config") -> None:
        self.suppressions.extend(other.suppressions)
        self.aliases.extend(other.aliases)
        self.order = self.order or other.order
        self.files.extend(other.files)

    # -- findings -----------------------------------------------------------
    def filter(self, findings: Iterable[Finding]) -> tuple[list[Finding], list[Finding]]:
        """(kept, suppressed); each suppression's `hits` counts what it accepted."""
        kept, suppressed = [], []
        for finding in findings:
            rule = self.suppression_for(finding)
            if rule is None:
                kept.append(finding)
            else:
                suppressed.append(finding)
        return kept, suppressed

    def suppression_for(self, finding: Finding) -> Optional[Suppression]:
        for rule in self.suppressions:
            if rule.matches(finding):
                rule.hits += 1
                return rule
        return None

    # -- events -------------------------------------------------------------
    def alias_name(self, name: str) -> Optional[str]:
        """The alias class of a lock name, or None when no alias applies."""
        hit = self._find_alias(name)
        return hit[1] if hit is not None else None

    def apply_aliases(self, events: Iterable[Event]) -> Iterable[Event]:
        """Rewrite lock names of `events` by the alias rules (streaming; `events` itself when there are none)."""
        if not self.aliases:
            return events
        return self._aliased(events)

    def _aliased(self, events: Iterable[Event]) -> Iterator[Event]:
        cache: dict[str, Optional[str]] = {}
        for ev in events:
            if ev.lock is not None:
                ev.lock, ev.instance = self._alias_lock(ev.lock, ev.instance, cache)
            if ev.nest is not None:
                ev.nest = self._alias_lock(ev.nest[0], ev.nest[1], cache)
            yield ev

    def _alias_lock(self, lock: str, instance: Optional[str], cache: dict) -> tuple[str, Optional[str]]:
        hit = cache.get(lock, _MISS)
        if hit is _MISS:
            hit = cache[lock] = self._find_alias(lock)
        if hit is None:
            return lock, instance
        alias, cls = hit
        alias.hits += 1
        if cls == lock:
            return lock, instance
        return cls, lock if instance is None else f"{lock}@{instance}"

    def _find_alias(self, name: str) -> Optional[tuple["Alias", str]]:
        for alias in self.aliases:
            cls = alias.apply(name)
            if cls is not None:
                return alias, cls
        return None

    # -- staleness ------------------------------------------------------------
    def stale_notes(self) -> list[str]:
        """One note per suppression or alias that matched nothing in this run."""
        notes = []
        for rule in self.suppressions:
            if not rule.hits:
                notes.append(f"{rule.origin} ({rule.describe()}) matched nothing; remove it if stale")
        for alias in self.aliases:
            if not alias.hits:
                notes.append(f"{alias.origin} ({alias.pattern.pattern!r} -> {alias.cls!r}) "
                             "matched no lock; remove it if stale")
        return notes


def finding_classes(finding: Finding) -> list[str]:
    """The classes a finding is about: its cycle, or its lock and held classes."""
    if finding.cycle:
        return list(finding.cycle)
    return [name for name in (finding.lock, finding.held) if name]


# -- reading ------------------------------------------------------------------------


def load_suppress_file(path: str) -> Config:
    """A `--suppress` TOML file: the keys of `[tool.lockcheck]` at its top level (or a pyproject.toml)."""
    doc = _read_toml(path)
    table = doc.get("tool", {}).get("lockcheck") if isinstance(doc.get("tool"), dict) else None
    return config_from_table(table if isinstance(table, dict) else doc, path)


def find_pyproject(start: str = ".") -> Optional[str]:
    """The nearest pyproject.toml at or above `start` that has a `[tool.lockcheck]` table."""
    here = os.path.abspath(start)
    while True:
        candidate = os.path.join(here, "pyproject.toml")
        if os.path.isfile(candidate):
            try:
                doc = _read_toml(candidate)
            except TraceError:
                return None
            return candidate if isinstance(doc.get("tool"), dict) and "lockcheck" in doc["tool"] else None
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def load_pyproject(path: str) -> Config:
    """`[tool.lockcheck]` of a pyproject.toml (relative paths in it are relative to its folder)."""
    doc = _read_toml(path)
    config = config_from_table(doc.get("tool", {}).get("lockcheck", {}), path)
    if config.order is not None and not os.path.isabs(config.order):
        config.order = os.path.join(os.path.dirname(path), config.order)
    return config


def load_config(suppress: Optional[str] = None, pyproject: Optional[str] = None,
                use_pyproject: bool = True) -> Config:
    """`[tool.lockcheck]` of the nearest pyproject.toml (unless disabled) plus a `--suppress` file."""
    config = Config()
    if use_pyproject:
        path = pyproject or find_pyproject()
        if path is not None:
            config.extend(load_pyproject(path))
    if suppress is not None:
        config.extend(load_suppress_file(suppress))
    return config


def config_from_table(table: Any, file: str) -> Config:
    """Build a Config from the `[tool.lockcheck]` table (a dict), naming the bad key on error."""
    if not isinstance(table, dict):
        raise TraceError(file, None, None, "[tool.lockcheck] must be a table")
    config = Config(files=[file])
    unknown = sorted(set(table) - {"suppress", "alias", "order"})
    if unknown:
        raise TraceError(file, None, None, f"unknown lockcheck setting {unknown[0]!r} "
                                           "(expected suppress, alias, order)")
    rules = table.get("suppress", [])
    if not isinstance(rules, list):
        raise TraceError(file, None, None, "suppress: expected a list of {kind=..., classes=[...]} tables")
    for i, rule in enumerate(rules):
        where = f"{file}: suppress[{i}]"
        if not isinstance(rule, dict):
            raise TraceError(file, None, None, f"suppress[{i}]: expected a table {{kind=..., classes=[...]}}")
        extra = sorted(set(rule) - {"kind", "classes", "reason"})
        if extra:
            raise TraceError(file, None, None, f"suppress[{i}]: unknown key {extra[0]!r} (expected kind, classes, reason)")
        kind = rule.get("kind", "*")
        classes = rule.get("classes", [])
        if isinstance(classes, str):
            classes = [classes]
        if not isinstance(kind, str) or not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
            raise TraceError(file, None, None, f"suppress[{i}]: kind must be a string and classes a list of strings")
        if kind == "*" and not classes:
            raise TraceError(file, None, None, f"suppress[{i}]: give a kind or classes (this would accept everything)")
        config.suppressions.append(Suppression(kind, tuple(classes), where, rule.get("reason")))
    aliases = table.get("alias", [])
    if isinstance(aliases, dict):
        aliases = [aliases]
    if not isinstance(aliases, list):
        raise TraceError(file, None, None, "alias: expected [[alias]] tables with pattern and class")
    for i, alias in enumerate(aliases):
        if not isinstance(alias, dict) or not isinstance(alias.get("pattern"), str) \
                or not isinstance(alias.get("class"), str):
            raise TraceError(file, None, None, f"alias[{i}]: needs pattern (a regex) and class (a string)")
        try:
            pattern = re.compile(alias["pattern"])
            pattern.fullmatch("")  # compile-time errors only; expand() is checked on first use
        except re.error as err:
            raise TraceError(file, None, None, f"alias[{i}]: bad pattern {alias['pattern']!r}: {err}") from None
        config.aliases.append(Alias(pattern, alias["class"], f"{file}: alias[{i}]"))
    order = table.get("order")
    if order is not None and not isinstance(order, str):
        raise TraceError(file, None, None, "order: expected the path of a lockcheck.order file")
    config.order = order
    return config


_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")


def _read_toml(path: str) -> dict:
    try:
        with open(path, "rb") as stream:
            return tomllib.load(stream)
    except OSError as err:
        raise TraceError(path, None, None, f"cannot read: {err.strerror}") from None
    except tomllib.TOMLDecodeError as err:
        message = str(err)
        where = _TOML_POSITION.search(message)
        line = int(where.group(1)) if where else None
        col = int(where.group(2)) if where else None
        raise TraceError(path, line, col, f"invalid TOML: {_TOML_POSITION.sub('', message).strip()}") from None
