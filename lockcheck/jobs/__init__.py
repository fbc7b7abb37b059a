"""`--jobs N` and `--dask ADDRESS`: one check spread over processes (or a cluster), findings unchanged.

Lockdep's verdicts depend on the order of the whole input: a dependency is
checked against the graph as it stands when it is first seen, a chain is
validated the first time any task builds it, a usage bit is validated when
it is first set.  What a task holds, though, depends on that task's events
only.  So the work splits in two: a **map**, in workers (`map_shards`),
each reading one file or the share of one file's tasks that a part owns
(`owner`) with a private checker -- the fast path and the compiled core
included -- and a **merge**, in lockcheck's process, that puts the parts
together in trace order (file, then line).  A check first tries the cheap
merge, of summaries; where a summary cannot vouch for the result it is done
again with the exact one, which replays events.

Summaries (`SummaryChecker`, `merge_summaries`)
-----------------------------------------------

A part applies every event of its tasks to its private checker, and records
what the event did to the state the tasks share, with its place in the
trace: a class met for the first time (CLASS), a usage bit set for the
first time (USAGE, with the lock's read mode and the evidence), a chain key
validated for the first time (CHAIN: whether it may be cached, and every
`check_prev_add` call of its validation -- prev and next class and read
mode, distance, evidence of the event and of prev's acquisition), an irq
note (NOTE).  The part adds no dependency to its own graph and validates no
usage bit; any finding it raises ends the try (`Unsure`).  The merge applies
all parts' records in trace order to the session's checker: a class is
added; a usage bit not yet set is set and validated on the merged graph
(`IrqValidator.mark_lock_irq`); a chain the merged cache lacks is cached and
its calls are made -- `Checker.check_prev_add` itself, which searches the
merged graph for a cycle and an irq inversion before adding the dependency
-- and a chain the cache has is a hit; anything that would report raises
`Unsure` instead.

Why that is the sequential run, when nothing raised.  Induction over the
trace: before each event, the merged graph, chain cache and usage bits are
the sequential run's at that point, and each part's private cache, bits and
classes are a subset of them (they came from the part's own earlier events,
which the sequential run applied too, and no finding kept any of it from
being set).  The event's task state is the sequential one, since it depends
on that task's events alone.  So an event the part takes as a hit (fast
path or checker) is a hit in the sequential run.  An event the part takes
as a miss does in the sequential run what it recorded, restricted to what
the shared state still lacks: the sequential `lock_acquire` adds the class
if new, sets exactly the needed bits the merged graph lacks, in the same
order (`mark_usage`), each validated as the merge validates it; it
validates the chain if and only if the merged cache lacks the key, and then
makes the calls the part recorded, since `check_deadlock` and
`check_prevs_add` read only the task's held locks (no finding: every
`check_prev_add` returns True, so the same calls follow), and each call
does, on the same graph, what the merge's call does.  A key the merged
cache already has came from an earlier event -- of any part -- and is a
hit there.  What decides evidence is therefore the order of application,
which is the trace's: an edge or usage bit keeps the evidence of its first
occurrence in the trace, whichever part saw it, and which of several tasks'
orders closes a cycle, or whether a chain key built under a trylock (the
key leaves trylocks out, the dependencies do not) adds A -> B, is decided
as in one process.  Dictionaries are filled
in the same order too (classes, each class's dependencies), so the saved
graph is the same file.  Where the sequential run would report, the merge
(or a part, for what only the task's state decides) meets the same report
first: the try stops (`Unsure`), and the check is done again -- in one
process for `--jobs` (`REPLAY_LOCALLY`), with the exact replay below for
`--dask` -- so a run with findings pays for the try up to the first of
them, then for the check that reports.  Counts: events,
tasks and unknown releases are sums over the parts; chains validated are
the merge's, cache hits the parts' look-ups minus those; the first 20
notes in trace order are among the first 20 of each part.

Exact replay (`PartChecker`, `replay`)
-------------------------------------

A part keeps every event that is not a hit for its private checker -- a
*candidate* -- with its task's state just before it (held stack, chain
key, irq state) and what the private checker's state was just after it
(`Candidate`).  The merge feeds the candidates of every part, in trace
order, to the session's one checker, each with its task's state put back
first.  That checker sees every event that could add a class, a usage
bit, a chain or a dependency, in the order the sequential run sees them,
on the same graph: it finds the same findings with the same evidence.
After each candidate the merge checks that it left what the private run
left (`Candidate.classes`, `Candidate.chains`): when it did not -- a usage
bit or chain that only a finding on the merged graph kept from being set
-- a later "hit" of that part might be a miss in the whole run, and the run
is done again in one process (`Fallback`).

So is any input the split cannot follow: standard input, kernel logs,
captures whose annotations read a boot's state or watch all tasks at once,
lost events (which reset every task of a CPU), a declared `--order` (its
checker looks at hits too), `--first`, an unreadable or malformed file.  A
fallback gives what `--jobs 1` gives, only slower; `--jobs` never changes
a report.
"""

from __future__ import annotations

from __future__ import annotations

from lockcheck.jobs.cluster import DASK_TIMEOUT, dask_workers, run_dask
from lockcheck.jobs.mapping import MapStream, map_shards, run_pool, stop_streams, stream_pool
from lockcheck.jobs.merge import finish, merge_summaries, replay
from lockcheck.jobs.part import PartChecker
from lockcheck.jobs.shards import STREAM_BATCH, Fallback, MapResult, Shard, Unsure, owner, plan
from lockcheck.jobs.summary import SummaryChecker

#: where the summaries cannot vouch (`Unsure`): True, `--jobs` replays the parts exactly (as
#: `--dask` always does); False, it checks in one process -- with few cores the exact replay's merge,
#: one process feeding every candidate, costs more than the whole one-process check
REPLAY_LOCALLY = False

__all__ = [
    "DASK_TIMEOUT", "REPLAY_LOCALLY", "STREAM_BATCH", "Fallback", "MapResult", "MapStream", "PartChecker", "Shard",
    "SummaryChecker", "Unsure", "dask_workers", "finish", "map_shards", "merge_summaries", "owner", "plan",
    "replay", "run_dask", "run_pool", "stop_streams", "stream_pool",
]
