"""Where Python code makes and takes locks: frames -> creation sites and lock class names.

A tracked lock's class is its creation site (lockdep's static key), named
after what the creating line assigns it to; an acquisition's site is the
first frame outside the tracked lock types, threading.py and asyncio's
locks.  Frames of the test runner (pytest, pluggy, xdist, execnet) and of
lockcheck itself make raw locks: they are not the code under test.  The
naming rules are in the docstring of `lockcheck.python.instrument`.
"""

from __future__ import annotations

import _thread
import asyncio.locks
import itertools
import linecache
import os
import re
import sys
import threading
from typing import Any, Optional

# -- where code is ----------------------------------------------------------------

_THREADING_FILE = os.path.abspath(threading.__file__)
_ASYNCIO_LOCKS_FILE = os.path.abspath(asyncio.locks.__file__)
_ASYNCIO_MIXINS = os.path.abspath(sys.modules["asyncio.mixins"].__file__) if "asyncio.mixins" in sys.modules else ""
_ASYNCIO_DIR = os.path.dirname(_ASYNCIO_LOCKS_FILE) + os.sep
_LOCKCHECK_DIR = os.path.dirname(os.path.dirname(os.path.abspath(__file__))) + os.sep  # the package, not this wing
#: the tracked lock types: their frames are seen through to the code that made or took the lock
_TRACKED_FILE = os.path.join(os.path.dirname(os.path.abspath(__file__)), "tracked.py")  # this wing's


def _excluded_dirs() -> tuple[str, ...]:
    """Packages whose own locks are not the code under test (the test runner, us); nothing is imported."""
    import importlib.util

    dirs = [_LOCKCHECK_DIR]
    for mod in ("_pytest", "pluggy", "xdist", "execnet", "pytest"):
        module = sys.modules.get(mod)
        origin = getattr(module, "__file__", None)
        if origin is None:
            try:
                spec = importlib.util.find_spec(mod)
            except (ImportError, ValueError):
                spec = None
            origin = spec.origin if spec is not None else None
        if origin:
            dirs.append(os.path.dirname(os.path.abspath(origin)) + os.sep)
    return tuple(dirs)


_EXCLUDED: tuple[str, ...] = (_LOCKCHECK_DIR,)


def exclude_test_runner() -> None:
    """Once, when tracking first starts: locks made by pytest & co. stay raw from then on."""
    global _EXCLUDED
    if len(_EXCLUDED) == 1:
        _EXCLUDED = _excluded_dirs()
        _kinds.clear()


def excluded(filename: str) -> bool:
    """Whether `filename` belongs to the test runner or lockcheck (its locks are not under test)."""
    return os.path.abspath(filename).startswith(_EXCLUDED)


# frame kinds, cached per code object
_USER, _TRANSPARENT, _RAW = 0, 1, 2
_kinds: dict = {}
#: the tracked asyncio types' own frames (their `__aenter__` calls their `acquire`): an acquire's
#: site is the code that took the lock
_ASYNC_TRACKED_FILES = tuple(os.path.join(os.path.dirname(os.path.abspath(__file__)), name)
                             for name in ("async_lock.py", "async_semaphores.py"))
_SITE_SKIP = (_TRACKED_FILE, _ASYNCIO_LOCKS_FILE, _ASYNCIO_MIXINS, _THREADING_FILE, *_ASYNC_TRACKED_FILES)
_site_skip: dict = {}


def _kind_of(code: Any) -> int:
    """How a frame creating a lock counts: user code, transparent (look at its caller), or raw."""
    kind = _kinds.get(code)
    if kind is None:
        path = os.path.abspath(code.co_filename)
        if path in (_TRACKED_FILE, _ASYNCIO_LOCKS_FILE, _ASYNCIO_MIXINS):
            kind = _TRANSPARENT
        elif path == _THREADING_FILE or path.startswith(_EXCLUDED):
            kind = _RAW  # Event, Barrier, Thread, Semaphore internals; the test runner; us
        else:
            kind = _USER
        _kinds[code] = kind
    return kind


def site_skipped(code: Any) -> bool:
    """Whether a frame running `code` is passed over for its caller's as an acquire's site."""
    skip = _site_skip.get(code)
    if skip is None:
        path = os.path.abspath(code.co_filename)
        # asyncio's own frames too (`wait_for(lock.acquire())`): the site is the user's call
        skip = _site_skip[code] = path in _SITE_SKIP or path.startswith(_ASYNCIO_DIR)
    return skip


def user_frame(frame: Any) -> Any:
    """The acquire's call site: the first frame outside threading.py, asyncio's locks and this module."""
    for _ in range(8):
        code = frame.f_code
        skip = _site_skip.get(code)
        if skip is None:
            skip = site_skipped(code)
        if not skip or frame.f_back is None:
            return frame
        frame = frame.f_back
    return frame


_relpaths: dict = {}


