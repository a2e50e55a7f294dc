"""Summarise a conformance/run: one table row per scenario run, and the verdict.

    python conformance/summary.py RESULTS BASELINE VERSION [RUN=EXIT ...]

RESULTS holds `alone/` (scenarios run one by one, at protocol VERSION), `alone-<store>/`
(the tasks scenarios again on a durable store or another server) and
`requirements-<version>@<store>/` (a `--requirements <version>` run on a store), each with
the suite's `server-<scenario>-<timestamp>/checks.json`, and `list-<version>.txt` (the
suite's `list --requirements <version>`: which scenarios are not scored, and why).
A FAILURE or WARNING counts as unexpected unless conformance/baseline.yml lists the
scenario or `scenario:check`; scored or not, it fails the run. Prints Markdown tables (also
written to RESULTS/summary.md) and exits 1 on anything unexpected.
"""

from __future__ import annotations

import json
import re
import sys
from pathlib import Path

_RUN_DIR = re.compile(r"^server-(?P<scenario>.+)-(?P<at>\d{4}-\d{2}-\d{2}T[\d-]+Z)$")
_GROUP = re.compile(r"^  (?P<why>[a-z-]+) \(\d+\):$")
_MEMBER = re.compile(r"^    - (?P<scenario>\S+) \[server\]$")
BAD = ("FAILURE", "WARNING")


_REQUIREMENTS_DIR = re.compile(r"^requirements-(?P<version>[\d-]+)@(?P<store>\w+)$")
_STORE_ORDER = ("memory", "sqlite", "redis")

_TARGET_TITLES = {"sdk": "against an official-SDK server with TasksExtension"}
"""Result folders that name a server, not a store of conformance/server.py."""


def _baseline(path: Path) -> set[str]:
    entries = set()
    for line in path.read_text().splitlines():
        entry = line.split("#", 1)[0].strip()
        if entry.startswith("- "):
            entries.add(entry[2:].strip())
    return entries


def _runs(folder: Path) -> list[tuple[str, list[dict[str, object]]]]:
    """(scenario, checks) of each run in `folder`, in the order they ran."""
    found = []
    for checks in folder.glob("server-*/checks.json"):
        match = _RUN_DIR.match(checks.parent.name)
        if match is not None:
            found.append((match["at"], match["scenario"], json.loads(checks.read_text())))
    return [(scenario, checks) for _, scenario, checks in sorted(found)]


def _not_scored(listing: Path) -> dict[str, str]:
    """Scenario -> why it is not scored, from `conformance list --requirements`."""
    if not listing.exists():
        return {}
    _, _, tail = listing.read_text().partition("never scored:")
    notes: dict[str, str] = {}
    why = ""
    for line in tail.splitlines():
        group, member = _GROUP.match(line), _MEMBER.match(line)
        if group is not None:
            why = group["why"]
        elif member is not None:
            notes[member["scenario"]] = why
    return notes


def _table(
    rows: list[tuple[str, list[dict[str, object]]]], baseline: set[str], notes: dict[str, str]
) -> tuple[list[str], int]:
    head = ("scenario", "scored", "passed", "failed", "warn", "skipped", "checks", "verdict")
    lines = ["| " + " | ".join(head) + " |", "|" + "|".join("---" for _ in head) + "|"]
    unexpected = 0
    for scenario, checks in rows:
        count = {status: 0 for status in ("SUCCESS", "FAILURE", "WARNING", "SKIPPED", "INFO")}
        bad = []
        for check in checks:
            status = str(check.get("status"))
            count[status] = count.get(status, 0) + 1
            listed = scenario in baseline or f"{scenario}:{check.get('id')}" in baseline
            if status in BAD and not listed:
                bad.append(f"{check.get('id')} ({status})")
        unexpected += len(bad)
        verdict = "ok" if not bad else "UNEXPECTED: " + ", ".join(bad)
        scored = "no (" + notes[scenario] + ")" if scenario in notes else "yes"
        cells = (
            scenario,
            scored,
            count["SUCCESS"],
            count["FAILURE"],
            count["WARNING"],
            count["SKIPPED"],
            len(checks),
            verdict,
        )
        lines.append("| " + " | ".join(map(str, cells)) + " |")
    passed = sum(1 for _, checks in rows for c in checks if c.get("status") == "SUCCESS")
    total = sum(len(checks) for _, checks in rows)
    lines.append("")
    lines.append(f"{passed}/{total} checks passed, {unexpected} unexpected failure(s)/warning(s)")
    return lines, unexpected


def _requirements_runs(root: Path) -> list[tuple[str, str, Path]]:
    """(version, store, folder) of each `--requirements` run: newest version first, then
    the stores in the order they ran."""
    found = []
    for folder in root.glob("requirements-*@*"):
        match = _REQUIREMENTS_DIR.match(folder.name)
        if match is not None:
            found.append((match["version"], match["store"], folder))
    found.sort(key=lambda run: _STORE_ORDER.index(run[1]) if run[1] in _STORE_ORDER else 9)
    found.sort(key=lambda run: run[0], reverse=True)  # stable: keeps the store order
    return found


def main(argv: list[str]) -> int:
    results, baseline_path, version, *exits = argv
    baseline = _baseline(Path(baseline_path))
    root = Path(results)
    out: list[str] = []
    unexpected = 0
    notes = _not_scored(root / f"list-{version}.txt")
    alone = _runs(root / "alone")
    if alone:
        lines, bad = _table(alone, baseline, notes)
        out += ["### Each scenario alone", "", *lines, ""]
        unexpected += bad
    for folder in sorted(root.glob("alone-*")):
        target = folder.name.removeprefix("alone-")
        lines, bad = _table(_runs(folder), baseline, notes)
        title = _TARGET_TITLES.get(target, f"tasks in the {target} store")
        out += [f"### The tasks scenarios alone, {title}", "", *lines, ""]
        unexpected += bad
    for run_version, store, folder in _requirements_runs(root):
        set_notes = _not_scored(root / f"list-{run_version}.txt")
        lines, bad = _table(_runs(folder), baseline, set_notes)
        out += [f"### --requirements {run_version}, tasks in the {store} store", "", *lines, ""]
        unexpected += bad
    suite_exits = [item.rsplit("=", 1) for item in exits]
    failed_exits = [f"{name} (exit {code})" for name, code in suite_exits if code != "0"]
    if failed_exits:
        out.append("suite exit codes not 0: " + ", ".join(failed_exits))
    text = "\n".join(out)
    print(text)
    (root / "summary.md").write_text(text + "\n")
    return 1 if unexpected or failed_exits else 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
