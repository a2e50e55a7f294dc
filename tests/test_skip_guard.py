"""The skip guard (tests/skip_guard.py): in CI a skip whose reason is not allowed fails the
run, naming the test and the reason; outside CI, or with the reason allowed, a skip is a
skip. Each case runs pytest on a small test directory of its own (pytester)."""

from __future__ import annotations

import pytest
import skip_guard

pytest_plugins = ["pytester"]

TESTS = """
import pytest

def test_runs():
    pass

def test_needs_a_thing():
    pytest.skip("the thing is not installed")

@pytest.mark.xfail(reason="known", strict=True)
def test_expected_to_fail():
    assert False
"""


@pytest.fixture
def suite(pytester: pytest.Pytester) -> pytest.Pytester:
    pytester.makeconftest(
        "import skip_guard\n\ndef pytest_configure(config):\n    skip_guard.register(config)\n"
    )
    pytester.makepyfile(test_things=TESTS)
    return pytester


def test_in_ci_an_unexpected_skip_fails_the_run_naming_it(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    result = suite.runpytest()
    # Not vacuous: the test did skip (and the xfail is not counted as one).
    result.assert_outcomes(passed=1, skipped=1, xfailed=1)
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*1 unexpected skip(s) in CI*",
            "SKIPPED IN CI test_things.py::test_needs_a_thing: the thing is not installed",
        ]
    )
    assert "test_expected_to_fail" not in result.stdout.str().split("unexpected skip")[1]


def test_in_ci_a_skip_at_collection_fails_the_run_too(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite.makepyfile(test_module="import pytest\npytest.importorskip('no_such_module_here')\n")
    monkeypatch.setenv("CI", "true")
    result = suite.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(
        [
            "*2 unexpected skip(s) in CI*",
            "SKIPPED IN CI test_module.py: *no_such_module_here*",
            "SKIPPED IN CI test_things.py::test_needs_a_thing: the thing is not installed",
        ]
    )


def test_outside_ci_a_skip_is_a_skip(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    result = suite.runpytest()
    result.assert_outcomes(passed=1, skipped=1, xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    assert "unexpected skip" not in result.stdout.str()


def test_in_ci_an_allowed_skip_passes(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    monkeypatch.setattr(skip_guard, "ALLOWED_SKIPS", {r"^the thing is not": "cannot run here"})
    result = suite.runpytest()
    result.assert_outcomes(passed=1, skipped=1, xfailed=1)
    assert result.ret == pytest.ExitCode.OK
    assert "unexpected skip" not in result.stdout.str()


def test_in_ci_a_failing_run_keeps_its_failure_and_still_names_the_skip(
    suite: pytest.Pytester, monkeypatch: pytest.MonkeyPatch
) -> None:
    suite.makepyfile(test_broken="def test_broken():\n    assert False\n")
    monkeypatch.setenv("CI", "true")
    result = suite.runpytest()
    assert result.ret == pytest.ExitCode.TESTS_FAILED
    result.stdout.fnmatch_lines(["SKIPPED IN CI test_things.py::test_needs_a_thing: *"])


def test_the_suite_runs_with_the_guard(pytestconfig: pytest.Config) -> None:
    """tests/conftest.py registers it on this very run, and allows no skip today."""
    assert isinstance(pytestconfig.pluginmanager.get_plugin(skip_guard.NAME), skip_guard.SkipGuard)
    assert skip_guard.ALLOWED_SKIPS == {}
