"""What every 2025-11-25 task client driver does and every server here serves, read from
scenario.json (the node scripts read the same file): the three tools, the four calls, the
answer a driver gives the question, the bounds on its polling and its steps.

| call | tool | what the driver does |
| --- | --- | --- |
| slow | slow(1 s) | create, tasks/get (`working`), the blocking tasks/result, tasks/get |
| cancel | slow(60 s) | create, tasks/cancel, tasks/get (`cancelled`), tasks/result |
| ask | ask | create, tasks/get until `input_required`, tasks/result (the question on it) |
| fail | fail | create, tasks/get until terminal, tasks/result |

Then one tasks/list. Pure standard library: the drivers' venv and the project's tests both
import it.
"""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

SCENARIO: dict[str, Any] = json.loads((Path(__file__).parent / "scenario.json").read_text())
TOOLS: dict[str, dict[str, Any]] = SCENARIO["tools"]
CALLS: dict[str, dict[str, Any]] = SCENARIO["calls"]
ANSWER: str = SCENARIO["answer"]
TTL_MS: int = SCENARIO["ttl_ms"]
POLL_SECONDS_AT_MOST: float = SCENARIO["poll_ms_at_most"] / 1000
STEP_SECONDS: float = SCENARIO["step_seconds"]
