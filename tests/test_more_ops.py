"""lock_sync(), pins, zap_class() and bad contention from traces (`lockcheck.lockdep.more_ops`), each
with the annotation written and without it, through every path."""

from __future__ import annotations

from pathlib import Path

import pytest

from lockcheck.lockdep.checker import check_events
from lockcheck.readers.lt import parse

from test_wait_context import agreed, every_path


def lt_paths(found: dict) -> dict:
    """The checker's and the `.lt` paths' verdicts.  The JSON Lines fast path
    (`engine/fast_capture.py`, another helper's) still pops a pinned lock and counts a
    contention without the checker: `test_jsonl_fast_path_gap` holds that until it is fixed."""
    return {path: kinds for path, kinds in found.items() if "jsonl" not in path}


def _kinds(text: str) -> list[str]:
    return sorted(f.kind for f in check_events(parse(text.splitlines()))[0])


def _trace(*lines: str) -> str:
    return "#lockcheck-trace v1\n" + "\n".join(lines) + "\n"


# -- lock_sync: synchronize_srcu() -------------------------------------------------------------------
# an SRCU read section in a hardirq handler, then synchronize_srcu() in process context, irqs on
_SRCU_IN_IRQ = ["T1 irqs-off", "T1 hardirq-enter", "T1 acquire &ssp rread", "T1 release &ssp", "T1 hardirq-exit",
                "T1 irqs-on"]


def test_sync_marks_no_irq_enabled_usage(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _trace(*_SRCU_IN_IRQ, "T2 sync &ssp", *_SRCU_IN_IRQ)
    assert agreed(every_path(tmp_path, text, monkeypatch)) == []


def test_sync_written_as_acquire_and_release_is_the_false_finding() -> None:
    assert _kinds(_trace(*_SRCU_IN_IRQ, "T2 acquire &ssp", "T2 release &ssp")) == ["inconsistent-lock-state"]


def test_sync_is_validated_like_an_acquisition(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    # mutex_lock(M); synchronize_srcu(S) against srcu_read_lock(S); mutex_lock(M): the deadlock lock_sync finds
    text = _trace("T1 acquire &ssp rread", "T1 acquire M", "T1 release M", "T1 release &ssp",
                  "T2 acquire M", "T2 sync &ssp", "T2 release M")
    assert agreed(every_path(tmp_path, text, monkeypatch)) == ["circular-dependency"]


def test_sync_is_never_held() -> None:
    assert _kinds(_trace("T1 sync S", "T1 sync S", "T1 exit", "T1 task-exit")) == []
    assert _kinds(_trace("T1 sync S", "T1 release S")) == ["unlock-imbalance"]


# -- pins ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("lines, expected", [
    (["T1 acquire &rq->__lock", "T1 pin &rq->__lock", "T1 unpin &rq->__lock", "T1 release &rq->__lock"], []),
    (["T1 acquire &rq->__lock", "T1 pin &rq->__lock", "T1 release &rq->__lock"], ["releasing a pinned lock"]),
    (["T1 pin &rq->__lock"], ["pinning an unheld lock"]),
    (["T1 unpin &rq->__lock"], ["unpinning an unheld lock"]),
    (["T1 acquire &rq->__lock", "T1 unpin &rq->__lock", "T1 release &rq->__lock"], ["unpinning an unpinned lock"]),
    (["T1 acquire &rq->__lock", "T1 pin &rq->__lock", "T1 pin &rq->__lock", "T1 unpin &rq->__lock",
      "T1 release &rq->__lock"], ["releasing a pinned lock"]),
])
def test_pin_counts(tmp_path: Path, monkeypatch: pytest.MonkeyPatch, lines: list[str], expected: list[str]) -> None:
    # the locks are taken once before, so that the lines are the fast paths' (cached chains)
    text = _trace("T0 acquire &rq->__lock", "T0 release &rq->__lock", *lines)
    assert agreed(lt_paths(every_path(tmp_path, text, monkeypatch))) == ["pin-violation"] * len(expected)
    found = check_events(parse(text.splitlines()))[0]
    assert [f.message for f in found] == expected


