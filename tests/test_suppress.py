"""Suppressions, class aliases, pyproject.toml's [tool.lockcheck], and stale-entry notes."""

from __future__ import annotations

import io
import json
import os
from pathlib import Path

import pytest

from lockcheck.lockdep import findings as F
from lockcheck.commands.cli import main
from lockcheck.errors import TraceError
from lockcheck.events import Event
from lockcheck.lockdep.findings import Finding
from lockcheck.report.suppress import Config, config_from_table, find_pyproject, load_config, load_suppress_file

ABBA = ("T1 acquire &mm->mmap_sem\nT1 acquire &sb->s_umount\nT1 release &sb->s_umount\nT1 release &mm->mmap_sem\n"
        "T2 acquire &sb->s_umount\nT2 acquire &mm->mmap_sem\nT2 release &mm->mmap_sem\nT2 release &sb->s_umount\n")


def run(*argv: str, cwd: Path | None = None) -> tuple[int, str, str]:
    out, err = io.StringIO(), io.StringIO()
    old = os.getcwd()
    if cwd is not None:
        os.chdir(cwd)
    try:
        code = main(list(argv), stdout=out, stderr=err)
    finally:
        os.chdir(old)
    return code, out.getvalue(), err.getvalue()


def circular(*classes: str) -> Finding:
    return Finding(kind=F.CIRCULAR, task="T", lock=classes[0], held=classes[-1], location="t.lt:1",
                   cycle=list(classes))


def test_matching_by_kind_and_globs():
    config = config_from_table({"suppress": [
        {"kind": "circular-dependency", "classes": ["&mm->*", "&sb->*"]},
        {"kind": "recursive-*", "classes": ["&rq->lock*"]},
        {"classes": ["never"]},
    ]}, "cfg.toml")
    kept, suppressed = config.filter([
        circular("&mm->mmap_sem", "&sb->s_umount"),
        circular("&mm->mmap_sem", "&other"),
        Finding(kind=F.RECURSIVE, task="T", lock="&rq->lock/1", held="&rq->lock", location="t.lt:2"),
    ])
    assert [f.cycle for f in suppressed if f.cycle] == [["&mm->mmap_sem", "&sb->s_umount"]]
    assert len(suppressed) == 2 and len(kept) == 1
    notes = config.stale_notes()
    assert len(notes) == 1 and "suppress[2]" in notes[0] and "classes=[never]" in notes[0]


def test_aliases_rewrite_events_keeping_instances_apart():
    config = config_from_table({"alias": [{"pattern": r"inode#(\d+)", "class": "inode"},
                                          {"pattern": r"conn-(?P<kind>[a-z]+)-\d+", "class": r"conn-\g<kind>"},
                                          {"pattern": "unused", "class": "x"}]}, "cfg.toml")
    events = [Event("T1", "acquire", "inode#12"), Event("T1", "acquire", "inode#13", instance="0x1"),
              Event("T1", "acquire", "conn-tcp-7", nest=("inode#12", None)), Event("T1", "acquire", "plain")]
    out = list(config.apply_aliases(events))
    assert [(e.lock, e.instance) for e in out] == [("inode", "inode#12"), ("inode", "inode#13@0x1"),
                                                   ("conn-tcp", "conn-tcp-7"), ("plain", None)]
    assert out[2].nest == ("inode", "inode#12")
    assert [a.hits for a in config.aliases] == [3, 1, 0]
    assert config.stale_notes() == ["cfg.toml: alias[2] ('unused' -> 'x') matched no lock; remove it if stale"]


def test_aliased_instances_nest_as_one_class(tmp_path: Path):
    trace = tmp_path / "t.lt"
    trace.write_text("T1 acquire inode#1\nT1 acquire inode#2\nT1 release inode#2\nT1 release inode#1\n")
    sup = tmp_path / "s.toml"
    sup.write_text("[[alias]]\npattern = 'inode#\\d+'\nclass = 'inode'\n")
    assert run("check", str(trace), "--no-config")[0] == 0
    code, out, _ = run("check", str(trace), "--suppress", str(sup), "--format", "json", "--no-config")
    assert code == 1
    assert json.loads(out)["findings"][0]["kind"] == "recursive-locking"


