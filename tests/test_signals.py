"""Signals: Ctrl-C is one line and exit 130 at any moment; no reader process outlives lockcheck."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lockcheck.commands.cli import main

#: runs the command as the console script does, saying when lockcheck's first module is imported
STARTED = ("import sys, lockcheck.entry; sys.stderr.write('started\\n'); sys.stderr.flush(); "
           "lockcheck.entry.run()")


def big_trace(path: Path, mib: int) -> str:
    """A clean trace of about `mib` MiB: nested pairs, so the checker has work to do."""
    block = "".join(f"T{i % 7} acquire L{i % 997} at=f.c:{i}\nT{i % 7} acquire M{i % 13}\n"
                    f"T{i % 7} release M{i % 13}\nT{i % 7} release L{i % 997}\n" for i in range(5000))
    with open(path, "w") as out:
        for _ in range(mib * (1 << 20) // len(block) + 1):
            out.write(block)
    return str(path)


@pytest.fixture(scope="module")
def big(tmp_path_factory) -> str:
    """A trace large enough (over 4 MiB) to be read by a reader process."""
    return big_trace(tmp_path_factory.mktemp("signals") / "big.lt", 5)


#: how often `long_trace` names its file: each is a run of its own, read and checked again
LONG_REPEATS = 48


@pytest.fixture(scope="module")
def long_trace(tmp_path_factory) -> list[str]:
    """Inputs that take several seconds to check even on the compiled fast path (8 MiB read 48 times).

    The compiled fast path checks 32 MiB in about a second, so one file of
    that size ended before a late interrupt; the same file named again and
    again makes the work longer without more disk.
    """
    return [big_trace(tmp_path_factory.mktemp("signals") / "long.lt", 8)] * LONG_REPEATS


def test_the_same_file_named_again_is_read_again(long_trace):
    """What `long_trace` relies on: each name on the command line is a run of its own, even the same file."""
    def events(*paths: str) -> int:
        out = io.StringIO()
        assert main(["check", "--no-config", "--no-progress", "--format", "json", *paths], stdout=out,
                    stderr=io.StringIO()) == 0
        return json.loads(out.getvalue())["stats"]["events"]

    assert events(*long_trace[:3]) == 3 * events(long_trace[0]) > 0


def start(*args: str, reader_process: bool = False) -> subprocess.Popen:
    """lockcheck ARGS; `reader_process`: the plain pipeline, which parses a large file in a second
    process (the fast path for `.lt` reads in the checking one)."""
    env = dict(os.environ)
    env.pop("LOCKCHECK_JOBS", None)
    if reader_process:
        env["LOCKCHECK_FASTPATH"] = "0"
    proc = subprocess.Popen([sys.executable, "-c", STARTED, *args], stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, env=env, preexec_fn=_default_signals)
    assert proc.stderr.readline() == "started\n"
    return proc


def _default_signals() -> None:
    """As a terminal's foreground command has them, whatever this test run inherited (a background job
    ignores SIGINT, and lockcheck keeps a signal ignored that it was started with ignored)."""
    for signum in (signal.SIGINT, signal.SIGTERM, signal.SIGHUP):
        signal.signal(signum, signal.SIG_DFL)


def children(pid: int) -> list[int]:
    """Live (not zombie) processes whose parent is `pid`."""
    found = []
    for entry in os.listdir("/proc"):
        if entry.isdigit():
            state = _stat(int(entry))
            if state is not None and state[1] == pid and state[0] != "Z":
                found.append(int(entry))
    return found


def _stat(pid: int):
    try:
        text = Path(f"/proc/{pid}/stat").read_text()
    except OSError:
        return None
    fields = text[text.rindex(")") + 2:].split()
    return fields[0], int(fields[1])


def alive(pid: int) -> bool:
    state = _stat(pid)
    return state is not None and state[0] != "Z"


def wait_for_worker(proc: subprocess.Popen, timeout: float = 30) -> int:
    deadline = time.monotonic() + timeout
    while time.monotonic() < deadline:
        workers = children(proc.pid)
        if workers:
            return workers[0]
        assert proc.poll() is None, proc.stderr.read()
        time.sleep(0.005)
    raise AssertionError("no reader process was started")


def gone_within(pid: int, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if not alive(pid):
            return True
        time.sleep(0.02)
    return False


needs_worker = pytest.mark.skipif((os.cpu_count() or 1) < 2, reason="the reader process needs a second CPU")


@pytest.mark.parametrize("delay", [0.0, 0.1, 0.4, 0.9])
def test_interrupt_at_any_moment_is_one_line_and_130(tmp_path, long_trace, delay):
    """From lockcheck's first import on: during imports, argument parsing, reading, checking."""
    proc = start("check", "--no-config", "--no-progress", *long_trace)
    time.sleep(delay)
    assert proc.poll() is None, "the check ended before the interrupt: the trace is too small to test this"
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    status = proc.wait(timeout=60)
    assert (status, err) == (130, "lockcheck: interrupted\n")
    assert not list(tmp_path.glob(".*.tmp"))


