"""`lockcheck stat --compare BASE NEW`: per-class lock_stat changes, as the kernel test robot shows them.

Each side is one or more runs (traces or /proc/lock_stat dumps); every
metric is the mean over a side's runs with its standard deviation, and the
change is relative to BASE.  The text is the layout of the 0-day kernel
test robot's comparison tables (lkp-tests, `Compare.show_group`), which
kernel developers read in every performance report:

    a68d3cbfade64392 52ec85cb99e9b31dc304eae965a
    ---------------- ---------------------------
             %stddev     %change         %stddev
                 \\          |                \\
          91 ±  3%     -71.4%      26.00 ± 12%  lock_stat.&anon_vma->rwsem.contentions

- a value is `%10.2f` below 1000, `%10.4g` above 1e8, else `%10d`;
- its standard deviation, as a percentage of the mean, is printed
  ` ±%3d%%` only when above 2% (one run has none);
- the change is `%+10.1f%%` (`%+10.2g%%` from 100000% on), computed against
  1e-100 when the base is 0, as lkp does;
- the metric is `lock_stat.CLASS.COLUMN`, lkp's name for lock_stat data,
  reads and writes of a class together.

The standard deviation is the population one (divided by the number of
runs), lkp's `standard_deviation`.
"""

from __future__ import annotations

import json
import math
import os
from dataclasses import dataclass
from typing import Optional, Sequence, TextIO

from lockcheck.util.escape import visible
from lockcheck.stat.inputs import Table
from lockcheck.stat.model import COLUMNS, TIME_COLUMNS, ClassStats, us

#: lkp's column widths (Compare::ABS_WIDTH, REL_WIDTH, ERR_WIDTH)
ABS_WIDTH, REL_WIDTH, ERR_WIDTH = 10, 10, 6
#: classes compared when --top is not given
DEFAULT_TOP = 10
#: what the chart needs
PLOT_COLUMNS = ("waittime-total", "holdtime-total")


@dataclass
class Side:
    """One side of the comparison: a label and its runs' tables."""

    label: str
    runs: list[Table]


@dataclass
class Metric:
    """One compared number of one class: each run's value on both sides."""

    cls: str
    column: str
    base: list[float]
    new: list[float]

    @property
    def name(self) -> str:
        return f"lock_stat.{self.cls}.{self.column}"

    @property
    def base_mean(self) -> float:
        return _mean(self.base)

    @property
    def new_mean(self) -> float:
        return _mean(self.new)

    @property
    def change(self) -> float:
        """Percent change of the means (`calc_perf_change`: a zero base counts as 1e-100)."""
        base = self.base_mean or 1e-100
        return 100.0 * (self.new_mean - base) / base


def _mean(values: Sequence[float]) -> float:
    return sum(values) / len(values) if values else 0.0


def stddev(values: Sequence[float]) -> float:
    """Population standard deviation; -1 for fewer than two runs (lkp's "none")."""
    if len(values) < 2:
        return -1.0
    mean = _mean(values)
    return math.sqrt(sum((v - mean) ** 2 for v in values) / len(values))


def _value(stats: Optional[ClassStats], column: str) -> float:
    """A class's column as compared: times in printed microseconds, 0 for a class a run lacks."""
    if stats is None:
        return 0
    value = stats.total_row().value(column)
    return us(value) if column in TIME_COLUMNS else value


def compare(base: Side, new: Side, columns: Sequence[str] = COLUMNS, sort: str = "contentions",
            top: Optional[int] = DEFAULT_TOP) -> list[Metric]:
    """The metrics of the TOP classes (by SORT, the larger side's mean), every COLUMN each, zeros left out."""
    base_runs = [{c.name: c for c in run.classes} for run in base.runs]
    new_runs = [{c.name: c for c in run.classes} for run in new.runs]
    names: dict[str, None] = {}
    for run in base_runs + new_runs:
        names.update(dict.fromkeys(run))

    def values(runs: list[dict], name: str, column: str) -> list[float]:
        return [_value(run.get(name), column) for run in runs]

    def weight(name: str) -> float:
        if sort == "class name":
            return 0.0
        return max(_mean(values(base_runs, name, sort)), _mean(values(new_runs, name, sort)))

    ordered = sorted(names, key=lambda n: (-weight(n), n) if sort != "class name" else (0, n))
    ordered = [n for n in ordered if any(_has_data(run.get(n)) for run in base_runs + new_runs)]
    if top:
        ordered = ordered[:top]
    metrics = []
    for name in ordered:
        for column in columns:
            metric = Metric(name, column, values(base_runs, name, column), values(new_runs, name, column))
            if metric.base_mean or metric.new_mean:
                metrics.append(metric)
    return metrics


