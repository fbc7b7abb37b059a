"""Signal handlers and finalizers as interrupt contexts: lockdep's irq checks for Python.

A Python signal handler runs in the main thread between two bytecodes of
whatever the main thread was doing, and a finalizer (`__del__`, a
`weakref.finalize` or weakref callback, anything the garbage collector
runs) runs in whichever thread dropped the last reference or triggered a
collection, between two bytecodes of that thread.  Both are interrupts in
lockdep's sense: if the interrupted code holds a lock the handler takes,
the handler waits for a lock its own thread holds (gh-121649's re-entrant
logging, loguru's handler lock).  So the recorder emits the `.lt` irq
events around them and the checker's irq validation (`lockcheck.lockdep.irq`)
applies unchanged:

- **signal handlers are softirqs**: a handler installed with
  `signal.signal()` while recording runs between `softirq-enter` and
  `softirq-exit`.  Only the main thread runs handlers, so every other
  thread is recorded with softirqs disabled (`softirqs-off` before its
  first event): a lock taken by the main thread and in a handler is
  `{SOFTIRQ-ON-W} -> {IN-SOFTIRQ-W}` inconsistent lock state, one taken by
  other threads and in a handler is fine (the handler would only wait for
  the other thread).
- **finalizers are hardirqs**: every thread can run one, so every thread
  has them enabled; `__del__` of classes defined while recording (a
  `class` statement runs `builtins.__build_class__`, which is wrapped),
  `weakref.finalize` callbacks, and everything the cyclic collector runs
  (`gc.callbacks`' start and stop) run between `hardirq-enter` and
  `hardirq-exit`.  A lock taken in a finalizer and anywhere else is
  `{HARDIRQ-ON-W} -> {IN-HARDIRQ-W}`.

The enter event is only queued (`Recorder._pending`), and taken back at
the exit if nothing was recorded in between: a collection or a handler that
takes no lock costs no event.  Limits: handlers installed before
recording began, `__del__` of classes defined before it (or by the
standard library), a `weakref.ref` callback run by a reference count
dropping to zero, and `loop.add_signal_handler` callbacks (ordinary
callbacks of the event loop, no interrupt) are not interrupt contexts;
an RLock the interrupted code holds is re-entered by a handler rather than
waited for, but the handler then runs inside its critical section, which
is reported all the same.
"""

from __future__ import annotations

import _thread
import builtins
import functools
import gc
import signal
import threading
import types
import weakref
from typing import Any, Callable, Optional

from lockcheck.python import sites as pysites, tracked
from lockcheck.events import HARDIRQ_ENTER, HARDIRQ_EXIT, SOFTIRQ_ENTER, SOFTIRQ_EXIT, SOFTIRQS_OFF, Event

#: wrapper -> the handler it runs, so `signal.signal()`/`getsignal()` give back what the program gave
_handlers: dict = {}
_saved: list[tuple[Any, str, Any]] = []
#: (class, its own __del__) for each class whose finalizer is wrapped: put back by `stop`
_dels: list[tuple[Any, Any]] = []
_gc_tokens = threading.local()
_started = False


class _Enter(Event):
    """A queued enter event: equal only to itself, so the exit can take back exactly it."""

    __slots__ = ()
    __eq__ = object.__eq__
    __hash__ = object.__hash__


def _enter(rec: Any, op: str, what: str) -> _Enter:
    task, comm = rec.thread_task()
    token = _Enter(task, op, at=what, comm=comm)
    rec._pending.append(token)
    return token


def _exit(rec: Any, token: _Enter, op: str) -> None:
    pending = rec._pending
    while True:
        try:
            pending.remove(token)
            return  # nothing was recorded inside: no event at all
        except ValueError:
            break  # applied: the exit follows it
        except IndexError:
            continue  # "deque mutated during remove()": another thread queued meanwhile
    rec.feed(Event(token.task, op, at=token.at, comm=token.comm))


def _interrupt(run: Callable[..., Any], op_enter: str, op_exit: str, what: str) -> Callable[..., Any]:
    def interrupt(*args: Any, **kwargs: Any) -> Any:
        rec = tracked._rec
        if rec is None:
            return run(*args, **kwargs)
        token = _enter(rec, op_enter, what)
        try:
            return run(*args, **kwargs)
        finally:
            _exit(rec, token, op_exit)
    return interrupt


# -- signal handlers ---------------------------------------------------------------------


def _wrap_handler(handler: Any) -> Any:
    if not callable(handler) or handler in (signal.SIG_DFL, signal.SIG_IGN) or handler is signal.default_int_handler:
        return handler
    name = getattr(handler, "__qualname__", None) or repr(handler)
    wrapper = _interrupt(handler, SOFTIRQ_ENTER, SOFTIRQ_EXIT, f"signal handler {name}")
    try:
        functools.update_wrapper(wrapper, handler)
    except (AttributeError, TypeError):
        pass
    _handlers[wrapper] = handler
    return wrapper


