"""An official SDK server (`mcp` 2.3.0, `MCPServer`) for our client; runs with the peers' python.

    python sdk_server.py http    # prints {"ready": URL}, serves Streamable HTTP
    python sdk_server.py stdio   # serves stdio

Tools: `greet`; `lookup`, whose `region` argument is annotated `x-mcp-header: Region` (so
over HTTP the SDK refuses a call without a matching `Mcp-Param-Region` header); `confirm`,
which asks a yes/no question in an input round. A prompt with an argument, a static
resource and a resource template.
"""

from __future__ import annotations

import sys
from typing import Annotated

import mcp_types as types
from _serving import serve_http
from mcp.server.mcpserver import Context, MCPServer
from pydantic import Field

server = MCPServer("peer-sdk", log_level="WARNING")


@server.tool()
def greet(name: str) -> str:
    return f"Hello, {name}!"


@server.tool()
def lookup(region: Annotated[str, Field(json_schema_extra={"x-mcp-header": "Region"})]) -> str:
    return f"region: {region}"


@server.tool()
def confirm(action: str, ctx: Context) -> str | types.InputRequiredResult:
    answer = (ctx.input_responses or {}).get("confirm")
    if answer is None:
        schema = {"type": "object", "properties": {"confirm": {"type": "boolean"}}}
        params = types.ElicitRequestFormParams(message=f"{action}?", requested_schema=schema)
        return types.InputRequiredResult(
            input_requests={"confirm": types.ElicitRequest(params=params)}
        )
    content = getattr(answer, "content", None) or {}
    agreed = getattr(answer, "action", None) == "accept" and content.get("confirm") is True
    return f"{action}: {'done' if agreed else 'not done'}"


@server.prompt()
def summarize(topic: str) -> str:
    return f"Summarize {topic} in one line."


@server.resource("note://hello", mime_type="text/plain")
def hello_note() -> str:
    return "hello from the SDK"


@server.resource("note://{name}", mime_type="text/plain")
def named_note(name: str) -> str:
    return f"note {name}"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        serve_http(server.streamable_http_app(streamable_http_path="/mcp"))
