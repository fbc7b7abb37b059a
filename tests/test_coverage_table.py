"""docs/lockdep-coverage.md held to what lockcheck does (issue 29's coverage table).

Each of lockdep's checks and verdict-changing features that an input can say
has its smallest input in tests/data/coverage/, and `lockcheck check --format
json` must give on it exactly the findings the kernel gives (the kernel's
verdict is in each input's comment lines).  A row whose kernel verdict is "no
report" is also run with its annotation taken out, and must then give the
report: a quiet row cannot pass because lockcheck saw nothing.  The table's
rows, statuses and counts must agree with these inputs, so the table cannot
claim a row that is not tested, nor list a tested input under "no".
"""

from __future__ import annotations

import io
import json
import re
from pathlib import Path

import pytest

from lockcheck.commands import cli

from testdata import ROOT

DATA = ROOT / "tests" / "data" / "coverage"
DOC = ROOT / "docs" / "lockdep-coverage.md"

#: input -> the findings the kernel gives on it, as (kind, lock) in report order; [] for no report
EXPECTED: dict[str, list[tuple[str, str]]] = {
    # dependencies: validate_chain()
    "01-recursive.lt": [("recursive-locking", "A")],
    "02-circular.lt": [("circular-dependency", "A")],
    "03-subclass.lt": [],
    "04-nest-lock.lt": [],
    "05-nest-not-held.lt": [("nest-lock-not-held", "A")],
    "06-trylock.lt": [],
    "07-read-twice.lt": [("recursive-locking", "A")],
    "08-rread-twice.lt": [],
    "09-rread-cycle.lt": [],
    "10-read-cycle.lt": [("circular-dependency", "A")],
    "11-nocheck.lt": [],
    "12-release-below-top.lt": [],
    "13-chain-cache.lt": [],
    "14-cmp-fn.lt": [],
    "15-max-lock-depth.lt": [("lock-depth-exceeded", "L47")],
    "16-irq-context-chains.lt": [],
    # irq usage
    "17-inconsistent.lt": [("inconsistent-lock-state", "H"), ("inconsistent-lock-state", "S")],
    "18-irq-inversion.lt": [("irq-lock-inversion", "A")],
    "19-safe-unsafe.lt": [("irq-lock-inversion", "B")],
    "20-usage-read-states.lt": [("inconsistent-lock-state", "W")],
    "21-irqs-on-held.lt": [("inconsistent-lock-state", "A")],
    "22-trylock-usage.lt": [("inconsistent-lock-state", "B")],
    "23-preempt-rt-softirq.lt": [],
    "24-irqs-on-in-hardirq.lt": [("lockdep-warning", "DEBUG_LOCKS_WARN_ON(lockdep_hardirq_context())")],
    # wait contexts
    "25-wait-mutex-under-spin.lt": [("invalid-wait-context", "M")],
    "26-wait-spin-under-raw.lt": [("invalid-wait-context", "S")],
    "27-wait-spin-in-hardirq.lt": [("invalid-wait-context", "S")],
    "28-wait-threaded-hardirq.lt": [],
    "29-wait-rcu.lt": [("invalid-wait-context", "M")],
    "30-wait-trylock.lt": [],
    "31-wait-override.lt": [],
    "32-percpu-usage-skip.lt": [],
    # the kernel prints the WARN only (lockdep is off after it); lockcheck goes on (table row 53)
    "33-percpu-low-inner.lt": [("lockdep-warning", "ll"), ("irq-lock-inversion", "ll")],
    # held-lock ops
    "34-unlock-imbalance.lt": [("unlock-imbalance", "A"), ("unlock-imbalance", "C")],
    "35-set-subclass.lt": [],
    "36-set-class.lt": [],
    "37-downgrade.lt": [],
    "38-downgrade-read.lt": [("bad-downgrade", "A")],
    "39-sync-validated.lt": [("circular-dependency", "A")],
    "40-sync-no-irq-usage.lt": [],
    "41-pin.lt": [("pin-violation", "rq")],
    "42-asserts.lt": [("assertion-failed", "B"), ("assertion-failed", "lockdep_assert_irqs_disabled()")],
    "43-bad-contention.lt": [("bad-contention", "B")],
    "44-unregister.lt": [],
    # the end of a task or of a lock's memory
    "45-held-freed.lt": [("held-lock-freed", "A")],
    "46-task-exit.lt": [("held-at-exit", "A")],
    "47-sys-exit.lt": [("held-at-exit", "A")],
    # lockdep's own state: read from the kernel's log
    "48-suspicious-rcu.log": [("suspicious-rcu-usage", "net/ipv4/ip_tunnel.c:221")],
    "49-capacity.log": [("lockdep-warning", "BUG: MAX_LOCKDEP_ENTRIES too low!")],
    "50-chain-key-collision.log": [("lockdep-warning", "chain_key collision")],
    "51-other-warnings.log": [("lockdep-warning", "INFO: trying to register non-static key.")],
    # one report per boot, with --first (without it both problems are reported)
    "53-first-report.lt": [("recursive-locking", "A")],
}

