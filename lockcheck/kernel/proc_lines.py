"""The common lines of /proc/lockdep and /proc/lockdep_chains read without the grammar.

Why: a boot's state is read line by line, and the LALR parser costs about
0.1 ms a line -- a third of checking a real 130k-event capture with its
state, and seconds for a large machine's dumps (tens of thousands of
classes, a chain file several times that).  Nearly every line is one of
four shapes (a class, a dependency, a chain's irq context, a chain's
class); each is one regular expression here, and the two titles are
known by heart.  Anything else -- damaged lines, numbers too long --
returns None and goes to the grammar (`grammars/lockdep_proc.lark`),
which reads it or reports the error with its column.  What this reads, it reads as the grammar does: the same rule
and terminal values (tests/test_kstate.py holds it to the grammar on
generated lines).
"""

from __future__ import annotations

import re
from typing import Optional

# the terminals of grammars/lockdep_proc.lark, as regular expressions
_KEY = r"([0-9a-fA-F]+)"
_INT = r"([0-9]{1,9})"  # (followed by a blank below: the grammar's `(?![0-9])`)
_NAME = r"(\S.*)"

_CLASS = re.compile(_KEY + r"(?: +OPS: *" + _INT + r")? +FD: *" + _INT + r" +BD: *" + _INT + r" +([.+?-]+): +" + _NAME)
_EDGE = re.compile(r" +-> +\[" + _KEY + r"\] +" + _NAME)
_CONTEXT = re.compile(r"irq_context: +([0-9]{1,9}|(?:hardirq|softirq)(?:\|(?:hardirq|softirq))*)")
_TITLES = frozenset({"all lock classes:", "all lock chains:"})
_ENTRY = re.compile(r"\[" + _KEY + r"\] +" + _NAME)


def scan(line: str) -> Optional[tuple[str, dict[str, list[str]]]]:
    """`(rule, {TERMINAL: [values]})` of a common line (stripped of its end), as the grammar reads
    it; None: not one of the four common shapes, the grammar's to read."""
    first = line[:1]
    if line in _TITLES:  # (the grammar's parser, built for a title alone, costs more than the lines)
        return "title", {"TITLE": [line]}
    if first == "[":
        match = _ENTRY.fullmatch(line)
        return ("chain_entry", {"KEY": [match[1]], "NAME": [match[2]]}) if match else None
    if first == " ":
        match = _EDGE.fullmatch(line)
        return ("edge_line", {"KEY": [match[1]], "NAME": [match[2]]}) if match else None
    if first == "i":
        match = _CONTEXT.fullmatch(line)
        return ("context_line", {"CONTEXT": [match[1]]}) if match else None
    match = _CLASS.fullmatch(line)
    if match is None:
        return None
    key, ops, forward, backward, usage, name = match.groups()
    ints = [forward, backward] if ops is None else [ops, forward, backward]
    return "class_line", {"KEY": [key], "INT": ints, "USAGE": [usage], "NAME": [name]}
