"""The lockcheck trace format (`.lt`): one lock event per line.

The syntax is `grammars/lockcheck.lark` (see docs/trace-format.md).
Lines are read by two parsers that must agree:

- `scan_fast`, one hand-written function, takes the shapes real traces are
  made of (`TASK acquire LOCK [mode] [flags] [key=value]`, `TASK release
  LOCK`, irq ops) with one `str.split` and a few dict look-ups, and returns
  None for anything it is not sure about: quotes, tabs, runs of blanks, and
  every line that would be an error;
- `parse_line`, the lark LALR parser built from the grammar, which reads
  every line and raises the precise `FILE:LINE:COL: message` error.

`tests/test_reader_differential.py` proves on generated lines that whenever
`scan_fast` answers, it answers what `parse_line` does.

`lt_write.format_event` writes an `Event` back as a `.lt` line (`lockcheck convert`,
the pytest plugin's recorder); `parse_line(format_event(e))` gives `e` back.
"""

from __future__ import annotations

import functools
import math
import re
import operator
from typing import Iterable, Iterator, NamedTuple, Optional

from typing import TYPE_CHECKING

from lockcheck.errors import TraceError
from lockcheck.events import (
    ACQUIRE, ALL_OPS, CONTENDED, IRQS_OFF, IRQS_ON, LOCK_OPS, LOST_EVENTS, MAX_CPU_DIGITS, MAX_SUBCLASS, MODES_BY_NAME, RELEASE, RUN, SOFTIRQS_OFF, SOFTIRQS_ON, WRITE, Event,
)
from lockcheck.readers import lockdep_keys as more
from lockcheck.readers.lt_text import blank_split, explain_quoted, field_at, field_start, suggest
from lockcheck.util.grammar import grammar_text

if TYPE_CHECKING:  # lark is imported when a line first needs the grammar (most traces never do)
    from lark import Lark, Token
    from lark.exceptions import UnexpectedInput

NAME = "lt"

#: the optional first line that identifies the format
HEADER = "#lockcheck-trace v1"

# -- the op table of the spec ----------------------------------------------------
#: op text -> the interned constant of lockcheck.events (the checker compares with `is`)
_OPS: dict[str, str] = {op: op for op in ALL_OPS}
#: the directive lines (`#lockcheck-run`, `#lockcheck-lost-events`) and their ops
DIRECTIVES: dict[str, str] = {"#lockcheck-run": RUN, "#lockcheck-lost-events": LOST_EVENTS}
_OPS.update({op: op for op in DIRECTIVES.values()})
_DIRECTIVE_NAMES = {op: mark for mark, op in DIRECTIVES.items()}

_FLAGS = ("try", "nocheck", *more.FLAGS)
_KEYS = ("subclass", "nest", "at", "ts", "cpu", "format", "from", *more.KEYS)
_ACQUIRE_ONLY = frozenset({*MODES_BY_NAME, *_FLAGS, "subclass", "nest"})
_SITE_OPS = frozenset({ACQUIRE, RELEASE, CONTENDED, IRQS_ON, IRQS_OFF, SOFTIRQS_ON, SOFTIRQS_OFF})


def _allowed(op: str) -> frozenset[str]:
    """The modes, flags and keys `op` accepts (the spec's table; ts/cpu on every event)."""
    if op == RUN:
        return frozenset({"format", "from"})
    names = {"ts", "cpu"}
    if op is ACQUIRE:
        names |= _ACQUIRE_ONLY
    if op in _SITE_OPS or op in more.OP_OPTIONS:
        names.add("at")
    return frozenset(names | more.OP_OPTIONS.get(op, frozenset()))


#: op -> names of the options it accepts
_ALLOWED: dict[str, frozenset[str]] = {op: _allowed(op) for op in _OPS}
#: op text -> (op constant, whether a lock follows, options accepted): one look-up per line
#: (the ops of "The rest of lockdep" and their keys are the grammar's: rare lines, read with its checks)
_SHAPES: dict[str, tuple[str, bool, frozenset[str]]] = {
    op: (op, op in LOCK_OPS, _ALLOWED[op] - more.SLOW_OPTIONS) for op in ALL_OPS
    if op not in more.OP_OPTIONS or op is ACQUIRE or op == "hardirq-enter"}


