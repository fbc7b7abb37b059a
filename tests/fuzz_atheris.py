"""Coverage-guided fuzzing of every input lockcheck reads, with atheris (libFuzzer for Python).

Run by `tests/test_fuzz_atheris.py` in a process of its own (libFuzzer ends
the process when it is done), or by hand for a longer campaign:

    python tests/fuzz_atheris.py -runs=100000 CORPUS_DIR

The first byte of an input picks a *target* (a reader, an option file, a
saved-graph loader, `stat`, `convert`, a pyproject.toml); the rest is the
file's content.  Whatever the bytes, lockcheck must keep its contract:
exit status 0, 1 or 2, no traceback and no "internal error", and with
status 2 exactly one error line (`FILE:LINE:COL: message`, or `FILE:
message` for a file as a whole).  A broken contract raises, which libFuzzer
reports as a crash and saves as `crash-*` under `-artifact_prefix`.

`--write-seeds DIR` writes the starting corpus (one seed per target, from
the repository's own traces and documents) and exits.
"""

from __future__ import annotations

import atexit
import importlib
import io
import os
import pkgutil
import shutil
import sys
import tempfile
from pathlib import Path
from typing import Callable

import atheris

with atheris.instrument_imports(include=["lockcheck"]):
    import lockcheck
    from lockcheck.commands.cli import main
    from lockcheck.util.wording import INDENT

    # every module now, so the ones commands import lazily (graph loaders, TOML, stat) are covered too
    for module in pkgutil.walk_packages(lockcheck.__path__, "lockcheck."):
        if module.name != "lockcheck.__main__":
            importlib.import_module(module.name)

ROOT = Path(__file__).resolve().parents[1]
#: a clean, well-formed trace for the targets that fuzz an option file
TRACE = str(ROOT / "traces" / "abba.lt")
#: every command option file and every reader; pyproject.toml is read from the working directory
Target = tuple[str, str, Callable[[str], list[str]], str]
CHECK = ["check", "--no-progress", "--no-config"]
TARGETS: list[Target] = [
    # name, file name, command line for that file, seed (a repository file)
    ("auto", "input", lambda f: [*CHECK, f], "traces/sample.ftrace"),
    ("lt", "t.lt", lambda f: [*CHECK, "--input-format", "lt", f], "tests/data/examples/mm_take_all_locks-nest.lt"),
    ("ftrace", "t.ftrace", lambda f: [*CHECK, "--input-format", "ftrace", f], "traces/sample.ftrace"),
    ("perf", "t.perf", lambda f: [*CHECK, "--input-format", "perf", f], "traces/sample.perf"),
    ("jsonl", "t.jsonl", lambda f: [*CHECK, "--input-format", "jsonl", f], "traces/sample.jsonl"),
    ("kernel-log", "t.log", lambda f: [*CHECK, "--input-format", "kernel-log", f],
     "tests/data/kernel-log/irq-inversion.log"),
    ("suppress", "s.toml", lambda f: [*CHECK, "--suppress", f, TRACE], "docs/suppress.md"),
    ("order", "order.txt", lambda f: [*CHECK, "--order", f, TRACE], ""),
    ("annotations", "rules.annotations", lambda f: [*CHECK, "--annotations", f, TRACE], "lockcheck/kernel/kernel.annotations"),
    ("lockdep-state", "lockdep", lambda f: [*CHECK, "--lockdep-state", f, TRACE], ""),
    ("baseline", "g.json", lambda f: [*CHECK, "--baseline", f, TRACE], ""),
    ("graphml", "g.graphml", lambda f: [*CHECK, "--baseline", f, TRACE], ""),
    ("diff", "base.json", lambda f: ["diff", "--no-config", f, TRACE], ""),
    ("stat", "lock_stat", lambda f: ["stat", "--no-progress", f], "tests/data/lock_stat/excerpt.txt"),
    ("convert", "c.trace", lambda f: ["convert", "--no-progress", f], "traces/sample.jsonl"),
    ("pyproject", "pyproject.toml", lambda f: ["check", "--no-progress", TRACE], "pyproject.toml"),
    # the boot's lockdep state, file by file: /proc/lockdep_chains, /proc/lockdep_stats, a dmesg
    ("lockdep-chains", "lockdep_chains", lambda f: [*CHECK, "--lockdep-state", f, TRACE],
     "tests/data/kernel-6.1/clean/lockdep_chains.txt.xz"),
    ("lockdep-stats", "lockdep_stats", lambda f: [*CHECK, "--lockdep-state", f, TRACE],
     "tests/data/kernel-6.1/clean/lockdep_stats.txt"),
    ("state-dmesg", "dmesg", lambda f: [*CHECK, "--lockdep-state", f, TRACE], "tests/data/kernel-log/recursive.log"),
    ("splat-log", "splat.log", lambda f: [*CHECK, f], "tests/data/kernel-log/circular-3-classes.log"),
    # a directory of boot files (`FILES` parts split at `SEPARATOR`): given as --lockdep-state,
    # and as a boot directory input with a trace of its own (`lockcheck.kernel.boot`)
    ("state-dir", "state/", lambda f: [*CHECK, "--lockdep-state", f, TRACE], ""),
    ("boot-dir", "boot/", lambda f: [*CHECK, f], ""),
]
#: a directory target's bytes are its files' contents, one after the other, split here
SEPARATOR = b"\n\xff\xfe\n"
#: the files of a directory target, in the order of its parts (a part that is missing: no file)
FILES = ("lockdep.txt", "lockdep_chains.txt", "lockdep_stats.txt", "dmesg.txt", "trace.lt", "meta.txt")
#: what a seed holds of a large repository file (libFuzzer grows inputs from there)
SEED_BYTES = 6000

