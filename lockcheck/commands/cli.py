"""Command line: argument parsing, and wiring readers -> checker -> renderers.

Exit status (docs/cli.md): 0 nothing found, 1 findings,
2 usage error or unreadable/malformed input (one `FILE:LINE:COL: message`
line per problem on stderr, never a traceback).  Findings made before a
malformed line are still printed: they happened.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import os
import shlex
import signal
import sys
import textwrap
from typing import Callable, Iterator, Optional, Sequence, TextIO

from lockcheck.util.version import __version__
from lockcheck.errors import LockcheckError, UsageError
from lockcheck.util.escape import visible
from lockcheck.util.output import output_stream, refuse_inputs, stdout_stream
from lockcheck.commands.check import CheckSession, SessionOptions
from lockcheck.util.wording import wrap_note

EXIT_CLEAN, EXIT_FINDINGS, EXIT_ERROR = 0, 1, 2


class _Parser(argparse.ArgumentParser):
    """argparse that raises instead of exiting, so usage errors follow the exit-2 contract."""

    def error(self, message: str) -> None:  # type: ignore[override]
        raise UsageError(f"{self.prog}: {message}")


#: the examples at the end of each `--help` page (argparse epilogs), by command
EXAMPLES = {
    None: """\
examples:
  lockcheck check traces/abba.lt        an AB-BA deadlock, in lockdep's layout
  lockcheck check --format json boot/   a directory: each file read on its own
  lockcheck graph traces/ -o main.json  save the dependency graph for diffs
  lockcheck diff main.json pr-traces/   what a change adds (exit 1: a finding)
  lockcheck COMMAND --help              the options of one command""",
    "check": """\
exit status: 0 nothing found, 1 findings, 2 an input could not be read

examples:
  lockcheck check traces/abba.lt
  lockcheck check --format json --first trace.ftrace.xz
  lockcheck check --lockdep-state boot/ boot/trace.ftrace.xz
  lockcheck check --baseline main.json --suppress known.toml traces/""",
    "graph": """\
graph exits 0 once it wrote the graph, findings or not: reporting them is
`lockcheck check`'s job (its summary line on stderr counts them); 2 when an
input could not be read (and nothing is written).

examples:
  lockcheck graph traces/ -o main.json
  lockcheck graph trace.ftrace.xz -o locks.dot && dot -Tsvg locks.dot >locks.svg
  lockcheck graph --cycles-only boot/ -o cycles.dot
  lockcheck graph --focus '&rq->__lock' --depth 2 boot/ -o rq.dot""",
    "diff": """\
exit status: 0 nothing new, 1 NEW adds a finding, 2 an input could not be read

examples:
  lockcheck diff main.json traces/
  lockcheck diff --format github main.json pr-traces/""",
    "stat": """\
examples:
  lockcheck stat trace.ftrace.xz --top 10
  lockcheck stat --format json /proc/lock_stat""",
    "capture": """\
examples:
  lockcheck capture > capture.sh                     # the set-up, to read
  sudo lockcheck capture --run -o boot1 -- ./stress  # capture while it runs
  sudo lockcheck capture --run -o boot1 --duration 30
  lockcheck check boot1                              # check it as a boot""",
    "convert": """\
Each input stays a run of its own (a `#lockcheck-run` line), and tasks keep
the names reports print.

examples:
  lockcheck convert trace.ftrace.xz -o trace.lt
  lockcheck convert traces/ > all.lt""",
}


def _command(sub, name: str, help: str) -> argparse.ArgumentParser:
    """A subcommand whose `--help` ends with its examples."""
    description = textwrap.fill(help[:1].upper() + help[1:] + ".", width=79)
    return sub.add_parser(name, help=help, description=description,
                          epilog=EXAMPLES.get(name), formatter_class=argparse.RawDescriptionHelpFormatter)


