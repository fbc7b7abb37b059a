"""Writing what lockcheck produces: reports, graphs and converted traces.

Three rules, for every output (`-o`, `--save-graph`, `graph -o`, `convert -o`, stdout):

- atomic: a file is written to a temporary file in the same directory and
  renamed over the old one only once everything is written and flushed to
  disk, so a full disk, a crash or SIGKILL leaves the old file as it was
  (a CI job's cached baseline graph must survive a failed run);
- no input is ever an output: `check self.lt -o self.lt` is refused before
  anything is read (`refuse_inputs`);
- a write that fails (a full disk, a closed pipe as in `lockcheck check x |
  head -0`, a closed stdout) is one `FILE: cannot write: REASON` line and
  exit status 2 (`OutputError`), never a traceback.

Special files (`/dev/stdout`, a FIFO, a terminal) cannot be replaced by a
rename; they are written in place.
"""

from __future__ import annotations

import contextlib
import io
import os
import sys
import tempfile
from typing import Iterable, Iterator, Optional, TextIO

from lockcheck.errors import LockcheckError, UsageError

STDOUT_NAME = "<stdout>"


class OutputError(LockcheckError):
    """An output that could not be written (exit status 2)."""

    def __init__(self, name: str, reason: str) -> None:
        super().__init__(f"{name}: cannot write: {reason}")
        self.name = name


def _reason(err: BaseException) -> str:
    if isinstance(err, OSError):
        return err.strerror or str(err) or type(err).__name__
    return str(err) or type(err).__name__


# -- inputs are not outputs ------------------------------------------------------------


def refuse_inputs(output: Optional[str], inputs: Iterable[Optional[str]]) -> None:
    """UsageError when writing `output` would replace one of `inputs` (a file, or a file in an input directory).

    Compared by identity (`os.path.samefile`: the same inode, whatever the
    spelling or link), so `./self.lt` and `self.lt` are the same file.
    """
    if not output or output == "-" or not os.path.exists(output):
        return
    real = os.path.realpath(output)
    for path in inputs:
        if not path or path == "-" or not os.path.exists(path):
            continue
        try:
            if os.path.isdir(path):
                inside = os.path.commonpath([real, os.path.realpath(path)]) == os.path.realpath(path)
                if inside and os.path.isfile(real) and not os.path.basename(real).startswith("."):
                    # every visible file of an input directory is read (or looked at) as an input
                    raise UsageError(f"{output}: is in the input directory {path}; write the output elsewhere")
            elif os.path.samefile(output, path):
                raise UsageError(f"{output}: is also an input; write the output to another file")
        except OSError:
            continue


# -- writing files -----------------------------------------------------------------------


@contextlib.contextmanager
def atomic_text(path: str) -> Iterator[TextIO]:
    """A text stream whose content replaces `path` only when the block ends without an exception.

    >>> import tempfile, os
    >>> target = os.path.join(tempfile.mkdtemp(), "g.json")
    >>> with atomic_text(target) as out:
    ...     _ = out.write("{}\\n")
    >>> open(target).read()
    '{}\\n'
    """
    if _special(path):
        with _opened_in_place(path) as out:
            yield out
        return
    target = os.path.realpath(path)  # through a symlink: replace the file it names, keep the link
    directory = os.path.dirname(target) or "."
    try:
        fd, temp = tempfile.mkstemp(prefix=f".{os.path.basename(target)}.", suffix=".tmp", dir=directory)
    except OSError as err:
        raise OutputError(path, _reason(err)) from None
    raw = os.fdopen(fd, "w", encoding="utf-8", newline="")
    try:
        out = _Guarded(raw, path)
        yield out
        out.flush()
        try:
            os.fsync(raw.fileno())
            raw.close()
        except OSError as err:
            raise OutputError(path, _reason(err)) from None
        _keep_mode(path, temp)
        try:
            os.replace(temp, target)
        except OSError as err:
            raise OutputError(path, _reason(err)) from None
    except BaseException:
        # closing flushes what is still buffered, which fails again on a full disk: the first error is the one
        with contextlib.suppress(OSError):
            raw.close()
        with contextlib.suppress(OSError):
            os.unlink(temp)
        raise


def write_file(path: str, text: str) -> None:
    """Replace `path` with `text`, atomically."""
    with atomic_text(path) as out:
        out.write(text)


def _special(path: str) -> bool:
    """An existing file that is not a regular file (a device, a FIFO): it cannot be renamed over."""
    try:
        import stat

        return not stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


@contextlib.contextmanager
def _opened_in_place(path: str) -> Iterator[TextIO]:
    try:
        raw = open(path, "w", encoding="utf-8", newline="")
    except OSError as err:
        raise OutputError(path, _reason(err)) from None
    try:
        out = _Guarded(raw, path)
        yield out
        out.flush()
    finally:
        with contextlib.suppress(OSError):
            raw.close()


def _keep_mode(path: str, temp: str) -> None:
    """The new file gets the old one's permissions, or the umask's for a new file (mkstemp makes 0600)."""
    try:
        mode = os.stat(path).st_mode & 0o7777
    except OSError:
        umask = os.umask(0)
        os.umask(umask)
        mode = 0o666 & ~umask
    with contextlib.suppress(OSError):
        os.chmod(temp, mode)


# -- standard output ------------------------------------------------------------------------


def stdout_stream(stdout: Optional[TextIO]) -> TextIO:
    """`stdout` whose write failures are OutputErrors (a closed stdout is one too, at the first write)."""
    if isinstance(stdout, _Guarded):
        return stdout
    return _Guarded(stdout, STDOUT_NAME)


@contextlib.contextmanager
def output_stream(path: Optional[str], stdout: Optional[TextIO]) -> Iterator[TextIO]:
    """The stream for `-o PATH` (atomic), or standard output for None and `-`."""
    if not path or path == "-":
        out = stdout_stream(stdout)
        yield out
        out.flush()
        return
    with atomic_text(path) as out:
        yield out


class _Guarded(io.TextIOBase):
    """A text stream that turns write errors into one OutputError naming the output."""

    def __init__(self, stream: Optional[TextIO], name: str) -> None:
        super().__init__()
        self._stream = stream
        self._name = name

    def write(self, text: str) -> int:  # type: ignore[override]
        if self._stream is None:
            raise OutputError(self._name, "standard output is closed")
        try:
            return self._stream.write(text)
        except (OSError, ValueError) as err:  # ValueError: write to a closed file
            self._failed()
            raise OutputError(self._name, _reason(err)) from None

    def flush(self) -> None:
        if self._stream is None:
            return
        try:
            self._stream.flush()
        except (OSError, ValueError) as err:
            self._failed()
            raise OutputError(self._name, _reason(err)) from None

    def isatty(self) -> bool:
        try:
            return bool(self._stream is not None and self._stream.isatty())
        except (AttributeError, ValueError):
            return False

    def writable(self) -> bool:
        return True

    def close(self) -> None:
        """The stream is not ours to close (stdout), or is closed by `atomic_text`."""

    def _failed(self) -> None:
        """After a failed write to the real stdout, point fd 1 at /dev/null: the interpreter's own
        flush at exit would fail again and print a traceback of its own."""
        if self._stream is not None and self._stream is sys.__stdout__:
            silence_stdout()


def silence_stdout() -> None:
    """Send whatever is still buffered for stdout to /dev/null (after stdout failed)."""
    with contextlib.suppress(OSError, ValueError, AttributeError):
        devnull = os.open(os.devnull, os.O_WRONLY)
        os.dup2(devnull, sys.__stdout__.fileno())
        os.close(devnull)