@pytest.mark.slow
@pytest.mark.parametrize("ignored", [signal.SIGHUP, signal.SIGINT])
def test_a_signal_ignored_at_start_stays_ignored(long_trace, ignored):
    """`nohup lockcheck ...` (SIGHUP ignored) and a shell's background job (SIGINT ignored) must not die of
    that signal: the parent said so."""
    env = dict(os.environ, LOCKCHECK_JOBS="1")

    def ignore() -> None:
        _default_signals()
        signal.signal(ignored, signal.SIG_IGN)

    proc = subprocess.Popen([sys.executable, "-c", STARTED, "check", "--no-config", "--no-progress",
                             *long_trace[:40]], stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, env=env,
                            preexec_fn=ignore)
    assert proc.stderr.readline() == "started\n"
    time.sleep(1.0)  # past the imports: lockcheck has taken the signals it takes
    assert proc.poll() is None, "the check ended before the signal: the trace is too small to test this"
    proc.send_signal(ignored)
    out, err = proc.communicate(timeout=300)
    assert (proc.returncode, err) == (0, "")
    assert out.startswith("lockcheck: no problems found")


def test_interrupt_while_writing_an_output_leaves_no_file(tmp_path):
    trace = big_trace(tmp_path / "t.lt", 2)
    out = tmp_path / "g.json"
    out.write_text("old\n")
    proc = start("graph", "--no-config", trace, "-o", str(out))
    time.sleep(1.0)
    proc.send_signal(signal.SIGINT)
    err = proc.stderr.read()
    assert proc.wait(timeout=60) in (0, 130), err
    assert out.read_text() == "old\n" or out.read_text().startswith("{")
    assert [p.name for p in tmp_path.iterdir() if p.name.startswith(".")] == []


@needs_worker
@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGHUP])
def test_sigterm_and_sighup_end_the_reader_too(big, signum):
    proc = start("check", "--no-config", "--no-progress", big, reader_process=True)
    worker = wait_for_worker(proc)
    proc.send_signal(signum)
    err = proc.stderr.read()
    assert proc.wait(timeout=60) == 128 + signum
    assert err == f"lockcheck: terminated by {signal.Signals(signum).name}\n"
    assert gone_within(worker, 5)


@needs_worker
def test_orphaned_reader_exits(big):
    """kill -9 of lockcheck: its reader process must not live on, blocked on the pipe."""
    proc = start("check", "--no-config", "--no-progress", big, reader_process=True)
    worker = wait_for_worker(proc)
    proc.kill()
    proc.wait()
    assert gone_within(worker, 5), "the reader process outlived lockcheck"


@needs_worker
def test_interrupt_stops_the_reader(big):
    proc = start("check", "--no-config", "--no-progress", big, reader_process=True)
    worker = wait_for_worker(proc)
    proc.send_signal(signal.SIGINT)
    with contextlib.suppress(ProcessLookupError):
        os.kill(worker, signal.SIGINT)  # a terminal's Ctrl-C reaches the whole process group
    err = proc.stderr.read()
    assert (proc.wait(timeout=60), err) == (130, "lockcheck: interrupted\n")
    assert gone_within(worker, 5)
