"""The benchmark scripts still run (a smoke run; figures are read by people, not asserted)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

BENCHMARKS = Path(__file__).parent.parent / "benchmarks"


def test_core_benchmark_runs_and_reports_every_figure() -> None:
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / "core.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    figures = json.loads(out.stdout)
    assert figures["tasks_get"]["operations"] > 0 and figures["task_life"]["operations"] > 0
    assert figures["memory"]["tasks"] > 0 and figures["memory"]["payload_per_task"] > 0
