"""The wheel: grammars inside the package, the console script and the pytest plugin registered."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import zipfile
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]


def _clean_copy(tmp_path: Path) -> Path:
    """The tree without anything built in it (an in-place core, a .venv), where a build may
    leave its `build/` without writing into the checkout."""
    source = tmp_path / "source"
    shutil.copytree(ROOT, source, ignore=shutil.ignore_patterns("*.so", "*.pyd", "build", ".venv", "*.egg-info",
                                                                 "out", ".git", "__pycache__", ".hypothesis"))
    return source


@pytest.mark.slow
def test_wheel_ships_the_grammars_and_entry_points(tmp_path):
    source = _clean_copy(tmp_path)
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("pylockdep-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = set(archive.namelist())
        entry_points = next(archive.read(n).decode() for n in names if n.endswith("entry_points.txt"))
    grammars = {Path(n).name for n in names if n.startswith("lockcheck/grammars/")}
    assert {p.name for p in (ROOT / "grammars").glob("*.lark")} <= grammars
    assert "lockcheck = lockcheck.entry:run" in entry_points
    assert "lockcheck = lockcheck.python.pytest_plugin" in entry_points
    if shutil.which("cc") or shutil.which("gcc"):  # where a compiler exists, the wheel has the compiled core
        assert any(Path(n).name.startswith("_speedups") for n in names), sorted(names)
        assert any(Path(n).name.startswith("_trackedcore") for n in names), sorted(names)  # the plugin's


@pytest.mark.slow
def test_without_a_compiler_the_wheel_is_pure_python(tmp_path):
    """The compiled core is optional: a failing compiler leaves it out, and the install goes on."""
    source = _clean_copy(tmp_path)
    env = {**os.environ, "CC": "false", "LDSHARED": "false"}
    proc = subprocess.run([sys.executable, "-m", "pip", "wheel", "--no-deps", "-q", "-w", str(tmp_path), str(source)],
                          capture_output=True, text=True, env=env)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (wheel,) = tmp_path.glob("pylockdep-*.whl")
    with zipfile.ZipFile(wheel) as archive:
        names = archive.namelist()
    assert not any(Path(n).name.startswith("_speedups") and not n.endswith(".c") for n in names)
    assert not any(Path(n).name.startswith("_trackedcore") for n in names)
    assert "lockcheck/engine/fast_lt.py" in names


def test_grammars_load_from_the_installed_package():
    from importlib import resources

    from lockcheck.util.grammar import grammar_text

    text = grammar_text("lockcheck.lark")
    assert "acquire" in text
    # an editable or regular install maps grammars/ to lockcheck.grammars
    assert resources.files("lockcheck.grammars").joinpath("lockcheck.lark").read_text() == text


def test_sdist_carries_every_header_a_compiled_core_includes(tmp_path):
    """A header missing from the sdist (MANIFEST.in) does not fail the sdist: it fails the build
    of the core that includes it on the user's machine, which then runs the pure Python paths."""
    import re
    import tarfile

    source = _clean_copy(tmp_path)
    proc = subprocess.run([sys.executable, "setup.py", "-q", "sdist", "-d", str(tmp_path / "dist")], cwd=source,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stderr[-2000:]
    (sdist,) = (tmp_path / "dist").glob("pylockdep-*.tar.gz")
    with tarfile.open(sdist) as archive:
        shipped = {name.split("/", 1)[1] for name in archive.getnames() if "/" in name}
    headers = {path.name: path.relative_to(ROOT).as_posix() for path in ROOT.glob("lockcheck/**/*.h")}
    included = set()
    for c_file in [*ROOT.glob("lockcheck/**/*.c"), *ROOT.glob("lockcheck/**/*.h")]:
        for name in re.findall(r'^#include "([^"]+)"', c_file.read_text(), re.M):
            included.add(headers[Path(name).name])  # (setup.py's include_dirs: found by name)
    assert {"lockcheck/engine/_rules.h", "lockcheck/engine/_jsonlt_scan.h"} <= included
    assert included <= shipped, sorted(included - shipped)


def test_setup_depends_names_every_header_a_core_includes(monkeypatch):
    """`build_ext` rebuilds a core when a file in its `depends` changed, and only then: a header a
    core includes (directly or through another header) missing from setup.py's list leaves the
    stale .so in place after an edit of it, and the edit silently does nothing."""
    import re
    import runpy

    import setuptools

    captured: dict = {}
    monkeypatch.setattr(setuptools, "setup", lambda **kwargs: captured.update(kwargs))
    monkeypatch.chdir(ROOT)
    runpy.run_path(str(ROOT / "setup.py"), run_name="__main__")
    headers = {path.name: path.relative_to(ROOT).as_posix() for path in ROOT.glob("lockcheck/**/*.h")}
    assert captured["ext_modules"]
    for ext in captured["ext_modules"]:
        included: set[str] = set()
        todo = list(ext.sources)
        while todo:
            text = (ROOT / todo.pop()).read_text()
            for name in re.findall(r'^#include "([^"]+)"', text, re.MULTILINE):
                path = headers[Path(name).name]  # (setup.py's include_dirs: found by name)
                if path not in included:
                    included.add(path)
                    todo.append(path)
        assert included <= set(ext.depends), (ext.name, sorted(included - set(ext.depends)))
