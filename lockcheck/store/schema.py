"""The saved-graph schema (docs/graph-format.md), checked before a graph is used.

A saved graph comes from another machine, another day, another version,
or a hand: `check --baseline` and `diff` must not trust it.  `check_json`
walks a decoded JSON document and raises `SchemaError` with the path of
the first value that breaks the schema (`["dependencies", 3, "evidence",
"line"]`) and what was expected; `lockcheck.store.graphfile` turns that path into
the line and column of the value (`lockcheck.util.jsontext.locate`).
`check_evidence` and the bounds are shared with the GraphML reader.

Unknown keys are ignored (adding an optional key does not change the
version); every known key has exactly one type.

>>> check_json({"lockcheck-graph": 1, "classes": [{"name": "A", "usage": "x"}]})
Traceback (most recent call last):
...
lockcheck.store.schema.SchemaError: classes[0].usage: expected a list of usage bit names or an integer mask
"""

from __future__ import annotations

from typing import Any, Optional, Sequence, Union

from lockcheck.lockdep.graph import DEP_NAMES
from lockcheck.readers.lockdep_keys import check_value
from lockcheck.util.jsontext import finite, valid_text
from lockcheck.lockdep.usage import USED_READ, usage_str

#: the `lockcheck-graph` version this schema describes
SCHEMA_VERSION = 1
#: largest line number and distance accepted (a signed 64-bit integer, as any tool can store)
MAX_INT = 2**63 - 1
#: usage masks have one bit per usage_str() name
MAX_USAGE = (1 << (USED_READ + 1)) - 1
#: dependency masks: SR=1, ER=2, SN=4, EN=8
MAX_DEP = 15

USAGE_NAMES = frozenset(usage_str(bit) for bit in range(USED_READ + 1))
DEP_TYPE_NAMES = frozenset(DEP_NAMES.values())

Path = list[Union[str, int]]


class SchemaError(ValueError):
    """A value at `path` that the schema does not allow."""

    def __init__(self, path: Sequence[Union[str, int]], message: str) -> None:
        self.path = list(path)
        self.message = message
        super().__init__(f"{dotted(self.path)}: {message}" if self.path else message)


def dotted(path: Sequence[Union[str, int]]) -> str:
    """`dependencies[3].evidence.line` for a path."""
    text = ""
    for item in path:
        text += f"[{item}]" if isinstance(item, int) else (f".{item}" if text else str(item))
    return text


def check_class_props(entry: dict, path: Path) -> None:
    """A class's optional `wait` (`OUTER:INNER` or `INNER`, each a wait type's name or number
    0..4, as the trace format's `wait=`) and `type` (`normal`, `percpu`, `override`)."""
    for key in ("wait", "type"):
        value = entry.get(key)
        if value is None:
            continue
        if not isinstance(value, str):
            raise SchemaError(path + [key], "expected a string")
        message = check_value(key, value)
        if message is not None:
            raise SchemaError(path + [key], message)