# -- values shared by both parsers ---------------------------------------------
#: most characters a `ts=` value may have (a number float() reads that long is finite; the compiled
#: cores, lockcheck/engine/_grammar_limits.h, read it at import: the `.lt` core's stamps, and the `ts`
#: the JSON Lines translator writes, are read here)
#: (a `cpu=` value: at most events.MAX_CPU_DIGITS digits)
MAX_SECONDS_CHARS = 64


def _subclass(text: str) -> Optional[int]:
    """`subclass=` value: a decimal 0..MAX_SUBCLASS, else None."""
    if len(text) <= 2 and text.isascii() and text.isdigit():
        value = int(text)
        if value <= MAX_SUBCLASS:
            return value
    return None


def _cpu(text: str) -> Optional[int]:
    """`cpu=` value: a non-negative decimal integer of at most MAX_CPU_DIGITS digits, else None."""
    return int(text) if len(text) <= MAX_CPU_DIGITS and text.isascii() and text.isdigit() else None


def _seconds(text: str) -> Optional[float]:
    """`ts=` value: a finite decimal number of seconds (no `_`, `nan`, `inf`), else None."""
    if "_" in text or len(text) > MAX_SECONDS_CHARS:
        return None
    try:
        value = float(text)
    except ValueError:
        return None
    return value if math.isfinite(value) else None


# -- the fast path ----------------------------------------------------------------
def scan_fast(line: str, file: str = "<trace>", lineno: int = 0, fields: bool = False) -> Optional[Event]:
    """The event of a plainly written line, or None to let `parse_line` decide.

    With `fields`, the event's constructor arguments as a tuple instead
    (`Event(*tuple)` rebuilds it): what a reader process sends to the
    checking one, without building the object twice.

    Never raises and never guesses: any quote, tab, run of blanks, unknown
    word, repeated option or bad value sends the line to the grammar, which
    either reads it or reports the error with its column.  Kept as one
    function because every call costs on millions of lines.
    """
    if '"' in line or "\t" in line or "  " in line or line[0] == " " or line[-1] == " ":
        return None
    parts = line.split(" ")
    n = len(parts)
    if n < 2:
        return None
    shape = _SHAPES.get(parts[1])
    if shape is None or parts[0][0] == "#":
        return None
    op, takes_lock, allowed = shape
    lock = instance = None
    first = 2
    if takes_lock:
        if n < 3:
            return None
        lock, at_sign, instance = parts[2].partition("@")
        if not lock or "=" in lock:
            return None
        if not at_sign:
            instance = None
        elif not instance:
            return None
        if n == 3:  # a bare `TASK release LOCK`: half of every trace
            args = (parts[0], op, lock, instance, WRITE, False, 0, None, True, None, None, None, file, lineno)
            return args if fields else Event(*args)
        first = 3
    mode = subclass = nest = at = ts = cpu = None
    trylock = False
    check = True
    for word in parts[first:]:
        if "=" in word:
            key, _, value = word.partition("=")
            if not value or key not in allowed:
                return None
            if key == "at":
                if at is not None:
                    return None
                at = value
            elif key == "ts":
                if ts is not None:
                    return None
                ts = _seconds(value)
                if ts is None:
                    return None
            elif key == "cpu":
                if cpu is not None:
                    return None
                cpu = _cpu(value)
                if cpu is None:
                    return None
            elif key == "subclass":
                if subclass is not None:
                    return None
                subclass = _subclass(value)
                if subclass is None:
                    return None
            elif key == "nest":
                if nest is not None:
                    return None
                nest_class, at_sign, nest_instance = value.partition("@")
                if not nest_class or "=" in nest_class or (at_sign and not nest_instance):
                    return None
                nest = (nest_class, nest_instance if at_sign else None)
            else:
                return None
        elif word not in allowed:
            return None
        elif word == "try":
            if trylock:
                return None
            trylock = True
        elif word == "nocheck":
            if not check:
                return None
            check = False
        elif mode is None and word in MODES_BY_NAME:
            mode = MODES_BY_NAME[word]
        else:  # a second mode, or a key without `=`
            return None
    args = (parts[0], op, lock, instance, WRITE if mode is None else mode, trylock,
            0 if subclass is None else subclass, nest, check, at, ts, cpu, file, lineno)
    return args if fields else Event(*args)


