"""Options given values that cannot work (`--dask`, `--jobs`, capture sizes): one line and exit status 2 within
seconds, or the run clamped with a note -- never a traceback, a hang or thousands of processes.
"""

from __future__ import annotations

import io
import socket
import subprocess
import sys
import threading
from pathlib import Path

import pytest

from lockcheck.commands.cli import main

ABBA = "T1 acquire A\nT1 acquire B\nT1 release B\nT1 release A\nT2 acquire B\nT2 acquire A\n"


@pytest.fixture
def trace(tmp_path: Path) -> str:
    path = tmp_path / "abba.lt"
    path.write_text(ABBA)
    return str(path)


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


@pytest.mark.parametrize("address, said", [
    ("bogus://x", "unknown scheme 'bogus'"),
    ("tcp://127.0.0.1:notaport", "not a scheduler address"),
    ("inproc://", "inproc:// is a scheduler inside one process"),
    ("tls://", "no host"),
    ("", "an address is required"),
    ("   ", "an address is required"),
])
def test_a_bad_address_is_one_line_before_anything_is_read(trace: str, address: str, said: str) -> None:
    status, out, err = cli("check", "--dask", address, trace)
    assert status == 2 and out == ""
    assert len(err.splitlines()) == 1 and said in err


def test_a_refused_port_is_one_line_in_seconds(trace: str) -> None:
    with socket.socket() as probe:  # a port nobody listens on: bound, then closed
        probe.bind(("127.0.0.1", 0))
        port = probe.getsockname()[1]
    status, out, err = cli("check", "--dask", f"tcp://127.0.0.1:{port}", "--dask-timeout", "1", trace)
    assert status == 2 and len(err.splitlines()) == 1
    assert "cannot reach the scheduler" in err and "--dask-timeout" in err


def _server(answer: bytes) -> tuple[socket.socket, int]:
    """A port that accepts and then sends `answer` (nothing: never answers)."""
    server = socket.socket()
    server.bind(("127.0.0.1", 0))
    server.listen(8)
    kept = []

    def serve() -> None:
        while True:
            try:
                conn, _ = server.accept()
            except OSError:
                return
            kept.append(conn)
            if answer:
                try:
                    conn.sendall(answer)
                except OSError:
                    pass

    threading.Thread(target=serve, daemon=True).start()
    return server, server.getsockname()[1]


@pytest.mark.parametrize("answer, said", [
    (b"", "no Dask scheduler answered within 1 s"),
    (b"HTTP/1.0 200 OK\r\n\r\nnot dask at all" * 50, "not a Dask scheduler"),
])
def test_a_port_that_is_not_a_scheduler_is_one_line(trace: str, answer: bytes, said: str) -> None:
    server, port = _server(answer)
    try:
        proc = subprocess.run([sys.executable, "-m", "lockcheck", "check", "--dask", f"tcp://127.0.0.1:{port}",
                               "--dask-timeout", "1", trace], capture_output=True, text=True, timeout=120)
    finally:
        server.close()
    err = proc.stderr.strip().splitlines()
    assert proc.returncode == 2 and len(err) == 1, proc.stderr
    assert said in err[0] and "Traceback" not in proc.stderr


@pytest.mark.parametrize("value", ["0", "-1", "nan", "inf", "soon"])
def test_dask_timeout_is_a_positive_number(trace: str, value: str) -> None:
    status, out, err = cli("check", "--dask", "tcp://127.0.0.1:1", "--dask-timeout", value, trace)
    assert status == 2 and out == ""
    assert "is not a number of seconds" in err


def test_jobs_beyond_the_machine_are_clamped_with_a_note(trace: str) -> None:
    status, out, err = cli("check", "--jobs", "10000", trace)
    one_status, one_out, _ = cli("check", trace)
    assert (status, out) == (one_status, one_out) == (1, one_out)
    assert "note: --jobs 10000: this machine runs at most" in err
    status, _, err = cli("check", "--jobs", "2", trace)
    assert status == 1 and "note:" not in err


def test_quiet_prints_the_findings_only(trace: str, tmp_path: Path) -> None:
    status, out, _ = cli("check", "--quiet", trace)
    assert status == 1 and "possible circular locking dependency detected" in out
    assert "lockcheck:" not in out  # no summary line, no notes
    clean = tmp_path / "clean.lt"
    clean.write_text("T1 acquire A\nT1 release A\n")
    assert cli("check", "--quiet", str(clean)) == (0, "", "")


@pytest.mark.parametrize("option, value", [("--buffer-kb", "-1"), ("--buffer-kb", "0"), ("--buffer-kb", "²"),
                                           ("--name-offset", "-8"), ("--name-offset", "99999")])
def test_capture_sizes_are_checked(option: str, value: str) -> None:
    status, out, err = cli("capture", option, value)
    assert status == 2 and "is not a" in err
