"""`lockcheck stat`: its options and the wiring inputs -> table -> text, JSON, chart.

The CLI module only creates the subcommand; everything `stat` takes is
declared here (`add_arguments`) and run here (`run`), so the command grows
without touching the shared parser.
"""

from __future__ import annotations

import argparse
from typing import TYPE_CHECKING, TextIO

from lockcheck.errors import UsageError
from lockcheck.util.escape import visible
from lockcheck.readers.source import STDIN, STDIN_NAME
from lockcheck.util.wording import wrap_note

if TYPE_CHECKING:
    from lockcheck.stat.inputs import Table

# The pipeline's modules are imported by the functions that run it: the CLI declares every
# command's options (`add_arguments`) on each start, `lockcheck check` included.

EXIT_CLEAN = 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `lockcheck stat` beyond the inputs (which the CLI adds like every command's)."""
    parser.add_argument("--format", default="text", choices=("text", "json"), help="text (default) or json")
    parser.add_argument("--sort", default="contentions", metavar="KEY",
                        help="order classes by a lock_stat column (default contentions, the kernel's order), "
                             "'class name', or a perf lock report key (acquired, contended, avg_wait, wait_total, "
                             "wait_max, wait_min)")
    parser.add_argument("--top", type=int, metavar="N",
                        help="only the first N classes (--compare and --plot: 10 unless given)")
    parser.add_argument("--fold", action="store_true",
                        help="fold classes that differ only by #N or /N (as a /proc/lock_stat dump names them) "
                             "into the name a trace shows")
    parser.add_argument("--compare", action="store_true",
                        help="compare two sides, TRACE... = BASE NEW: each a trace or dump, a directory of runs, "
                             "or runs joined by commas; prints the kernel test robot's BASE %%stddev %%change NEW table")
    parser.add_argument("--metrics", metavar="COLUMNS",
                        help="with --compare: the lock_stat columns to compare, comma-separated (default all)")
    parser.add_argument("--plot", metavar="FILE",
                        help="also draw the top classes' wait and hold time (base vs new with --compare) "
                             "to FILE.png or FILE.svg (needs matplotlib: pip install 'pylockdep[plot]')")
    parser.add_argument("--contention", choices=("auto", "lockdep", "tracepoint"), default="auto",
                        help="where wait times come from: lockdep's lock_contended/lock_acquired (lock_stat's own), "
                             "the contention_begin/contention_end tracepoints (perf lock contention's), or auto: "
                             "lockdep's when a trace has them")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the table to FILE instead of stdout")


def run(args: argparse.Namespace, out: TextIO, stderr: TextIO) -> int:
    """`lockcheck stat TRACE...`: one table of every input."""
    from lockcheck.stat import compare, plot, render
    from lockcheck.stat.compare import Side
    from lockcheck.stat.inputs import load

    key = render.sort_key(args.sort)
    if args.top is not None and args.top < 1:
        raise UsageError("lockcheck stat: --top takes a positive number")
    if args.plot:
        plot.check_path(args.plot)
    if args.compare:
        return run_compare(args, key, out, stderr)
    if args.metrics:
        raise UsageError("lockcheck stat: --metrics goes with --compare")
    table = load(args.traces, args.input_format, args.contention, jobs=args.jobs)
    kinds = {source["kind"] for source in table.sources}
    if len(kinds) > 1:
        table.notes.append("a /proc/lock_stat dump and traces were added together, but a boot's dump already "
                           "counts its traces' events: set them side by side with --compare DUMP TRACE")
    if args.fold:
        table = table.folded()
    classes = [stats for stats in render.ordered(table.classes, key) if stats.has_data]
    if args.top:
        classes = classes[:args.top]
    if args.format == "json":
        render.render_json(classes, out, table.sources, table.notes)
    else:
        render.render_text(classes, out, table.warning)
    _notes(table, stderr, args.traces)
    if args.plot:
        side = Side(table.label, [table])
        chart = compare.compare(side, Side("", []), compare.PLOT_COLUMNS, key, args.top or compare.DEFAULT_TOP)
        plot.plot(args.plot, side, None, chart, "lock contention")
    return EXIT_CLEAN


def run_compare(args: argparse.Namespace, key: str, out: TextIO, stderr: TextIO) -> int:
    """`lockcheck stat --compare BASE NEW`: the kernel test robot's table (or JSON), and the chart."""
    from lockcheck.stat import compare, plot
    from lockcheck.stat.compare import Side
    from lockcheck.stat.inputs import runs

    if len(args.traces) != 2:
        raise UsageError("lockcheck stat --compare: give exactly two sides, BASE and NEW "
                         "(each a file, a directory of runs, or runs joined by commas)")
    columns = _columns(args.metrics)
    labels = compare.side_labels(*args.traces)
    base, new = (Side(label, runs(path, args.input_format, args.contention, jobs=args.jobs)) for label, path in zip(labels, args.traces))
    every = base.runs + new.runs
    kinds = {source["kind"] for run in every for source in run.sources}
    if args.fold or len(kinds) > 1:
        if not args.fold:
            print(wrap_note("lockcheck: note: ", "comparing /proc/lock_stat dumps with traces: classes folded to "
                            "the names a trace shows (#N and /N merged; --fold does this always)"), file=stderr)
        base.runs = [run.folded() for run in base.runs]
        new.runs = [run.folded() for run in new.runs]
    metrics = compare.compare(base, new, columns, key, args.top or compare.DEFAULT_TOP)
    if args.format == "json":
        compare.render_json(base, new, metrics, out)
    else:
        compare.render_text(base, new, metrics, out)
    for run, path in zip(every, [args.traces[0]] * len(base.runs) + [args.traces[1]] * len(new.runs)):
        _notes(run, stderr, [path])
    if args.plot:
        chart = compare.compare(base, new, compare.PLOT_COLUMNS, key, args.top or compare.DEFAULT_TOP)
        plot.plot(args.plot, base, new, chart, f"{base.label} vs {new.label}")
    return EXIT_CLEAN


def _columns(text: str | None) -> tuple[str, ...]:
    from lockcheck.stat import render
    from lockcheck.stat.model import COLUMNS

    if not text:
        return COLUMNS
    columns = tuple(render.sort_key(part) for part in text.split(",") if part.strip())
    if "class name" in columns or not columns:
        raise UsageError("lockcheck stat: --metrics takes lock_stat columns (contentions, waittime-total, ...)")
    return columns


def _notes(table: Table, stderr: TextIO, paths: list[str]) -> None:
    """The table's notes on stderr (stdout stays /proc/lock_stat's text), worded and wrapped as
    `check` words its notes; a table of no event and no dump says which inputs gave nothing."""
    for note in table.notes:
        print(wrap_note("lockcheck: note: ", visible(note)), file=stderr)
    if table.events == 0 and not any(source["kind"] == "lock_stat" for source in table.sources):
        label = table.label if table.sources else ", ".join(STDIN_NAME if path == STDIN else path for path in paths)
        print(visible(f"lockcheck: {label}: empty trace (no events)"), file=stderr)
