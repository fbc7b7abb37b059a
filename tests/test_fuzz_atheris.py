"""Coverage-guided fuzzing (atheris) of every reader, option file and saved-graph loader: no broken contract.

`tests/fuzz_atheris.py` is the harness; here it runs a fixed number of
inputs from a fixed seed, starting from one real file per target, in a
process of its own (libFuzzer ends its process).  A broken contract is a
libFuzzer crash: a non-zero exit and a `crash-*` file holding the input.
The hypothesis tests in `test_fuzz_inputs.py` cover the same ground by
generated text; this one follows the code's branches.
"""

from __future__ import annotations

import importlib.util
import platform
import os
import subprocess
import sys
from pathlib import Path

import pytest

HARNESS = Path(__file__).with_name("fuzz_atheris.py")
#: inputs per run: enough to get past every target's first checks, a few seconds of work
RUNS = 500

#: atheris ships wheels for x86-64 Linux only; there `.[test]` installs it and the test must run
needs_atheris = pytest.mark.skipif(
    not (sys.platform == "linux" and platform.machine() == "x86_64") and importlib.util.find_spec("atheris") is None,
    reason="atheris has no wheel for this platform")


@pytest.mark.slow
@needs_atheris
def test_fuzzing_every_input_keeps_the_contract(tmp_path: Path) -> None:
    corpus = tmp_path / "corpus"
    env = dict(os.environ, LOCKCHECK_FUZZ_WORK=str(tmp_path / "work"))  # nothing left in /tmp
    subprocess.run([sys.executable, str(HARNESS), "--write-seeds", str(corpus)], check=True, env=env)
    seeds = sorted(p.name for p in corpus.iterdir())
    assert len(seeds) == 22 and seeds[0] == "00-auto" and seeds[-1] == "21-boot-dir"
    result = subprocess.run([sys.executable, str(HARNESS), f"-runs={RUNS}", "-seed=1",
                             f"-artifact_prefix={tmp_path}/", str(corpus)],
                            capture_output=True, text=True, timeout=1800, env=env)
    crashes = sorted(tmp_path.glob("crash-*"))
    assert result.returncode == 0 and not crashes, \
        result.stderr[-3000:] + "".join(f"\n{p}: {p.read_bytes()[:300]!r}" for p in crashes)
    assert f"Done {RUNS} runs" in result.stderr
    # the fuzzer found inputs of its own beyond the seeds: it reached code they did not
    assert len(list(corpus.iterdir())) > len(seeds)


@pytest.mark.slow
@needs_atheris
def test_a_boot_directory_with_two_unreadable_files_keeps_the_contract(tmp_path: Path) -> None:
    """A boot directory is one input per file: two bad files are two error lines, not a broken
    contract (what the first campaign of the boot-dir target stopped on); the input is run as
    libFuzzer runs a saved crash, once."""
    sys.path.insert(0, str(HARNESS.parent))
    try:
        names = [line.split('"')[1] for line in HARNESS.read_text().splitlines()
                 if line.strip().startswith('("') and '",' in line]
    finally:
        sys.path.pop(0)
    index = names.index("boot-dir")
    bad_trace = b"#lockcheck-trace v1\n# a comment\n# \xcb\n"  # each a trace input of its own
    parts = [b"all clok classes:\n", bad_trace, bad_trace]
    unit = tmp_path / "unit"
    unit.write_bytes(bytes([index]) + b"\n\xff\xfe\n".join(parts))
    env = dict(os.environ, LOCKCHECK_FUZZ_WORK=str(tmp_path / "work"))
    result = subprocess.run([sys.executable, str(HARNESS), str(unit)], capture_output=True, text=True, check=False,
                            timeout=600, env=env)
    assert result.returncode == 0 and "Executed" in result.stderr, result.stderr[-3000:]
