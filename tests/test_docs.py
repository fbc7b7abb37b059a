"""The README and docs/ say true things: their links lead to files of the
repository, and their examples run as shown."""

from __future__ import annotations

import io
import re
import shlex
import subprocess
import sys
from pathlib import Path

import pytest

from lockcheck.cli import main

from testdata import ROOT, TRACES

DOCS = [ROOT / "README.md", *sorted((ROOT / "docs").glob("*.md")), ROOT / "benchmarks" / "README.md",
        ROOT / "tests" / "data" / "kernel-6.1" / "README.md"]
LINK = re.compile(r"\]\(([^)\s]+)\)")


def blocks(path: Path, lang: str) -> list[str]:
    return re.findall(rf"^```{lang}\n(.*?)^```", path.read_text(), re.M | re.S)


@pytest.mark.parametrize("doc", DOCS, ids=lambda p: str(p.relative_to(ROOT)))
def test_links_lead_to_files_in_the_repository(doc):
    text = doc.read_text()
    assert "../shared" not in text and "/work/" not in text
    for target in LINK.findall(text):
        if re.match(r"[a-z]+:", target) or target.startswith("#"):
            continue
        path = (doc.parent / target.split("#")[0]).resolve()
        assert path.exists() and ROOT in path.parents, f"{doc.name} links to {target}"


def test_readme_instrument_example_prints_the_report(tmp_path):
    [example] = blocks(ROOT / "README.md", "python")
    script = tmp_path / "bank.py"
    script.write_text(example)
    proc = subprocess.run([sys.executable, str(script)], capture_output=True, text=True, timeout=120, cwd=tmp_path)
    assert proc.returncode == 1, proc.stderr
    assert "WARNING: possible circular locking dependency detected" in proc.stdout
    assert "(bank.accounts)" in proc.stdout and "(bank.ledger)" in proc.stdout
    assert proc.stdout.rstrip().splitlines()[-1].startswith("lockcheck: 1 finding (1 circular-dependency)")


def test_suppress_doc_example_is_a_valid_file(tmp_path):
    [example] = blocks(ROOT / "docs" / "suppress.md", "toml")
    known = tmp_path / "known.toml"
    known.write_text(example)
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--no-config", "--no-progress", "--suppress", str(known), str(TRACES / "abba.lt")],
                  stdout=out, stderr=err)
    assert status == 1 and err.getvalue() == ""
    assert f"{known}: suppress[2] (kind=*, classes=[legacy_mutex]) matched nothing" in out.getvalue().replace(
        "\n    ", " ")
    # the same rules accept the finding once a pattern matches its classes
    known.write_text(example.replace('"&sb->*"', '"&queue->*"').replace('"&mm->mmap_sem", ', '"&dev->lock", '))
    out = io.StringIO()
    status = main(["check", "--no-config", "--no-progress", "--suppress", str(known), str(TRACES / "abba.lt")],
                  stdout=out, stderr=io.StringIO())
    assert status == 0 and "; 1 suppressed" in out.getvalue()


def test_cli_doc_json_example_is_what_check_prints(tmp_path, monkeypatch):
    doc = ROOT / "docs" / "cli.md"
    section = doc.read_text().split("## JSON (`--format json`)", 1)[1]
    trace = re.search(r"^```\n(.*?)^```", section, re.M | re.S).group(1)
    [example] = re.findall(r"^```json\n(.*?)^```", section.split("- `lock`:", 1)[0], re.M | re.S)
    (tmp_path / "abba.lt").write_text(trace)
    monkeypatch.chdir(tmp_path)
    out = io.StringIO()
    status = main(["check", "--no-config", "--no-progress", "--format", "json", "abba.lt"], stdout=out,
                  stderr=io.StringIO())
    assert status == 1 and out.getvalue() == example


def test_cli_doc_names_every_kind_of_finding():
    from lockcheck import findings

    table = (ROOT / "docs" / "cli.md").read_text().split("Kinds of finding", 1)[1].split("\n\n", 2)[1]
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", table, re.M))
    assert documented == set(findings.MESSAGES)


def transcripts(path: Path) -> list[tuple[list[str], str]]:
    """The `$ lockcheck ...` blocks of a document: (arguments, the output shown)."""
    found = []
    fenced = re.findall(r"^```([a-z]*)\n(.*?)^```$", path.read_text(), re.M | re.S)
    for _, block in fenced:
        if block.startswith("$ lockcheck "):
            command, _, output = block.partition("\n")
            while command.endswith("\\"):
                more, _, output = output.partition("\n")
                command = command[:-1] + " " + more.strip()
            found.append((shlex.split(command)[2:], output))
    return found


def test_readme_transcripts_are_what_lockcheck_prints(tmp_path, monkeypatch):
    # `boots/` is the directory the README describes: two boots hitting one cycle with
    # per-boot class numbers, and a third with another report
    logs = ROOT / "tests" / "data" / "kernel-log"
    boots = tmp_path / "boots"
    boots.mkdir()
    cycle = (logs / "circular-6-classes.log").read_text()
    (boots / "boot1.log").write_text(cycle)
    (boots / "boot2.log").write_text(cycle.replace("sb_writers#3", "sb_writers#7"))
    (boots / "boot3.log").write_text((logs / "recursive.log").read_text())
    for name in ("tests", "traces"):
        (tmp_path / name).symlink_to(ROOT / name)
    monkeypatch.chdir(tmp_path)
    shown = transcripts(ROOT / "README.md")
    assert len(shown) >= 3
    for args, expected in shown:
        out = io.StringIO()
        main([*args, "--no-progress"] if args[0] != "stat" else args, stdout=out, stderr=out)
        got = out.getvalue()
        if "\n...\n" not in "\n" + expected:
            assert got == expected, args
            continue
        # an elided transcript: each line shown is a line printed, in this order
        printed = iter(got.splitlines())
        for line in expected.splitlines():
            if line != "...":
                assert line in printed, (args, line)
