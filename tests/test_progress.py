"""The progress line: share of the input and time left on a terminal, nothing elsewhere."""

from __future__ import annotations

import gzip
import io
import os
import re
import select
import subprocess
import sys

import pytest

from lockcheck.util import progress
from lockcheck.commands.cli import main
from lockcheck.util.progress import ProgressLine
from lockcheck.readers import ReadContext, read_all

from testdata import ROOT


class Terminal(io.StringIO):
    """A stderr that says it is a terminal."""

    encoding = "utf-8"

    def isatty(self) -> bool:
        return True


def abba_lines(n: int) -> str:
    return "".join(f"T{i} acquire A{i % 50}\nT{i} acquire B{i % 7}\nT{i} release B{i % 7}\nT{i} release A{i % 50}\n"
                   for i in range(n))


def test_the_line_with_a_known_size():
    line = ProgressLine(Terminal(), 30_000_000, lambda: 12_600_000, clock=lambda: 0.0)
    text = line.line(1_155_000, 5.0, "boot/trace.ftrace.xz")
    assert text.startswith("lockcheck:  42%|████████▍           | 12.6/30.0 MB [00:05<00:06, 231k events/s]")
    assert text.endswith(" boot/trace.ftrace.xz")


def test_the_line_without_a_size_counts_events():
    text = ProgressLine(Terminal(), None, lambda: 0).line(70_000, 2.0, "<stdin>")
    assert text == "lockcheck: 70,000 events [00:02, 35k events/s] <stdin>"


def test_an_ascii_terminal_gets_an_ascii_bar():
    class Ascii(Terminal):
        encoding = "ascii"

    text = ProgressLine(Ascii(), 100, lambda: 50).line(10, 1.0, "t.lt")
    assert text.startswith("lockcheck:  50%|##########          | 50/100 B [00:01<00:01, 10 events/s]")


def test_a_long_file_name_is_cut_from_the_left():
    text = ProgressLine(Terminal(), 100, lambda: 50).line(10, 1.0, "/a/" + "x" * 200 + "/trace.lt")
    assert len(text) <= progress.WIDTH and text.endswith("/trace.lt") and "..." in text


def test_compressed_files_progress_by_their_compressed_offset(tmp_path):
    path = tmp_path / "t.lt.gz"
    path.write_bytes(gzip.compress(abba_lines(40_000).encode(), compresslevel=1))
    size = path.stat().st_size
    context = ReadContext()
    seen = []
    for i, _ in enumerate(read_all([str(path)], context=context)):
        if not i % 4096:
            seen.append(context.bytes_read())
    assert seen == sorted(seen) and seen[0] < size // 2  # read in steps, never past the file
    assert len(set(seen)) > 3 and seen[-1] <= size
    assert context.bytes_read() == size


def test_bytes_add_up_over_several_files(tmp_path):
    for name in ("a.lt", "b.lt"):
        (tmp_path / name).write_text(abba_lines(10))
    context = ReadContext()
    list(read_all([str(tmp_path / "a.lt"), str(tmp_path / "b.lt")], context=context))
    assert context.bytes_read() == 2 * len(abba_lines(10))


def run_check(path, stderr, *extra) -> int:
    return main(["check", "--no-config", "--format", "json", *extra, str(path)], stdout=io.StringIO(), stderr=stderr)


def test_silent_when_stderr_is_not_a_terminal(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "EVERY", 0)
    path = tmp_path / "t.lt"
    path.write_text(abba_lines(300))
    err = io.StringIO()
    assert run_check(path, err) == 0
    assert err.getvalue() == ""


def test_drawn_on_a_terminal_and_cleared_at_the_end(tmp_path, monkeypatch):
    monkeypatch.setattr(progress, "EVERY", 0)  # look at every event
    monkeypatch.setattr(progress, "INTERVAL", 0.0)
    path = tmp_path / "t.lt.gz"
    path.write_bytes(gzip.compress(abba_lines(3000).encode(), compresslevel=1))
    err = Terminal()
    assert run_check(path, err) == 0
    text = err.getvalue()
    assert text.endswith("\r\033[K")
    shares = [int(part.split("%")[0]) for part in text.split("\rlockcheck:")[1:] if "%" in part]
    assert shares and shares == sorted(shares) and shares[-1] <= 100
    assert "<00:0" in text and "events/s]" in text and "t.lt.gz\033[K" in text


@pytest.mark.parametrize("flag", ["--no-progress", "--quiet"])
def test_off_on_request(tmp_path, monkeypatch, flag):
    monkeypatch.setattr(progress, "EVERY", 0)
    path = tmp_path / "t.lt"
    path.write_text(abba_lines(300))
    err = Terminal()
    run_check(path, err, flag)
    assert "\r" not in err.getvalue()


def run_on(stderr, path) -> subprocess.Popen:
    """`python -m lockcheck check PATH` in a child process whose stderr is STDERR."""
    env = {**os.environ, "PYTHONPATH": str(ROOT), "LOCKCHECK_JOBS": "1"}
    env.pop("COLUMNS", None)
    return subprocess.Popen([sys.executable, "-m", "lockcheck", "check", "--no-config", "--format", "json",
                             str(path)], stdout=subprocess.DEVNULL, stderr=stderr, env=env)


@pytest.mark.skipif(sys.platform == "win32", reason="a pseudo-terminal is POSIX")
def test_on_a_real_pseudo_terminal(tmp_path):
    import pty

    # compressed: the share is of the file's compressed bytes, and the time left is shown
    path = tmp_path / "big.lt.gz"
    path.write_bytes(gzip.compress(abba_lines(40_000).encode(), compresslevel=1))  # 160,000 events
    master, slave = pty.openpty()
    proc = run_on(slave, path)
    os.close(slave)
    seen = b""
    while True:
        ready, _, _ = select.select([master], [], [], 60)
        if not ready:
            break
        try:
            chunk = os.read(master, 4096)
        except OSError:  # the child closed its end
            break
        if not chunk:
            break
        seen += chunk
    assert proc.wait(timeout=120) == 0
    os.close(master)
    text = seen.decode()
    assert text.endswith("\r\x1b[K")
    size = f"/{path.stat().st_size / 1000:.1f} kB ["
    drawn = [part for part in text.split("\r") if part.startswith("lockcheck:")]
    assert drawn and all("%|" in part and size in part and "events/s]" in part for part in drawn), drawn
    assert all(re.search(r"\[\d\d:\d\d<(\d\d:\d\d|\?), ", part) for part in drawn), drawn


def test_silent_in_a_real_pipe(tmp_path):
    path = tmp_path / "big.lt.gz"
    path.write_bytes(gzip.compress(abba_lines(20_000).encode(), compresslevel=1))
    proc = run_on(subprocess.PIPE, path)
    _, err = proc.communicate(timeout=120)
    assert proc.returncode == 0 and err == b""
