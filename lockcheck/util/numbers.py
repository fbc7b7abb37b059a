"""Reading the numbers of input files: one place that decides what a number is.

`str.isdigit()` accepts `²` and other Unicode digits that `int()` then
refuses (an internal error), `\\d` in a regular expression matches them too,
and `int()` refuses more than 4,300 digits (another internal error); a
float of 400 digits is infinite and overflows later arithmetic.  Every
numeric field of an input is read here: ASCII digits only, a bound on the
length, and a `FILE:LINE:COL` error on failure (`TraceError`).
"""

from __future__ import annotations

import math
from typing import Optional

from lockcheck.errors import TraceError

#: digits in the largest count an input holds: 2**64 has 20 digits
MAX_DIGITS = 20
#: characters in a time in seconds (`12345.678901`): a kernel's are under 20
MAX_SECONDS_CHARS = 32


def is_count(text: str, max_digits: int = MAX_DIGITS) -> bool:
    """Whether `text` is a count as inputs write them: 1 to `max_digits` ASCII digits."""
    return 0 < len(text) <= max_digits and text.isascii() and text.isdigit()


def looks_numeric(text: str) -> bool:
    """Whether `text` is digits of any kind (`²`, `٣`, 5,000 of them): a field meant as a number,
    to be refused with an error by `count` rather than skipped as text."""
    return bool(text) and text.isdigit()


def count(text: str, file: str, line: Optional[int], col: Optional[int] = None, what: str = "count",
          max_digits: int = MAX_DIGITS) -> int:
    """The value of a count field, or a TraceError at its position naming what is wrong."""
    if is_count(text, max_digits):
        return int(text)
    if text.isdigit() and not text.isascii():
        raise TraceError(file, line, col, f"{what} {text[:20]!r} is not written in ASCII digits")
    if text.isascii() and text.isdigit():
        raise TraceError(file, line, col, f"{what} of {len(text)} digits: more than {max_digits}")
    raise TraceError(file, line, col, f"{what} {text[:20]!r} is not a number")


def seconds(text: str, file: str, line: Optional[int], col: Optional[int] = None, what: str = "time") -> float:
    """A finite time in seconds written `DIGITS[.DIGITS]`, or a TraceError at its position."""
    whole, _, frac = text.partition(".")
    if (len(text) <= MAX_SECONDS_CHARS and text.isascii() and whole.isdigit()
            and (not frac or frac.isdigit())):
        value = float(text)
        if math.isfinite(value):
            return value
    raise TraceError(file, line, col, f"{what} {text[:20]!r} is not a time in seconds")


def column_of(line: str, field: str, start: int = 0) -> int:
    """The 1-based column of `field` in `line` (from `start`), for an error's position."""
    at = line.find(field, start)
    return (at if at >= 0 else start) + 1
