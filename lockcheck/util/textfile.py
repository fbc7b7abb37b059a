"""Reading a whole option file as text: `--suppress`, `--order`, `--annotations`, pyproject.toml, saved graphs.

Traces are streamed line by line (`lockcheck.readers.source`); the files
that configure a run are small and read whole.  Either way a byte that is
not UTF-8 is one `FILE:LINE:COL: invalid UTF-8 (byte 0xff)` error, and an
unreadable file one `FILE: cannot read ...: REASON` error, never a
traceback.
"""

from __future__ import annotations

from lockcheck.errors import TraceError

#: option files and saved graphs larger than this are refused (a trace given by mistake)
MAX_BYTES = 256 << 20


def read_bytes(path: str, what: str = "file") -> bytes:
    """The bytes of `path`; `TraceError(path, ...)` when it cannot be read or is absurdly large."""
    try:
        with open(path, "rb") as stream:
            data = stream.read(MAX_BYTES + 1)
    except OSError as err:
        raise TraceError(path, None, None, f"cannot read {what}: {err.strerror or err}") from None
    if len(data) > MAX_BYTES:
        raise TraceError(path, None, None, f"cannot read {what}: larger than {MAX_BYTES >> 20} MiB")
    return data


def decode(data: bytes, path: str) -> str:
    """UTF-8 text of `data` (a leading byte order mark dropped), or a TraceError at the first bad byte.

    >>> decode(b"a\\nb\\xffc", "f")
    Traceback (most recent call last):
    ...
    lockcheck.errors.TraceError: f:2:2: invalid UTF-8 (byte 0xff)
    """
    try:
        text = data.decode("utf-8")
    except UnicodeDecodeError as err:
        line = data.count(b"\n", 0, err.start) + 1
        start = data.rfind(b"\n", 0, err.start) + 1
        col = len(data[start:err.start].decode("utf-8", "replace")) + 1
        raise TraceError(path, line, col, f"invalid UTF-8 (byte 0x{data[err.start]:02x})") from None
    return text[1:] if text.startswith("\ufeff") else text


def read_text(path: str, what: str = "file") -> str:
    """The UTF-8 text of `path` (see `read_bytes` and `decode`)."""
    return decode(read_bytes(path, what), path)
