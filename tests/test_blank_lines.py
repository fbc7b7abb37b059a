"""Lines of only blanks and tabs are blank lines on the fast paths, not lines for the grammar.

Each went through the LALR parser (`lt.parse_line`), which only found it
blank: 20M of them took 275 s where 100M empty lines take 1 s.  The test
counts the lines that reach the grammar instead of timing anything.
"""

from __future__ import annotations

import io

import pytest

from lockcheck import readers
from lockcheck.commands.cli import main
from lockcheck.engine import fast_lt
from lockcheck.readers import lt


@pytest.mark.parametrize("compiled", [True, False, None], ids=["compiled", "pure", "no-fast-path"])
@pytest.mark.parametrize("ending", ["\n", "\r\n"])
def test_blank_and_tab_lines_never_reach_the_grammar(tmp_path, monkeypatch, compiled, ending):
    if compiled and not fast_lt.compiled():
        pytest.skip("no compiled core")
    if not compiled:
        monkeypatch.setenv("LOCKCHECK_PURE", "1")
    if compiled is None:  # the plain pipeline (lt.parse), as with aliases
        monkeypatch.setenv("LOCKCHECK_FASTPATH", "0")
    parsed: list[str] = []
    real = lt.parse_line

    def counting(line, *args, **kwargs):
        parsed.append(line)
        return real(line, *args, **kwargs)

    monkeypatch.setattr(lt, "parse_line", counting)
    # format detection reads the first lines itself and keeps blank ones as "": not those
    monkeypatch.setattr(readers, "SNIFF_MAX_LINES", 2)
    blanks = [" ", "\t", " \t ", "\t\t", "   "] * 2000
    lines = ["T1 acquire A", "T2 acquire B"] + blanks + ["T2 release B", "T1 acquire B", "T1 release B",
                                                          "T1 release A", "T2 acquire B", "T2 acquire A"]
    path = tmp_path / "t.lt"
    path.write_bytes(ending.join(lines).encode() + ending.encode())
    out, err = io.StringIO(), io.StringIO()
    status = main(["check", "--no-config", "--no-progress", str(path)], stdout=out, stderr=err)
    assert status == 1, err.getvalue()  # the AB-BA after the blanks is still found
    assert "circular locking dependency" in out.getvalue()
    assert not [line for line in parsed if not line.strip(" \t\r")], "a blank line reached the grammar"