def _unwrapped(handler: Any) -> Any:
    try:
        return _handlers.get(handler, handler)
    except TypeError:  # an unhashable callable: never one of ours
        return handler


def _signal_signal(original: Any) -> Any:
    def signal_(signalnum: Any, handler: Any) -> Any:
        return _unwrapped(original(signalnum, _wrap_handler(handler)))
    return signal_


def _signal_getsignal(original: Any) -> Any:
    def getsignal(signalnum: Any) -> Any:
        return _unwrapped(original(signalnum))
    return getsignal


# -- finalizers --------------------------------------------------------------------------


def _user_code(code: Any) -> bool:
    from lockcheck.python.patching import _is_stdlib

    return not pysites.excluded(code.co_filename) and not _is_stdlib(code.co_filename)


def _build_class(original: Any) -> Any:
    def __build_class__(func: Any, name: str, *bases: Any, **kwargs: Any) -> Any:
        cls = original(func, name, *bases, **kwargs)
        if tracked._rec is not None and isinstance(cls, type):
            own = cls.__dict__.get("__del__")
            if isinstance(own, types.FunctionType) and _user_code(own.__code__):
                wrapper = _interrupt(own, HARDIRQ_ENTER, HARDIRQ_EXIT, f"finalizer {own.__qualname__}")
                functools.update_wrapper(wrapper, own)
                try:
                    type.__setattr__(cls, "__del__", wrapper)
                    _dels.append((weakref.ref(cls), own))
                except (TypeError, AttributeError):
                    pass
        return cls
    return __build_class__


def _finalize_call(original: Any) -> Any:
    def __call__(self: Any, _: Any = None) -> Any:
        rec = tracked._rec
        if rec is None:
            return original(self, _)
        token = _enter(rec, HARDIRQ_ENTER, "weakref.finalize callback")
        try:
            return original(self, _)
        finally:
            _exit(rec, token, HARDIRQ_EXIT)
    return __call__


def _gc_callback(phase: str, info: dict) -> None:
    """The cyclic collector runs `__del__` and weakref callbacks between its start and stop."""
    rec = tracked._rec
    if rec is None:
        return
    if phase == "start":
        _gc_tokens.token = _enter(rec, HARDIRQ_ENTER, "garbage collection")
    else:
        token = getattr(_gc_tokens, "token", None)
        if token is not None:
            _gc_tokens.token = None
            _exit(rec, token, HARDIRQ_EXIT)


# -- threads that never run handlers ---------------------------------------------------------


def _new_thread(rec: Any, task: str) -> None:
    """A thread's first event: outside the main thread, signal handlers never run (softirqs off)."""
    main = threading.main_thread()
    if main.ident != _thread.get_ident():
        rec._pending.append(Event(task, SOFTIRQS_OFF, at="not the main thread: Python runs signal handlers "
                                                         "in the main thread only", comm=task))


# -- on and off ----------------------------------------------------------------------------


def _patch(owner: Any, attr: str, make: Callable[[Any], Any]) -> None:
    original = getattr(owner, attr)
    wrapper = make(original)
    functools.update_wrapper(wrapper, original)
    _saved.append((owner, attr, original))
    setattr(owner, attr, wrapper)


def start(rec: Any) -> None:
    """Signal handlers installed from now on, `__del__` of classes defined from now on,
    `weakref.finalize` callbacks and garbage collections run as interrupts of `rec`'s threads."""
    global _started
    if _started:
        return
    _started = True
    rec.on_new_thread = _new_thread
    _patch(signal, "signal", _signal_signal)
    _patch(signal, "getsignal", _signal_getsignal)
    _patch(builtins, "__build_class__", _build_class)
    _patch(weakref.finalize, "__call__", _finalize_call)
    gc.callbacks.append(_gc_callback)


def stop(rec: Optional[Any] = None) -> None:
    """Undo `start`: the originals back, handlers still installed unwrapped, `__del__`s restored."""
    global _started
    if not _started:
        return
    _started = False
    if rec is not None:
        rec.on_new_thread = None
    try:
        gc.callbacks.remove(_gc_callback)
    except ValueError:
        pass
    for owner, attr, original in reversed(_saved):
        setattr(owner, attr, original)
    _saved.clear()
    if threading.current_thread() is threading.main_thread():
        for signum in signal.valid_signals():
            try:
                current = signal.getsignal(signum)
            except (ValueError, OSError):
                continue
            original = _unwrapped(current)
            if original is not current:
                try:
                    signal.signal(signum, original)
                except (ValueError, OSError, TypeError):
                    pass
    _handlers.clear()
    for ref, own in _dels:
        cls = ref()
        if cls is not None:
            try:
                type.__setattr__(cls, "__del__", own)
            except (TypeError, AttributeError):
                pass
    _dels.clear()
