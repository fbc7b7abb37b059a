"""JSON Lines: one JSON object per event, with the `.lt` field names (spec/trace-format.md).

    {"task": "T1", "op": "acquire", "lock": "A", "instance": "0x1", "mode": "read",
     "try": false, "subclass": 0, "nest": null, "at": "f.py:3", "ts": 1.5, "cpu": 0}

Keys: `task` (string, required), `op` (an `.lt` op, required), `lock` (class
name, required for lock ops, forbidden otherwise), `instance` (string or
null), `mode` (`write`/`read`/`rread`), `try` (bool), `subclass` (0..7),
`nest` (`"CLASS"`, `"CLASS@INSTANCE"` split at the last `@`, or
`{"lock": CLASS, "instance": INSTANCE}`), `nocheck` (bool) or `check` (bool,
its inverse), `at` (string), `ts` (number), `cpu` (integer), `comm` (display
name, optional).  `mode`, `try`, `subclass`, `nest`, `nocheck`/`check` are
for `acquire` only.  Anything else is an error naming the line and the
column of the JSON error or of the offending key.  Numbers are finite
(`NaN`, `Infinity` and `1e999` are errors), strings valid Unicode.  Blank lines and lines
starting with `#` are ignored.  No grammar file: JSON is the grammar.
"""

from __future__ import annotations

import json
from operator import attrgetter
from typing import Any, Iterable, Iterator, Optional

from lockcheck.errors import TraceError
from lockcheck.events import (
    ACQUIRE, ALL_OPS, ASSERT_HELD, BASIC_LOCK_OPS, LOCK_OPS, MAX_CPU_DIGITS, MAX_SUBCLASS, MODES_BY_NAME, SET_CLASS,
    SET_SUBCLASS, WRITE, Event,
)
from lockcheck.readers import lockdep_keys as more
from lockcheck.util.jsontext import JsonError, finite, loads, valid_text

#: largest `cpu` accepted (as the `.lt` reader: at most events.MAX_CPU_DIGITS digits)
MAX_CPU = 10**MAX_CPU_DIGITS - 1

NAME = "jsonl"
#: `contended`/`acquired` are checked for bad contention, as in `.lt` (`readers.run_rules`)
CONTENTION = True

_ACQUIRE_ONLY = frozenset({"mode", "try", "subclass", "nest", "nocheck", "check"})
_KNOWN = frozenset({"task", "op", "lock", "instance", "at", "ts", "cpu", "comm"}) | _ACQUIRE_ONLY \
    | frozenset(more.CLASS_KEYS) | {"class", "threaded"}
#: the keys of _ACQUIRE_ONLY (and of "The rest of lockdep") each other op takes
_OP_KEYS = {op: frozenset({"mode" if key in MODES_BY_NAME else key for key in keys}) | ({"class"} if op == SET_CLASS else set())
            for op, keys in more.OP_OPTIONS.items()}


class _Bad(Exception):
    def __init__(self, key: Optional[str], message: str) -> None:
        super().__init__(message)
        self.key = key
        self.message = message


def _column(line: str, key: Optional[str]) -> int:
    """1-based column of KEY's quoted name in LINE (1 if unknown)."""
    if key is None:
        return 1
    at = line.find(json.dumps(key))
    return at + 1 if at >= 0 else 1


def _string(obj: dict, key: str, required: bool = False) -> Optional[str]:
    value = obj.get(key)
    if value is None:
        if required:
            raise _Bad(key if key in obj else None, f"missing {key!r}")
        return None
    if not isinstance(value, str) or (required and not value):
        raise _Bad(key, f"{key!r} must be a non-empty string")
    return value


def _bool(obj: dict, key: str, default: bool) -> bool:
    value = obj.get(key, default)
    if value is None:
        return default
    if not isinstance(value, bool):
        raise _Bad(key, f"{key!r} must be true or false")
    return value


