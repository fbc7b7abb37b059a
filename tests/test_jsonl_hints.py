"""The split the JSON Lines translator hands the `.lt` core beside each line it writes (`_lt_hints.h`).

The core applies a hinted line without finding its task and ` ts=` again (`apply_split`, the one apply
the text path reaches through `apply_line`'s own split).  So every hint must be what that split finds
in the line's text: checked here line by line on generated traces, end to end against the text alone
(`LOCKCHECK_JSONL_HINTS=0`), and a block whose hints do not match its lines is refused, never applied.
"""

from __future__ import annotations

import contextlib
import io
import json
import struct

import pytest
from hypothesis import HealthCheck, example, given, settings
from test_jsonl_translate import COMMON, EXAMPLES, _outcome, json_traces

from lockcheck.commands.cli import main
from lockcheck.engine import fast_jsonl, fast_lt
from lockcheck.errors import TraceError
from lockcheck.readers.source import Checking, Lines

pytestmark = pytest.mark.skipif(not fast_jsonl.available(), reason="the compiled translator is not built")

HINT = struct.Struct("=iii")  # LineHint: len, task_len, rest_len


def text_split(line: bytes) -> tuple[int, int] | None:
    """(task_len, rest_len) as the core's apply_line splits `line`, or None where it would not apply it
    as a plain line (blank, a comment, a quote, a tab, a `\\r`, no task)."""
    if not line.strip(b" \t\r") or line[:1] == b"#" or b'"' in line or b"\t" in line or b"\r" in line:
        return None
    space = line.find(b" ")
    if space <= 0:
        return None
    tail = line[space + 1:]
    ts = tail.find(b" ts=")
    return space, ts if ts >= 0 else len(tail)


def hinted_items(lines: list[str], hints: bool = True) -> list:
    """What the translator yields for `lines` read from a file (blocks of bytes, `source.Checking`)."""
    source = Lines.opened(io.BytesIO("\n".join(lines).encode("utf-8")), "gen.jsonl", lambda: None)
    checking = Checking(int)
    translator = fast_jsonl._translator()(source, fast_jsonl.slow_line("gen.jsonl"), checking.reject, hints)
    checking.lines_read = translator.lines_read
    source.give_bytes(checking)
    items: list = []
    with contextlib.suppress(TraceError):  # (a bad line: the items before it are checked all the same)
        items.extend(translator)
    return items


def assert_hints_match(items: list) -> int:
    """Every hint of every `(block, hints)` item is its line's own split; returns the lines hinted."""
    hinted = 0
    for item in items:
        if not isinstance(item, tuple):
            continue
        block, hints = item
        lines = block.split(b"\n")
        assert len(hints) == HINT.size * len(lines)
        for line, (length, task_len, rest_len) in zip(lines, HINT.iter_unpack(hints)):
            assert length == len(line)
            if task_len:
                hinted += 1
                assert text_split(line) == (task_len, rest_len), line
    return hinted


@settings(max_examples=EXAMPLES, deadline=None, suppress_health_check=[HealthCheck.too_slow, HealthCheck.data_too_large])
@given(json_traces())
@example(COMMON * 3)
@example(['{"task": "T1", "op": "acquire", "lock": "B", "at": "f ts=1", "ts": 2}'] + COMMON)
def test_every_hint_is_the_split_the_text_path_finds(lines) -> None:
    assert_hints_match(hinted_items(lines))


def test_common_lines_are_hinted_and_others_are_not() -> None:
    lines = COMMON + ['{"task": "T1", "op": "acquire", "lock": "l\\u00f6ck"}', "", "# c",
                      '{"task":"T1","op":"acquire","lock":"C","at":"x ts=1","ts":3}']
    items = hinted_items(lines)
    assert assert_hints_match(items) == len(COMMON)
    assert [item for item in items if not isinstance(item, tuple)] == ["T1 acquire l\u00f6ck"]  # (a str of its own)


@pytest.mark.parametrize("traces", [0, 1, 2])
def test_hinted_and_text_lines_check_the_same(traces) -> None:
    """The checker's every visible state, with the hints and with the text alone."""
    lines = [COMMON * 3, COMMON[:2] + ['{"task": "T1", "op": "acquire", "lock": "A", "mode": "reed"}'] + COMMON,
             COMMON[:2] + ['{"task": "T1", "op": "contended", "lock": "B", "comm": "bash/1"}'] + COMMON[2:] * 2][traces]
    with pytest.MonkeyPatch.context() as patch:
        patch.setenv("LOCKCHECK_JSONL_HINTS", "0")
        text = _outcome(lines, "bytes")
    assert _outcome(lines, "bytes") == text == _outcome(lines, "plain")


def test_the_command_line_prints_the_same_with_and_without_hints(tmp_path, monkeypatch, capsys) -> None:
    lines = []
    for i in range(300):
        task = f"T{i % 3}"
        stamp = f', "ts": {i}.25, "cpu": {i % 2}' if i % 2 else ""
        lines += [f'{{"task": "{task}", "op": "acquire", "lock": "A", "at": "a+0x{i:x}/0x9"{stamp}}}',
                  f'{{"task": "{task}", "op": "acquire", "lock": "B", "instance": "0x{i % 4}", "mode": "read"}}',
                  f'{{"task": "{task}", "op": "release", "lock": "B", "instance": "0x{i % 4}"{stamp}}}',
                  f'{{"task": "{task}", "op": "release", "lock": "A"}}']
    lines += ['{"task": "T9", "op": "acquire", "lock": "B"}', '{"task": "T9", "op": "acquire", "lock": "A"}']
    path = tmp_path / "t.jsonl"
    path.write_text("\n".join(lines) + "\n")
    monkeypatch.setenv("LOCKCHECK_JOBS", "1")
    outs = []
    for hints in ("1", "0"):
        monkeypatch.setenv("LOCKCHECK_JSONL_HINTS", hints)
        status = main(["check", "--format", "json", "--no-config", str(path)])
        outs.append((status, capsys.readouterr()))
    assert outs[0] == outs[1]
    assert json.loads(outs[0][1].out)["findings"]


@pytest.mark.parametrize("bad", ["long", "short", "task", "count"])
def test_hints_that_do_not_match_the_lines_are_refused(bad) -> None:
    """A block whose hints do not match its lines (a translator's bug) fails loudly, none applied wrongly."""
    from lockcheck.lockdep.checker import Checker

    block = b"T1 acquire A\nT1 release A"
    hints = {"long": HINT.pack(13, 2, 9) + HINT.pack(12, 2, 9), "short": HINT.pack(11, 2, 9) + HINT.pack(12, 2, 9),
             "task": HINT.pack(12, 12, 0) + HINT.pack(12, 2, 9), "count": HINT.pack(12, 2, 9)}[bad]
    checker = Checker()
    checker.open_trace(False)
    with pytest.raises(SystemError, match="hints do not match"):
        list(checker.run(fast_lt.lt_events(checker, iter([(block, hints)]), "t.lt", None)))
