"""The `lockcheck` command's first lines: Ctrl-C is one line and exit status 130 from the start.

The console script (and `python -m lockcheck`) import this module before
anything else of lockcheck's, so its handler is in place while the rest is
still being imported and the arguments parsed: an interrupt then ends the
process at once (`os._exit`: nothing has been opened or started yet) with
one line instead of a traceback from deep inside an import.  `cli.main`
takes over when it starts its work (KeyboardInterrupt, so that temporary
output files are removed and the reader process stopped) and turns SIGTERM
and SIGHUP into the same orderly end.  Only the command does this: the
library and the pytest plugin leave the signal handlers alone.
"""

from __future__ import annotations

import os
import signal
import sys

#: exit status for an interrupt: 128 + SIGINT, as shells report it
EXIT_INTERRUPTED = 128 + signal.SIGINT


def _interrupted_early(signum: int, frame: object) -> None:
    try:
        os.write(2, b"lockcheck: interrupted\n")
    finally:
        os._exit(EXIT_INTERRUPTED)


# a signal the parent left ignored stays ignored (`nohup`, a shell's background job): that is its
# way of saying the command must not die of it
if signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
    signal.signal(signal.SIGINT, _interrupted_early)


def run() -> None:
    """The console script's entry: run the command line and exit with its status."""
    from lockcheck.commands.cli import main

    try:
        try:
            status = main(handle_signals=True)
        finally:
            _ignore_signals_from_now_on()
    except KeyboardInterrupt:  # between main's own handlers, or while it reported something
        os.write(2, b"lockcheck: interrupted\n")
        status = EXIT_INTERRUPTED
    sys.exit(status)


def _ignore_signals_from_now_on() -> None:
    """The work is done and its status known: a signal arriving now changes nothing.

    The interpreter's shutdown restores the default handlers, so a Ctrl-C
    during it would kill the process (status -SIGINT, not the command's own)
    or print a traceback; blocked, it stays pending until the process is gone.
    """
    signals = {signal.SIGINT} | {getattr(signal, name) for name in ("SIGTERM", "SIGHUP") if hasattr(signal, name)}
    if hasattr(signal, "pthread_sigmask"):
        signal.pthread_sigmask(signal.SIG_BLOCK, signals)
    elif signal.getsignal(signal.SIGINT) is not signal.SIG_IGN:
        signal.signal(signal.SIGINT, _interrupted_early)
