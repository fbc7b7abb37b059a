"""`perf script` output of the lock tracepoints (`perf record -e 'lock:*'`).

The line format is defined by `grammars/perf.lark`: the default layout

    bash  1234 [002]   123.456789: lock:lock_acquire: 0xffff88810a2b3c40 &mm->mmap_lock

and `-F` field lists (any of comm, tid or pid/tid, cpu, time; then the event
and its trace fields).  Events are read exactly as the ftrace reader reads
its lines (`lockcheck.readers.ftrace`: `try `/`read ` and the read-mode
policy, instances as `0x` addresses, nameless lines resolved by address,
other events skipped and counted in `ReaderStats`), with these differences:

- the task key is the tid (the pid of `pid/tid` only names the process),
  or the comm when `-F` has no tid; pid 0 is per CPU as in ftrace;
- perf prints no irq flags, so no irq context events: every lock event is
  seen as process context (a known limit: handler locks nest under the
  interrupted task's locks; prefer ftrace captures for irq-heavy code), and
  no irq usage is inferred (`IRQ_STATE = False`: a lock that another trace
  saw in a handler is not "inconsistent" because perf could not say);
- there is no fast scanner: perf input is parsed by the grammar (LALR,
  about 10k lines/s; perf captures of the lock events are small next to
  ftrace's).
"""

from __future__ import annotations

import functools
from typing import Iterable, Iterator, Optional

from lockcheck.errors import TraceError
from lockcheck.events import Event
from lockcheck.util.grammar import grammar_text
from lockcheck.readers.ftrace import FtraceReader, ReaderStats, ReadPolicy, _describe

NAME = "perf"
#: captures start mid-flight; parse() takes stats= (see lockcheck.readers)
CAPTURE = True
TAKES_STATS = True
#: perf script prints no irq flags: nothing tells a handler's lock from a task's
IRQ_STATE = False

_TERMINALS = {"TASK_ID": "a tid or pid/tid", "EVENT_NAME": "an event (system:name)", "ACQUIRE": "lock:lock_acquire"}


@functools.lru_cache(maxsize=None)
def _parser():
    from lark import Lark

    return Lark(grammar_text("perf.lark"), parser="lalr", lexer="contextual", maybe_placeholders=False)


def scan_slow(line: str, file: str = "<trace>", lineno: int = 0) -> tuple:
    """A line as the grammar reads it, in the ftrace reader's record shape.

    `((comm, tid, cpu), None, time, (event, address, trylock, read, name))`:
    absent fields are None; lock events are named without their `lock:`
    system (`lock_acquire`), other events keep it (`sched:sched_switch`).
    """
    from lark import Token
    from lark.exceptions import UnexpectedCharacters, UnexpectedInput, UnexpectedToken

    try:
        tree = _parser().parse(line)
    except UnexpectedCharacters as exc:
        expected = _describe(_TERMINALS.get(name, name) for name in (exc.allowed or ()))
        raise TraceError(file, lineno, exc.column, f"unexpected {line[exc.pos_in_stream]!r}; expected {expected}",
                         source=line) from None
    except UnexpectedToken as exc:
        expected = _describe(_TERMINALS.get(name, name) for name in exc.expected)
        if exc.token.type == "$END":
            column, what = len(line) + 1, "end of line"
        else:
            column, what = exc.column, repr(str(exc.token)[:20])
        raise TraceError(file, lineno, column, f"unexpected {what}; expected {expected}", source=line) from None
    except UnexpectedInput as exc:  # pragma: no cover
        raise TraceError(file, lineno, getattr(exc, "column", None), str(exc).splitlines()[0], source=line) from None
    sample = tree.children[0]
    fields = {tok.type: tok.value for tok in sample.children if isinstance(tok, Token)}
    task_id = fields.get("TASK_ID")
    tid = task_id.rpartition("/")[2] if task_id is not None else None
    cpu = fields["CPU"][1:-1] if "CPU" in fields else None
    head = (fields.get("COMM"), tid, cpu)
    event = sample.children[-1].children[0]
    if event.data == "other_event":
        return (head, None, fields.get("TIMESTAMP"), (event.children[0].value, None, False, False, None))
    tokens = {tok.type: tok.value for tok in event.children if isinstance(tok, Token)}
    for sub in event.children:
        if not isinstance(sub, Token):  # acquire_flags
            tokens.update((tok.type, tok.value) for tok in sub.children)
    name = (tokens.get("ACQUIRE") or tokens["LOCK_OP"]).partition(":")[2]
    return (head, None, fields.get("TIMESTAMP"),
            (name, tokens["ADDRESS"], "TRY" in tokens, "READ" in tokens, tokens.get("NAME", "")))


def _no_fast_path(line: str) -> None:
    return None


class PerfReader(FtraceReader):
    """The ftrace reader's event logic over perf script lines (see the module docstring)."""

    scan = staticmethod(_no_fast_path)
    scan_slow = staticmethod(scan_slow)


#: parse() takes contention= (see the ftrace reader)
TAKES_CONTENTION = True


def parse(lines: Iterable[str], file: str = "<trace>", stats: Optional[ReaderStats] = None,
          read_policy: Optional[ReadPolicy] = None, contention: bool = False) -> Iterator[Event]:
    """Events from `perf script` lines (the format-module entry)."""
    return PerfReader(file, read_policy, stats, contention).parse(lines)


def sniff(lines: list[str]) -> bool:
    """The first non-blank, non-comment line is a perf sample of a `lock:` event."""
    for line in lines:
        text = line.strip()
        if not text or text.startswith("#"):
            continue
        try:
            record = scan_slow(line)
        except TraceError:
            return False
        return record[3][0].startswith("lock") or record[3][1] is not None
    return False
