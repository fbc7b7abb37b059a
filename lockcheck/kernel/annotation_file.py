"""The annotation file (`--annotations FILE`, and the built-in `kernel.annotations`): rules
that say what a capture could not (no-check locks, subclasses, nest locks, read modes),
parsed and merged.  docs/annotations.md is its manual."""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Optional


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
