"""What every test run shares: nothing is written into the checkout.

Hypothesis keeps its example database and caches in `.hypothesis/` under the current
directory -- the repository root when the suite is run from there.  They go to the
temporary directory instead (a variable set by the user wins).  A test that leaves a file
in the repository root anyway (as a third-party suite run from there once left
`pebble.log`) fails the run.
"""

from __future__ import annotations

import os
import tempfile
from pathlib import Path

import pytest

os.environ.setdefault("HYPOTHESIS_STORAGE_DIRECTORY", os.path.join(tempfile.gettempdir(), "lockcheck-hypothesis"))

ROOT = Path(__file__).resolve().parent.parent
_root_listing = pytest.StashKey[set]()


def pytest_sessionstart(session: pytest.Session) -> None:
    session.config.stash[_root_listing] = set(os.listdir(ROOT))


def pytest_sessionfinish(session: pytest.Session, exitstatus: int) -> None:
    """Under xdist the controller checks, once every worker is done."""
    if hasattr(session.config, "workerinput"):
        return
    before = session.config.stash.get(_root_listing, None)
    if before is None:
        return
    new = sorted(set(os.listdir(ROOT)) - before)
    if new:
        reporter = session.config.pluginmanager.get_plugin("terminalreporter")
        if reporter is not None:
            reporter.write_line("")
            reporter.write_sep("=", f"the tests wrote into the repository root: {', '.join(new)}", red=True)
        session.exitstatus = pytest.ExitCode.TESTS_FAILED


@pytest.fixture
def kernel_report_style(request: pytest.FixtureRequest, monkeypatch: pytest.MonkeyPatch) -> None:
    """The tests of the kernel layout's content: the pytest runs they make use it
    (`--lockcheck-report-style=kernel`; the short Python layout is the plugin's default).
    An ini override, so a run without the plugin only ignores it.  Set after pytester's
    set-up, which clears PYTEST_ADDOPTS."""
    if "pytester" not in request.fixturenames:
        return
    request.getfixturevalue("pytester")
    addopts = os.environ.get("PYTEST_ADDOPTS", "")
    monkeypatch.setenv("PYTEST_ADDOPTS", f"{addopts} -o lockcheck_report_style=kernel".strip())
