"""Event classes: the names lockcheck gives waits (a thread's end, a future, a queue...).

`lockcheck.python.dept` makes them (it patches the waitable types); the reports only need to
know a name is one and what completes it.  Kept here, apart from the patching, so the report
modules below `dept` can ask without importing it.
"""

from __future__ import annotations

import re
from typing import Optional

#: event class -> (what completes it, where the object was made): the report's "waits" lines
EVENTS: dict[str, tuple[str, str]] = {}

#: what completes each kind of event (the report's words)
_COMPLETES = {
    "Thread": "the end of the thread made at {site}",
    "Future": "the future made at {site} (its work item, or set_result)",
    "Queue": "a put() into the queue made at {site}",
    "Queue.join": "task_done() of every item of the queue made at {site}",
    "Event": "set() of the Event made at {site}",
    "Condition": "notify() of the Condition made at {site}",
    "asyncio.Event": "set() of the asyncio.Event made at {site}",
    "asyncio.Queue": "a put into the asyncio.Queue made at {site}",
    "asyncio.Queue.join": "task_done() of every item of the asyncio.Queue made at {site}",
}

#: an event class's name, for the graphs of other processes (xdist workers, saved graphs)
_EVENT_NAME = re.compile(r"^((?:asyncio\.)?(?:Thread|Future|Queue(?:\.join)?|Event|Condition))\(.+\)(?:/\d)?$")


def is_event(cls: str) -> bool:
    """Whether a class of the graph is an event class (made by a wait), not a lock."""
    return cls in EVENTS or _EVENT_NAME.match(cls) is not None


def describe(cls: str) -> Optional[str]:
    """`Thread(test_x.t)` -> "the end of the thread made at test_x.py:9" (None for a lock class).

    A class made in another process (an xdist worker) is known by its name only: its kind
    says what completes it, and "its creation site" stands for the site.
    """
    entry = EVENTS.get(cls)
    if entry is None:
        match = _EVENT_NAME.match(cls)
        if match is None:
            return None
        entry = (match.group(1), "its creation site")
    kind, site = entry
    return _COMPLETES.get(kind, "{site}").format(site=site)
