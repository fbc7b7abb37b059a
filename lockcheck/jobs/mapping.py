"""The map: parts checked in workers (forked processes, or in this process), results
sent back whole or streamed as they are made."""

from __future__ import annotations

import functools
import multiprocessing
import os
from typing import Any, Callable, Iterator, Optional, Sequence

from lockcheck.errors import TraceError
from lockcheck.events import Event
from lockcheck.jobs.part import PartChecker
from lockcheck.jobs.shards import OPEN, Fallback, MapResult, Shard, Unsure, owner
from lockcheck.jobs.summary import SummaryChecker
from lockcheck.jobs.wire import Candidate, _plain
from lockcheck.lockdep.checker import CheckerOptions


def map_shards(options: Any, shards: Sequence[Shard], sink: Optional[Callable[[list], None]] = None,
               summary: bool = False) -> MapResult:
    """Map work: check `shards` in trace order with one private checker; the candidates (or, with
    `summary`, the records of a `SummaryChecker`).

    `options` is the session's `SessionOptions`.  A top-level function of
    plain data in and out, so a process pool or a Dask worker can run it.
    With `sink`, candidates are passed to it in batches as they are made
    (the result then holds none), so the merge can start before the map ends.
    """
    from lockcheck.engine import fast_lt as hotpath
    from lockcheck.readers import ReadContext, inputs, read_all, run_rules
    from lockcheck.report.suppress import load_config

    result = MapResult()
    config = load_config(options.suppress, use_pyproject=options.use_pyproject)
    annotation_options = _annotation_options(options)
    annotator = annotation_options.annotators()
    checker_options = CheckerOptions(first=False, strict_start=options.strict_start,
                                     preempt_rt=getattr(options, "preempt_rt", False))
    checker: Any = SummaryChecker(checker_options) if summary else PartChecker(checker_options)
    checker.sink = sink
    fast_allowed = os.environ.get("LOCKCHECK_FASTPATH") != "0" and not config.aliases
    try:
        for shard in shards:
            checker.shard = shard
            item = inputs.Input(shard.path, inputs.TRACE)
            annotator.add_boots([item], annotation_options)

            def opened(name: str, module, shard: Shard = shard) -> None:
                if getattr(module, "TAKES_REPORTS", False):
                    raise Fallback(f"{name}: a kernel log")
                checker.open_trace(**run_rules(module))
                annotator.open_trace(name, module)
                if summary:
                    checker.records.append(((shard.index, -1, 0), OPEN, name, module.__name__))
                else:
                    checker.candidates.append(Candidate((shard.index, -1, 0), OPEN, name=name,
                                                        module=module.__name__))

            def choose(module, rules_module, shard: Shard = shard):
                probe: Iterator[Event] = iter(())
                if annotator.transform(rules_module, probe) is not probe:
                    raise Fallback(f"{shard.path}: annotations apply to it")
                if not fast_allowed:
                    return None
                if shard.parts == 1:
                    return hotpath.parser(module, checker)
                return hotpath.parser(module, checker, foreign=lambda task: owner(task, shard.parts) != shard.part)

            context = ReadContext(on_open=opened, parallel=False, errors=[], fast=choose)
            events = config.apply_aliases(read_all([item], options.input_format, context))
            for _ in checker.run(events):
                pass
            if context.errors:
                raise Fallback(context.errors[0].format())
            if shard.part == 0:
                result.reader_stats[shard.index] = context.stats
            checker.start_trace()
    except Fallback as why:
        return MapResult(fallback=str(why))
    except TraceError as err:
        return MapResult(fallback=err.format())
    except Unsure as why:
        return MapResult(unsure=str(why))
    if sink is not None:
        checker.flush()
    elif summary:
        result.records = checker.records
        result.validations = checker.stats.chain_hits + checker.stats.chains
    else:
        result.candidates = _plain(checker.candidates)
    if summary:
        result.validations = checker.stats.chain_hits + checker.stats.chains
    result.events = checker.stats.events
    result.tasks = checker.task_count
    result.unknown_releases = checker.stats.unknown_releases
    return result


