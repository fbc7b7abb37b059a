"""The live-Python checker's settings: one frozen object, built once from options or ini.

The pytest plugin (or `instrument(...)`'s keywords) builds a `Settings`; the recorder
holds it (`Recorder.settings`) and every tracked lock and wait reads it from there.  No
module global, no attribute set on a recorder after the fact: a test that wants another
grace makes another `Settings` (`dataclasses.replace`).  Imports nothing of lockcheck, so
every module of the wing may use it.
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from typing import Optional

#: what a detected cycle of waits does (`--lockcheck-deadlock`)
RAISE, REPORT, OFF = "raise", "report", "off"
MODES = (RAISE, REPORT, OFF)
#: Python frames kept per new dependency and per finding (`--lockcheck-stack-depth`)
DEFAULT_STACK_DEPTH = 5
#: locks one thread may hold at once before the session notes it (`--lockcheck-max-depth`)
DEFAULT_MAX_DEPTH = 10000


@dataclass(frozen=True)
class Settings:
    """How the tracked locks behave and what reports keep.

    - `grace`: seconds a wait that only another context could end (a `Lock` re-acquired by its
      holder, a cycle through a `Lock`) is given before it is reported;
    - `timed_is_try`: a timed acquire (`acquire(timeout=...)`) is validated as a trylock;
    - `stack_depth`: Python frames kept per new dependency and per finding (0: sites only);
    - `max_depth`: locks one thread may hold at once before a note;
    - `deadlock`: what a cycle of waits does: `raise` (`DeadlockError`), `report`, `off`;
    - `report_fd`: where mode `report` writes (None: `sys.stderr`);
    - `report_style`: the layout of a `DeadlockError`'s report: `kernel` (lockdep's) or `python`
      (`lockcheck.python.report_short`, the pytest plugin's default).
    """

    grace: float = 1.0
    timed_is_try: bool = True
    stack_depth: int = DEFAULT_STACK_DEPTH
    max_depth: int = DEFAULT_MAX_DEPTH
    deadlock: str = RAISE
    report_fd: Optional[int] = None
    report_style: str = "kernel"

    def __post_init__(self) -> None:
        if not (isinstance(self.grace, (int, float)) and math.isfinite(self.grace) and self.grace >= 0):
            raise ValueError(f"grace: expected a finite number of seconds >= 0, not {self.grace!r}")
        if self.stack_depth < 0:
            raise ValueError(f"stack_depth: expected 0 or more frames, not {self.stack_depth!r}")
        if self.max_depth < 1:
            raise ValueError(f"max_depth: expected 1 or more, not {self.max_depth!r}")
        if self.deadlock not in MODES:
            raise ValueError(f"deadlock: expected one of {', '.join(MODES)}, not {self.deadlock!r}")
