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
import lzma
import re
from pathlib import Path

import pytest

from lockcheck.commands import cli

from testdata import CAPTURES, DATA, TRACES

KERNEL_LOGS = DATA / "kernel-log"


def run(*argv) -> tuple[int, str, str]:
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


# -- /proc/lockdep dumps through every command -------------------------------------

LOCKDEP_DUMP = CAPTURES / "clean" / "lockdep.txt.xz"
CHAINS_DUMP = CAPTURES / "clean" / "lockdep_chains.txt.xz"


def stdin_bytes(monkeypatch, data: bytes) -> None:
    """Standard input holding DATA, as `lockcheck check -` reads it (sys.stdin.buffer)."""
    import sys

    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(data)))


def summary_line(text: str) -> str:
    return next(line for line in text.splitlines() if line.startswith("lockcheck: ") and " events, " in line)


@pytest.mark.parametrize("dump", [LOCKDEP_DUMP, CHAINS_DUMP], ids=["lockdep", "chains"])
def test_a_dump_on_standard_input_is_merged_as_the_same_file_is(dump: Path, monkeypatch) -> None:
    """`ssh host cat /proc/lockdep | lockcheck check -`: stdin cannot be looked at before it is
    read, so the reader hands a dump to the session instead of calling it "not a trace"."""
    status, named, _ = run("check", dump)
    assert status == 0
    for data in (dump.read_bytes(), lzma.decompress(dump.read_bytes())):
        stdin_bytes(monkeypatch, data)
        status, piped, err = run("check", "-")
        assert (status, err) == (0, "")
        assert summary_line(piped) == summary_line(named)
        assert "merged " in piped and "of <stdin>" in piped


def test_a_dumps_note_counts_the_dependencies_the_graph_got() -> None:
    """Many chains give one dependency: the note counts distinct ones, as the summary does."""
    _, out, _ = run("check", CHAINS_DUMP)
    deps = re.search(r"(\d+) dependencies\n", summary_line(out) + "\n").group(1)
    assert f"and {deps} dependencies of {CHAINS_DUMP}" in out.replace("\n    ", " ")


def test_a_graph_of_a_dump_on_standard_input(tmp_path: Path, monkeypatch) -> None:
    stdin_bytes(monkeypatch, CHAINS_DUMP.read_bytes())
    status, _, err = run("graph", "-", "-o", tmp_path / "g.json")
    assert status == 0 and "388 lock classes" in err
    assert len(json.loads((tmp_path / "g.json").read_text())["classes"]) == 388


@pytest.mark.parametrize("command", ["stat", "convert"])
def test_commands_that_read_lock_events_say_a_dump_has_none(command: str, monkeypatch) -> None:
    """A dump named, or piped, to `stat` or `convert` is named for what it is (it used to be
    "not a trace (looks like )" for a named one and an error for a piped one)."""
    status, _, err = run(command, LOCKDEP_DUMP)
    assert status == 0
    assert f"{LOCKDEP_DUMP}: not a trace (looks like a /proc/lockdep dump)" in err.replace("\n    ", " ")
    stdin_bytes(monkeypatch, LOCKDEP_DUMP.read_bytes())
    status, _, err = run(command, "-")
    assert status == 0
    assert "<stdin>: a /proc/lockdep dump holds no lock events" in err.replace("\n    ", " ")
    assert "looks like )" not in err and " -: " not in err


def test_diff_reads_dumps_as_the_graphs_they_are(tmp_path: Path) -> None:
    """A dump side is its graph (it used to be an empty side: "947 no longer seen"); two boots'
    dumps diff without false findings from replaying their usage bits."""
    saved = tmp_path / "clean.json"
    assert run("graph", LOCKDEP_DUMP, "-o", saved)[0] == 0
    status, out, _ = run("diff", saved, LOCKDEP_DUMP)
    assert status == 0 and out.rstrip().endswith("0 dependencies added, 0 widened, 0 no longer seen; 0 new findings")
    status, out, _ = run("diff", "--format", "json", LOCKDEP_DUMP, CAPTURES / "clean-nohash" / "lockdep.txt.xz")
    doc = json.loads(out)
    assert status == 0 and doc["findings"] == []
    assert doc["dependencies"]["added"] and doc["dependencies"]["removed"]


def test_replaying_a_graph_sets_each_usage_bit_alone() -> None:
    """A class the kernel saw hardirq-unsafe and softirq-safe (`{+.-.}`, a timer taken in a
    softirq with hardirqs on) replays without an inconsistent lock state."""
    from lockcheck.lockdep.checker import Checker
    from lockcheck.store.replay import replay_events
    from lockcheck.lockdep.findings import Evidence
    from lockcheck.lockdep.graph import DepGraph
    from lockcheck.lockdep.usage import ENABLED_HARDIRQ, USED, USED_IN_SOFTIRQ

    graph = DepGraph()
    graph.add_class("(&pool->mayday_timer)")
    for bit in (ENABLED_HARDIRQ, USED_IN_SOFTIRQ, USED):
        graph.set_usage("(&pool->mayday_timer)", bit, Evidence("lockdep.txt", 600, "/proc/lockdep"))
    checker = Checker(DepGraph())
    assert list(checker.run(replay_events(graph))) == []
    assert checker.graph.nx.nodes["(&pool->mayday_timer)"]["usage"] == graph.nx.nodes["(&pool->mayday_timer)"]["usage"]


# -- what a command says when it could not do its job ----------------------------------


def test_graph_does_not_claim_a_graph_it_did_not_write(tmp_path: Path) -> None:
    out = tmp_path / "g.json"
    status, _, err = run("graph", tmp_path / "missing.lt", TRACES / "abba.lt", "-o", out)
    assert status == 2 and not out.exists()
    assert f"lockcheck: {out}: not written: 1 input could not be read" in err
    assert "lock classes" not in err


def test_stat_names_the_inputs_that_gave_no_event(monkeypatch) -> None:
    log = KERNEL_LOGS / "recursive.log"
    _, _, err = run("stat", log)
    assert f"lockcheck: {log}: empty trace (no events)" in err
    stdin_bytes(monkeypatch, b"")
    _, _, err = run("stat", "-")
    assert "lockcheck: <stdin>: empty trace (no events)" in err


def test_stat_notes_are_worded_and_wrapped_as_checks_are() -> None:
    _, _, err = run("stat", TRACES / "sample.ftrace")
    lines = err.splitlines()
    assert lines and all(line.startswith(("lockcheck: note: ", "    ")) for line in lines)
    assert all(len(line) <= 80 for line in lines)


def test_a_bad_plot_name_is_refused_before_any_input_is_read(tmp_path: Path) -> None:
    status, out, err = run("stat", "--plot", tmp_path / "chart.pdf", TRACES / "sample.ftrace")
    assert (status, out) == (2, "")
    assert err.strip() == f"lockcheck stat: --plot {tmp_path / 'chart.pdf'}: give a .png or .svg file"
