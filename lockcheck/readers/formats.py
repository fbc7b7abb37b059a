"""The registered input formats, in the order they are tried when sniffing a trace's first lines.

Its own module so that the input classifier (`inputs`) and the readers' entry
points (`lockcheck.readers`) both ask it, neither importing the other.
"""

from __future__ import annotations

import importlib
from types import ModuleType
from typing import Optional

#: format modules, in the order they are tried when sniffing (each rejects the others' lines)
FORMAT_MODULES = [
    "lockcheck.readers.lt",
    "lockcheck.readers.jsonl",
    "lockcheck.readers.ftrace",
    "lockcheck.readers.perf",
    "lockcheck.readers.kernel_log",
]


def formats() -> dict[str, ModuleType]:
    """Name -> module of every registered input format."""
    modules = [importlib.import_module(name) for name in FORMAT_MODULES]
    return {module.NAME: module for module in modules}


def sniff_format(head: list[str]) -> Optional[ModuleType]:
    """The first registered format whose `sniff` accepts these non-blank lines, or None."""
    for module in formats().values():
        if module.sniff(head):
            return module
    return None
