"""Python call stacks for reports: the frames of the code under test, captured only when needed.

A report that says `util.py:9` is no help when every lock is taken through
one helper or decorator: the developer needs the callers.  Capturing a
stack on every acquisition would cost the hot path dearly, so the recorder
captures one only where a report can show it -- when the checker records a
new dependency (`DepGraph.evidence_hook`) or makes a finding -- and keeps
plain `(file, line, function)` frames, never frame objects (those would keep
the program's local variables alive).

Frames inside lockcheck, threading, contextlib and asyncio are left out: they are the
same in every report and hide the code that matters.  The walk stops at the
test runner (pytest, pluggy, xdist, execnet): what lies beyond it (runpy,
a console script) is not the program under test either.
"""

from __future__ import annotations

import asyncio
import contextlib
import os
import sys
import sysconfig
import threading
from typing import Any, Optional

from lockcheck.lockdep.findings import Frame
from lockcheck.python.sites import relpath

#: default number of frames shown per acquisition site (`--lockcheck-stack-depth`)
DEFAULT_DEPTH = 5

_LOCKCHECK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # the package, not this wing
_THREADING_FILE = os.path.abspath(threading.__file__)
_ASYNCIO_DIR = os.path.dirname(os.path.abspath(asyncio.__file__)) + os.sep


def _runner_dirs() -> tuple[str, ...]:
    """The test runner's packages, wherever they are installed (nothing is imported for it)."""
    import importlib.util

    dirs = []
    for name in ("_pytest", "pytest", "pluggy", "xdist", "execnet"):
        module = sys.modules.get(name)
        origin = getattr(module, "__file__", None)
        if origin is None:
            try:
                spec = importlib.util.find_spec(name)
            except (ImportError, ValueError):
                spec = None
            origin = spec.origin if spec is not None else None
        if origin:
            dirs.append(os.path.dirname(os.path.abspath(origin)) + os.sep)
    return tuple(dirs)


#: contextlib: `@contextmanager` helpers around a lock add two plumbing frames per level
_HIDDEN_FILES = (_THREADING_FILE, os.path.abspath(contextlib.__file__))
_HIDDEN_DIRS: tuple[str, ...] = (_LOCKCHECK_DIR, _ASYNCIO_DIR)
_RUNNER_DIRS: tuple[str, ...] = _runner_dirs()
#: the standard library (its `test` package aside: CPython's own suites are programs under test)
#: and installed packages: their frames fold into one line, not counted against the depth
_STDLIB_DIRS = tuple(dict.fromkeys(os.path.abspath(sysconfig.get_paths()[key]) + os.sep
                                   for key in ("stdlib", "platstdlib")))
_STDLIB_TESTS = tuple(d + "test" + os.sep for d in _STDLIB_DIRS)
_SITE_MARKERS = (os.sep + "site-packages" + os.sep, os.sep + "dist-packages" + os.sep)
#: how a frame counts: shown, hidden (skipped), the test runner (nothing beyond it is the program),
#: or a library's (folded: `(... 4 frames in logging)`)
SHOWN, HIDDEN, RUNNER, LIBRARY = 0, 1, 2, 3
#: the `file` of a frame that stands for folded library frames (its `function` says how many, where)
FOLDED = "..."
_kinds: dict = {}  # code object -> kind: a stack is walked rarely, but each walk sees the same frames
#: modules whose frames are helpers (`lockcheck_helper_modules`): skipped, so their caller is the site
_helper_modules: tuple[str, ...] = ()


def set_helper_modules(names: list[str]) -> None:
    """The plugin's `lockcheck_helper_modules`: frames of these modules (and their submodules) are
    skipped like lockcheck's own, so a report names the code that called the helper."""
    global _helper_modules
    _helper_modules = tuple(name.strip() for name in names if name.strip())
    _kinds.clear()


def _kind(frame: Any) -> int:
    """The kind of `frame`'s code (cached), a helper module's frames HIDDEN."""
    code = frame.f_code
    kind = _kinds.get(code)
    if kind is None:
        kind = kind_of(code.co_filename)
        if kind == SHOWN and _helper_modules:
            module = str(frame.f_globals.get("__name__", ""))
            if any(module == name or module.startswith(name + ".") for name in _helper_modules):
                kind = HIDDEN
        _kinds[code] = kind
    return kind


def _hides(frame: Any) -> bool:
    """pytest's own convention: a function with `__tracebackhide__ = True` is not the site."""
    return "__tracebackhide__" in frame.f_code.co_varnames and bool(frame.f_locals.get("__tracebackhide__"))


