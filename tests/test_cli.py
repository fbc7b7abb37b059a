"""The command line contract: exit statuses, one clear error line for bad input, whole reports."""

from __future__ import annotations

import gzip
import io
import json
import os
import subprocess
import sys
from pathlib import Path

import pytest

from lockcheck.commands.cli import main

GOLDEN = Path(__file__).parent / "golden" / "e2e"
UPDATE = os.environ.get("LOCKCHECK_UPDATE_GOLDEN") == "1"

ABBA = """\
T1 acquire A at=f.c:10
T1 acquire B at=f.c:11
T1 release B
T1 release A
T2 acquire B at=g.c:20
T2 acquire A at=g.c:21
T2 release A
T2 release B
"""


def run(args: list[str], stdin: str | bytes | None = None, monkeypatch=None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    if stdin is not None:
        data = stdin.encode() if isinstance(stdin, str) else stdin
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))
    status = main(["check", "--no-config", "--no-progress", *args], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def write(tmp_path: Path, name: str, text: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(text.encode() if isinstance(text, str) else text)
    return str(path)


# -- exit statuses -------------------------------------------------------------------
def test_clean_trace_exits_0(tmp_path):
    status, out, err = run([write(tmp_path, "ok.lt", "T1 acquire A\nT1 release A\n")])
    assert status == 0 and "no problems found" in out and err == ""


def test_findings_exit_1(tmp_path):
    status, out, _ = run([write(tmp_path, "abba.lt", ABBA)])
    assert status == 1 and "WARNING: possible circular locking dependency detected" in out


MALFORMED = [
    ("truncated.lt", "T1 acquire A\nT1 acquire", 2),
    ("nest-on-release.lt", "T1 acquire A\nT1 release A nest=B\n", 2),
    ("unknown-key.lt", "T1 acquire A subclas=1\n", 1),
    ("bad-subclass.lt", "T1 acquire A subclass=9\n", 1),
    ("unterminated.lt", 'T1 acquire "worker pool\n', 1),
    ("invalid-utf8.lt", b"T1 acquire A\nT1 acquire \xff\xfe\n", 2),
    ("binary.lt", b"T1 acquire A\n\x00\x01\x02\x03garbage\n", 2),
    ("unknown-op.lt", "T1 acquire A\nT1 release A\nT1 aquire B\n", 3),
]


@pytest.mark.parametrize("name, text, line", MALFORMED, ids=[m[0] for m in MALFORMED])
def test_malformed_input_is_one_error_line_and_exit_2(tmp_path, name, text, line):
    path = write(tmp_path, name, text)
    status, _, err = run([path])
    assert status == 2
    lines = err.strip().splitlines()
    assert len(lines) == 1, err
    assert lines[0].startswith(f"{path}:{line}:"), err
    assert "Traceback" not in err


def test_missing_file(tmp_path):
    status, _, err = run([str(tmp_path / "nope.lt")])
    assert status == 2 and err.strip() == f"{tmp_path / 'nope.lt'}: No such file or directory"


def test_directory_without_traces(tmp_path):
    (tmp_path / "notes.md").write_text("hello")
    status, _, err = run([str(tmp_path)])
    assert status == 2 and len(err.strip().splitlines()) == 1 and str(tmp_path) in err


def test_unknown_format_and_bad_usage_exit_2(tmp_path):
    path = write(tmp_path, "ok.lt", "T1 acquire A\n")
    assert run(["--format", "yaml", path])[0] == 2
    assert run(["--input-format", "nope", path])[0] == 2
    assert main(["frobnicate"], stdout=io.StringIO(), stderr=io.StringIO()) == 2
    assert main([], stdout=io.StringIO(), stderr=io.StringIO()) == 2


def test_findings_before_a_bad_line_are_still_reported(tmp_path):
    path = write(tmp_path, "late.lt", ABBA + "T3 acquire C bogus\n")
    status, out, err = run(["--format", "json", path])
    assert status == 2
    assert [f["kind"] for f in json.loads(out)["findings"]] == ["circular-dependency"]
    assert err.startswith(f"{path}:9:")


def test_empty_trace_is_not_an_error_but_says_so(tmp_path):
    status, out, err = run([write(tmp_path, "empty.lt", "# nothing here\n\n")])
    assert status == 0
    assert "empty trace" in err


def test_stdin_and_compressed_input(tmp_path, monkeypatch):
    status, out, _ = run(["--format", "json", "-"], stdin=ABBA, monkeypatch=monkeypatch)
    assert status == 1 and json.loads(out)["findings"][0]["cycle"] == ["A", "B"]
    path = write(tmp_path, "abba.trace.gz", gzip.compress(ABBA.encode()))
    status, out, _ = run(["--format", "json", path])
    assert status == 1 and json.loads(out)["stats"]["events"] == 8


def test_first_stops_like_the_kernel(tmp_path):
    path = write(tmp_path, "two.lt", ABBA + "T3 release Z\n")
    assert len(json.loads(run(["--format", "json", path])[1])["findings"]) == 2
    assert len(json.loads(run(["--format", "json", "--first", path])[1])["findings"]) == 1


def test_json_document_follows_the_contract(tmp_path):
    status, out, _ = run(["--format", "json", write(tmp_path, "abba.lt", ABBA)])
    doc = json.loads(out)
    assert doc["version"] == 1
    (finding,) = doc["findings"]
    assert {k: finding[k] for k in ("kind", "task", "lock", "held", "cycle", "message")} == {
        "kind": "circular-dependency", "task": "T2", "lock": "A", "held": "B", "cycle": ["A", "B"],
        "message": "possible circular locking dependency detected"}
    assert finding["location"].endswith("abba.lt:6")
    assert doc["stats"] == {"events": 8, "tasks": 2, "classes": 2, "dependencies": 1}


def test_python_dash_m_is_the_same_program(tmp_path):
    path = write(tmp_path, "abba.lt", ABBA)
    proc = subprocess.run([sys.executable, "-m", "lockcheck", "check", "--format", "json", path],
                          capture_output=True, text=True, cwd=Path(__file__).resolve().parents[1])
    assert proc.returncode == 1 and json.loads(proc.stdout)["findings"][0]["kind"] == "circular-dependency"


# -- whole reports, end to end ------------------------------------------------------------
E2E = {
    "abba": ABBA,
    "abcd_chain": "".join(f"T{i} acquire {a}\nT{i} acquire {b}\nT{i} release {b}\nT{i} release {a}\n"
                          for i, (a, b) in enumerate(["AB", "BC", "CD", "DA"], 1)),
    "mm_take_all_locks": (Path(__file__).resolve().parents[1] / "traces" / "mm_take_all_locks.lt").read_text(),
    "unlock_imbalance": "T1 acquire A\nT1 release A\nT1 release A at=h.c:99\n",
    "held_at_exit": "T1 acquire A at=a.c:1\nT1 acquire B at=b.c:2\nT1 release B\nT1 exit\n",
    "nest_not_held": "T1 acquire &anon_vma->rwsem@0x1 nest=&mm->mmap_sem at=f+0x10/0x40\n",
    "freed": "T1 acquire &obj->lock@0xff01 at=obj_get+0x1/0x2\nT1 free &obj->lock@0xff01\n",
    "rread_cycle": "T1 acquire L rread\nT1 acquire M\nT1 release M\nT1 release L\nT2 acquire M\nT2 acquire L\n",
}


@pytest.mark.parametrize("name", sorted(E2E))
def test_whole_text_report_matches_golden(tmp_path, monkeypatch, name):
    monkeypatch.chdir(tmp_path)
    Path(f"{name}.lt").write_text(E2E[name])
    status, out, err = run([f"{name}.lt"])
    assert status == 1, err
    text = out.replace(f"lockcheck {__import__('lockcheck').__version__}  ", "lockcheck VERSION  ")
    golden = GOLDEN / f"{name}.txt"
    if UPDATE:
        golden.parent.mkdir(parents=True, exist_ok=True)
        golden.write_text(text)
    assert text == golden.read_text()


def test_graph_to_stdout_uses_the_given_stream(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    path = write(tmp_path, "abba.lt", ABBA)
    # findings are check's to report: graph exits 0 once the graph is written
    assert main(["graph", path, "-o", "-", "--no-progress", "--no-config"], stdout=out, stderr=err) == 0
    assert err.getvalue() == "lockcheck: -: 2 lock classes, 1 dependency, 1 finding (`lockcheck check` reports them)\n"
    doc = json.loads(out.getvalue())
    assert doc["lockcheck-graph"] == 1 and len(doc["dependencies"]) == 1


LOST = """\
# tracer: nop
            demo-101     [000] ...1.    10.001000: lock_acquire: ffff888003c1e000 &a->lock
            demo-202     [001] ...1.    10.001005: lock_acquire: ffff888003c1e200 &c->lock
CPU:0 [LOST 12 EVENTS]
            demo-101     [000] ...1.    10.002000: lock_acquire: ffff888003c1e040 &b->lock
            demo-101     [000] ...1.    10.002100: lock_release: ffff888003c1e040 &b->lock
            demo-202     [001] ...1.    10.002200: lock_acquire: ffff888003c1e300 &d->lock
"""


def test_lost_events_reset_that_cpus_stacks_and_say_so(tmp_path):
    """After `CPU:0 [LOST ...]` what demo-101 held is unknown: no `&a->lock -> &b->lock` dependency
    may come from it; demo-202 on CPU 1 keeps its stack (`&c->lock -> &d->lock` is recorded)."""
    path = write(tmp_path, "lost.ftrace", LOST)
    graph = tmp_path / "g.json"
    status, out, err = run(["--format", "json", "--save-graph", str(graph), path])
    assert status == 0, err
    doc = json.loads(out)
    assert any("reset after lost events" in note for note in doc["notes"])
    deps = {(d["from"], d["to"]) for d in json.loads(graph.read_text())["dependencies"]}
    assert deps == {("&c->lock", "&d->lock")}


def test_each_trace_file_is_a_run_of_its_own(tmp_path):
    """Locks still held when one file ends are not held in the next; the orders of both meet."""
    first = write(tmp_path, "1.lt", "T1 acquire A\nT1 acquire B\nT1 release B\nT1 acquire C\n")
    second = write(tmp_path, "2.lt", "T1 acquire D\nT1 release D\nT2 acquire B\nT2 acquire A\n")
    graph = tmp_path / "g.json"
    status, out, _ = run(["--format", "json", "--save-graph", str(graph), first, second])
    doc = json.loads(out)
    # no A -> D (or C -> D) from T1's leftovers in 1.lt; the B -> A of 2.lt closes a cycle with 1.lt's A -> B
    deps = {(d["from"], d["to"]) for d in json.loads(graph.read_text())["dependencies"]}
    assert deps == {("A", "B"), ("A", "C")}
    assert [(f["kind"], f["cycle"]) for f in doc["findings"]] == [("circular-dependency", ["A", "B"])]
    assert doc["stats"]["tasks"] == 3 and status == 1
