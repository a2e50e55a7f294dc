"""Where logins are kept (mcp_tasks/oauth/_storage.py): one contract both storages pass, and
the file's own rules: created 0600 in a 0700 folder, never read when another user could read
it, never through a symbolic link, a damaged one refused naming it; no secret in a `repr`."""

from __future__ import annotations

import json
import logging
import os
import stat
from collections.abc import Callable
from pathlib import Path

import anyio
import pytest

from mcp_tasks.oauth import (
    FileTokenStorage,
    Login,
    MemoryTokenStorage,
    OAuth,
    Registration,
    Tokens,
    TokenStorage,
    default_logins_path,
)

SERVER = "https://s.example/mcp"
OTHER_SERVER = "http://127.0.0.1:8000/mcp"
SECRET = "client-secret-do-not-show"
ACCESS = "access-token-do-not-show"
REFRESH = "refresh-token-do-not-show"

FULL = Login(
    issuer="https://auth.example/tenant",
    registration=Registration(
        client_id="client-1",
        client_secret=SECRET,
        auth_method="client_secret_post",
        redirect_uris=["http://127.0.0.1:5555/callback"],
        how="dynamic",
    ),
    tokens=Tokens(
        access_token=ACCESS,
        refresh_token=REFRESH,
        expires_at=1_700_000_123.5,
        scopes=["mcp:read", "offline_access"],
    ),
)
BARE = Login(issuer="http://127.0.0.1:4444")


@pytest.fixture
def logins_path(tmp_path: Path) -> Path:
    return tmp_path / "config" / "mcp-tasks" / "logins.json"


Make = Callable[[Path], TokenStorage]
STORAGES: dict[str, Make] = {
    "memory": lambda _: MemoryTokenStorage(),
    "file": FileTokenStorage,
}


@pytest.mark.parametrize("make", STORAGES.values(), ids=STORAGES.keys())
async def test_a_storage_keeps_a_login_per_server(make: Make, logins_path: Path) -> None:
    storage = make(logins_path)
    assert await storage.load(SERVER) is None
    await storage.save(SERVER, FULL)
    await storage.save(OTHER_SERVER, BARE)
    assert await storage.load(SERVER) == FULL
    assert await storage.load(OTHER_SERVER) == BARE
    assert await storage.load(SERVER + "/") is None  # (server URLs are kept as given)
    replaced = Login(issuer="https://other-auth.example")
    await storage.save(SERVER, replaced)
    assert await storage.load(SERVER) == replaced
    await storage.forget(SERVER)
    await storage.forget(SERVER)  # (forgetting twice is no error)
    assert await storage.load(SERVER) is None
    assert await storage.load(OTHER_SERVER) == BARE


async def test_memory_storages_are_separate() -> None:
    first, second = MemoryTokenStorage(), MemoryTokenStorage()
    await first.save(SERVER, FULL)
    assert await second.load(SERVER) is None


# --- the file ------------------------------------------------------------------------------


