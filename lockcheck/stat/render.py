"""lock_stat tables as text (the /proc/lock_stat layout) and JSON, and their order.

The text is byte for byte what kernel/locking/lockdep_proc.c prints
(`seq_header`, `seq_stats`): a 40-column right-aligned class name (cut to
37 characters plus `#N`/`/N`, as `seq_stats` cuts it), twelve 14-column
numbers, times as `snprint_time` writes them, `-W`/`-R` rows for classes
taken both ways, then for contended classes the contention points and the
contending points under a rule as long as the name, and a dotted line.
Re-rendering a parsed /proc/lock_stat dump gives the dump back.

JSON carries the same numbers under the same column names, times in
microseconds as printed.
"""

from __future__ import annotations

import json
from typing import Iterable, Optional, TextIO

from lockcheck.errors import UsageError
from lockcheck.util.escape import visible
from lockcheck.stat.model import COLUMNS, ClassStats, Row, Site, format_us, printed_points

VERSION_LINE = "lock_stat version 0.4"
#: `40 + 1 + 12 * (14 + 1)`: the rules' length
RULE = 221
#: `perf lock report --sort` keys, accepted as aliases of lock_stat's columns
SORT_ALIASES = {
    "acquired": "acquisitions", "contended": "contentions", "avg_wait": "waittime-avg",
    "wait_total": "waittime-total", "wait_max": "waittime-max", "wait_min": "waittime-min",
    "name": "class name",
}
SORT_KEYS = ("class name",) + COLUMNS


def sort_key(text: str) -> str:
    """A `--sort` value as a column name (`waittime_total`, `wait_total`, `contended` are accepted)."""
    key = text.strip().lower()
    key = SORT_ALIASES.get(key, key).replace("_", "-")
    if key == "class-name":
        key = "class name"
    if key not in SORT_KEYS:
        raise UsageError(f"lockcheck stat: unknown sort key {text!r} (choose from {', '.join(SORT_KEYS)}, "
                         f"or perf's {', '.join(SORT_ALIASES)})")
    return key


def ordered(classes: Iterable[ClassStats], key: str = "contentions") -> list[ClassStats]:
    """Classes in table order: KEY descending (the class name ascending), stable.

    The default, contentions, is the kernel's order (`lock_stat_cmp`); ties
    keep the order the classes were first seen in.
    """
    if key == "class name":
        return sorted(classes, key=lambda c: c.name)
    return sorted(classes, key=lambda c: -c.total_row().value(key))


def display_name(name: str) -> str:
    """The class name as `seq_stats` prints it: at most 37 characters of the name, then `#N`, `/N`.

    >>> display_name("(work_completion)(&(&map->track.rwork)->work)")
    '(work_completion)(&(&map->track.rwork'
    >>> display_name("&type->i_mutex_dir_key#2/1")
    '&type->i_mutex_dir_key#2/1'
    """
    if len(name) <= 37:
        return name
    from lockcheck.kernel.state import split_class_name

    base, version, subclass = split_class_name(name)
    room = 38 - (2 if version > 1 else 0) - (2 if subclass else 0)
    text = base[:room - 1]
    if version > 1:
        text += f"#{version}"[:2]
    if subclass:
        text += f"/{subclass}"[:2]
    return text


# -- text ----------------------------------------------------------------------------------


def header(warning: bool = False) -> str:
    """`seq_header`: the version line, rules and the column titles."""
    lines = [VERSION_LINE]
    if warning:
        lines.append("*WARNING* lock debugging disabled!! - possibly due to a lockdep warning")
    lines.append("-" * RULE)
    lines.append(f"{'class name':>40}" + "".join(f" {title:>14}" for title in COLUMNS))
    lines.append("-" * RULE)
    lines.append("")
    return "\n".join(lines) + "\n"


def _row_text(label: str, row: Row) -> str:
    """One class line: `%40s:` then the numbers as `seq_stats`/`seq_lock_time` space them."""
    con_b, w_nr, w_min, w_max, w_total, w_avg, acq_b, h_nr, h_min, h_max, h_total, h_avg = row.values()
    return (f"{label}{con_b:14d} {w_nr:14d}"
            + "".join(f" {format_us(t):>14}" for t in (w_min, w_max, w_total, w_avg))
            + f" {acq_b:14d} {h_nr:14d}"
            + "".join(f" {format_us(t):>14}" for t in (h_min, h_max, h_total, h_avg)))


def _point_text(name: str, site: Site, count: int) -> str:
    ip, symbol = site
    return f"{name:>40} {count:14d} {'[<' + ip + '>]' if ip else '':>29} {symbol}"


def class_text(stats: ClassStats) -> str:
    """`seq_stats` for one class (empty when the class has nothing to print)."""
    name = display_name(stats.name)
    rows = stats.rows()
    lines = []
    for suffix, row in rows:
        label = f"{name:>38}{suffix}:" if suffix else f"{name:>40}:"
        lines.append(_row_text(label, row))
    if stats.contentions or stats.hidden_waits:  # `seq_stats`: points only under a class that waited
        namelen = len(name) + (2 if any(suffix == "-R" for suffix, _ in rows) else 0)
        rule = " " * max(0, 40 - namelen) + "-" * namelen
        contending = 0
        for kind, points in enumerate((stats.contention_points, stats.contending_points)):
            for i, (site, count) in enumerate(printed_points(points)):
                if i == 0:
                    lines.append(rule)
                lines.append(_point_text(name, site, count))
                contending += kind
        if contending:
            lines.extend(["", "." * RULE, ""])
    return "".join(visible(line) + "\n" for line in lines)  # a name's newline or escape is shown, not obeyed


def render_text(classes: Iterable[ClassStats], out: TextIO, warning: bool = False) -> None:
    """The whole /proc/lock_stat text for CLASSES, in the order given."""
    out.write(header(warning))
    for stats in classes:
        out.write(class_text(stats))


# -- JSON ----------------------------------------------------------------------------------


def _points_json(points: dict[Site, int]) -> list[dict]:
    return [{"count": count, "ip": ip or None, "symbol": symbol} for (ip, symbol), count in points.items()]


def class_json(stats: ClassStats) -> dict:
    """One class: its name, the twelve columns (reads and writes together), each side, its sites."""
    doc: dict = {"class name": stats.name}
    doc.update(stats.total_row().columns())
    doc["write"] = stats.write_row().columns() if stats.has_write else None
    doc["read"] = stats.read_row().columns() if stats.has_read else None
    doc["contention points"] = _points_json(stats.contention_points)
    doc["contending points"] = _points_json(stats.contending_points)
    return doc


def render_json(classes: Iterable[ClassStats], out: TextIO, sources: list[dict],
                notes: Optional[list[str]] = None) -> None:
    """`{"version": 2, "sources": [...], "columns": [...], "classes": [...], "notes": [...]}`."""
    doc = {
        "version": 2,
        "sources": sources,
        "columns": list(COLUMNS),
        "classes": [class_json(stats) for stats in classes],
        "notes": list(notes or ()),
    }
    json.dump(doc, out, indent=2, allow_nan=False)  # strict JSON, every control and bidi character escaped
    out.write("\n")
