"""docs/oauth.md's example as a user runs it: against our protected server and the real
authorization server (tests/oauth/realm.py), the system browser replaced by the browser
script (tests/oauth/browser.py), the token file by one in a temporary folder. It logs in
once, and a second run uses the file with no browser."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from typing import Any

import pytest
import trio
from doc_snippets import Page

from oauth.realm import realm

pytestmark = [pytest.mark.trio, pytest.mark.slow]  # (real processes: CI runs them once)

BROWSER = Path(__file__).resolve().parent / "browser.py"


async def test_the_example_logs_in_once_and_then_uses_the_file(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    [code] = Page("oauth.md").snippets
    opened: list[str] = []

    def open_url(url: str) -> None:
        opened.append(url)
        subprocess.run([sys.executable, str(BROWSER), url], check=True, timeout=60)

    code = code.replace("LoopbackBrowser()", "LoopbackBrowser(open_url=open_url)")
    code = code.replace("FileTokenStorage()", f"FileTokenStorage({str(tmp_path / 'l.json')!r})")
    names: dict[str, Any] = {"open_url": open_url}
    exec(compile(code, "docs/oauth.md", "exec"), names)
    async with realm() as world:
        with trio.fail_after(60):
            await names["main"](world.url)
            await names["main"](world.url)
    assert capsys.readouterr().out == "echo: hi\necho: hi\n"  # (the realm's echo tool)
    assert len(opened) == 1  # the second run found the tokens in the file
    assert opened[0].startswith(world.issuer + "/auth?")
