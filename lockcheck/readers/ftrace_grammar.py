"""The ftrace line grammar (`grammars/ftrace.lark`) as the slow reading of a line: what the fast
scanner leaves, with the `FILE:LINE:COL: message` of a line that breaks it."""

from __future__ import annotations

import functools
from typing import Iterable

from lockcheck.errors import TraceError
from lockcheck.util.grammar import grammar_text


@functools.lru_cache(maxsize=None)
def _parser():
    from lark import Lark

    return Lark(grammar_text("ftrace.lark"), parser="lalr", lexer="contextual", maybe_placeholders=False)


_TERMINAL_NAMES = {
    "COMM": "a comm", "PID": "a pid", "TGID": "a (tgid)", "CPU": "a [cpu] column", "FLAGS": "irq flags",
    "TIMESTAMP": "a timestamp", "ADDRESS": "a lock address", "NAME": "a lock name", "TRY": "'try '",
    "READ": "'read '", "ACQUIRE": "lock_acquire", "LOCK_OP": "a lock event", "EVENT_NAME": "an event name",
    "COLON": "':'", "_SP": "a blank", "LOST_TEXT": "LOST EVENTS", "INT": "a number", "REST": "event text",
    "PREAMBLE": "a trace-cmd preamble line", "LSQB": "'['", "RSQB": "']'", "$END": "end of line",
    "PROBE_SITE": "a probe's (site)", "ARG_NAME": "an argument name", "ARG_VALUE": "an argument value",
    "EQUAL": "'='",
    "<END-OF-FILE>": "end of line", "MINUS": "'-'", "LOST_CPU": "'CPU:N [LOST EVENTS]'",
}


def _describe(expected: Iterable[str]) -> str:
    names = sorted({_TERMINAL_NAMES.get(name, name) for name in expected})
    return names[0] if len(names) == 1 else ", ".join(names[:-1]) + " or " + names[-1]


def scan_slow(line: str, file: str = "<trace>", lineno: int = 0) -> tuple:
    """A line as the grammar reads it: an event tuple (see `scan`), `("lost", cpu)` or `("preamble",)`.

    Raises `TraceError` with the column of the first character the grammar
    cannot take.
    """
    from lark import Token
    from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

    try:
        tree = _parser().parse(line)
    except UnexpectedCharacters as exc:
        message = f"unexpected {line[exc.pos_in_stream]!r}; expected {_describe(exc.allowed or ())}"
        raise TraceError(file, lineno, exc.column, message, source=line) from None
    except UnexpectedToken as exc:
        if exc.token.type == "$END":
            column, what = len(line) + 1, "end of line"
        else:
            text = str(exc.token)
            column, what = exc.column, repr(text if len(text) <= 20 else text[:17] + "...")
        raise TraceError(file, lineno, column, f"unexpected {what}; expected {_describe(exc.expected)}",
                         source=line) from None
    except UnexpectedInput as exc:  # pragma: no cover - other lark errors
        raise TraceError(file, lineno, getattr(exc, "column", None), str(exc).splitlines()[0], source=line) from None
    node = tree.children[0]
    if node.data == "lost_line":
        return ("lost", next(tok for tok in node.children if isinstance(tok, Token) and tok.type == "INT").value)
    if node.data == "preamble":
        return ("preamble",)
    fields = {tok.type: tok.value for tok in node.children if isinstance(tok, Token)}
    event = node.children[-1].children[0]
    head = (fields["COMM"], fields["PID"], fields["CPU"][1:-1])
    if event.data == "other_event":
        return (head, fields.get("FLAGS"), fields["TIMESTAMP"], (event.children[0].value, None, False, False, None))
    if event.data == "probe_event":
        name, site = event.children[0].value, event.children[1].value[1:-1]
        args = tuple((arg.children[0].value, arg.children[1].value) for arg in event.children[2:])
        return (head, fields.get("FLAGS"), fields["TIMESTAMP"], (name, None, False, False, None, site, args))
    tokens = {tok.type: tok.value for tok in event.children if isinstance(tok, Token)}
    for sub in event.children:
        if not isinstance(sub, Token):  # acquire_flags
            tokens.update((tok.type, tok.value) for tok in sub.children)
    name = tokens.get("ACQUIRE") or tokens["LOCK_OP"]
    return (head, fields.get("FLAGS"), fields["TIMESTAMP"],
            (name, tokens["ADDRESS"], "TRY" in tokens, "READ" in tokens, tokens.get("NAME", "")))
