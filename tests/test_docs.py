"""The README and docs/ say true things: their links lead to files of the
repository, and their examples run as shown."""

from __future__ import annotations

import io
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lockcheck.commands.cli import main

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
    [example] = blocks(ROOT / "docs" / "pytest-plugin.md", "python")
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
    from lockcheck.lockdep import findings

    table = (ROOT / "docs" / "cli.md").read_text().split("Kinds of finding", 1)[1].split("\n\n", 2)[1]
    documented = set(re.findall(r"^\| `([a-z-]+)` \|", table, re.M))
    assert documented == set(findings.MESSAGES)


def fenced(path: Path) -> list[str]:
    """Every fenced block of a Markdown file, whatever its language, in order."""
    out, current = [], None
    for line in path.read_text().splitlines(keepends=True):
        if line.startswith("```"):
            if current is None:
                current = []
            else:
                out.append("".join(current))
                current = None
        elif current is not None:
            current.append(line)
    return out


def _readme_run(command: str) -> str:
    """What a README `$ lockcheck check ...` line prints now (a `| grep -E '...'` filter applied)."""
    import shlex

    argv, _, pipe = command.partition(" | ")
    out = io.StringIO()
    main(shlex.split(argv)[1:] + ["--no-config", "--no-progress"], stdout=out, stderr=io.StringIO())
    text = out.getvalue()
    if pipe:
        pattern = shlex.split(pipe)[-1]
        text = "".join(line + "\n" for line in text.splitlines() if re.search(pattern, line))
    return text


@pytest.mark.parametrize("path", ["tests/data/kernel-log/recursive.log", "tests/data/kernel-log/buckets/"])
def test_readme_kernel_log_examples_print_what_the_readme_shows(path, monkeypatch):
    """The README's kernel-log examples are real output: rerun, they print the same."""
    monkeypatch.chdir(ROOT)
    for block in fenced(ROOT / "docs" / "kernel.md"):
        first, _, shown = block.partition("\n")
        if first.startswith(f"$ lockcheck check {path}"):
            assert _readme_run(first[2:]) == shown
            return
    pytest.fail(f"no README example runs lockcheck check {path}")


def test_readme_stat_examples_print_what_they_show(monkeypatch):
    """Each `$ lockcheck stat ...` block of the README is that command's output, as printed now."""
    monkeypatch.chdir(ROOT)  # the examples name traces/... relative to the checkout
    examples = [block for block in fenced(ROOT / "docs" / "stat.md") if block.startswith("$ lockcheck stat")]
    assert len(examples) == 2
    for block in examples:
        lines = block.splitlines()
        command = lines.pop(0)
        while command.endswith("\\"):
            command = command[:-1] + lines.pop(0).strip()
        out, err = io.StringIO(), io.StringIO()
        assert main(command.split()[2:], stdout=out, stderr=err) == 0, err.getvalue()
        assert out.getvalue() == "\n".join(lines) + "\n", command
