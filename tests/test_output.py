"""Every output is written atomically, never over an input, and a failed write is one line and exit 2."""

from __future__ import annotations

import io
import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest

from lockcheck.util import output
from lockcheck.commands.cli import main

ABBA = "T1 acquire A\nT1 acquire B\nT1 release B\nT1 release A\nT2 acquire B\nT2 acquire A\n"
OLD = '{"lockcheck-graph": 1, "classes": [], "dependencies": [], "note": "the old graph"}\n'


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def lockcheck(*args: str, **kw) -> subprocess.CompletedProcess:
    return subprocess.run([sys.executable, "-m", "lockcheck", *args], capture_output=True, text=True, **kw)


@pytest.fixture
def trace(tmp_path: Path) -> str:
    path = tmp_path / "abba.lt"
    path.write_text(ABBA)
    return str(path)


# -- atomic files ---------------------------------------------------------------------------


def _disk_full_after(monkeypatch, limit: int) -> None:
    """Writes to temporary files fail with ENOSPC once `limit` characters went through (a full disk)."""
    real_fdopen = os.fdopen

    class Full:
        def __init__(self, stream):
            self._stream = stream
            self._written = 0

        def write(self, text):
            self._written += len(text)
            if self._written > limit:
                raise OSError(28, "No space left on device")
            return self._stream.write(text)

        def __getattr__(self, name):
            return getattr(self._stream, name)

        def __enter__(self):
            return self

        def __exit__(self, *exc):
            return self._stream.__exit__(*exc)

    monkeypatch.setattr(output.os, "fdopen", lambda fd, *args, **kw: Full(real_fdopen(fd, *args, **kw)))


@pytest.mark.parametrize("command", [
    lambda trace, out: ["graph", "--no-config", trace, "-o", out],
    lambda trace, out: ["check", "--no-config", trace, "--save-graph", out],
    lambda trace, out: ["check", "--no-config", trace, "-o", out],
    lambda trace, out: ["convert", trace, "-o", out],
])
def test_full_disk_keeps_the_old_file(tmp_path, trace, monkeypatch, command):
    target = tmp_path / "out.json"
    target.write_text(OLD)
    _disk_full_after(monkeypatch, 10)
    status, _, err = cli(*command(trace, str(target)))
    assert status == 2
    assert err.splitlines()[-1] == f"{target}: cannot write: No space left on device"
    assert "Traceback" not in err
    assert target.read_text() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["abba.lt", "out.json"]  # no temporary file left


@pytest.mark.parametrize("command", [
    lambda trace, out: ["graph", "--no-config", trace, "-o", out],
    lambda trace, out: ["check", "--no-config", trace, "--save-graph", out],
    lambda trace, out: ["check", "--no-config", "--format", "json", trace, "-o", out],
    lambda trace, out: ["convert", trace, "-o", out],
])
@pytest.mark.parametrize("size", [1024, 4096])
def test_file_size_limit_keeps_the_old_file(tmp_path, command, size):
    """A real short write (RLIMIT_FSIZE, as a full disk would): the old file survives, one error line.

    The file object's own close flushes what is still buffered and fails
    again: that second failure is the same one error, not a traceback.
    """
    big = tmp_path / "big.lt"
    big.write_text("".join(f"T{i} acquire L{i}\nT{i} acquire M{i}\nT{i} release M{i}\nT{i} release L{i}\n"
                           for i in range(300)) + "".join(f"R{i} acquire X{i}@1\nR{i} acquire X{i}@2\n" for i in range(40)))
    target = tmp_path / "g.json"
    target.write_text(OLD)

    def limit():
        import resource

        signal.signal(signal.SIGXFSZ, signal.SIG_IGN)
        resource.setrlimit(resource.RLIMIT_FSIZE, (size, size))

    result = lockcheck(*command(str(big), str(target)), preexec_fn=limit)
    assert result.returncode == 2, result.stderr
    assert [line for line in result.stderr.splitlines() if not line.startswith("lockcheck: ")] == \
        [f"{target}: cannot write: File too large"], result.stderr
    assert target.read_text() == OLD
    assert sorted(p.name for p in tmp_path.iterdir()) == ["big.lt", "g.json"]  # no temporary file left


SLOW_WRITER = """
import os, sys, time
from lockcheck.util import output
from lockcheck.commands.cli import main
real = os.fdopen
class Slow:
    def __init__(self, stream):
        self._stream = stream
    def write(self, text):
        self._stream.write(text[:10])
        self._stream.flush()
        time.sleep(60)  # killed here, half-way through the new graph
    def __getattr__(self, name):
        return getattr(self._stream, name)
    def __enter__(self):
        return self
    def __exit__(self, *exc):
        return self._stream.__exit__(*exc)
output.os.fdopen = lambda fd, *a, **k: Slow(real(fd, *a, **k))
sys.exit(main(sys.argv[1:]))
"""


