"""The kernel's lib/locking-selftest.c, replayed as `.lt` traces.

Each testcase body below is the kernel's `E()` / `E1()`..`E3()` text, with
the same macro names, so it can be compared line by line with the C file
(MODERN, with `force_read_lock_recursive = 1` for this part: `read_lock()`
is a recursive reader, `rread`).  `expand()` turns the macro calls into
`.lt` lines through `MACROS` (the shorthands at the top of the C file),
`TYPES` (`locking-selftest-{spin,wlock,rlock,mutex,wsem,rsem,rtmutex}.h`:
LOCK/UNLOCK/INIT) and `IRQ_KINDS` (`locking-selftest-{hardirq,softirq}.h`:
IRQ_ENTER/IRQ_EXIT/IRQ_DISABLE/IRQ_ENABLE).

`dotest()` resets lockdep after every testcase, so each case is a fresh
Checker over its own trace; FAILURE means "at least one finding"
(`debug_locks` turned off), SUCCESS "no finding".

Lock objects: `lock_A`..`lock_D`, `rwlock_A`.., `mutex_A`.., `rwsem_A`..
are distinct static classes; `X1`/`X2` (and Y, Z) are two instances of one
class (`init_class_X()`), written `lock_X@1`, `lock_X@2`.
"""

from __future__ import annotations

import itertools
import re
from typing import Optional

import pytest

from lockcheck.lockdep.checker import check_events
from lockcheck.readers import lt

FAILURE, SUCCESS = 0, 1

# -- the shorthands of locking-selftest.c ------------------------------------------
#: macro -> .lt lines; `{x}` is the macro's argument as a lock
MACROS: dict[str, list[str]] = {
    "L": ["acquire lock_{x}"], "U": ["release lock_{x}"], "SI": ["free lock_{x}"],
    "WL": ["acquire rwlock_{x}"], "WU": ["release rwlock_{x}"],
    "RL": ["acquire rwlock_{x} rread"], "RU": ["release rwlock_{x}"], "RWI": ["free rwlock_{x}"],
    "ML": ["acquire mutex_{x}"], "MU": ["release mutex_{x}"], "MI": ["free mutex_{x}"],
    "RTL": ["acquire rtmutex_{x}"], "RTU": ["release rtmutex_{x}"], "RTI": ["free rtmutex_{x}"],
    "WSL": ["acquire rwsem_{x}"], "WSU": ["release rwsem_{x}"],
    "RSL": ["acquire rwsem_{x} read"], "RSU": ["release rwsem_{x}"], "RWSI": ["free rwsem_{x}"],
    # HARDIRQ_DISABLE / HARDIRQ_ENABLE: local_irq_disable / local_irq_enable
    "HARDIRQ_DISABLE": ["irqs-off"], "HARDIRQ_ENABLE": ["irqs-on"],
    # HARDIRQ_ENTER(): local_irq_disable(); __irq_enter(); lockdep_hardirq_threaded();
    "HARDIRQ_ENTER": ["irqs-off", "hardirq-enter"],
    # HARDIRQ_EXIT(): __irq_exit(); local_irq_enable();
    "HARDIRQ_EXIT": ["hardirq-exit", "irqs-on"],
    # SOFTIRQ_DISABLE / SOFTIRQ_ENABLE: local_bh_disable / local_bh_enable
    "SOFTIRQ_DISABLE": ["softirqs-off"], "SOFTIRQ_ENABLE": ["softirqs-on"],
    # SOFTIRQ_ENTER(): local_bh_disable(); local_irq_disable(); lockdep_softirq_enter();
    "SOFTIRQ_ENTER": ["softirqs-off", "irqs-off", "softirq-enter"],
    # SOFTIRQ_EXIT(): lockdep_softirq_exit(); local_irq_enable(); local_bh_enable();
    "SOFTIRQ_EXIT": ["softirq-exit", "irqs-on", "softirqs-on"],
}

