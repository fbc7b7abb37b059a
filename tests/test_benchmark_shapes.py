"""The benchmarks' adversarial shapes say what they claim: each checks clean but `fifo`, whose one
finding is lockdep's depth limit, and `dense` makes about ten dependencies per class (the
growth curves of benchmarks/run.py are only worth reading if the traces are these)."""

from __future__ import annotations

import io
import json
import sys
from pathlib import Path

import pytest

from lockcheck.commands.cli import main

ROOT = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(ROOT / "benchmarks"))
import shapes  # noqa: E402


@pytest.mark.parametrize("shape", sorted(shapes.SHAPES))
def test_each_shape_checks_as_it_says(shape, tmp_path, capsys) -> None:
    out = io.StringIO()
    written = shapes.write(shape, 300, out)
    trace = tmp_path / f"{shape}.lt"
    trace.write_text(out.getvalue())
    status = main(["check", "--format", "json", "--no-config", str(trace)])
    doc = json.loads(capsys.readouterr().out)
    kinds = [finding["kind"] for finding in doc["findings"]]
    assert kinds == shapes.EXPECTED_FINDINGS.get(shape, [])
    assert status == (1 if kinds else 0)
    assert doc["stats"]["events"] == written
    if shape == "dense":
        assert doc["stats"]["classes"] == 300
        assert 9 * 300 < doc["stats"]["dependencies"] <= 10 * 300