def relpath(filename: str) -> str:
    rel = _relpaths.get(filename)
    if rel is None:
        path = os.path.abspath(filename)
        try:
            rel = os.path.relpath(path)
        except ValueError:
            rel = path
        if rel.startswith(".." + os.sep):
            rel = path
        _relpaths[filename] = rel
    return rel


# -- lock classes: keyed by creation site, named after the assignment ----------------

_FACTORY = r"(?:[\w.]+\.)?(?:Lock|RLock|Condition|Semaphore|BoundedSemaphore|allocate_lock)\s*\("
#: `TARGET =` (or `TARGET: TYPE =`) at a line's start, the target its group
_TARGET = r"^\s*([A-Za-z_][\w.]*)\s*(?::[^=]*)?=\s*"
_ASSIGN = re.compile(_TARGET + _FACTORY)
#: `a, b = Lock(), Lock()`: one target per lock made on the line
_TUPLE_ASSIGN = re.compile(r"^\s*\(?\s*([A-Za-z_][\w.]*(?:\s*,\s*[A-Za-z_][\w.]*)+)\s*,?\s*\)?\s*=(?!=)")
_CALL = re.compile(_FACTORY)
#: a lock factory's line (`def _create_lock(self): return RLock()`), and its caller's when that assigns
#: what a call returns (`self._jobs_lock = self._create_lock()`): the class is the caller's site
_ANY_CALL = r"[A-Za-z_][\w.]*\s*\("
_RETURNS_NEW = re.compile(r"^\s*return\s+" + _FACTORY)
_RETURNS_CALL = re.compile(r"^\s*return\s+" + _ANY_CALL)
_ASSIGN_CALL = re.compile(_TARGET + _ANY_CALL)
_line_kinds: dict = {}
#: Python 3.11+ records each instruction's column: two locks made on one line are two classes
_HAS_COLUMNS = sys.version_info >= (3, 11)
#: logging's `Handler.createLock`: one class per handler type, not one for every handler --
#: `MemoryHandler.flush` holding its lock calls its target's `handle` (another handler's lock)
#: by design, as every handler that forwards records does
_LOGGING_FILE = os.path.join(os.path.dirname(_THREADING_FILE), "logging", "__init__.py")


