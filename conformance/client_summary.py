"""Summarise the client half of a conformance/run: one row per scenario the suite ran
against conformance/client.py, and the verdict.

    python conformance/client_summary.py RESULTS VERSION...

RESULTS holds `client-<version>/` (the suite's `client --requirements <version>` output:
`<scenario>-<timestamp>/checks.json`, the auth scenarios under `auth/`) and
`list-<version>.txt` (which scenarios that revision scores). A scored scenario passes only
with no FAILURE and no WARNING: there is no baseline for the client. Scenarios the revision
does not score (the extensions) are run and reported, and do not decide the verdict.
Prints Markdown tables (also written to RESULTS/client-summary.md); exits 1 when a scored
scenario did not pass, or one the revision scores did not run.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

_RUN_DIR = re.compile(r"^(?P<scenario>.+)-(?P<at>\d{4}-\d{2}-\d{2}T[\d-]+Z)$")
_SCORED = re.compile(r"^  - (?P<scenario>\S+)$")
BAD = ("FAILURE", "WARNING")


def _scored(listing: Path) -> list[str]:
    """The client scenarios the revision scores, from `conformance list --requirements`."""
    text = listing.read_text() if listing.exists() else ""
    _, _, clients = text.partition("Client scenarios")
    clients, _, _ = clients.partition("never scored")
    return [match["scenario"] for line in clients.splitlines() if (match := _SCORED.match(line))]


def _runs(folder: Path) -> dict[str, list[dict[str, object]]]:
    """Scenario -> its checks (the last run of each)."""
    found: dict[str, tuple[str, list[dict[str, object]]]] = {}
    for checks in sorted(folder.rglob("checks.json")):
        match = _RUN_DIR.match(checks.parent.name)
        if match is None:
            continue
        prefix = checks.parent.parent.relative_to(folder).as_posix()
        scenario = match["scenario"] if prefix == "." else f"{prefix}/{match['scenario']}"
        if scenario not in found or found[scenario][0] < match["at"]:
            found[scenario] = (match["at"], json.loads(checks.read_text()))
    return {scenario: checks for scenario, (_, checks) in sorted(found.items())}


def _table(version: str, results: Path) -> tuple[list[str], int]:
    scored = _scored(results / f"list-{version}.txt")
    runs = _runs(results / f"client-{version}")
    head = ("scenario", "scored", "passed", "failed", "warn", "verdict")
    lines = [
        f"### Client, --requirements {version}",
        "",
        "| " + " | ".join(head) + " |",
        "|" + "|".join("---" for _ in head) + "|",
    ]
    unexpected = 0
    for scenario in [*scored, *sorted(set(runs) - set(scored))]:
        checks = runs.get(scenario)
        is_scored = scenario in scored
        if checks is None:
            lines.append(f"| {scenario} | {'yes' if is_scored else 'no'} | | | | did not run |")
            unexpected += is_scored
            continue
        statuses = [str(check.get("status")) for check in checks]
        failed, warned = statuses.count("FAILURE"), statuses.count("WARNING")
        ok = not failed and not warned
        if not ok and is_scored:
            unexpected += 1
            bad = sorted({str(c.get("id")) for c in checks if c.get("status") in BAD})
            verdict = "UNEXPECTED: " + ", ".join(bad)
        elif not ok:
            verdict = "reported (not scored)"
        else:
            verdict = "pass"
        passed = statuses.count("SUCCESS")
        row = (scenario, "yes" if is_scored else "no", passed, failed, warned, verdict)
        lines.append("| " + " | ".join(str(cell) for cell in row) + " |")
    passing = sum(
        1 for scenario in scored if not any(s in BAD for s in _statuses(runs.get(scenario)))
    )
    lines += ["", f"Scored: {passing}/{len(scored)} passed.", ""]
    return lines, unexpected


def _statuses(checks: list[dict[str, object]] | None) -> list[str]:
    return ["FAILURE"] if checks is None else [str(check.get("status")) for check in checks]


def main(argv: list[str]) -> int:
    if len(argv) < 3:
        print(__doc__, file=sys.stderr)
        return 2
    results = Path(argv[1])
    out: list[str] = []
    unexpected = 0
    for version in argv[2:]:
        lines, bad = _table(version, results)
        out += lines
        unexpected += bad
    text = "\n".join(out)
    print(text)
    (results / "client-summary.md").write_text(text + "\n")
    return 1 if unexpected else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))
