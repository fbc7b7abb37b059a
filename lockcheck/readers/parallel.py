"""Reading a large trace in a second process, so parsing and checking use two cores.

Parsing a line costs about as much as checking its event, so on a
multi-core machine the reader runs in a forked worker that sends events,
as tuples of their fields, in batches through a pipe; the checker's process
only rebuilds them.  Order is kept (one worker, one pipe), errors arrive as
the same `TraceError` after every event before the bad line, and the
reader's statistics come back at the end.  Anything unusual (no `fork`, one
CPU, a small file, standard input) reads in-process instead: the result is
the same, only the speed differs.
"""

from __future__ import annotations

import multiprocessing
import os
from itertools import starmap
from operator import attrgetter
from types import ModuleType
from typing import Iterator, Optional

from lockcheck.errors import TraceError
from lockcheck.util.pool import block_stop_signals, follow_parent, unblock_signals
from lockcheck.events import Event

#: prctl(2) option: the signal sent to this process when its parent dies
#: files smaller than this are read in-process (starting a worker costs ~20 ms)
PARALLEL_MIN_BYTES = 4 << 20
#: events per message through the pipe
BATCH = 2048

_FIELDS = attrgetter(*Event.__slots__)


def worth_it(path: str) -> bool:
    """Whether `path` is a regular file big enough, and the machine has a second CPU and `fork`."""
    if os.environ.get("LOCKCHECK_JOBS") == "1":
        return False
    if (os.cpu_count() or 1) < 2 or "fork" not in multiprocessing.get_all_start_methods():
        return False
    try:
        return os.path.isfile(path) and os.path.getsize(path) >= PARALLEL_MIN_BYTES
    except OSError:
        return False


def read_in_worker(path: str, module: ModuleType, stats: Optional[object] = None,
                   position: Optional[list] = None) -> Iterator[Event]:
    """The events of `path` parsed by `module` in a worker process, in order.

    `stats`, when given, is updated (merged) with the worker's reader
    statistics once the file has been read; `position[0]`, when given, is
    kept at the bytes of the file the worker has read (for a progress line).
    """
    for batch in read_batches_in_worker(path, module, stats, position):
        yield from starmap(Event, batch)


def read_batches_in_worker(path: str, module: ModuleType, stats: Optional[object] = None,
                           position: Optional[list] = None) -> Iterator[list]:
    """`read_in_worker`, as the batches of field tuples the worker sends (`Event(*fields)` is the
    event): the capture fast path (`lockcheck.engine.fast_capture`) applies most without an `Event`."""
    context = multiprocessing.get_context("fork")
    receiver, sender = context.Pipe(duplex=False)
    worker = context.Process(target=_work, args=(path, module.__name__, sender, stats is not None, receiver,
                                                 os.getpid()), daemon=True)
    blocked = block_stop_signals()  # the worker starts with them blocked and sets its own handlers first
    try:
        worker.start()
    finally:
        unblock_signals(blocked)
    sender.close()
    try:
        while True:
            try:
                kind, payload = receiver.recv()
            except EOFError:
                raise TraceError(path, None, None, "the reader process ended unexpectedly") from None
            if kind == "events":
                batch, offset = payload
                if position is not None:
                    position[0] = offset
                yield batch
            elif kind == "done":
                if stats is not None and payload is not None:
                    stats.merge(payload)
                return
            elif kind == "error":
                raise TraceError(*payload)
            else:  # "crash": a bug in a reader; re-raised here so it is not lost
                raise RuntimeError(f"reader process failed: {payload}")
    finally:
        receiver.close()
        if worker.is_alive():
            worker.terminate()
        worker.join()


def _work(path: str, module_name: str, sender, want_stats: bool, receiver=None,
          parent: Optional[int] = None) -> None:
    """Worker body: parse, send batches of field tuples, then ("done", stats) or an error."""
    import importlib

    from lockcheck.readers import source

    if receiver is not None:
        receiver.close()  # our copy of the read end: with it open, a dead parent's pipe never breaks
    if parent is not None:
        follow_parent(parent)
    try:
        module = importlib.import_module(module_name)
        tells: list = []
        name, lines = source.open_lines(path, tells)
        tell = tells[0]
        kwargs = {}
        stats = None
        if want_stats and getattr(module, "TAKES_STATS", False):
            from lockcheck.readers.ftrace import ReaderStats

            stats = ReaderStats()
            kwargs["stats"] = stats
        batch = []
        append = batch.append
        if getattr(module, "PARSES_FIELDS", False):  # the reader builds the tuples itself
            kwargs["fields"] = True
            items = module.parse(lines, name, **kwargs)
        else:
            items = map(_FIELDS, module.parse(lines, name, **kwargs))
        try:
            for item in items:
                append(item)
                if len(batch) >= BATCH:
                    sender.send(("events", (batch, tell())))
                    batch = []
                    append = batch.append
        except TraceError as err:
            if batch:
                sender.send(("events", (batch, tell())))
            sender.send(("error", (err.file, err.line, err.col, err.message, err.source)))
            return
        if batch:
            sender.send(("events", (batch, tell())))
        sender.send(("done", stats))
    except TraceError as err:
        sender.send(("error", (err.file, err.line, err.col, err.message, err.source)))
    except BaseException as err:  # noqa: BLE001 - reported to the parent, which raises it
        try:
            sender.send(("crash", f"{type(err).__name__}: {err}"))
        except OSError:
            pass
    finally:
        sender.close()
