"""The optional compiled cores (lockcheck/_speedups.c, lockcheck/_tracked.c); everything else is in pyproject.toml.

Built by `pip install` where a C compiler exists.  `optional=True`: when
the build fails (no compiler, no Python headers), the install goes on
without it and lockcheck runs its pure-Python fast path
(`LOCKCHECK_PURE=1` forces that path where the core is built).
"""

from setuptools import Extension, setup

setup(ext_modules=[
    Extension("lockcheck._speedups", ["lockcheck/_speedups.c"], depends=["lockcheck/_tuplehash.h"], optional=True),
    # the tracked locks' hit path (the pytest plugin); LOCKCHECK_PURE=1 forces its fallback too
    Extension("lockcheck._trackedcore", ["lockcheck/_tracked.c"], depends=["lockcheck/_tuplehash.h"],
              optional=True),
])
