"""Examples run as tests: as a user runs them (a subprocess), and their results checked."""

from __future__ import annotations

import importlib.util
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).parent.parent / "examples"


def test_drive_core_example_runs_a_task_to_completion() -> None:
    path = EXAMPLES / "drive_core.py"
    out = subprocess.run([sys.executable, str(path)], capture_output=True, text=True, check=True)
    assert "tools/call -> task working" in out.stdout
    assert "tasks/get  -> completed" in out.stdout and "HELLO" in out.stdout
    spec = importlib.util.spec_from_file_location("drive_core", path)
    assert spec and spec.loader
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    created, task = module.main()
    assert created["result"]["taskId"].startswith("tsk_") and len(created["result"]["taskId"]) > 30
    assert task["result"]["result"]["content"] == [{"type": "text", "text": "HELLO"}]