# -- the grammar path --------------------------------------------------------------
class _Option(NamedTuple):
    """One mode, flag or KEY=VALUE as written, with the columns errors point at."""

    name: str  #: `read`, `try`, `nest`, `at`, `subclass`... or a misspelt key
    value: object  #: the mode/flag word, the value text, or a (class, instance) pair
    col: int
    value_col: int


class _Line(NamedTuple):
    """A parsed event line before the op table is checked."""

    task: str
    op: Token
    lock: Optional[tuple[str, Optional[str]]]
    options: list[_Option]
    #: set-class's CLASS (a lock field, its column)
    target: Optional[tuple] = None


def _unquote(text: str) -> str:
    """The value of a QUOTED token: strip the quotes, undo the `\\\\` and `\\"` escapes."""
    return "\\".join(part.replace('\\"', '"') for part in text[1:-1].split("\\\\"))


class _LineRules:
    """Trees of `lockcheck.lark` -> `_Line` (None for blank and comment lines): the methods of
    the grammar's `Transformer`, made one with lark's base class in `_parser` (lark is imported
    only there)."""

    def start(self, children: list) -> Optional[_Line]:
        return children[0] if children and isinstance(children[0], _Line) else None

    def lock_event(self, children: list) -> _Line:
        task, op, lock, *options = children
        return _Line(str(task), op, lock, options)

    def class_event(self, children: list) -> _Line:
        task, op, lock, target, *options = children
        return _Line(str(task), op, lock, options, target)

    def target(self, children: list) -> tuple:
        return self.lock(children), children[0].column

    def plain_event(self, children: list) -> _Line:
        task, op, *options = children
        return _Line(str(task), op, None, options)

    def directive(self, children: list) -> _Line:
        from lark import Token

        mark, *options = children
        return _Line("", Token(mark.type, DIRECTIVES[str(mark)]), None, options)

    def lock(self, children: list) -> tuple[str, Optional[str]]:
        name = children[0]
        cls = _unquote(name) if name.type == "QUOTED" else str(name)
        return cls, (str(children[1]) if len(children) > 1 else None)

    def mode(self, children: list) -> _Option:
        (word,) = children
        return _Option(str(word), str(word), word.column, word.column)

    def flag(self, children: list) -> _Option:
        (word,) = children
        return _Option(str(word), str(word), word.column, word.column)

    def nest(self, children: list) -> _Option:
        key, lock = children
        return _Option("nest", lock, key.column, key.column + len("nest="))

    def site(self, children: list) -> _Option:
        key, value = children
        text = _unquote(value) if value.type == "QUOTED" else str(value)
        return _Option(str(key), text, key.column, value.column)

    def pair(self, children: list) -> _Option:
        key, value = children
        return _Option(str(key), str(value), key.column, value.column)


@functools.lru_cache(maxsize=None)
def _parser() -> Lark:
    """The LALR parser of `lockcheck.lark`, built once (a few ms) on first use."""
    from lark import Lark, Transformer

    transformer = type("_LineTransformer", (_LineRules, Transformer), {})()
    return Lark(grammar_text("lockcheck.lark"), parser="lalr", lexer="contextual",
                transformer=transformer, maybe_placeholders=False)


def parse_line(line: str, file: str = "<trace>", lineno: int = 0) -> Optional[Event]:
    """The event of one line by the grammar (None: blank or comment), or TraceError."""
    from lark.exceptions import UnexpectedInput

    try:
        parsed = _parser().parse(line)
    except UnexpectedInput as err:
        col, message = _explain(line, err)
        raise TraceError(file, lineno, col, message, line) from None
    if parsed is None:
        return None
    try:
        return _build(parsed, file, lineno)
    except _Invalid as err:
        raise TraceError(file, lineno, err.col, err.message, line) from None


