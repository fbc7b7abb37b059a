"""A log that begins inside a circular report (its header cut off) still gives the chain's dependencies.

A dmesg ring buffer that wrapped, or a paste of a report's middle, may hold
`-> #N (CLASS){..}:` entries without the title: those entries name
dependencies lockdep had recorded, so they are a finding flagged partial
(`"partial": true` in JSON, a `partial:` note in text), failing the run like
any other report.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from lockcheck.commands import cli
from lockcheck.kernel.splat_deps import dependencies
from lockcheck.readers.kernel_log import LogStats, read_splats

from test_reader_kernel_log import DATA, expectations, lines_of

LOG = DATA / "circular-3-classes.log"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def tail(marker: str, skip: int = 0) -> list[str]:
    """The report from the line holding `marker` (the `skip`th such line) to its end."""
    lines = lines_of(LOG)
    at = [i for i, line in enumerate(lines) if marker in line][skip]
    return lines[at:]


def test_a_log_starting_at_a_chain_entry_gives_its_dependencies_flagged_partial(tmp_path: Path) -> None:
    lines = tail("-> #1 ")
    stats = LogStats()
    (splat,) = list(read_splats(lines, "tail.log", stats))
    assert splat.details["partial"] and [link.depth for link in splat.chain] == [1, 0]
    assert [(a, b) for a, b, _ in dependencies(splat)][0] == (
        "(wq_completion)wg-kex-wireguard1", "(work_completion)(&peer->transmit_handshake_work)")
    path = tmp_path / "tail.log"
    path.write_text("\n".join(lines) + "\n", encoding="utf-8")
    status, out, err = run("check", "--format", "json", str(path))
    assert status == 1, err
    (finding,) = json.loads(out)["findings"]
    assert finding["partial"] is True and finding["kind"] == "circular-dependency"
    assert finding["lock"] == "(wq_completion)wg-kex-wireguard1"
    assert finding.get("held") is None and finding.get("cycle") is None  # the higher entries may be lost
    status, out, _ = run("check", str(path))
    assert status == 1 and "partial:" in out and "(not in the log)" in out


def test_a_log_starting_at_the_chain_heading_gives_the_whole_cycle(tmp_path: Path) -> None:
    expect = expectations(LOG)
    path = tmp_path / "tail.log"
    path.write_text("\n".join(tail("the existing dependency chain")) + "\n", encoding="utf-8")
    status, out, err = run("check", "--format", "json", str(path))
    assert status == 1, err
    (finding,) = json.loads(out)["findings"]
    assert finding["partial"] is True
    assert (finding["lock"], finding["held"]) == (expect["lock"], expect["held"])
    assert len(finding["cycle"]) == 3 and finding["cycle"][0] == expect["lock"]


def test_a_whole_report_is_not_partial(tmp_path: Path) -> None:
    status, out, _ = run("check", "--format", "json", str(LOG))
    (finding,) = json.loads(out)["findings"]
    assert status == 1 and "partial" not in finding
