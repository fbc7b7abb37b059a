"""`--format sarif` validates against the SARIF 2.1.0 schema; `--format github` escapes per the runner."""

from __future__ import annotations

import io
import json
from pathlib import Path

import jsonschema
import pytest

from lockcheck.lockdep import findings as F
from lockcheck.commands.cli import main
from lockcheck.lockdep.findings import ChainLink, Evidence, Finding
from lockcheck.report import RENDERERS, Summary
from lockcheck.report import github, sarif

SCHEMA = json.loads((Path(__file__).parent / "data" / "sarif-schema-2.1.0.json").read_text())


def validate(doc: dict) -> None:
    jsonschema.Draft4Validator(SCHEMA).validate(doc)


def sample_findings() -> list[Finding]:
    cycle = Finding(
        kind=F.CIRCULAR, task="T2", lock="A", held="B", location="pr.lt:7", cycle=["A", "B"], site="b.c:21",
        chain=[ChainLink(1, "B", "+.+.", Evidence("main.lt", 3, "T1", "a.c:11")),
               ChainLink(0, "A", "+.+.", Evidence("pr.lt", 7, "T2", "b.c:21"))],
    )
    kernel_site = Finding(kind=F.RECURSIVE, task="kworker/0:1", lock="&rq->lock", held="&rq->lock",
                          location="/abs/trace dir/t.lt:12", site="mm_take_all_locks+0x146/0x190")
    no_site = Finding(kind=F.UNLOCK_IMBALANCE, task="T1", lock="X", location="t.lt:3", uncertain="capture started late")
    order = Finding(kind=F.ORDER_VIOLATION, task="T1", lock="A", held="B", location="t.lt:4", site="src/x.py:88:5",
                    details={"declared": ["A", "B"], "declared_at": "lockcheck.order:1"})
    return [cycle, kernel_site, no_site, order]


def render(module, findings, summary=None) -> str:
    out = io.StringIO()
    module.render(findings, summary or Summary(events=9, tasks=2, classes=3, dependencies=2, version="0.1.0",
                                               notes=["a note"], suppressed=1), out)
    return out.getvalue()


def test_renderers_are_registered():
    assert RENDERERS["sarif"] is sarif and RENDERERS["github"] is github


def test_sarif_validates_and_carries_locations_flows_fingerprints():
    doc = json.loads(render(sarif, sample_findings()))
    validate(doc)
    run = doc["runs"][0]
    results = run["results"]
    assert [r["ruleId"] for r in results] == [F.CIRCULAR, F.RECURSIVE, F.UNLOCK_IMBALANCE, F.ORDER_VIOLATION]
    assert {rule["id"] for rule in run["tool"]["driver"]["rules"]} == {r["ruleId"] for r in results}
    for r in results:
        assert run["tool"]["driver"]["rules"][r["ruleIndex"]]["id"] == r["ruleId"]
    # at= site that is FILE:LINE is the primary location; the trace location is related
    cycle = results[0]
    loc = cycle["locations"][0]["physicalLocation"]
    assert loc["artifactLocation"]["uri"] == "b.c" and loc["region"]["startLine"] == 21
    assert cycle["relatedLocations"][0]["physicalLocation"]["artifactLocation"]["uri"] == "pr.lt"
    steps = cycle["codeFlows"][0]["threadFlows"][0]["locations"]
    assert [s["location"]["physicalLocation"]["artifactLocation"]["uri"] for s in steps] == ["a.c", "b.c"]
    # a kernel symbol site: the trace location, the function as a logical location
    kernel = results[1]["locations"][0]
    assert kernel["physicalLocation"]["artifactLocation"]["uri"] == "file:///abs/trace%20dir/t.lt"
    assert kernel["logicalLocations"][0]["name"] == "mm_take_all_locks+0x146/0x190"
    assert results[2]["level"] == "warning"
    assert results[3]["locations"][0]["physicalLocation"]["region"] == {"startLine": 88, "startColumn": 5}
    assert run["invocations"][0]["toolExecutionNotifications"][0]["message"]["text"] == "a note"


def test_fingerprint_is_stable_across_rotation_and_locations():
    a, b = sample_findings()[0], sample_findings()[0]
    b.cycle = ["B", "A"]
    b.location = "elsewhere.lt:99"
    assert sarif.fingerprint(a) == sarif.fingerprint(b)
    assert sarif.fingerprint(a) != sarif.fingerprint(sample_findings()[1])


def test_empty_sarif_is_valid():
    validate(json.loads(render(sarif, [], Summary())))


def test_check_format_sarif_end_to_end(tmp_path: Path):
    trace = tmp_path / "abba.lt"
    trace.write_text("T1 acquire A at=a.c:1\nT1 acquire B at=a.c:2\nT1 release B\nT1 release A\n"
                     "T2 acquire B\nT2 acquire A\n")
    out, err = io.StringIO(), io.StringIO()
    assert main(["check", str(trace), "--format", "sarif", "--no-config"], stdout=out, stderr=err) == 1
    doc = json.loads(out.getvalue())
    validate(doc)
    (result,) = doc["runs"][0]["results"]
    assert result["locations"][0]["physicalLocation"]["region"]["startLine"] == 6


# -- github ---------------------------------------------------------------------------


def test_github_escaping_rules():
    assert github.escape_data("100%\r\nnext") == "100%25%0D%0Anext"
    assert github.escape_property("a:b,c%\n") == "a%3Ab%2Cc%25%0A"
    assert github.command("error", "x: y", file="a,b.c", line=3, col=None) == "::error file=a%2Cb.c,line=3::x: y"


def test_github_annotations():
    lines = render(github, sample_findings()).splitlines()
    assert lines[0].startswith("::error file=b.c,line=21,title=lockcheck%3A possible circular locking")
    assert "%0A-> #1 (B): first seen at main.lt:3 by T1, a.c:11" in lines[0]
    assert lines[1].startswith("::error file=/abs/trace dir/t.lt,line=12,")
    assert lines[2].startswith("::warning file=t.lt,line=3,")
    assert lines[3].startswith("::error file=src/x.py,line=88,col=5,")
    assert lines[4] == "::notice title=lockcheck::a note"
    assert lines[5] == "lockcheck: 4 findings in 9 events (1 suppressed)"


@pytest.mark.parametrize("count, warned", [(10, False), (11, True)])
def test_github_mentions_annotation_limit(count: int, warned: bool):
    many = [Finding(kind=F.RECURSIVE, task="T", lock=f"L{i}", held=f"L{i}", location=f"t.lt:{i + 1}")
            for i in range(count)]
    assert ("GitHub shows only the first 10" in render(github, many, Summary())) is warned