def _nest(value: Any) -> Optional[tuple[str, Optional[str]]]:
    if value is None:
        return None
    if isinstance(value, str) and value:
        lock, at, instance = value.rpartition("@")
        return (lock, instance or None) if at and lock else (value, None)
    if isinstance(value, dict) and isinstance(value.get("lock"), str) and value["lock"] \
            and set(value) <= {"lock", "instance"} and isinstance(value.get("instance"), (str, type(None))):
        return (value["lock"], value.get("instance"))
    raise _Bad("nest", "'nest' must be \"CLASS\", \"CLASS@INSTANCE\" or {\"lock\": ..., \"instance\": ...}")


def event_from_json(obj: Any, file: str = "<trace>", line: int = 0) -> Event:
    """One decoded JSON object as an `Event` (raises `_Bad` naming the key)."""
    if not isinstance(obj, dict):
        raise _Bad(None, "each line must be a JSON object")
    for key in obj:
        if key not in _KNOWN:
            raise _Bad(key, f"unknown key {key!r}")
    task = _string(obj, "task", required=True)
    op = _string(obj, "op", required=True)
    if op not in ALL_OPS:
        raise _Bad("op", f"unknown op {op!r}")
    lock = _string(obj, "lock", required=op in LOCK_OPS)
    if lock is not None and op not in LOCK_OPS:
        raise _Bad("lock", f"{op!r} takes no lock")
    instance = obj.get("instance")
    if instance is not None and (not isinstance(instance, str) or not instance or op not in LOCK_OPS):
        raise _Bad("instance", "'instance' must be a non-empty string, on a lock op")
    if op != ACQUIRE:
        takes = _OP_KEYS.get(op, frozenset())
        for key in _ACQUIRE_ONLY | _OP_KEYS[ACQUIRE] | {"class", "threaded"}:
            if key in takes:
                continue
            if obj.get(key) not in (None, False) and not (key == "check" and obj[key] is True) \
                    and not (key == "subclass" and obj[key] == 0) and not (key == "mode" and obj[key] == "write"):
                raise _Bad(key, f"{key!r} is not valid on {op!r}" if op in _OP_KEYS else f"{key!r} is for 'acquire' only")
    mode_name = obj.get("mode", "write")
    if mode_name is None:
        mode_name = "write"
    if not isinstance(mode_name, str) or mode_name not in MODES_BY_NAME:  # a list would not hash
        raise _Bad("mode", f"'mode' must be one of {', '.join(MODES_BY_NAME)}")
    subclass = obj.get("subclass", 0)
    if subclass is None:
        subclass = 0
    if isinstance(subclass, bool) or not isinstance(subclass, int) or not 0 <= subclass <= MAX_SUBCLASS:
        raise _Bad("subclass", f"'subclass' must be an integer 0..{MAX_SUBCLASS}")
    check = _bool(obj, "check", True)
    if "nocheck" in obj:
        if "check" in obj:
            raise _Bad("nocheck", "give 'nocheck' or 'check', not both")
        check = not _bool(obj, "nocheck", False)
    ts = obj.get("ts")
    if ts is not None and not finite(ts):
        raise _Bad("ts", "'ts' must be a finite number")
    cpu = obj.get("cpu")
    if cpu is not None and (isinstance(cpu, bool) or not isinstance(cpu, int) or not 0 <= cpu <= MAX_CPU):
        raise _Bad("cpu", f"'cpu' must be an integer 0..{MAX_CPU}")
    props = _props(obj, op)
    if props is not None and "held" in props:
        mode_name = "write"
    return Event(task, op, lock, instance, MODES_BY_NAME[mode_name], _bool(obj, "try", False), subclass,
                 _nest(obj.get("nest")), check, _string(obj, "at"), float(ts) if ts is not None else None, cpu,
                 file, line, _string(obj, "comm"), props=props)


