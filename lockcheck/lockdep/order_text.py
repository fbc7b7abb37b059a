"""The text of an order or annotation file (`lockcheck.lockdep.order`) as its statements.

Apart from `order` so that lark is imported only when the grammar is needed: a file of
one-class rules alone -- the built-in `kernel.annotations` every capture check reads -- is read by
`_one_class_rules` without it (building the parser and importing lark cost 0.1-0.15 s of each
such run).
"""

from __future__ import annotations

import functools
import re
from dataclasses import dataclass
from typing import TYPE_CHECKING, Optional

from lockcheck.errors import TraceError
from lockcheck.util.grammar import grammar_text

if TYPE_CHECKING:
    from lark import Lark, Token
    from lark.exceptions import UnexpectedInput


@dataclass(frozen=True)
class Rule:
    """One annotation line: `kind` (`nest-under`, `subclass-by-address`, `recursive-read`, `no-check`,
    `no-check-like`), its classes, line."""

    kind: str
    classes: tuple[str, ...]
    line: int


def source_line(text: str, line: int) -> Optional[str]:
    """Line LINE (1-based) of TEXT, for an error to quote; None: no such line."""
    lines = text.splitlines()
    return lines[line - 1] if 0 < line <= len(lines) else None


def statements(text: str, file: str) -> list:
    """The (kind, line, payload) statements of TEXT (ending in a newline), or TraceError."""
    found = _one_class_rules(text)
    if found is not None:
        return found
    from lark.exceptions import UnexpectedInput

    try:
        return _parser().parse(text)
    except UnexpectedInput as err:
        raise TraceError(file, err.line if err.line > 0 else None, err.column if err.column > 0 else None,
                         _syntax_message(err), source=source_line(text, err.line)) from None


class _StatementRules:
    """Trees -> (kind, line, payload) tuples; names resolved in `order._build` (a lark `Transformer`
    once `_parser` mixes it in: lark is imported only then)."""

    def name(self, token: Token) -> Token:
        from lark import Token

        if token.type == "QUOTED":
            text = token[1:-1].replace('\\"', '"').replace("\\\\", "\\")
            return Token("NAME", text, line=token.line, column=token.column)
        return token

    def members(self, *names: Token) -> list[Token]:
        return list(names)

    def order(self, *sides: list) -> tuple:
        return ("order", sides[0][0].line, list(sides))

    def group(self, name: Token, members: list) -> tuple:
        return ("group", name.line, (name, members))

    def pseudo(self, members: list) -> tuple:
        return ("pseudo", members[0].line, members)

    def nestable(self, name: Token) -> tuple:
        return ("nestable", name.line, name)

    def nest_under(self, name: Token, parent: Token) -> tuple:
        return ("rule", name.line, Rule("nest-under", (str(name), str(parent)), name.line))

    def subclass_order(self, name: Token) -> tuple:
        return ("rule", name.line, Rule("subclass-by-address", (str(name),), name.line))

    def recursive_read(self, name: Token) -> tuple:
        return ("rule", name.line, Rule("recursive-read", (str(name),), name.line))

    def no_check(self, name: Token) -> tuple:
        return ("rule", name.line, Rule("no-check", (str(name),), name.line))

    def no_check_like(self, name: Token) -> tuple:
        return ("rule", name.line, Rule("no-check-like", (str(name),), name.line))

    def start(self, *statements: tuple) -> list:
        return list(statements)


@functools.lru_cache(maxsize=None)
def _parser() -> Lark:
    """The order file's parser, which applies `_StatementRules` (as a lark Transformer) as it parses: no tree of the whole
    file is built (a declared chain of 20,000 classes made one of ~130 MB)."""
    from lark import Lark, Transformer, v_args

    # (the methods copied into the class itself: v_args decorates a class's own methods only)
    methods = {name: value for name, value in vars(_StatementRules).items() if callable(value)}
    transformer = v_args(inline=True)(type("_ToStatements", (Transformer,), methods))()
    return Lark(grammar_text("annotations.lark"), parser="lalr", maybe_placeholders=False, transformer=transformer)


#: a one-class rule line as the grammar reads it: `no-check [like] C`, `recursive-read C`, a comment after
#: (a bare name taken whole, as the lexer takes it: `a#b` is a name, not `a` and a comment)
_ONE_CLASS_RULE = re.compile(r'[ \t]*(no-check|recursive-read)[ \t]+(?:(like)[ \t]+)?'
                             r'([^\s<,="#][^\s<,="]*(?![^\s<,="])|"(?:[^"\\\n]|\\["\\])*")[ \t]*(?:#[^\n]*)?')
#: the grammar's keywords: a class spelled like one is left to the grammar
_KEYWORDS = frozenset({"group", "pseudo", "nestable", "by", "address", "nest", "under", "subclass", "order",
                       "recursive-read", "no-check", "like"})
_RULE_KINDS = {("no-check", None): "no-check", ("no-check", "like"): "no-check-like",
               ("recursive-read", None): "recursive-read"}


def _one_class_rules(text: str) -> Optional[list]:
    """The statements of a file of one-class rules, comments and blank lines only (the built-in
    `kernel.annotations`), as the grammar makes them; None: any other line (the grammar reads it).

    Every capture check reads the built-in file, and building the grammar's parser for its
    handful of `no-check` lines cost ~0.1 s of each run."""
    statements = []
    for lineno, line in enumerate(text.split("\n"), 1):
        if line.endswith("\r"):
            line = line[:-1]
        bare = line.lstrip(" \t")
        if not bare or bare[0] == "#":
            if "\r" in line:
                return None
            continue
        match = _ONE_CLASS_RULE.fullmatch(line)
        if match is None:
            return None
        op, like, name = match.groups()
        if name[0] == '"':
            name = name[1:-1].replace('\\"', '"').replace("\\\\", "\\")
        elif name in _KEYWORDS:
            return None
        kind = _RULE_KINDS.get((op, like))
        if kind is None:
            return None
        statements.append(("rule", lineno, Rule(kind, (name,), lineno)))
    return statements


def _syntax_message(err: UnexpectedInput) -> str:
    from lark.exceptions import UnexpectedCharacters, UnexpectedEOF, UnexpectedToken

    if isinstance(err, UnexpectedCharacters):
        return f"unexpected character {err.char!r}"
    if isinstance(err, UnexpectedEOF):
        return "unexpected end of file"
    if isinstance(err, UnexpectedToken):
        found = "end of line" if err.token.type == "_NL" else repr(str(err.token))
        return f"unexpected {found}"
    return "syntax error"
