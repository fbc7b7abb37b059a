"""lockcheck: the Linux kernel's lockdep, as a tool over lock traces and Python test suites.

The pipeline, one module per step: `readers` (trace text -> `events.Event`),
`checker` (lockdep's semantics -> `findings.Finding`, filling a
`graph.DepGraph`), `report` (findings -> kernel-format text, JSON, SARIF).
"""

from lockcheck.util.version import __version__ as __version__


def __getattr__(attr: str):
    """Lazy exports: `lockcheck.name`, `lockcheck.nested` (annotations), `lockcheck.class_of`,
    `lockcheck.instrument`,
    `lockcheck.confirm` (replay a lock-order cycle until it deadlocks, `lockcheck.python.confirm_api`),
    `lockcheck.DeadlockError` (a blocking acquire that closes a cycle of waits)."""
    if attr in ("name", "nested"):
        from lockcheck.python import hints as annotate

        value = globals()[attr] = getattr(annotate, attr)  # kept: `lockcheck.nested` is called per acquire
        return value
    if attr == "class_of":
        from lockcheck.python.hints import class_of

        return class_of
    if attr == "DeadlockError":
        from lockcheck.python.waitfor import DeadlockError

        return DeadlockError
    if attr == "confirm":
        from lockcheck.python.confirm_api import confirm

        return confirm
    if attr == "instrument":
        from lockcheck.python.instrument import instrument

        return instrument
    raise AttributeError(f"module 'lockcheck' has no attribute {attr!r}")
