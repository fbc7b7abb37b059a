"""Small helpers for the words lockcheck prints: counted nouns and wrapped notes.

Every message that puts a number before a noun goes through `count`, so
none says "1 dependencies"; every note goes through `wrap_note`, so a long
note reads like the kernel's continuation lines instead of one 700-column
line.

>>> count(1, "dependency", "dependencies"), count(2, "file")
('1 dependency', '2 files')
>>> print(wrap_note("lockcheck: note: ", "x " * 50, width=40))
lockcheck: note: x x x x x x x x x x x x
    x x x x x x x x x x x x x x x x x x
    x x x x x x x x x x x x x x x x x x
    x x
"""

from __future__ import annotations

import textwrap
from typing import Optional

#: the width notes are wrapped to
WIDTH = 80
#: continuation lines start with this, as the kernel indents the rest of a message
INDENT = "    "


def count(n: int, singular: str, plural: Optional[str] = None) -> str:
    """`1 task`, `2 tasks`: a number with its noun agreeing (`plural` when not just `+s`)."""
    return f"{n} {singular if n == 1 else (plural or singular + 's')}"


def wrap_note(prefix: str, text: str, width: int = WIDTH) -> str:
    """`prefix` + `text` on lines of at most `width` columns, later lines indented.

    Words longer than a line (a path, a class name) are never broken: a
    reader must be able to copy them.
    """
    return textwrap.fill(text, width=width, initial_indent=prefix, subsequent_indent=INDENT,
                         break_long_words=False, break_on_hyphens=False)