#: locking-selftest-TYPE.h: what LOCK / UNLOCK / INIT (and RLOCK/WLOCK for rwlocks) mean
TYPES: dict[str, dict[str, str]] = {
    "spin": {"LOCK": "L", "UNLOCK": "U", "INIT": "SI"},
    "wlock": {"LOCK": "WL", "UNLOCK": "WU", "INIT": "RWI"},
    "rlock": {"LOCK": "RL", "UNLOCK": "RU", "INIT": "RWI"},
    "mutex": {"LOCK": "ML", "UNLOCK": "MU", "INIT": "MI"},
    "wsem": {"LOCK": "WSL", "UNLOCK": "WSU", "INIT": "RWSI"},
    "rsem": {"LOCK": "RSL", "UNLOCK": "RSU", "INIT": "RWSI"},
    "rtmutex": {"LOCK": "RTL", "UNLOCK": "RTU", "INIT": "RTI"},
}

#: locking-selftest-hardirq.h / locking-selftest-softirq.h
IRQ_KINDS: dict[str, dict[str, str]] = {
    "hard": {"IRQ_ENTER": "HARDIRQ_ENTER", "IRQ_EXIT": "HARDIRQ_EXIT",
             "IRQ_DISABLE": "HARDIRQ_DISABLE", "IRQ_ENABLE": "HARDIRQ_ENABLE"},
    "soft": {"IRQ_ENTER": "SOFTIRQ_ENTER", "IRQ_EXIT": "SOFTIRQ_EXIT",
             "IRQ_DISABLE": "SOFTIRQ_DISABLE", "IRQ_ENABLE": "SOFTIRQ_ENABLE"},
}

_CALL = re.compile(r"^\s*([A-Z_0-9]+)\(\s*([A-Za-z0-9]*)\s*\)\s*$")


def lock_name(arg: str, kind_line: str) -> str:
    """`X1` -> class X, instance 1 (init_class_X); `A` -> the static lock A."""
    if len(arg) == 2 and arg[1].isdigit():
        return kind_line.format(x=f"{arg[0]}@{arg[1]}")
    return kind_line.format(x=arg)


def expand(body: str, type_: Optional[str] = None, irq: Optional[str] = None) -> list[str]:
    """`"IRQ_ENTER(); LOCK(A); ..."` -> `.lt` lines of task T (comments `/* */` allowed)."""
    body = re.sub(r"/\*.*?\*/", "", body)
    binding = dict(TYPES[type_]) if type_ else {}
    if irq:
        binding.update(IRQ_KINDS[irq])
    lines: list[str] = []
    for call in filter(str.strip, body.split(";")):
        m = _CALL.match(call)
        assert m, f"cannot read macro call {call!r}"
        name, arg = m.groups()
        name = binding.get(name, name)
        for line in MACROS[name]:
            lines.append("T " + (lock_name(arg, line) if arg else line))
    return lines


def run(lines: list[str]) -> list:
    findings, _ = check_events(lt.parse(lines, "selftest.lt"))
    return findings


def verdict(lines: list[str]) -> int:
    return FAILURE if run(lines) else SUCCESS


def permutations(events: list[str]) -> dict[str, str]:
    """GENERATE_PERMUTATIONS_{2,3}_EVENTS: name suffix -> body."""
    n = len(events)
    return {"".join(map(str, p)): " ".join(events[i - 1] for i in p)
            for p in itertools.permutations(range(1, n + 1))}


# -- the generic deadlock rows ------------------------------------------------------
LOCK_UNLOCK_2 = "LOCK({0}); LOCK({1}); UNLOCK({1}); UNLOCK({0});"


def lu2(*pairs: str) -> str:
    return " ".join(LOCK_UNLOCK_2.format(p[0], p[1]) for p in pairs)


