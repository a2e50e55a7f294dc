"""The fixture server the official MCP conformance suite is run against.

`python conformance/server.py --port N` serves Streamable HTTP on http://127.0.0.1:N/mcp
(`--port 0` picks a free port; the bound one is logged). Logs go to stderr only.
`--store URL` keeps its tasks in SQLite or Redis (`mcp_tasks.store.open_store`; memory
when absent), so the same scenarios check every store.

It serves the Tasks extension fixtures (the `tasks-*` scenarios), which are the tools of
examples/jobs.py (greet, slow_compute, failing_job, protocol_error_job, confirm_delete,
multi_input, test_tool_with_task), and the base 2026-07-28 fixtures of base_fixtures.py
(tools, resources, prompts, completion, MRTR, list-changed triggers), and the 2025-11-25
fixtures of legacy_fixtures.py whose names differ (sampling, elicitation and logging tools
that a 2025 session turns into server-to-client requests, a subscribable resource). All are
loaded by path so each has one definition. Only the library's public API is used.
"""

from __future__ import annotations

import argparse
import importlib.util
import logging
import signal
import sys
from pathlib import Path
from types import ModuleType

import trio

from mcp_tasks import Server
from mcp_tasks.store import STORE_URL_HELP, open_store
from mcp_tasks.transports import serve_http

HOST = "127.0.0.1"  # loopback only
HERE = Path(__file__).resolve().parent
JOBS = HERE.parent / "examples" / "jobs.py"
BASE_FIXTURES = HERE / "base_fixtures.py"
LEGACY_FIXTURES = HERE / "legacy_fixtures.py"

logger = logging.getLogger("conformance.server")


def _load(path: Path) -> ModuleType:
    spec = importlib.util.spec_from_file_location(f"_conformance_{path.stem}", path)
    if spec is None or spec.loader is None:
        raise SystemExit(f"cannot load {path}")
    module = importlib.util.module_from_spec(spec)
    sys.modules[spec.name] = module
    spec.loader.exec_module(module)
    return module


def build_server() -> Server:
    """The examples/jobs.py server (the tasks fixture tools) with the base and 2025 fixtures."""
    server = _load(JOBS).server
    if not isinstance(server, Server):
        raise SystemExit(f"{JOBS}: `server` is not a mcp_tasks.Server")
    _load(BASE_FIXTURES).register(server)
    _load(LEGACY_FIXTURES).register(server)
    return server


async def _serve(server: Server, port: int) -> None:
    try:
        await _serve_until_signalled(server, port)
    finally:
        with trio.CancelScope(shield=True):
            await server.store.aclose()


async def _serve_until_signalled(server: Server, port: int) -> None:
    with trio.open_signal_receiver(signal.SIGINT, signal.SIGTERM) as signals:
        async with trio.open_nursery() as nursery, server.running():
            bound = await nursery.start(serve_http, server, HOST, port)
            logger.info(
                "conformance fixture server on http://%s:%d/mcp, tasks in %r",
                HOST,
                bound,
                server.store,
            )
            async for signum in signals:
                logger.info("signal %d: stopping", signum)
                break
            nursery.cancel_scope.cancel()


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument(
        "--port", type=int, default=0, help="TCP port on 127.0.0.1 (0: any free one)"
    )
    parser.add_argument(
        "--log-level", default="INFO", choices=["DEBUG", "INFO", "WARNING", "ERROR"]
    )
    parser.add_argument("--store", metavar="URL", help=STORE_URL_HELP)
    args = parser.parse_args(argv)
    logging.basicConfig(
        stream=sys.stderr,
        level=args.log_level,
        format="%(asctime)s %(levelname)s %(name)s: %(message)s",
    )
    server = build_server()
    if args.store is not None:
        try:
            server.use_store(open_store(args.store))
        except (ValueError, OSError) as error:
            parser.error(f"--store: {error}")
    trio.run(_serve, server, args.port)


if __name__ == "__main__":
    main()
