"""The optional compiled cores (lockcheck/engine/_speedups.c, _capturecore.c, _jsonlt.c, lockcheck/readers/_ftscan.c,
lockcheck/python/_tracked.c); everything else is in pyproject.toml.

Built by `pip install` where a C compiler exists.  `optional=True`: when
the build fails (no compiler, no Python headers), the install goes on
without it and lockcheck runs its pure-Python fast path
(`LOCKCHECK_PURE=1` forces that path where the core is built).
"""

from setuptools import Extension, setup

# the `.lt` core's parts by job (lockcheck/engine/_lt_*.h), included by _speedups.c: an edit of one rebuilds it
LT_CORE = ["lockcheck/engine/_lt_%s.h" % part for part in (
    "state", "slots", "stack", "chainkey", "known", "classes", "tail", "overlay", "acquire", "irq", "release",
    "contention", "views", "line")]

setup(ext_modules=[
    Extension("lockcheck.engine._speedups", ["lockcheck/engine/_speedups.c"],
              depends=["lockcheck/engine/_rules.h", "lockcheck/engine/_tuplehash.h", "lockcheck/engine/_cshared.h",
                       "lockcheck/engine/_bytescan.h", "lockcheck/engine/_lt_hints.h", "lockcheck/engine/_knownkeys.h",
                       "lockcheck/engine/_grammar_limits.h"]
                      + LT_CORE,
              optional=True),
    # the capture fast path's filter of common ftrace lines (lockcheck.engine.capture_filter)
    Extension("lockcheck.engine._capturecore", ["lockcheck/engine/_capturecore.c"],
              depends=["lockcheck/engine/_rules.h", "lockcheck/engine/_tuplehash.h", "lockcheck/engine/_cshared.h",
                       "lockcheck/readers/_ftsplit.h", "lockcheck/engine/_capcache.h", "lockcheck/engine/_knownkeys.h"]
                      + [f"lockcheck/engine/_capturecore_{part}.h" for part in ("known", "recent", "state", "resume", "annotate", "below", "take", "pending", "irq", "line", "read")],
              include_dirs=["lockcheck/readers"], optional=True),
    # JSON Lines translated to `.lt` lines (lockcheck.engine.fast_jsonl): the `.lt` engine checks them
    Extension("lockcheck.engine._jsonlt", ["lockcheck/engine/_jsonlt.c"],
              depends=[f"lockcheck/engine/_jsonlt_{part}.h" for part in ("scan", "keys", "read", "write", "fast", "ordered", "rest")]
              + ["lockcheck/engine/_lt_hints.h", "lockcheck/engine/_grammar_limits.h"],
              optional=True),
    # the ftrace reader's scanner for lines whose pieces it has seen (lockcheck.readers.ftrace_scan)
    Extension("lockcheck.readers._ftscan", ["lockcheck/readers/_ftscan.c"], depends=["lockcheck/readers/_ftsplit.h"],
              optional=True),
    # the tracked locks' hit path (the pytest plugin); LOCKCHECK_PURE=1 forces its fallback too
    Extension("lockcheck.python._trackedcore", ["lockcheck/python/_tracked.c"],
              depends=["lockcheck/engine/_tuplehash.h", "lockcheck/engine/_cshared.h", "lockcheck/engine/_rules.h"]
              + [f"lockcheck/python/_tracked_{unit}.h" for unit in ("cache", "hit", "rawlock", "methods", "async")],
              include_dirs=["lockcheck/engine"], optional=True),
])
