"""The optional compiled core (lockcheck/_speedups.c); everything else is in pyproject.toml.

Built by `pip install` where a C compiler exists.  `optional=True`: when
the build fails (no compiler, no Python headers), the install goes on
without it and lockcheck runs its pure-Python fast path
(`LOCKCHECK_PURE=1` forces that path where the core is built).
"""

from setuptools import Extension, setup

setup(ext_modules=[Extension("lockcheck._speedups", ["lockcheck/_speedups.c"], optional=True)])
