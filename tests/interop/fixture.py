"""The server of ours that the peers' clients are pointed at: conformance/server.py's, that
is examples/jobs.py's task tools and the conformance base fixtures (tools, input rounds, an
`x-mcp-header` tool, prompts, resources, completion, progress, list-changed triggers), and
`touch_resource`, which says a resource changed (its subscribers are told).

    mcp-tasks serve tests/interop/fixture.py --http 127.0.0.1:0   # or --stdio
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mcp_tasks import Server, ToolContext

CONFORMANCE_SERVER = Path(__file__).resolve().parents[2] / "conformance" / "server.py"


def _build() -> Server:
    spec = importlib.util.spec_from_file_location("_interop_conformance", CONFORMANCE_SERVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    built: Server = module.build_server()
    return built


server = _build()


@server.tool()
async def touch_resource(ctx: ToolContext, uri: str) -> str:
    """Tell the resource's subscribers that it changed."""
    server.notify_resource_updated(uri)
    return f"touched {uri}"
