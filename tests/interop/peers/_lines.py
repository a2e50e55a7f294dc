"""What every peer script prints: one JSON object a line on stdout, read by the pytest side.

`{"step": NAME, "ok": true, "value": ...}` when a step returned, `{"step": NAME, "ok": false,
"error": {"type": ..., "message": ..., "code": ..., "data": ...}}` when it raised (`code` and
`data` for a JSON-RPC error). A failing step never stops the next one, so one run reports
everything a peer does. Other lines (`{"ready": ...}`, `{"task": ...}`) announce what the
pytest side waits for.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Awaitable, Callable
from typing import Any


def emit(**fields: Any) -> None:
    sys.stdout.write(json.dumps(fields, default=str) + "\n")
    sys.stdout.flush()


def describe(error: BaseException) -> dict[str, Any]:
    """The error as JSON: an SDK `MCPError` keeps its code and data."""
    while isinstance(error, BaseExceptionGroup) and len(error.exceptions) == 1:
        error = error.exceptions[0]
    found: dict[str, Any] = {"type": type(error).__name__, "message": str(error)}
    inner = getattr(error, "error", None)  # mcp.shared.exceptions.MCPError.error: ErrorData
    if inner is not None and hasattr(inner, "code"):
        found.update(code=inner.code, message=inner.message, data=inner.data)
    return found


async def step(name: str, run: Callable[[], Awaitable[Any]]) -> None:
    """Run one step and report what it returned or raised."""
    try:
        value = await run()
    except Exception as error:
        emit(step=name, ok=False, error=describe(error))
    else:
        emit(step=name, ok=True, value=value)
