"""The whole command line across input kinds: what one feature's tests cannot see.

Each feature (readers, kernel logs, boots, stat, convert, the renderers)
tests itself; these tests hold them together.  Every input kind lockcheck
takes -- `.lt`, ftrace, perf, JSON Lines, compressed, a kernel log, a
/proc/lockdep dump -- goes through every output format and every command,
and what one format says must be what the others say: the same findings,
the same titles, the same task names, never a traceback.
"""

from __future__ import annotations

import io
import json
import re
import shutil
from pathlib import Path

import pytest

from lockcheck import cli

from testdata import DATA, TRACES

KERNEL_LOGS = DATA / "kernel-log"


def run(*argv: str, stdin: bytes | None = None, monkeypatch=None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = cli.main([str(arg) for arg in argv], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def text_titles(out: str) -> list[str]:
    """The `WARNING: ...` / `BUG: ...` title of each report in a text report, in order."""
    return [line.split(": ", 1)[1] for line in out.splitlines() if re.match(r"^(WARNING|BUG): ", line)]


#: inputs with the title the kernel prints for their finding
TITLED = [
    (TRACES / "irq_unsafe_order.lt", "HARDIRQ-safe -> HARDIRQ-unsafe lock order detected"),
    (KERNEL_LOGS / "irq-safe-unsafe.log", "HARDIRQ-safe -> HARDIRQ-unsafe lock order detected"),
    (KERNEL_LOGS / "held-at-exit.log", "syz-fuzzer/4398 still has locks held!"),
    (KERNEL_LOGS / "irq-inversion.log", "possible irq lock inversion dependency detected"),
    (TRACES / "abba.lt", "possible circular locking dependency detected"),
]


@pytest.mark.parametrize("path,title", TITLED, ids=[path.name for path, _ in TITLED])
def test_every_format_gives_the_title_the_text_report_prints(path: Path, title: str) -> None:
    """JSON `message`, SARIF's message and GitHub's title say what the text report's
    WARNING line says, also for the two kernel titles that are format strings."""
    status, text, _ = run("check", path)
    assert status == 1
    assert text_titles(text) == [title]
    _, out, _ = run("check", "--format", "json", path)
    assert [f["message"] for f in json.loads(out)["findings"]] == [title]
    _, out, _ = run("check", "--format", "sarif", path)
    (result,) = json.loads(out)["runs"][0]["results"]
    assert result["message"]["text"].startswith(title + ":")
    _, out, _ = run("check", "--format", "github", path)
    assert f"title=lockcheck%3A {title.replace(',', '%2C').replace(':', '%3A')}::" in out.splitlines()[0]


def test_a_kernel_report_seen_once_is_worded_alike_in_every_format() -> None:
    log = KERNEL_LOGS / "recursive.log"
    _, text, _ = run("check", log)
    assert "seen once:" in text
    for fmt in ("sarif", "github"):
        _, out, _ = run("check", "--format", fmt, log)
        assert "seen once" in out and "seen 1 time" not in out


def test_the_three_sample_captures_of_one_abba_report_it_alike() -> None:
    """traces/sample.{ftrace,perf,jsonl} are the same AB-BA: the same finding, the same
    task names (`comm/pid`, as the kernel prints them), the same chain."""
    seen = set()
    for name in ("sample.ftrace", "sample.perf", "sample.jsonl"):
        status, out, _ = run("check", "--format", "json", TRACES / name)
        assert status == 1
        (finding,) = json.loads(out)["findings"]
        seen.add((finding["kind"], finding["task"], tuple(finding["cycle"]),
                  tuple((link["class"], link["evidence"]["task"]) for link in finding["chain"])))
    assert seen == {("circular-dependency", "demo-helper/102", ("&a->lock", "&b->lock"),
                     (("&b->lock", "demo/101"), ("&a->lock", "demo-helper/102")))}
