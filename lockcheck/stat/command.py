"""`lockcheck stat`: its options and the wiring inputs -> table -> text, JSON, chart.

The CLI module only creates the subcommand; everything `stat` takes is
declared here (`add_arguments`) and run here (`run`), so the command grows
without touching the shared parser.
"""

from __future__ import annotations

import argparse
from typing import TextIO

from lockcheck.errors import UsageError
from lockcheck.escape import visible
from lockcheck.stat import render
from lockcheck.stat.inputs import Table, load, runs

EXIT_CLEAN = 0


def add_arguments(parser: argparse.ArgumentParser) -> None:
    """The options of `lockcheck stat` beyond the inputs (which the CLI adds like every command's)."""
    parser.add_argument("--format", default="text", choices=("text", "json"), help="text (default) or json")
    parser.add_argument("--sort", default="contentions", metavar="KEY",
                        help="order classes by a lock_stat column (default contentions, the kernel's order), "
                             "'class name', or a perf lock report key (acquired, contended, avg_wait, wait_total, "
                             "wait_max, wait_min)")
    parser.add_argument("--top", type=int, metavar="N", help="only the first N classes")
    parser.add_argument("--fold", action="store_true",
                        help="fold classes that differ only by #N or /N (as a /proc/lock_stat dump names them) "
                             "into the name a trace shows")
    parser.add_argument("--output", "-o", metavar="FILE", help="write the table to FILE instead of stdout")


def run(args: argparse.Namespace, out: TextIO, stderr: TextIO) -> int:
    """`lockcheck stat TRACE...`: one table of every input."""
    key = render.sort_key(args.sort)
    if args.top is not None and args.top < 1:
        raise UsageError("lockcheck stat: --top takes a positive number")
    table = load(args.traces, args.input_format)
    if args.fold:
        table = table.folded()
    classes = [stats for stats in render.ordered(table.classes, key) if stats.rows()]
    if args.top:
        classes = classes[:args.top]
    if args.format == "json":
        render.render_json(classes, out, table.sources, table.notes)
    else:
        render.render_text(classes, out, table.warning)
    _notes(table, stderr)
    return EXIT_CLEAN


def _notes(table: Table, stderr: TextIO) -> None:
    for note in table.notes:
        print(visible(f"lockcheck: {note}"), file=stderr)
    if table.events == 0 and not any(source["kind"] == "lock_stat" for source in table.sources):
        print(visible(f"lockcheck: {table.label}: empty trace (no events)"), file=stderr)