def build_parser() -> argparse.ArgumentParser:
    parser = _Parser(prog="lockcheck", description="Lockdep for lock traces: finds deadlocks that have not happened yet.",
                     epilog=EXAMPLES[None], formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("--version", action="version", version=f"lockcheck {__version__}")
    sub = parser.add_subparsers(dest="command", metavar="COMMAND", parser_class=_Parser)

    check = _command(sub, "check", "check traces and report problems in lockdep's format")
    _add_input_args(check, traces_required=False)
    check.add_argument("--format", help="text (default), json, sarif, github or html (the default for -o FILE.html)")
    check.add_argument("--first", action="store_true", help="stop after the first finding, like the kernel")
    check.add_argument("--quiet", "-q", action="store_true", help="no summary or notes, findings only")
    check.add_argument("--max-per-group", metavar="N", type=_whole(0, 1 << 30, "a number of findings"),
                       help="text: print up to N circular findings of one set of classes that depend on each other "
                            "in full, more as one block with its 3 shortest cycles (default 20; 0: never group)")
    check.add_argument("--save-graph", metavar="GRAPH", help="write the dependency graph (.json, .graphml, .dot)")
    check.add_argument("--baseline", metavar="GRAPH", action="append", default=[],
                       help="merge a saved graph in before checking (repeatable)")
    check.add_argument("--suppress", metavar="FILE", help="accept known findings listed in FILE (TOML: docs/suppress.md)")
    check.add_argument("--order", metavar="FILE", help="declared lock order to seed and enforce")
    _add_annotation_args(check)
    check.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")

    check.add_argument("--no-config", action="store_true", help="ignore [tool.lockcheck] in pyproject.toml")
    _add_jobs_args(check)

    graph = _command(sub, "graph", "write the dependency graph of traces (.json, .graphml, .dot)")
    _add_input_args(graph)
    graph.add_argument("--output", "-o", metavar="OUT", required=True,
                       help="graph file: .json (lockcheck's format), .graphml or .dot; - for JSON on stdout")
    graph.add_argument("--graph-format", choices=("json", "graphml", "dot"),
                       help="the graph format, when OUT's extension does not tell")
    graph.add_argument("--baseline", metavar="GRAPH", action="append", default=[],
                       help="merge a saved graph in first (repeatable)")
    graph.add_argument("--order", metavar="FILE", help="declared lock order to seed the graph with")
    graph.add_argument("--suppress", metavar="FILE", help="suppressions and aliases (aliases rename classes; docs/suppress.md)")
    graph.add_argument("--no-config", action="store_true", help="ignore [tool.lockcheck] in pyproject.toml")
    graph.add_argument("--cycles-only", action="store_true",
                       help="keep only the classes and dependencies on a cycle (and circular findings)")
    graph.add_argument("--focus", metavar="CLASS", action="append", default=[],
                       help="keep CLASS (a name or a glob) and its neighbours (repeatable)")
    graph.add_argument("--depth", metavar="N", type=int, default=1,
                       help="with --focus: how many dependencies away, either direction (default 1)")
    graph.add_argument("--quiet", "-q", action="store_true", help="no summary line on stderr")
    _add_jobs_args(graph)
    _add_annotation_args(graph)

    diff = _command(sub, "diff", "what NEW adds to BASE: dependencies and findings (exit 1 on a new finding)")
    diff.add_argument("base", metavar="BASE", help="saved graph, trace, /proc/lockdep dump or directory")
    diff.add_argument("new", metavar="NEW", help="saved graph, trace, /proc/lockdep dump or directory")
    diff.add_argument("--input-format", default="auto", help="auto (default), lt, ftrace, perf, jsonl or kernel-log")
    diff.add_argument("--format", default="text",
                      help="text (default) or json; sarif or github print only the new findings")
    diff.add_argument("--suppress", metavar="FILE", help="accept known findings listed in FILE (TOML: docs/suppress.md)")
    diff.add_argument("--no-config", action="store_true", help="ignore [tool.lockcheck] in pyproject.toml")
    diff.add_argument("--output", "-o", metavar="FILE", help="write the report to FILE instead of stdout")
    diff.add_argument("--jobs", "-j", type=_jobs, default=1, metavar="N",
                      help="check in N processes, both sides at once (the result is that of --jobs 1)")
    _add_annotation_args(diff, sides=True)

    stat = _command(sub, "stat", "contention and hold-time statistics per class, as /proc/lock_stat")
    _add_input_args(stat)
    stat.add_argument("--jobs", "-j", type=_jobs, default=1, metavar="N",
                      help="read the inputs in N processes (a file's table depends on that file only: "
                           "the table is that of --jobs 1)")
    from lockcheck.stat import command as stat_command

    stat_command.add_arguments(stat)

    capture = _command(sub, "capture", "print (or --run) the set-up of a kernel capture with lockdep's "
                                        "arguments, and collect the boot into a directory")
    capture.add_argument("--run", action="store_true",
                         help="perform it (as root): set up, run the workload, stop, collect into -o DIR, clean up")
    capture.add_argument("--output", "-o", metavar="DIR", help="the boot directory to write (`lockcheck check DIR`)")
    capture.add_argument("--arch", default=None, help="argument registers: x86_64 or arm64 (default: this machine)")
    capture.add_argument("--buffer-kb", type=_whole(1, 1 << 24, "a buffer size in KB"), default=None, metavar="KB",
                         help="per-CPU ring buffer (65536)")
    capture.add_argument("--name-offset", type=_whole(0, 4096, "a byte offset"), default=None, metavar="N",
                         help="offset of `name` in struct lockdep_map (24 on 64-bit kernels)")
    capture.add_argument("--no-kprobe", action="store_true", help="lock tracepoints only, no kprobe on lock_acquire")
    capture.add_argument("--duration", type=float, default=10.0, metavar="SECONDS",
                         help="with --run and no COMMAND: how long to capture (10)")
    capture.add_argument("--root", default="/", metavar="DIR", help="look for /sys and /proc under DIR (for tests)")
    capture.add_argument("workload", nargs=argparse.REMAINDER, metavar="-- COMMAND",
                         help="with --run: the workload to run while capturing")

    convert = _command(sub, "convert", "write any supported trace as .lt")
    _add_input_args(convert)
    convert.add_argument("--output", "-o", metavar="OUT", default="-", help="output .lt file (default stdout)")
    return parser


def _add_annotation_args(parser: argparse.ArgumentParser, sides: bool = False) -> None:
    """What a kernel capture cannot say: the boot's state, annotation rules, the built-in rules."""
    both = " (both sides; a boot directory brings its own)" if sides else ""
    parser.add_argument("--lockdep-state", metavar="DIR", action="append", default=[],
                        help="/proc/lockdep, /proc/lockdep_chains, /proc/lockdep_stats and dmesg of the traced "
                             "boot (a directory or the files; repeatable): resolve subclasses, nest_locks and "
                             "trylocks the capture lacks" + both)
    parser.add_argument("--annotations", metavar="FILE",
                        help="annotation rules (nest C under P, subclass C by address order, recursive-read C, "
                             "no-check C), added to the built-in ones")
    parser.add_argument("--no-builtin-annotations", action="store_true",
                        help="do not apply lockcheck's built-in rules for kernel captures (docs/annotations.md)")


def _jobs(text: str) -> int:
    """`--jobs N`: a whole number of processes, at least 1."""
    try:
        value = int(text)
    except ValueError:
        value = 0
    if value < 1:
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of processes (1 or more)")
    return value


def _whole(low: int, high: int, what: str) -> Callable[[str], int]:
    """An argparse type: a whole number from `low` to `high` (ASCII digits), said as `what` when not."""
    def parse(text: str) -> int:
        digits = text[1:] if text[:1] in "+-" else text
        if not (digits.isascii() and digits.isdigit() and len(digits) <= 12) or not low <= int(text) <= high:
            raise argparse.ArgumentTypeError(f"{text!r} is not {what} ({low} to {high})")
        return int(text)
    return parse


def _seconds(text: str) -> float:
    """`--dask-timeout`: a positive, finite number of seconds."""
    try:
        value = float(text)
    except ValueError:
        value = -1.0
    if not (0 < value < 1e6):
        raise argparse.ArgumentTypeError(f"{text!r} is not a number of seconds (more than 0)")
    return value


def _add_jobs_args(parser: argparse.ArgumentParser) -> None:
    """Where the checking runs: this process, N processes, or a Dask cluster (same findings)."""
    parser.add_argument("--jobs", "-j", type=_jobs, default=1, metavar="N",
                        help="check in N processes: files in parallel, one large file split by task "
                             "(the findings are those of --jobs 1)")
    parser.add_argument("--dask", metavar="ADDRESS",
                        help="check on the Dask cluster whose scheduler is at ADDRESS (tcp://host:8786); "
                             "needs pylockdep[dask] and the traces at the same paths on its workers")
    parser.add_argument("--dask-timeout", type=_seconds, default=None, metavar="SECONDS",
                        help="how long to wait for the Dask scheduler to answer (default 5)")


def _add_input_args(parser: argparse.ArgumentParser, traces_required: bool = True) -> None:
    parser.add_argument("traces", nargs="+" if traces_required else "*", metavar="TRACE",
                        help="trace file, directory, or - for stdin"
                             + ("" if traces_required else "; /proc/lockdep dumps enter the graph directly"))
    parser.add_argument("--input-format", default="auto", help="auto (default), lt, ftrace, perf, jsonl or kernel-log")
    parser.add_argument("--strict-start", action="store_true",
                        help="report releases of locks never seen acquired even in captures (ftrace, perf)")
    parser.add_argument("--preempt-rt", action="store_true",
                        help="the traces come from a PREEMPT_RT kernel: softirqs run in threads, their usage "
                             "is not tracked (a .lt trace can say so in its header)")
    parser.add_argument("--no-progress", action="store_true", help="no progress line on a terminal")


def main(argv: Optional[Sequence[str]] = None, stdout: Optional[TextIO] = None,
         stderr: Optional[TextIO] = None, handle_signals: bool = False) -> int:
    """Run the command line; return the exit status (the console script exits with it).

    `handle_signals` (the command, `lockcheck.entry`): Ctrl-C, SIGTERM and
    SIGHUP end the run in order -- one line on stderr, temporary files
    removed, the reader process stopped -- with status 128 + the signal.
    """
    out = stdout_stream(stdout if stdout is not None else sys.stdout)
    stderr = stderr or sys.stderr or io.StringIO()
    try:
        if handle_signals:
            _take_signals()
        try:
            with contextlib.redirect_stdout(out):  # --help and --version print to `out`, whose failures are errors
                args = build_parser().parse_args(argv)
        except SystemExit as done:  # they end the parse; a full or closed stdout fails at this flush
            out.flush()
            return int(done.code or 0)
        if args.command is None:
            raise UsageError(f"lockcheck: a command is required ({', '.join(COMMANDS)}); see lockcheck --help")
        _settle_workers(args, stderr)
        refuse_outputs_over_inputs(args)
        status = COMMANDS[args.command](args, out, stderr)
        out.flush()  # a full or closed stdout fails here when the report fit in the buffer
        return status
    except LockcheckError as err:
        _print_error(err.format(), stderr)
        return EXIT_ERROR
    except KeyboardInterrupt:
        _print_error("lockcheck: interrupted", stderr)
        return 128 + signal.SIGINT
    except Terminated as ended:
        _print_error(f"lockcheck: terminated by {signal.Signals(ended.signum).name}", stderr)
        return 128 + ended.signum
    except Exception as err:  # noqa: BLE001 - the exit-status contract: a bug is one line too
        if os.environ.get("LOCKCHECK_DEBUG"):
            raise
        _print_error(f"lockcheck: internal error: {type(err).__name__}: {err} "
                     "(a bug: please report it with the input; LOCKCHECK_DEBUG=1 shows the traceback)", stderr)
        return EXIT_ERROR


class Terminated(BaseException):
    """SIGTERM or SIGHUP arrived: unwind like an interrupt (a BaseException, so no `except Exception` stops it)."""

    def __init__(self, signum: int) -> None:
        super().__init__(signum)
        self.signum = signum


def _terminate(signum: int, frame: object) -> None:
    raise Terminated(signum)


def _take_signals() -> None:
    """From here on Ctrl-C is a KeyboardInterrupt and SIGTERM/SIGHUP a Terminated, both caught by `main`.

    Python runs a signal handler wherever the main thread is, also inside a
    finalizer or a garbage-collected generator's `finally`, where an
    exception is printed as "Exception ignored" and lost; there the signal
    is raised again (`_redeliver`), to be handled at the next ordinary line.
    """
    for name, handler in (("SIGINT", signal.default_int_handler), ("SIGTERM", _terminate), ("SIGHUP", _terminate)):
        signum = getattr(signal, name, None)
        # ignored by the parent (`nohup` ignores SIGHUP; a shell's background job, SIGINT): left ignored
        if signum is not None and signal.getsignal(signum) is not signal.SIG_IGN:
            signal.signal(signum, handler)
    if sys.unraisablehook is not _redeliver:
        global _unraisable_before
        _unraisable_before = sys.unraisablehook
        sys.unraisablehook = _redeliver


_unraisable_before = sys.unraisablehook


def _redeliver(unraisable) -> None:
    """An interrupt that hit a finalizer is not lost: the signal is raised again."""
    exc = unraisable.exc_value
    if isinstance(exc, KeyboardInterrupt):
        signal.raise_signal(signal.SIGINT)
    elif isinstance(exc, Terminated):
        signal.raise_signal(exc.signum)
    else:
        _unraisable_before(unraisable)


def _print_error(line: str, stderr: TextIO) -> None:
    """One line on stderr, escaped for the terminal; a failing stderr is ignored (nowhere else to say it)."""
    try:
        print(visible(line), file=stderr)
        stderr.flush()
    except (OSError, ValueError):
        pass


def _settle_workers(args: argparse.Namespace, stderr: TextIO) -> None:
    """`--jobs` clamped to what the machine can run (with a note), `--dask` checked as an address
    before anything is read (an empty one is an error, not "no cluster")."""
    from lockcheck.util.pool import clamp_jobs

    if getattr(args, "jobs", 1) > 1:
        args.jobs, note = clamp_jobs(args.jobs)
        if note:
            _print_error(f"lockcheck: note: {note}", stderr)
    if getattr(args, "dask", None) is not None:
        from lockcheck.jobs.cluster import check_address

        check_address(args.dask)


def _session_options(args: argparse.Namespace, **extra) -> SessionOptions:
    """The options `check` and `graph` share, plus the command's own."""
    return SessionOptions(
        input_format=args.input_format,
        quiet=args.quiet,
        strict_start=args.strict_start,
        preempt_rt=args.preempt_rt,
        baselines=list(args.baseline),
        suppress=args.suppress,
        order=args.order,
        progress=not args.no_progress,
        use_pyproject=not args.no_config,
        lockdep_state=list(args.lockdep_state),
        annotations=args.annotations,
        builtin_annotations=not args.no_builtin_annotations,
        jobs=args.jobs,
        dask=args.dask,
        dask_timeout=args.dask_timeout,
        **extra,
    )


def _annotation_options(args: argparse.Namespace):
    from lockcheck.kernel.per_boot import AnnotationOptions

    return AnnotationOptions(list(args.lockdep_state), args.annotations, not args.no_builtin_annotations)


def cmd_check(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    fmt = args.format or ("html" if (args.output or "").lower().endswith((".html", ".htm")) else "text")
    options = _session_options(args, output_format=fmt, first=args.first, save_graph=args.save_graph,
                               max_per_group=args.max_per_group)
    if args.save_graph and args.output and args.save_graph not in ("-",) and \
            os.path.abspath(args.save_graph) == os.path.abspath(args.output):
        raise UsageError(f"{args.output}: given as both --output and --save-graph")
    refuse_inputs(args.save_graph, _inputs(args))
    session = CheckSession(options, stderr=stderr)
    with _output(args.output, stdout, args) as out:
        return session.run(args.traces, out)


def cmd_graph(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    refuse_inputs(args.output, _inputs(args))
    from lockcheck.store.graphview import GraphView

    if args.depth < 0:
        raise UsageError(f"--depth {args.depth}: must be 0 or more")
    view = GraphView(cycles_only=args.cycles_only, focus=tuple(args.focus), depth=args.depth)
    session = CheckSession(_session_options(args), stderr=stderr)
    return session.write_graph(args.traces, args.output, args.graph_format, stdout, view)


def cmd_diff(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from lockcheck.commands.diff import run_diff_command

    with _output(args.output, stdout, args) as out:
        return run_diff_command(args.base, args.new, args.format, out, stderr, args.input_format,
                                args.suppress, not args.no_config, annotations=_annotation_options(args),
                                jobs=args.jobs)


def cmd_convert(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from lockcheck.commands.convert import convert

    with _output(args.output, stdout, args) as out:
        notes = convert(args.traces, args.input_format, out)
    for note in notes:
        print(wrap_note("lockcheck: note: ", note), file=stderr)
    return EXIT_CLEAN


#: every option that names a file (or directory) lockcheck writes, for any command
OUTPUT_OPTIONS = ("output", "save_graph", "plot")


def refuse_outputs_over_inputs(args: argparse.Namespace) -> None:
    """A UsageError, before anything is read, when any output option names one of the inputs.

    One check for every output option of every command (`stat --plot F F`
    once replaced the trace F with a chart), instead of one per option.
    """
    inputs = _inputs(args)
    for name in OUTPUT_OPTIONS:
        value = getattr(args, name, None)
        if isinstance(value, str):
            refuse_inputs(value, inputs)


def _inputs(args: argparse.Namespace) -> list[str]:
    """Every file a command reads: no output may replace one of them."""
    inputs: list[str] = []
    for name in ("traces", "baseline", "lockdep_state"):
        inputs.extend(getattr(args, name, None) or [])
    for name in ("base", "new", "suppress", "order", "annotations", "compare"):
        value = getattr(args, name, None)
        if isinstance(value, str):
            inputs.append(value)
        elif isinstance(value, list):
            inputs.extend(v for v in value if isinstance(v, str))
    return inputs


@contextlib.contextmanager
def _output(path: Optional[str], stdout: TextIO, args: argparse.Namespace) -> Iterator[TextIO]:
    """The report stream: `path` written atomically, or stdout; never one of the command's inputs."""
    refuse_inputs(path, _inputs(args))
    with output_stream(path, stdout) as out:
        yield out


def cmd_stat(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from lockcheck.stat import command as stat_command

    with _output(args.output, stdout, args) as out:
        return stat_command.run(args, out, stderr)


def cmd_capture(args: argparse.Namespace, stdout: TextIO, stderr: TextIO) -> int:
    from lockcheck.kernel import capture

    command = args.workload[1:] if args.workload[:1] == ["--"] else args.workload
    if command and not args.run:
        raise UsageError("lockcheck capture: a workload COMMAND needs --run")
    arch = capture.ARCH_ALIASES.get(args.arch, args.arch) if args.arch else capture.machine_arch()
    if not args.no_kprobe and arch not in capture.ARG_REGISTERS:
        raise UsageError(f"lockcheck capture: no argument registers known for {arch} "
                         f"(choose --arch {' or '.join(capture.ARG_REGISTERS)}, or --no-kprobe)")
    options = capture.CaptureOptions(
        arch=arch, kprobe=not args.no_kprobe, output=args.output, duration=args.duration, command=command,
        root=args.root, buffer_kb=args.buffer_kb or capture.DEFAULT_BUFFER_KB,
        name_offset=capture.NAME_OFFSET if args.name_offset is None else args.name_offset,
    )
    if not args.run:
        capture.print_script(options, stdout)
        return EXIT_CLEAN
    boot = capture.Capture(options, stderr).run()
    print(f"lockcheck capture: wrote {boot}; check it with: lockcheck check {shlex.quote(boot)}", file=stderr)
    return EXIT_CLEAN


COMMANDS = {"check": cmd_check, "graph": cmd_graph, "diff": cmd_diff, "stat": cmd_stat, "convert": cmd_convert,
            "capture": cmd_capture}
