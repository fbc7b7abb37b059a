"""The `.lt` reader: every op, flag, key and quoting rule; every error with its line and column;
and opening inputs (compressed, stdin, directories, bad bytes)."""

from __future__ import annotations

import gzip
import io
import lzma
import os
import sys
from pathlib import Path

import pytest

from lockcheck.errors import TraceError, UsageError
from lockcheck.events import (
    ACQUIRE, ACQUIRED, ALL_OPS, CONTENDED, EXIT, FREE, HARDIRQ_ENTER, IRQS_OFF, READ, RELEASE, RREAD,
    WRITE, Event,
)
from lockcheck.readers import read, read_all
from lockcheck.readers import lt, lt_write
from lockcheck.readers import inputs
from lockcheck.readers.source import open_lines
from lockcheck.kernel.boot import DIRECTORY_HOOKS

from testdata import EXAMPLES, deny_open


def one(line: str) -> Event:
    """The event of one line, read by the public `parse` (fast path, then grammar)."""
    (event,) = lt.parse([line], "t.lt")
    return event


def error(text: str) -> TraceError:
    """The TraceError `parse` raises for a trace text."""
    with pytest.raises(TraceError) as info:
        list(lt.parse(text.split("\n"), "t.lt"))
    return info.value


# -- events ------------------------------------------------------------------------------
def test_plain_acquire_defaults():
    ev = one("T1 acquire A")
    assert (ev.task, ev.op, ev.lock, ev.instance) == ("T1", ACQUIRE, "A", None)
    assert (ev.mode, ev.trylock, ev.subclass, ev.nest, ev.check) == (WRITE, False, 0, None, True)
    assert (ev.at, ev.ts, ev.cpu, ev.file, ev.line) == (None, None, None, "t.lt", 1)
    assert ev.op is ACQUIRE  # the interned constant: the checker compares with `is`


@pytest.mark.parametrize("op", sorted(ALL_OPS))
def test_every_op(op):
    line = f"T1 {op} A@1" if op in lt.LOCK_OPS else f"T1 {op}"
    line += {"set-class": " B", "set-subclass": " subclass=1"}.get(op, "")
    ev = one(line)
    assert ev.op is op
    assert ev.lock == ("A" if op in lt.LOCK_OPS else None)


def test_every_option_of_acquire():
    ev = one("qemu/1 acquire &anon_vma->rwlock@0xffff8b9f rread try subclass=7 nest=&mm->mmap_sem@0x2 "
             "nocheck at=mm_take_all_locks+0x146/0x190 ts=12.5 cpu=3")
    assert ev.lock == "&anon_vma->rwlock" and ev.instance == "0xffff8b9f"
    assert ev.mode == RREAD and ev.trylock and ev.subclass == 7 and not ev.check
    assert ev.nest == ("&mm->mmap_sem", "0x2")
    assert (ev.at, ev.ts, ev.cpu) == ("mm_take_all_locks+0x146/0x190", 12.5, 3)


@pytest.mark.parametrize("word,mode", [("write", WRITE), ("read", READ), ("rread", RREAD)])
def test_modes(word, mode):
    assert one(f"T1 acquire A {word}").mode == mode


def test_options_in_any_order():
    assert one("T1 acquire A at=x try read") == one("T1 acquire A read try at=x")


def test_site_and_ts_cpu_on_other_ops():
    assert one("T1 release A at=f.py:3").at == "f.py:3"
    assert one("T1 contended A at=f.py:3 ts=1 cpu=0").ts == 1.0
    assert one("T1 irqs-off at=local_irq_disable").op is IRQS_OFF
    assert one("T1 hardirq-enter cpu=2").cpu == 2
    assert one("T1 exit ts=3.25").ts == 3.25


def test_kernel_class_names_are_bare():
    for name in ("&(&zone->lock)->rlock", "sb_writers#3", "(wq_completion)events", "#weird", "a\\b"):
        assert one(f"T1 acquire {name}").lock == name


def test_keywords_are_lock_names_in_the_lock_position():
    ev = one("read acquire read read")
    assert (ev.task, ev.lock, ev.mode) == ("read", "read", READ)
    assert one("exit release try").lock == "try"


def test_instance_is_any_token():
    assert one("T1 release A@x@y=1").instance == "x@y=1"


def test_quoted_class_and_site():
    ev = one('T1 acquire "worker pool lock"@0x7f12 at="foo+0x1c/0x80 [kvm]"')
    assert (ev.lock, ev.instance, ev.at) == ("worker pool lock", "0x7f12", "foo+0x1c/0x80 [kvm]")
    assert one(r'T1 acquire "a \"q\" \\ b=c@d"').lock == 'a "q" \\ b=c@d'
    assert one('T1 acquire A nest="the nest"@1').nest == ("the nest", "1")


