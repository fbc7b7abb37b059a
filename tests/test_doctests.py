"""Every example in a lockcheck docstring runs as written (a `>>>` lost in an edit turns the next
line into expected output, which only running the examples shows)."""

from __future__ import annotations

import doctest
import importlib
from pathlib import Path

import pytest

PACKAGE = Path(__file__).resolve().parent.parent / "lockcheck"
MODULES = sorted(".".join(path.relative_to(PACKAGE.parent).with_suffix("").parts)
                 for path in PACKAGE.rglob("*.py") if ">>> " in path.read_text(encoding="utf-8"))


def test_the_examples_are_found() -> None:
    assert "lockcheck.store.baseline" in MODULES, MODULES


@pytest.mark.parametrize("name", MODULES)
def test_docstring_examples_run(name: str) -> None:
    result = doctest.testmod(importlib.import_module(name))
    assert result.failed == 0, name