def _props(obj: dict, op: str) -> Optional[dict]:
    """The `props` of "The rest of lockdep" (`lockcheck.readers.lockdep_keys`), from the same names."""
    values = {}
    for key in more.CLASS_KEYS:
        if obj.get(key) is not None:
            message = more.check_value(key, obj[key])
            if message is not None:
                raise _Bad(key, message)
            values[key] = obj[key]
    props = more.class_props(values) or {}
    if _bool(obj, "threaded", False):
        props["threaded"] = True
    if op == SET_CLASS:
        props["class"] = _string(obj, "class", required=True)
    if op == SET_SUBCLASS and obj.get("subclass") is None:
        raise _Bad(None, "missing 'subclass': set-subclass gives the new one")
    if op == ASSERT_HELD and obj.get("mode") is not None:
        if obj["mode"] == "rread":
            raise _Bad("mode", "'mode' of assert-held must be write or read")
        props["held"] = obj["mode"]
    return props or None


#: the lock ops `_common_event` reads, by name (the op strings of `lockcheck.events`, for `is` tests)
_LOCK_OPS = {op: op for op in BASIC_LOCK_OPS}
#: integer time stamps the common path converts itself (a float holds them exactly)
_EXACT = 1 << 53
#: the keys of the common lines: no acquire-only key but `mode`
_COMMON_KEYS = frozenset({"task", "op", "lock", "instance", "at", "ts", "cpu", "comm", "mode"})


def _common_event(obj: Any, file: str, line: int) -> Optional[Event]:
    """`event_from_json` for the common line -- a lock op with no key but the common ones, every value
    of the right type -- in a fraction of its time; None for anything else, which `event_from_json`
    then reads (and rejects with its message, if it must).  Whatever this accepts, `event_from_json`
    accepts as the same event (tests/test_reader_jsonl.py holds them together on generated objects)."""
    fields = common_fields(obj)
    if fields is None:
        return None
    task, op, lock, instance, mode, at, ts, cpu, comm = fields
    return Event(task, op, lock, instance, mode, False, 0, None, True, at, ts, cpu, file, line, comm)


def common_fields(obj: Any) -> Optional[tuple]:
    """What `_common_event` reads of a decoded line, `(task, op, lock, instance, mode, at, ts, cpu, comm)`
    (the fast path, `lockcheck.engine.fast_capture`, applies it without an `Event`); None: not the common line."""
    if obj.__class__ is not dict or not obj.keys() <= _COMMON_KEYS:
        return None
    get = obj.get
    task = get("task")
    op = get("op")
    op = _LOCK_OPS.get(op) if op.__class__ is str else None
    lock = get("lock")
    if op is None or task.__class__ is not str or not task or lock.__class__ is not str or not lock:
        return None
    instance = get("instance")
    if instance is not None and (instance.__class__ is not str or not instance):
        return None
    mode = get("mode")
    if mode is None:
        mode = WRITE
    else:
        mode = MODES_BY_NAME.get(mode) if mode.__class__ is str else None
        if mode is None or (mode and op is not ACQUIRE):
            return None
    at = get("at")
    comm = get("comm")
    if (at is not None and at.__class__ is not str) or (comm is not None and comm.__class__ is not str):
        return None
    ts = get("ts")
    if ts is not None:
        if ts.__class__ is int and -_EXACT <= ts <= _EXACT:
            ts = float(ts)
        elif ts.__class__ is not float or ts - ts != 0.0:  # not a number, or not finite
            return None
    cpu = get("cpu")
    if cpu is not None and (cpu.__class__ is not int or not 0 <= cpu <= MAX_CPU):
        return None
    return (task, op, lock, instance, mode, at, ts, cpu, comm)


def parse(lines: Iterable[str], file: str = "<trace>", fields: bool = False) -> Iterator[Event]:
    """Events from JSON Lines (the format-module entry).

    Lines are strict JSON (`lockcheck.util.jsontext`: no NaN or Infinity, no
    runaway nesting or number length), and every string must be valid
    Unicode: a `\\ud800` escape decodes to a lone surrogate, which no
    renderer or output file could carry.  `fields=True` yields the
    arguments of each `Event(...)` as a tuple instead (a reader process:
    `lockcheck.readers.parallel`; the common line needs no event then).
    """
    return parse_numbered(enumerate(lines, 1), file, fields)


