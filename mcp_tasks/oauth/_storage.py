"""Where a client keeps what it logged in with: per server, the authorization server's
issuer, the client registration there, and the tokens.

`MemoryTokenStorage` forgets at exit; `FileTokenStorage` keeps one JSON file, created 0600
in a 0700 folder, replaced whole on each save, never opened through a symbolic link, and
refused when another user could read it. Secrets never show in a `repr`.
"""

from __future__ import annotations

import fcntl
import os
import stat
import tempfile
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Final, Literal, Protocol

import anyio
import msgspec

__all__ = [
    "FileTokenStorage",
    "Login",
    "MemoryTokenStorage",
    "Registration",
    "TokenStorage",
    "Tokens",
    "default_logins_path",
]

_FORMAT: Final = 1
_MAX_FILE_BYTES: Final = 4 * 1024 * 1024


class Registration(msgspec.Struct, frozen=True, repr_omit_defaults=True):
    """A client's registration at one authorization server."""

    client_id: str
    client_secret: str | None = None
    auth_method: str = "none"
    """How the client authenticates at the token endpoint (`none`, `client_secret_basic`,
    `client_secret_post`, `private_key_jwt`)."""
    redirect_uris: list[str] = []
    how: Literal["dynamic", "metadata-document", "pre-registered"] = "dynamic"

    def __repr__(self) -> str:
        secret = "" if self.client_secret is None else ", client_secret=<hidden>"
        return f"Registration(client_id={self.client_id!r}{secret}, how={self.how!r})"


class Tokens(msgspec.Struct, frozen=True):
    """An access token, the refresh token if one came, when the access token stops working
    (seconds since the epoch, by this machine's clock), and the scopes it was asked for."""

    access_token: str
    refresh_token: str | None = None
    expires_at: float | None = None
    scopes: list[str] = []

    def __repr__(self) -> str:
        refresh = "" if self.refresh_token is None else ", refresh_token=<hidden>"
        return f"Tokens(access_token=<hidden>{refresh}, scopes={self.scopes!r})"

    def expired(self, now: float, leeway: float = 30.0) -> bool:
        return self.expires_at is not None and now >= self.expires_at - leeway


class Login(msgspec.Struct, frozen=True):
    """What a client holds for one server: all of it bound to one issuer (credentials and
    tokens are never carried to another authorization server)."""

    issuer: str
    registration: Registration | None = None
    tokens: Tokens | None = None


class TokenStorage(Protocol):
    """Keeps a `Login` per server URL."""

    async def load(self, server_url: str) -> Login | None: ...

    async def save(self, server_url: str, login: Login) -> None: ...

    async def forget(self, server_url: str) -> None: ...


class MemoryTokenStorage:
    """Logins for as long as the process runs."""

    def __init__(self) -> None:
        self._logins: dict[str, Login] = {}

    async def load(self, server_url: str) -> Login | None:
        return self._logins.get(server_url)

    async def save(self, server_url: str, login: Login) -> None:
        self._logins[server_url] = login

    async def forget(self, server_url: str) -> None:
        self._logins.pop(server_url, None)


class _File(msgspec.Struct):
    format: int
    logins: dict[str, Login]


def default_logins_path() -> Path:
    """`$XDG_CONFIG_HOME/mcp-tasks/logins.json` (`~/.config/...` when the variable is
    unset)."""
    base = os.environ.get("XDG_CONFIG_HOME") or str(Path.home() / ".config")
    return Path(base) / "mcp-tasks" / "logins.json"


_PATH_LOCKS: dict[str, threading.Lock] = {}
_PATH_LOCKS_GUARD = threading.Lock()


def _path_lock(path: Path) -> threading.Lock:
    """One lock per file for the whole process (every storage on a file shares it)."""
    key = os.path.abspath(path)
    with _PATH_LOCKS_GUARD:
        return _PATH_LOCKS.setdefault(key, threading.Lock())


