"""`soak/tool_threads.py`, short: it runs on both servers and reports its figures, and they
hold (a smoke run of the measurement in docs/reliability.md; marked `slow`)."""

from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest

SCRIPT = Path(__file__).parent.parent / "soak" / "tool_threads.py"


@pytest.mark.slow
@pytest.mark.parametrize("kind", ["builtin", "asyncio"])
def test_the_tool_threads_soak_runs_and_its_figures_hold(kind: str) -> None:
    command = [sys.executable, str(SCRIPT), "--kind", kind, "--calls", "60", "--json"]
    done = subprocess.run(command, capture_output=True, text=True, timeout=300, check=False)
    assert done.returncode == 0, done.stderr
    figures = json.loads(done.stdout)
    assert figures["calls"] == 60
    assert sum(figures["statuses"].values()) == 60
    assert set(figures["statuses"]) <= {"503", "cut off"}
    assert figures["threads_peak"] - figures["threads_before"] <= 32
    assert figures["fresh_status"] in ("200", "503")  # answered (refused if all are held)