def test_a_pinned_lock_moved_by_set_subclass_stays_pinned() -> None:
    text = _trace("T1 acquire A", "T1 acquire B", "T1 pin B", "T1 set-subclass A subclass=1", "T1 release B")
    assert [f.message for f in check_events(parse(text.splitlines()))[0]] == ["releasing a pinned lock"]


# -- unregister (zap_class) ---------------------------------------------------------------------------

_AB = ["T1 acquire A", "T1 acquire B", "T1 release B", "T1 release A"]
_BA = ["T2 acquire B", "T2 acquire A", "T2 release A", "T2 release B"]


def test_unregister_forgets_the_class_and_its_dependencies(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    assert agreed(every_path(tmp_path, _trace(*_AB, "T1 unregister A", *_BA), monkeypatch)) == []
    assert agreed(every_path(tmp_path, _trace(*_AB, *_BA), monkeypatch)) == ["circular-dependency"]


def test_unregister_forgets_usage_and_class_keys() -> None:
    # A was irq-safe; after the module is unloaded, a new A taken with irqs on is consistent
    text = _trace("T1 irqs-off", "T1 hardirq-enter", "T1 acquire A", "T1 release A", "T1 hardirq-exit", "T1 irqs-on",
                  "T1 unregister A", "T1 acquire A", "T1 release A")
    assert _kinds(text) == []
    _, checker = check_events(parse(_trace("T1 acquire A", "T1 unregister A").splitlines()))
    assert "A" in checker.graph.nx and any("unregistered while held" in n for n in checker.stats.notes)


# -- bad contention --------------------------------------------------------------------------------------

def test_contention_of_a_lock_not_held(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    good = _trace("T1 acquire A", "T1 contended A", "T1 acquired A", "T1 release A")
    assert agreed(every_path(tmp_path, good, monkeypatch)) == []
    bad = _trace("T1 acquire A", "T1 contended B", "T1 acquired B", "T1 release A")
    assert agreed(lt_paths(every_path(tmp_path, bad, monkeypatch))) == ["bad-contention"]


def test_contention_with_nothing_held_is_lockdeps_warn() -> None:
    found = check_events(parse(_trace("T1 contended A").splitlines()))[0]
    assert [(f.kind, f.message) for f in found] == [("lockdep-warning", "DEBUG_LOCKS_WARN_ON(!depth)")]


def test_pins_and_contention_agree_on_every_path_json_lines_included(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    text = _trace("T0 acquire A", "T0 release A", "T1 acquire A", "T1 pin A", "T1 release A",
                  "T1 acquire C", "T1 contended B", "T1 release C")
    assert agreed(every_path(tmp_path, text, monkeypatch)) == ["bad-contention", "pin-violation"]


# -- the WARNs in the kernel's words (`lockcheck.report.warn_reports`) -----------------------------------

def test_warn_layouts(tmp_path: Path) -> None:
    import io as _io

    from lockcheck.commands.cli import main

    path = tmp_path / "w.lt"
    path.write_text(_trace("T1 acquire &rq->__lock cpu=3", "T1 pin &rq->__lock", "T1 release &rq->__lock at=f+0x1/0x2",
                           "T1 acquire &mm->mmap_lock read", "T1 downgrade &mm->mmap_lock",
                           "T1 assert-held &p->pi_lock at=try_to_wake_up+0x10/0x100"))
    out = _io.StringIO()
    assert main(["check", str(path)], stdout=out, stderr=_io.StringIO()) == 1
    text = out.getvalue()
    assert ("------------[ cut here ]------------\nreleasing a pinned lock\n"
            "WARNING: CPU: 3 PID: T1 at kernel/locking/lockdep.c __lock_release\n") in text
    assert "downgrading a read lock\nWARNING: CPU: 3 PID: T1 at kernel/locking/lockdep.c __lock_downgrade\n" in text
    # an assert is the caller's WARN_ON(): no message line, the caller's site
    assert "------------[ cut here ]------------\nWARNING: CPU: 3 PID: T1 at try_to_wake_up+0x10/0x100\n" in text
    assert "lockdep_assert_held(&p->pi_lock) failed\n" in text and "Call Trace:\n" in text
