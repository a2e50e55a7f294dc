"""conformance/client_summary.py: the verdict on the suite's client half, from its
checks.json files (made up here): a scored scenario passes only with no FAILURE and no
WARNING, one the revision scores must have run, and extensions are reported without
deciding anything."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

SCRIPT = Path(__file__).resolve().parent.parent / "conformance" / "client_summary.py"
LISTING = """Required for 2026-07-28 (3 scenarios, frozen; run at the 2026-07-28 wire):

Server scenarios (test against a server):
  - tools-list

Client scenarios (test against a client):
  - tools_call
  - auth/metadata-default

Run and reported, but never scored:
  extension (1):
    - auth/dpop [client]
"""


def write_run(results: Path, scenario: str, *statuses: str) -> None:
    folder = results / "client-2026-07-28" / f"{scenario}-2026-12-04T05-35-12-586Z"
    folder.mkdir(parents=True)
    checks = [{"id": f"check-{n}", "status": status} for n, status in enumerate(statuses)]
    (folder / "checks.json").write_text(json.dumps(checks))


def verdict(results: Path) -> tuple[int, str]:
    (results / "list-2026-07-28.txt").write_text(LISTING)
    run = subprocess.run(
        [sys.executable, str(SCRIPT), str(results), "2026-07-28"],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    return run.returncode, run.stdout


def test_scored_scenarios_that_pass_and_a_failing_extension_pass(tmp_path: Path) -> None:
    write_run(tmp_path, "tools_call", "SUCCESS", "INFO")
    write_run(tmp_path, "auth/metadata-default", "SUCCESS")
    write_run(tmp_path, "auth/dpop", "SUCCESS", "FAILURE")
    code, table = verdict(tmp_path)
    assert code == 0, table
    assert "| auth/dpop | no | 1 | 1 | 0 | reported (not scored) |" in table
    assert "Scored: 2/2 passed." in table
    assert (tmp_path / "client-summary.md").read_text().strip() == table.strip()


def test_a_warning_in_a_scored_scenario_fails_naming_the_check(tmp_path: Path) -> None:
    write_run(tmp_path, "tools_call", "SUCCESS", "WARNING")
    write_run(tmp_path, "auth/metadata-default", "SUCCESS")
    code, table = verdict(tmp_path)
    assert code == 1
    assert "| tools_call | yes | 1 | 0 | 1 | UNEXPECTED: check-1 |" in table


def test_a_scored_scenario_that_did_not_run_fails(tmp_path: Path) -> None:
    write_run(tmp_path, "tools_call", "SUCCESS")
    code, table = verdict(tmp_path)
    assert code == 1
    assert "| auth/metadata-default | yes | | | | did not run |" in table
    assert "Scored: 1/2 passed." in table
