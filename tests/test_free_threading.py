"""Free-threaded CPython (3.13t+, `Py_GIL_DISABLED`): the compiled hit path of the tracked locks
relies on the GIL for its own state, so there the pure path runs, and the plugin says so once, in
its header line.  The check (`sysconfig.get_config_var("Py_GIL_DISABLED")`) is monkeypatched: the
build running the tests has a GIL."""

from __future__ import annotations

import os
import subprocess
import sys
import sysconfig
from pathlib import Path

import pytest

from lockcheck.python import core

ROOT = Path(__file__).resolve().parent.parent


def _gil_disabled(monkeypatch: pytest.MonkeyPatch) -> None:
    real = sysconfig.get_config_var
    monkeypatch.setattr(sysconfig, "get_config_var", lambda name: 1 if name == "Py_GIL_DISABLED" else real(name))


def test_the_core_is_not_loaded_without_a_gil(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("LOCKCHECK_PURE", raising=False)
    _gil_disabled(monkeypatch)
    assert core.free_threaded()
    assert core._load_core() is None
    monkeypatch.setattr(core, "CORE", None)
    assert "free-threaded" in (core.core_note() or "")


def test_no_note_with_a_gil() -> None:
    if not core.free_threaded():
        assert core.core_note() is None


_RUN = """
import sys, sysconfig
real = sysconfig.get_config_var
sysconfig.get_config_var = lambda name: 1 if name == "Py_GIL_DISABLED" else real(name)
import pytest
sys.exit(pytest.main(sys.argv[1:]))
"""


@pytest.mark.parametrize("gil", [False, True], ids=["with-gil", "free-threaded"])
def test_the_plugin_says_so_once_at_session_start(tmp_path: Path, gil: bool) -> None:
    (tmp_path / "test_it.py").write_text(
        "import asyncio, threading\n"
        "from lockcheck.python import tracked\n"
        "def test_core():\n"
        f"    assert (tracked._core is None) is {not gil}\n"
        "    a, b = threading.Lock(), threading.Lock()\n"
        "    with a:\n"
        "        with b: pass\n"
    )
    env = dict(os.environ, PYTHONPATH=str(ROOT))
    env.pop("LOCKCHECK_PURE", None)
    argv = ["-p", "no:cacheprovider", "-p", "no:randomly", "--lockcheck", str(tmp_path)]
    cmd = [sys.executable, "-m", "pytest", *argv] if gil else [sys.executable, "-c", _RUN, *argv]
    proc = subprocess.run(cmd, cwd=tmp_path, env=env, capture_output=True, text=True, timeout=120)
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    said = [line for line in proc.stdout.splitlines() if "free-threaded CPython" in line]
    assert len(said) == (0 if gil else 1), proc.stdout
