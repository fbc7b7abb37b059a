"""`python -m lockcheck` is the same program as the `lockcheck` command."""

from lockcheck.entry import run

run()
