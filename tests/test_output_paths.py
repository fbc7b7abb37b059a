"""Every output option goes through one check against the inputs, and a closed pipe is no success.

`stat --plot F F` (a trace that happens to end in `.png`) replaced the
trace with a chart: the rule that no output may be an input held for `-o`,
`--save-graph` and `graph -o` only.  `graph -o - | head -1` exited 0 and
said the graph was written: the write was buffered, and failed only at the
final flush, after the success line.
"""

from __future__ import annotations

import io

import pytest

from lockcheck.commands.cli import OUTPUT_OPTIONS, build_parser, main

ABBA = "T1 acquire A\nT1 acquire B\nT1 release B\nT1 release A\n"


def run(*args: str, stdout=None) -> tuple[int, str]:
    err = io.StringIO()
    status = main(list(args), stdout=stdout if stdout is not None else io.StringIO(), stderr=err)
    return status, err.getvalue()


@pytest.mark.parametrize("command", [
    ["stat", "--plot", "{t}", "{t}"],
    ["stat", "-o", "{t}", "{t}"],
    ["check", "-o", "{t}", "{t}"],
    ["check", "--save-graph", "{t}", "{t}"],
    ["graph", "-o", "{t}", "{t}"],
    ["convert", "-o", "{t}", "{t}"],
    ["diff", "-o", "{t}", "{t}", "{t}"],
])
def test_no_output_option_may_name_an_input(tmp_path, command):
    trace = tmp_path / "t.png"  # a trace whose name looks like a chart's
    if command[0] == "graph":
        trace = tmp_path / "t.json"
    trace.write_text(ABBA)
    status, err = run(*[part.format(t=trace) for part in command])
    assert status == 2 and "is also an input" in err, err
    assert trace.read_text() == ABBA


def test_every_output_option_is_checked():
    """A new option that writes a file must join OUTPUT_OPTIONS: the parsers' file-writing options."""
    parser = build_parser()
    writing = set()
    for action in parser._subparsers._group_actions[0].choices.values():  # type: ignore[union-attr]
        for option in action._actions:
            if option.dest in ("output", "save_graph", "plot"):
                writing.add(option.dest)
    assert writing <= set(OUTPUT_OPTIONS)


class _ClosedPipe(io.StringIO):
    """Standard output whose reader went away: writes are buffered, the flush fails."""

    def flush(self) -> None:
        if self.getvalue():
            raise BrokenPipeError(32, "Broken pipe")


@pytest.mark.parametrize("fmt", ["json", "graphml", "dot"])
def test_graph_to_a_closed_pipe_claims_nothing(tmp_path, fmt):
    trace = tmp_path / "t.lt"
    trace.write_text(ABBA)
    status, err = run("graph", "--no-progress", str(trace), "-o", "-", "--graph-format", fmt, stdout=_ClosedPipe())
    assert status == 2, err
    assert err.strip() == "<stdout>: cannot write: Broken pipe", err  # no "lock classes" success line
