"""The documentation site builds strictly (`mkdocs build --strict`: a broken link, a page
left out of the nav or an API reference that does not resolve fails it), its API reference
documents the public calls, and every page of the nav is in it and in its search index."""

from __future__ import annotations

import importlib.util
import json
import os
import re
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

ROOT = Path(__file__).resolve().parent.parent
DOCS = ROOT / "docs"
REPOSITORY = "https://github.com/mcp-tasks/mcp-tasks"


def require_mkdocs() -> None:
    if importlib.util.find_spec("mkdocs") is not None:
        return
    message = "mkdocs is not installed: pip install -e '.[dev]' (or '.[docs]')"
    if os.environ.get("CI"):
        pytest.fail(message)
    pytest.skip(message)


@pytest.fixture(scope="module")
def site(tmp_path_factory: pytest.TempPathFactory) -> Path:
    require_mkdocs()
    site_dir = tmp_path_factory.mktemp("site")
    command = [sys.executable, "-m", "mkdocs", "build", "--strict", "--site-dir", str(site_dir)]
    done = subprocess.run(
        command,
        cwd=ROOT,
        check=False,
        capture_output=True,
        text=True,
        timeout=600,
        env={**os.environ, "NO_MKDOCS_2_WARNING": "1"},
    )
    assert done.returncode == 0, done.stderr
    return site_dir


def nav_pages() -> list[str]:
    """The pages the nav of mkdocs.yml names, in its order."""
    require_mkdocs()
    from mkdocs.config import load_config  # noqa: PLC0415  (the docs extra, checked above)

    def walk(items: Any) -> Iterator[str]:
        if isinstance(items, str):
            yield items
        elif isinstance(items, list):
            for item in items:
                yield from walk(item)
        elif isinstance(items, dict):
            for value in items.values():
                yield from walk(value)

    config = load_config(str(ROOT / "mkdocs.yml"))
    return list(walk(config["nav"]))


def url_of(page: str) -> str:
    """Where mkdocs puts a page (directory URLs): `reference/server.md` is `reference/server/`."""
    path = page.removesuffix(".md")
    if path == "index":
        return ""
    return path.removesuffix("/index").removesuffix("index") + "/"


def test_every_page_of_the_docs_is_in_the_nav() -> None:
    pages = set(nav_pages())
    written = {str(path.relative_to(DOCS)) for path in DOCS.rglob("*.md")}
    assert written - pages == set()
    assert pages - written == set()


def test_the_api_reference_documents_the_public_calls(site: Path) -> None:
    server = (site / "reference/server/index.html").read_text()
    client = (site / "reference/client/index.html").read_text()
    core = (site / "reference/core/index.html").read_text()
    for anchor in (
        "mcp_tasks.server.Server.tool",
        "mcp_tasks.server.Server.running",
        "mcp_tasks.ToolContext.report_progress",
        "mcp_tasks.ToolContext.elicit",
    ):
        assert f'id="{anchor}"' in server, anchor
    for anchor in (
        "mcp_tasks.client.Client.call_tool",
        "mcp_tasks.client.Client.await_task",
        "mcp_tasks.client.connect_http",
        "mcp_tasks.journal.TaskJournal",
    ):
        assert f'id="{anchor}"' in client, anchor
    assert 'id="mcp_tasks.core.ServerCore.receive"' in core
    stores = (site / "reference/stores/index.html").read_text()
    assert 'id="mcp_tasks.store.RedisTaskStore"' in stores


def test_the_reference_is_limited_to_the_public_names(site: Path) -> None:
    """Only what a module's `__all__` lists: no private module, no private name."""
    html = "".join(path.read_text() for path in (site / "reference").rglob("*.html"))
    anchors = set(re.findall(r'id="(mcp_tasks\.[^"]+)"', html))
    assert anchors, "the reference documents something"
    private = [a for a in anchors if re.search(r"\._[a-z]", a.split("--")[0])]
    assert private == []


def test_every_nav_page_is_built_and_searchable(site: Path) -> None:
    index = json.loads((site / "search/search_index.json").read_text())
    locations = {entry["location"].split("#", 1)[0] for entry in index["docs"]}
    for page in nav_pages():
        url = url_of(page)
        assert (site / url / "index.html").exists(), page
        assert url in locations, page


def test_links_to_repository_files_name_files_that_exist() -> None:
    """Pages link to files outside docs/ by their address on GitHub (a relative link would
    leave the site); each such link names a file, or a directory, of this repository."""
    broken = []
    pattern = re.escape(REPOSITORY) + r"/(blob|tree)/main/([^)#\s]+)"
    for page in [ROOT / "README.md", *sorted(DOCS.rglob("*.md"))]:
        for kind, path in re.findall(pattern, page.read_text()):
            target = ROOT / path.rstrip("/")
            if not (target.is_file() if kind == "blob" else target.is_dir()):
                broken.append(f"{page.relative_to(ROOT)}: {kind}/main/{path}")
    assert broken == []