def check_json(doc: Any) -> None:
    """Raise SchemaError unless `doc` is a lockcheck-graph version 1 document."""
    if not isinstance(doc, dict) or "lockcheck-graph" not in doc:
        raise SchemaError([], 'not a lockcheck graph (no "lockcheck-graph" key)')
    version = doc["lockcheck-graph"]
    if not isinstance(version, int) or isinstance(version, bool) or version != SCHEMA_VERSION:
        raise SchemaError(["lockcheck-graph"], f"unsupported lockcheck-graph version {_show(version)} "
                                               f"(this lockcheck reads version {SCHEMA_VERSION})")
    if "generator" in doc:
        _text(doc["generator"], ["generator"])
    names: set[str] = set()
    for i, entry in enumerate(_list(doc, "classes")):
        path: Path = ["classes", i]
        _object(entry, path)
        name = _name(entry, "name", path, required=True)
        if name in names:
            raise SchemaError(path + ["name"], f"class {name!r} listed twice")
        names.add(name)
        if "usage" in entry:
            _usage(entry["usage"], path + ["usage"])
        traces = entry.get("usage_traces")
        if traces is not None:
            _object(traces, path + ["usage_traces"])
            for bit, evidence in traces.items():
                if bit not in USAGE_NAMES:
                    raise SchemaError(path + ["usage_traces", bit], f"unknown usage bit {bit!r}")
                check_evidence(evidence, path + ["usage_traces", bit])
        check_class_props(entry, path)
    edges: set[tuple[str, str]] = set()
    for i, entry in enumerate(_list(doc, "dependencies")):
        path = ["dependencies", i]
        _object(entry, path)
        edge = (_name(entry, "from", path, required=True), _name(entry, "to", path, required=True))
        if edge in edges:
            raise SchemaError(path, f"dependency {edge[0]} -> {edge[1]} listed twice")
        edges.add(edge)
        if "dep" not in entry:
            raise SchemaError(path + ["dep"], "missing")
        _dep(entry["dep"], path + ["dep"])
        if "distance" in entry:
            check_int(entry["distance"], path + ["distance"], 1)
        if "evidence" not in entry:
            raise SchemaError(path + ["evidence"], "missing")
        check_evidence(entry["evidence"], path + ["evidence"])
        if entry.get("held") is not None:
            check_evidence(entry["held"], path + ["held"])
        if entry.get("origin") is not None:
            _text(entry["origin"], path + ["origin"])
    for i, record in enumerate(_list(doc, "findings")):
        check_finding(record, ["findings", i])


def check_finding(record: Any, path: Path) -> None:
    """A saved finding: kind, lock, held, location, cycle, dedup, report_key (what `diff` compares)."""
    _object(record, path)
    _name(record, "kind", path, required=True)
    for key in ("lock", "held", "location"):
        if record.get(key) is not None:
            _text(record[key], path + [key])
    if record.get("cycle") is not None:
        cycle = record["cycle"]
        if not isinstance(cycle, list) or not cycle:
            raise SchemaError(path + ["cycle"], "expected a non-empty list of class names")
        for j, name in enumerate(cycle):
            _text(name, path + ["cycle", j])
    if record.get("dedup") is not None:
        dedup = record["dedup"]
        if isinstance(dedup, str):
            _text(dedup, path + ["dedup"])
        elif not finite(dedup):
            raise SchemaError(path + ["dedup"], "expected a string or a finite number")
    if record.get("report_key") is not None:
        key = record["report_key"]
        flat = [item for part in key for item in (part if isinstance(part, list) else [part])] \
            if isinstance(key, list) else None
        if not key or flat is None or not all(item is None or isinstance(item, str) for item in flat):
            raise SchemaError(path + ["report_key"], "expected a list of class names and words (a report's key)")


def check_evidence(doc: Any, path: Path) -> None:
    """An evidence object: file (string), line (integer >= 0), task (string), at (string), ts (finite number),
    stack (a list of {file, line, function} frames)."""
    if not isinstance(doc, dict):
        raise SchemaError(path, "expected an evidence object {file, line, task}")
    for key in ("file", "task"):
        if key not in doc:
            raise SchemaError(path + [key], "missing")
        _text(doc[key], path + [key])
    if "line" not in doc:
        raise SchemaError(path + ["line"], "missing")
    check_int(doc["line"], path + ["line"], 0)
    if doc.get("at") is not None:
        _text(doc["at"], path + ["at"])
    if doc.get("ts") is not None and not finite(doc["ts"]):
        raise SchemaError(path + ["ts"], "expected a finite number of seconds")
    if doc.get("stack") is not None:
        stack = doc["stack"]
        if not isinstance(stack, list):
            raise SchemaError(path + ["stack"], f"expected a list of frames, not {_show(stack)}")
        for j, frame in enumerate(stack):
            where = path + ["stack", j]
            _object(frame, where)
            for key in ("file", "function"):
                if key not in frame:
                    raise SchemaError(where + [key], "missing")
                _text(frame[key], where + [key])
            if "line" not in frame:
                raise SchemaError(where + ["line"], "missing")
            check_int(frame["line"], where + ["line"], 0)
    if doc.get("stack") is not None:
        _check_stack(doc["stack"], path + ["stack"])


