"""The kernel's own lockdep state: `/proc/lockdep` and `/proc/lockdep_chains` as plain data.

The line formats are defined by `grammars/lockdep_proc.lark`.  Both files are
read as streams (gzip/xz/zstd by magic bytes, through
`lockcheck.readers.source.open_lines`):

- `/proc/lockdep`: every lock class (`LockClass`: key, name with its `#N`
  and `/S` suffixes, FD/BD counts, usage characters) and every direct
  dependency (`Dependency`, the ` -> [KEY] NAME` lines under a class);
- `/proc/lockdep_chains`: every validated held-lock chain (`Chain`: irq
  context and its classes, outermost first).

`load(path)` takes either file, or a directory holding `lockdep*` files (the
layout of the shared kernel captures), and returns a `LockdepState`.

>>> state = LockdepState()
>>> for item in parse_lockdep(["all lock classes:", "00ab FD:    1 BD:    2 +.+.: &x->wait#2/1",
...                            " -> [00cd] &rq->__lock"], "lockdep"):
...     state.add(item)
>>> state.classes[0].base, state.classes[0].version, state.classes[0].subclass
('&x->wait', 2, 1)
>>> state.edges[0].before_name, state.edges[0].after_name
('&x->wait#2/1', '&rq->__lock')
"""

from __future__ import annotations

import functools
from dataclasses import dataclass, field
from pathlib import Path
from typing import Iterable, Iterator, Optional, Union

from lockcheck.errors import TraceError
from lockcheck.grammar import grammar_text

LOCKDEP_TITLE = "all lock classes:"
CHAINS_TITLE = "all lock chains:"


def split_class_name(name: str) -> tuple[str, int, int]:
    """`NAME#N/S` -> (NAME, N, S) as `__print_lock_name()` builds it (N is 1 when absent).

    >>> split_class_name("&rq->__lock/1")
    ('&rq->__lock', 1, 1)
    >>> split_class_name("subsys mutex#11")
    ('subsys mutex', 11, 0)
    """
    base, subclass = name, 0
    head, slash, tail = base.rpartition("/")
    if slash and head and tail.isdigit():
        base, subclass = head, int(tail)
    version = 1
    head, hash_, tail = base.rpartition("#")
    if hash_ and head and tail.isdigit():
        base, version = head, int(tail)
    return base, version, subclass


@dataclass(frozen=True)
class LockClass:
    """One class line of /proc/lockdep."""

    key: str  #: the class key address as printed (hashed unless hash-ptr is off)
    name: str  #: as printed, with `#N` and `/S`
    forward: int  #: FD: classes reachable after this one
    backward: int  #: BD: classes that reach this one
    usage: str  #: irq usage characters (`+.+.`)
    ops: Optional[int] = None  #: OPS: (CONFIG_DEBUG_LOCKDEP only)
    file: str = ""
    line: int = 0

    @property
    def base(self) -> str:
        """The name without `#N` and `/S`: what a trace's lock name is compared with."""
        return split_class_name(self.name)[0]

    @property
    def version(self) -> int:
        return split_class_name(self.name)[1]

    @property
    def subclass(self) -> int:
        return split_class_name(self.name)[2]


@dataclass(frozen=True)
class Dependency:
    """A direct dependency of /proc/lockdep: BEFORE was held when AFTER was acquired."""

    before_key: str
    before_name: str
    after_key: str
    after_name: str
    file: str = ""
    line: int = 0


#: irq_context of a chain: lockdep's LOCK_CHAIN_SOFTIRQ_CONTEXT (1) | LOCK_CHAIN_HARDIRQ_CONTEXT (2)
SOFTIRQ_CHAIN, HARDIRQ_CHAIN = 1, 2
_CONTEXT_BITS = {"0": 0, "softirq": SOFTIRQ_CHAIN, "hardirq": HARDIRQ_CHAIN}


@dataclass(frozen=True)
class Chain:
    """A held-lock chain lockdep validated: (key, name) pairs, outermost first."""

    irq_context: int  #: SOFTIRQ_CHAIN | HARDIRQ_CHAIN bits (0: process context)
    classes: tuple[tuple[str, str], ...]
    file: str = ""
    line: int = 0

    @property
    def names(self) -> tuple[str, ...]:
        return tuple(name for _, name in self.classes)


@dataclass
class LockdepState:
    """What one or more /proc dumps say: classes, direct dependencies, chains, and the files read."""

    classes: list[LockClass] = field(default_factory=list)
    edges: list[Dependency] = field(default_factory=list)
    chains: list[Chain] = field(default_factory=list)
    files: list[str] = field(default_factory=list)

    def add(self, item: Union[LockClass, Dependency, Chain]) -> None:
        if isinstance(item, LockClass):
            self.classes.append(item)
        elif isinstance(item, Dependency):
            self.edges.append(item)
        else:
            self.chains.append(item)

    def class_names(self) -> set[str]:
        return {cls.name for cls in self.classes}


