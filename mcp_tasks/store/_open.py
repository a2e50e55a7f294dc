"""Stores named by URL, as `mcp-tasks serve --store URL` takes them."""

from __future__ import annotations

from pathlib import Path
from urllib.parse import parse_qsl, urlsplit

from ._base import TaskStore, redacted
from ._memory import MemoryTaskStore

STORE_URL_HELP = (
    "memory:// (the default), sqlite:///relative/path.db, sqlite:////absolute/path.db "
    "(add ?synchronous=full to survive power loss, ?shared=true for several processes on one "
    "machine), or redis://127.0.0.1:6379/0 "
    "(add ?prefix=NAME to keep several servers' tasks apart)"
)


def open_store(url: str | None, *, shared: bool = False) -> TaskStore:
    """The store `url` names (see `STORE_URL_HELP`); memory for None or "memory://".
    `shared` opens a SQLite store for several processes, as `?shared=true` does (a worker
    of `mcp-tasks serve --workers N` opens its store so).

    Raises ValueError for a URL that names no store, naming what would.
    """
    if url is None or url in ("memory", "memory://"):
        return MemoryTaskStore()
    scheme = urlsplit(url).scheme
    if scheme == "sqlite":
        return _open_sqlite(url, shared=shared)
    if scheme in ("redis", "rediss", "unix"):
        from ._redis import RedisTaskStore  # noqa: PLC0415 - redis only if used

        return RedisTaskStore(url)
    raise ValueError(f"no store for {redacted(url)!r}; use {STORE_URL_HELP}")


_TRUTH: dict[str, bool] = {"true": True, "1": True, "yes": True}
_TRUTH.update({"false": False, "0": False, "no": False})


def _open_sqlite(url: str, *, shared: bool) -> TaskStore:
    rest = url[len("sqlite:") :]
    path, _, query = rest.partition("?")
    if not path.startswith("///") or len(path) == 3:
        raise ValueError(
            f"a SQLite store URL is sqlite:///relative/path.db or sqlite:////absolute/path.db, "
            f"not {url!r}"
        )
    options = dict(parse_qsl(query))
    synchronous = options.pop("synchronous", "normal").lower()
    sharing = options.pop("shared", "false").lower()
    if options:
        raise ValueError(f"unknown SQLite store option(s) {sorted(options)} in {url!r}")
    if synchronous not in ("normal", "full"):
        raise ValueError(f"synchronous must be 'normal' or 'full', not {synchronous!r}")
    if sharing not in _TRUTH:
        raise ValueError(f"shared must be 'true' or 'false', not {sharing!r}")
    from ._sqlite import SQLiteTaskStore  # noqa: PLC0415 - sqlite3 only if used

    return SQLiteTaskStore(
        Path(path[3:]),
        synchronous=synchronous,  # type: ignore[arg-type]
        shared=shared or _TRUTH[sharing],
    )
