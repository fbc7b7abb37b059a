"""The acceptance rules, run over every case in tests/data/examples.

Each case is a trace with a sibling `NAME.expect` (JSON) saying what
`lockcheck check` must answer:

- `exit`: the exit status (0 clean, 1 findings, 2 bad input);
- `findings`: compared as a multiset with the JSON report's findings: each
  expected one matches one reported one by `kind`, and by `lock` and
  `cycle` where given (a cycle matches any rotation of itself); nothing
  else may be reported;
- `kinds_any`: at least one finding, every one of a listed kind;
- `error_line`: for exit 2, the stderr line names this line, and there is
  no Python traceback;
- `text_in_order`: fragments the text report contains, in this order.

The checker below is this project's own reading of those rules, kept
small so that a failure says which rule a case broke.
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from lockcheck.commands.cli import main

from testdata import EXAMPLES

TRACE_SUFFIXES = (".lt", ".ftrace", ".perf", ".jsonl", ".trace")
COMPRESSED = (".gz", ".xz", ".zst")


def cases(folder: Path) -> list[tuple[Path, Path]]:
    """Every (trace, expect) pair under `folder`, compression suffixes ignored."""
    found = []
    for path in sorted(folder.rglob("*")):
        name = path.name
        for suffix in COMPRESSED:
            name = name.removesuffix(suffix)
        if path.is_file() and name.endswith(TRACE_SUFFIXES):
            expect = path.with_name(Path(name).stem + ".expect")
            if expect.is_file():
                found.append((path, expect))
    return found


def same_cycle(want: list[str], got: list[str]) -> bool:
    """True when `got` is `want` read from another starting lock."""
    if len(want) != len(got):
        return False
    doubled = list(got) * 2
    return not want or any(doubled[i:i + len(want)] == list(want) for i in range(len(got)))


def finding_matches(want: dict, got: dict) -> bool:
    return (want.get("kind") == got.get("kind")
            and ("lock" not in want or want["lock"] == got.get("lock"))
            and ("cycle" not in want or same_cycle(want["cycle"], got.get("cycle") or [])))


def in_order(text: str, fragments: list[str]) -> str | None:
    pos = 0
    for fragment in fragments:
        found = text.find(fragment, pos)
        if found < 0:
            return f"text report lacks {fragment!r} {'in this order' if fragment in text else 'at all'}"
        pos = found + len(fragment)
    return None


def compare(expect: dict, status: int, stdout: str, stderr: str, text: str | None) -> str | None:
    """What the run broke of `expect` (None: nothing); `text` is the text report, if asked for."""
    want_exit = expect.get("exit", 0)
    if status != want_exit:
        return f"exit {status}, expected {want_exit}: {stderr.strip()[-200:]}"
    if want_exit == 2:
        if "Traceback" in stderr:
            return "a Python traceback instead of one error line"
        line = expect.get("error_line")
        if line is not None and not re.search(rf":{line}(:\d+)?:", stderr):
            return f"the error does not name line {line}: {stderr.strip()[:200]}"
        return None
    try:
        got = list(json.loads(stdout)["findings"])
    except (ValueError, KeyError, TypeError) as err:
        return f"not the JSON document of the contract ({err})"
    if "kinds_any" in expect:
        kinds = {f.get("kind") for f in got}
        if not got or not kinds <= set(expect["kinds_any"]):
            return f"kinds {sorted(kinds)}, expected some of {expect['kinds_any']}"
        return None
    if "text_in_order" in expect:
        problem = in_order(text or "", expect["text_in_order"])
        if problem:
            return problem
    left = list(got)
    for want in expect.get("findings", []):
        hit = next((g for g in left if finding_matches(want, g)), None)
        if hit is None:
            return f"missing {json.dumps(want)}; got {json.dumps(got)[:300]}"
        left.remove(hit)
    return f"unexpected {json.dumps(left)[:300]}" if left else None


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--no-config", "--no-progress", *args], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


CASES = cases(EXAMPLES)


def test_the_examples_are_there():
    # a fresh clone must carry its cases: an empty list would pass every test below
    assert len(CASES) >= 14, f"only {len(CASES)} cases under {EXAMPLES}"
    assert {expect.name for _, expect in CASES} == {p.name for p in EXAMPLES.glob("*.expect")}


@pytest.mark.parametrize("trace, expect_path", CASES, ids=[trace.name for trace, _ in CASES])
def test_case(trace: Path, expect_path: Path):
    expect = json.loads(expect_path.read_text())
    status, stdout, stderr = run("--format", "json", str(trace))
    text = run(str(trace))[1] if "text_in_order" in expect else None
    problem = compare(expect, status, stdout, stderr, text)
    assert problem is None, problem


# -- the checker itself catches what it must --------------------------------------------
ABBA = {"kind": "circular-dependency", "lock": "A", "cycle": ["A", "B", "C"]}


def doc(*findings: dict) -> str:
    return json.dumps({"findings": list(findings)})


@pytest.mark.parametrize("cycle, ok", [(["B", "C", "A"], True), (["C", "A", "B"], True),
                                       (["A", "C", "B"], False), (["A", "B"], False)])
def test_cycles_compare_as_rotations(cycle, ok):
    got = dict(ABBA, cycle=cycle)
    assert (compare({"exit": 1, "findings": [ABBA]}, 1, doc(got), "", None) is None) is ok


@pytest.mark.parametrize("expect, status, stdout, stderr, text, problem", [
    ({"exit": 0}, 1, doc(ABBA), "", None, "exit 1, expected 0"),
    ({"exit": 1, "findings": [ABBA]}, 1, doc(ABBA, ABBA), "", None, "unexpected"),
    ({"exit": 1, "findings": [ABBA, ABBA]}, 1, doc(ABBA), "", None, "missing"),
    ({"exit": 1, "findings": [dict(ABBA, lock="B")]}, 1, doc(ABBA), "", None, "missing"),
    ({"exit": 1, "kinds_any": ["recursive-locking"]}, 1, doc(ABBA), "", None, "kinds"),
    ({"exit": 1, "kinds_any": ["circular-dependency"]}, 1, doc(), "", None, "kinds"),
    ({"exit": 2, "error_line": 3}, 2, "", "t.lt:4:1: bad", None, "does not name line 3"),
    ({"exit": 2}, 2, "", "Traceback (most recent call last):", None, "traceback"),
    ({"exit": 1, "findings": [ABBA], "text_in_order": ["b", "a"]}, 1, doc(ABBA), "", "a b", "in this order"),
    ({"exit": 1, "findings": [ABBA], "text_in_order": ["z"]}, 1, doc(ABBA), "", "a b", "at all"),
    ({"exit": 1, "findings": [ABBA]}, 1, "no json", "", None, "not the JSON"),
])
def test_the_checker_catches(expect, status, stdout, stderr, text, problem):
    assert problem in (compare(expect, status, stdout, stderr, text) or "")


def test_compressed_cases_are_found(tmp_path):
    (tmp_path / "x.lt.xz").write_bytes(b"")
    (tmp_path / "x.expect").write_text("{}")
    (tmp_path / "lonely.lt").write_text("")
    assert cases(tmp_path) == [(tmp_path / "x.lt.xz", tmp_path / "x.expect")]
