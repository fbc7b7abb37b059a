"""The compiled hit path of the tracked locks (lockcheck/python/_tracked.c), loaded once.

Shared by the tracked lock types (whose fields it keeps) and the recorder (which tells it to
forget a thread's task): here, below both, so neither imports the other for it.  Also the
set of lock classes only their holder may release, which both consult.
"""

from __future__ import annotations

import os
import sysconfig
from typing import Any, Optional


def free_threaded() -> bool:
    """Whether this CPython is a free-threaded build (3.13t+: `Py_GIL_DISABLED`).  The compiled
    core keeps the recorder's parts, its site and key caches and its free lists in C globals that
    only the GIL guards, and declares no `Py_mod_gil` (importing it there would turn the GIL back
    on for the whole process): on such a build the pure path runs instead."""
    return bool(sysconfig.get_config_var("Py_GIL_DISABLED"))


def _load_core() -> Any:
    """The compiled hit path (`lockcheck.python._trackedcore`), or None: not built, or
    `LOCKCHECK_PURE=1`, or a free-threaded CPython (`free_threaded`); the pure-Python methods of
    `lockcheck.python.tracked` are then the tracked types' own."""
    if os.environ.get("LOCKCHECK_PURE") == "1" or free_threaded():
        return None
    try:
        from lockcheck.python import _trackedcore
    except ImportError:
        return None
    return _trackedcore


CORE = _load_core()


def _setup_async(core: Any) -> None:
    """How the compiled core finds the running asyncio task: `_asyncio.current_task` where it is
    compiled (3.12+); on 3.11 `asyncio.current_task` is Python, which reads
    `_current_tasks[_get_running_loop()]` -- the core reads them itself, when both are C's."""
    import asyncio

    try:
        import _asyncio
    except ImportError:  # an interpreter without asyncio's C half: the Python function it is
        core.setup_async(asyncio.current_task, None, None)
        return
    compiled = getattr(_asyncio, "current_task", None)
    if compiled is not None:
        core.setup_async(compiled, None, None)
        return
    get_loop = getattr(_asyncio, "_get_running_loop", None)
    current = getattr(_asyncio, "_current_tasks", None)
    if asyncio.tasks._current_tasks is current and asyncio.events._get_running_loop is get_loop:
        core.setup_async(asyncio.current_task, get_loop, current)
    else:
        core.setup_async(asyncio.current_task, None, None)


if CORE is not None:
    _setup_async(CORE)


def core_note() -> Optional[str]:
    """What the pytest plugin says once at session start (its header line) when the compiled
    hit path is off for want of a GIL; None otherwise."""
    if CORE is None and free_threaded():
        return ("lockcheck: free-threaded CPython (Py_GIL_DISABLED): the tracked locks' compiled hit path "
                "is off, the pure-Python path runs (the same findings, slower)")
    return None


#: what the modules below the recorder call the recorder they are handed (a
#: `lockcheck.python.recorder.Recorder`): they may not import its module, which imports them
RecorderRef = Any

#: lock classes only their holder may release (RLocks): a thread that ends holding one leaves it
#: held for ever (a finding), where a `Lock` it ends holding may still be released by another
OWNED_CLASSES: set = set()


def core_forget() -> None:
    """The compiled core drops what it cached of the recorder and of each thread's task (the
    recorder stopped, or a thread's task key was dropped: `Recorder.process_started`)."""
    if CORE is not None:
        CORE.forget()