def _work_dir() -> Path:
    """Where inputs are written: LOCKCHECK_FUZZ_WORK (the test's own temporary directory), or a
    new one removed at exit -- libFuzzer's own exit skips that, and each run left one behind."""
    given = os.environ.get("LOCKCHECK_FUZZ_WORK")
    if given:
        Path(given).mkdir(parents=True, exist_ok=True)
        return Path(given)
    work = Path(tempfile.mkdtemp(prefix="lockcheck-atheris."))
    atexit.register(shutil.rmtree, work, ignore_errors=True)
    return work


WORK = _work_dir()


def run_one(data: bytes) -> None:
    """One fuzz input: the target its first byte names, fed the rest; raises if the contract breaks."""
    if not data:
        return
    name, filename, command, _ = TARGETS[data[0] % len(TARGETS)]
    path = WORK / filename
    if filename.endswith("/"):
        _write_directory(path, data[1:])
    else:
        path.write_bytes(data[1:])
    out, err = io.StringIO(), io.StringIO()
    here = os.getcwd()
    os.chdir(WORK)  # the pyproject.toml target's file is found here; the others pass --no-config
    try:
        status = main(command(str(path)), stdout=out, stderr=err)
    finally:
        os.chdir(here)  # libFuzzer writes new inputs to the corpus directory it was given
        if path.is_dir():
            shutil.rmtree(path)
        else:
            path.unlink()
    text = err.getvalue()
    # a note may be wrapped (`wording.wrap_note`): its later lines, indented, belong to it
    errors: list[str] = []
    in_note = False
    for line in text.splitlines():
        if line.startswith("lockcheck: ") or (in_note and line.startswith(INDENT)):
            in_note = True
        else:
            in_note = False
            errors.append(line)
    # a directory is one input per file: each file that does not read has its own error line
    allowed = _files_with_errors(errors, path) if filename.endswith("/") else 1
    broken = ("internal error" in text or "Traceback" in text or status not in (0, 1, 2)
              or (status == 2 and not 1 <= len(errors) <= allowed) or (status != 2 and errors))
    if broken:
        raise AssertionError(f"target {name}: exit status {status}, stderr:\n{text}")


def _files_with_errors(errors: list[str], directory: Path) -> int:
    """How many error lines a directory target may have: one per file, each naming its own file
    of the directory (or the directory itself); 0 when a line names anything else or a file twice."""
    named = []
    for line in errors:
        file = line.split(": ", 1)[0].split(":", 1)[0]
        if not (file == str(directory) or Path(file).parent == directory):
            return 0
        named.append(file)
    return len(named) if len(set(named)) == len(named) else 0


def _write_directory(path: Path, data: bytes) -> None:
    """A directory target: its parts (split at SEPARATOR) written as FILES, in order."""
    path.mkdir()
    for name, part in zip(FILES, data.split(SEPARATOR)):
        (path / name).write_bytes(part)


def _seed_body(seed: str) -> bytes:
    """The start of a repository file (decompressed when it is `.xz`), at most SEED_BYTES."""
    import lzma

    body = (ROOT / seed).read_bytes()
    if seed.endswith(".xz"):
        body = lzma.decompress(body)
    return body[:SEED_BYTES]


def _boot_seed() -> bytes:
    """A small boot directory: lockdep, chains, stats, dmesg and a trace, as a directory target."""
    data = ROOT / "tests" / "data"
    parts = [_seed_body("tests/data/kernel-6.1/clean/lockdep.txt.xz"),
             _seed_body("tests/data/kernel-6.1/clean/lockdep_chains.txt.xz"),
             (data / "kernel-6.1" / "clean" / "lockdep_stats.txt").read_bytes(),
             (data / "kernel-log" / "circular-2-classes.log").read_bytes(),
             (ROOT / "traces" / "abba.lt").read_bytes()]
    return SEPARATOR.join(parts)


def write_seeds(directory: Path) -> None:
    """One seed per target: a real file of that kind from the repository (a saved graph made here)."""
    directory.mkdir(parents=True, exist_ok=True)
    for index, (name, filename, _, seed) in enumerate(TARGETS):
        if seed:
            body = _seed_body(seed) if seed.endswith(".xz") else (ROOT / seed).read_bytes()
        elif filename.endswith("/"):
            body = _boot_seed()
        elif name == "order":
            body = (b"&mm->mmap_sem < &anon_vma->rwsem\ngroup FS = &sb->s_umount, &inode->i_rwsem\n"
                    b"FS < &mm->mmap_sem\nnestable &rq->lock by address\n")
        elif name == "lockdep-state":
            body = b"all lock classes:\n00ab FD:    1 BD:    2 +.+.: &x->wait\n -> [00ac] B\n"
        else:
            graph = WORK / ("seed.graphml" if name == "graphml" else "seed.json")
            main(["graph", "--no-config", "--no-progress", TRACE, "-o", str(graph)], stdout=io.StringIO(),
                 stderr=io.StringIO())
            body = graph.read_bytes()
        (directory / f"{index:02d}-{name}").write_bytes(bytes([index]) + body)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--write-seeds"]:
        write_seeds(Path(sys.argv[2]))
        sys.exit(0)
    atheris.Setup(sys.argv, run_one)
    atheris.Fuzz()