@functools.lru_cache(maxsize=None)
def _parser():
    from lark import Lark

    return Lark(grammar_text("lockdep_proc.lark"), parser="lalr", lexer="contextual", maybe_placeholders=False)


def _parse_line(line: str, file: str, lineno: int):
    """(rule, {TERMINAL: [values]}) of one line; TraceError with the column otherwise."""
    from lark import Token
    from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

    try:
        tree = _parser().parse(line)
    except UnexpectedToken as exc:
        column = len(line) + 1 if exc.token.type == "$END" else exc.column
        raise TraceError(file, lineno, column, f"unexpected {str(exc.token)[:20]!r} in a /proc/lockdep line",
                         source=line) from None
    except (UnexpectedCharacters, UnexpectedInput) as exc:
        raise TraceError(file, lineno, getattr(exc, "column", None), "not a /proc/lockdep or /proc/lockdep_chains line",
                         source=line) from None
    node = tree.children[0]
    values: dict[str, list[str]] = {}
    for tok in node.children:
        if isinstance(tok, Token):
            values.setdefault(tok.type, []).append(tok.value)
    return node.data, values


def parse_lockdep(lines: Iterable[str], file: str = "<lockdep>") -> Iterator[Union[LockClass, Dependency]]:
    """Classes and direct dependencies of /proc/lockdep text, in file order."""
    current: Optional[LockClass] = None
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        rule, values = _parse_line(line.rstrip(), file, lineno)
        if rule == "title":
            if values["TITLE"][0] != LOCKDEP_TITLE:
                raise TraceError(file, lineno, 1, "this is /proc/lockdep_chains, not /proc/lockdep", source=line)
        elif rule == "class_line":
            ints = [int(v) for v in values["INT"]]
            ops = ints.pop(0) if len(ints) == 3 else None
            current = LockClass(values["KEY"][0], values["NAME"][0], ints[0], ints[1], values["USAGE"][0], ops,
                                file, lineno)
            yield current
        elif rule == "edge_line":
            if current is None:
                raise TraceError(file, lineno, 2, "a dependency before any class", source=line)
            yield Dependency(current.key, current.name, values["KEY"][0], values["NAME"][0], file, lineno)
        else:
            raise TraceError(file, lineno, 1, "a /proc/lockdep_chains line in /proc/lockdep", source=line)


def parse_chains(lines: Iterable[str], file: str = "<lockdep_chains>") -> Iterator[Chain]:
    """Chains of /proc/lockdep_chains text, in file order."""
    context: Optional[int] = None
    start = 0
    classes: list[tuple[str, str]] = []
    for lineno, line in enumerate(lines, 1):
        if not line.strip():
            continue
        rule, values = _parse_line(line.rstrip(), file, lineno)
        if rule == "title":
            if values["TITLE"][0] != CHAINS_TITLE:
                raise TraceError(file, lineno, 1, "this is /proc/lockdep, not /proc/lockdep_chains", source=line)
        elif rule == "context_line":
            if context is not None:
                yield Chain(context, tuple(classes), file, start)
            text = values["CONTEXT"][0]
            context = int(text) if text.isdigit() else sum(_CONTEXT_BITS[part] for part in text.split("|"))
            start, classes = lineno, []
        elif rule == "chain_entry":
            if context is None:
                raise TraceError(file, lineno, 1, "a chain entry before any irq_context line", source=line)
            classes.append((values["KEY"][0], values["NAME"][0]))
        else:
            raise TraceError(file, lineno, 1, "a /proc/lockdep line in /proc/lockdep_chains", source=line)
    if context is not None:
        yield Chain(context, tuple(classes), file, start)


def _first_line(lines: Iterator[str]) -> tuple[Optional[str], Iterator[str]]:
    import itertools

    for line in lines:
        if line.strip():
            return line.strip(), itertools.chain([line], lines)
    return None, iter(())