def test_blanks_tabs_crlf_comments_and_header():
    text = ["#lockcheck-trace v1", "", "   ", "\t# indented comment", "T1\tacquire  A \t",
            "  T1 release A\r\n", "# the end\n"]
    events = list(lt.parse(text, "t.lt"))
    assert [(e.op, e.lock, e.line) for e in events] == [(ACQUIRE, "A", 5), (RELEASE, "A", 6)]


def test_parse_streams():
    def lines():
        yield "T1 acquire A"
        raise AssertionError("read too far")

    assert next(iter(lt.parse(lines(), "t.lt"))).lock == "A"


# -- errors: line and column ---------------------------------------------------------------
@pytest.mark.parametrize("line,col,message", [
    ("T1 aquire B", 4, "unknown op 'aquire' (did you mean 'acquire'?)"),
    ("T1 acquirex B", 4, "unknown op 'acquirex'"),
    ("T1", 3, "missing op"),
    ("T1 acquire", 11, "missing lock"),
    ("T1 acquire ", 12, "missing lock"),
    ("T1 acquire nest=B", 12, "missing lock"),
    ("T1 acquire A nest=", 19, "missing lock after 'nest='"),
    ("T1 acquire A nest= try", 19, "missing lock after 'nest='"),
    ("T1 acquire A at=", 17, "missing site after 'at='"),
    ("T1 acquire A ts=", 17, "missing value after 'ts='"),
    ("T1 acquire A@", 14, "missing instance after '@'"),
    ("T1 acquire @x", 12, "missing lock class before '@'"),
    ('T1 acquire "abc', 12, "unterminated quoted string"),
    ('T1 acquire A at="x y', 17, "unterminated quoted string"),
    ('T1 acquire A at="x \\q"', 20, "invalid escape '\\q'"),
    ('T1 acquire "a b"x', 17, "expected a blank after the quoted string"),
    ("T1 acquire A subclas=1", 14, "unknown key 'subclas' (did you mean 'subclass'?)"),
    ("T1 acquire A colour=red", 14, "unknown key 'colour'"),
    ("T1 acquire A tyr", 14, "unknown option 'tyr' (did you mean 'try'?)"),
    ("T1 acquire A read=1", 14, "'read' takes no value"),
    ("T1 acquire A subclass=8", 23, "subclass must be 0..7"),
    ("T1 acquire A subclass=-1", 23, "subclass must be 0..7"),
    ("T1 acquire A cpu=x", 18, "cpu must be a non-negative integer"),
    ("T1 acquire A ts=soon", 17, "ts must be a number of seconds"),
    ("T1 acquire A ts=nan", 17, "ts must be a number of seconds"),
    ("T1 release A nest=B", 14, "'nest=' is only valid on acquire"),
    ("T1 release A try", 14, "'try' is only valid on acquire"),
    ("T1 release A read", 14, "'read' is only valid on acquire"),
    ("T1 free A at=x", 11, "'at=' is only valid on"),
    ("T1 exit A", 9, "'exit' takes no lock"),
    ("T1 hardirq-enter A", 18, "'hardirq-enter' takes no lock"),
    ("T1 acquire A read rread", 19, "mode given twice"),
    ("T1 acquire A try try", 18, "'try' given twice"),
    ("T1 acquire A at=x at=y", 19, "'at=' given twice"),
    ("T1 acquire A =x", 14, "missing key before '='"),
    ("T1 acquire A at", 16, "missing '=' and value after 'at'"),
    ("T1 acquire A ts=\"1\"", 17, "the value of 'ts=' cannot be quoted"),
    ('T1 acquire A "x"', 14, "unexpected quoted string"),
])
def test_error_line_col_message(line, col, message):
    err = error(f"T0 acquire Z\n# comment\n{line}")
    assert (err.file, err.line, err.col) == ("t.lt", 3, col)
    assert message in err.message
    assert err.source == line
    assert err.format().startswith(f"t.lt:3:{col}: ")


def test_malformed_example_names_line_3():
    with pytest.raises(TraceError) as info:
        list(read(str(EXAMPLES / "malformed.lt")))
    assert info.value.format() == f"{EXAMPLES / 'malformed.lt'}:3:4: unknown op 'aquire' (did you mean 'acquire'?)"


def test_every_example_reads():
    read_ok = 0
    for path in sorted(EXAMPLES.glob("*.lt")):
        if path.name != "malformed.lt":
            assert list(read(str(path))), path
            read_ok += 1
    assert read_ok >= 13, f"only {read_ok} examples found in {EXAMPLES}"


