"""What a split check is made of: shards of the inputs, what a part sends back, and why
a split gives up (`Fallback`: one process; `Unsure`: exact replay)."""

from __future__ import annotations

import heapq
import math
import zlib
from dataclasses import dataclass, field
from typing import Optional

from lockcheck import events as E
from lockcheck.events import Event

#: the kinds of `Candidate`: a file opened (its run begins), or an event for the merge's checker
OPEN, EVENT = 0, 1
_NOTHING: tuple = ()


class Fallback(Exception):
    """The split cannot give the sequential result for these inputs: check them in one process."""


#: the ops of "The rest of lockdep" (docs/trace-format.md)
_MORE_OPS = E.MORE_LOCK_OPS | E.MORE_PLAIN_OPS


def refuse_rest_of_lockdep(ev: Event) -> None:
    """A part follows its own tasks only, but a class's properties (`wait=`, `type=`, `cmp=`) and
    the ops that change a class are shared by every task, and no summary or replay carries them:
    such a trace is checked in one process (docs/trace-format.md says so)."""
    if ev.props is not None or ev.op in _MORE_OPS:
        raise Fallback(f"{ev.location}: {ev.op} with what 'The rest of lockdep' adds")


@dataclass(frozen=True)
class Shard:
    """One unit of map work: the tasks of file `path` that part `part` of `parts` owns."""

    index: int  #: the file's place among the inputs (trace order across files)
    path: str
    part: int = 0
    parts: int = 1


@dataclass
class MapResult:
    """What one group of shards sends back."""

    candidates: list = field(default_factory=list)
    events: int = 0
    tasks: int = 0
    unknown_releases: int = 0
    #: reader statistics of the files this group read as part 0, by file index
    reader_stats: dict = field(default_factory=dict)
    #: why the split cannot serve these inputs (the whole run goes to one process), or None
    fallback: Optional[str] = None
    #: summary mode: the records (`SummaryChecker`), unless streamed
    records: list = field(default_factory=list)
    #: summary mode: acquisitions that looked a chain up (hits and misses: `CheckerStats.chain_hits + chains`)
    validations: int = 0
    #: summary mode: why the summaries cannot serve (the run is done again with exact replay), or None
    unsure: Optional[str] = None


def owner(task: str, parts: int) -> int:
    """The part that checks `task` (a stable hash: the same in every process and on every machine)."""
    return zlib.crc32(task.encode("utf-8", "surrogatepass")) % parts


#: kinds of summary records (`SummaryChecker`): a new class, a usage bit set, a chain validated, a note
CLASS, USAGE, CHAIN, NOTE = 2, 3, 4, 5


class Unsure(Exception):
    """The summaries cannot vouch for the sequential result (a finding, or one that may arise
    where the parts meet): the run is done again, split, with exact replay (`replay`)."""


#: candidates per message when a worker streams them (`stream_pool`)
STREAM_BATCH = 1024


def plan(paths: list[str], sizes: list[int], workers: int, split: bool = True) -> list[list[Shard]]:
    """Shards for `workers` workers, grouped by worker, each group in trace order.

    Fewer files than workers: each file is split by task into enough parts
    to keep every worker busy.  Otherwise whole files, the largest first to
    the least loaded worker.
    """
    n = len(paths)
    if n == 0:
        return []
    if n < workers and split:
        parts = math.ceil(workers / n)
        shards = [Shard(i, path, k, parts) for i, path in enumerate(paths) for k in range(parts)]
        groups: list[list[Shard]] = [[] for _ in range(workers)]
        for j, shard in enumerate(shards):
            groups[j % workers].append(shard)
    else:
        load = [(0, w) for w in range(min(workers, n))]
        groups = [[] for _ in load]
        for i in sorted(range(n), key=lambda i: -sizes[i]):
            total, w = heapq.heappop(load)
            groups[w].append(Shard(i, paths[i]))
            heapq.heappush(load, (total + max(sizes[i], 1), w))
    return [sorted(group, key=lambda s: (s.index, s.part)) for group in groups if group]
