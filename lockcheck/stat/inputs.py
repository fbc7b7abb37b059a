"""The inputs of `lockcheck stat`: traces of any format and /proc/lock_stat dumps, as tables.

Each input file is opened once (standard input too) and its first
non-blank lines decide: a /proc/lock_stat dump (`lock_stat version ...`)
is parsed by `dump`, anything else is a trace read by the format readers
and replayed by `collect`.  Several inputs make one table: classes of the
same name are added together (`ClassStats.merge`).

`fold_name` strips what a trace cannot see from a dump's class names (the
`#N` of the Nth class sharing a name, the `/N` subclass) and cuts a
trace's long names where the dump cuts them, so a dump and a capture of
the same boot line up class by class.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Iterable

from lockcheck.stat import dump
from lockcheck.kernel.boot import DIRECTORY_HOOKS
from lockcheck.stat.collect import collect
from lockcheck.stat.model import ClassStats


@dataclass
class Table:
    """Lock classes with what they came from and what was not counted."""

    classes: list[ClassStats] = field(default_factory=list)
    #: one entry per input: {"file", "kind": "trace" | "lock_stat", "format", "events"}
    sources: list[dict] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)
    #: a dump said lock debugging was off (the kernel's `*WARNING*` line)
    warning: bool = False
    #: events read from traces, and how many had a timestamp
    events: int = 0
    timed: int = 0

    @property
    def label(self) -> str:
        return ",".join(source["file"] for source in self.sources) or "-"

    def add(self, other: "Table") -> None:
        """Another input's classes into this table, same names added together."""
        if not self.classes:
            self.classes = list(other.classes)
        else:
            merge_into(self.classes, other.classes)
        self.sources.extend(other.sources)
        self.notes.extend(other.notes)
        self.warning = self.warning or other.warning
        self.events += other.events
        self.timed += other.timed

    def folded(self) -> "Table":
        """The same table with `#N`/`/N` names folded (see `fold_name`)."""
        classes: list[ClassStats] = []
        merge_into(classes, (_renamed(stats, fold_name(stats.name)) for stats in self.classes))
        return Table(classes, self.sources, self.notes, self.warning, self.events, self.timed)


def fold_name(name: str) -> str:
    """A class name as both a dump and a trace can show it: cut as lock_stat cuts it, no `#N`, no `/N`.

    >>> fold_name("&type->i_mutex_dir_key#2/1"), fold_name("sb_writers#3"), fold_name("rcu_node_0")
    ('&type->i_mutex_dir_key', 'sb_writers', 'rcu_node_0')
    >>> fold_name("(work_completion)(&(&map->track.rwork)->work)")
    '(work_completion)(&(&map->track.rwork'
    """
    from lockcheck.kernel.state import split_class_name
    from lockcheck.stat.render import display_name

    return split_class_name(display_name(name))[0]


def _renamed(stats: ClassStats, name: str, copy: bool = False) -> ClassStats:
    if stats.name == name and not copy:
        return stats
    out = ClassStats(name)
    out.merge(stats)
    return out


def merge_into(classes: list[ClassStats], more: Iterable[ClassStats]) -> None:
    """Add MORE to CLASSES by name (the first of a name is copied before it is added to)."""
    index = {stats.name: i for i, stats in enumerate(classes)}
    owned: set[int] = set()  # entries already copied (the inputs' own objects are never changed)
    for stats in more:
        i = index.get(stats.name)
        if i is None:
            index[stats.name] = len(classes)
            classes.append(stats)
            continue
        if i not in owned:
            classes[i] = _renamed(classes[i], stats.name, copy=True)
            owned.add(i)
        classes[i].merge(stats)


