"""One error path for every input: each example of issue 15 is one `FILE:LINE:COL: message` line and exit 2.

Traces of every format, compressed streams, standard input, saved graphs
(JSON and GraphML), /proc/lockdep dumps and every option file.  Each case
asserts the whole stderr: exactly one error line, with a line and a
column, and no traceback (an escaped exception would also show as
"internal error").
"""

from __future__ import annotations

import gzip
import io
import json
import lzma
import re
import subprocess
import sys
from pathlib import Path

import pytest

from lockcheck.commands.cli import main

DIGITS = "9" * 5000


def cli(*args: str, stdin: bytes | None = None, monkeypatch=None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    if stdin is not None:
        monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(stdin)))
    status = main(list(args), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def check(*args: str, **kw) -> tuple[int, str, str]:
    return cli("check", "--no-config", "--no-progress", *args, **kw)


def one_error(status: int, err: str, file: str, message: str = "") -> re.Match:
    """Exit 2 and exactly one error line `FILE:LINE:COL: ...` (after any summary lines), no traceback."""
    assert status == 2, err
    assert "Traceback" not in err and "internal error" not in err, err
    errors = [line for line in err.splitlines() if not line.startswith("lockcheck: ")]
    assert len(errors) == 1, err
    match = re.match(re.escape(file) + r":(\d+):(\d+): (.*)$", errors[0])
    assert match is not None, errors[0]
    assert message in match.group(3), errors[0]
    return match


def write(tmp_path: Path, name: str, data: str | bytes) -> str:
    path = tmp_path / name
    path.write_bytes(data.encode("utf-8", "surrogatepass") if isinstance(data, str) else data)
    return str(path)


ABBA_TAIL = "T1 acquire A\nT1 acquire B\nT1 release B\nT1 release A\n"


# -- numbers: never Python's int-string limit ---------------------------------------------


@pytest.mark.parametrize("line, message", [
    (f"T1 acquire A subclass={DIGITS}", "subclass must be 0..7"),
    (f"T1 acquire A cpu={DIGITS}", "cpu must be"),
    (f"T1 acquire A ts={DIGITS}", "ts must be a number"),
])
def test_huge_numbers_in_lt(tmp_path, line, message):
    path = write(tmp_path, "n.lt", line + "\n")
    status, _, err = check(path)
    one_error(status, err, path, message)
    assert len(err) < 300  # the value is clipped, not repeated


@pytest.mark.parametrize("line, message", [
    (f"            bash-1234    [{DIGITS}] .....  100.000000: lock_acquire: 0000000012345678 A", "CPU number"),
    (f"            bash-1234    [001] .....  {DIGITS}.5: lock_acquire: 0000000012345678 A", "timestamp"),
    (f"CPU:{DIGITS} [LOST EVENTS]", "CPU number"),
])
def test_huge_numbers_in_ftrace(tmp_path, line, message):
    path = write(tmp_path, "n.ftrace", "# tracer: nop\n#\n"
                 "            bash-1234    [001] .....  99.000000: lock_acquire: 0000000012345678 A\n" + line + "\n")
    status, _, err = check("--input-format", "ftrace", path)
    assert one_error(status, err, path, message).group(1) == "4"


def test_huge_numbers_in_jsonl(tmp_path):
    path = write(tmp_path, "n.jsonl", '{"task": "T1", "op": "acquire", "lock": "A", "cpu": %s}\n' % DIGITS)
    status, _, err = check("--input-format", "jsonl", path)
    one_error(status, err, path, "number too long")


def test_huge_numbers_in_a_lockdep_dump(tmp_path):
    path = write(tmp_path, "lockdep", f"all lock classes:\n00ab FD: {DIGITS} BD:    2 +.+.: A\n")
    status, _, err = check(path)
    assert one_error(status, err, path).group(1) == "2"


LOCK_STAT_HEAD = ("lock_stat version 0.4\n" + "-" * 20 + "\n class name con-bounces contentions waittime-min "
                  "waittime-max waittime-total waittime-avg acq-bounces acquisitions holdtime-min holdtime-max "
                  "holdtime-total holdtime-avg\n" + "-" * 20 + "\n\n")


@pytest.mark.parametrize("tail, line", [
    (f"  A:  {DIGITS}  1  1.00  1.00  1.00  1.00  1  1  0.00  1.00  1.00  1.00\n", "6"),
    (f"  A:  1  1  1.00  1.00  1.00  1.00  1  1  0.00  1.00  {DIGITS}.00  1.00\n", "6"),
    (f"  A:  1  1  1.00  1.00  1.00  1.00  1  1  0.00  1.00  1.00  1.00\n  ----\n  A  {DIGITS}  [<0abc>] f+0x1/0x2\n",
     "8"),
])
def test_huge_numbers_in_a_lock_stat_dump(tmp_path, tail, line):
    """`stat` of a /proc/lock_stat dump: a count or a time of thousands of digits is an error at its column."""
    path = write(tmp_path, "lock_stat", LOCK_STAT_HEAD + tail)
    status, _, err = cli("stat", "--no-progress", path)
    match = one_error(status, err, path, "number too long (500")
    assert match.group(1) == line
    source = Path(path).read_text().splitlines()[int(line) - 1]
    assert source[int(match.group(2)) - 1:].startswith("999")


@pytest.mark.parametrize("numbers, column", [
    ("0.00  1  1.00  1.00  1.00  1.00  1  1", "con-bounces"),
    ("1  2.50  1.00  1.00  1.00  1.00  1  1", "contentions"),
    ("1  1  1.00  1.00  1.00  1.00  0.00  1", "acq-bounces"),
    ("1  1  1.00  1.00  1.00  1.00  1  7.5", "acquisitions"),
])
def test_a_time_where_a_lock_stat_count_belongs(tmp_path, numbers, column):
    """A row's counts are whole numbers: a time in their column (found by the fuzzer, a misaligned
    row) is an error at that column, not an internal error."""
    path = write(tmp_path, "lock_stat", LOCK_STAT_HEAD + f"  A:  {numbers}  0.00  1.00  1.00  1.00\n")
    status, _, err = cli("stat", "--no-progress", path)
    match = one_error(status, err, path, f"expected a whole number in column {column!r}")
    assert match.group(1) == "6"
    source = Path(path).read_text().splitlines()[5]
    bad = [word for word in numbers.split() if word not in ("1", "1.00")][0]
    assert source[int(match.group(2)) - 1:].startswith(bad)


def test_huge_line_number_in_a_site_is_no_site(tmp_path):
    """`at=f.py:<5000 digits>` is not a FILE:LINE site: SARIF and GitHub output fall back to the trace location."""
    path = write(tmp_path, "s.lt", f"T1 acquire A\nT1 acquire A at=f.py:{DIGITS}\n")
    for fmt in ("sarif", "github"):
        status, out, err = check("--format", fmt, path)
        assert status == 1 and err == "", err
        assert "s.lt" in out


# -- nesting: never a RecursionError ------------------------------------------------------------

DEEP = "[" * 100_000 + "]" * 100_000


def test_deep_json_lines(tmp_path):
    path = write(tmp_path, "d.jsonl", '{"task": "T1", "op": "acquire", "lock": "A"}\n{"x": %s}\n' % DEEP)
    status, _, err = check("--input-format", "jsonl", path)
    assert one_error(status, err, path, "nested too deeply").group(1) == "2"


def test_deep_saved_graph(tmp_path):
    graph = write(tmp_path, "g.json", '{"lockcheck-graph": 1, "classes": %s}' % DEEP)
    trace = write(tmp_path, "t.lt", ABBA_TAIL)
    status, _, err = check("--baseline", graph, trace)
    one_error(status, err, graph, "nested too deeply")
    status, _, err = cli("diff", "--no-config", graph, trace)
    one_error(status, err, graph, "nested too deeply")


def test_deep_toml(tmp_path):
    sup = write(tmp_path, "s.toml", "x = " + DEEP + "\n")
    status, _, err = check("--suppress", sup, write(tmp_path, "t.lt", ABBA_TAIL))
    one_error(status, err, sup, "nested too deeply")


# -- text: decoding errors named, lone surrogates refused --------------------------------------------


@pytest.mark.parametrize("option, name, data", [
    ("--suppress", "s.toml", b'suppress = [{kind = "\xff"}]\n'),
    ("--order", "o.order", b"A < B\nB < \xff\n"),
    ("--annotations", "a.ann", b"nest \xff under A\n"),
])
def test_invalid_utf8_in_option_files(tmp_path, option, name, data):
    path = write(tmp_path, name, data)
    status, _, err = check(option, path, write(tmp_path, "t.lt", ABBA_TAIL))
    one_error(status, err, path, "invalid UTF-8 (byte 0xff)")


def test_invalid_utf8_in_pyproject(tmp_path, monkeypatch):
    write(tmp_path, "pyproject.toml", b'[tool.lockcheck]\nsuppress = [{kind = "\xff"}]\n')
    trace = write(tmp_path, "t.lt", ABBA_TAIL)
    monkeypatch.chdir(tmp_path)
    status, _, err = cli("check", "--no-progress", trace)
    one_error(status, err, str(tmp_path / "pyproject.toml"), "invalid UTF-8")


def test_broken_pyproject_is_an_error_not_ignored(tmp_path, monkeypatch):
    write(tmp_path, "pyproject.toml", "[tool.lockcheck\nsuppress = []\n")
    trace = write(tmp_path, "t.lt", ABBA_TAIL)
    monkeypatch.chdir(tmp_path)
    status, _, err = cli("check", "--no-progress", trace)
    assert one_error(status, err, str(tmp_path / "pyproject.toml"), "invalid TOML").group(1) == "1"
    assert cli("check", "--no-progress", "--no-config", trace)[0] == 0


def test_lone_surrogate_in_a_jsonl_name(tmp_path):
    path = write(tmp_path, "s.jsonl", '{"task": "T1", "op": "acquire", "lock": "A"}\n'
                                      '{"task": "T1", "op": "acquire", "lock": "\\ud800x"}\n')
    for fmt in ("text", "json", "sarif", "github"):
        status, _, err = check("--format", fmt, path)
        assert one_error(status, err, path, "lone surrogate").group(1) == "2"


# -- JSON numbers ------------------------------------------------------------------------------------


@pytest.mark.parametrize("value, message", [
    ("NaN", "NaN is not JSON"), ("Infinity", "Infinity is not JSON"), ("-Infinity", "Infinity is not JSON"),
    ("1e999", "'ts' must be a finite number"),
])
def test_non_finite_ts_is_refused(tmp_path, value, message):
    path = write(tmp_path, "t.jsonl", '{"task": "T1", "op": "acquire", "lock": "A", "ts": %s}\n' % value)
    for forced in ([], ["--input-format", "jsonl"]):  # detected as JSON Lines too
        status, _, err = check(*forced, path)
        one_error(status, err, path, message)
        status, _, err = cli("convert", path)
        one_error(status, err, path, message)


# -- saved graphs: the documented schema -----------------------------------------------------------

EVIDENCE = {"file": "x.lt", "line": 1, "task": "T"}


@pytest.mark.parametrize("doc, message", [
    ({"lockcheck-graph": 1, "classes": [{"name": "A", "usage_traces": [1]}]}, "classes[0].usage_traces: expected an object"),
    ({"lockcheck-graph": 1, "findings": 5}, "findings: expected a list"),
    ({"lockcheck-graph": 1, "dependencies": [{"from": "A", "to": "B", "dep": ["EN"],
                                              "evidence": dict(EVIDENCE, at=5)}]}, "evidence.at: expected a string"),
    ({"lockcheck-graph": 1, "dependencies": [{"from": "A", "to": "B", "dep": ["EN"],
                                              "evidence": dict(EVIDENCE, line=True)}]}, "evidence.line: expected an integer"),
    ({"lockcheck-graph": 1, "dependencies": [{"from": "A", "to": "B", "dep": 99, "evidence": EVIDENCE}]}, "dep: expected"),
    ({"lockcheck-graph": 1, "findings": [{"kind": "x", "cycle": [1]}]}, "findings[0].cycle[0]: expected a string"),
    ({"lockcheck-graph": True}, "unsupported lockcheck-graph version"),
    ({"lockcheck-graph": 1, "dependencies": [{"from": "A", "to": "B", "dep": ["EN"],
                                              "evidence": dict(EVIDENCE, stack=[{"file": "f.py", "line": "x",
                                                                                 "function": "f"}])}]},
     "evidence.stack[0].line: expected an integer"),
    ({"lockcheck-graph": 1, "classes": [{"name": "A"}, {"name": "A"}]}, "listed twice"),
    ({"lockcheck-graph": 1, "classes": [{"name": "A", "usage": [["INITIAL USE"]]}]}, "unknown usage bit a list"),
    ({"lockcheck-graph": 1, "dependencies": [{"from": "A", "to": "B", "dep": [{}], "evidence": EVIDENCE}]},
     "unknown dependency type an object"),
])
def test_saved_graph_of_wrong_types(tmp_path, doc, message):
    graph = write(tmp_path, "g.json", json.dumps(doc, indent=1))
    trace = write(tmp_path, "t.lt", ABBA_TAIL)
    status, _, err = check("--baseline", graph, trace)
    one_error(status, err, graph, message)
    status, _, err = cli("diff", "--no-config", graph, trace)
    one_error(status, err, graph, message)


def test_saved_graph_error_points_at_the_value(tmp_path):
    text = ('{"lockcheck-graph": 1,\n "dependencies": [\n  {"from": "A", "to": "B", "dep": ["EN"],\n'
            '   "evidence": {"file": "x", "line": 1e999, "task": "T"}}]}\n')
    graph = write(tmp_path, "g.json", text)
    status, _, err = check("--baseline", graph, write(tmp_path, "t.lt", ABBA_TAIL))
    match = one_error(status, err, graph, "dependencies[0].evidence.line")
    assert (match.group(1), match.group(2)) == ("4", str(text.splitlines()[3].index("1e999") + 1))


@pytest.mark.parametrize("edit, message", [
    (lambda t: t.replace('<data key="d3">8</data>', '<data key="d3">99</data>'), "edge 'A' -> 'B': dep: expected"),
    (lambda t: t.replace('attr.name="dep" attr.type="long"', 'attr.name="dep" attr.type="string"'),
     "edge 'A' -> 'B': dep: expected an integer"),
    (lambda t: re.sub(r'(<data key="d2">)\{"HARDIRQ', r'\1[1, {"HARDIRQ', t, count=1), "node 'A': usage_traces"),
    (lambda t: t.replace('<data key="d7">2</data>', f'<data key="d7">{DIGITS}</data>'), "not a GraphML graph"),
    (lambda t: t[: len(t) // 2], "not a GraphML graph"),
])
def test_graphml_of_wrong_types(tmp_path, edit, message):
    trace = write(tmp_path, "t.lt", ABBA_TAIL)
    good = tmp_path / "g.graphml"
    assert cli("graph", "--no-config", trace, "-o", str(good))[0] == 0
    text = good.read_text()
    keys = dict(re.findall(r'<key id="(d\d+)" for="\w+" attr.name="(\w+)"', text))
    # name the keys as this test expects them, whatever networkx numbered them
    for key, name in keys.items():
        text = text.replace(f'"{key}"', f'"k_{name}"')
    text = text.replace('"k_dep"', '"d3"').replace('"k_usage_traces"', '"d2"').replace('"k_evidence_line"', '"d7"')
    bad = write(tmp_path, "bad.graphml", edit(text))
    assert edit(text) != text
    status, _, err = check("--baseline", bad, trace)
    one_error(status, err, bad, message)


# -- compressed and long input --------------------------------------------------------------------


def _compress(kind: str, data: bytes) -> bytes:
    if kind == "gz":
        return gzip.compress(data)
    if kind == "xz":
        return lzma.compress(data)
    import zstandard

    return zstandard.ZstdCompressor().compress(data)


@pytest.mark.parametrize("kind", ["gz", "xz", "zst"])
def test_truncated_compressed_input(tmp_path, kind, monkeypatch):
    data = _compress(kind, ("T1 acquire A\nT1 release A\n" * 20000).encode())
    path = write(tmp_path, f"t.lt.{kind}", data[: len(data) // 2])
    status, _, err = check(path)
    one_error(status, err, path, "compressed data is truncated")
    status, _, err = check("-", stdin=data[: len(data) // 2], monkeypatch=monkeypatch)
    one_error(status, err, "<stdin>", "compressed data is truncated")
    path = write(tmp_path, f"h.lt.{kind}", data[:8])  # cut inside the header
    one_error(*check(path)[::2], path, "truncated")


def test_zstd_frames_one_after_the_other(tmp_path):
    import zstandard

    text = "T1 acquire A\nT1 acquire B\nT1 release B\nT1 release A\n" * 50
    data = b"".join(zstandard.ZstdCompressor().compress(part.encode()) for part in (text[:333], text[333:]))
    status, out, err = cli("convert", write(tmp_path, "t.lt.zst", data))
    lines = out.splitlines()
    assert status == 0 and lines[1].startswith("#lockcheck-run format=lt") and lines[2:] == text.splitlines(), err


def test_too_long_line_has_a_column(tmp_path):
    path = write(tmp_path, "l.lt", "T1 acquire A\nT1 acquire " + "B" * (2 << 20) + "\n")
    status, _, err = check(path)
    match = one_error(status, err, path, "line longer than")
    assert match.group(1) == "2" and int(match.group(2)) == (1 << 20) + 1


def test_leading_blank_lines_are_counted_not_kept():
    """Format detection holds the first non-blank lines only, whatever comes before them."""
    import tracemalloc

    from lockcheck.readers import _peek

    def lines():
        for _ in range(150_000):
            yield ""
        yield "T1 acquire A"

    tracemalloc.start()
    head, rest = _peek(lines())
    peak = tracemalloc.get_traced_memory()[1]
    tracemalloc.stop()
    assert head == [] and peak < 1 << 20  # SNIFF_MAX_LINES looked at, none kept
    replayed = list(rest)
    assert len(replayed) == 150_001 and replayed[-1] == "T1 acquire A"


def test_blank_lines_before_a_trace_keep_line_numbers(tmp_path):
    path = write(tmp_path, "b.lt.xz", lzma.compress(b"\n" * 300_000 + b"T1 acquire A\nT1 zap\n"))
    one_error(*check(path)[::2], path, "unknown op")
    assert f"{path}:300002:4:" in check(path)[2]


# -- names .lt cannot spell, class names the kernel prints -------------------------------------------


@pytest.mark.parametrize("obj, message", [
    ({"task": "T 1", "op": "acquire", "lock": "A"}, "task 'T 1'"),
    ({"task": "T1", "op": "acquire", "lock": "A\nB"}, "line break"),
    ({"task": "T1", "op": "acquire", "lock": "A", "instance": "x y"}, "instance 'x y'"),
])
def test_convert_refuses_what_lt_cannot_spell(tmp_path, obj, message):
    path = write(tmp_path, "c.jsonl", json.dumps({"task": "T0", "op": "acquire", "lock": "Z"}) + "\n" + json.dumps(obj) + "\n")
    status, out, err = cli("convert", path)
    assert one_error(status, err, path, message).group(1) == "2"


def test_convert_quotes_lock_names_it_can_spell(tmp_path):
    path = write(tmp_path, "q.jsonl", json.dumps({"task": "T1", "op": "acquire", "lock": 'a "b" c=d@e'}) + "\n")
    status, out, err = cli("convert", path)
    assert status == 0, err
    back = write(tmp_path, "q.lt", out)
    status, out, err = cli("convert", "--input-format", "lt", back)
    assert status == 0 and '"a \\"b\\" c=d@e"' in out


def test_lockdep_state_with_unicode_digit_suffix(tmp_path):
    dump = write(tmp_path, "lockdep", "all lock classes:\n00ab FD:    1 BD:    2 +.+.: &x->wait#\u00b2\n"
                                      f"00ac FD:    1 BD:    2 +.+.: &y#{'9' * 5000}\n")
    trace = write(tmp_path, "w.lt", "T1 acquire &x->wait\nT1 release &x->wait\n")
    status, _, err = check("--lockdep-state", dump, trace)
    assert status == 0 and "Traceback" not in err and "internal error" not in err, err


# -- aliases are bounded -------------------------------------------------------------------------------


def test_regex_alias_that_backtracks_is_refused(tmp_path):
    sup = write(tmp_path, "s.toml", "[[alias]]\npattern = '(a+)+b'\nclass = 'x'\n")
    status, _, err = check("--suppress", sup, write(tmp_path, "t.lt", "T1 acquire " + "a" * 29 + "\n"))
    assert one_error(status, err, sup, "not a group").group(1) == "2"


def test_aliases_stay_fast_on_adversarial_names(tmp_path):
    sup = write(tmp_path, "s.toml", "[[alias]]\npattern = '\\w*\\w*x'\nclass = 'x'\n"
                                    "[[alias]]\nglob = '*a*a*a*a*a*b'\nclass = 'y'\n")
    names = ["a" * n for n in (29, 200, 511, 512, 5000)]
    trace = write(tmp_path, "t.lt", "".join(f"T{i} acquire {n}\nT{i} release {n}\n" for i, n in enumerate(names)))
    # no stopwatch (speed is the benchmarks' job): a hang guard only, far above the milliseconds this takes
    # and far below the centuries an unbounded pattern ((a+)+b, 2^512 paths) would
    result = subprocess.run([sys.executable, "-m", "lockcheck", "check", "--no-config", "--no-progress",
                             "--suppress", sup, trace], capture_output=True, text=True, timeout=300)
    assert result.returncode == 0, result.stderr


def test_glob_alias(tmp_path):
    sup = write(tmp_path, "s.toml", "[[alias]]\nglob = 'inode#*'\nclass = 'inode'\n")
    trace = write(tmp_path, "t.lt", "T1 acquire inode#1\nT1 acquire inode#2\n")
    status, out, err = check("--suppress", sup, "--format", "json", trace)
    assert status == 1 and json.loads(out)["findings"][0]["kind"] == "recursive-locking"


# -- baselines: their union is checked ------------------------------------------------------------------


def _graph(tmp_path: Path, name: str, trace: str) -> str:
    path = str(tmp_path / name)
    assert cli("graph", "--no-config", write(tmp_path, name + ".lt", trace), "-o", path)[0] == 0
    return path


def test_two_baselines_whose_union_closes_a_cycle(tmp_path):
    ab = _graph(tmp_path, "ab.json", "T1 acquire A\nT1 acquire B\nT1 release B\nT1 release A\n")
    ba = _graph(tmp_path, "ba.json", "T1 acquire B\nT1 acquire A\nT1 release A\nT1 release B\n")
    clean = write(tmp_path, "c.lt", "T1 acquire C\nT1 release C\n")
    status, out, err = check("--baseline", ab, "--baseline", ba, "--format", "json", clean)
    assert status == 1, err
    (finding,) = json.loads(out)["findings"]
    assert finding["kind"] == "circular-dependency" and sorted(finding["cycle"]) == ["A", "B"]
    assert {link["evidence"]["file"] for link in finding["chain"]} == {str(tmp_path / "ab.json.lt"),
                                                                       str(tmp_path / "ba.json.lt")}
    # a trace that takes B -> A again does not report the same cycle twice
    status, out, _ = check("--baseline", ab, "--baseline", ba, "--format", "json",
                           write(tmp_path, "again.lt", "T9 acquire B\nT9 acquire A\n"))
    assert [f["kind"] for f in json.loads(out)["findings"]] == ["circular-dependency"]
    # graph --baseline: the union is checked there too, and the cycle is not saved
    union = str(tmp_path / "u.json")
    assert cli("graph", "--no-config", "--baseline", ab, "--baseline", ba, clean, "-o", union)[0] in (0, 1)
    assert len(json.loads(Path(union).read_text())["dependencies"]) == 1


def test_diff_finds_the_cycle_two_graphs_close(tmp_path):
    ab = _graph(tmp_path, "ab.json", "T1 acquire A\nT1 acquire B\nT1 release B\nT1 release A\n")
    ba = _graph(tmp_path, "ba.json", "T1 acquire B\nT1 acquire A\nT1 release A\nT1 release B\n")
    status, out, err = cli("diff", "--no-config", "--format", "json", ab, ba)
    assert status == 1, err
    assert [f["kind"] for f in json.loads(out)["findings"]] == ["circular-dependency"]