async def test_the_file_is_created_0600_in_a_0700_folder(logins_path: Path) -> None:
    assert not logins_path.parent.exists()
    await FileTokenStorage(logins_path).save(SERVER, FULL)
    assert stat.S_IMODE(logins_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(logins_path.parent.stat().st_mode) == 0o700
    assert stat.S_ISREG(logins_path.lstat().st_mode)
    assert sorted(path.name for path in logins_path.parent.iterdir()) == [
        ".logins.json.lock",  # (the lock other processes wait on)
        "logins.json",
    ]


async def test_a_file_saved_again_stays_0600_and_has_no_temporary_left(logins_path: Path) -> None:
    storage = FileTokenStorage(logins_path)
    await storage.save(SERVER, FULL)
    await storage.save(OTHER_SERVER, BARE)
    await storage.forget(SERVER)
    assert stat.S_IMODE(logins_path.stat().st_mode) == 0o600
    assert sorted(path.name for path in logins_path.parent.iterdir()) == [
        ".logins.json.lock",  # (the lock other processes wait on)
        "logins.json",
    ]


async def test_storages_saving_at_once_on_one_file_lose_no_login(logins_path: Path) -> None:
    storages = [FileTokenStorage(logins_path) for _ in range(8)]

    async def save_many(number: int, storage: FileTokenStorage) -> None:
        for round_ in range(10):
            await storage.save(f"http://127.0.0.1:{number}/mcp/{round_}", BARE)

    async with anyio.create_task_group() as group:
        for number, storage in enumerate(storages):
            group.start_soon(save_many, number, storage)
    assert len(FileTokenStorage(logins_path).servers()) == 80


async def test_the_file_round_trips_every_field_through_a_new_storage(logins_path: Path) -> None:
    await FileTokenStorage(logins_path).save(SERVER, FULL)
    await FileTokenStorage(logins_path).save(OTHER_SERVER, BARE)
    again = FileTokenStorage(logins_path)
    loaded = await again.load(SERVER)
    assert loaded == FULL
    assert loaded is not None and loaded.registration is not None and loaded.tokens is not None
    assert loaded.registration.client_secret == SECRET
    assert loaded.registration.auth_method == "client_secret_post"
    assert loaded.registration.redirect_uris == ["http://127.0.0.1:5555/callback"]
    assert loaded.tokens.expires_at == 1_700_000_123.5
    assert loaded.tokens.refresh_token == REFRESH
    assert await again.load(OTHER_SERVER) == BARE
    assert again.servers() == sorted([SERVER, OTHER_SERVER])


async def test_a_missing_file_is_no_login_and_forgetting_creates_none(logins_path: Path) -> None:
    storage = FileTokenStorage(logins_path)
    assert await storage.load(SERVER) is None
    assert storage.servers() == []
    await storage.forget(SERVER)
    assert not logins_path.exists()


@pytest.mark.parametrize("mode", [0o640, 0o604, 0o660, 0o644, 0o610, 0o601, 0o620])
async def test_a_file_others_could_read_is_refused_naming_chmod(
    logins_path: Path, mode: int
) -> None:
    storage = FileTokenStorage(logins_path)
    await storage.save(SERVER, FULL)
    before = logins_path.read_bytes()
    logins_path.chmod(mode)
    with pytest.raises(OSError, match=r"chmod 600") as raised:
        await storage.load(SERVER)
    assert str(logins_path) in str(raised.value)
    with pytest.raises(OSError, match=r"chmod 600"):
        await storage.save(OTHER_SERVER, BARE)
    assert logins_path.read_bytes() == before


@pytest.mark.parametrize("mode", [0o400, 0o600, 0o700])
async def test_a_file_only_its_owner_can_read_is_read(logins_path: Path, mode: int) -> None:
    await FileTokenStorage(logins_path).save(SERVER, FULL)
    logins_path.chmod(mode)
    assert await FileTokenStorage(logins_path).load(SERVER) == FULL


async def test_a_symbolic_link_is_never_followed(logins_path: Path, tmp_path: Path) -> None:
    target = tmp_path / "elsewhere.json"
    await FileTokenStorage(target).save(SERVER, FULL)
    before = target.read_bytes()
    logins_path.parent.mkdir(parents=True, mode=0o700)
    logins_path.symlink_to(target)
    storage = FileTokenStorage(logins_path)
    with pytest.raises(OSError, match="cannot open the logins file") as raised:
        await storage.load(SERVER)
    assert str(logins_path) in str(raised.value)
    with pytest.raises(OSError):
        await storage.save(OTHER_SERVER, BARE)
    assert target.read_bytes() == before
    assert logins_path.is_symlink()


@pytest.mark.parametrize(
    "content",
    [
        b"{not json",
        b"",
        b"[]",
        b'{"format": 1}',
        b'{"format": 1, "logins": {"https://s.example/mcp": {"tokens": {}}}}',
        b'{"format": 1, "logins": {"https://s.example/mcp": {"issuer": 5}}}',
    ],
    ids=["not-json", "empty", "list", "no-logins", "no-issuer", "issuer-not-a-string"],
)
async def test_a_damaged_file_is_refused_naming_its_path(logins_path: Path, content: bytes) -> None:
    logins_path.parent.mkdir(parents=True, mode=0o700)
    logins_path.write_bytes(content)
    logins_path.chmod(0o600)
    with pytest.raises(OSError, match="is damaged") as raised:
        await FileTokenStorage(logins_path).load(SERVER)
    assert str(logins_path) in str(raised.value)


async def test_a_file_of_another_format_is_refused(logins_path: Path) -> None:
    logins_path.parent.mkdir(parents=True, mode=0o700)
    logins_path.write_text(json.dumps({"format": 2, "logins": {}}))
    logins_path.chmod(0o600)
    with pytest.raises(OSError, match="has format 2, not 1"):
        await FileTokenStorage(logins_path).load(SERVER)


async def test_a_folder_in_the_files_place_is_refused_naming_it(logins_path: Path) -> None:
    logins_path.mkdir(parents=True, mode=0o700)
    with pytest.raises(OSError, match="not a regular file") as raised:
        await FileTokenStorage(logins_path).load(SERVER)
    assert str(logins_path) in str(raised.value)


async def test_the_file_holds_the_tokens_but_nothing_else_shows_them(logins_path: Path) -> None:
    await FileTokenStorage(logins_path).save(SERVER, FULL)
    stored = json.loads(logins_path.read_bytes())
    assert stored["format"] == 1
    assert stored["logins"][SERVER]["tokens"]["access_token"] == ACCESS


def test_the_default_path_follows_xdg_config_home(
    monkeypatch: pytest.MonkeyPatch, tmp_path: Path
) -> None:
    monkeypatch.setenv("XDG_CONFIG_HOME", str(tmp_path / "xdg"))
    assert default_logins_path() == tmp_path / "xdg" / "mcp-tasks" / "logins.json"
    assert FileTokenStorage().path == default_logins_path()
    monkeypatch.delenv("XDG_CONFIG_HOME")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    assert default_logins_path() == tmp_path / "home" / ".config" / "mcp-tasks" / "logins.json"


# --- repr ------------------------------------------------------------------------------------


def test_no_repr_shows_a_secret_or_a_token() -> None:
    shown = [repr(FULL), str(FULL), repr(FULL.registration), repr(FULL.tokens), repr([FULL])]
    for text in shown:
        for secret in (SECRET, ACCESS, REFRESH):
            assert secret not in text
    assert repr(FULL.registration) == (
        "Registration(client_id='client-1', client_secret=<hidden>, how='dynamic')"
    )
    assert repr(FULL.tokens) == (
        "Tokens(access_token=<hidden>, refresh_token=<hidden>, "
        "scopes=['mcp:read', 'offline_access'])"
    )


def test_a_repr_says_when_there_is_no_secret() -> None:
    assert repr(Registration(client_id="c")) == "Registration(client_id='c', how='dynamic')"
    assert repr(Tokens(access_token=ACCESS)) == "Tokens(access_token=<hidden>, scopes=[])"


@pytest.mark.parametrize(
    ("expires_at", "now", "expired"),
    [
        (None, 1e12, False),
        (1000.0, 900.0, False),
        (1000.0, 969.9, False),
        (1000.0, 970.0, True),
        (1000.0, 2000.0, True),
    ],
)
def test_tokens_expire_30_seconds_early(
    expires_at: float | None, now: float, expired: bool
) -> None:
    assert Tokens(access_token="a", expires_at=expires_at).expired(now) is expired


async def test_the_file_is_never_readable_by_others_whatever_the_umask(logins_path: Path) -> None:
    previous = os.umask(0)
    try:
        await FileTokenStorage(logins_path).save(SERVER, FULL)
    finally:
        os.umask(previous)
    assert stat.S_IMODE(logins_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(logins_path.parent.stat().st_mode) == 0o700


async def test_a_client_whose_logins_file_cannot_be_read_goes_on_without(
    logins_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    logins_path.parent.mkdir(mode=0o700, parents=True)
    logins_path.write_bytes(b"{not json")
    logins_path.chmod(0o600)
    oauth = OAuth(SERVER, storage=FileTokenStorage(logins_path))
    with caplog.at_level(logging.WARNING, "mcp_tasks.oauth"):
        assert await oauth.authorization() is None  # (the server says if a login is needed)
    assert "cannot be read" in caplog.text and str(logins_path) in caplog.text


async def test_a_login_that_cannot_be_stored_is_kept_for_the_process(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    (tmp_path / "config").write_text("a file where the folder should be")
    oauth = OAuth(SERVER, storage=FileTokenStorage(tmp_path / "config" / "logins.json"))
    with caplog.at_level(logging.WARNING, "mcp_tasks.oauth"):
        await oauth._keep(FULL)  # what a login ends with
    assert await oauth.authorization() == f"Bearer {FULL.tokens.access_token}"  # type: ignore[union-attr]
    assert "cannot be stored" in caplog.text
    assert FULL.tokens.access_token not in caplog.text  # type: ignore[union-attr]