def load(*paths: str, state: Optional[LockdepState] = None) -> LockdepState:
    """Read /proc/lockdep and /proc/lockdep_chains dumps (files or directories) into one state.

    A directory contributes its files named `lockdep*` (`lockdep.txt.xz`,
    `lockdep_chains.txt.xz`, not `lockdep_stats.txt`); a file is recognised
    by its first line (`all lock classes:` / `all lock chains:`).
    """
    from lockcheck.readers.source import open_lines

    state = state if state is not None else LockdepState()
    for path in paths:
        if Path(path).is_dir():
            files = sorted(str(p) for p in Path(path).iterdir()
                           if p.name.startswith("lockdep") and "stats" not in p.name and p.is_file())
            if not files:
                raise TraceError(path, None, None, "no lockdep* files in this directory")
        else:
            files = [path]
        for name in files:
            display, lines = open_lines(name)
            first, lines = _first_line(lines)
            if first == LOCKDEP_TITLE:
                items: Iterator = parse_lockdep(lines, display)
            elif first == CHAINS_TITLE:
                items = parse_chains(lines, display)
            else:
                raise TraceError(display, 1, 1, "expected 'all lock classes:' (/proc/lockdep) or "
                                                "'all lock chains:' (/proc/lockdep_chains)")
            for item in items:
                state.add(item)
            state.files.append(display)
    return state


# -- the state as a dependency graph ---------------------------------------------------------

#: the task name dependencies and usage taken from a /proc dump carry as evidence
PROC_TASK = "/proc/lockdep"


def usage_bits(usage: str) -> list[int]:
    """Usage bits (`lockcheck.usage`) of a /proc/lockdep usage string such as `+.?.`.

    `get_usage_chars()` prints, per irq state (hardirq, softirq), one character
    for the write bit and one for the read bit: `.` neither, `+` ENABLED (taken
    with that irq enabled: irq-unsafe), `-` USED_IN (taken in that irq: irq-safe),
    `?` both.  `USED` is implied: the class was taken.

    >>> from lockcheck.usage import ENABLED_HARDIRQ, USED_IN_SOFTIRQ, USED
    >>> usage_bits("+.-.") == [ENABLED_HARDIRQ, USED_IN_SOFTIRQ, USED]
    True
    """
    from lockcheck.usage import DIR_MASK, USED

    bits = []
    for i, char in enumerate(usage[:4]):
        base = (i // 2) * 4 + (i % 2)  # state * 4 + read
        if char in "-?":
            bits.append(base)
        if char in "+?":
            bits.append(base | DIR_MASK)
    bits.append(USED)
    return bits


def to_graph(state: LockdepState, graph=None, checker=None) -> list:
    """Merge a state's classes (with usage) and direct dependencies into a DepGraph; the findings.

    Class names are kept as /proc/lockdep prints them (`#N` and `/S`
    included: `sb_writers#3` and `sb_writers#4` are different classes of one
    boot).  Evidence is the `FILE:LINE` of the /proc entry.  /proc/lockdep
    does not print a dependency's read/write type, so each is taken as
    exclusive -> exclusive (`DEP_EN`), the strongest.

    With a `checker` (whose graph is used), every dependency is validated as
    it is added, as lockdep's `check_prev_add` does: one that closes a cycle
    with dependencies already in the graph (from this dump or an earlier one)
    is reported as `circular-dependency` (its chain names each dependency's
    file and line) and not added.  The findings are returned.
    """
    from lockcheck.findings import Evidence
    from lockcheck.graph import DEP_EN, DepGraph

    if checker is not None:
        graph = checker.graph
    elif graph is None:
        graph = DepGraph()
    for cls in state.classes:
        graph.add_class(cls.name)
        where = Evidence(cls.file, cls.line, PROC_TASK)
        for bit in usage_bits(cls.usage):
            graph.set_usage(cls.name, bit, where)
    found: list = []
    if checker is None:
        for dep in state.edges:
            graph.add_dependency(dep.before_name, dep.after_name, DEP_EN, Evidence(dep.file, dep.line, PROC_TASK),
                                 origin=dep.file)
        return found
    from lockcheck.observed import add_checked_dependency
    from lockcheck.tasks import TaskState

    tasks: dict[str, TaskState] = {}
    for dep in state.edges:
        task = tasks.get(dep.file)
        if task is None:
            task = tasks[dep.file] = TaskState(dep.file, PROC_TASK)
        found.extend(add_checked_dependency(checker, task, dep.before_name, dep.after_name,
                                            Evidence(dep.file, dep.line, PROC_TASK), origin=dep.file))
    return found

def is_dump(path: str) -> bool:
    """Whether a file is a /proc/lockdep or /proc/lockdep_chains dump (by its first non-blank line)."""
    from lockcheck.readers.source import STDIN, open_lines

    if path == STDIN or Path(path).is_dir():
        return False
    try:
        _, lines = open_lines(path)
    except (TraceError, OSError):
        return False
    try:
        first, _ = _first_line(lines)
    except (TraceError, OSError, UnicodeDecodeError):
        return False
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()
    return first in (LOCKDEP_TITLE, CHAINS_TITLE)
