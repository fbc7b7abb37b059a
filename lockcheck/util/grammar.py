"""Loading the `.lark` grammars shipped in `grammars/` (inside the wheel as `lockcheck.grammars`)."""

from __future__ import annotations

import functools
from importlib import resources
from pathlib import Path


@functools.lru_cache(maxsize=None)
def grammar_text(name: str) -> str:
    """The text of `grammars/NAME` from the installed package, or the source tree.

    An installed wheel carries the grammars as package data of
    `lockcheck.grammars`; a source checkout run with `PYTHONPATH=.` has them
    in the top-level `grammars/` folder.
    """
    try:
        return resources.files("lockcheck.grammars").joinpath(name).read_text(encoding="utf-8")
    except (ModuleNotFoundError, FileNotFoundError, OSError):
        here = Path(__file__).resolve().parent.parent / "grammars" / name
        return here.read_text(encoding="utf-8")
