"""PREEMPT_RT (`#lockcheck-trace v1 preempt-rt`, `--preempt-rt`): lockdep does not count softirq
context there ("lockdep: Remove softirq accounting on PREEMPT_RT"), so a lock taken in a softirq
and with softirqs on is consistent, and a sleeping lock in a softirq is a valid wait context."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from lockcheck.commands.cli import main
from lockcheck.lockdep.checker import CheckerOptions, check_events
from lockcheck.readers import lockdep_keys as more, lt, lt_write
from lockcheck.readers.lt import parse

from test_wait_context import agreed, every_path

_BODY = ["T1 softirq-enter", "T1 acquire &q->lock", "T1 release &q->lock", "T1 softirq-exit",
         "T2 acquire &q->lock", "T2 release &q->lock",
         "T3 softirq-enter", "T3 acquire &m->mutex wait=sleep", "T3 release &m->mutex", "T3 softirq-exit"]


def _text(header: str) -> str:
    return header + "\n" + "\n".join(_BODY) + "\n"


def test_softirq_usage_and_wait_context_without_rt(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert agreed(every_path(tmp_path, _text(lt.HEADER), monkeypatch)) == ["inconsistent-lock-state",
                                                                          "invalid-wait-context"]


def lt_paths(tmp_path: Path, text: str, monkeypatch: pytest.MonkeyPatch) -> dict:
    """The checker's and every `.lt` path's verdicts (JSON Lines has no header)."""
    found = {"checker": sorted(f.kind for f in check_events(parse(text.splitlines()))[0])}
    (tmp_path / "t.lt").write_text(text)
    for jobs in ([], ["--jobs", "2"]):
        for pure in ("1", "0"):
            monkeypatch.setenv("LOCKCHECK_PURE", pure)
            out, err = io.StringIO(), io.StringIO()
            status = main(["check", "--format", "json", *jobs, str(tmp_path / "t.lt")], stdout=out, stderr=err)
            assert status in (0, 1), err.getvalue()
            found[f"{jobs}{pure}"] = sorted(f["kind"] for f in json.loads(out.getvalue())["findings"])
    return found


def test_the_rt_header(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _text(more.RT_HEADER)
    assert [e.op for e in parse(text.splitlines())][0] == "run"
    assert agreed(lt_paths(tmp_path, text, monkeypatch)) == []


def test_the_rt_header_only_on_the_first_line() -> None:
    assert more.header_event(more.RT_HEADER, "t.lt", 2) is None
    assert more.header_event(lt.HEADER, "t.lt", 1) is None


@pytest.mark.parametrize("name", ["t.lt", "t.jsonl"])
@pytest.mark.parametrize("jobs", [[], ["--jobs", "2"]])
def test_the_option(tmp_path: Path, name: str, jobs: list[str]) -> None:
    events = list(parse(_text(lt.HEADER).splitlines()))
    if name == "t.lt":
        (tmp_path / name).write_text(_text(lt.HEADER))
    else:
        from lockcheck.readers import jsonl
        (tmp_path / name).write_text("".join(json.dumps(jsonl.to_json(e)) + "\n" for e in events))
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--format", "json", "--preempt-rt", *jobs, str(tmp_path / name)], stdout=out, stderr=err)
    assert status == 0, err.getvalue()
    assert json.loads(out.getvalue())["findings"] == []
    found, _ = check_events(events, options=CheckerOptions(preempt_rt=True))
    assert found == []


def test_the_header_is_written_back() -> None:
    event = next(iter(parse(_text(more.RT_HEADER).splitlines())))
    assert lt_write.format_event(event) == more.RT_HEADER
