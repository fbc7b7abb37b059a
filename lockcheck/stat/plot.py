"""`--plot FILE.png|svg`: the top classes' wait and hold time, base against new.

Two panels of horizontal bars sharing the class axis: total wait time
(what contention cost) and total hold time (how long the lock was kept),
in microseconds or, from 1 ms on, milliseconds, one bar per side with the runs' standard deviation as an
error bar.  Without `--compare` there is one side.  matplotlib is an
optional dependency (`pip install 'pylockdep[plot]'`); the Agg backend
renders without a display.
"""

from __future__ import annotations

from typing import Optional, Sequence

from lockcheck.errors import UsageError
from lockcheck.stat.compare import Metric, Side, _mean, stddev

#: what the two panels show
PANELS = (("waittime-total", "total wait time"), ("holdtime-total", "total hold time"))
BASE_COLOR, NEW_COLOR = "#9aa5b1", "#d9534f"


def _pyplot():
    try:
        import matplotlib
    except ImportError:
        raise UsageError("lockcheck stat: --plot needs matplotlib: pip install 'pylockdep[plot]'") from None
    matplotlib.use("Agg")
    import matplotlib.pyplot as plt

    return plt


def check_path(path: str) -> None:
    """A UsageError unless a chart can be drawn to PATH: asked before any input is read, so a
    wrong name or a missing matplotlib is the only line printed."""
    if not path.lower().endswith((".png", ".svg")):
        raise UsageError(f"lockcheck stat: --plot {path}: give a .png or .svg file")
    _pyplot()


def plot(path: str, base: Side, new: Optional[Side], metrics: Sequence[Metric], title: str = "") -> None:
    """Draw the classes of METRICS (in their order) into PATH; the format follows its extension."""
    check_path(path)
    plt = _pyplot()
    classes = list(dict.fromkeys(m.cls for m in metrics))
    by_key = {(m.cls, m.column): m for m in metrics}
    height = max(2.2, 0.42 * len(classes) * (2 if new else 1) + 1.3)
    fig, axes = plt.subplots(1, 2, figsize=(9.5, height), sharey=True)
    rows = list(range(len(classes)))
    bar = 0.38 if new else 0.6
    for ax, (column, label) in zip(axes, PANELS):
        largest = max((v for m in metrics if m.column == column for v in m.base + m.new), default=0.0)
        scale, unit = (1000.0, "ms") if largest >= 1000 else (1.0, "µs")
        sides = [(base, BASE_COLOR, lambda m: m.base)]
        if new is not None:
            sides.append((new, NEW_COLOR, lambda m: m.new))
        for i, (side, color, pick) in enumerate(sides):
            offset = (i - (len(sides) - 1) / 2) * bar
            means, errors = [], []
            for cls in classes:
                metric = by_key.get((cls, column))
                values = [v / scale for v in pick(metric)] if metric else [0.0]
                means.append(_mean(values))
                errors.append(max(stddev(values), 0.0))
            ax.barh([r + offset for r in rows], means, height=bar, color=color, label=side.label,
                    xerr=errors if any(errors) else None, error_kw={"elinewidth": 0.8, "capsize": 2})
        ax.set_title(f"{label} ({unit})", fontsize=10)
        ax.grid(axis="x", color="#dddddd", linewidth=0.6)
        ax.set_axisbelow(True)
        ax.tick_params(labelsize=8)
        for side in ("top", "right"):
            ax.spines[side].set_visible(False)
    axes[0].set_yticks(rows)
    axes[0].set_yticklabels([_short(c) for c in classes], fontsize=8)
    axes[0].invert_yaxis()
    if new is not None:
        axes[1].legend(fontsize=8, loc="lower right", frameon=False)
    if title:
        fig.suptitle(title, fontsize=11)
    fig.tight_layout()
    try:
        fig.savefig(path, dpi=90)
    except OSError as err:
        raise UsageError(f"{path}: {err.strerror or err}") from None
    finally:
        plt.close(fig)


def _short(name: str, width: int = 34) -> str:
    return name if len(name) <= width else name[:width - 1] + "…"
