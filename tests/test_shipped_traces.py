"""The example traces in traces/ (the README points users at them) give the verdicts they describe."""

from __future__ import annotations

import io
import json
from pathlib import Path

import pytest

from lockcheck.commands.cli import main

TRACES = Path(__file__).resolve().parents[1] / "traces"
EXPECTED = {
    "abba.lt": [("circular-dependency", "&dev->lock", "&queue->lock")],
    "mm_take_all_locks.lt": [("recursive-locking", "&anon_vma->rwlock", "&anon_vma->rwlock")],
    "irq_unsafe_order.lt": [("irq-lock-inversion", "&dev->stats_lock", "&base->lock")],
    "sample.ftrace": [("circular-dependency", "&a->lock", "&b->lock")],
    "sample.perf": [("circular-dependency", "&a->lock", "&b->lock")],
    "sample.jsonl": [("circular-dependency", "&a->lock", "&b->lock")],
}


def test_every_shipped_trace_is_covered():
    assert {p.name for p in TRACES.iterdir() if p.is_file()} == set(EXPECTED)


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_shipped_trace_verdict(name):
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--format", "json", "--no-config", "--no-progress", str(TRACES / name)],
                  stdout=out, stderr=err)
    assert status == 1, err.getvalue()
    found = [(f["kind"], f["lock"], f["held"]) for f in json.loads(out.getvalue())["findings"]]
    assert found == EXPECTED[name]