def kind_of(filename: str) -> int:
    """SHOWN, HIDDEN (lockcheck, threading, contextlib, asyncio) or RUNNER (pytest & co.) for frames of `filename`."""
    path = os.path.abspath(filename)
    if path in _HIDDEN_FILES or path.startswith(_HIDDEN_DIRS):
        return HIDDEN
    if path.startswith(_RUNNER_DIRS):
        return RUNNER
    if any(marker in path for marker in _SITE_MARKERS):
        return LIBRARY
    if path.startswith(_STDLIB_DIRS) and not path.startswith(_STDLIB_TESTS):
        return LIBRARY
    return SHOWN


def package_of(filename: str) -> str:
    """`.../logging/__init__.py` -> `logging`, `.../site-packages/requests/api.py` -> `requests`."""
    path = os.path.abspath(filename)
    for marker in _SITE_MARKERS:
        if marker in path:
            path = path.rsplit(marker, 1)[1]
            break
    else:
        for base in _STDLIB_DIRS:
            if path.startswith(base):
                path = path[len(base):]
                break
    first = path.split(os.sep, 1)[0]
    return first[:-3] if first.endswith(".py") else first


def is_folded(frame: Frame) -> bool:
    """Whether `frame` stands for folded library frames (see `capture`)."""
    return frame.file == FOLDED


def capture(frame: Optional[Any], depth: int = DEFAULT_DEPTH) -> Optional[tuple[Frame, ...]]:
    """Up to `depth` frames of the code under test, from `frame` outwards; None when there are none.

    `frame` is normally the acquisition's own frame (the first outside the
    lock types); a hidden frame there is skipped like any other.  Consecutive frames of the
    standard library or of installed packages fold into one `FOLDED` frame (`4 frames in
    logging`) that does not count against `depth`: a lock taken inside `logging` shows the
    application's logging call, not five frames of logging.  A stack with no frame of the
    application keeps the library's own frames (they are then all there is).
    """
    frames: list[Frame] = []
    shown = 0
    run: list[Any] = []  # library frames not yet folded
    start = frame
    while frame is not None and shown < depth:
        code = frame.f_code
        kind = _kind(frame)
        if kind == SHOWN and _hides(frame):
            kind = HIDDEN
        if kind == RUNNER:
            break  # what called pytest (runpy, a console script) is not the program either
        if kind == LIBRARY:
            run.append(code)
        elif kind == SHOWN:
            if run:
                frames.append(_fold(run))
                run = []
            name = getattr(code, "co_qualname", None) or code.co_name
            frames.append(Frame(relpath(code.co_filename), frame.f_lineno, name))
            shown += 1
        frame = frame.f_back
    if not shown:
        return _unfolded(start, depth)
    return tuple(frames)


def _fold(codes: list[Any]) -> Frame:
    n = len(codes)
    return Frame(FOLDED, 0, f"{n} frame{'s' if n > 1 else ''} in {package_of(codes[0].co_filename)}")


def _unfolded(frame: Optional[Any], depth: int) -> Optional[tuple[Frame, ...]]:
    """`capture` with library frames shown as frames (a stack of the library alone)."""
    frames: list[Frame] = []
    while frame is not None and len(frames) < depth:
        code = frame.f_code
        kind = _kinds.get(code)
        if kind == RUNNER:
            break
        if kind in (SHOWN, LIBRARY):
            name = getattr(code, "co_qualname", None) or code.co_name
            frames.append(Frame(relpath(code.co_filename), frame.f_lineno, name))
        frame = frame.f_back
    return tuple(frames) or None


def capture_earlier(frame: Optional[Any], file: str, line: int,
                   depth: int = DEFAULT_DEPTH) -> Optional[tuple[Frame, ...]]:
    """The stack of an earlier acquisition at `file:line`, if the function that made it still runs.

    A lock held now was usually taken by a function that is still on the
    stack (`with a:` ... `with b:`, or a caller that holds `a` around the
    call): its stack is that frame, at `line`, and the frame's callers.
    None when no running frame's code contains `file:line` (the lock was
    taken by a function that has returned).
    """
    if frame is not None and frame.f_lineno == line:
        # the acquisition being made now is at that line: whoever took the held lock there was
        # another call of this code (a helper's earlier, suspended frame) -- or this very frame
        # in a loop; either way this frame's callers may not be that lock's
        frame = frame.f_back
    while frame is not None:
        code = frame.f_code
        if relpath(code.co_filename) == file and any(number == line for _, _, number in code.co_lines()):
            stack = capture(frame, depth)
            if not stack or stack[0].file != file:
                return stack
            return (stack[0]._replace(line=line),) + stack[1:]
        frame = frame.f_back
    return None
