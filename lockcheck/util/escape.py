"""Names as they may be shown: the one place that decides how text from a trace is printed.

Lock, task and file names come from traces, and anyone can write a trace.
Printed raw, a name holding a newline forges report lines, an escape
sequence (`\\x1b[2J`, OSC 8 links, `\\x1b]0;title\\x07`) drives the reader's
terminal, a bidi control (`\\u202e`) reverses what is shown, and in a GitHub
log a line that starts with `::` is a workflow command.  Every renderer
passes what it prints through these functions:

- `visible(text)`: for text and terminal output (the kernel-layout report,
  diff and stat tables, notes, error lines): every character Python does
  not call printable -- controls, newlines, tabs, format characters such
  as bidi controls and zero-width joiners, separators other than the
  space, lone surrogates -- is shown as its escape (`\\n`, `\\x1b`,
  `\\u202e`, `\\udc80`).  Printable text, any script, is left alone.
- `workflow_data` / `workflow_property`: GitHub workflow commands, escaped
  as the runner unescapes them (actions/toolkit `command.ts`: `%`, CR and
  LF in the message; also `:` and `,` in a property value).
- JSON and SARIF need nothing here: `json.dump` with its defaults escapes
  every control character and every non-ASCII character (`\\u202e`), and
  lockcheck writes it with `allow_nan=False` (strict JSON).

>>> visible("A\\n=====\\nWARNING: forged")
'A\\\\n=====\\\\nWARNING: forged'
>>> visible("&mm->mmap_lock")
'&mm->mmap_lock'
>>> visible("\\x1b]0;pwned\\x07 \\u202eevil")
'\\\\x1b]0;pwned\\\\x07 \\\\u202eevil'
"""

from __future__ import annotations

_SHORT = {"\t": "\\t", "\n": "\\n", "\r": "\\r"}


def visible(text: str) -> str:
    """`text` with every non-printable character shown as its Python escape."""
    if text.isprintable():
        return text
    return "".join(ch if ch.isprintable() else _escape(ch) for ch in text)


def _escape(ch: str) -> str:
    short = _SHORT.get(ch)
    if short is not None:
        return short
    code = ord(ch)
    if code < 0x100:
        return f"\\x{code:02x}"
    if code < 0x10000:
        return f"\\u{code:04x}"
    return f"\\U{code:08x}"


def workflow_data(text: str) -> str:
    """A GitHub workflow command's message (after `::`)."""
    return text.replace("%", "%25").replace("\r", "%0D").replace("\n", "%0A")


def workflow_property(text: str) -> str:
    """A GitHub workflow command's property value (`file=`, `title=`...)."""
    return workflow_data(text).replace(":", "%3A").replace(",", "%2C")
