"""Inputs as a user gives them: directories, files that are no trace, files that do not read.

A directory is read file by file, each file's format detected on its own;
what is no trace is skipped with a note saying what it looks like; each
file is a run of its own; a file that cannot be read is one error line, the
others are still read, and the summary never calls the result clean.
"""

from __future__ import annotations

import gzip
import io
import json
import lzma
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from lockcheck.commands.cli import main
from lockcheck.readers import ReadContext, inputs, read_all
from lockcheck.kernel.boot import DIRECTORY_HOOKS

from testdata import CAPTURES, ROOT, TRACES, deny_open, timer_traces

FTRACE = """\
# tracer: nop
#
            demo-101     [000] .....    10.001000: lock_acquire: 0xffff888003c1e000 &a->lock
            demo-101     [000] .....    10.001100: lock_release: 0xffff888003c1e000 &a->lock
"""
DMESG = "[    0.000000] Linux version 6.1.192 (root@vm)\n[    0.000000] Command line: console=ttyS0\n"


def run(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main([*args, "--no-config", "--no-progress"], stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def check_json(*args: str) -> tuple[int, dict, str]:
    status, out, err = run("check", "--format", "json", *args)
    return status, json.loads(out) if out else {}, err


# -- what a file looks like ---------------------------------------------------------------
@pytest.mark.parametrize("text, what", [
    ('{"lockcheck-graph": 1, "classes": []}\n', "a JSON document"),
    ("[1, 2, 3]\n", "a JSON document"),
    ('<?xml version="1.0"?>\n<graphml>\n', "an XML document"),
    ("digraph locks {\n  a -> b;\n}\n", "a Graphviz graph"),
    ("lock_stat version 0.4\n-----\n", "a /proc/lock_stat dump"),
    (" lock-classes:   392 [max: 8192]\n", "a /proc/lockdep_stats dump"),
    ("scenario=none hashptr=1\nsome words here\n", "plain text"),
])
def test_a_file_that_is_no_trace_is_named_for_what_it_looks_like(tmp_path, text, what):
    (tmp_path / "t.lt").write_text("T1 acquire A\nT1 release A\n")
    (tmp_path / "other.txt").write_text(text)
    status, doc, err = check_json(str(tmp_path))
    assert status == 0, err
    assert doc["notes"] == [f"{tmp_path / 'other.txt'}: not a trace (looks like {what})"]
    assert doc["stats"]["events"] == 2


def test_binary_and_empty_files_are_skipped_too(tmp_path):
    (tmp_path / "t.lt").write_text("T1 acquire A\nT1 release A\n")
    (tmp_path / "core").write_bytes(b"\x7fELF\x02\x01\x01\x00" * 10)
    (tmp_path / "empty.txt").write_text("")
    got = {Path(i.path).name: (i.kind, i.looks_like) for i in inputs.expand([str(tmp_path)])}
    assert got == {"core": (inputs.SKIP, "binary data"), "empty.txt": (inputs.SKIP, "an empty file"),
                   "t.lt": (inputs.TRACE, "")}


def test_each_file_of_a_directory_gets_its_own_format(tmp_path):
    (tmp_path / "a.txt").write_text("T1 acquire A\nT1 release A\n")
    (tmp_path / "b.txt.gz").write_bytes(gzip.compress(FTRACE.encode()))
    (tmp_path / "c.txt").write_text('{"task": "T", "op": "acquire", "lock": "C"}\n{"task": "T", "op": "release", '
                                    '"lock": "C"}\n')
    context = ReadContext()
    events = list(read_all([str(tmp_path)], context=context))
    assert [fmt for _, fmt in context.formats] == ["lt", "ftrace", "jsonl"]
    assert [e.lock for e in events] == ["A", "A", "&a->lock", "&a->lock", "C", "C"]
    assert context.skipped == []


@pytest.mark.parametrize("text", [DMESG, "<6>[    1.5] usb 1-1: new device\n"])
def test_a_kernel_log_is_read_for_its_lockdep_reports_named_or_in_a_directory(tmp_path, text):
    # the kernel-log format (lockcheck.readers.kernel_log): a dmesg without reports is clean
    path = tmp_path / "dmesg.txt"
    path.write_text(text)
    assert inputs.classify(str(path)).kind == inputs.TRACE
    for arg in (str(path), str(tmp_path)):
        status, out, err = run("check", arg)
        assert (status, err) == (0, "")
        assert "read no lockdep report from 1 kernel log" in out


def test_plain_text_named_on_the_command_line_still_gets_the_lt_parsers_error(tmp_path):
    path = tmp_path / "t.lt"
    path.write_text("T1 acquire A\nT1 aquire B\n")
    status, _, err = run("check", str(path))
    assert status == 2 and err.startswith(f"{path}:2:4: unknown op 'aquire'")


# -- a boot directory and the shipped traces -------------------------------------------------
def test_a_boot_directory_reads_its_trace_and_dumps_and_skips_the_rest(tmp_path):
    boot = tmp_path / "boot"
    shutil.copytree(CAPTURES / "clean", boot)
    expanded = inputs.expand([str(boot)], DIRECTORY_HOOKS)
    kinds = {Path(i.path).name: i.kind for i in expanded}
    # the dumps are the capture's state (lockcheck.kernel.boot), not dumps to merge; the log is both
    assert kinds == {"dmesg.txt": inputs.TRACE, "lock_stat.txt.xz": inputs.LOCK_STAT, "lockdep.txt.xz": inputs.SKIP,
                     "lockdep_chains.txt.xz": inputs.SKIP, "lockdep_stats.txt": inputs.SKIP,
                     "meta.txt": inputs.SKIP, "trace.ftrace.xz": inputs.TRACE}
    [trace] = [i for i in expanded if i.path.endswith("trace.ftrace.xz")]
    assert sorted(Path(p).name for p in trace.state) == ["dmesg.txt", "lockdep.txt.xz", "lockdep_chains.txt.xz",
                                                         "lockdep_stats.txt", "meta.txt"]


def test_directory_hooks_see_and_may_change_a_directory(tmp_path):
    (tmp_path / "trace.lt").write_text("T1 acquire A\nT1 release A\n")
    (tmp_path / "lockdep.txt").write_text("all lock classes:\n")
    seen = []

    def boot(directory, items):
        seen.append((directory, [(Path(i.path).name, i.kind) for i in items]))
        dumps = [i.path for i in items if i.kind == inputs.DUMP]
        return [inputs.Input(i.path, i.kind, i.directory, state=dumps) for i in items if i.kind == inputs.TRACE]

    [trace] = inputs.expand([str(tmp_path)], [boot])
    assert seen == [(str(tmp_path), [("lockdep.txt", inputs.DUMP), ("trace.lt", inputs.TRACE)])]
    assert trace.state == [str(tmp_path / "lockdep.txt")]


def verdicts(doc: dict) -> set[tuple]:
    return {(f["kind"], f["lock"], f["held"]) for f in doc["findings"]}


def test_check_traces_dir_reports_what_each_trace_reports_and_nothing_more():
    # The right verdict for the shipped traces together: each file is a run of its own,
    # so together they report exactly the union of their own findings (the three samples
    # are one AB-BA, reported once).  Before, perf's missing irq context met ftrace's
    # handler use of hrtimer_bases.lock as a false inconsistent lock state.
    alone = set()
    for path in sorted(p for p in TRACES.rglob("*") if p.is_file()):
        status, doc, err = check_json(str(path))
        assert status in (0, 1) and status == bool(doc["findings"]), err
        alone |= verdicts(doc)
    status, doc, err = check_json(str(TRACES))
    assert status == 1, err
    assert verdicts(doc) == alone
    assert len(doc["findings"]) == 4
    assert "inconsistent-lock-state" not in {f["kind"] for f in doc["findings"]}
    assert any("sample.perf: perf script output carries no irq context" in n for n in doc["notes"])


def test_perf_says_nothing_about_irq_usage(tmp_path):
    ftrace, perf = timer_traces(tmp_path, "swapper", 0)
    lt = tmp_path / "task.lt"
    lt.write_text("T1 acquire hrtimer_bases.lock\nT1 release hrtimer_bases.lock\n")
    assert check_json(str(ftrace), str(perf))[0] == 0
    # the same acquisition in a format that does say "irqs on, process context" is inconsistent
    status, doc, _ = check_json(str(ftrace), str(lt))
    assert status == 1 and doc["findings"][0]["kind"] == "inconsistent-lock-state"


def test_a_task_held_lock_does_not_carry_into_the_next_file(tmp_path):
    (tmp_path / "1.lt").write_text("T1 acquire A\n")
    (tmp_path / "2.lt").write_text("T1 acquire B\nT1 release B\n")
    status, doc, _ = check_json(str(tmp_path))
    assert status == 0 and doc["stats"]["dependencies"] == 0


# -- inputs that fail ----------------------------------------------------------------------
def test_a_missing_file_is_one_line_and_the_others_are_still_read(tmp_path):
    ok = tmp_path / "abba.lt"
    ok.write_text("T1 acquire A\nT1 acquire B\nT1 release B\nT1 release A\n"
                  "T2 acquire B\nT2 acquire A\nT2 release A\nT2 release B\n")
    missing = tmp_path / "missing.lt"
    status, out, err = run("check", str(missing), str(ok))
    assert status == 2
    assert err == f"{missing}: No such file or directory\n"
    assert "WARNING: possible circular locking dependency detected" in out
    assert "lockcheck: 1 finding (1 circular-dependency) in 8 events" in out
    assert "incomplete: 1 input could not be read" in out
    assert "no problems found" not in out


def test_the_summary_never_claims_no_problems_when_an_input_failed(tmp_path):
    missing = tmp_path / "missing.lt"
    status, out, err = run("check", str(missing))
    assert status == 2 and err == f"{missing}: No such file or directory\n"
    assert out == "lockcheck: no verdict: 1 input could not be read (0 events, 0 tasks, 0 lock classes, " \
                  "0 dependencies read)\n"
    status, doc, _ = check_json(str(missing))
    assert status == 2 and doc["errors"] == [f"{missing}: No such file or directory"]
    status, out, _ = run("check", "--format", "sarif", str(missing))
    assert status == 2 and json.loads(out)["runs"][0]["invocations"][0]["executionSuccessful"] is False
    status, out, _ = run("check", "--format", "github", str(missing))
    assert status == 2 and "::error" in out and "incomplete" in out


def test_permission_denied_is_one_line(tmp_path, monkeypatch):
    path = tmp_path / "t.lt"
    path.write_text("T1 acquire A\n")
    deny_open(monkeypatch, path)
    status, out, err = run("check", str(path))
    assert (status, err) == (2, f"{path}: Permission denied\n")
    assert "no problems found" not in out


def test_an_unreadable_file_in_a_directory_is_an_error_the_rest_is_read(tmp_path, monkeypatch):
    (tmp_path / "a.lt").write_text("T1 acquire A\nT1 release A\n")
    (tmp_path / "b.lt").write_text("T1 acquire B\nT1 release B\n")
    deny_open(monkeypatch, tmp_path / "a.lt")
    status, doc, err = check_json(str(tmp_path))
    assert (status, err) == (2, f"{tmp_path / 'a.lt'}: Permission denied\n")
    assert doc["stats"]["events"] == 2


@pytest.mark.parametrize("option", ["--suppress", "--order", "--baseline", "--annotations", "--lockdep-state"])
def test_a_bad_option_file_is_the_only_line_printed(tmp_path, option):
    bad = tmp_path / "bad.opt"
    bad.write_bytes(b"bogus line here\n")
    trace = tmp_path / "t.lt"
    trace.write_text("T1 acquire A\nT1 release A\n")
    status, out, err = run("check", option, str(bad), str(trace))
    assert status == 2 and out == "" and len(err.splitlines()) == 1 and err.startswith(str(bad)), err


def test_a_directory_without_any_trace_is_an_error(tmp_path):
    (tmp_path / "graph.json").write_text('{"lockcheck-graph": 1}\n')
    status, out, err = run("check", str(tmp_path))
    assert status == 2
    assert err == f"{tmp_path}: no trace in this directory (its one file is not a trace)\n"
    assert "no problems found" not in out


def test_graph_exits_0_with_findings_and_2_when_an_input_failed(tmp_path):
    trace = tmp_path / "abba.lt"
    trace.write_text("T1 acquire A\nT1 acquire B\nT1 release B\nT1 release A\n"
                     "T2 acquire B\nT2 acquire A\nT2 release A\nT2 release B\n")
    assert run("check", str(trace))[0] == 1
    status, _, err = run("graph", str(trace), "-o", str(tmp_path / "g.json"))
    assert status == 0 and (tmp_path / "g.json").exists()
    assert "1 finding (`lockcheck check` reports them)" in err
    status, _, err = run("graph", str(trace), str(tmp_path / "missing.lt"), "-o", str(tmp_path / "h.json"))
    assert status == 2 and not (tmp_path / "h.json").exists()


def test_compressed_members_are_classified_by_their_content(tmp_path):
    (tmp_path / "log.xz").write_bytes(lzma.compress(DMESG.encode()))
    (tmp_path / "t.xz").write_bytes(lzma.compress(b"T1 acquire A\nT1 release A\n"))
    got = {Path(i.path).name: i.kind for i in inputs.expand([str(tmp_path)])}
    assert got == {"log.xz": inputs.TRACE, "t.xz": inputs.TRACE}


def test_stat_of_a_boot_directory_reads_the_trace_and_the_lock_stat_dump(tmp_path):
    out, err = io.StringIO(), io.StringIO()
    status = main(["stat", "--format", "json", "--no-progress", str(CAPTURES / "clean")], stdout=out, stderr=err)
    out, err = out.getvalue(), err.getvalue()
    assert status == 0, err
    kinds = sorted(source["kind"] for source in json.loads(out)["sources"])
    assert kinds == ["lock_stat", "trace"]
    assert f"{CAPTURES / 'clean' / 'dmesg.txt'}: a kernel log holds no lock events" in err.replace("\n    ", " ")


# -- what a directory holds besides files, and names that are no regular file --------------
ABBA = ("T1 acquire A\nT1 acquire B\nT1 release B\nT1 release A\n"
        "T2 acquire B\nT2 acquire A\nT2 release A\nT2 release B\n")


def test_an_unlistable_folder_is_an_error_not_a_silent_gap(tmp_path, monkeypatch):
    # root lists every folder whatever its mode, so the refusal is made by hand
    (tmp_path / "a.lt").write_text(ABBA)
    locked = tmp_path / "locked"
    locked.mkdir()
    (locked / "b.lt").write_text(ABBA.replace("A", "C"))
    real_scandir = os.scandir

    def scandir(path="."):
        if os.fspath(path) == str(locked):
            raise PermissionError(13, "Permission denied", os.fspath(path))
        return real_scandir(path)

    monkeypatch.setattr(os, "scandir", scandir)
    status, doc, err = check_json(str(tmp_path))
    assert (status, err) == (2, f"{locked}: Permission denied\n")
    assert doc["errors"] == [f"{locked}: Permission denied"] and len(doc["findings"]) == 1
    status, out, _ = run("check", str(tmp_path))
    assert status == 2 and "incomplete: 1 input could not be read" in out and "no problems" not in out


def test_links_in_a_directory_are_followed_and_a_loop_is_walked_once(tmp_path):
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    (elsewhere / "abba.lt").write_text(ABBA)
    traces = tmp_path / "traces"
    traces.mkdir()
    (traces / "own.lt").write_text("T1 acquire X\nT1 release X\n")
    (traces / "linked").symlink_to(elsewhere, target_is_directory=True)
    (traces / "loop").symlink_to(traces, target_is_directory=True)
    (traces / "file-link.lt").symlink_to(elsewhere / "abba.lt")
    paths = [Path(item.path).relative_to(traces).as_posix() for item in inputs.expand([str(traces)])]
    assert paths == ["file-link.lt", "linked/abba.lt", "own.lt"]
    status, doc, err = check_json(str(traces))
    assert status == 1 and err == "" and doc["stats"]["events"] == 18


def test_a_named_pipe_in_a_directory_is_skipped_unread(tmp_path):
    # opening a FIFO blocks until someone writes to it: a directory walk must not hang on one
    (tmp_path / "abba.lt").write_text(ABBA)
    os.mkfifo(tmp_path / "pipe.lt")
    proc = subprocess.run([sys.executable, "-m", "lockcheck", "check", "--no-config", "--no-progress", str(tmp_path)],
                          capture_output=True, text=True, timeout=120, cwd=ROOT)
    assert proc.returncode == 1, proc.stderr
    assert f"{tmp_path / 'pipe.lt'}: not a trace (looks like a named pipe, not read)" in \
        proc.stdout.replace("\n    ", " ")


def pipe_path(data: bytes) -> str:
    """`/dev/fd/N` of a pipe holding DATA, its writing end closed: what `<(cat FILE)` names."""
    read_end, write_end = os.pipe()
    os.write(write_end, data)  # less than a pipe buffer: no writer thread needed
    os.close(write_end)
    return f"/dev/fd/{read_end}"


needs_dev_fd = pytest.mark.skipif(not os.path.isdir("/dev/fd"), reason="/dev/fd (process substitution) is POSIX")


@needs_dev_fd
@pytest.mark.parametrize("command", ["check", "convert", "stat", "graph"])
def test_a_pipe_named_on_the_command_line_is_read_once(command):
    # `lockcheck check <(zcat trace.gz)`: a second open of the pipe finds it drained, so
    # looking at its first line to see whether it is a dump would leave an empty trace
    path = pipe_path((TRACES / "abba.lt").read_bytes())
    options = {"check": ["--no-config"], "graph": ["--no-config", "-o", "-"]}.get(command, [])
    out, err = io.StringIO(), io.StringIO()
    status = main([command, "--no-progress", *options, path], stdout=out, stderr=err)
    os.close(int(path.rsplit("/", 1)[1]))
    text = out.getvalue() + err.getvalue()
    assert "empty trace" not in text and "0 events" not in text, text
    expected = {"check": "lockcheck: 1 finding (1 circular-dependency) in 8 events",
                "convert": "kworker/0:1/42 acquire &dev->lock", "stat": "&dev->lock",
                "graph": '"&queue->lock"'}[command]
    assert status == (1 if command == "check" else 0) and expected in text, text


@needs_dev_fd
def test_a_dump_through_a_pipe_is_still_a_dump():
    dump = lzma.decompress((CAPTURES / "clean" / "lockdep.txt.xz").read_bytes())[:30_000]
    dump = dump[:dump.rindex(b"\n\n") + 1]  # whole class entries only
    path = pipe_path(dump)
    status, doc, err = check_json(path)
    os.close(int(path.rsplit("/", 1)[1]))
    assert status == 0, err
    assert doc["stats"]["classes"] > 10 and any(f"of {path}" in note for note in doc["notes"])
