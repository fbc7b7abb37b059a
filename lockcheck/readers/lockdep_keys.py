"""The keys and ops of "The rest of lockdep" (docs/trace-format.md), read alike by every format.

The `.lt` reader and the JSON Lines reader both take a class's wait types
(`wait=OUTER:INNER`), lock type (`type=`) and comparison (`cmp=`), and the
new ops' arguments, from here, so that `wait=3:3` in one and `"wait": "3:3"`
in the other are the same event.  What they make of them is the event's
`props` (`lockcheck.events.Event.props`); the checker reads that.
"""

from __future__ import annotations

from typing import Callable, Optional

from lockcheck import events as E

#: `enum lockdep_wait_type` with CONFIG_PROVE_RAW_LOCK_NESTING, by the names the spec gives them
WAIT_NAMES = {"free": 1, "spin": 2, "config": 3, "sleep": 4}
#: the largest wait type, LD_WAIT_SLEEP (LD_WAIT_MAX is not one)
MAX_WAIT_TYPE = 4
#: the number of each name (what reports print after a class name: `-{3:3}`)
WAIT_NUMBERS = {str(n): n for n in range(MAX_WAIT_TYPE + 1)}
#: `enum lockdep_lock_type`: LD_LOCK_NORMAL, LD_LOCK_PERCPU, LD_LOCK_WAIT_OVERRIDE
LOCK_TYPES = {"normal": 0, "percpu": 1, "override": 2}
LOCK_TYPE_NAMES = {n: name for name, n in LOCK_TYPES.items()}
#: `cmp=` values: the class compares instances (`lock_set_cmp_fn`)
CMP_VALUES = ("instance",)

#: the class keys an acquisition (and a sync) may carry
CLASS_KEYS = ("wait", "type", "cmp")
#: every key of this page (`.lt` KEY=VALUE words), and the flag words
KEYS = CLASS_KEYS
FLAGS = ("threaded",)


def wait_type(text: str) -> Optional[int]:
    """One wait type, a name (`spin`) or its number (`2`); None: neither."""
    value = WAIT_NAMES.get(text)
    return value if value is not None else WAIT_NUMBERS.get(text)


def parse_wait(text: str) -> Optional[tuple[int, int]]:
    """`wait=INNER` or `wait=OUTER:INNER` as `(outer, inner)` (outer 0 when not given, as the kernel
    leaves `wait_type_outer` 0: `check_wait_context()` then takes the inner one); None: not valid."""
    outer_text, colon, inner_text = text.rpartition(":")
    inner = wait_type(inner_text)
    if inner is None:
        return None
    if not colon:
        return (0, inner)
    outer = wait_type(outer_text)
    return None if outer is None else (outer, inner)


def format_wait(wait: tuple[int, int]) -> str:
    """`(outer, inner)` as the kernel prints it after a class name, `OUTER:INNER`."""
    return f"{wait[0]}:{wait[1]}"


def check_value(key: str, value: object) -> Optional[str]:
    """The error message for a bad value of a class key, None when it is valid."""
    if key == "wait":
        if not isinstance(value, str) or parse_wait(value) is None:
            return "wait must be INNER or OUTER:INNER, each free, spin, config, sleep or 0..4"
    elif key == "type":
        if value not in LOCK_TYPES:
            return f"type must be one of {', '.join(LOCK_TYPES)}"
    elif key == "cmp":
        if value not in CMP_VALUES:
            return f"cmp must be one of {', '.join(CMP_VALUES)}"
    return None


def class_props(values: dict) -> Optional[dict]:
    """The `props` of an acquisition from its checked class keys (`wait`, `type`, `cmp` as text)."""
    props = {}
    if "wait" in values:
        props["wait"] = parse_wait(values["wait"])
    if "type" in values:
        props["type"] = LOCK_TYPES[values["type"]]
    if "cmp" in values:
        props["cmp"] = values["cmp"]
    return props or None


def class_words(props: Optional[dict]) -> list[tuple[str, str]]:
    """The class keys of `props` as `(key, value)` text, for writing a trace back."""
    if not props:
        return []
    words = []
    if props.get("wait") is not None:
        words.append(("wait", format_wait(props["wait"])))
    if props.get("type"):
        words.append(("type", LOCK_TYPE_NAMES[props["type"]]))
    if props.get("cmp"):
        words.append(("cmp", props["cmp"]))
    return words


#: op -> the keys (of `KEYS`, and `subclass`, `nest`, modes...) it takes beyond ts/cpu/at:
#: the spec's table of "More ops"
OP_OPTIONS: dict[str, frozenset[str]] = {
    E.SET_CLASS: frozenset({"subclass"}),
    E.SET_SUBCLASS: frozenset({"subclass"}),
    E.DOWNGRADE: frozenset(),
    E.SYNC: frozenset({"write", "read", "rread", "subclass", "nest", *CLASS_KEYS}),
    E.PIN: frozenset(),
    E.UNPIN: frozenset(),
    E.ASSERT_HELD: frozenset({"write", "read"}),
    E.ASSERT_NOT_HELD: frozenset(),
    E.ASSERT_IRQS_ON: frozenset(),
    E.ASSERT_IRQS_OFF: frozenset(),
    E.UNREGISTER: frozenset(),
    E.TASK_EXIT: frozenset(),
    E.HARDIRQ_ENTER: frozenset({"threaded"}),
    E.ACQUIRE: frozenset(CLASS_KEYS),
}
#: ops whose events the fast scanners leave to the grammar and the checker when these options appear
SLOW_OPTIONS = frozenset({*CLASS_KEYS, *FLAGS})


#: the header of a trace from a PREEMPT_RT kernel (docs/trace-format.md, "PREEMPT_RT"; `lt.HEADER` and a word)
RT_HEADER = "#lockcheck-trace v1 preempt-rt"


def header_event(line: str, file: str, lineno: int) -> Optional[E.Event]:
    """The first line `#lockcheck-trace v1 preempt-rt` as a RUN event that says so (`props`), for
    the checker (`rules.softirq_context_tracked`); None for any other line."""
    if lineno != 1 or not line.startswith(RT_HEADER) or line.split() != RT_HEADER.split():
        return None
    return E.Event("", E.RUN, None, at="lt", file=file, line=lineno, props={"preempt_rt": True})


def format_words(event: E.Event, quote: Callable[[str], str]) -> list[str]:
    """The `.lt` words of what this page adds to an event (after its lock; acquire's own
    mode, flags and keys are written by the reader): set-class's CLASS, the subclass of
    set-class and set-subclass, the class keys, `threaded`, assert-held's mode."""
    props = event.props or {}
    words = []
    if "class" in props:
        words.append(quote(props["class"]))
    if event.op in (E.SET_CLASS, E.SET_SUBCLASS) and (event.subclass or event.op == E.SET_SUBCLASS):
        words.append(f"subclass={event.subclass}")
    words += [f"{key}={value}" for key, value in class_words(props)]
    if props.get("threaded"):
        words.append("threaded")
    if props.get("held"):
        words.append(props["held"])
    return words
