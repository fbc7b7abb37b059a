"""A file of one-class rules (the built-in `kernel.annotations`) is read without the grammar (nor lark), and
reads exactly as the grammar reads it: the same rules at the same lines, the same error."""

from __future__ import annotations

from importlib import resources

from hypothesis import given, settings, strategies as st

from lockcheck.errors import TraceError
from lockcheck.lockdep import order, order_text

_OPS = ["no-check", "no-check like", "recursive-read", "no-check  like", "nest", "subclass", "recursive-read like",
        "no-check\tlike", "no-check"]
_NAMES = ["rcu_read_lock", "&dev->mutex", '"*srcu"', '"a \\"b\\""', '"x\\\\y"', "like", "like#x", "a#b", "by",
          "order", "x<y", "a,b", '"unterminated', "n\u00e9", "a\u3000b", "", "=x", "x=y"]
_TAILS = ["", " ", "\t", " # why", "#c", " x", "\r"]


@st.composite
def files(draw) -> str:
    lines = []
    for _ in range(draw(st.integers(0, 6))):
        what = draw(st.sampled_from(["rule"] * 6 + ["blank", "comment", "other"]))
        if what == "blank":
            lines.append(draw(st.sampled_from(["", "  ", "\t"])))
        elif what == "comment":
            lines.append(draw(st.sampled_from(["# c", "  #x", "#"])))
        elif what == "other":
            lines.append(draw(st.sampled_from(["A < B", "group G = A, B", "pseudo P", "nest A under B"])))
        else:
            lead = draw(st.sampled_from(["", " ", "\t"]))
            lines.append(lead + draw(st.sampled_from(_OPS)) + " " + draw(st.sampled_from(_NAMES))
                         + draw(st.sampled_from(_TAILS)))
    end = draw(st.sampled_from(["\n", "\r\n", ""]))
    return end.join(lines) + (end if lines and draw(st.booleans()) else "")


def _read(text: str, scan: bool, monkeypatch) -> object:
    with monkeypatch.context() as m:
        if not scan:
            m.setattr(order_text, "_one_class_rules", lambda text: None)
        try:
            parsed = order.parse_order(text, "f")
        except TraceError as err:
            return ("error", err.format())
    return (parsed.rules, parsed.edges, parsed.groups, parsed.pseudo, parsed.nestable)


@settings(max_examples=300, deadline=None)
@given(files())
def test_rule_files_read_as_the_grammar_reads_them(text) -> None:
    import pytest

    with pytest.MonkeyPatch.context() as monkeypatch:
        assert _read(text, True, monkeypatch) == _read(text, False, monkeypatch)


def test_the_built_in_file_needs_no_grammar() -> None:
    text = resources.files("lockcheck.kernel").joinpath("kernel.annotations").read_text(encoding="utf-8")
    statements = order_text._one_class_rules(text)
    assert statements is not None
    assert [rule.kind for _, _, rule in statements].count("no-check-like") == 1


def test_a_capture_check_of_the_built_in_rules_imports_no_lark(tmp_path) -> None:
    import subprocess
    import sys

    trace = tmp_path / "t.ftrace"
    trace.write_text("# tracer: nop\n"
                     "   kworker/0:1-7     [000] .....   100.000001: lock_acquire: 0xffff888000000001 &rq->__lock\n"
                     "   kworker/0:1-7     [000] .....   100.000002: lock_release: 0xffff888000000001 &rq->__lock\n")
    code = ("import sys; from lockcheck.commands.cli import main; "
            f"status = main(['check', '--no-config', '--format', 'json', {str(trace)!r}]); "
            "print(status, 'lark' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True).stdout
    assert out.split()[-2:] == ["0", "False"]