def test_sigkill_while_writing_keeps_the_old_graph(tmp_path, trace):
    """SIGKILL half-way through writing the new graph: the old one is untouched (only a temporary file remains)."""
    target = tmp_path / "g.json"
    target.write_text(OLD)
    proc = subprocess.Popen([sys.executable, "-c", SLOW_WRITER, "graph", "--no-config", trace, "-o", str(target)])
    try:
        deadline = time.monotonic() + 20
        while not any(p.name.endswith(".tmp") and p.stat().st_size for p in tmp_path.iterdir()):
            assert time.monotonic() < deadline and proc.poll() is None, "the writer never started"
            time.sleep(0.02)
    finally:
        proc.kill()
        proc.wait()
    assert target.read_text() == OLD


def test_permissions_and_symlinks_are_kept(tmp_path, trace):
    real = tmp_path / "real.json"
    real.write_text(OLD)
    os.chmod(real, 0o640)
    link = tmp_path / "link.json"
    link.symlink_to(real)
    assert cli("graph", "--no-config", trace, "-o", str(link))[0] in (0, 1)
    assert link.is_symlink() and json.loads(real.read_text())["dependencies"]
    assert real.stat().st_mode & 0o777 == 0o640


def test_a_device_is_written_in_place(trace):
    status, _, err = cli("check", "--no-config", trace, "-o", "/dev/null")
    assert status == 1 and err == ""


# -- stdout -------------------------------------------------------------------------------------


def test_full_stdout_is_one_line():
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "lockcheck", "check", "--no-config", "traces/abba.lt"],
                                stdout=full, stderr=subprocess.PIPE, text=True, cwd=Path(__file__).parents[1])
    assert result.returncode == 2
    assert result.stderr == "<stdout>: cannot write: No space left on device\n"


@pytest.mark.parametrize("args", [["--help"], ["check", "--help"], ["--version"]])
def test_help_and_version_on_a_full_stdout_are_one_line(args):
    with open("/dev/full", "w") as full:
        result = subprocess.run([sys.executable, "-m", "lockcheck", *args], stdout=full, stderr=subprocess.PIPE,
                                text=True)
    assert (result.returncode, result.stderr) == (2, "<stdout>: cannot write: No space left on device\n")


def test_help_goes_to_the_stdout_main_was_given():
    status, out, err = cli("check", "--help")
    assert status == 0 and err == ""
    assert out.startswith("usage: lockcheck check") and "examples:" in out


def test_closed_pipe_is_one_line(tmp_path, trace):
    """`lockcheck check x | head -0`: the reader is gone before the report is written."""
    script = f"{sys.executable} -m lockcheck check --no-config {trace} | head -c0; exit ${{PIPESTATUS[0]}}"
    result = subprocess.run(["bash", "-c", script], capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr == "<stdout>: cannot write: Broken pipe\n"


def test_closed_stdout_is_one_line(trace):
    result = subprocess.run(f"{sys.executable} -m lockcheck check --no-config {trace} >&-", shell=True,
                            capture_output=True, text=True)
    assert result.returncode == 2
    assert result.stderr.splitlines()[-1] == "<stdout>: cannot write: standard output is closed"
    assert "Traceback" not in result.stderr


# -- inputs are never outputs -------------------------------------------------------------------


@pytest.mark.parametrize("command", [
    ["check", "--no-config", "{t}", "-o", "{t}"],
    ["check", "--no-config", "{t}", "--save-graph", "{t}"],
    ["convert", "{t}", "-o", "{t}"],
    ["convert", "{t}", "-o", "./{t}"],
    ["stat", "{t}", "-o", "{t}"],
    ["diff", "--no-config", "{t}", "{t}", "-o", "{t}"],
    ["check", "--no-config", "{t}", "--suppress", "s.toml", "-o", "s.toml"],
    ["check", "--no-config", "{d}", "-o", "{t}"],
])
def test_input_is_never_overwritten(tmp_path, monkeypatch, command):
    monkeypatch.chdir(tmp_path)
    (tmp_path / "traces").mkdir()
    trace = tmp_path / "traces" / "self.lt"
    trace.write_text(ABBA)
    (tmp_path / "s.toml").write_text("")
    before = {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()}
    args = [a.format(t="traces/self.lt", d="traces") for a in command]
    status, out, err = cli(*args)
    assert status == 2 and out == ""
    assert err.count("\n") == 1 and "is also an input" in err or "in the input directory" in err, err
    assert {p: p.read_bytes() for p in tmp_path.rglob("*") if p.is_file()} == before


def test_graph_output_over_a_baseline_is_refused(tmp_path, trace):
    graph = tmp_path / "g.json"
    assert cli("graph", "--no-config", trace, "-o", str(graph))[0] in (0, 1)
    before = graph.read_bytes()
    status, _, err = cli("graph", "--no-config", "--baseline", str(graph), trace, "-o", str(graph))
    assert status == 2 and "is also an input" in err
    assert graph.read_bytes() == before
