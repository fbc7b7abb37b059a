"""`lockcheck stat --compare` (the kernel test robot's table) and `--plot`."""

from __future__ import annotations

import builtins
import importlib.util
import io
import json
from pathlib import Path

import pytest

from lockcheck.commands.cli import main
from lockcheck.stat import compare
from lockcheck.stat.compare import Metric
from testdata import CAPTURES, ROOT, TRACES

SAMPLES = TRACES / "contention"


def run(*argv: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(["stat", *argv], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def lt(tmp_path: Path, name: str, holds: list[int], contentions: int) -> str:
    """A run where A is held len(holds) times and contended CONTENTIONS times."""
    lines, ts = [], 1.0
    for i, hold in enumerate(holds):
        lines.append(f"T1 acquire A ts={ts:.6f} cpu=0")
        if i < contentions:
            lines.append(f"T1 contended A ts={ts:.6f} cpu=0")
        lines.append(f"T1 acquired A ts={ts:.6f} cpu=0")
        lines.append(f"T1 release A ts={ts + hold / 1e6:.6f} cpu=0")
        ts += 0.001
    path = tmp_path / name
    path.write_text("\n".join(lines) + "\n")
    return str(path)


def test_rows_in_the_robots_layout(tmp_path: Path) -> None:
    # base runs: 2 and 4 contentions (mean 3, population stddev 1 = 33%); new: one run with 1
    base = ",".join([lt(tmp_path, "b1.lt", [10, 10], 2), lt(tmp_path, "b2.lt", [10] * 4, 4)])
    new = lt(tmp_path, "n1.lt", [10], 1)
    status, out, _ = run("--compare", "--metrics", "contentions,acquisitions", base, new)
    assert status == 0
    lines = out.splitlines()
    head = lines.index("         %stddev     %change         %stddev")
    assert lines[head - 2] == f"{'b1.lt,b2.lt':>16} {'n1.lt':>27} "
    assert lines[head - 1] == "-" * 16 + " " + "-" * 27 + " "
    assert lines[head + 1] == "             \\          |                \\  "
    assert lines[head + 2:] == [
        f"{'3.00':>10} ± 33%{'-66.7':>10}% {'1.00':>10}{'':6}  lock_stat.A.contentions",
        f"{'3.00':>10} ± 33%{'-66.7':>10}% {'1.00':>10}{'':6}  lock_stat.A.acquisitions",
    ]
    assert lines[1].startswith("  b1.lt,b2.lt (2 runs: ")


def spread(mean: float, percent: float) -> list[float]:
    """Two runs with this mean whose population standard deviation is PERCENT of it."""
    return [mean * (1 - percent / 100), mean * (1 + percent / 100)]


@pytest.mark.parametrize("base, new, line", [
    # lines of kernel test robot reports (lkp-tests' `lkp compare`), numbers and all
    (spread(138055, 18.5), spread(184128, 14.5), "    138055 ± 18%     +33.4%     184128 ± 14%  cpuidle..usage"),
    ([3930], spread(4235, 3.3), "      3930            +7.8%       4235 ±  3%  vmstat.procs.r"),
    (spread(115.68 / 614.801, 160.5), spread(115.68, 185.5),
     "      0.19 ±160%  +61380.1%     115.68 ±185%  perf-sched.wait_time.avg.ms"),
    ([27370126], [24170828], "  27370126           -11.7%   24170828        will-it-scale.104.processes"),
    ([9.287e10 / 42.653], [9.287e10], " 2.177e+09         +4165.3%  9.287e+10        cpuidle..time"),
    ([6021 / 215.03], spread(6021, 200.5), "     28.00        +21403.0%       6021 ±200%  proc-vmstat.nr_active_file"),
])
def test_rows_match_the_robots_reports(base, new, line) -> None:
    # %10.2f below 1000, %10d up to 1e8, %10.4g above; the stddev as a percentage, shown above 2%
    text = compare.metric_text(Metric("X", "c", base, new))
    assert text.partition("  lock_stat.")[0] == line.rsplit("  ", 1)[0]


@pytest.mark.parametrize("base, new, text", [
    # a zero base is divided as 1e-100, and a change from 100000% on is printed %+10.2g
    ([0.0], [5.0], f"{'0.00':>10}{'':6}{'+5e+102':>10}% {'5.00':>10}{'':6}  lock_stat.X.c"),
    ([10.0, 10.2], [10.0], f"{'10.10':>10}{'':6}{'-1.0':>10}% {'10.00':>10}{'':6}  lock_stat.X.c"),
])
def test_zero_base_and_small_spread(base, new, text) -> None:
    assert compare.metric_text(Metric("X", "c", base, new)) == text


def test_json_keeps_every_run(tmp_path: Path) -> None:
    base = ",".join([lt(tmp_path, "b1.lt", [10, 30], 2), lt(tmp_path, "b2.lt", [10], 0)])
    new = lt(tmp_path, "n1.lt", [10], 0)
    status, out, _ = run("--compare", "--format", "json", "--metrics", "holdtime-total", base, new)
    assert status == 0
    doc = json.loads(out)
    assert doc["base"]["runs"] == [str(tmp_path / "b1.lt"), str(tmp_path / "b2.lt")]
    (metric,) = doc["metrics"]
    assert metric["metric"] == "lock_stat.A.holdtime-total"
    assert metric["base"] == {"mean": 25.0, "stddev": 15.0, "values": [40.0, 10.0]}
    assert metric["new"] == {"mean": 10.0, "stddev": None, "values": [10.0]}
    assert metric["%change"] == pytest.approx(-60.0)


def test_sample_traces_show_the_improvement() -> None:
    status, out, _ = run("--compare", "--format", "json", str(SAMPLES / "before"), str(SAMPLES / "after"))
    assert status == 0
    metrics = {m["metric"]: m for m in json.loads(out)["metrics"]}
    contentions = metrics["lock_stat.&anon_vma->rwsem.contentions"]
    assert len(contentions["base"]["values"]) == len(contentions["new"]["values"]) == 3
    assert contentions["%change"] < -30
    assert metrics["lock_stat.&anon_vma->rwsem.waittime-total"]["%change"] < -50
    # the same work on both sides: hold times do not move
    assert metrics["lock_stat.&anon_vma->rwsem.holdtime-total"]["%change"] == 0


def test_sample_traces_are_what_the_generator_writes() -> None:
    spec = importlib.util.spec_from_file_location("gen_contention", ROOT / "benchmarks" / "gen_contention.py")
    gen = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(gen)
    for variant in ("before", "after"):
        for seed in (1, 2, 3):
            out = io.StringIO()
            gen.generate(variant, seed, out)
            assert out.getvalue() == (SAMPLES / variant / f"run{seed}.lt").read_text()


def test_sample_traces_are_clean() -> None:
    out = io.StringIO()
    assert main(["check", "--no-config", "--no-progress", str(SAMPLES)], stdout=out, stderr=io.StringIO()) == 0


def test_dump_against_trace_is_folded() -> None:
    status, out, err = run("--compare", "--metrics", "contentions", "--top", "40",
                           str(CAPTURES / "clean" / "lock_stat.txt.xz"), str(CAPTURES / "clean" / "trace.ftrace.xz"))
    assert status == 0 and "classes folded" in err.replace("\n    ", " ")
    # the dump's &x->wait#6 and its other versions are one class, as the trace names it
    assert "lock_stat.&x->wait.contentions" in out and "#6" not in out


def test_compare_needs_two_sides(tmp_path: Path) -> None:
    status, _, err = run("--compare", lt(tmp_path, "a.lt", [1], 0))
    assert status == 2 and "exactly two sides" in err


def test_plot_png_and_svg(tmp_path: Path) -> None:
    png, svg = tmp_path / "c.png", tmp_path / "c.svg"
    assert run("--compare", "--plot", str(png), str(SAMPLES / "before"), str(SAMPLES / "after"))[0] == 0
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size < 60_000
    assert run("--plot", str(svg), str(SAMPLES / "before" / "run1.lt"))[0] == 0
    text = svg.read_text()
    assert text.lstrip().startswith("<?xml") and "anon_vma" in text


def test_plot_needs_png_or_svg(tmp_path: Path) -> None:
    status, _, err = run("--plot", str(tmp_path / "c.pdf"), str(SAMPLES / "before" / "run1.lt"))
    assert status == 2 and "give a .png or .svg file" in err


def test_plot_without_matplotlib_says_how_to_get_it(tmp_path: Path, monkeypatch) -> None:
    real_import = builtins.__import__

    def no_matplotlib(name, *args, **kwargs):
        if name == "matplotlib" or name.startswith("matplotlib."):
            raise ImportError(name)
        return real_import(name, *args, **kwargs)

    monkeypatch.setattr(builtins, "__import__", no_matplotlib)
    status, out, err = run("--plot", str(tmp_path / "c.png"), str(SAMPLES / "before" / "run1.lt"))
    assert status == 2 and err.strip() == "lockcheck stat: --plot needs matplotlib: pip install 'pylockdep[plot]'"
    assert not (tmp_path / "c.png").exists()
