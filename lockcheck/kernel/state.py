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
layout of the kernel captures in tests/data/kernel-6.1), and returns a `LockdepState`.

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
from typing import TYPE_CHECKING, Iterable, Iterator, Optional, Union

from lockcheck.errors import TraceError
from lockcheck.kernel import proc_lines
from lockcheck.util.grammar import grammar_text
from lockcheck.util import numbers

if TYPE_CHECKING:
    from lockcheck.kernel.bootfiles import KernelReport

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
    if slash and head and _small_number(tail):
        base, subclass = head, int(tail)
    version = 1
    head, hash_, tail = base.rpartition("#")
    if hash_ and head and _small_number(tail):
        base, version = head, int(tail)
    return base, version, subclass


def _small_number(text: str) -> bool:
    """ASCII digits the kernel could have printed (`#²` or a 5000-digit tail is part of the name)."""
    return 0 < len(text) <= 9 and text.isascii() and text.isdigit()


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
    #: held-lock positions between the two (1 for every /proc/lockdep entry, which prints no other)
    distance: int = 1


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
    """What one or more /proc dumps say: classes, direct dependencies, chains, and the files read.

    `stats` (/proc/lockdep_stats) and `report` (the first lockdep report of
    the boot's kernel log, `lockcheck.kernel.bootfiles`) say how far the chains can be
    trusted: lockdep records nothing once it has turned itself off.
    """

    classes: list[LockClass] = field(default_factory=list)
    edges: list[Dependency] = field(default_factory=list)
    chains: list[Chain] = field(default_factory=list)
    files: list[str] = field(default_factory=list)
    stats: dict[str, int] = field(default_factory=dict)
    stats_file: Optional[str] = None
    #: the boot's kernel log, when one was read, and the first lockdep report in it
    log_file: Optional[str] = None
    report: Optional["KernelReport"] = None
    #: whether that log goes back to the boot (its `Linux version` line): else a report may be lost
    log_from_boot: bool = False

    @property
    def debug_locks(self) -> Optional[int]:
        """`debug_locks` of /proc/lockdep_stats: 1 lockdep stayed on, 0 it turned off, None not known."""
        return self.stats.get("debug_locks")

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
    common = proc_lines.scan(line)
    if common is not None:
        return common
    return parse_with_grammar(line, file, lineno)


def parse_with_grammar(line: str, file: str, lineno: int):
    """`_parse_line` by the grammar alone (the definition `proc_lines.scan` is held to)."""
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
            ints = [numbers.count(v, file, lineno, numbers.column_of(line, v), "number") for v in values["INT"]]
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
            context = (numbers.count(text, file, lineno, numbers.column_of(line, text), "irq_context")
                       if numbers.looks_numeric(text) else sum(_CONTEXT_BITS[part] for part in text.split("|")))
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
    """Read a boot's lockdep state (files or directories) into one LockdepState.

    A directory contributes its `lockdep*` files (`lockdep.txt.xz`,
    `lockdep_chains.txt.xz`, `lockdep_stats.txt`) and its kernel log
    (`dmesg*`); a file is recognised by its first lines (`all lock classes:`,
    `all lock chains:`, ` lock-classes:` of /proc/lockdep_stats, or dmesg
    text).
    """
    from lockcheck.readers.source import open_lines

    state = state if state is not None else LockdepState()
    for path in paths:
        if Path(path).is_dir():
            files = sorted(str(p) for p in Path(path).iterdir()
                           if p.is_file() and p.name.startswith(("lockdep", "dmesg")))
            if not any(Path(name).name.startswith("lockdep") for name in files):
                raise TraceError(path, None, None, "no lockdep* files in this directory")
        else:
            files = [path]
        for name in files:
            display, lines = open_lines(name)
            try:
                read_into(state, display, lines)
            finally:
                close = getattr(lines, "close", None)
                if close is not None:
                    close()
    return state