# -- format_event ---------------------------------------------------------------------------
@pytest.mark.parametrize("line", [
    "T1 acquire A",
    "qemu/1 acquire &anon_vma->rwlock@0xff rread try subclass=1 nest=&mm->mmap_sem nocheck at=x+0x1/0x2 ts=1.5 cpu=3",
    'T1 acquire "worker pool lock"@0x7f12 at="foo [kvm]"',
    "T1 release A@1 at=f.py:3",
    "T1 hardirq-enter",
    "T1 exit cpu=0",
])
def test_format_event_round_trips(line):
    ev = one(line)
    assert one(lt_write.format_event(ev)) == ev


def test_format_event_drops_what_the_op_does_not_take():
    ev = Event("T1", RELEASE, "A", mode=READ, trylock=True, at="x")
    assert lt_write.format_event(ev) == "T1 release A at=x"


@pytest.mark.parametrize("ev", [Event("my task", EXIT), Event("#1", EXIT), Event("T1", FREE, "A", "0x 1"),
                                Event("T1", ACQUIRE, "a\nb")])
def test_format_event_refuses_what_the_format_cannot_carry(ev):
    with pytest.raises(ValueError):
        lt_write.format_event(ev)


# -- sniffing ----------------------------------------------------------------------------------
def test_sniff():
    assert lt.sniff(["#lockcheck-trace v1"])
    assert lt.sniff(["# hello", "T1 acquire A"])
    assert not lt.sniff(["# tracer: nop", "#"])
    assert not lt.sniff(['{"task": "T1", "op": "acquire"}'])
    assert not lt.sniff(["  bash-1234  [000] .... 123.456: lock_acquire: 0xff &rq->lock"])


# -- inputs ------------------------------------------------------------------------------------
TRACE = "#lockcheck-trace v1\nT1 acquire A\r\nT1 release A\n"


def ops(path) -> list[tuple[str, str, int]]:
    return [(e.op, e.lock, e.line) for e in read(str(path))]


EXPECTED = [(ACQUIRE, "A", 2), (RELEASE, "A", 3)]


@pytest.mark.parametrize("compress", [gzip.compress, lzma.compress, lambda b: b], ids=["gz", "xz", "plain"])
def test_compressed_by_magic_not_name(tmp_path, compress):
    path = tmp_path / "trace.data"  # no telling suffix
    path.write_bytes(compress(TRACE.encode()))
    assert ops(path) == EXPECTED


def test_zstd(tmp_path):
    import zstandard  # a dependency of lockcheck: zstd input is part of the contract
    path = tmp_path / "t.lt.zst"
    path.write_bytes(zstandard.ZstdCompressor().compress(TRACE.encode()))
    assert ops(path) == EXPECTED


def test_zstd_without_zstandard(tmp_path, monkeypatch):
    path = tmp_path / "t.lt.zst"
    path.write_bytes(b"\x28\xb5\x2f\xfd" + b"\x00" * 16)
    monkeypatch.setitem(sys.modules, "zstandard", None)
    with pytest.raises(TraceError, match="zstandard"):
        list(read(str(path)))


def test_truncated_gzip(tmp_path):
    path = tmp_path / "t.lt.gz"
    path.write_bytes(gzip.compress((TRACE * 50).encode())[:-12])
    with pytest.raises(TraceError, match="cannot read"):
        list(read(str(path)))


def test_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(gzip.compress(TRACE.encode()))))
    events = list(read("-"))
    assert [(e.op, e.line, e.file) for e in events] == [(ACQUIRE, 2, "<stdin>"), (RELEASE, 3, "<stdin>")]


def test_stdin_error_names_stdin(monkeypatch):
    monkeypatch.setattr(sys, "stdin", io.TextIOWrapper(io.BytesIO(b"T1 aquire A\n")))
    with pytest.raises(TraceError) as info:
        list(read("-"))
    assert info.value.format().startswith("<stdin>:1:4: unknown op")


def test_sniff_buffer_is_replayed(tmp_path):
    path = tmp_path / "t.lt"
    path.write_text("# c\n" * 100 + "T1 acquire A\n" + "\n" * 10 + "T1 release A\n")
    assert [e.line for e in read(str(path))] == [101, 112]


def test_empty_file_yields_nothing(tmp_path):
    path = tmp_path / "empty.lt"
    path.write_bytes(b"")
    assert list(read(str(path))) == []
    path.write_text("#lockcheck-trace v1\n\n# nothing\n")
    assert list(read(str(path))) == []


def test_invalid_utf8_names_line_and_column(tmp_path):
    path = tmp_path / "t.lt"
    path.write_bytes("T1 acquire A\nT1 acquire é\xff\n".encode("utf-8", "surrogateescape").replace(b"\xc3\xbf", b"\xff"))
    with pytest.raises(TraceError) as info:
        list(read(str(path)))
    assert (info.value.line, info.value.col) == (2, 13)
    assert "invalid UTF-8" in info.value.message


