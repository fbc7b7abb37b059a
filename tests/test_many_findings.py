"""Traces with very many findings (issue 30): streamed JSON, grouped text, nothing dropped.

The all-pairs trace takes every pair of N classes in both orders: N*(N-1)/2
circular findings, all among one strongly connected set of N classes.  It is
generated here (benchmarks/bench_findings.py writes the same trace), never
stored.
"""

from __future__ import annotations

import io
import json
import random
import re
from pathlib import Path

import jsonschema
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from lockcheck.commands.cli import main
from lockcheck.lockdep.checker import check_events
from lockcheck.readers import read
from lockcheck.report import Summary
from lockcheck.report import json as json_report
from lockcheck.report import sarif
from lockcheck.report import text
from lockcheck.report.text_groups import SHOWN, GroupedText

#: the document of docs/cli.md ("JSON"), as far as the contract fixes it
JSON_SCHEMA = {
    "type": "object",
    "required": ["version", "findings", "stats"],
    "properties": {
        "version": {"const": 1},
        "findings": {"type": "array", "items": {
            "type": "object",
            "required": ["kind", "task", "lock", "location", "message"],
            "properties": {
                "kind": {"type": "string"}, "task": {"type": "string"}, "lock": {"type": "string"},
                "held": {"type": ["string", "null"]}, "location": {"type": "string"},
                "message": {"type": "string"},
                "cycle": {"type": ["array", "null"], "items": {"type": "string"}},
            },
        }},
        "stats": {"type": "object", "required": ["events", "tasks", "classes", "dependencies"],
                  "properties": {k: {"type": "integer"} for k in ("events", "tasks", "classes", "dependencies")}},
    },
}

BLOCK = re.compile(r"^lockcheck: ([\d,]+) circular findings among ([\d,]+) lock classes that depend", re.M)
MORE = re.compile(r"^lockcheck: and ([\d,]+) more circular findings among these ([\d,]+) classes$", re.M)


def allpairs(path: Path, classes: int) -> Path:
    """Every pair (i < j) taken as i, j by task A, then as j, i by task B."""
    lines = ["#lockcheck-trace v1"]
    for i in range(classes):
        for j in range(i + 1, classes):
            lines += [f"A acquire c{i}", f"A acquire c{j}", f"A release c{j}", f"A release c{i}",
                      f"B acquire c{j}", f"B acquire c{i}", f"B release c{i}", f"B release c{j}"]
    path.write_text("\n".join(lines) + "\n")
    return path