def _has_data(stats: Optional[ClassStats]) -> bool:
    return stats is not None and stats.has_data


# -- text: lkp's layout --------------------------------------------------------------------------


def _number(avg: float) -> str:
    if abs(avg) < 1000:
        return f"{avg:{ABS_WIDTH}.2f}"
    if abs(avg) > 100_000_000:
        return f"{avg:{ABS_WIDTH}.4g}"
    return f"{int(avg):{ABS_WIDTH}d}"


def _spread(values: Sequence[float], avg: float) -> str:
    sd = stddev(values)
    if avg != 0:
        sd = 100 * sd / avg
    return f" ±{int(sd):{ERR_WIDTH - 3}d}%" if sd > 2 else " " * ERR_WIDTH


def metric_text(metric: Metric) -> str:
    """One lkp row: BASE ±SD%  %CHANGE  NEW ±SD%  metric."""
    change = metric.change
    fmt = ".1f" if abs(change) < 100_000 else ".2g"
    return (_number(metric.base_mean) + _spread(metric.base, metric.base_mean)
            + f"{change:+{REL_WIDTH}{fmt}}% "
            + _number(metric.new_mean) + _spread(metric.new, metric.new_mean)
            + f"  {metric.name}")


def render_text(base: Side, new: Side, metrics: list[Metric], out: TextIO) -> None:
    """The comparison as the kernel test robot prints it (`show_group_header`, `show_perf_header`)."""
    first = ABS_WIDTH + ERR_WIDTH
    width = first + REL_WIDTH + 1
    out.write("runs: \n")
    for side in (base, new):  # labels and class names come from file names and traces: shown visibly
        out.write(visible(f"  {side.label} ({len(side.runs)} run{'s' if len(side.runs) != 1 else ''}: "
                          f"{', '.join(run.label for run in side.runs)})") + "\n")
    out.write("\n")
    out.write(visible(f"{base.label[:first]:>{first}} {new.label[:width]:>{width}} ") + "\n")
    out.write(f"{'-' * first} {'-' * width} \n")
    out.write("         %stddev     %change         %stddev\n")
    out.write("             \\          |                \\  \n")
    for metric in metrics:
        out.write(visible(metric_text(metric)) + "\n")


def render_json(base: Side, new: Side, metrics: list[Metric], out: TextIO) -> None:
    """`{"version": 2, "base": {...}, "new": {...}, "metrics": [...]}`: every run's value kept."""

    def side(s: Side) -> dict:
        return {"label": s.label, "runs": [run.label for run in s.runs]}

    def numbers(values: list[float]) -> dict:
        sd = stddev(values)
        return {"mean": _mean(values), "stddev": sd if sd >= 0 else None, "values": values}

    doc = {
        "version": 2,
        "base": side(base),
        "new": side(new),
        "metrics": [{"class name": m.cls, "column": m.column, "metric": m.name, "base": numbers(m.base),
                     "new": numbers(m.new), "%change": m.change} for m in metrics],
    }
    json.dump(doc, out, indent=2, ensure_ascii=False)
    out.write("\n")


def side_labels(base: str, new: str) -> tuple[str, str]:
    """What the header calls the sides: their file or directory names, with the parent when those agree."""

    def name(path: str, parts: int) -> str:
        if "," in path and not os.path.exists(path):  # runs joined by commas
            return ",".join(name(one, parts) for one in path.split(",") if one)
        pieces = [p for p in path.replace(os.sep, "/").split("/") if p]
        return "/".join(pieces[-parts:]) or path

    for parts in (1, 2, 3):
        labels = name(base, parts), name(new, parts)
        if labels[0] != labels[1]:
            return labels
    return base, new
