"""The pytest plugin's option and ini values, each checked when the session starts.

A bad value is a pytest usage error (exit 4) before any test runs, never a
traceback at the session's end after every test ran (`--lockcheck-graph
g.png`), nor a value taken as it came (`lockcheck_grace = nan`, which makes
every wait with it a wait for ever).  Kept apart from
`lockcheck.python.pytest_plugin` so that module stays about the session.
"""

from __future__ import annotations

import math
import os
from typing import Any, Optional

import pytest

from lockcheck.python.settings import DEFAULT_MAX_DEPTH  # noqa: F401 - a module of stdlib imports only


def add_options(group: Any, parser: pytest.Parser) -> None:
    """The options this module owns (`pytest_addoption`)."""
    group.addoption("--lockcheck-max-depth", metavar="N", type=int, default=None,
                    help=f"locks one thread may hold at once before the session notes it (default "
                         f"{DEFAULT_MAX_DEPTH}; a note, never a failure: no kernel table limits Python)")
    parser.addini("lockcheck_max_depth", default=str(DEFAULT_MAX_DEPTH),
                  help="as --lockcheck-max-depth")


def seconds(name: str, value: Any) -> float:
    """A finite number of seconds, 0 or more; else a usage error naming `name`."""
    try:
        number = float(str(value).strip() or 0)
    except ValueError:
        raise pytest.UsageError(f"{name}: expected a number of seconds, not {value!r}") from None
    if not math.isfinite(number) or number < 0:
        raise pytest.UsageError(f"{name}: expected a finite number of seconds, 0 or more, not {value!r}")
    return number


def max_depth(option: Optional[int], ini: Any) -> int:
    """`--lockcheck-max-depth` (or the ini value): a positive count of locks."""
    value: Any = option if option is not None else ini
    name = "--lockcheck-max-depth" if option is not None else "lockcheck_max_depth"
    try:
        depth = int(str(value).strip())
    except ValueError:
        raise pytest.UsageError(f"{name}: expected a number of locks, not {value!r}") from None
    if depth < 1:
        raise pytest.UsageError(f"{name}: expected 1 or more locks, not {value!r}")
    return depth


def graph_path(path: Optional[str]) -> None:
    """`--lockcheck-graph FILE`: a format lockcheck writes (by its extension), a file not a directory,
    in a directory that exists -- known now, not after every test ran."""
    if not path:
        return
    from lockcheck.store.graphfile import format_of
    from lockcheck.errors import UsageError

    if path != "-" and (os.path.isdir(path) or path.endswith(os.sep)):
        raise pytest.UsageError(f"--lockcheck-graph: {path}: is a directory (give a .json, .graphml or .dot file)")
    try:
        format_of(path)
    except UsageError as err:
        raise pytest.UsageError(f"--lockcheck-graph: {err}") from None
    parent = os.path.dirname(os.path.abspath(path))
    if path != "-" and not os.path.isdir(parent):
        raise pytest.UsageError(f"--lockcheck-graph: {path}: no such directory {parent}")
