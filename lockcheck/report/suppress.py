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
    glob = "conn-*"                   # a glob matched against the whole lock name
    class = "conn"

    [[tool.lockcheck.alias]]
    pattern = 'inode#\\d+'           # or a bounded regex (see `bounded_regex`)
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
from lockcheck.lockdep.findings import Finding
from lockcheck.util.textfile import read_text

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
    #: listed by `Config.stale_notes` when it matched nothing (not a rule a recorded session chose)
    stale_listed = True

    def matches(self, finding: Finding) -> bool:
        if not fnmatch.fnmatchcase(finding.kind, self.kind):
            return False
        names = finding_classes(finding)
        return all(any(fnmatch.fnmatchcase(name, pattern) for name in names) for pattern in self.classes)

    def describe(self) -> str:
        return f"kind={self.kind}, classes=[{', '.join(self.classes)}]"


@dataclass
class Alias:
    """`pattern` (a bounded regex, or a glob translated to one) matched against a whole lock name -> `cls`."""

    pattern: re.Pattern
    cls: str
    origin: str
    hits: int = 0
    #: the pattern as written (a glob's text, not its translation)
    source: str = ""
    glob: bool = False

    def apply(self, name: str) -> Optional[str]:
        if not self.glob and len(name) > MAX_ALIASED_NAME:
            return None  # a bounded regex is polynomial in the name's length: keep that bounded too
        match = self.pattern.fullmatch(name)
        if match is None:
            return None
        if self.glob:
            return self.cls
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
    #: `max-per-group`: circular findings of one strongly connected set a text report prints in full
    max_per_group: Optional[int] = None

    def extend(self, other: "Config") -> None:
        self.suppressions.extend(other.suppressions)
        self.aliases.extend(other.aliases)
        self.order = self.order or other.order
        self.max_per_group = other.max_per_group if other.max_per_group is not None else self.max_per_group
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
            if not rule.hits and rule.stale_listed:
                notes.append(f"{rule.origin} ({rule.describe()}) matched nothing; remove it if stale")
        for alias in self.aliases:
            if not alias.hits:
                notes.append(f"{alias.origin} ({alias.source!r} -> {alias.cls!r}) "
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
    doc, text = _read_toml(path)
    table = doc.get("tool", {}).get("lockcheck") if isinstance(doc.get("tool"), dict) else None
    return config_from_table(table if isinstance(table, dict) else doc, path, text)


def find_pyproject(start: str = ".") -> Optional[str]:
    """The nearest pyproject.toml at or above `start` that has a `[tool.lockcheck]` table.

    The search stops at the first pyproject.toml: one that does not parse is
    an error (`TraceError`), not a file without settings, because the
    suppressions it may hold must not be dropped silently.
    """
    here = os.path.abspath(start)
    while True:
        candidate = os.path.join(here, "pyproject.toml")
        if os.path.isfile(candidate):
            doc, _ = _read_toml(candidate)
            return candidate if isinstance(doc.get("tool"), dict) and "lockcheck" in doc["tool"] else None
        parent = os.path.dirname(here)
        if parent == here:
            return None
        here = parent


def load_pyproject(path: str) -> Config:
    """`[tool.lockcheck]` of a pyproject.toml (relative paths in it are relative to its folder)."""
    doc, text = _read_toml(path)
    config = config_from_table(doc.get("tool", {}).get("lockcheck", {}), path, text)
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


def config_from_table(table: Any, file: str, text: str = "") -> Config:
    """Build a Config from the `[tool.lockcheck]` table (a dict), naming the bad key on error.

    `text` is the file's TOML source, used only to give an error the line
    and column of the key it is about.
    """
    def bad(key: str, message: str, nth: int = 0) -> TraceError:
        line, col = _key_position(text, key, nth)
        return TraceError(file, line, col, message)

    if not isinstance(table, dict):
        raise bad("lockcheck", "[tool.lockcheck] must be a table")
    config = Config(files=[file])
    unknown = sorted(set(table) - {"suppress", "alias", "order", "max-per-group"})
    if unknown:
        raise bad(unknown[0], f"unknown lockcheck setting {unknown[0]!r} "
                              "(expected suppress, alias, order, max-per-group)")
    rules = table.get("suppress", [])
    if not isinstance(rules, list):
        raise bad("suppress", "suppress: expected a list of {kind=..., classes=[...]} tables")
    for i, rule in enumerate(rules):
        where = f"{file}: suppress[{i}]"
        if not isinstance(rule, dict):
            raise bad("suppress", f"suppress[{i}]: expected a table {{kind=..., classes=[...]}}")
        extra = sorted(set(rule) - {"kind", "classes", "reason"})
        if extra:
            raise bad(extra[0], f"suppress[{i}]: unknown key {extra[0]!r} (expected kind, classes, reason)")
        kind = rule.get("kind", "*")
        classes = rule.get("classes", [])
        if isinstance(classes, str):
            classes = [classes]
        if not isinstance(kind, str) or not isinstance(classes, list) or not all(isinstance(c, str) for c in classes):
            raise bad("suppress", f"suppress[{i}]: kind must be a string and classes a list of strings")
        if kind == "*" and not classes:
            raise bad("suppress", f"suppress[{i}]: give a kind or classes (this would accept everything)")
        reason = rule.get("reason")
        if reason is not None and not isinstance(reason, str):
            raise bad("reason", f"suppress[{i}]: reason must be a string")
        config.suppressions.append(Suppression(kind, tuple(classes), where, reason))
    aliases = table.get("alias", [])
    if isinstance(aliases, dict):
        aliases = [aliases]
    if not isinstance(aliases, list):
        raise bad("alias", "alias: expected [[alias]] tables with pattern (or glob) and class")
    for i, alias in enumerate(aliases):
        config.aliases.append(_alias(alias, i, file, bad))
    order = table.get("order")
    if order is not None and not isinstance(order, str):
        raise bad("order", "order: expected the path of a lockcheck.order file")
    config.order = order
    limit = table.get("max-per-group")
    if limit is not None and (not isinstance(limit, int) or isinstance(limit, bool) or limit < 0):
        raise bad("max-per-group", "max-per-group: expected a whole number >= 0 (0: never group)")
    config.max_per_group = limit
    return config


def _alias(alias: Any, i: int, file: str, bad) -> Alias:
    """One `[[alias]]` table: `glob` or `pattern` (a bounded regex), and `class`."""
    if not isinstance(alias, dict) or set(alias) - {"pattern", "glob", "class"} \
            or ("pattern" in alias) == ("glob" in alias) or not isinstance(alias.get("class"), str) \
            or not isinstance(alias.get("pattern", alias.get("glob")), str):
        raise bad("alias", f"alias[{i}]: needs pattern (a regex) or glob, and class (a string)", i)
    origin = f"{file}: alias[{i}]"
    if "glob" in alias:
        return Alias(re.compile(fnmatch.translate(alias["glob"])), alias["class"], origin, source=alias["glob"],
                     glob=True)
    try:
        pattern = bounded_regex(alias["pattern"])
    except (re.error, ValueError) as err:
        raise bad("pattern", f"alias[{i}]: bad pattern {alias['pattern']!r}: {err}", i) from None
    return Alias(pattern, alias["class"], origin, source=alias["pattern"])


# -- bounded regular expressions ------------------------------------------------------

#: regex aliases only look at names up to this length (the kernel's KSYM_NAME_LEN)
MAX_ALIASED_NAME = 512
#: quantifiers with no small upper bound (`*`, `+`, `{2,}`, `{1,100}`) a pattern may have
MAX_UNBOUNDED = 2
#: the product of small quantifier ranges and alternatives, a bound on backtracking per position
MAX_CHOICES = 4096

if sys.version_info >= (3, 11):
    from re import _constants as _sre, _parser as _sre_parse  # type: ignore[attr-defined]
else:  # pragma: no cover - Python 3.10
    import sre_constants as _sre
    import sre_parse as _sre_parse

_REPEATS = {_sre.MAX_REPEAT, _sre.MIN_REPEAT} | ({_sre.POSSESSIVE_REPEAT} if hasattr(_sre, "POSSESSIVE_REPEAT") else set())
_ONE_CHAR = {_sre.LITERAL, _sre.NOT_LITERAL, _sre.ANY, _sre.IN, _sre.CATEGORY}
_HARMLESS = _ONE_CHAR | {_sre.AT}


def bounded_regex(pattern: str) -> re.Pattern:
    """Compile an alias regex whose matching time is bounded, or raise ValueError saying why not.

    Python's `re` backtracks: `(a+)+b` takes seconds on a 29-character
    name.  An alias pattern may use literals, character classes, `.`,
    anchors, groups and alternation; a quantifier applies to one character
    or class (`\\d+`, `[a-z]*`), never to a group; at most MAX_UNBOUNDED
    quantifiers are unbounded; no backreferences or lookarounds.  Matching
    is then at worst MAX_CHOICES x n^2 steps for a name of n characters
    (n <= MAX_ALIASED_NAME).  Globs (`glob = "inode#*"`) have no such limits.

    >>> bounded_regex(r"inode#(\\d+)").fullmatch("inode#12").group(1)
    '12'
    >>> bounded_regex(r"(a+)+b")
    Traceback (most recent call last):
    ...
    ValueError: a quantifier may only follow one character or class, not a group (as in (a+)+)
    """
    compiled = re.compile(pattern)
    choices, unbounded = _cost(_sre_parse.parse(pattern))
    if unbounded > MAX_UNBOUNDED:
        raise ValueError(f"more than {MAX_UNBOUNDED} unbounded quantifiers (use a glob)")
    if choices > MAX_CHOICES:
        raise ValueError("too many alternatives and optional parts")
    return compiled


def _cost(items) -> tuple[int, int]:
    """(choices, unbounded quantifiers) of a parsed pattern; ValueError for constructs that backtrack."""
    choices, unbounded = 1, 0
    for op, arg in items:
        if op in _REPEATS:
            low, high, body = arg
            inner = list(body)
            if len(inner) == 1 and inner[0][0] is _sre.SUBPATTERN:
                inner = list(inner[0][1][-1])
            if len(inner) != 1 or inner[0][0] not in _ONE_CHAR:
                raise ValueError("a quantifier may only follow one character or class, not a group (as in (a+)+)")
            if high is _sre.MAXREPEAT or high > 64:
                unbounded += 1
            else:
                choices *= high - low + 1
        elif op is _sre.SUBPATTERN:
            sub_choices, sub_unbounded = _cost(arg[-1])
            choices *= sub_choices
            unbounded += sub_unbounded
        elif op is _sre.BRANCH:
            costs = [_cost(branch) for branch in arg[1]]
            choices *= sum(c for c, _ in costs)
            unbounded += max(u for _, u in costs)
        elif op not in _HARMLESS:
            raise ValueError(f"{str(op).lower().replace('_', ' ')} is not allowed in an alias pattern")
        if choices > MAX_CHOICES:
            raise ValueError("too many alternatives and optional parts")
    return choices, unbounded


# -- TOML -------------------------------------------------------------------------------

_TOML_POSITION = re.compile(r"\(at line (\d+), column (\d+)\)")
#: what a bracket-depth scan of TOML skips: strings (all four kinds) and comments
_TOML_SKIP = r'"""(?:[^\\]|\\.)*?"""|\'\'\'.*?\'\'\'|"(?:[^"\\\n]|\\.)*"|\'[^\'\n]*\'|#[^\n]*'


def _read_toml(path: str) -> tuple[dict, str]:
    """The parsed TOML document of `path` and its text; every problem is a TraceError with a position."""
    text = read_text(path, "TOML file")
    try:
        return tomllib.loads(text), text
    except tomllib.TOMLDecodeError as err:
        message = str(err)
        where = _TOML_POSITION.search(message)
        line = int(where.group(1)) if where else None
        col = int(where.group(2)) if where else None
        raise TraceError(path, line, col, f"invalid TOML: {_TOML_POSITION.sub('', message).strip()}") from None
    except RecursionError:
        line, col = _offset_position(text, _deepest_bracket(text))
        raise TraceError(path, line, col, "invalid TOML: arrays or tables nested too deeply") from None
    except ValueError as err:  # Python's int-string limit on a number of thousands of digits
        match = re.search(r"\d{1000,}", text)
        line, col = _offset_position(text, match.start() if match else -1)
        raise TraceError(path, line, col, f"invalid TOML: number too long ({str(err).split(':')[0]})") from None


def _deepest_bracket(text: str) -> int:
    depth = best = 0
    at = -1
    for match in re.finditer(_TOML_SKIP + r"|[\[\]{}]", text, re.DOTALL):
        char = match.group()
        if char in ("[", "{"):
            depth += 1
            if depth > best:
                best, at = depth, match.start()
        elif char in ("]", "}"):
            depth -= 1
    return at


def _offset_position(text: str, offset: int) -> tuple[Optional[int], Optional[int]]:
    if offset < 0:
        return None, None
    return text.count("\n", 0, offset) + 1, offset - (text.rfind("\n", 0, offset) + 1) + 1


def _key_position(text: str, key: str, nth: int = 0) -> tuple[Optional[int], Optional[int]]:
    """Where a TOML key (or the nth `[[alias]]` header for `alias`) is written, for error lines."""
    if not text:
        return None, None
    if key == "alias":
        headers = list(re.finditer(r"(?m)^[ \t]*\[\[(?:tool\.lockcheck\.)?alias\]\]", text))
        if headers:
            return _offset_position(text, headers[min(nth, len(headers) - 1)].start())
    if key == "lockcheck":
        match = re.search(r"(?m)^[ \t]*\[tool\.lockcheck\]|lockcheck\s*=", text)
        return _offset_position(text, match.start() if match else -1)
    matches = list(re.finditer(r"(?:^|(?<=[\s{,.]))[\"']?" + re.escape(key) + r"[\"']?\s*=", text, re.M))
    if not matches:
        return None, None
    return _offset_position(text, matches[min(nth, len(matches) - 1)].start())