GENERIC_6R = {  # DO_TESTCASE_6R: rlock S, everything else F
    "AA": "LOCK(X1); LOCK(X2); /* this one should fail */",
    "ABBA": lu2("AB", "BA"),
    "ABBCCA": lu2("AB", "BC", "CA"),
    "ABCABC": lu2("AB", "CA", "BC"),
    "ABBCCDDA": lu2("AB", "BC", "CD", "DA"),
    "ABCDBDDA": lu2("AB", "CD", "BD", "DA"),
    "ABCDBCDA": lu2("AB", "CD", "BC", "DA"),
}
GENERIC_6 = {  # DO_TESTCASE_6: every column F
    "double_unlock": "LOCK(A); UNLOCK(A); UNLOCK(A); /* fail */",
    "init_held": "LOCK(A); INIT(A); /* fail */",
}


@pytest.mark.parametrize("type_", list(TYPES))
@pytest.mark.parametrize("name", list(GENERIC_6R))
def test_generic_6R(name: str, type_: str) -> None:
    expected = SUCCESS if type_ == "rlock" else FAILURE
    assert verdict(expand(GENERIC_6R[name], type_)) == expected


@pytest.mark.parametrize("type_", list(TYPES))
@pytest.mark.parametrize("name", list(GENERIC_6))
def test_generic_6(name: str, type_: str) -> None:
    assert verdict(expand(GENERIC_6[name], type_)) == FAILURE


READ_ROWS = {  # the functions of the C file, with their dotest() expectation
    "rlock_AA1": ("RL(X1); RL(X1);", SUCCESS),
    "rlock_AA1B": ("RL(X1); RL(X2);", SUCCESS),
    "rsem_AA1": ("RSL(X1); RSL(X1);", FAILURE),
    "rsem_AA1B": ("RSL(X1); RSL(X2);", FAILURE),
    "rlock_AA2": ("RL(X1); WL(X2);", FAILURE),
    "rsem_AA2": ("RSL(X1); WSL(X2);", FAILURE),
    "rlock_AA3": ("WL(X1); RL(X2);", FAILURE),
    "rsem_AA3": ("WSL(X1); RSL(X2);", FAILURE),
    "rlock_ABBA1": ("RL(X1); L(Y1); U(Y1); RU(X1); L(Y1); WL(X1); WU(X1); U(Y1);", FAILURE),
    "rwsem_ABBA1": ("RSL(X1); ML(Y1); MU(Y1); RSU(X1); ML(Y1); WSL(X1); WSU(X1); MU(Y1);", FAILURE),
    "rlock_chaincache_ABBA1": ("RL(X1); L(Y1); U(Y1); RU(X1); L(Y1); RL(X1); RU(X1); U(Y1);"
                               " L(Y1); WL(X1); WU(X1); U(Y1);", FAILURE),
    "rlock_ABBA2": ("RL(X1); L(Y1); U(Y1); RU(X1); L(Y1); RL(X1); RU(X1); U(Y1);", SUCCESS),
    "rwsem_ABBA2": ("RSL(X1); ML(Y1); MU(Y1); RSU(X1); ML(Y1); RSL(X1); RSU(X1); MU(Y1);", FAILURE),
    "rlock_ABBA3": ("WL(X1); L(Y1); U(Y1); WU(X1); L(Y1); WL(X1); WU(X1); U(Y1);", FAILURE),
    "rwsem_ABBA3": ("WSL(X1); ML(Y1); MU(Y1); WSU(X1); ML(Y1); WSL(X1); WSU(X1); MU(Y1);", FAILURE),
}


@pytest.mark.parametrize("name", list(READ_ROWS))
def test_read_rows(name: str) -> None:
    body, expected = READ_ROWS[name]
    assert verdict(expand(body)) == expected


