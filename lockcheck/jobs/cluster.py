"""The map on a Dask distributed cluster (`--dask ADDRESS`)."""

from __future__ import annotations

from typing import Any

from lockcheck.jobs.mapping import map_shards
from lockcheck.jobs.shards import MapResult, Shard

#: seconds to wait for a Dask scheduler to answer
DASK_TIMEOUT = 30


def _client(address: str):
    """A Dask client of the scheduler at `address`; a missing extra or a scheduler that does not
    answer is one line and exit status 2, as any bad option is."""
    from lockcheck.errors import UsageError

    try:
        from distributed import Client
    except ImportError:
        raise UsageError("--dask needs Dask's distributed scheduler: pip install 'pylockdep[dask]'") from None
    try:
        return Client(address, set_as_default=False, timeout=DASK_TIMEOUT)
    except (OSError, TimeoutError, ValueError) as err:
        raise UsageError(f"--dask {address}: cannot reach the scheduler ({type(err).__name__}: {err})") from None


def run_dask(options: Any, groups: list[list[Shard]], address: str, summary: bool = False) -> list[MapResult]:
    """The map on a Dask distributed cluster at `address` (each worker reads the files by their paths)."""
    with _client(address) as client:
        futures = client.map(map_shards, [options] * len(groups), groups, summary=summary, pure=False)
        return client.gather(futures)


def dask_workers(address: str) -> int:
    """How many threads the cluster at `address` has (how many parts to split into)."""
    with _client(address) as client:
        return max(1, sum(client.nthreads().values()))