#: `parse(..., fields=True)` yields constructor tuples (see lockcheck.readers.parallel)
PARSES_FIELDS = True
_FIELDS = attrgetter(*Event.__slots__)


def parse_numbered(numbered: Iterable[tuple[int, str]], file: str = "<trace>",
                   fields: bool = False) -> Iterator[Event]:
    """`parse` of `(line number, line)` pairs: the fast path (`lockcheck.engine.fast_capture`) hands on
    only the lines it does not apply itself, numbered as in the file."""
    for lineno, line in numbered:
        text = line.strip()
        if not text or text[0] == "#":
            continue
        try:
            obj = loads(line)
        except JsonError as exc:
            raise TraceError(file, lineno, exc.col, f"invalid JSON: {exc.message}", source=line) from None
        if fields and "\\u" not in line:
            common = common_fields(obj)
            if common is not None:  # what `_common_event` would build, as its arguments
                task, op, lock, instance, mode, at, ts, cpu, comm = common
                yield (task, op, lock, instance, mode, False, 0, None, True, at, ts, cpu, file, lineno, comm)
                continue
        try:
            event = _common_event(obj, file, lineno) or event_from_json(obj, file, lineno)
            if "\\u" in line:
                _check_unicode(event)
        except _Bad as exc:
            raise TraceError(file, lineno, _column(line, exc.key), exc.message, source=line) from None
        yield _FIELDS(event) if fields else event


def _check_unicode(event: Event) -> None:
    """Raise `_Bad` for a string field that holds a lone surrogate."""
    for key in ("task", "lock", "instance", "at", "comm"):
        value = getattr(event, key)
        if value is not None and not valid_text(value):
            raise _Bad(key, f"{key!r} holds a lone surrogate (an unpaired \\ud800-\\udfff escape): not text")
    if event.nest is not None and not all(valid_text(part) for part in event.nest if part is not None):
        raise _Bad("nest", "'nest' holds a lone surrogate (an unpaired \\ud800-\\udfff escape): not text")


def sniff(lines: list[str]) -> bool:
    """The first non-blank line is a JSON object with an `op`."""
    for line in lines:
        text = line.strip()
        if not text or text[0] == "#":
            continue
        if text[0] != "{":
            return False
        try:
            obj = loads(text)
        except JsonError:
            return '"op"' in text  # a JSON object with an op that does not parse: a JSON Lines error
        return isinstance(obj, dict) and "op" in obj
    return False


def to_json(event: Event) -> dict[str, Any]:
    """The JSON object of EVENT (what `parse` reads back; defaults left out)."""
    from lockcheck.events import MODE_NAMES

    obj: dict[str, Any] = {"task": event.task, "op": event.op}
    if event.lock is not None:
        obj["lock"] = event.lock
    if event.instance is not None:
        obj["instance"] = event.instance
    if event.mode != WRITE:
        obj["mode"] = MODE_NAMES[event.mode]
    if event.trylock:
        obj["try"] = True
    if event.subclass or event.op == SET_SUBCLASS:
        obj["subclass"] = event.subclass
    if event.nest is not None:
        obj["nest"] = {"lock": event.nest[0], "instance": event.nest[1]}
    if not event.check:
        obj["nocheck"] = True
    for key in ("at", "ts", "cpu", "comm"):
        if getattr(event, key) is not None:
            obj[key] = getattr(event, key)
    props = event.props or {}
    obj.update(more.class_words(props))
    for key in ("class", "threaded"):
        if props.get(key):
            obj[key] = props[key]
    if props.get("held"):
        obj["mode"] = props["held"]
    return obj