class _Invalid(Exception):
    """A semantic error of one line, at a column; `parse_line` adds file and line."""

    def __init__(self, col: int, message: str) -> None:
        super().__init__(message)
        self.col = col
        self.message = message


def _build(parsed: _Line, file: str, lineno: int) -> Event:
    """Check the options of a parsed line against the op table, and make its Event."""
    op = _OPS[str(parsed.op)]
    lock, instance = parsed.lock if parsed.lock is not None else (None, None)
    fields: dict[str, object] = {}
    for option in parsed.options:
        _check_option(op, option, fields)
        fields[_slot(option.name)] = _option_value(option)
    if op is RUN:
        return _run_event(fields, file, lineno)
    if op is LOST_EVENTS and "cpu" not in fields:
        raise _Invalid(len("#lockcheck-lost-events") + 1, "missing 'cpu=': the CPU that lost events")
    props = _props(op, parsed, fields)
    return Event(
        parsed.task, op, lock, instance,
        mode=MODES_BY_NAME[fields.get("mode", "write")], trylock="try" in fields,
        subclass=fields.get("subclass", 0), nest=fields.get("nest"), check="nocheck" not in fields,
        at=fields.get("at"), ts=fields.get("ts"), cpu=fields.get("cpu"), file=file, line=lineno, props=props,
    )


def _props(op: str, parsed: _Line, fields: dict[str, object]) -> Optional[dict]:
    """The `props` of an event of "The rest of lockdep" (`lockcheck.readers.lockdep_keys`)."""
    if op == "set-subclass" and "subclass" not in fields:
        raise _Invalid(len(parsed.task) + len(op) + 3, "missing 'subclass=': set-subclass gives the new one")
    props = more.class_props({key: fields[key] for key in more.CLASS_KEYS if key in fields}) or {}
    if "threaded" in fields:
        props["threaded"] = True
    if op == "assert-held" and "mode" in fields:
        props["held"] = fields.pop("mode")
    if parsed.target is not None:
        (name, instance), col = parsed.target
        if instance is not None:
            raise _Invalid(col, "set-class takes a class, not a lock instance")
        props["class"] = name
    return props or None


def _run_event(fields: dict[str, object], file: str, lineno: int) -> Event:
    """The RUN event of a `#lockcheck-run` line: its format's rules for a file start."""
    from lockcheck.readers import formats, run_rules

    fmt = fields.get("format")
    rules = run_rules(formats()[fmt]) if fmt is not None else {"capture": False, "irq_state": True}
    source = fields.get("from")
    return Event("", RUN, source, at=fmt, trylock=rules["capture"],  # type: ignore[arg-type]
                 check=rules["irq_state"], file=file, line=lineno)


def _slot(name: str) -> str:
    """The field an option sets: all modes share one, so `read rread` is a repeat."""
    return "mode" if name in MODES_BY_NAME else name


def _check_option(op: str, option: _Option, seen: dict[str, object]) -> None:
    """Reject an unknown key, an option `op` does not take, or a repeated one."""
    name = option.name
    if name not in MODES_BY_NAME and name not in _FLAGS and name not in _KEYS:
        raise _Invalid(option.col, f"unknown key '{clip(name)}'{suggest(name, _KEYS)}")
    if name not in _ALLOWED[op] and op in _DIRECTIVE_NAMES:
        takes = " and ".join(_spelled(key) for key in sorted(_ALLOWED[op]))
        raise _Invalid(option.col, f"{_DIRECTIVE_NAMES[op]} takes only {takes}")
    if name not in _ALLOWED[op]:
        raise _Invalid(option.col, f"{_spelled(name)} {_where_valid(name)}")
    slot = _slot(name)
    if slot in seen:
        what = "mode" if slot == "mode" else _spelled(name)
        raise _Invalid(option.col, f"{what} given twice")


def _spelled(name: str) -> str:
    """An option as written: `'nest='` for keys, `'try'` for words."""
    return f"'{name}='" if name in _KEYS else f"'{name}'"


