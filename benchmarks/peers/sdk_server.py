"""The official SDK peer: `mcp` 2.3.0 (MCPServer), which has no tasks, so only the
synchronous `greet`. Runs in the peers' virtual environment (benchmarks/run).

    python sdk_server.py http PORT    # Streamable HTTP, http://127.0.0.1:PORT/mcp
    python sdk_server.py stdio        # newline-delimited JSON-RPC on stdin/stdout

HTTP answers plain JSON and keeps no session (`json_response`, `stateless_http`): the
cheapest way the SDK serves the 2026-07-28 wire.
"""

import sys

from mcp.server.mcpserver import MCPServer

server = MCPServer("peer-sdk", log_level="WARNING")


@server.tool()
def greet(name: str) -> str:
    return f"Hello, {name}!"


if __name__ == "__main__":
    if sys.argv[1] == "stdio":
        server.run("stdio")
    else:
        server.run(
            "streamable-http",
            host="127.0.0.1",
            port=int(sys.argv[2]),
            streamable_http_path="/mcp",
            json_response=True,
            stateless_http=True,
        )
