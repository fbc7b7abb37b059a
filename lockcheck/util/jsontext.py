"""Strict JSON for every JSON input lockcheck reads (JSON Lines traces, saved graphs).

`json.loads` is lenient where lockcheck must not be: it accepts `NaN` and
`Infinity` (not JSON), raises a bare `RecursionError` on deeply nested
arrays, and a bare `ValueError` on an integer longer than Python's
int-string limit (4300 digits).  `loads` reads RFC 8259 JSON and raises
`JsonError` with the 1-based line and column of the problem for all of
these.  Finite floats, sane integers and valid Unicode strings are the
caller's schema checks (`finite`, `valid_text`), because only the caller
knows which values are numbers it will use.

`locate(text, path)` finds where a value sits in a document
(`["dependencies", 3, "evidence", "line"]`), so a schema error in a saved
graph names its line and column like a syntax error does.
"""

from __future__ import annotations

import json
import math
import re
from typing import Any, Optional, Sequence, Union

class JsonError(ValueError):
    """Malformed JSON at a 1-based line and column of the text."""

    def __init__(self, message: str, line: int, col: int) -> None:
        super().__init__(message)
        self.message = message
        self.line = line
        self.col = col


def _reject_constant(name: str) -> Any:
    raise _Constant(name)


class _Constant(ValueError):
    def __init__(self, name: str) -> None:
        super().__init__(name)
        self.name = name


def loads(text: str) -> Any:
    """The JSON value of `text`; `JsonError` for anything RFC 8259 does not allow or is too deep.

    >>> loads('{"a": [1, 2.5]}')
    {'a': [1, 2.5]}
    >>> try:
    ...     loads('[1, NaN]')
    ... except JsonError as err:
    ...     print(err.line, err.col, err.message)
    1 5 NaN is not JSON (numbers must be finite)
    """
    if text[:1] == "{" and text.__class__ is str:
        # one JSON Lines line: the scanner alone (what `decode` runs, without its two whitespace
        # regexes), and anything it does not take whole goes the full way below for its error
        try:
            value, end = _SCAN_ONCE(text, 0)
        except (StopIteration, ValueError, RecursionError):
            pass
        else:
            if end == len(text) or not text[end:].strip(" \t\n\r"):
                return value
    try:
        if text.__class__ is str and text[:1] != "\ufeff":
            return _DECODE(text)  # json.loads, without building a decoder per call (JSON Lines: per line)
        return json.loads(text, parse_constant=_reject_constant)
    except json.JSONDecodeError as err:
        raise JsonError(err.msg, err.lineno, err.colno) from None
    except _Constant as err:
        line, col = _position(text, _find_token(text, re.escape(err.name)))
        raise JsonError(f"{err.name} is not JSON (numbers must be finite)", line, col) from None
    except RecursionError:
        depth, at = _deepest(text)
        line, col = _position(text, at)
        raise JsonError(f"nested too deeply ({depth} levels)", line, col) from None
    except ValueError as err:  # the int-string limit: an integer literal of thousands of digits
        line, col = _position(text, _find_token(text, r"-?\d{1000,}"))
        raise JsonError(f"number too long ({str(err).split(':')[0].strip()})", line, col) from None


#: what `json.loads(text, parse_constant=_reject_constant)` builds on every call, built once
_DECODER = json.JSONDecoder(parse_constant=_reject_constant)
_DECODE = _DECODER.decode
_SCAN_ONCE = _DECODER.scan_once

#: a JSON string, or anything else up to the next delimiter
_STRING = r'"(?:[^"\\]|\\.)*"'


def _deepest(text: str) -> tuple[int, int]:
    """The deepest nesting of `text` and the offset of the bracket that first reaches it."""
    depth = best = 0
    at = -1
    for match in re.finditer(_STRING + r"|[\[\]{}]", text):
        char = match.group()[0]
        if char in "[{":
            depth += 1
            if depth > best:
                best, at = depth, match.start()
        elif char in "]}":
            depth -= 1
    return best, at


def _find_token(text: str, pattern: str) -> int:
    """Offset of the first match of `pattern` outside strings, or -1."""
    for match in re.finditer(_STRING + "|" + pattern, text):
        if match.group()[0] != '"':
            return match.start()
    return -1


def _position(text: str, offset: int) -> tuple[int, int]:
    """1-based (line, column) of a character offset (1, 1 when unknown)."""
    if offset < 0:
        return 1, 1
    line = text.count("\n", 0, offset) + 1
    return line, offset - (text.rfind("\n", 0, offset) + 1) + 1


# -- schema helpers --------------------------------------------------------------------


def finite(value: Any) -> bool:
    """A JSON number lockcheck can use: int or float, not bool, finite."""
    if isinstance(value, bool) or not isinstance(value, (int, float)):
        return False
    return math.isfinite(value)


def valid_text(value: str) -> bool:
    """Whether a decoded string is valid Unicode (JSON's `\\ud800` escapes decode to lone surrogates)."""
    if value.isascii():
        return True
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


# -- where a value is -------------------------------------------------------------------

_SCAN = re.compile(r'\s*(?:("(?:[^"\\]|\\.)*")|([\[\]{},:])|([^\s\[\]{},:"]+))')

PathItem = Union[str, int]


def locate(text: str, path: Sequence[PathItem]) -> tuple[int, int]:
    """1-based (line, column) of the value at `path` in a JSON document (of its key for objects).

    Only called on the error path of a document that parsed, so it walks the
    tokens with a small stack instead of keeping positions for every value.
    When `path` cannot be followed to the end, the deepest point reached is
    returned.

    >>> locate('{"a": [1,\\n {"b": true}]}', ["a", 1, "b"])
    (2, 8)
    """
    target = list(path)
    best = 0
    # stack entries: [kind, key or index, expecting_key]
    stack: list[list] = []
    pos = 0
    pending_key: Optional[str] = None
    while pos < len(text):
        match = _SCAN.match(text, pos)
        if match is None:
            break
        start = match.start(match.lastindex) if match.lastindex else pos
        pos = match.end()
        string, punct, _bare = match.groups()
        current = [entry[1] for entry in stack]
        if punct in ("[", "{"):
            if current == target:
                return _position(text, start)
            if target[:len(current)] == current:
                best = start
            stack.append(["list" if punct == "[" else "dict", 0 if punct == "[" else None, punct == "{"])
            continue
        if punct in ("]", "}"):
            if stack:
                stack.pop()
            continue
        if punct == ",":
            if stack:
                top = stack[-1]
                if top[0] == "list":
                    top[1] += 1
                else:
                    top[2] = True
            continue
        if punct == ":":
            if stack and pending_key is not None:
                stack[-1][1] = pending_key
                stack[-1][2] = False
            continue
        if string is not None and stack and stack[-1][0] == "dict" and stack[-1][2]:
            try:
                pending_key = json.loads(string)
            except ValueError:
                pending_key = None
            continue
        if current == target:
            return _position(text, start)
        if target[:len(current)] == current:
            best = start
    return _position(text, best)