RR_CYCLES = {  # DO_TESTCASE_6x1RRB (F) / DO_TESTCASE_6x1RR (S); bodies of the generated functions
    "W1R2_W2R3_W3R1": (["WL(X1); RL(Y1); RU(Y1); WU(X1);", "WL(Y1); RL(Z1); RU(Z1); WU(Y1);",
                        "WL(Z1); RL(X1); RU(X1); WU(Z1);"], FAILURE),
    "W1W2_R2R3_W3R1": (["WL(X1); WL(Y1); WU(Y1); WU(X1);", "RL(Y1); RL(Z1); RU(Z1); RU(Y1);",
                        "WL(Z1); RL(X1); RU(X1); WU(Z1);"], FAILURE),
    "W1R2_R2R3_W3W1": (["WL(X1); WL(Y1); WU(Y1); WU(X1);", "RL(Y1); RL(Z1); RU(Z1); RU(Y1);",
                        "RL(Z1); WL(X1); WU(X1); RU(Z1);"], SUCCESS),
    "W1W2_R2R3_R3W1": (["WL(X1); RL(Y1); RU(Y1); WU(X1);", "RL(Y1); RL(Z1); RU(Z1); RU(Y1);",
                        "WL(Z1); WL(X1); WU(X1); WU(Z1);"], SUCCESS),
}


@pytest.mark.parametrize("perm", list(permutations(["1", "2", "3"])))
@pytest.mark.parametrize("name", list(RR_CYCLES))
def test_rr_cycles(name: str, perm: str) -> None:
    events, expected = RR_CYCLES[name]
    body = permutations(events)[perm]
    assert verdict(expand(body, "rlock")) == expected


# -- the irq-context rows ----------------------------------------------------------
IRQ_GROUPS: dict[str, list[str]] = {
    # locking an irq-safe lock with irqs enabled (DO_TESTCASE_2x6)
    "irqsafe1": ["IRQ_ENTER(); LOCK(A); UNLOCK(A); IRQ_EXIT();",
                 "LOCK(A); UNLOCK(A);"],
    # enabling irqs with an irq-safe lock held (DO_TESTCASE_2x6)
    "irqsafe2B": ["IRQ_ENTER(); LOCK(A); UNLOCK(A); IRQ_EXIT();",
                  "IRQ_DISABLE(); LOCK(A); IRQ_ENABLE(); UNLOCK(A);"],
    # acquiring an irq-unsafe lock while holding an irq-safe lock (DO_TESTCASE_6x6)
    "irqsafe3": ["LOCK(A); LOCK(B); UNLOCK(B); UNLOCK(A);",
                 "LOCK(B); UNLOCK(B);",
                 "IRQ_ENTER(); LOCK(A); UNLOCK(A); IRQ_EXIT();"],
    # a lock turns irq-safe but earlier took an irq-unsafe lock (DO_TESTCASE_6x6)
    "irqsafe4": ["IRQ_DISABLE(); LOCK(A); LOCK(B); UNLOCK(B); UNLOCK(A); IRQ_ENABLE();",
                 "LOCK(B); UNLOCK(B);",
                 "IRQ_ENTER(); LOCK(A); UNLOCK(A); IRQ_EXIT();"],
    # read-lock / write-lock irq inversion (DO_TESTCASE_6x6RW)
    "irq_inversion": ["IRQ_DISABLE(); WL(A); LOCK(B); UNLOCK(B); WU(A); IRQ_ENABLE();",
                      "LOCK(B); UNLOCK(B);",
                      "IRQ_ENTER(); RL(A); RU(A); IRQ_EXIT();"],
}
#: DO_TESTCASE_3 / DO_TESTCASE_3RW: spin F, wlock F, rlock S
IRQ_EXPECT = {"spin": FAILURE, "wlock": FAILURE, "rlock": SUCCESS}

IRQ_CASES = [
    pytest.param(group, irq, type_, perm, id=f"{group}_{irq}_{type_}_{perm}")
    for group, events in IRQ_GROUPS.items()
    for perm in permutations([str(i) for i in range(1, len(events) + 1)])
    for irq in IRQ_KINDS
    for type_ in IRQ_EXPECT
]