def read_into(state: LockdepState, display: str, lines: Iterator[str]) -> LockdepState:
    """Add one boot file's decoded lines to `state` (what `load` does per file; standard input
    that turned out to be a dump comes here from the readers, already open)."""
    head, lines = _head(lines)
    kind = dump_kind(head)
    if kind == "lockdep":
        items: Iterator = parse_lockdep(lines, display)
    elif kind == "chains":
        items = parse_chains(lines, display)
    elif kind == "stats":
        from lockcheck.kernel.bootfiles import parse_stats

        state.stats.update(parse_stats(lines, display))
        state.stats_file = display
        return state
    elif kind == "log":
        from lockcheck.kernel.bootfiles import scan_log

        scan = scan_log(lines, display)
        report = scan.report
        state.log_file = display
        state.log_from_boot = state.log_from_boot or scan.from_boot
        if report is not None and (state.report is None or
                                   (report.ts or 0.0) < (state.report.ts or 0.0)):
            state.report = report
        return state
    else:
        raise TraceError(display, 1, 1, "expected 'all lock classes:' (/proc/lockdep), 'all lock "
                                        "chains:' (/proc/lockdep_chains), /proc/lockdep_stats or a "
                                        "kernel log")
    for item in items:
        state.add(item)
    state.files.append(display)
    return state


def _head(lines: Iterator[str], count: int = 8) -> tuple[list[str], Iterator[str]]:
    """The first COUNT non-blank lines, and an iterator that still yields every line."""
    import itertools

    buffered: list[str] = []
    head: list[str] = []
    for line in lines:
        buffered.append(line)
        if line.strip():
            head.append(line)
            if len(head) >= count:
                break
    return head, itertools.chain(buffered, lines)


def dump_kind(head: list[str]) -> Optional[str]:
    """What a boot file is, by its first non-blank lines: lockdep, chains, stats, log, or None."""
    from lockcheck.kernel.bootfiles import is_stats, looks_like_kernel_log

    first = head[0].strip() if head else None
    if first == LOCKDEP_TITLE:
        return "lockdep"
    if first == CHAINS_TITLE:
        return "chains"
    if is_stats(head):
        return "stats"
    if looks_like_kernel_log(head):
        return "log"
    return None


# -- the state as a dependency graph ---------------------------------------------------------

#: the task name dependencies and usage taken from a /proc dump carry as evidence
PROC_TASK = "/proc/lockdep"


