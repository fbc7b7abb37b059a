"""The map on a Dask distributed cluster (`--dask ADDRESS`).

The address is checked before Dask sees it, and the scheduler is reached
within `--dask-timeout` seconds (default `DASK_TIMEOUT`): a typo, a closed
port or a port that accepts and never answers is one line and exit status 2,
in seconds, not a traceback after a minute.
"""

from __future__ import annotations

import socket
import sys
import threading
from typing import Any
from urllib.parse import urlsplit

from lockcheck.errors import UsageError
from lockcheck.jobs.mapping import map_shards
from lockcheck.jobs.shards import MapResult, Shard

#: seconds to wait for a Dask scheduler to answer (`--dask-timeout`)
DASK_TIMEOUT = 5.0

#: address schemes a scheduler in another process can be reached by (Dask's `inproc` is this process)
SCHEMES = ("tcp", "tls", "ws", "wss", "ucx")


def check_address(address: str, inproc: bool = False) -> tuple[str, str, int]:
    """`(scheme, host, port)` of a scheduler address, or a UsageError saying what is wrong with it.

    `inproc`: a scheduler in this process is fine too (`SessionOptions.dask` given by a program
    that runs a LocalCluster without processes); the command line has none to name."""
    if inproc and address.startswith("inproc://"):
        return "inproc", "", 0
    if not address or not address.strip():
        raise UsageError("--dask: an address is required (tcp://HOST:PORT)")
    text = address if "://" in address else f"tcp://{address}"
    try:
        parts = urlsplit(text)
        port = parts.port
    except ValueError as err:
        raise UsageError(f"--dask {address}: not a scheduler address ({err}); expected tcp://HOST:PORT") from None
    if parts.scheme not in SCHEMES:
        where = " (inproc:// is a scheduler inside one process)" if parts.scheme == "inproc" else ""
        raise UsageError(f"--dask {address}: unknown scheme {parts.scheme!r}{where}; expected one of "
                         f"{', '.join(s + '://' for s in SCHEMES)}")
    if not parts.hostname:
        raise UsageError(f"--dask {address}: no host; expected {parts.scheme}://HOST:PORT")
    if port is None:
        port = 8786  # Dask's default scheduler port
    return parts.scheme, parts.hostname, port


def _reachable(address: str, host: str, port: int, timeout: float) -> None:
    """A TCP connection to the scheduler's port within `timeout`, or one line saying why not."""
    try:
        with socket.create_connection((host, port), timeout=timeout):
            pass
    except OSError as err:
        why = "timed out" if isinstance(err, (TimeoutError, socket.timeout)) else (err.strerror or str(err))
        raise UsageError(f"--dask {address}: cannot reach the scheduler ({why} after at most {timeout:g} s; "
                         "--dask-timeout raises the wait)") from None


def _client(address: str, timeout: float | None = None):
    """A Dask client of the scheduler at `address`; a missing extra, a bad address or a scheduler
    that does not answer is one line and exit status 2, as any bad option is."""
    timeout = DASK_TIMEOUT if timeout is None else timeout
    scheme, host, port = check_address(address, inproc=True)
    if scheme not in ("ucx", "inproc"):
        _reachable(address, host, port, timeout)
    try:
        from distributed import Client
    except ImportError:
        raise UsageError("--dask needs Dask's distributed scheduler: pip install 'pylockdep[dask]'") from None
    return _connect(Client, address, timeout)


def _connect(client_type: Any, address: str, timeout: float):
    """The client, made in a thread given twice `timeout`: a port that accepts and never answers
    makes Dask wait forever, and one that answers garbage makes it fail in any way at all (a
    MemoryError has been seen).  Either is one line; a failed client's finalizer, which would
    complain once more at exit, is silenced (the run ends with that line)."""
    made: dict = {}

    def attempt() -> None:
        try:
            made["client"] = client_type(address, set_as_default=False, timeout=timeout)
        except BaseException as err:  # noqa: BLE001 - any failure is the scheduler's, said in one line
            made["error"] = err

    thread = threading.Thread(target=attempt, name="lockcheck-dask-connect", daemon=True)
    thread.start()
    thread.join(2 * timeout + 1)
    if "client" in made:
        return made["client"]
    sys.unraisablehook = lambda unraisable: None
    if thread.is_alive():
        raise UsageError(f"--dask {address}: the port accepted a connection but no Dask scheduler answered "
                         f"within {timeout:g} s (--dask-timeout raises the wait)")
    err = made.get("error")
    text = " ".join(str(err).split())[:160]
    if isinstance(err, (OSError, TimeoutError)):
        raise UsageError(f"--dask {address}: cannot reach the scheduler ({type(err).__name__}: {text})")
    raise UsageError(f"--dask {address}: what answered is not a Dask scheduler ({type(err).__name__}: {text})")


def run_dask(options: Any, groups: list[list[Shard]], address: str, summary: bool = False) -> list[MapResult]:
    """The map on a Dask distributed cluster at `address` (each worker reads the files by their paths)."""
    with _client(address, getattr(options, "dask_timeout", None)) as client:
        futures = client.map(map_shards, [options] * len(groups), groups, summary=summary, pure=False)
        return client.gather(futures)


def dask_workers(address: str, timeout: float | None = None) -> int:
    """How many threads the cluster at `address` has (how many parts to split into)."""
    with _client(address, timeout) as client:
        return max(1, sum(client.nthreads().values()))