def _annotation_options(options: Any):
    from lockcheck.kernel.per_boot import AnnotationOptions

    return AnnotationOptions(options.lockdep_state, options.annotations, options.builtin_annotations)


def run_pool(options: Any, groups: list[list[Shard]], workers: Optional[int] = None,
             summary: bool = False) -> list[MapResult]:
    """The map over forked worker processes (one per group, at most `workers`), results in group order
    (`lockcheck.util.pool`: one group, or no `fork`, runs in this process)."""
    from lockcheck.util import pool

    work = functools.partial(map_shards, options, summary=summary)
    return list(pool.ordered_map(work, groups, workers or len(groups)))


class MapStream:
    """One worker's map as it runs: `candidates` yields them in trace order as the worker sends
    them; once it is exhausted, `result` is the worker's `MapResult` (without candidates).

    Raises `Fallback` where the worker gave up (the run goes to one process)
    and `RuntimeError` if the worker failed or died.
    """

    def __init__(self, process: Any, queue: Any) -> None:
        self.process = process
        self._queue = queue
        self.result: Optional[MapResult] = None

    @property
    def records(self) -> Iterator[tuple]:
        """The summary records (`stream_pool(..., summary=True)`), as `candidates` yields candidates."""
        return self.candidates

    @property
    def candidates(self) -> Iterator[tuple]:
        import queue as queues

        while True:
            try:
                kind, payload = self._queue.get(timeout=1.0)
            except queues.Empty:
                if not self.process.is_alive() and self._queue.empty():
                    raise RuntimeError(f"worker process ended unexpectedly (exit status {self.process.exitcode})") \
                        from None
                continue
            if kind == "candidates":
                yield from payload
            elif kind == "done":
                self.result = payload
                return
            elif kind == "fallback":
                raise Fallback(payload)
            elif kind == "unsure":
                raise Unsure(payload)
            else:
                raise RuntimeError(f"worker process failed: {payload}")


def _stream_work(options: Any, shards: list, queue: Any, parent: int, summary: bool = False) -> None:
    """A streaming worker's body: candidates (or records) in batches, then ("done", MapResult) or why not."""
    from lockcheck.util.pool import follow_parent

    follow_parent(parent)
    try:
        result = map_shards(options, shards, sink=lambda batch: queue.put(("candidates", batch)), summary=summary)
        if result.fallback is not None:
            queue.put(("fallback", result.fallback))
        elif result.unsure is not None:
            queue.put(("unsure", result.unsure))
        else:
            queue.put(("done", result))
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which raises it
        queue.put(("crash", f"{type(err).__name__}: {err}"))
    finally:
        queue.close()
        queue.join_thread()


def stream_pool(options: Any, groups: list[list[Shard]], summary: bool = False) -> list[MapStream]:
    """The map over one forked worker per group, each streaming its candidates as it makes them.

    Unlike `run_pool`, the merge (`replay`) can feed the first candidates
    while the workers still read: the merge's share of the work overlaps
    theirs instead of following it.  A worker never waits for the merge (its
    queue buffers what the merge has not taken yet).  Call `stop_streams`
    when done, whatever happened.
    """
    from lockcheck.util.pool import block_stop_signals, unblock_signals

    context = multiprocessing.get_context("fork")
    streams = []
    blocked = block_stop_signals()  # the workers start with them blocked and set their own handlers first
    try:
        for group in groups:
            queue = context.Queue()
            process = context.Process(target=_stream_work, args=(options, group, queue, os.getpid(), summary),
                                      daemon=True)
            process.start()
            streams.append(MapStream(process, queue))
    except BaseException:
        stop_streams(streams)
        raise
    finally:
        unblock_signals(blocked)
    return streams


def stop_streams(streams: list[MapStream]) -> None:
    """End the workers of `streams` (finished or not) and free their queues."""
    for stream in streams:
        if stream.process.is_alive():
            stream.process.terminate()
    for stream in streams:
        stream.process.join()
        stream._queue.close()
        stream._queue.cancel_join_thread()
