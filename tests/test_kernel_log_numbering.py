"""Classes that differ only in their per-boot `#N` are one class across reports, in counts and graphs.

Lockdep numbers the classes of one name in the order a boot registered
them (`(wq_completion)events#14` in one boot is `#7` in the next), so
reports of many boots joined into one graph must not count a class once
per numbering; the text keeps each report's own spelling.
"""

from __future__ import annotations

import io
import json
from pathlib import Path

from lockcheck.commands import cli

from test_reader_kernel_log import DATA

BUCKETS = DATA / "buckets"
#: the same wireguard cycle in two boots: the workqueue's class is `...wireguard1` in one, `...wireguard1#8` in the other
ONE, OTHER = BUCKETS / "deadlock-in-wg_set_device.log", BUCKETS / "deadlock-in-peer_remove_after_dead.log"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(list(argv), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def test_the_two_boots_number_the_class_differently() -> None:
    assert "(wq_completion)wg-kex-wireguard1#8" in OTHER.read_text(encoding="utf-8")
    assert "(wq_completion)wg-kex-wireguard1#" not in ONE.read_text(encoding="utf-8")


def test_two_boots_count_one_class_for_two_numberings() -> None:
    _, alone, _ = run("check", str(ONE))
    status, both, _ = run("check", str(ONE), str(OTHER))
    assert status == 1
    counts = [line for line in both.splitlines() if line.startswith("lockcheck: 1 finding")]
    assert counts and "7 lock classes, 6 dependencies" in counts[0], both
    assert "7 lock classes, 6 dependencies" in alone


def test_the_graph_holds_one_node_in_the_first_spelling(tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    status, _, err = run("graph", "--output", str(out), str(ONE), str(OTHER))
    assert status in (0, 1), err
    names = [node["name"] for node in json.loads(out.read_text(encoding="utf-8"))["classes"]]
    assert len(names) == len(set(names)) == 7
    assert "(wq_completion)wg-kex-wireguard1" in names and not any(name.endswith("#8") for name in names)


def test_each_report_keeps_its_own_spelling_in_the_text() -> None:
    _, both, _ = run("check", "--format", "json", str(OTHER), str(ONE))
    (finding,) = json.loads(both)["findings"]
    assert finding["count"] == 2
    assert "(wq_completion)wg-kex-wireguard1#8" in finding["cycle"]  # the first report read, as printed