def usage_bits(usage: str) -> list[int]:
    """Usage bits (`lockcheck.lockdep.usage`) of a /proc/lockdep usage string such as `+.?.`.

    `get_usage_chars()` prints, per irq state (hardirq, softirq), one character
    for the write bit and one for the read bit: `.` neither, `+` ENABLED (taken
    with that irq enabled: irq-unsafe), `-` USED_IN (taken in that irq: irq-safe),
    `?` both.  `USED` is implied: the class was taken.

    >>> from lockcheck.lockdep.usage import ENABLED_HARDIRQ, USED_IN_SOFTIRQ, USED
    >>> usage_bits("+.-.") == [ENABLED_HARDIRQ, USED_IN_SOFTIRQ, USED]
    True
    """
    from lockcheck.lockdep.usage import DIR_MASK, USED

    bits = []
    for i, char in enumerate(usage[:4]):
        base = (i // 2) * 4 + (i % 2)  # state * 4 + read
        if char in "-?":
            bits.append(base)
        if char in "+?":
            bits.append(base | DIR_MASK)
    bits.append(USED)
    return bits


def chain_dependencies(state: LockdepState, unchecked=None) -> list[Dependency]:
    """The dependencies lockdep derived from the chains of /proc/lockdep_chains.

    /proc/lockdep prints only the dependencies of distance 1 (`l_show()`); a
    chain also shows those across a check=0 lock (`&sig->cred_guard_mutex ->
    rcu_read_lock -> init_fs.seq.seqcount` gives a dependency of distance 2).

    A chain is recorded when its last lock is acquired and validated, with
    the held locks of that irq context below it; lockdep's `check_prevs_add`
    then adds `previous -> last` from the nearest held lock that is not a
    check=0 map (`unchecked(name)`, given the name as printed, says which).  That one dependency per chain is certain; the other pairs of a
    chain are not (a held lock below may have been a trylock, which gets no
    dependency of its own: `touch_atime()`'s `sb_start_write_trylock()`),
    and they come from the chains of the shorter stacks when they exist.
    When /proc/lockdep of the same boot is at hand its dependency list is
    exact, and these are not needed.

    >>> state = LockdepState(chains=[Chain(0, (("k1", "A"), ("k2", "rcu_read_lock"), ("k3", "B")), "c", 4)])
    >>> [(d.before_name, d.after_name, d.line) for d in chain_dependencies(state, {"rcu_read_lock"}.__contains__)]
    [('A', 'B', 7)]
    """
    unchecked = unchecked or (lambda name: False)
    deps: list[Dependency] = []
    for chain in state.chains:
        entries = [(k, key, name) for k, (key, name) in enumerate(chain.classes)
                   if not unchecked(name)]
        if len(entries) < 2 or entries[-1][0] != len(chain.classes) - 1:
            continue
        (j, prev_key, prev_name), (k, key, name) = entries[-2], entries[-1]
        if prev_name != name:
            deps.append(Dependency(prev_key, prev_name, key, name, chain.file, chain.line + 1 + k, k - j))
    return deps


def unvalidated_classes(state: LockdepState) -> set[str]:
    """Classes /proc/lockdep lists with no dependency either way and no irq usage: check=0 maps
    (`rcu_read_lock`) and no-validate classes (`&dev->mutex`, `lockdep_set_novalidate_class()`).
    Names as printed: `&dev->mutex#2` is another, validated, class."""
    linked = {dep.before_name for dep in state.edges} | {dep.after_name for dep in state.edges}
    return {cls.name for cls in state.classes if cls.usage.strip(".") == "" and cls.name not in linked}


def dependencies(state: LockdepState, unchecked=None) -> list[Dependency]:
    """Every dependency a state shows: /proc/lockdep's, then the other ones its chains give
    (`chain_dependencies`, with /proc/lockdep's never-validated classes unchecked too)."""
    edges = list(state.edges)
    if state.chains:
        never = unvalidated_classes(state)
        rule = unchecked or (lambda name: False)
        known = {(dep.before_name, dep.after_name) for dep in edges}
        edges += [dep for dep in chain_dependencies(state, lambda name: name in never
                                                    or bool(rule(split_class_name(name)[0])))
                  if (dep.before_name, dep.after_name) not in known]
    return edges


def to_graph(state: LockdepState, graph=None, checker=None, unchecked=None) -> list:
    """Merge a state's classes (with usage) and direct dependencies into a DepGraph; the findings.

    The dependencies of the state's chains (`chain_dependencies`; `unchecked`
    names check=0 maps, and with /proc/lockdep so do its classes that were
    never validated) are added too: those /proc/lockdep does not print, and
    all of them when a chains dump comes alone.

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
    from lockcheck.lockdep.findings import Evidence
    from lockcheck.lockdep.graph import DEP_EN, DepGraph

    if checker is not None:
        graph = checker.graph
    elif graph is None:
        graph = DepGraph()
    for cls in state.classes:
        graph.add_class(cls.name)
        where = Evidence(cls.file, cls.line, PROC_TASK)
        for bit in usage_bits(cls.usage):
            graph.set_usage(cls.name, bit, where)
    edges = dependencies(state, unchecked)
    for chain in state.chains:
        for _, name in chain.classes:
            graph.add_class(name)
    found: list = []
    if checker is None:
        for dep in edges:
            graph.add_dependency(dep.before_name, dep.after_name, DEP_EN, Evidence(dep.file, dep.line, PROC_TASK),
                                 dep.distance, origin=dep.file)
        return found
    from lockcheck.lockdep.observed import add_checked_dependency
    from lockcheck.lockdep.tasks import TaskState

    tasks: dict[str, TaskState] = {}
    for dep in edges:
        task = tasks.get(dep.file)
        if task is None:
            task = tasks[dep.file] = TaskState(dep.file, PROC_TASK)
        found.extend(add_checked_dependency(checker, task, dep.before_name, dep.after_name,
                                            Evidence(dep.file, dep.line, PROC_TASK), dep.distance,
                                            origin=dep.file))
    return found


def group_boots(dumps: list[str]) -> list[list[str]]:
    """Dump files grouped by boot: a directory holding exactly one /proc/lockdep and one
    /proc/lockdep_chains dump is one boot, and so is a directory given as such; any other
    dump is a boot of its own."""
    by_dir: dict[str, list[str]] = {}
    groups: list[list[str]] = []
    for path in dumps:
        if Path(path).is_dir():  # a boot's directory (`--lockdep-state DIR` alone)
            groups.append([path])
        else:
            by_dir.setdefault(str(Path(path).parent), []).append(path)
    for paths in by_dir.values():
        kinds = sorted(_kind_of(path) or "" for path in paths)
        groups.extend([paths] if kinds == ["chains", "lockdep"] else [[path] for path in paths])
    return groups


def _kind_of(path: str) -> Optional[str]:
    from lockcheck.readers.source import open_lines

    _, lines = open_lines(path)
    try:
        head, _ = _head(lines)
        return dump_kind(head)
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()


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
