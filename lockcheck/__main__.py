"""`python -m lockcheck` is the same program as the `lockcheck` command."""

import sys

from lockcheck.cli import main

sys.exit(main())
