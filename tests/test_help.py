"""Every `--help` page ends with examples; the README's own commands match what exists."""

from __future__ import annotations

import argparse
import re

import pytest

from lockcheck.commands.cli import build_parser

from testdata import ROOT


def pages() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    [commands] = [a for a in parser._actions if isinstance(a, argparse._SubParsersAction)]
    return {"lockcheck": parser, **{f"lockcheck {name}": sub for name, sub in commands.choices.items()}}


PAGES = pages()


def test_there_are_pages():
    assert {"lockcheck", "lockcheck check", "lockcheck graph", "lockcheck diff", "lockcheck stat",
            "lockcheck convert"} <= set(PAGES)


@pytest.mark.parametrize("prog", sorted(PAGES))
def test_every_help_page_ends_with_examples_of_its_own_command(prog):
    text = PAGES[prog].format_help()
    head, sep, examples = text.partition("\nexamples:\n")
    assert sep, f"{prog} --help has no examples"
    lines = [line.strip() for line in examples.splitlines() if line.strip()]
    assert lines and all("lockcheck " in line for line in lines), lines
    assert any(line.removeprefix("sudo ").startswith(prog) for line in lines), lines


def test_graph_help_says_it_exits_0_with_findings():
    assert "graph exits 0 once it wrote the graph" in PAGES["lockcheck graph"].format_help()


def test_readme_commands_exist():
    pages = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md"))]
    blocks = "\n".join(block for page in pages
                       for block in re.findall(r"^```[a-z]*\n(.*?)^```", page.read_text(), re.M | re.S))
    used = set(re.findall(r"^(?:\.venv/bin/)?lockcheck ([a-z]+)", blocks, re.M))
    assert used and used <= {prog.split()[1] for prog in PAGES if " " in prog}, used


@pytest.mark.parametrize("prog", sorted(PAGES))
def test_every_help_page_fits_an_80_column_terminal(prog, monkeypatch):
    # argparse wraps what it writes itself to $COLUMNS; descriptions and examples are ours
    monkeypatch.setenv("COLUMNS", "80")
    page = pages()[prog].format_help()
    wide = [line for line in page.splitlines() if len(line) > 80]
    assert not wide, wide