def test_utf8_names_and_bom(tmp_path):
    path = tmp_path / "t.lt"
    path.write_bytes("\ufeffT1 acquire ünïcode\n".encode())
    assert [e.lock for e in read(str(path))] == ["ünïcode"]


def test_nul_garbage(tmp_path):
    path = tmp_path / "t.lt"
    path.write_bytes(b"T1 acquire A\n\x7fELF\x02\x01\x01\x00\x00\x00")
    with pytest.raises(TraceError) as info:
        list(read(str(path)))
    assert (info.value.line, info.value.col) == (2, 8)
    assert "NUL" in info.value.message


@pytest.mark.parametrize("make,message", [
    (lambda p: p / "missing.lt", "No such file or directory"),
    (lambda p: p, "Is a directory"),
])
def test_unopenable(tmp_path, make, message):
    path = make(tmp_path)
    with pytest.raises(TraceError) as info:
        open_lines(str(path))
    assert info.value.format() == f"{path}: {message}"


def test_permission_denied(tmp_path, monkeypatch):
    path = tmp_path / "t.lt"
    path.write_text(TRACE)
    path.chmod(0)
    if hasattr(os, "geteuid") and os.geteuid() == 0:
        deny_open(monkeypatch, path)  # root reads every file
    with pytest.raises(TraceError, match="Permission denied"):
        open_lines(str(path))
    monkeypatch.undo()


def test_directory_expands_to_every_file_sorted_each_classified(tmp_path):
    (tmp_path / "sub").mkdir()
    (tmp_path / ".hidden").mkdir()
    files = {"b.lt": "T1 acquire A\n", "sub/c.jsonl": '{"task": "T", "op": "exit"}\n',
             "x.expect": '{"exit": 0}\n', ".h.lt": "T1 acquire A\n", ".hidden/e.lt": "T1 acquire A\n",
             "notes.md": "# notes\n", "t.trace": "T1 exit\n", "dump": "all lock classes:\n"}
    for name, text in files.items():
        (tmp_path / name).write_text(text)
    (tmp_path / "a.ftrace.gz").write_bytes(gzip.compress(HEADER_FTRACE.encode()))
    got = [(os.path.relpath(i.path, tmp_path), i.kind) for i in inputs.expand([str(tmp_path), "-", "other.lt"], DIRECTORY_HOOKS)]
    # a folder with a capture and a /proc/lockdep dump is a boot: the dump is the capture's state
    assert got == [("a.ftrace.gz", inputs.TRACE), ("b.lt", inputs.TRACE), ("dump", inputs.SKIP), ("notes.md", inputs.SKIP),
                   ("sub/c.jsonl", inputs.TRACE), ("t.trace", inputs.TRACE), ("x.expect", inputs.SKIP),
                   (os.path.relpath("-", tmp_path), inputs.TRACE), (os.path.relpath("other.lt", tmp_path), inputs.TRACE)]


HEADER_FTRACE = "# tracer: nop\n#\n    bash-1 [000] ....  1.000000: lock_acquire: 0xff A\n"


def test_directory_without_traces(tmp_path):
    (tmp_path / "x.expect").write_text("{}")
    with pytest.raises(TraceError, match="no trace in this directory"):
        list(read_all([str(tmp_path)]))


def test_read_all_over_files_and_directories(tmp_path):
    (tmp_path / "d").mkdir()
    (tmp_path / "d" / "1.lt").write_text("T1 acquire A\n")
    (tmp_path / "d" / "2.lt.gz").write_bytes(gzip.compress(b"T2 acquire B\n"))
    (tmp_path / "3.lt").write_text("T3 acquire C\n")
    got = [(e.task, Path(e.file).name) for e in read_all([str(tmp_path / "d"), str(tmp_path / "3.lt")])]
    assert got == [("T1", "1.lt"), ("T2", "2.lt.gz"), ("T3", "3.lt")]


def test_forced_formats(tmp_path):
    path = tmp_path / "t.txt"
    path.write_text("T1 acquire A\n")
    assert len(list(read(str(path), "lt"))) == 1
    with pytest.raises(UsageError, match="unknown input format 'nope'"):
        read(str(path), "nope")
    with pytest.raises(UsageError):
        read_all([str(path)], "nope")


def test_other_ops_read_from_file(tmp_path):
    path = tmp_path / "t.lt"
    path.write_text("T1 contended A\nT1 acquired A\nT1 free A@1\nT1 hardirq-enter\n")
    assert [e.op for e in read(str(path))] == [CONTENDED, ACQUIRED, FREE, HARDIRQ_ENTER]