def _check_stack(stack: Any, path: Path) -> None:
    """A Python stack (the pytest plugin's): a list of {file (string), line (integer >= 0), function (string)}."""
    if not isinstance(stack, list):
        raise SchemaError(path, "expected a list of frames {file, line, function}")
    for i, frame in enumerate(stack):
        if not isinstance(frame, dict):
            raise SchemaError(path + [i], "expected a frame {file, line, function}")
        for key in ("file", "function"):
            if key not in frame:
                raise SchemaError(path + [i, key], "missing")
            _text(frame[key], path + [i, key])
        if "line" not in frame:
            raise SchemaError(path + [i, "line"], "missing")
        check_int(frame["line"], path + [i, "line"], 0)


def check_int(value: Any, path: Path, low: int, high: int = MAX_INT) -> int:
    """An integer (not a bool, not a float) in low..high."""
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise SchemaError(path, f"expected an integer {low}..{high if high != MAX_INT else '2**63-1'}, "
                                f"not {_show(value)}")
    return value


# -- pieces ---------------------------------------------------------------------------


def _list(doc: dict, key: str) -> list:
    value = doc.get(key, [])
    if not isinstance(value, list):
        raise SchemaError([key], f"expected a list, not {_show(value)}")
    return value


def _object(value: Any, path: Path) -> None:
    if not isinstance(value, dict):
        raise SchemaError(path, f"expected an object, not {_show(value)}")


def _text(value: Any, path: Path) -> str:
    if not isinstance(value, str):
        raise SchemaError(path, f"expected a string, not {_show(value)}")
    if not valid_text(value):
        raise SchemaError(path, "holds a lone surrogate (an unpaired \\ud800-\\udfff escape): not text")
    return value


def _name(entry: dict, key: str, path: Path, required: bool = False) -> Optional[str]:
    if key not in entry:
        if required:
            raise SchemaError(path + [key], "missing")
        return None
    value = _text(entry[key], path + [key])
    if not value:
        raise SchemaError(path + [key], "expected a non-empty string")
    return value


def _usage(value: Any, path: Path) -> None:
    if isinstance(value, list):
        for j, name in enumerate(value):
            if not isinstance(name, str) or name not in USAGE_NAMES:  # a list or object is unhashable
                raise SchemaError(path + [j], f"unknown usage bit {_show(name)}")
        return
    if isinstance(value, int) and not isinstance(value, bool):
        check_int(value, path, 0, MAX_USAGE)
        return
    raise SchemaError(path, "expected a list of usage bit names or an integer mask")


def _dep(value: Any, path: Path) -> None:
    if isinstance(value, list) and value:
        for j, name in enumerate(value):
            if not isinstance(name, str) or name not in DEP_TYPE_NAMES:
                raise SchemaError(path + [j], f"unknown dependency type {_show(name)} "
                                              f"(expected {', '.join(sorted(DEP_TYPE_NAMES))})")
        return
    if isinstance(value, int) and not isinstance(value, bool):
        check_int(value, path, 1, MAX_DEP)
        return
    raise SchemaError(path, "expected a non-empty list of EN, ER, SN, SR or an integer mask 1..15")


def _show(value: Any) -> str:
    """A value for an error message: short, and never a 5000-digit conversion."""
    if isinstance(value, bool) or value is None:
        return "true" if value is True else "false" if value is False else "null"
    if isinstance(value, int):
        return "an integer" if abs(value) > 10**18 else str(value)
    if isinstance(value, float):
        return repr(value) if finite(value) else "a non-finite number"
    if isinstance(value, str):
        text = value if len(value) <= 40 else value[:37] + "..."
        return repr(text)
    return {dict: "an object", list: "a list"}.get(type(value), type(value).__name__)
