"""`@pytest.mark.lockcheck(...)`: what one test asks of lockcheck.

- `skip=True`: its lock operations are recorded (holds stay balanced) but not checked;
- `expect="circular-dependency"`: the test demonstrates that bug on purpose: it passes if a
  finding of that kind is made in it (which is then not reported as a failure) and FAILS if none is;
- `order=["a", "b"]`: a lock order declared for this test alone, as a line `a < b` of the
  `lockcheck_order` file: a dependency this test makes against it is an `order-violation`
  (lock names as reports print them, or their last dotted part: `a` names `test_x.a`);
- `suppress=["circular-dependency A B", ...]`: `lockcheck_suppress` lines for this test alone.

Every keyword is checked at collection: an unknown one, a kind that is no kind, a malformed
rule or order is a usage error naming it, before any test runs.
"""

from __future__ import annotations

from typing import Any, NamedTuple, Optional

import pytest

from lockcheck.lockdep import findings as F
from lockcheck.lockdep.order import OrderFile, parse_order
from lockcheck.python.suppression_rules import Rule, RuleError, check_kind, parse_rules

KEYWORDS = ("skip", "enabled", "expect", "order", "suppress", "confirm")
MARKER = ("lockcheck(skip=False, expect=None, order=None, suppress=None, confirm=True): skip=True records "
          "this test's lock operations without checking them; expect=KIND: the test must make a finding of "
          "that kind (and passes); order=[A, B]: a lock order for this test; suppress=[RULE]: "
          "lockcheck_suppress lines for this test; confirm=False: never re-run it for --lockcheck-confirm")


class Request(NamedTuple):
    """What a test's marker asks for, checked."""

    check: bool = True
    expect: Optional[str] = None
    order: Optional[OrderFile] = None
    rules: tuple[Rule, ...] = ()
    confirm: bool = True  #: False: never re-run for --lockcheck-confirm (`lockcheck.python.confirm_run`)


def _strings(name: str, value: Any, where: str) -> list[str]:
    if isinstance(value, str):
        value = [value]
    if not isinstance(value, (list, tuple)) or not all(isinstance(v, str) for v in value):
        raise pytest.UsageError(f"{where}: @pytest.mark.lockcheck({name}=...): expected a list of strings, "
                                f"not {value!r}")
    return list(value)


def read(item: pytest.Item) -> Request:
    """The item's `lockcheck` marker as a `Request`; `pytest.UsageError` naming what is wrong."""
    marker = item.get_closest_marker("lockcheck")
    if marker is None:
        return Request()
    where = item.nodeid
    kwargs = marker.kwargs
    unknown = [key for key in kwargs if key not in KEYWORDS]
    if unknown or marker.args:
        what = f"keyword {unknown[0]!r}" if unknown else f"positional argument {marker.args[0]!r}"
        raise pytest.UsageError(f"{where}: @pytest.mark.lockcheck: unknown {what} "
                                f"(it takes skip, expect, order, suppress and confirm)")
    check = not (kwargs.get("skip") or kwargs.get("enabled") is False)
    expect = kwargs.get("expect")
    if expect is not None:
        if not isinstance(expect, str):
            raise pytest.UsageError(f"{where}: @pytest.mark.lockcheck(expect=...): expected a kind, not {expect!r}")
        try:
            check_kind(expect)
        except RuleError as err:
            raise pytest.UsageError(f"{where}: @pytest.mark.lockcheck(expect=...): {err}") from None
    order = None
    if kwargs.get("order") is not None:
        names = _strings("order", kwargs["order"], where)
        if len(names) < 2:
            raise pytest.UsageError(f"{where}: @pytest.mark.lockcheck(order=...): name two locks or more")
        from lockcheck.errors import TraceError

        try:
            order = parse_order(" < ".join(names), f"{where} order")
        except TraceError as err:
            raise pytest.UsageError(f"{where}: @pytest.mark.lockcheck(order=...): {err}") from None
    rules: tuple[Rule, ...] = ()
    if kwargs.get("suppress") is not None:
        try:
            rules = tuple(parse_rules(_strings("suppress", kwargs["suppress"], where), f"{where} suppress"))
        except RuleError as err:
            raise pytest.UsageError(f"{where}: @pytest.mark.lockcheck(suppress=...): {err}") from None
    confirm = kwargs.get("confirm", True)
    if not isinstance(confirm, bool):
        raise pytest.UsageError(f"{where}: @pytest.mark.lockcheck(confirm=...): expected True or False, not {confirm!r}")
    return Request(check, expect, order, rules, confirm)


def check_items(items: list[pytest.Item]) -> dict[str, Request]:
    """Every collected test's request (those with a marker), checked now: a usage error before any test runs."""
    return {item.nodeid: read(item) for item in items if item.get_closest_marker("lockcheck") is not None}


# -- order=[...]: the session's checker, told a declared order for one test -------------------


class _TestOrdered:
    """Mixed into the session checker's class when a test declares an order: while `test_order`
    is set, a new dependency against it is an `order-violation` (as `OrderChecker` reports one
    against `lockcheck_order`).  A dependency this test makes that an earlier test made first is
    checked too: the chain cache is set aside for the test (`set_test_order`), so every chain the
    test takes is validated and reaches `check_prev_add`."""

    test_order: Optional[OrderFile] = None

    def check_prev_add(self, task: Any, prev: Any, nxt: Any, distance: int, ev: Any) -> bool:
        order = self.test_order
        if order is not None and prev.cls != nxt.cls:
            first, then = _declared(order, nxt.cls), _declared(order, prev.cls)
            if first and then and order.before(first, then):
                path = order.declared_path(first, then)
                details = {"declared": path, "declared_at": f"{order.file}"}
                self.report(self._finding(F.ORDER_VIOLATION, task, ev, lock=nxt.cls, held=prev.cls,  # type: ignore[attr-defined]
                                          next=self.snapshot(nxt), prev=self.snapshot(prev),  # type: ignore[attr-defined]
                                          details=details))
        return super().check_prev_add(task, prev, nxt, distance, ev)  # type: ignore[misc]


def _declared(order: OrderFile, cls: str) -> Optional[str]:
    """The declared name `cls` answers to: itself, its base (no `/N`), or its last dotted part."""
    base = cls.partition("/")[0]
    for name in (cls, base, base.rpartition(".")[2]):
        if name in order.rank_graph:
            return name
    return None


def set_test_order(checker: Any, order: Optional[OrderFile]) -> None:
    """Declare `order` for the test now starting (None: the test declares none)."""
    if order is not None and not isinstance(checker, _TestOrdered):
        cls = type(checker)
        checker.__class__ = type(f"TestOrdered{cls.__name__}", (_TestOrdered, cls), {})
    if isinstance(checker, _TestOrdered):
        cache = checker.chain_cache  # emptied and refilled in place: the compiled core holds this set
        if order is not None and checker.test_order is None:
            checker.cache_before_order = set(cache)
            cache.clear()  # a cached chain would skip check_prev_add, and so the test's order
        elif order is None and checker.test_order is not None:
            cache |= getattr(checker, "cache_before_order", set())
            checker.cache_before_order = set()
        checker.test_order = order


__all__ = ["KEYWORDS", "MARKER", "Request", "read", "check_items", "set_test_order"]
