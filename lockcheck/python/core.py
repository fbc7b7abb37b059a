"""The compiled hit path of the tracked locks (lockcheck/python/_tracked.c), loaded once.

Shared by the tracked lock types (whose fields it keeps) and the recorder (which tells it to
forget a thread's task): here, below both, so neither imports the other for it.  Also the
set of lock classes only their holder may release, which both consult.
"""

from __future__ import annotations

import os
from typing import Any


def _load_core() -> Any:
    """The compiled hit path (`lockcheck.python._trackedcore`), or None: not built, or
    `LOCKCHECK_PURE=1` (the pure-Python methods of `lockcheck.python.tracked` are then the
    tracked types' own)."""
    if os.environ.get("LOCKCHECK_PURE") == "1":
        return None
    try:
        from lockcheck.python import _trackedcore
    except ImportError:
        return None
    return _trackedcore


CORE = _load_core()

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
