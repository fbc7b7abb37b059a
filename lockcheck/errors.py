"""Errors that end a run with exit status 2 and one `FILE:LINE:COL: message` line.

Readers raise `TraceError` for anything they cannot read; the CLI turns it
into the contract's error line.  Nothing else may escape as a traceback.
"""

from __future__ import annotations

from typing import Optional


class LockcheckError(Exception):
    """Base of every error the CLI reports as exit status 2."""

    def format(self) -> str:
        return str(self)


class TraceError(LockcheckError):
    """Malformed or unreadable input, with its position when one is known.

    `source` is the offending line's text (for the caret display pyflakes
    uses); column is 1-based.
    """

    def __init__(self, file: str, line: Optional[int], col: Optional[int], message: str,
                 source: Optional[str] = None) -> None:
        super().__init__(message)
        self.file = file
        self.line = line
        self.col = col
        self.message = message
        self.source = source

    def format(self) -> str:
        where = self.file
        if self.line is not None:
            where += f":{self.line}"
            if self.col is not None:
                where += f":{self.col}"
        return f"{where}: {self.message}"

    def __str__(self) -> str:
        return self.format()


class UsageError(LockcheckError):
    """A bad command line or option value."""