@pytest.mark.parametrize("group,irq,type_,perm", IRQ_CASES)
def test_irq_groups(group: str, irq: str, type_: str, perm: str) -> None:
    body = permutations(IRQ_GROUPS[group])[perm]
    assert verdict(expand(body, type_, irq)) == IRQ_EXPECT[type_]


# enabling hardirqs with a softirq-safe lock held (DO_TESTCASE_2x3, no hard/soft variants)
IRQSAFE2A = ["SOFTIRQ_ENTER(); LOCK(A); UNLOCK(A); SOFTIRQ_EXIT();",
             "HARDIRQ_DISABLE(); LOCK(A); HARDIRQ_ENABLE(); UNLOCK(A);"]


@pytest.mark.parametrize("perm", ["12", "21"])
@pytest.mark.parametrize("type_", list(IRQ_EXPECT))
def test_irqsafe2A(type_: str, perm: str) -> None:
    body = permutations(IRQSAFE2A)[perm]
    assert verdict(expand(body, type_)) == IRQ_EXPECT[type_]


READ_RECURSION: dict[str, list[str]] = {  # DO_TESTCASE_6x2x2RW: wlock F, rlock S
    # read-lock / write-lock recursion that is actually safe
    "irq_read_recursion": ["IRQ_DISABLE(); WL(A); WU(A); IRQ_ENABLE();",
                           "RL(A); RU(A);",
                           "IRQ_ENTER(); LOCK(A); L(B); U(B); UNLOCK(A); IRQ_EXIT();"],
    # read-lock / write-lock recursion that is unsafe
    "irq_read_recursion2": ["IRQ_DISABLE(); L(B); LOCK(A); UNLOCK(A); U(B); IRQ_ENABLE();",
                            "RL(A); RU(A);",
                            "IRQ_ENTER(); L(B); U(B); IRQ_EXIT();"],
    # A is ENABLED_*_READ, B is USED_IN_*_READ
    "irq_read_recursion3": ["IRQ_DISABLE(); WL(B); LOCK(A); UNLOCK(A); WU(B); IRQ_ENABLE();",
                            "RL(A); RU(A);",
                            "IRQ_ENTER(); RL(B); RU(B); IRQ_EXIT();"],
}
RR_EXPECT = {"wlock": FAILURE, "rlock": SUCCESS}

READ_RECURSION_CASES = [
    pytest.param(group, irq, type_, perm, id=f"{group}_{irq}_{type_}_{perm}")
    for group, events in READ_RECURSION.items()
    for perm in permutations(["1", "2", "3"])
    for irq in IRQ_KINDS
    for type_ in RR_EXPECT
]


@pytest.mark.parametrize("group,irq,type_,perm", READ_RECURSION_CASES)
def test_irq_read_recursion(group: str, irq: str, type_: str, perm: str) -> None:
    body = permutations(READ_RECURSION[group])[perm]
    assert verdict(expand(body, type_, irq)) == RR_EXPECT[type_]


def test_case_count() -> None:
    """The dotest() calls the kernel makes: 12 (2x6) + 12 + 36 (6x6) x 3 irq rows, 3 x 24 read-recursion rows."""
    assert len(IRQ_CASES) == 12 + 12 + 36 + 36 + 36
    assert len(READ_RECURSION_CASES) == 3 * 24


def test_expand_mirrors_the_macros() -> None:
    assert expand("IRQ_ENTER(); LOCK(A); UNLOCK(A); IRQ_EXIT();", "rlock", "soft") == [
        "T softirqs-off", "T irqs-off", "T softirq-enter",
        "T acquire rwlock_A rread", "T release rwlock_A",
        "T softirq-exit", "T irqs-on", "T softirqs-on",
    ]
    assert expand("LOCK(X1); LOCK(X2);", "spin") == ["T acquire lock_X@1", "T acquire lock_X@2"]