#: inputs checked with options: the kernel's one-report-per-boot is `--first`
OPTIONS: dict[str, list[str]] = {"53-first-report.lt": ["--first"]}

#: quiet inputs -> (text, what replaces it): the annotation taken out, and the kind the kernel then reports
WITHOUT: dict[str, tuple[str, str, str]] = {
    "03-subclass.lt": (" subclass=1", "", "recursive-locking"),
    "04-nest-lock.lt": (" nest=M", "", "recursive-locking"),
    "06-trylock.lt": (" try", "", "circular-dependency"),
    "08-rread-twice.lt": ("rread", "read", "recursive-locking"),
    "09-rread-cycle.lt": ("rread", "read", "circular-dependency"),
    "11-nocheck.lt": (" nocheck", "", "circular-dependency"),
    "12-release-below-top.lt": (" try", "", "circular-dependency"),
    "13-chain-cache.lt": ("T1 acquire A@1 cmp=instance\nT1 acquire A@2\nT1 release A@2\nT1 release A@1\n",
                          "T1 acquire A@9 cmp=instance\nT1 release A@9\n", "recursive-locking"),
    "14-cmp-fn.lt": (" cmp=instance", "", "recursive-locking"),
    "16-irq-context-chains.lt": ("T1 hardirq-enter\n", "", "circular-dependency"),
    "23-preempt-rt-softirq.lt": (" preempt-rt", "", "inconsistent-lock-state"),
    "28-wait-threaded-hardirq.lt": (" threaded", "", "invalid-wait-context"),
    "30-wait-trylock.lt": (" try", "", "invalid-wait-context"),
    "31-wait-override.lt": (" type=override", "", "invalid-wait-context"),
    "32-percpu-usage-skip.lt": (" type=percpu", "", "irq-lock-inversion"),
    "35-set-subclass.lt": ("T1 set-subclass rq@1 subclass=1\n", "", "recursive-locking"),
    "36-set-class.lt": ("T1 set-class A@1 B\n", "", "recursive-locking"),
    "37-downgrade.lt": ("T1 downgrade A@1\n", "", "recursive-locking"),
    "40-sync-no-irq-usage.lt": ("T1 sync S\n", "T1 acquire S\nT1 release S\n", "inconsistent-lock-state"),
    "44-unregister.lt": ("T1 unregister A\n", "", "circular-dependency"),
}


def findings(path: Path, *options: str) -> list[tuple[str, str]]:
    """`lockcheck check --format json PATH`: its findings as (kind, lock), and an exit status that agrees."""
    out, err = io.StringIO(), io.StringIO()
    status = cli.main(["check", "--format", "json", *options, str(path)], stdout=out, stderr=err)
    found = [(f["kind"], f["lock"]) for f in json.loads(out.getvalue())["findings"]]
    assert status == (1 if found else 0), err.getvalue()
    return found


@pytest.mark.parametrize("name", sorted(EXPECTED))
def test_each_row_gives_the_kernels_verdict(name: str) -> None:
    assert findings(DATA / name, *OPTIONS.get(name, [])) == EXPECTED[name]


@pytest.mark.parametrize("name", sorted(WITHOUT))
def test_a_quiet_row_reports_once_its_annotation_is_taken_out(name: str, tmp_path: Path) -> None:
    old, new, kind = WITHOUT[name]
    text = (DATA / name).read_text()
    assert EXPECTED[name] == [] and old in text
    path = tmp_path / name
    path.write_text(text.replace(old, new))
    assert kind in [k for k, _ in findings(path)]


#: a table row: `| N | what | kernel | status | input | note |`
_ROW = re.compile(r"^\| (\d+) \| (.+?) \| (.+?) \| (yes|partly|no) \| ?(\S*) ?\| (.*)\|$", re.M)


def test_the_table_is_these_inputs_and_its_counts_add_up() -> None:
    text = DOC.read_text()
    rows = _ROW.findall(text)
    assert [int(row[0]) for row in rows] == list(range(1, 56))
    status = {int(row[0]): row[3] for row in rows}
    inputs = {row[4]: row[3] for row in rows if row[4]}
    assert set(inputs) == set(EXPECTED) == {p.name for p in DATA.iterdir() if p.suffix in (".lt", ".log")}
    # yes: a trace says it; partly: only the kernel's log does; no: nothing does (and nothing is faked)
    assert all((name.endswith(".lt") and st == "yes") or (name.endswith(".log") and st == "partly")
               for name, st in inputs.items())
    assert all(row[4] == "" and row[5].strip() for row in rows if row[3] == "no")
    counts = {st: list(status.values()).count(st) for st in ("yes", "partly", "no")}
    assert f"**Of 55: {counts['yes']} yes, {counts['partly']} partly, {counts['no']} no.**" in text
