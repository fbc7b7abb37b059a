"""Threads a test leaves running when the last test ends.

Python waits for every non-daemon thread at exit, after pytest has printed
its summary and after lockcheck has stopped tracking: a lock-order inversion
such a thread makes then was never reported.  So before the summary the
session waits for them itself, up to `lockcheck_thread_wait` seconds in all
(Python would wait for them anyway), and what they did is checked as
findings outside any test.  Threads that outlive the wait are named in a
note: what they do after it is not checked.

An idle `ThreadPoolExecutor` worker is not waited for: it ends only when
the interpreter's exit hooks shut its executor down, after the session.
"""

from __future__ import annotations

import threading
import time


def running_now() -> frozenset[int]:
    """The threads that exist before the session runs any test (pytest's, plugins'): never waited for."""
    return frozenset(t.ident for t in threading.enumerate() if t.ident is not None)


def _waited_for(thread: threading.Thread, before: frozenset[int]) -> bool:
    if thread.daemon or thread is threading.current_thread() or thread.ident in before:
        return False
    target = getattr(thread, "_target", None)
    return getattr(target, "__module__", None) != "concurrent.futures.thread"


def join_lingering(before: frozenset[int], limit: float) -> tuple[list[str], list[str]]:
    """Wait up to LIMIT seconds in all for the non-daemon threads the session started that still
    run; the names of those that ended in the wait, and of those still running after it."""
    lingering = [t for t in threading.enumerate() if _waited_for(t, before)]
    deadline = time.monotonic() + limit
    for thread in lingering:
        thread.join(max(0.0, deadline - time.monotonic()))
    ended = [t.name for t in lingering if not t.is_alive()]
    running = [t.name for t in lingering if t.is_alive()]
    return ended, running
