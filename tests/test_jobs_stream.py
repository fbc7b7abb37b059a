"""The streaming map of `--jobs` (`lockcheck.jobs.stream_pool`): the merge starts while workers read.

`tests/test_jobs.py` holds the split's result to `--jobs 1`'s on every
input; these tests hold the streaming itself: batches sent as they are made
are the candidates a worker would have returned at its end, in the same
order, and a worker that gives up or dies ends the merge with `Fallback` or
an error, never a hang.
"""

from __future__ import annotations

import os
import signal
from pathlib import Path

import pytest

from lockcheck import jobs
from lockcheck.commands.check import SessionOptions
from testdata import ROOT

OPTIONS = SessionOptions(output_format="json", jobs=2, progress=False)


def _trace(tmp_path: Path, tasks: int = 40, rounds: int = 200) -> str:
    """A trace with many candidates: each round new classes, so new chains."""
    lines = ["#lockcheck-trace v1"]
    for r in range(rounds):
        for t in range(tasks):
            lines += [f"T{t} acquire A{r % 50}", f"T{t} acquire B{(r + t) % 60}", f"T{t} release B{(r + t) % 60}",
                      f"T{t} release A{r % 50}"]
    path = tmp_path / "many.lt"
    path.write_text("\n".join(lines) + "\n")
    return str(path)


@pytest.mark.parametrize("parts", [1, 2])
def test_streamed_batches_are_the_candidates_returned_at_the_end(tmp_path: Path, parts: int) -> None:
    path = _trace(tmp_path)
    for part in range(parts):
        shards = [jobs.Shard(0, path, part, parts)]
        whole = jobs.map_shards(OPTIONS, shards)
        batches: list = []
        streamed = jobs.map_shards(OPTIONS, shards, sink=batches.append)
        assert len(whole.candidates) > 2 * jobs.STREAM_BATCH and len(batches) > 2
        assert streamed.candidates == [] and [c for batch in batches for c in batch] == whole.candidates
        assert (streamed.events, streamed.tasks) == (whole.events, whole.tasks)


@pytest.mark.parametrize("parts", [1, 2])
def test_streamed_summaries_are_the_records_returned_at_the_end(tmp_path: Path, parts: int) -> None:
    path = _trace(tmp_path)
    for part in range(parts):
        shards = [jobs.Shard(0, path, part, parts)]
        whole = jobs.map_shards(OPTIONS, shards, summary=True)
        batches: list = []
        streamed = jobs.map_shards(OPTIONS, shards, sink=batches.append, summary=True)
        assert len(whole.records) > 2 * jobs.STREAM_BATCH and len(batches) > 2
        assert streamed.records == [] and [r for batch in batches for r in batch] == whole.records
        assert (streamed.events, streamed.tasks, streamed.validations) == (whole.events, whole.tasks,
                                                                           whole.validations)


def test_a_stream_pool_of_summaries_merges_as_the_pool_that_waits(tmp_path: Path) -> None:
    from lockcheck.lockdep.checker import Checker

    path = _trace(tmp_path)
    groups = jobs.plan([path], [os.path.getsize(path)], 2)
    graphs = []
    for streamed in (True, False):
        checker = Checker()
        if streamed:
            streams = jobs.stream_pool(OPTIONS, groups, summary=True)
            try:
                jobs.merge_summaries(streams, checker, lambda name, module: None)
            finally:
                jobs.stop_streams(streams)
        else:
            jobs.merge_summaries([jobs.map_shards(OPTIONS, group, summary=True) for group in groups], checker,
                                 lambda name, module: None)
        graphs.append([(a, b, sorted(data.items())) for a, b, data in checker.graph.nx.edges(data=True)])
    assert graphs[0] == graphs[1] and len(graphs[0]) > 100


def test_a_worker_that_finds_something_ends_the_summaries(tmp_path: Path) -> None:
    path = tmp_path / "recursive.lt"
    path.write_text("#lockcheck-trace v1\nT1 acquire A\nT1 acquire A\n")
    streams = jobs.stream_pool(OPTIONS, [[jobs.Shard(0, str(path), 0, 2)], [jobs.Shard(0, str(path), 1, 2)]],
                               summary=True)
    try:
        with pytest.raises(jobs.Unsure, match="recursive-locking"):
            for stream in streams:
                list(stream.records)
    finally:
        jobs.stop_streams(streams)


def test_a_stream_pool_gives_each_workers_candidates_then_its_result(tmp_path: Path) -> None:
    path = _trace(tmp_path)
    groups = jobs.plan([path], [os.path.getsize(path)], 2)
    assert len(groups) == 2
    streams = jobs.stream_pool(OPTIONS, groups)
    try:
        got = [list(stream.candidates) for stream in streams]
    finally:
        jobs.stop_streams(streams)
    for group, candidates, stream in zip(groups, got, streams):
        expected = jobs.map_shards(OPTIONS, group)
        assert candidates == expected.candidates
        assert stream.result.events == expected.events and stream.result.candidates == []
    assert all(not stream.process.is_alive() for stream in streams)


def test_a_worker_that_gives_up_is_a_fallback(tmp_path: Path) -> None:
    path = tmp_path / "lost.lt"
    path.write_text("#lockcheck-trace v1\nT1 acquire A\n#lockcheck-lost-events cpu=0\nT2 acquire B\n")
    streams = jobs.stream_pool(OPTIONS, [[jobs.Shard(0, str(path), 0, 2)], [jobs.Shard(0, str(path), 1, 2)]])
    try:
        with pytest.raises(jobs.Fallback, match="lost events"):
            for stream in streams:
                list(stream.candidates)
    finally:
        jobs.stop_streams(streams)


def test_a_worker_that_dies_is_an_error_not_a_hang(tmp_path: Path) -> None:
    path = _trace(tmp_path, rounds=2000)
    streams = jobs.stream_pool(OPTIONS, [[jobs.Shard(0, path, 0, 2)], [jobs.Shard(0, path, 1, 2)]])
    try:
        os.kill(streams[0].process.pid, signal.SIGKILL)
        with pytest.raises(RuntimeError, match="ended unexpectedly"):
            list(streams[0].candidates)
    finally:
        jobs.stop_streams(streams)
    assert all(not stream.process.is_alive() for stream in streams)


def test_the_session_merges_streams(tmp_path: Path, monkeypatch) -> None:
    """A check with --jobs 2 of one file goes through `stream_pool` (not the pool that waits)."""
    from test_jobs import _check, _visible

    path = str(ROOT / "traces" / "mm_take_all_locks.lt")
    used = []
    real = jobs.stream_pool
    monkeypatch.setattr(jobs, "stream_pool", lambda options, groups, summary=False:
                        used.append(len(groups)) or real(options, groups, summary=summary))
    assert _visible(_check([path], 2)) == _visible(_check([path], 1))
    assert used == [2]
