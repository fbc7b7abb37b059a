"""One line of a kernel log: its prefix taken off (`split_prefix`), then read by the grammar (`classify`).

Split from `lockcheck.readers.kernel_log` (which walks the reports) so that
the line-level reading -- the log prefix, `grammars/kernel_log.lark`, the
lock names with their wait types -- is one job in one module, used by the
report builder (`lockcheck.readers.log_builder`) and the walker alike.
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass, field
from typing import Any, Callable, Iterator, Optional

from lockcheck.util.grammar import grammar_text
from lockcheck.readers.splat import SplatLock

# -- the log prefix -------------------------------------------------------------------

_PREFIX = re.compile(
    r"(?:<\d> ?)?"
    # syslog / journal: `Mar  3 10:00:01 host kernel: ` (the day's blank may be lost: `Mar 3`), ISO dates,
    # or `kernel: ` alone (a journal excerpt cut after the host)
    r"(?:(?:(?:(?:[A-Z][a-z]{2} )?[A-Z][a-z]{2} {1,2}\d?\d \d\d:\d\d:\d\d(?: \d{4})?"
    r"|\d{4}-\d\d-\d\d[T ]\d\d:\d\d:\d\d(?:[.,]\d+)?(?:Z|[+-]\d\d:?\d\d)?)"
    r" \S+ )?kernel: )?"
    # a /dev/kmsg record as journalctl -o export or a syslog relay passes it: `LEVEL,SEQ,USEC,FLAGS;`
    r"(?:(?:[A-Z][a-z]{2} {1,2}\d?\d \d\d:\d\d:\d\d \S+ )?\d+,\d+,\d+,[-c+][^;]*;)?"
    # a second stamp before the kernel's (a test harness's own clock): the kernel's is the last
    r"(?:\[ *\d+\.\d+\] (?=\[ *\d+\.\d+\]))?"
    r"(?:\[ *(?P<ts>\d+\.\d+)\]|\[[A-Z][a-z]{2} [A-Z][a-z]{2} [ \d]\d \d\d:\d\d:\d\d \d{4}\])?"
    # journalctl -o short-monotonic: `[  149.123456] host kernel: ` (the stamp first, then the host)
    r"(?:(?<=\]) \S+ kernel:(?= ))?"
    # the caller id, right after the stamp or after a blank (a paste that spaced them)
    r"(?:(?<=\]) ?\[ *(?P<caller>[TC]\d+)\])?"
)


#: what a mail or a commit message puts before a pasted log: `> ` quote marks (nested too), and
#: blanks or tabs before a time stamp or printk level (a log indented as a block)
_QUOTE = re.compile(r"(?:[ \t]*>)+ ?")
_INDENTED_STAMP = re.compile(r"[ \t]+(?=<\d>|\[ *\d+\.\d+\])")


def unquote(line: str) -> str:
    """A log line as pasted into a mail or commit message, without what the paste added.

    `> ` quote marks go (lockdep starts no line with `>`), and so do blanks
    before a time stamp; a leading tab becomes eight blanks, as a terminal
    shows it (lockdep prints no tabs).  A line the paste left alone is
    returned as it is.

    >>> unquote("> >    -> #4 (&gpu->active_lock){+.+.}-{3:3}:")
    '   -> #4 (&gpu->active_lock){+.+.}-{3:3}:'
    >>> unquote("  [   19.690212] WARNING: possible circular locking dependency detected")
    '[   19.690212] WARNING: possible circular locking dependency detected'
    """
    if line[:1] in (">", " ", "\t"):
        match = _QUOTE.match(line)
        if match is not None:
            line = line[match.end():]
        match = _INDENTED_STAMP.match(line)
        if match is not None:
            line = line[match.end():]
    if line.startswith("\t"):
        body = line.lstrip("\t")
        line = " " * (8 * (len(line) - len(body))) + body
    return line


def split_prefix(line: str) -> tuple[Optional[float], Optional[str], str, int]:
    """(time stamp, caller id, the text printk was given, width of the prefix) of one log line.

    The line is `unquote`d first: a log pasted into a mail (`> `) or indented
    as a block reads as the log itself; the width is then that of the prefix
    after the quote marks.

    >>> split_prefix("[ 2718.379077][ T3699] WARNING: possible circular locking dependency detected")
    (2718.379077, 'T3699', 'WARNING: possible circular locking dependency detected', 23)
    >>> split_prefix("[    0.702481]  Possible unsafe locking scenario:")[2]
    ' Possible unsafe locking scenario:'
    >>> split_prefix("Jun 11 11:02:51 host kernel: sdcard/149325 is trying to acquire lock:")[2:]
    ('sdcard/149325 is trying to acquire lock:', 29)
    """
    line = unquote(line)
    match = _PREFIX.match(line)
    end = match.end()
    if not end:
        return None, None, line, 0
    if line.startswith(" ", end) and (match.group("ts") or match.group("caller") or line[end - 1] == "]"):
        end += 1
    ts = match.group("ts")
    return (float(ts) if ts else None), match.group("caller"), line[end:], end


#: where a title may start inside a line: lockdep's titles (4.14+ and the older `[ INFO: ` / `[ BUG: `)
_TITLE_AT = re.compile(r"(?:\[ )?(?:WARNING|BUG|INFO): ")
_DIGITS_OR_BLANKS = re.compile(r"(\d+)|( +)")


def junk_prefix(line: str, is_title: Callable[[str], bool],
                titles_at: "re.Pattern[str]" = _TITLE_AT) -> Optional["re.Pattern[str]"]:
    """The per-line prefix a serial console or a CI runner put before this title line, as a pattern.

    A console server or a CI log adds its own text before each line
    (`serial0: `, `[runner-7] console | `), which `split_prefix` does not know;
    seen before a report's title, the same shape is before every line of that
    report.  The pattern takes what precedes the title up to where
    `split_prefix` takes over (so a dmesg stamp after the junk stays the
    kernel's), with its digits and runs of blanks generalised (a host's own
    clock changes from line to line).  None when this line is no title behind
    junk (`is_title` says what a title is: the grammar, in the walker; `titles_at`
    where one may start: lockdep's WARN lines have no `WARNING: ` of their own).

    >>> pat = junk_prefix("ttyS0 12:00:01 | [  1.5] WARNING: possible recursive locking detected",
    ...                   lambda body: body.startswith("WARNING: possible"))
    >>> pat.match("ttyS0 12:00:02 | [  1.6] other").end()
    16
    """
    text = unquote(line)
    for match in titles_at.finditer(text):
        pos = match.start()
        if pos == 0 or not is_title(text[pos:]):
            continue
        k = next(k for k in range(pos + 1) if len(text) - len(split_prefix(text[k:])[2]) == pos)
        if not k:
            return None  # split_prefix reads the whole prefix: no junk
        junk = text[:k]
        pattern = "".join(re.escape(part) if part is not None else (r"\d+" if digits else " +")
                          for part, digits in _junk_parts(junk))
        return re.compile(pattern)
    return None


def _junk_parts(junk: str) -> Iterator[tuple[Optional[str], bool]]:
    """(literal, _) or (None, digits?) pieces of a junk prefix: digits and blank runs are classes."""
    last = 0
    for match in _DIGITS_OR_BLANKS.finditer(junk):
        if match.start() > last:
            yield junk[last:match.start()], False
        yield None, match.group(1) is not None
        last = match.end()
    if last < len(junk):
        yield junk[last:], False


# -- the grammar ------------------------------------------------------------------------


@functools.lru_cache(maxsize=None)
def _parser():
    from lark import Lark

    return Lark(grammar_text("kernel_log.lark"), parser="lalr", lexer="contextual", start=["line", "ident"],
                maybe_placeholders=False)


@dataclass
class Parsed:
    """One body line as the grammar reads it: the rule's name and its values."""

    tag: str
    indent: int = 0
    tokens: dict[str, list[str]] = field(default_factory=dict)
    locks: list[SplatLock] = field(default_factory=list)
    text: str = ""


#: tags of lines the grammar could not read, or read as a bare frame without indent
FOREIGN, FRAME = "foreign", "frame"


def classify(body: str, lineno: int = 0) -> Parsed:
    """What one body line (prefix taken off) is, by the grammar; `foreign` when it is none of its lines.

    >>> p = classify("ffff88805ffdce80 (&wg->static_identity.lock){++++}-{3:3}, at: wg_set_device+0xfb7/0x1490")
    >>> p.tag, p.locks[0].name, p.locks[0].usage, p.locks[0].waits, p.locks[0].at
    ('lock_line', '&wg->static_identity.lock', '++++', '3:3', 'wg_set_device+0xfb7/0x1490')
    >>> classify("-> #1 ((work_completion)(&peer->transmit_handshake_work)){+.+.}:").locks[0].name
    '(work_completion)(&peer->transmit_handshake_work)'
    >>> classify("loop5: detected capacity change from 0 to 4096").tag
    'foreign'
    """
    tag, indent, text, tokens, locks = _classify(body.rstrip())
    parsed = Parsed(tag, indent, {key: list(values) for key, values in tokens}, text=text)
    parsed.locks = [SplatLock(name, usage, instance, at, waits, lineno) for name, usage, instance, at, waits in locks]
    return parsed


@functools.lru_cache(maxsize=16384)
def _classify(text: str) -> tuple:
    """`classify` as plain immutable data, cached: a log repeats its frames and its reports."""
    from lark import Token, Tree
    from lark.exceptions import LarkError

    indent = len(text) - len(text.lstrip(" "))
    try:
        tree = _parser().parse(text, start="line")
    except LarkError:
        return (FRAME if indent else FOREIGN), indent, text.strip(), (), ()
    item = tree.children[-1]
    if item.data == "title":  # the title's own rule names the kind
        item = next(child for child in item.children if isinstance(child, Tree))
    tag = str(item.data)
    if tag == FRAME and not indent:
        tag = FOREIGN
    tokens: dict[str, list[str]] = {}
    for tok in item.scan_values(lambda v: isinstance(v, Token)):
        tokens.setdefault(tok.type, []).append(tok.value)
    locks = [_lockname(node) for node in item.iter_subtrees_topdown() if node.data == "lockname"]
    if locks and "SITE" in tokens and tag in ("lock_line", "held_entry"):
        locks[0][3] = strip_ip(tokens["SITE"][0])
    if locks and "INSTANCE" in tokens:
        locks[0][2] = tokens["INSTANCE"][0]
    return (tag, indent, text.strip(), tuple((key, tuple(values)) for key, values in tokens.items()),
            tuple(tuple(lock) for lock in locks))


def _lockname(node: Any) -> list:
    """[class, usage, instance, site, waits] of a `lockname` subtree (instance and site filled later)."""
    values = {tok.type: tok.value for tok in node.children if hasattr(tok, "type")}
    waits = values.get("WAITS")
    return [values["CLASS"], values["USAGE"], None, None, waits[2:-1] if waits else None]


_IP_SYM = re.compile(r"^\[<[0-9a-fA-Fx]+>\] (?:\? )?")


def strip_ip(site: str) -> str:
    """`[<ffffffff8115fc46>] vm_mmap_pgoff+0x66/0xb0` -> `vm_mmap_pgoff+0x66/0xb0` (print_ip_sym)."""
    return _IP_SYM.sub("", site.strip())


def kernel_ident(body: str) -> str:
    """The `print_kernel_ident()` line as printed (release, `#N`, taint), checked by the grammar's `ident`."""
    from lark.exceptions import LarkError

    text = body.strip()
    try:
        _parser().parse(text, start="ident")
    except LarkError:
        pass
    return text
