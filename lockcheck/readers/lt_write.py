"""Writing `.lt` lines: an `Event` as the line `lockcheck.readers.lt` reads back to the same
event (`lockcheck convert`, the plugin's `--lockcheck-trace`), refusing what the format
cannot carry."""

from __future__ import annotations

from typing import Optional

from lockcheck.events import ACQUIRE, LOCK_OPS, LOST_EVENTS, MODE_NAMES, RUN, WRITE, Event, lock_text, quote_token
from lockcheck.readers import lockdep_keys as more
from lockcheck.readers.lt import _ALLOWED

def format_event(event: Event) -> str:
    """One `.lt` line (without newline) that reads back as `event`.

    Only the options the op takes are written, so the line always reads back
    (a mode on a release, say, is dropped).  `comm`, `file` and `line` are
    not part of the format.  Raises ValueError for a task or instance the
    format cannot carry (blanks, quotes, line breaks).
    """
    if event.op is RUN or event.op == RUN:
        return more.RT_HEADER if event.props and event.props.get("preempt_rt") else format_run(event.at, event.lock)
    if event.op == LOST_EVENTS:
        return f"#lockcheck-lost-events cpu={event.cpu}"
    _check_token("task", event.task)
    parts = [event.task, event.op]
    if event.op in LOCK_OPS:
        parts.append(_lockfield_at(event.lock, event.instance))
    allowed = _ALLOWED[event.op]
    if event.op == ACQUIRE or event.op == "sync":  # (==: a JSON Lines event's op is not the interned constant)
        parts.extend(word for word in _acquire_fields(event) if word.partition("=")[0] in allowed)
    parts.extend(more.format_words(event, quote_token))
    if event.at is not None and "at" in allowed:
        _check_text("at", event.at)
        parts.append("at=" + quote_token(event.at))
    if event.ts is not None:
        parts.append(f"ts={float(event.ts)!r}")
    if event.cpu is not None:
        parts.append(f"cpu={event.cpu}")
    return " ".join(parts)


def format_run(fmt: Optional[str] = None, source: Optional[str] = None) -> str:
    """The `#lockcheck-run` line that starts a run read in format `fmt` from `source`."""
    parts = ["#lockcheck-run"]
    if fmt is not None:
        parts.append(f"format={fmt}")
    if source is not None:
        _check_text("from", source)
        parts.append("from=" + quote_token(source))
    return " ".join(parts)


def _acquire_fields(event: Event) -> list[str]:
    """The mode, flags and keys only `acquire` takes, in the spec's order."""
    fields = []
    if event.mode != WRITE:
        fields.append(MODE_NAMES[event.mode])
    if event.trylock:
        fields.append("try")
    if event.subclass:
        fields.append(f"subclass={event.subclass}")
    if event.nest is not None:
        fields.append("nest=" + _lockfield_at(*event.nest))
    if not event.check:
        fields.append("nocheck")
    return fields


def _lockfield_at(lock: Optional[str], instance: Optional[str]) -> str:
    if lock is None:
        raise ValueError("a lock op needs a lock")
    _check_text("lock", lock)
    if instance is not None:
        _check_token("instance", instance)
    return lock_text(lock, instance)


def _check_text(what: str, text: str) -> None:
    if "\n" in text or "\r" in text:
        raise ValueError(f"{what} {text!r} contains a line break")


def _check_token(what: str, text: Optional[str]) -> None:
    """A task or instance is written bare: it must be a non-empty token without blanks or quotes."""
    if not text or any(ch in text for ch in ' \t"\r\n') or (what == "task" and text[0] == "#"):
        raise ValueError(f"{what} {text!r} cannot be written in a .lt trace")