def _where_valid(name: str) -> str:
    """Which ops take an option, for 'not valid here' messages."""
    ops = sorted(op for op in ALL_OPS if name in _ALLOWED[op])
    ops += [mark for mark, op in DIRECTIVES.items() if name in _ALLOWED[op]]
    return "is only valid on " + ", ".join(ops)


def clip(text: str, limit: int = 40) -> str:
    """`text` shortened for an error message (a 5000-digit value is not worth repeating)."""
    return text if len(text) <= limit else text[:limit - 3] + "..."


def _option_value(option: _Option) -> object:
    """The Event value of a checked option; bad numbers raise `_Invalid` at the value."""
    name = option.name
    if name in MODES_BY_NAME:
        return option.value
    if name in _FLAGS:
        return True
    if name == "subclass":
        return _checked(_subclass(option.value), option, f"subclass must be 0..{MAX_SUBCLASS}")
    if name == "cpu":
        return _checked(_cpu(option.value), option, f"cpu must be a non-negative integer below 10**{MAX_CPU_DIGITS}")
    if name == "ts":
        return _checked(_seconds(option.value), option, "ts must be a number of seconds")
    if name in more.CLASS_KEYS:
        message = more.check_value(name, option.value)
        if message is not None:
            raise _Invalid(option.value_col, f"{message}, not '{clip(str(option.value))}'")
        return option.value
    if name == "format":
        from lockcheck.readers import formats

        known = formats()
        if option.value not in known:
            raise _Invalid(option.value_col, f"unknown format '{option.value}' (one of {', '.join(known)})")
    return option.value  # nest (a lock pair), at and from (text), format (a format name)


def _checked(value: object, option: _Option, message: str) -> object:
    if value is None:
        raise _Invalid(option.value_col, f"{message}, not '{clip(str(option.value))}'")
    return value


# -- messages for lines the grammar rejects -------------------------------------------
def _explain(line: str, err: UnexpectedInput) -> tuple[int, str]:
    """Column and message for a syntax error, worded for the field it is in.

    lark reports where it stopped; the user wants to know which field is
    wrong and why ("unknown op 'aquire' (did you mean 'acquire'?)").
    """
    from lark.exceptions import UnexpectedEOF, UnexpectedToken

    at_end = isinstance(err, UnexpectedEOF) or (isinstance(err, UnexpectedToken) and err.token.type == "$END")
    col = len(line) + 1 if at_end else err.column
    fields = blank_split(line)
    if fields and fields[0] in DIRECTIVES:  # only its options can be wrong
        return _explain_option(line, field_start(line, col), col)
    if at_end and len(fields) < 2:
        return col, "missing op"
    if at_end and len(fields) == 2 and fields[1] in LOCK_OPS:
        return col, "missing lock"
    if at_end and len(fields) == 3 and fields[1] == "set-class":
        return col, "missing class: set-class gives the lock's new one"
    if not at_end and col >= 2 and line[col - 2] == '"' and line[col - 1] not in " \t":
        return col, "expected a blank after the quoted string"
    start = field_start(line, col)
    field = field_at(line, start)
    index = len(blank_split(line[:start - 1]))
    if index == 1:
        return start, f"unknown op '{clip(field)}'{suggest(field, sorted(ALL_OPS))}"
    op = fields[1]
    if (index == 2 and op in LOCK_OPS) or (index == 3 and op == "set-class"):
        return _explain_lock(line, start, col)
    if index == 2 and "=" not in field and field not in _ALLOWED.get(op, ()):
        return start, f"'{op}' takes no lock"
    return _explain_option(line, start, col)


def _explain_lock(line: str, start: int, col: int) -> tuple[int, str]:
    """A bad LOCK field (`CLASS[@INSTANCE]`) starting at column `start`."""
    field = field_at(line, start)
    if field.startswith('"'):
        return explain_quoted(line, start)
    if field.startswith("@"):
        return start, "missing lock class before '@'"
    name = field.partition("@")[0]
    if "=" in name:
        return start, f"missing lock (found '{clip(field)}'; quote a class name that contains '=')"
    if field.endswith("@"):
        return col, "missing instance after '@'"
    return col, f"unexpected character {line[col - 1]!r} in lock '{clip(field)}'"


