"""The test API under the plugin (issue 24 item 4): `lockcheck.instrument()` nests inside a test
run with `--lockcheck` (it sees the events of its block), and the `lockcheck` fixture gives a
test the session's findings, what its thread holds, and an order check."""

from __future__ import annotations

import pytest

pytest_plugins = ["pytester"]

TIMEOUT = 120

API = """
    import threading

    import pytest

    import lockcheck

    def test_instrument_nests_and_sees_its_block():
        with lockcheck.instrument() as rec:
            a = threading.Lock()
            b = threading.Lock()
            with a:
                with b:
                    pass
            with b:
                with a:
                    pass
        assert [f.kind for f, _ in rec.findings] == ["circular-dependency"]

    def test_fixture_held_and_order(lockcheck):
        outer = threading.Lock()
        inner = threading.RLock()
        with outer:
            with inner:
                assert lockcheck.held() == ["test_fixture_held_and_order.outer",
                                            "test_fixture_held_and_order.inner"]
        assert lockcheck.held() == []
        lockcheck.expect_order(outer, inner)
        with pytest.raises(AssertionError, match="is taken before"):
            lockcheck.expect_order(inner, outer)
        assert lockcheck.findings == []

    def test_fixture_sees_the_tests_findings(lockcheck):
        lock = threading.RLock()
        other = threading.Lock()
        with lock:
            with other:
                pass
        with other:
            with lock:
                pass
        assert [f.kind for f in lockcheck.findings] == ["circular-dependency"]
"""


@pytest.mark.parametrize("enabled", [True, False], ids=["under-lockcheck", "without"])
def test_instrument_and_fixture(pytester: pytest.Pytester, enabled: bool) -> None:
    pytester.makepyfile(test_api=API)
    args = ["-p", "no:cacheprovider", "-p", "no:randomly"] + (["--lockcheck"] if enabled else [])
    result = pytester.runpytest_subprocess(*args, timeout=TIMEOUT)
    out = result.stdout.str()
    assert "a recorder is already started" not in out
    if enabled:
        # the nested block's cycle is the inner recorder's alone; the fixture's test fails by the plugin
        result.assert_outcomes(passed=2, failed=1)
        result.stdout.fnmatch_lines(["FAILED test_api.py::test_fixture_sees_the_tests_findings*"])
    else:
        result.assert_outcomes(passed=3)
