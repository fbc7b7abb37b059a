"""Where the tests' data lives: inside the repository, so a fresh clone tests itself.

Everything a test reads is under `tests/data/` (example cases with their
`.expect` files, the two Linux 6.1 captures with the kernel's own state) or
`traces/` (the shipped sample traces). Nothing is looked up beside the
checkout, so no test can pass or skip because of what happens to be there.
"""

from __future__ import annotations

from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DATA = ROOT / "tests" / "data"
EXAMPLES = DATA / "examples"
CAPTURES = DATA / "kernel-6.1"
BOOTS = ("clean", "clean-nohash")
TRACES = ROOT / "traces"
