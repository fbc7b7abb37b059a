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
- `html_text(text)`: for the HTML report, in element content and quoted
  attributes alike: shown as `visible` shows it (a browser renders bidi
  controls and zero-width characters as silently as a terminal), then `&`,
  `<`, `>`, `"` and `'` as character references, so no name can open a tag
  or leave an attribute.
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


# -- DOT ---------------------------------------------------------------------------------


def dot_string(text: str) -> str:
    """`text` as a DOT quoted string (`"..."`), shown as `visible` shows it.

    Inside a DOT string `\\"` is a quote, and Graphviz reads a label's
    backslash escapes (`\\n`, `\\l`, `\\N`, `\\\\`): every backslash is
    doubled and every quote escaped, so no name or path can close the
    string (a crafted path once added nodes) or turn into a label escape.
    """
    return '"' + _dot_body(text) + '"'


def dot_lines(parts: "list[str]") -> str:
    """A DOT label of several lines: each part escaped as by `dot_string`, joined by `\\n`."""
    return '"' + "\\n".join(_dot_body(part) for part in parts) + '"'


def _dot_body(text: str) -> str:
    return visible(text).replace("\\", "\\\\").replace('"', '\\"')


# -- GraphML -------------------------------------------------------------------------------


def xml_text(text: str) -> str:
    """`text` with what XML cannot carry as itself written as a backslash escape (`xml_untext` reads it
    back): controls (XML 1.0 forbids most of them, and an attribute value's tab, newline and carriage
    return become spaces when read), lone surrogates, U+FFFE and U+FFFF; a backslash is doubled."""
    if text.isprintable() and "\\" not in text:
        return text
    return "".join(_xml_char(ch) for ch in text)


def _xml_char(ch: str) -> str:
    if ch == "\\":
        return "\\\\"
    code = ord(ch)
    if code < 0x20 or code == 0x7F or 0x80 <= code < 0xA0 or 0xD800 <= code < 0xE000 or code in (0xFFFE, 0xFFFF):
        return f"\\u{code:04x}"
    return ch


def xml_untext(text: str) -> str:
    """The text `xml_text` wrote: `\\\\` is a backslash, `\\uXXXX` a character; anything else as is."""
    if "\\" not in text:
        return text
    out = []
    i = 0
    while i < len(text):
        ch = text[i]
        if ch == "\\" and text[i + 1:i + 2] == "\\":
            out.append("\\")
            i += 2
        elif ch == "\\" and text[i + 1:i + 2] == "u" and _is_hex(text[i + 2:i + 6]):
            out.append(chr(int(text[i + 2:i + 6], 16)))
            i += 6
        else:
            out.append(ch)
            i += 1
    return "".join(out)


def _is_hex(text: str) -> bool:
    return len(text) == 4 and all(c in "0123456789abcdefABCDEF" for c in text)


def html_text(text: str) -> str:
    """`text` for HTML content or a quoted attribute value: what a browser shows is `visible(text)`.

    >>> html_text('<b onclick="x">&\\u202e')
    '&lt;b onclick=&quot;x&quot;&gt;&amp;\\\\u202e'
    """
    shown = visible(text)
    if not any(ch in _HTML_SPECIAL for ch in shown):
        return shown
    return "".join(_HTML_SPECIAL.get(ch, ch) for ch in shown)


_HTML_SPECIAL = {"&": "&amp;", "<": "&lt;", ">": "&gt;", '"': "&quot;", "'": "&#x27;"}
