"""The Streamable HTTP endpoint as an ASGI application, for uvicorn, hypercorn, Starlette, FastAPI.

```python
from mcp_tasks.asgi import asgi_app

app = asgi_app(server)              # uvicorn module:app; the endpoint is /mcp
```

The application answers what the built-in server (`serve_http`) answers: one exchange
(`transports._exchange`) with two drivers, httptools for the built-in server and ASGI messages
here (`transports._asgi`). The same rules in the same order: Host, Origin, path, method,
Content-Type, Accept, framing; then the authenticator; then the body, counted against
`max_body_bytes` and the bytes in flight of every request (`max_body_bytes_in_flight`),
at the pace it must keep (408 when it falls behind); then `Server.handle`. A reply is one
JSON answer; the first notification of a request (progress, a `subscriptions/listen`
stream) turns it into an SSE stream instead, which a comment line keeps alive when quiet.
A client that disconnects cancels its request.

Before any rule, the probe paths (`/healthz`, `/readyz`) are answered, whether the server
runs or not; the readiness one says "draining" from the lifespan's shutdown on. Refusals
get a rate-limited log line, and with `access_log` on every request gets one on
`mcp_tasks.access`.

What the ASGI server does itself is left to it: parsing, the size of a request head, the
timeouts before and between requests, keep-alive. What it does not pass on cannot be
checked: an absolute-form target (`POST http://name/mcp`) has its host checked when the
scope's `path` or `raw_path` shows it (uvicorn with h11, hypercorn); uvicorn with httptools
passes the path alone, and only the `Host` header is checked there.

Lifespan: served directly, the application runs `Server.running()` between the lifespan
startup and shutdown events. Mounted in Starlette or FastAPI, whose routers do not pass
lifespan events to mounted applications, give the framework `app.lifespan`. On shutdown
listen streams end, requests in flight get `drain_timeout_seconds` to finish and are then
cancelled, and the server's tasks get their grace period (`Server.running()`).

The application runs on asyncio and on trio (hypercorn's trio worker), through anyio.
Importing this module loads neither the built-in server's parser nor an HTTP client.
"""

from __future__ import annotations

from typing import TypeAlias

from .transports import _asgi
from .transports._asgi import AsgiApp, asgi_app
from .transports._http_rules import HttpConfig

Scope: TypeAlias = _asgi.Scope  # the ASGI types, for typed callers
Message: TypeAlias = _asgi.Message
Receive: TypeAlias = _asgi.Receive
Send: TypeAlias = _asgi.Send

__all__ = ["AsgiApp", "HttpConfig", "asgi_app"]
