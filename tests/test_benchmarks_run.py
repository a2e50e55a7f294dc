"""The benchmark scripts still run (a smoke run; figures are read by people, not asserted)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

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


def test_stores_benchmark_runs_and_reports_every_figure() -> None:
    """Memory, SQLite and Redis over HTTP, and the cross-process signals on Redis."""
    if shutil.which("redis-server") is None:
        hint = "redis-server is not installed (Debian/Ubuntu: sudo apt-get install redis-server)"
        if os.environ.get("CI"):
            pytest.fail(hint)
        pytest.skip(hint)
    out = subprocess.run(
        [sys.executable, str(BENCHMARKS / "stores.py"), "--quick", "--json"],
        capture_output=True,
        text=True,
        check=True,
        timeout=300,
    )
    figures = json.loads(out.stdout)
    assert set(figures["throughput"]) == {"tasks/get", "tools/call quick"}
    for workload in figures["throughput"].values():
        for store in ("memory", "sqlite", "redis"):
            run = workload[store]
            assert run["requests"] > 0 and run["failures"] == 0, (store, run)
            for figure in ("requests_per_second", "p50_ms", "p99_ms"):
                assert run[figure] > 0, (store, figure, run)
            assert workload["ratio_to_memory"][store] > 0
    assert set(figures["cross_process"]) == {"tasks/cancel", "tasks/update"}
    for latency in figures["cross_process"].values():
        assert latency["count"] > 0
        for figure in ("p50_ms", "p99_ms", "max_ms"):
            assert latency[figure] > 0, (figure, latency)