def run(*argv: str) -> tuple[int, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--no-progress", "--no-config", *argv], stdout=out, stderr=err)
    return status, out.getvalue()


def _int(text: str) -> int:
    return int(text.replace(",", ""))


@pytest.fixture(scope="module")
def trace200(tmp_path_factory) -> Path:
    return allpairs(tmp_path_factory.mktemp("allpairs") / "allpairs-200.lt", 200)


def test_200_classes_text_is_one_block(trace200: Path) -> None:
    total = 200 * 199 // 2
    status, out = run(str(trace200))
    assert status == 1
    blocks = BLOCK.findall(out)
    assert [(_int(n), _int(c)) for n, c in blocks] == [(total, 200)]
    assert [(_int(n), _int(c)) for n, c in MORE.findall(out)] == [(total - SHOWN, 200)]
    assert out.count("WARNING: possible circular locking dependency detected") == SHOWN
    assert out.rstrip().splitlines()[-1].startswith(f"lockcheck: {total} findings ({total} circular-dependency)")
    assert len(out) < 20_000  # readable: the 19,900 findings in full are ~3 MB


@pytest.mark.slow
def test_200_classes_json_has_every_finding_and_is_valid(trace200: Path) -> None:
    status, out = run("--format", "json", str(trace200))
    assert status == 1
    doc = json.loads(out)
    jsonschema.validate(doc, JSON_SCHEMA)
    cycles = {frozenset(f["cycle"]) for f in doc["findings"]}
    assert len(doc["findings"]) == len(cycles) == 200 * 199 // 2
    assert cycles == {frozenset((f"c{i}", f"c{j}")) for i in range(200) for j in range(i + 1, 200)}


def test_max_per_group_option_and_config(tmp_path: Path) -> None:
    trace = allpairs(tmp_path / "t.lt", 8)  # 28 findings
    assert len(BLOCK.findall(run(str(trace))[1])) == 1
    status, out = run("--max-per-group", "28", str(trace))
    assert status == 1 and not BLOCK.findall(out) and out.count("WARNING:") == 28
    status, out = run("--max-per-group", "0", str(trace))
    assert not BLOCK.findall(out) and out.count("WARNING:") == 28
    (tmp_path / "pyproject.toml").write_text("[tool.lockcheck]\nmax-per-group = 30\n")
    out, err = io.StringIO(), io.StringIO()
    import os

    cwd = os.getcwd()
    os.chdir(tmp_path)
    try:
        assert main(["check", "--no-progress", str(trace)], stdout=out, stderr=err) == 1
    finally:
        os.chdir(cwd)
    assert not BLOCK.findall(out.getvalue()) and out.getvalue().count("WARNING:") == 28


def _random_trace(path: Path, seed: int, classes: int, pairs: int) -> Path:
    """Random nested acquisitions of a few classes by a few tasks: cycles of every length, and other kinds."""
    rng = random.Random(seed)
    lines = []
    for _ in range(pairs):
        task = f"T{rng.randrange(3)}"
        depth = rng.randrange(1, 4)
        taken = [f"k{rng.randrange(classes)}" for _ in range(depth)]
        lines += [f"{task} acquire {cls}@{i}" for i, cls in enumerate(taken)]
        lines += [f"{task} release {cls}@{i}" for i, cls in reversed(list(enumerate(taken)))]
    path.write_text("\n".join(lines) + "\n")
    return path


@settings(max_examples=40, deadline=None)
@given(seed=st.integers(0, 10**6), classes=st.integers(2, 9), pairs=st.integers(1, 60),
       limit=st.integers(0, 6))
def test_grouping_never_drops_a_finding(tmp_path_factory, seed: int, classes: int, pairs: int, limit: int) -> None:
    """JSON keeps every finding the checker raised; the grouped text accounts for each; under the
    threshold the text is what `text.render` prints."""
    trace = _random_trace(tmp_path_factory.mktemp("rand") / "r.lt", seed, classes, pairs)
    found, checker = check_events(read(str(trace)))
    summary = Summary(events=checker.stats.events, tasks=checker.task_count, classes=checker.graph.n_classes,
                      dependencies=checker.graph.n_dependencies)
    # JSON, streamed: every finding, the same document as the renderer's
    status, out = run("--format", "json", str(trace))
    assert status == (1 if found else 0)
    doc = json.loads(out)
    jsonschema.validate(doc, JSON_SCHEMA)
    assert doc["findings"] == [f.to_json() for f in found]
    stream = io.StringIO()
    writer = json_report.JsonStream(stream)
    for finding in found:
        writer.add(finding)
    writer.close(summary)
    whole = io.StringIO()
    json_report.render(found, summary, whole)
    assert stream.getvalue() == whole.getvalue()
    stream, whole = io.StringIO(), io.StringIO()
    writer = sarif.SarifStream(stream)
    for finding in found:
        writer.add(finding)
    writer.close(summary)
    sarif.render(found, summary, whole)
    assert stream.getvalue() == whole.getvalue()
    # text: every finding printed in full or counted in its block
    grouped = io.StringIO()
    writer = GroupedText(grouped, limit)
    for finding in found:
        writer.add(finding)
    writer.close(summary)
    out = grouped.getvalue()
    blocks = [_int(n) for n, _ in BLOCK.findall(out)]
    more = [_int(n) for n, _ in MORE.findall(out)]
    assert len(blocks) == len(more)
    full = out.count("\nWARNING: ") + out.count("\nBUG: ")
    assert full + sum(more) == len(found)
    assert all(n > limit for n in blocks)
    plain = io.StringIO()
    text.render(found, summary, plain)
    if not blocks:
        assert out == plain.getvalue()
    if limit == 0 or limit >= len(found):
        assert not blocks


def test_under_the_threshold_cli_text_is_unchanged(tmp_path: Path) -> None:
    """The CLI's text of a run with few findings is the renderer's, byte for byte."""
    trace = allpairs(tmp_path / "t.lt", 5)  # 10 findings
    found, checker = check_events(read(str(trace)))
    status, out = run(str(trace))
    summary = Summary(events=checker.stats.events, tasks=checker.task_count, classes=checker.graph.n_classes,
                      dependencies=checker.graph.n_dependencies, files=[str(trace)])
    plain = io.StringIO()
    text.render(found, summary, plain)
    assert status == 1 and out == plain.getvalue() and len(found) == 10


def test_200_classes_sarif_is_streamed_and_valid(trace200: Path) -> None:
    """SARIF keeps every finding too (its results wait in a temporary file, not in memory)."""
    schema = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())
    trace = allpairs(trace200.parent / "allpairs-40.lt", 40)
    status, out = run("--format", "sarif", str(trace))
    assert status == 1
    doc = json.loads(out)
    jsonschema.Draft4Validator(schema).validate(doc)
    results = doc["runs"][0]["results"]
    assert len(results) == 40 * 39 // 2 and {r["ruleIndex"] for r in results} == {0}
