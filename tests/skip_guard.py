"""In CI (`CI` set, as `.ci/run` sets it) a skipped test fails the run unless its reason is
one ALLOWED_SKIPS lists: a test that cannot run where CI runs. tests/conftest.py registers
the guard; tests/test_skip_guard.py tests it.

Every test that skips for want of something installed (redis-server, nginx, curl, mkdocs,
the peers' environments, the npm peers) already fails in CI instead, and `tests/install`
installs all of it, so the suite has no skip to allow today: a skip in CI is a test that
did not run, and the run says which and why."""

from __future__ import annotations

import os
import re

import pytest

ALLOWED_SKIPS: dict[str, str] = {}
"""A regular expression a skip's reason must match (re.search) to be allowed in CI, and why
that test cannot run there. Empty: in CI every test runs (3,202 on Python 3.11)."""

NAME = "skip-guard"


def register(config: pytest.Config) -> None:
    """Register the guard on a pytest run (from a conftest's `pytest_configure`)."""
    if not config.pluginmanager.has_plugin(NAME):
        config.pluginmanager.register(SkipGuard(), NAME)


def reason_of(report: pytest.TestReport | pytest.CollectReport) -> str:
    longrepr = report.longrepr
    if isinstance(longrepr, tuple) and len(longrepr) == 3:
        return str(longrepr[2]).removeprefix("Skipped: ")
    return str(longrepr)


class SkipGuard:
    def __init__(self) -> None:
        self.skipped: list[tuple[str, str]] = []
        self.unexpected: list[tuple[str, str]] = []

    def record(self, report: pytest.TestReport | pytest.CollectReport) -> None:
        # An expected failure is reported as skipped too, with `wasxfail`: not a skip.
        if report.skipped and not hasattr(report, "wasxfail"):
            self.skipped.append((report.nodeid, reason_of(report)))

    def pytest_runtest_logreport(self, report: pytest.TestReport) -> None:
        self.record(report)

    def pytest_collectreport(self, report: pytest.CollectReport) -> None:
        self.record(report)

    def pytest_sessionfinish(self, session: pytest.Session) -> None:
        if not os.environ.get("CI"):
            return
        self.unexpected = [
            (nodeid, reason)
            for nodeid, reason in self.skipped
            if not any(re.search(allowed, reason) for allowed in ALLOWED_SKIPS)
        ]
        if self.unexpected and session.exitstatus == pytest.ExitCode.OK:
            session.exitstatus = pytest.ExitCode.TESTS_FAILED

    def pytest_terminal_summary(self, terminalreporter: pytest.TerminalReporter) -> None:
        if not self.unexpected:
            return
        terminalreporter.write_sep(
            "=", f"{len(self.unexpected)} unexpected skip(s) in CI", red=True, bold=True
        )
        for nodeid, reason in self.unexpected:
            terminalreporter.write_line(f"SKIPPED IN CI {nodeid}: {reason}")
        terminalreporter.write_line(
            "CI is set: a skip fails the run unless tests/skip_guard.py's ALLOWED_SKIPS "
            "allows its reason (tests/install installs what the suite needs)"
        )
