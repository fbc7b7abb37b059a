"""Work spread over forked worker processes, results in input order, errors as one process gives them.

`lockcheck.jobs` maps the checker's shards with its own pool; commands
whose inputs are independent of each other (`stat`: a file's table does
not depend on the files before it) only need "run this function on each
input, in up to N processes, and give me the results in order".  What is
shared is what makes a worker safe to start from lockcheck's process:
signals blocked across the fork and a worker that dies with its parent
(`follow_parent`), and exceptions that survive the trip
back -- a `TraceError` is rebuilt from its fields (its constructor takes
five arguments, which pickling an exception does not keep), anything else
is re-raised as it was when it pickles, and as a `RuntimeError` naming it
when it does not.
"""

from __future__ import annotations

import multiprocessing
import os
import pickle
import sys
from typing import Any, Callable, Iterator, Sequence, TypeVar

from lockcheck.errors import TraceError

_PR_SET_PDEATHSIG = 1

T = TypeVar("T")
R = TypeVar("R")

_OK, _TRACE_ERROR, _RAISED, _CRASHED = range(4)


def _call(fn: Callable[[T], R], item: T) -> tuple:
    """In a worker: `fn(item)`, or what it raised, as data that crosses the pipe."""
    try:
        return _OK, fn(item)
    except TraceError as err:
        return _TRACE_ERROR, (err.file, err.line, err.col, err.message, err.source)
    except Exception as err:  # noqa: BLE001 - re-raised in the parent, in input order
        try:
            pickle.dumps(err)
        except Exception:  # noqa: BLE001 - an exception that cannot travel travels as its text
            return _CRASHED, f"{type(err).__name__}: {err}"
        return _RAISED, err


def _unwrap(result: tuple) -> Any:
    kind, value = result
    if kind == _OK:
        return value
    if kind == _TRACE_ERROR:
        raise TraceError(*value)
    if kind == _RAISED:
        raise value
    raise RuntimeError(f"worker process failed: {value}")


def machine_limit() -> int:
    """How many worker processes this machine can usefully run at once: four per CPU this
    process may use (at least 8), and no more than its open-file limit leaves room for (each
    worker costs a few descriptors: its pipes and its sentinel)."""
    try:
        cpus = len(os.sched_getaffinity(0))
    except (AttributeError, OSError):
        cpus = os.cpu_count() or 1
    limit = max(8, 4 * cpus)
    try:
        import resource

        soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
        if soft != resource.RLIM_INFINITY:
            limit = min(limit, max(1, (soft - 64) // 8))
    except (ImportError, OSError, ValueError):
        pass
    return limit


def clamp_jobs(requested: int) -> tuple[int, str]:
    """`--jobs N` as this machine can run it: `(processes, note)`, the note empty when N fits."""
    limit = machine_limit()
    if requested <= limit:
        return requested, ""
    return limit, (f"--jobs {requested}: this machine runs at most {limit} worker processes usefully "
                   f"(its CPUs and open-file limit); using {limit} (the findings are the same)")


def usable(workers: int, items: int) -> int:
    """How many processes to start for `items` inputs asked to run in `workers` (0: stay in-process)."""
    if workers < 2 or items < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return 0
    return min(workers, items)


def ordered_map(fn: Callable[[T], R], items: Sequence[T], workers: int) -> Iterator[R]:
    """`map(fn, items)` over up to `workers` forked processes; results (and the first error) in order.

    With one worker, one item or no `fork`, runs in this process: the
    results are the same, only the speed differs.  `fn` must be a
    module-level function (it is pickled by name).
    """
    processes = usable(workers, len(items))
    if not processes:
        yield from map(fn, items)
        return
    context = multiprocessing.get_context("fork")
    blocked = block_stop_signals()  # the workers start with them blocked and set their own handlers first
    try:
        pool = context.Pool(processes, initializer=follow_parent, initargs=(os.getpid(),))
    finally:
        unblock_signals(blocked)
    try:
        for result in pool.imap(_Bound(fn), items, chunksize=1):
            yield _unwrap(result)
        pool.close()
    finally:
        pool.terminate()
        pool.join()


class _Bound:
    """`fn` with `_call` around it, picklable by reference to `fn` (a module-level function)."""

    def __init__(self, fn: Callable) -> None:
        self.fn = fn

    def __call__(self, item: Any) -> tuple:
        return _call(self.fn, item)


# -- a forked worker's lifetime ----------------------------------------------------------------
def _stop_signals() -> set:
    import signal

    return {getattr(signal, name) for name in ("SIGINT", "SIGTERM", "SIGHUP") if hasattr(signal, name)}


_STOP_SIGNALS = _stop_signals()


def block_stop_signals() -> set:
    """Block the stop signals (delivered when unblocked): a forked child must not run the parent's handlers."""
    import signal

    if not hasattr(signal, "pthread_sigmask"):
        return set()
    return _STOP_SIGNALS - signal.pthread_sigmask(signal.SIG_BLOCK, _STOP_SIGNALS)


def unblock_signals(signals: set) -> None:
    import signal

    if signals and hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_UNBLOCK, signals)


def follow_parent(parent: int) -> None:
    """Make this forked worker end with its parent, however the parent ends.

    The parent may be killed (SIGKILL, SIGTERM, SIGHUP: no chance to
    terminate us) or interrupted.  Three guards, so no reader outlives
    lockcheck: the kernel kills us when the parent dies
    (`prctl(PR_SET_PDEATHSIG, SIGKILL)`, Linux; checked against a parent
    that died before the call); a write to a pipe whose only reader died
    fails (the worker closed its copy of the read end); and Ctrl-C, which a
    terminal sends to the whole process group, is left to the parent, which
    stops us itself (SIGTERM, default action restored here).
    """
    import signal

    signal.signal(signal.SIGINT, signal.SIG_IGN)
    for number in (signal.SIGTERM, getattr(signal, "SIGHUP", None)):
        if number is not None:
            signal.signal(number, signal.SIG_DFL)
    unblock_signals(_STOP_SIGNALS)
    if sys.platform.startswith("linux"):
        try:
            import ctypes

            libc = ctypes.CDLL(None, use_errno=True)
            libc.prctl(_PR_SET_PDEATHSIG, signal.SIGKILL, 0, 0, 0)
        except (OSError, AttributeError):  # no prctl: the broken pipe still ends us
            pass
    if os.getppid() != parent:  # the parent died before the guard was set
        os._exit(1)