class FileTokenStorage:
    """Logins kept in one JSON file (default: `default_logins_path()`). A change is a
    read, a change and a whole new file put in place, under a lock shared by every storage
    on the file in this process and an advisory lock (`flock`) on `PATH.lock` for other
    processes."""

    def __init__(self, path: str | os.PathLike[str] | None = None) -> None:
        self.path = Path(path) if path is not None else default_logins_path()

    async def load(self, server_url: str) -> Login | None:
        logins = await anyio.to_thread.run_sync(self._read_locked)
        return logins.get(server_url)

    async def save(self, server_url: str, login: Login) -> None:
        await anyio.to_thread.run_sync(self._change, server_url, login)

    async def forget(self, server_url: str) -> None:
        await anyio.to_thread.run_sync(self._change, server_url, None)

    def servers(self) -> list[str]:
        """The servers there is a login for."""
        return sorted(self._read_locked())

    @contextmanager
    def _locked(self) -> Iterator[None]:
        with _path_lock(self.path):
            folder = self.path.parent
            folder.mkdir(mode=0o700, parents=True, exist_ok=True)
            lock_path = folder / f".{self.path.name}.lock"
            flags = os.O_RDWR | os.O_CREAT | os.O_NOFOLLOW
            descriptor = os.open(lock_path, flags, 0o600)
            try:
                fcntl.flock(descriptor, fcntl.LOCK_EX)
                yield
            finally:
                os.close(descriptor)  # (closing releases the flock)

    def _read_locked(self) -> dict[str, Login]:
        if not self.path.parent.exists():
            return {}
        try:
            with self._locked():
                return self._read()
        except PermissionError:  # (a folder this user may read but not write: no lock)
            if os.access(self.path.parent, os.W_OK):
                raise
            return self._read()

    def _change(self, server_url: str, login: Login | None) -> None:
        with self._locked():
            logins = self._read()
            if login is None:
                if logins.pop(server_url, None) is None:
                    return
            else:
                logins[server_url] = login
            self._write(logins)

    def _read(self) -> dict[str, Login]:
        try:  # (O_NONBLOCK: a FIFO in the file's place does not hang the open)
            descriptor = os.open(self.path, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK)
        except FileNotFoundError:
            return {}
        except OSError as error:
            raise OSError(f"cannot open the logins file {self.path}: {error.strerror}") from None
        try:
            mode = os.fstat(descriptor).st_mode
            if not stat.S_ISREG(mode):
                raise OSError(f"the logins file {self.path} is not a regular file")
            if mode & 0o077:
                raise OSError(
                    f"the logins file {self.path} can be read by other users "
                    f"(mode {stat.S_IMODE(mode):o}); make it 600 (chmod 600) or remove it"
                )
            os.set_blocking(descriptor, True)
        except BaseException:
            os.close(descriptor)
            raise
        with os.fdopen(descriptor, "rb") as file:
            data = file.read(_MAX_FILE_BYTES + 1)
        if len(data) > _MAX_FILE_BYTES:
            raise OSError(f"the logins file {self.path} is larger than {_MAX_FILE_BYTES} bytes")
        try:
            stored = msgspec.json.decode(data, type=_File)
        except msgspec.DecodeError as error:
            raise OSError(f"the logins file {self.path} is damaged: {error}") from None
        if stored.format != _FORMAT:
            raise OSError(f"the logins file {self.path} has format {stored.format}, not {_FORMAT}")
        return stored.logins

    def _write(self, logins: dict[str, Login]) -> None:
        folder = self.path.parent
        descriptor, name = tempfile.mkstemp(dir=folder, prefix=f".{self.path.name}.")
        temporary = Path(name)  # (mkstemp makes it 0600)
        try:
            with os.fdopen(descriptor, "wb") as file:
                file.write(msgspec.json.encode(_File(format=_FORMAT, logins=logins)))
                file.flush()
                os.fsync(file.fileno())
            os.replace(temporary, self.path)
        except BaseException:
            temporary.unlink(missing_ok=True)
            raise
