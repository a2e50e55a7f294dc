"""conformance/server.py's fixture server (examples/jobs.py's task tools and the base
fixtures: an `x-mcp-header` tool, prompts, resources, completion), as a serve target:

    mcp-tasks serve tests/client/conformance_target.py --stdio
"""

from __future__ import annotations

import importlib.util
from pathlib import Path

from mcp_tasks import Server

CONFORMANCE_SERVER = Path(__file__).resolve().parents[2] / "conformance" / "server.py"


def build() -> Server:
    spec = importlib.util.spec_from_file_location("_client_conformance", CONFORMANCE_SERVER)
    assert spec is not None and spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    built: Server = module.build_server()
    return built


server = build()
