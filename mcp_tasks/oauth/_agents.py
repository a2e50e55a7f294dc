"""The user's part of a login: visiting the authorization URL and coming back.

A `UserAgent` has a `redirect_uri` (registered with the authorization server) and `visit`,
which takes the authorization URL and returns the URL the authorization server sent the
user back to (with `code`, `state` and perhaps `iss`); the client checks it.

- `LoopbackBrowser` opens the system browser and listens on a loopback port (RFC 8252
  section 7.3) for the one redirect, answering with a page that says to close the window.
- `HeadlessAgent` follows the authorization server's redirects itself, with no browser:
  for servers that authorize without a page to click (a test server, a pre-approved client).
"""

from __future__ import annotations

import socket
import webbrowser
from collections.abc import Callable
from typing import Final, Protocol
from urllib.parse import urljoin, urlsplit

import anyio
import anyio.abc
import h11
import httpx2

__all__ = ["HeadlessAgent", "LoopbackBrowser", "UserAgent"]

_MAX_HEAD_BYTES: Final = 16 * 1024
_READ_SECONDS: Final = 10.0
_MAX_REDIRECTS: Final = 10
_DONE_PAGE: Final = (
    b"<!doctype html><meta charset=utf-8><title>mcp-tasks</title>"
    b"<p>Back to the terminal: you can close this window.</p>"
)


class UserAgent(Protocol):
    """Takes the user to the authorization server and back."""

    @property
    def redirect_uri(self) -> str: ...

    async def visit(self, authorization_url: str) -> str:
        """The URL the authorization server redirected to (the redirect URI and its query)."""
        ...


class LoopbackBrowser:
    """Opens `authorization_url` with `open_url` (the system browser) and waits, at most
    `timeout_seconds`, for the redirect on `http://127.0.0.1:PORT/callback`. The port is
    taken when the agent is made (`port=0`: one the system picks) and held until `close`."""

    def __init__(
        self,
        *,
        port: int = 0,
        path: str = "/callback",
        open_url: Callable[[str], object] = webbrowser.open,
        timeout_seconds: float = 300.0,
    ) -> None:
        if not path.startswith("/"):
            raise ValueError("path must start with '/'")
        self._socket: socket.socket | None = socket.socket(socket.AF_INET, socket.SOCK_STREAM)
        self._socket.bind(("127.0.0.1", port))
        self._path = path
        self._open_url = open_url
        self.timeout_seconds = timeout_seconds
        self.redirect_uri = f"http://127.0.0.1:{self._socket.getsockname()[1]}{path}"

    def close(self) -> None:
        if self._socket is not None:
            self._socket.close()
            self._socket = None

    async def visit(self, authorization_url: str) -> str:
        if self._socket is None:
            raise RuntimeError("this LoopbackBrowser is closed (each serves one login)")
        listening, self._socket = self._socket, None
        listening.listen(8)
        listener = await anyio.abc.SocketListener.from_socket(listening)
        found: list[str] = []
        async with listener, anyio.create_task_group() as opening:
            # (in a thread: a browser command may not return before the page is used)
            opening.start_soon(_in_thread, self._open_url, authorization_url)
            with anyio.fail_after(self.timeout_seconds):
                while not found:
                    connection = await listener.accept()
                    async with connection:
                        target = await _serve_one(connection, self._path)
                    if target is not None:
                        found.append(urljoin(self.redirect_uri, target))
            opening.cancel_scope.cancel()
        return found[0]


async def _in_thread(open_url: Callable[[str], object], url: str) -> None:
    await anyio.to_thread.run_sync(open_url, url, abandon_on_cancel=True)


async def _serve_one(connection: anyio.abc.SocketStream, path: str) -> str | None:
    """Reads one request; the target when it is the redirect (answered with the page to
    close), else None (answered 404)."""
    parser = h11.Connection(h11.SERVER, max_incomplete_event_size=_MAX_HEAD_BYTES)
    with anyio.move_on_after(_READ_SECONDS):
        while True:
            event = parser.next_event()
            if event is h11.NEED_DATA:
                try:
                    parser.receive_data(await connection.receive(4096))
                except (anyio.EndOfStream, anyio.BrokenResourceError, h11.RemoteProtocolError):
                    return None
                continue
            if isinstance(event, h11.Request):
                break
            return None
        target = event.target.decode("ascii", "replace")
        ours = event.method == b"GET" and urlsplit(target).path == path
        status, body = (200, _DONE_PAGE) if ours else (404, b"not found")
        headers = [
            ("content-type", "text/html; charset=utf-8"),
            ("content-length", str(len(body))),
            ("connection", "close"),
        ]
        try:
            await connection.send(parser.send(h11.Response(status_code=status, headers=headers)))
            ending = parser.send(h11.Data(data=body)) + parser.send(h11.EndOfMessage())
            await connection.send(ending)
        except (anyio.BrokenResourceError, h11.LocalProtocolError):
            pass
        return target if ours else None
    return None


class HeadlessAgent:
    """Visits the authorization URL with plain HTTP GETs, following redirects until one
    leads to `redirect_uri`, and returns that URL. Only for authorization servers that
    need no user (a page to log in or consent on is an error here)."""

    def __init__(
        self,
        redirect_uri: str = "http://127.0.0.1/callback",
        *,
        http_client: httpx2.AsyncClient | None = None,
        timeout_seconds: float = 30.0,
    ) -> None:
        self.redirect_uri = redirect_uri
        self._http = http_client
        self.timeout_seconds = timeout_seconds

    async def visit(self, authorization_url: str) -> str:
        async with _Borrowed(self._http) as http:
            url = authorization_url
            for _ in range(_MAX_REDIRECTS):
                response = await http.get(url, follow_redirects=False, timeout=self.timeout_seconds)
                location = response.headers.get("location")
                if not response.is_redirect or location is None:
                    raise RuntimeError(
                        f"the authorization server answered HTTP {response.status_code} "
                        "instead of redirecting: it wants a user (use LoopbackBrowser)"
                    )
                url = urljoin(url, location)
                if url.startswith(self.redirect_uri):
                    return url
        raise RuntimeError(f"more than {_MAX_REDIRECTS} redirects from the authorization URL")


class _Borrowed:
    """`http` as it is, or a fresh client closed at the end."""

    def __init__(self, http: httpx2.AsyncClient | None) -> None:
        self._given = http
        self._made: httpx2.AsyncClient | None = None

    async def __aenter__(self) -> httpx2.AsyncClient:
        if self._given is not None:
            return self._given
        self._made = httpx2.AsyncClient()
        return self._made

    async def __aexit__(self, *exc_info: object) -> None:
        if self._made is not None:
            await self._made.aclose()
