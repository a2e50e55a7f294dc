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


def test_bearer_auth_example_keeps_each_callers_tasks_apart() -> None:
    path = EXAMPLES / "bearer_auth.py"
    out = subprocess.run(
        [sys.executable, str(path), "--demo"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    lines = out.stdout.splitlines()
    assert lines[0] == "alice: her task MINE"
    assert lines[1].startswith("bob: -32602 Unknown task: 'tsk_")
    assert lines[2].startswith("nobody: http://127.0.0.1:")
    assert "(HTTP 401: Unauthorized: send Authorization: Bearer <token>)" in lines[2]