def _explain_option(line: str, start: int, col: int) -> tuple[int, str]:
    """A bad mode, flag or KEY=VALUE field starting at column `start`."""
    field = field_at(line, start)
    key, eq, value = field.partition("=")
    if field.startswith('"'):
        return start, "unexpected quoted string (only a lock class or an 'at=' site is quoted)"
    if not eq and field in _KEYS:
        return start + len(field), f"missing '=' and value after '{clip(field)}'"
    if not eq:
        choices = [*MODES_BY_NAME, *_FLAGS, *_KEYS]
        return start, f"unknown option '{clip(field)}'{suggest(field, choices)}"
    if not key:
        return start, "missing key before '='"
    if key in MODES_BY_NAME or key in _FLAGS:
        return start, f"'{clip(key)}' takes no value"
    if key not in _KEYS:
        return start, f"unknown key '{clip(key)}'{suggest(key, _KEYS)}"
    value_col = start + len(key) + 1
    if not value:
        what = {"nest": "lock", "at": "site", "from": "source"}.get(key, "value")
        return value_col, f"missing {what} after '{key}='"
    if key == "nest":
        return _explain_lock(line, value_col, col)
    if value.startswith('"') and key in ("at", "from"):
        return explain_quoted(line, value_col)
    if value.startswith('"'):
        return value_col, f"the value of '{key}=' cannot be quoted"
    return col, f"unexpected character {line[col - 1]!r} in '{key}=' value"


# -- the format module contract ------------------------------------------------------------
def sniff(lines: list[str]) -> bool:
    """A `.lt` trace has the header, or its first event line reads as `.lt`.

    Comment-only samples say no: ftrace output also starts with `#` lines.
    """
    for line in lines:
        if line.startswith("#lockcheck-trace"):
            return True
        if line.lstrip(" \t").startswith("#"):
            continue
        if not _may_be_event(line):
            return False  # (no grammar built to say no to another format's line)
        try:
            return (scan_fast(line) or parse_line(line)) is not None
        except TraceError:
            return False
    return False


#: blanks between a line's words, as the grammar's `_WS`
_BLANKS = re.compile(r"[ \t]+")


def _may_be_event(line: str) -> bool:
    """Whether the grammar could read LINE (no comment) as an event: its second word is an op (sniffing
    another format's line, building the grammar's parser only to be told no took 0.1-0.25 s)."""
    words = _BLANKS.split(line.strip(" \t"), 2)
    return len(words) > 1 and words[1] in ALL_OPS


#: `parse(..., fields=True)` yields constructor tuples (see lockcheck.readers.parallel)
PARSES_FIELDS = True


def parse(lines: Iterable[str], file: str = "<trace>", fields: bool = False) -> Iterator[Event]:
    """Events of `.lt` lines, streamed: one line in memory at a time.

    Line endings (`\\n`, `\\r\\n`) are stripped here too, so an open text file
    can be passed directly.  With `fields`, each event comes as the tuple of
    its constructor arguments (`Event(*fields)` rebuilds it).
    """
    scan = scan_fast
    for lineno, line in enumerate(lines, 1):
        line = line.rstrip("\r\n")
        if not line or (line[0] in " \t" and not line.strip(" \t")):
            continue  # blank, or blanks and tabs only (the grammar's answer, at a thousand times the cost)
        if line[0] == "#":
            if not line.startswith(_DIRECTIVE_MARKS):
                header = more.header_event(line, file, lineno) if lineno == 1 else None
                if header is not None:
                    yield _FIELDS(header) if fields else header
                continue
            event = parse_line(line, file, lineno)
            if event is not None:
                yield _FIELDS(event) if fields else event
            continue
        event = scan(line, file, lineno, fields)
        if event is None:
            event = parse_line(line, file, lineno)
            if event is None:
                continue
            if fields:
                event = _FIELDS(event)
        yield event


_FIELDS = operator.attrgetter(*Event.__slots__)
_DIRECTIVE_MARKS = tuple(DIRECTIVES)
