"""conformance/summary.py: the verdict of a conformance run, from the suite's checks.json files.

The script decides whether CI passes, so its judgement is tested here on made-up results.
"""

from __future__ import annotations

import importlib.util
import json
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

SUMMARY = Path(__file__).resolve().parent.parent / "conformance" / "summary.py"
LISTING = """Required for 2026-07-28 (2 scenarios, frozen; run at the 2026-07-28 wire):

Run and reported, but never scored:
  extension (1):
    - tasks-lifecycle [server]
    - auth/dpop [client]
  pending (1):
    - http-header-validation [server]
"""


@pytest.fixture(scope="module")
def summary() -> ModuleType:
    spec = importlib.util.spec_from_file_location("conformance_summary", SUMMARY)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


MODERN = "requirements-2026-07-28@memory"


def _run(root: Path, folder: str, scenario: str, at: str, *statuses: str) -> None:
    checks: list[dict[str, Any]] = [
        {"id": f"check-{n}", "status": status} for n, status in enumerate(statuses)
    ]
    run = root / folder / f"server-{scenario}-2026-11-29T20-16-{at}Z"
    run.mkdir(parents=True)
    (run / "checks.json").write_text(json.dumps(checks))


def _baseline(root: Path, *entries: str) -> str:
    path = root / "baseline.yml"
    path.write_text("server:\n" + "".join(f"  - {e}  # upstream #1\n" for e in entries))
    return str(path)


def test_all_passing_runs_pass_and_the_table_says_which_are_scored(
    summary: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "list-2026-07-28.txt").write_text(LISTING)
    _run(tmp_path, "alone", "tasks-lifecycle", "01-000", "SUCCESS", "SUCCESS")
    _run(tmp_path, MODERN, "server-stateless", "02-000", "SUCCESS", "SKIPPED")
    _run(tmp_path, MODERN, "http-header-validation", "03-000", "SUCCESS", "INFO")
    code = summary.main([str(tmp_path), _baseline(tmp_path), "2026-07-28", "tasks-lifecycle=0"])
    out = capsys.readouterr().out
    assert code == 0
    assert "| tasks-lifecycle | no (extension) | 2 | 0 | 0 | 0 | 2 | ok |" in out
    assert "| server-stateless | yes | 1 | 0 | 0 | 1 | 2 | ok |" in out
    assert "| http-header-validation | no (pending) |" in out
    assert (tmp_path / "summary.md").read_text().strip() == out.strip()


@pytest.mark.parametrize("status", ["FAILURE", "WARNING"])
def test_a_failure_or_warning_in_an_unscored_scenario_fails_the_run(
    summary: ModuleType, tmp_path: Path, status: str, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "list-2026-07-28.txt").write_text(LISTING)
    _run(tmp_path, MODERN, "http-header-validation", "01-000", "SUCCESS", status)
    assert summary.main([str(tmp_path), _baseline(tmp_path), "2026-07-28"]) == 1
    assert f"UNEXPECTED: check-1 ({status})" in capsys.readouterr().out


@pytest.mark.parametrize("entry", ["caching", "caching:check-0"])
def test_the_baseline_excuses_a_listed_scenario_or_check(
    summary: ModuleType, tmp_path: Path, entry: str
) -> None:
    _run(tmp_path, MODERN, "caching", "01-000", "FAILURE", "SUCCESS")
    assert summary.main([str(tmp_path), _baseline(tmp_path, entry), "2026-07-28"]) == 0


def test_a_baseline_entry_for_another_check_does_not_excuse(
    summary: ModuleType, tmp_path: Path
) -> None:
    _run(tmp_path, MODERN, "caching", "01-000", "SUCCESS", "FAILURE")
    assert summary.main([str(tmp_path), _baseline(tmp_path, "caching:check-0"), "2026-07-28"]) == 1


def test_a_non_zero_suite_exit_fails_even_without_failing_checks(
    summary: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    # The suite exits 1 for a stale baseline entry, which leaves no failing check behind.
    _run(tmp_path, "alone", "tasks-lifecycle", "01-000", "SUCCESS")
    assert (
        summary.main([str(tmp_path), _baseline(tmp_path), "2026-07-28", "tasks-lifecycle=1"]) == 1
    )
    assert "tasks-lifecycle (exit 1)" in capsys.readouterr().out


def test_each_requirements_run_has_its_table_and_its_own_unscored_list(
    summary: ModuleType, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    (tmp_path / "list-2026-07-28.txt").write_text(LISTING)
    legacy_listing = LISTING.replace("2026-07-28", "2025-11-25").replace(
        "http-header-validation", "server-sse-polling"
    )
    (tmp_path / "list-2025-11-25.txt").write_text(legacy_listing)
    # server-sse-polling as it runs against our 2025-11-25 sessions: its 3 checks (the
    # priming event, the retry field, the resume with Last-Event-ID) pass, 7 INFOs log
    polling = ("INFO",) * 4 + ("SUCCESS",) * 2 + ("INFO",) * 3 + ("SUCCESS",)
    for folder in ("requirements-2025-11-25@redis", "requirements-2025-11-25@memory", MODERN):
        _run(tmp_path, folder, "server-sse-polling", "01-000", *polling)
        _run(tmp_path, folder, "http-header-validation", "02-000", "SUCCESS")
    code = summary.main([str(tmp_path), _baseline(tmp_path), "2026-07-28"])
    out = capsys.readouterr().out
    assert code == 0
    titles = [line for line in out.splitlines() if line.startswith("### ")]
    assert titles == [
        "### --requirements 2026-07-28, tasks in the memory store",
        "### --requirements 2025-11-25, tasks in the memory store",
        "### --requirements 2025-11-25, tasks in the redis store",
    ]
    modern, legacy = out.split(titles[1])
    assert "| http-header-validation | no (pending) |" in modern
    assert "| server-sse-polling | yes |" in modern
    assert "| server-sse-polling | no (pending) | 3 | 0 | 0 | 0 | 10 | ok |" in legacy
    assert "| http-header-validation | yes |" in legacy