def test_check_with_suppress_file_and_stale_note(tmp_path: Path):
    trace = tmp_path / "abba.lt"
    trace.write_text(ABBA)
    sup = tmp_path / "lockcheck-suppress.toml"
    sup.write_text('suppress = [\n  {kind = "circular-dependency", classes = ["&mm->mmap_sem", "&sb->*"], '
                   'reason = "known"},\n  {kind = "held-at-exit", classes = ["gone"]},\n]\n')
    code, out, _ = run("check", str(trace), "--suppress", str(sup), "--format", "json", "--no-config")
    assert code == 0
    doc = json.loads(out)
    assert doc["findings"] == [] and doc["suppressed"] == 1
    assert any("suppress[1]" in note and "matched nothing" in note for note in doc["notes"])


def test_pyproject_tool_lockcheck_is_found_and_used(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text(
        '[project]\nname = "x"\n\n[tool.lockcheck]\n'
        'suppress = [{kind = "circular-dependency", classes = ["&mm->*"]}]\n')
    sub = tmp_path / "sub"
    sub.mkdir()
    (sub / "abba.lt").write_text(ABBA)
    assert find_pyproject(str(sub)) == str(tmp_path / "pyproject.toml")
    assert run("check", "abba.lt", cwd=sub)[0] == 0
    assert run("check", "abba.lt", "--no-config", cwd=sub)[0] == 1
    # diff reads it too
    (sub / "main.lt").write_text(ABBA.split("T2")[0])
    assert run("diff", "main.lt", "abba.lt", cwd=sub)[0] == 0


def test_pyproject_without_section_is_ignored(tmp_path: Path):
    (tmp_path / "pyproject.toml").write_text('[project]\nname = "x"\n')
    assert find_pyproject(str(tmp_path)) is None
    assert load_config(pyproject=None, use_pyproject=False).suppressions == []


@pytest.mark.parametrize("text, line, message", [
    ("suppress = [\n  {kind = \n]\n", 2, "invalid TOML"),
    ('suppress = "x"\n', 1, "suppress: expected a list"),
    ('suppress = [{kind = "x", colour = "red"}]\n', 1, "unknown key 'colour'"),
    ('suppress = [{}]\n', 1, "would accept everything"),
    ('[[alias]]\npattern = "("\nclass = "x"\n', 2, "bad pattern"),
    ('[[alias]]\npattern = "(a+)+b"\nclass = "x"\n', 2, "not a group"),
    ('[[alias]]\nglob = "a*"\npattern = "a"\nclass = "x"\n', 1, "pattern (a regex) or glob"),
    ('typo = 1\n', 1, "unknown lockcheck setting 'typo'"),
    ('x = ' + '[' * 100000 + ']' * 100000 + '\n', 1, "nested too deeply"),
    ('order = ' + '9' * 5000 + '\n', 1, "number too long"),
])
def test_bad_config_is_trace_error(tmp_path: Path, text: str, line, message: str):
    path = tmp_path / "s.toml"
    path.write_text(text)
    with pytest.raises(TraceError) as info:
        load_suppress_file(str(path))
    assert info.value.line == line
    assert message in info.value.message


def test_bad_config_on_command_line_is_exit_2(tmp_path: Path):
    trace = tmp_path / "t.lt"
    trace.write_text("T1 acquire A\n")
    sup = tmp_path / "s.toml"
    sup.write_text("suppress = [\n")
    code, _, err = run("check", str(trace), "--suppress", str(sup), "--no-config")
    assert code == 2 and err.startswith(f"{sup}:") and "Traceback" not in err


def test_empty_config_passes_events_through():
    events = [Event("T1", "acquire", "A")]
    assert list(Config().apply_aliases(events)) == events
