"""Python-first stacks (issue 24 item 2): frames of the standard library fold into one
`(... N frames in logging)` line that does not count against the stack depth, so an AB-BA
through a logging handler shows the application's own logging call."""

from __future__ import annotations

import re

import pytest

#: these tests read the kernel layout (the plugin's default is the short one)
pytestmark = pytest.mark.usefixtures("kernel_report_style")

pytest_plugins = ["pytester"]

LOGGING_ABBA = """
    import logging, threading

    registry_lock = threading.Lock()

    class AuditHandler(logging.Handler):
        def emit(self, record):
            with registry_lock:
                pass

    log = logging.getLogger("app")
    log.addHandler(AuditHandler())
    log.propagate = False

    def record_event():
        log.warning("event")

    def test_log_records():
        record_event()

    def test_register_logs():
        with registry_lock:
            record_event()
"""


def test_library_frames_fold_and_the_apps_logging_call_shows(pytester: pytest.Pytester) -> None:
    pytester.makepyfile(test_logabba=LOGGING_ABBA)
    result = pytester.runpytest_subprocess("-p", "no:cacheprovider", "-p", "no:randomly", "--lockcheck",
                                           "--lockcheck-stack-depth=2", timeout=120)
    result.assert_outcomes(passed=1, failed=1)
    out = result.stdout.str()
    stack = out[out.index("-> #0 (AuditHandler.lock)"):out.index("other info that might help us debug this")]
    lines = [line.strip() for line in stack.splitlines()[1:] if line.strip()]
    # two frames of the application (the depth), the library's folded in front, not counted
    assert re.fullmatch(r"\(\.\.\. \d+ frames in logging\)", lines[0]), lines
    assert lines[1] == "test_logabba.py:15 in record_event"
    assert lines[2] == "test_logabba.py:22 in test_register_logs"
    assert "logging/__init__.py" not in stack
