"""A crafted trace cannot forge report lines, drive the terminal or issue workflow commands, in any renderer."""

from __future__ import annotations

import io
import json
import unicodedata
from pathlib import Path

import pytest

from lockcheck.commands.cli import main
from lockcheck.util.escape import visible

#: a lock name built to forge a report line, clear the screen, retitle the terminal, hide itself
EVIL = "A\n=====\nWARNING: forged\r\x1b[2J\x1b]0;pwned\x07\u202eevil\u2066\x00\ud800"[:-1] + "\u200b"
#: a task name that would issue a GitHub workflow command on a line of its own
EVIL_TASK = "T1\n::error file=x.py,line=1::forged"
#: what must never reach a terminal or a log raw
RAW = ("\x1b", "\x07", "\r", "\u202e", "\u2066", "\x00", "\u200b")


def cli(*args: str) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    status = main(list(args), stdout=out, stderr=err)
    return status, out.getvalue(), err.getvalue()


def jsonl(tmp_path: Path, lock: str, task: str, name: str = "t.jsonl") -> str:
    """AB-BA with `lock` as the B class, taken by `task`."""
    events = [(task, "acquire", "A"), (task, "acquire", lock), (task, "release", lock), (task, "release", "A"),
              ("T2", "acquire", lock), ("T2", "acquire", "A")]
    path = tmp_path / name
    path.write_text("".join(json.dumps({"task": t, "op": op, "lock": lk, "at": f"{lk}.c:1"}) + "\n"
                            for t, op, lk in events))
    return str(path)


def renders(tmp_path: Path, fmt: str, lock: str, task: str) -> str:
    status, out, err = cli("check", "--no-config", "--no-progress", "--format", fmt, jsonl(tmp_path, lock, task))
    assert status == 1, err
    return out


def assert_clean(text: str) -> None:
    for raw in RAW:
        assert raw not in text, (raw, text)


@pytest.mark.parametrize("fmt", ["text", "github"])
def test_line_oriented_renderers_show_names_visibly(tmp_path, fmt):
    out = renders(tmp_path, fmt, EVIL, EVIL_TASK)
    assert_clean(out)
    plain = renders(tmp_path, fmt, "B", "T1")
    assert out.count("\n") == plain.count("\n")  # no line forged
    assert visible("WARNING: forged\r\x1b[2J") in out
    assert "\\u202eevil" in out and "\\x1b]0;pwned\\x07" in out
    if fmt == "github":
        assert all(line.startswith(("::error ", "::warning ", "::notice ", "lockcheck: ")) for line in out.splitlines())
        assert "\n::error file=x.py" not in out


@pytest.mark.parametrize("fmt", ["json", "sarif"])
def test_json_renderers_are_strict_ascii_json_with_the_exact_names(tmp_path, fmt):
    out = renders(tmp_path, fmt, EVIL, EVIL_TASK)
    assert out.isascii()  # every control, bidi and non-ASCII character escaped by json
    assert_clean(out)

    def strict(name):
        raise ValueError(name)

    doc = json.loads(out, parse_constant=strict)
    assert EVIL in set(strings(doc))  # the names themselves are kept exactly


def strings(value):
    if isinstance(value, str):
        yield value
    elif isinstance(value, dict):
        for item in value.values():
            yield from strings(item)
    elif isinstance(value, list):
        for item in value:
            yield from strings(item)


def test_github_escapes_properties(tmp_path):
    path = tmp_path / "t.lt"
    path.write_text("T1 acquire A\nT1 acquire A at=x,y%.py:3\n")
    status, out, _ = cli("check", "--no-config", "--format", "github", str(path))
    assert status == 1
    first = out.splitlines()[0]
    props, _, message = first[2:].partition("::")
    assert props.startswith("error file=x%2Cy%25.py,line=3,title=lockcheck%3A ")


def test_diff_and_dot_and_notes(tmp_path):
    trace = jsonl(tmp_path, EVIL, EVIL_TASK)
    base = tmp_path / "base.lt"
    base.write_text("T1 acquire A\nT1 release A\n")
    status, out, _ = cli("diff", "--no-config", str(base), trace)
    assert status == 1
    assert_clean(out)
    assert "\nWARNING: forged" not in out
    dot = tmp_path / "g.dot"
    cli("graph", "--no-config", trace, "-o", str(dot))
    assert_clean(dot.read_text())
    sup = tmp_path / "s.toml"
    sup.write_text('suppress = [{kind = "recursive-locking", classes = ["\\u001b[2J\\nWARNING: x"]}]\n')
    status, out, err = cli("check", "--no-progress", "--no-config", "--suppress", str(sup), str(base))
    assert_clean(out + err)
    assert "\\x1b[2J\\nWARNING: x" in out + err


def test_stat_table(tmp_path):
    path = tmp_path / "s.jsonl"
    path.write_text("".join(json.dumps(obj) + "\n" for obj in [
        {"task": "T1", "op": "contended", "lock": EVIL, "ts": 1.0},
        {"task": "T1", "op": "acquire", "lock": EVIL, "ts": 1.0},
        {"task": "T1", "op": "acquired", "lock": EVIL, "ts": 2.0},
        {"task": "T1", "op": "release", "lock": EVIL, "ts": 3.0}]))
    status, out, err = cli("stat", str(path))
    assert status == 0, err
    assert_clean(out)
    status, out, err = cli("stat", "--format", "json", str(path))
    assert status == 0 and out.isascii()


def test_error_lines_and_file_names(tmp_path):
    path = tmp_path / "x\x1b[2Jy\n.lt"
    path.write_text("T1 \x1b]0;pwned\x07zap A\n")
    status, _, err = cli("check", "--no-config", "--no-progress", str(path))
    assert status == 2
    assert err.count("\n") == 1
    assert_clean(err)
    assert "\\x1b]0;pwned\\x07zap" in err


def test_visible_covers_every_invisible_character():
    """Controls, format characters (bidi, zero-width), line and paragraph separators, surrogates: all shown."""
    for code in [*range(0x30000), *range(0xE0000, 0xE1000)]:  # every assigned invisible is in these
        ch = chr(code)
        if unicodedata.category(ch) in ("Cc", "Cf", "Cs", "Zl", "Zp"):
            shown = visible(ch)
            assert shown != ch and shown.isascii() and shown.startswith("\\"), hex(code)
    assert visible("&(&zone->lock)->rlock κλειδί 锁") == "&(&zone->lock)->rlock κλειδί 锁"