def load(paths: list[str], input_format: str = "auto", contention: str = "auto", jobs: int = 1) -> Table:
    """One table from every input (directories expanded, each file classified on its own).

    A file's table depends on that file only (a run's tasks and lock
    objects end with it), so with `jobs` > 1 the files are read in that
    many processes and their tables added in input order: the same table.
    """
    from lockcheck.readers import inputs

    table = Table()
    for part in _tables(inputs.expand(list(paths), DIRECTORY_HOOKS), input_format, contention, jobs):
        table.add(part)
    return table


def _tables(items: list, input_format: str, contention: str, jobs: int) -> Iterable[Table]:
    """The tables of expanded inputs, in order; standard input is read here, never in a worker."""
    import functools

    from lockcheck.util import pool
    from lockcheck.readers.source import STDIN

    if jobs < 2 or any(item.path == STDIN for item in items):
        return (_load_input(item, input_format, contention) for item in items)
    return pool.ordered_map(functools.partial(_load_input, input_format=input_format, contention=contention),
                            items, jobs)


def _load_input(item, input_format: str, contention: str = "auto") -> Table:
    """The table of an expanded input; a file of a directory that stat cannot read gives only a note."""
    from lockcheck.readers import inputs

    if item.kind == inputs.ERROR:
        raise item.error
    if item.kind in (inputs.SKIP, inputs.DUMP):
        return Table(notes=[item.skip_note()])
    return load_one(item.path, input_format, contention)


def load_one(path: str, input_format: str = "auto", contention: str = "auto") -> Table:
    """The table of one file: a /proc/lock_stat dump or a trace (CONTENTION: see `collect.LockStats`)."""
    from lockcheck import readers
    from lockcheck.readers.ftrace import ReaderStats
    from lockcheck.readers.source import open_lines

    name, lines = open_lines(path)
    try:
        head, lines = readers._peek(lines)
        if input_format == "auto" and head and dump.is_lock_stat(head[0]):
            reader = dump.DumpReader(name)
            classes = list(reader.parse(lines))
            source = {"file": name, "kind": "lock_stat", "format": "lock_stat", "events": None}
            return Table(classes, [source], warning=reader.warning)
        if input_format == "auto" and readers.inputs.is_dump_head(head):  # standard input: not known before
            return Table(notes=[f"{name}: a /proc/lockdep dump holds no lock events (`lockcheck check` merges "
                                "it into the graph)"])
        module = _format(head, input_format)
        if getattr(module, "TAKES_REPORTS", False):  # a kernel log: lockdep reports, no lock events
            return Table(notes=[f"{name}: a kernel log holds no lock events (`lockcheck check` reads its "
                                "lockdep reports)"])
        reader_stats = ReaderStats()
        options: dict = {}
        if getattr(module, "TAKES_STATS", False):
            options["stats"] = reader_stats
        if getattr(module, "TAKES_CONTENTION", False):  # used or counted (see collect.LockStats)
            options["contention"] = True
        stats = collect(module.parse(lines, name, **options), contention)
    finally:
        close = getattr(lines, "close", None)
        if close is not None:
            close()
    source = {"file": name, "kind": "trace", "format": module.NAME, "events": stats.events}
    notes = [f"{name}: {note}" for note in reader_stats.notes() + stats.notes()]
    return Table(list(stats.classes.values()), [source], notes, events=stats.events, timed=stats.timed)


def _format(head: list[str], input_format: str):
    from lockcheck import readers

    if input_format == "auto":
        return readers.detect(head)
    return readers._forced(input_format)


def runs(path: str, input_format: str = "auto", contention: str = "auto", jobs: int = 1) -> list[Table]:
    """One side of a comparison: a file is one run, a directory one run per file in it.

    `A,B,C` (when no file has that name) lists the runs' files.
    """
    import os

    from lockcheck.readers import inputs

    if "," in path and not os.path.exists(path):
        parts: list[str] = [part for part in path.split(",") if part]
    else:
        parts = [path]
    items = [item for item in inputs.expand(parts, DIRECTORY_HOOKS) if item.kind not in (inputs.SKIP, inputs.DUMP)]
    return list(_tables(items, input_format, contention, jobs))
