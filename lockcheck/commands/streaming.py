"""Whether a check may write its findings as they are found (issue 30), decided before reading.

Findings stream to the report only when nothing after the run would
change them: no `--first` (it keeps one), no split run (it may start
over), no `--save-graph` (the graph file keeps the findings), no kernel
state dumps or boots, and only traces that are neither captures nor
kernel logs and that no annotation rule rewrites (`mark_uncertain` and
`fold_kernel_reports` then change nothing).  Each trace's format is sniffed
here from its first lines, as the reader will; standard input and a named
pipe cannot be looked at twice, so a run reading one is not streamed.  A run that is not
streamed keeps its findings and hands them to the same writer at the end:
the output is the same either way.
"""

from __future__ import annotations

import os
import stat
from typing import Any


def _regular(path: str) -> bool:
    try:
        return stat.S_ISREG(os.stat(path).st_mode)
    except OSError:
        return False


def plain_traces(traces: list, input_format: str, annotator: Any) -> bool:
    """Whether every input of `traces` (expanded `readers.inputs.Input`s) is a plain, unannotated trace file."""
    from lockcheck import readers
    from lockcheck.errors import LockcheckError
    from lockcheck.readers import inputs, source

    if annotator is None or getattr(annotator, "boots", None):
        return False
    default = annotator.default
    if default.index is not None or not default._rules_empty():
        return False
    for item in traces:
        if item.kind in (inputs.SKIP, inputs.DUMP, inputs.LOCK_STAT):
            continue
        if item.kind != inputs.TRACE or item.path == source.STDIN or not _regular(item.path):
            return False  # a pipe (`<(zcat trace.gz)`) is read once, by the reader
        try:
            _, lines = source.open_lines(item.path, [])
            try:
                head, _rest = readers._peek(lines)
                module = readers.detect(head, item.path) if input_format == "auto" else readers._forced(input_format)
                runs = readers._runs_format(module, head)
            finally:
                close = getattr(lines, "close", None)
                if close is not None:
                    close()
        except (LockcheckError, OSError, ValueError):
            return False  # the reader reports it; nothing to stream
        for mod in (module, runs):
            if getattr(mod, "CAPTURE", False) or getattr(mod, "TAKES_REPORTS", False):
                return False
    return True
