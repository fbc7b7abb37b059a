"""The README is a front page a new user reads in a minute, and what it shows is real output:
its `pytest --lockcheck` run and its `lockcheck check` run are rerun here and must print what
it shows, so the first page cannot drift from the tool."""

from __future__ import annotations

import io
import os
import re
import subprocess
import sys
from pathlib import Path

import lockcheck
from lockcheck.commands.cli import main

from testdata import ROOT

README = ROOT / "README.md"
#: what changes from run to run: the time pytest took, lock instance numbers (how many locks
#: were made before depends on the plugins installed), the version in a report's header
_VARYING = [(re.compile(r"\b\d+\.\d\ds\b"), "N.NNs"), (re.compile(r"\b0x[0-9a-f]+\b"), "0xN"),
            (re.compile(r"^lockcheck \S+ "), "lockcheck VERSION ")]


def _normal(line: str) -> str:
    for pattern, stands in _VARYING:
        line = pattern.sub(stands, line)
    return line.rstrip()


def _blocks(lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", README.read_text(), re.M | re.S)


def _shown_in_order(shown: list[str], printed: str) -> None:
    """Each shown line (`...` skips) is printed, in order."""
    out = [_normal(line) for line in printed.splitlines()]
    at = 0
    for line in shown:
        if line == "...":
            continue
        want = _normal(line)
        assert want in out[at:], f"not printed (after line {at}): {want!r}\n{printed}"
        at = out.index(want, at) + 1


def test_readme_is_a_front_page() -> None:
    text = README.read_text()
    lines = text.splitlines()
    assert len(lines) <= 250, len(lines)
    first_block = text.split("```", 2)[1]
    for tag in ("# set up", "# run on a shipped trace", "# run the tests"):
        assert tag in first_block
    # installing the distribution, and a real plugin run, come early
    assert re.search(r"^pip install .*pylockdep", text, re.M)
    assert any(line.startswith("$ pytest --lockcheck") for line in lines[:120])
    # the manual is linked from the front page: every page of docs/ is one click away
    linked = set(re.findall(r"\]\(docs/([^)#]+)", text))
    pages = {p.name for p in (ROOT / "docs").glob("*.md")}
    assert pages <= linked, pages - linked


def _terminal_env() -> dict[str, str]:
    """What the README shows: an 80-column terminal, not a CI job (where pytest prints the
    short summary's messages untruncated)."""
    env = {k: v for k, v in os.environ.items() if k not in ("CI", "BUILD_NUMBER")}
    return {**env, "COLUMNS": "80"}


def test_readme_pytest_example_prints_what_it_shows(tmp_path: Path) -> None:
    [code] = [block for block in _blocks("py") if block.startswith("# test_bank.py\n")]
    [shown] = [block for block in _blocks("text") if block.startswith("$ pytest --lockcheck")]
    command, *lines = shown.splitlines()
    (tmp_path / "test_bank.py").write_text(code.partition("\n")[2])  # the first line names the file
    args = command.split()[2:]
    proc = subprocess.run([sys.executable, "-m", "pytest", "-p", "no:cacheprovider", *args],
                          capture_output=True, text=True, timeout=120, cwd=tmp_path,
                          env=_terminal_env())
    assert proc.returncode == 1, proc.stdout + proc.stderr
    _shown_in_order(lines, proc.stdout)


def test_readme_check_example_is_what_check_prints(monkeypatch) -> None:
    [shown] = [block for block in _blocks("text") if block.startswith("$ lockcheck check ")]
    command, _, expected = shown.partition("\n")
    monkeypatch.chdir(ROOT)
    out = io.StringIO()
    status = main(command.split()[2:] + ["--no-config", "--no-progress"], stdout=out, stderr=io.StringIO())
    assert status == 1
    assert out.getvalue() == expected.replace("lockcheck 0.1.0", f"lockcheck {lockcheck.__version__}")
