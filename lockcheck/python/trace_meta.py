"""The recorder's side of `lockcheck.readers.plugin_meta`: the comment lines that let
`lockcheck check` replay a recorded session to the plugin's own findings (its suppression
rules, the qualified names they match, the test each event ran in)."""

from __future__ import annotations

from typing import Iterable, TextIO

from lockcheck.python.sites import registry
from lockcheck.readers import plugin_meta


def write_header(trace: TextIO, rules: Iterable) -> None:
    """After `#lockcheck-trace v1`: the plugin's mark and the session's rules (`Rule`s)."""
    trace.write(plugin_meta.HEADER + "\n")
    for rule in rules:
        trace.write(plugin_meta.suppress_line(rule.text()) + "\n")


def write_test_rules(trace: TextIO, rules: Iterable) -> None:
    """The running test's own rules (`@pytest.mark.lockcheck(suppress=[...])`)."""
    for rule in rules:
        trace.write(plugin_meta.suppress_line(rule.text(), test=True) + "\n")


def write_class(trace: TextIO, cls: str) -> None:
    """Before the first event of class `cls`: its module-qualified name, when it has one (a
    rule may name the class by it, and only the live registry knows it)."""
    qualified = registry.qualified.get(cls.partition("/")[0])
    if qualified is not None and " " not in qualified and "\n" not in cls:
        trace.write(plugin_meta.class_line(cls.partition("/")[0], qualified) + "\n")


def write_stack(trace: TextIO, found: list) -> None:
    """After the event that made findings: the program's stack there (the first finding's), so the
    replay shows where the program was, as the plugin's report does."""
    for finding in found:
        stack = finding.details.get("stack")
        if stack:
            trace.write(plugin_meta.stack_line(stack) + "\n")
            return