def _column(frame: Any) -> Optional[int]:
    """The column of the call that is running in `frame` (3.11+), else None."""
    if not _HAS_COLUMNS:
        return None
    try:
        positions = list(frame.f_code.co_positions())
        col = positions[frame.f_lasti // 2][2]
    except (IndexError, ValueError, AttributeError):
        return None
    return col


class _Registry:
    """Creation site -> class name, and name -> site to keep names unique."""

    def __init__(self) -> None:
        self.by_site: dict[tuple, str] = {}
        self.sites: dict[str, str] = {}  # class name -> "file.py:LINE" (":COL" where it matters)
        #: class name -> its module-qualified name (`app.cache.Cache._lock`): what suppressions
        #: can say, stable while the code moves between lines
        self.qualified: dict[str, str] = {}
        self._mutex = _thread.allocate_lock()
        self._busy: set = set()  # threads inside (a signal handler making a lock there must not wait)

    def class_for(self, frame: Any, factory: bool = False) -> str:
        """The class of a lock made at `frame`'s site (`factory`: by a call there to a lock factory)."""
        code = frame.f_code
        owner = None
        if code.co_name == "createLock" and code.co_filename == _LOGGING_FILE:
            owner = type(frame.f_locals.get("self"))
            key: tuple = (code, owner)
        elif _HAS_COLUMNS:
            key = (code, frame.f_lasti)
        else:
            key = (code, frame.f_lineno)
        name = self.by_site.get(key)
        if name is None:
            me = _thread.get_ident()
            if me in self._busy:  # interrupted in here: name it without the mutex
                return self._new(code, frame.f_lineno, frame, owner, factory)
            self._busy.add(me)
            try:
                with self._mutex:
                    name = self.by_site.get(key)
                    if name is None:
                        name = self._new(code, frame.f_lineno, frame, owner, factory)
                        self.by_site[key] = name
            finally:
                self._busy.discard(me)
        return name

    def after_fork(self) -> None:
        """In a forked child: the mutex may have been held by a thread that is gone."""
        self._mutex = _thread.allocate_lock()
        self._busy = set()

    def _new(self, code: Any, line: int, frame: Any = None, owner: Optional[type] = None,
             factory: bool = False) -> str:
        rel = relpath(code.co_filename)
        if owner is not None:
            name = f"{owner.__qualname__}.lock"
            site = f"{owner.__module__}.{owner.__qualname__}"
            if self.sites.get(name, site) != site:
                name = f"{site}.lock"
            self.sites.setdefault(name, site)
            self.qualified.setdefault(name, f"{site}.lock")
            return name
        col = _column(frame) if frame is not None else None
        site = f"{rel}:{line}" if col is None else f"{rel}:{line}:{col}"
        readable = self._readable(code, line, frame, col, factory)
        name = readable or f"{os.path.basename(rel)}:{line}"
        if self.sites.get(name, site) != site:
            name = f"{name}#{line}"
            if col is not None and self.sites.get(name, site) != site:
                name = f"{name}:{col}"
        self.sites.setdefault(name, site)
        if readable and frame is not None and code.co_name != "<module>":
            module = frame.f_globals.get("__name__")
            if isinstance(module, str) and module not in ("__main__",):
                self.qualified.setdefault(name, f"{module}.{readable}")
        return name

    @staticmethod
    def _readable(code: Any, line: int, frame: Any = None, col: Optional[int] = None,
                  factory: bool = False) -> Optional[str]:
        text = linecache.getline(code.co_filename, line)
        match = (_ASSIGN_CALL if factory else _ASSIGN).match(text)
        if match is not None:
            target = match.group(1)
        else:
            target = _tuple_target(text, col)
            if target is None:
                return None
        qualname = getattr(code, "co_qualname", None) or _qualname_from_frame(code, frame)
        if code.co_name == "<module>":
            module = os.path.splitext(os.path.basename(code.co_filename))[0]
            return f"{module}.{target}"
        if target.startswith("self.") or target.startswith("cls."):
            owner = qualname.rsplit(".", 1)[0] if "." in qualname else qualname
            owner = owner.replace(".<locals>", "")
            return f"{owner}.{target.split('.', 1)[1]}"
        return f"{qualname.replace('.<locals>', '')}.{target}"

    def named(self, name: str, where: str) -> str:
        self.sites.setdefault(name, where)
        return name


def _tuple_target(text: str, col: Optional[int]) -> Optional[str]:
    """`a, b = Lock(), Lock()`: the target of the lock made at column `col`."""
    match = _TUPLE_ASSIGN.match(text)
    if match is None or col is None:
        return None
    targets = [t.strip() for t in match.group(1).split(",")]
    calls = [m.start() for m in _CALL.finditer(text, match.end())]
    if len(calls) != len(targets):
        return None
    for target, start in zip(reversed(targets), reversed(calls)):
        if start <= col:
            return target
    return None


def _qualname_from_frame(code: Any, frame: Any) -> str:
    """Python 3.10 has no `co_qualname`: a method's owner comes from its `self` or `cls` then."""
    if frame is not None:
        owner = frame.f_locals.get("self", frame.f_locals.get("cls"))
        if owner is not None:
            kind = owner if isinstance(owner, type) else type(owner)
            for klass in kind.__mro__:  # the class that defines this code, not a subclass
                if any(getattr(v, "__code__", None) is code for v in vars(klass).values()):
                    return f"{klass.__qualname__}.{code.co_name}"
    return code.co_name


registry = _Registry()
_instances = itertools.count(1)


def creation(depth: int = 2) -> Optional[tuple[str, str]]:
    """(class name, instance) for a lock created by the caller's caller; None: leave it raw."""
    frame = sys._getframe(depth)
    kind = _kind_of(frame.f_code)
    while kind == _TRANSPARENT:
        frame = frame.f_back
        if frame is None:
            return None
        kind = _kind_of(frame.f_code)
    if kind == _RAW:
        return None
    frame, factory = _factory_caller(frame)
    return registry.class_for(frame, factory), new_instance()


def _line_is(frame: Any, pattern: "re.Pattern[str]") -> bool:
    key = (frame.f_code, frame.f_lineno, pattern)
    found = _line_kinds.get(key)
    if found is None:
        found = _line_kinds[key] = pattern.match(linecache.getline(frame.f_code.co_filename, frame.f_lineno)) is not None
    return found


def _factory_caller(frame: Any) -> tuple[Any, bool]:
    """The frame whose site names a new lock, and whether it is a lock factory's caller.

    A function that only returns a new lock (`return RLock()`, apscheduler's `_create_lock`) makes
    every lock of its callers: keyed by its own line they would all be one class, and two of them
    held together a "recursive locking" no program has.  Its callers' sites are the classes when
    they assign what it returns -- as the kernel's `mutex_init()` is a macro so that each caller
    has its own key.  A caller that does not (`defaultdict(make_lock)`, `with make_lock():`) leaves
    the factory's line the class, as before.
    """
    if not _line_is(frame, _RETURNS_NEW):
        return frame, False
    caller = frame.f_back
    for _ in range(3):  # (a factory whose caller is a factory: `return _make_lock()`)
        if caller is None or _kind_of(caller.f_code) != _USER:
            break
        if _line_is(caller, _ASSIGN_CALL):
            return caller, True
        if not _line_is(caller, _RETURNS_CALL):
            break
        caller = caller.f_back
    return frame, False


def new_instance() -> str:
    """The next lock instance name (`0x1`, `0x2`... in creation order)."""
    return f"{next(_instances):#x}"

