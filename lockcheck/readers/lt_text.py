"""Text helpers of the `.lt` reader's error messages: where a field starts, what it is, which
word was meant.  They know nothing of the format's op table (`lockcheck.readers.lt` does)."""

from __future__ import annotations

import difflib
from typing import Iterable


def explain_quoted(line: str, quote_col: int) -> tuple[int, str]:
    """Why a quoted string starting at `quote_col` does not read."""
    i = quote_col  # index of the first character after the opening quote
    while i < len(line):
        ch = line[i]
        if ch == "\\":
            if i + 1 < len(line) and line[i + 1] not in '"\\':
                return i + 1, f"invalid escape '\\{line[i + 1]}' in quoted string (only \\\" and \\\\)"
            i += 2
        elif ch == '"':
            return i + 2, "expected a blank after the quoted string"
        else:
            i += 1
    return quote_col, "unterminated quoted string"


def blank_split(text: str) -> list[str]:
    """Fields separated by spaces and tabs (only the first three are ever unquoted).

    Not `str.split()`: that also splits at characters the grammar keeps in a
    field (`\x1f`, `\x0b`, `\x0c`), and the fields would not line up with it.
    """
    return [f for f in text.replace("\t", " ").split(" ") if f]


def field_start(line: str, col: int) -> int:
    """Column where the blank-delimited field containing `col` starts."""
    i = col - 1
    while i > 0 and line[i - 1] not in " \t":
        i -= 1
    return i + 1


def field_at(line: str, start: int) -> str:
    """The blank-delimited field starting at column `start`."""
    rest = line[start - 1:].replace("\t", " ")
    return rest.split(" ", 1)[0]


def suggest(word: str, choices: Iterable[str]) -> str:
    """`" (did you mean 'x'?)"` for a near miss, else ''."""
    close = difflib.get_close_matches(word, list(choices), n=1, cutoff=0.6)
    return f" (did you mean '{close[0]}'?)" if close else ""
