"""The health probes of the HTTP endpoint: liveness and readiness, for load balancers.

Theory of operation
-------------------
`Probes` knows the two paths (`HttpConfig.health_path` and `ready_path`). The built-in
server and the ASGI app ask it whether a request is a probe only when its target is not
the endpoint (one comparison on the busy path), and before any rule runs. A probe is
answered here; it never reaches the rules, the authenticator or the server's `handle`,
and its body (it should have none) is never read:

    health_path     200 {"status":"ok"}: the process serves
    ready_path      200 {"status":"ready"}, or 503 {"status":"not ready","reason":...}
    the resource's  200 with the Protected Resource Metadata (`HttpConfig.resource_server`),
    metadata        at each of its paths (`ResourceServer.metadata_paths`), readable from any
                    origin (an OPTIONS preflight is 204)
    another method  405 with `Allow: GET, HEAD`

No Host or Origin check and no authentication: load balancers probe by address, and the
answers name nothing but a state. Readiness is "draining" while the transport drains,
else what the handler's `readiness(timeout_seconds)` says (`MessageHandler`: a `Server`
says "not running", "draining" or "store unreachable", reading its store once).
"""

from __future__ import annotations

import json
from dataclasses import dataclass
from typing import Final

from ._http_rules import HttpConfig
from ._port import MessageHandler

__all__ = ["ProbeAnswer", "Probes"]

HEALTH: Final = "health"
READY: Final = "ready"
METADATA: Final = "metadata"

_HEADERS: Final = (
    (b"content-type", b"application/json"),
    (b"cache-control", b"no-store"),
)
_ALLOW: Final = (b"allow", b"GET, HEAD")
_METADATA_HEADERS: Final = (
    (b"content-type", b"application/json"),
    (b"cache-control", b"public, max-age=300"),
    (b"access-control-allow-origin", b"*"),  # browser clients read it from another origin
)
_PREFLIGHT: Final = (
    (b"access-control-allow-origin", b"*"),
    (b"access-control-allow-methods", b"GET, HEAD, OPTIONS"),
    (b"access-control-allow-headers", b"*"),
    (b"access-control-max-age", b"86400"),
)


@dataclass(frozen=True, kw_only=True)
class ProbeAnswer:
    """What a probe is answered: its status, headers and body (sent without it to a HEAD)."""

    status: int
    headers: list[tuple[bytes, bytes]]
    body: bytes


def _answer(status: int, body: dict[str, str], *extra: tuple[bytes, bytes]) -> ProbeAnswer:
    encoded = json.dumps(body, separators=(",", ":")).encode()
    return ProbeAnswer(status=status, headers=[*_HEADERS, *extra], body=encoded)


class Probes:
    """The probe paths of one `HttpConfig`, and their answers."""

    def __init__(self, config: HttpConfig) -> None:
        self._kinds: dict[bytes, str] = {}
        if config.health_path is not None:
            self._kinds[config.health_path.encode()] = HEALTH
        if config.ready_path is not None:
            self._kinds[config.ready_path.encode()] = READY
        self.timeout_seconds = config.ready_timeout_seconds
        self._metadata = b""
        if config.resource_server is not None:
            self._metadata = config.resource_server.metadata()
            for path in config.resource_server.metadata_paths(config.endpoint):
                self._kinds.setdefault(path.encode(), METADATA)

    def kind_of(self, path: bytes) -> str | None:
        """HEALTH, READY or METADATA for a probe's path (without its query), else None."""
        return self._kinds.get(path)

    async def answer(
        self, kind: str, method: bytes, handler: MessageHandler, *, draining: bool
    ) -> ProbeAnswer:
        """The answer to a probe of `kind` with `method`, about `handler` (a `Server`, or
        any `MessageHandler`) and the transport serving it (`draining`)."""
        if kind == METADATA:
            if method == b"OPTIONS":  # a browser's preflight
                return ProbeAnswer(status=204, headers=list(_PREFLIGHT), body=b"")
            if method in (b"GET", b"HEAD"):
                return ProbeAnswer(status=200, headers=list(_METADATA_HEADERS), body=self._metadata)
        if method not in (b"GET", b"HEAD"):
            return _answer(405, {"error": "method not allowed: GET or HEAD"}, _ALLOW)
        if kind == HEALTH:
            return _answer(200, {"status": "ok"})
        reason = "draining" if draining else await handler.readiness(self.timeout_seconds)
        if reason is None:
            return _answer(200, {"status": "ready"})
        return _answer(503, {"status": "not ready", "reason": reason})
