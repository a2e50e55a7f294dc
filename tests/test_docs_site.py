"""The documentation site builds strictly (`mkdocs build --strict`: a broken link, a page
left out of the nav or an API reference that does not resolve fails it), its API reference
documents the public calls, and every page of the nav is in it and in its search index."""

from __future__ import annotations

import importlib
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
MADE_UP_ADDRESSES = re.compile(r"github\.com/mcp-tasks/mcp-tasks|mcp-tasks\.github\.io")
"""The placeholder the project's address once was: it has no public address yet."""


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


def test_no_page_links_to_a_made_up_address() -> None:
    """The project has no public address yet: pages name files outside docs/ by their path
    in the repository (a relative link would leave the site), the site has no repo_url or
    site_url, and no page or link points at the placeholder that once stood for them (the
    project's notes in status.md tell that history, so they may name it)."""
    pages = [ROOT / "README.md", ROOT / "mkdocs.yml", *sorted(DOCS.rglob("*.md"))]
    found = [
        f"{page.relative_to(ROOT)}: {match}"
        for page in pages
        if page != DOCS / "status.md"
        for match in MADE_UP_ADDRESSES.findall(page.read_text())
    ]
    assert found == []
    assert len(pages) > 20  # the pages were read


# --- the API reference: what each page documents, and in what order -------------------------

REFERENCE_PAGES = {
    "reference/server/index.html": ["mcp_tasks.server"],
    "reference/client/index.html": ["mcp_tasks.client", "mcp_tasks.journal"],
    "reference/oauth/index.html": ["mcp_tasks.oauth"],
    "reference/auth/index.html": ["mcp_tasks.auth"],
    "reference/core/index.html": [
        "mcp_tasks.core",
        "mcp_tasks.core.inputs",
        "mcp_tasks.core.commands",
        "mcp_tasks.core.states",
        "mcp_tasks.core.wire",
    ],
    "reference/stores/index.html": ["mcp_tasks.store"],
    "reference/transports/index.html": ["mcp_tasks.transports"],
    "reference/asgi/index.html": ["mcp_tasks.asgi"],
    "reference/otel/index.html": ["mcp_tasks.otel"],
    "reference/replay/index.html": ["mcp_tasks.replay", "mcp_tasks.recording", "mcp_tasks.testing"],
    "reference/integrations/mcp_sdk/index.html": ["mcp_tasks.integrations.mcp_sdk"],
}
"""The modules each reference page documents."""

CALLED_CONSTANTS = {"mcp_tasks.core.START_TASK"}
"""Upper-case names a user hands back, documented with the calls rather than as constants."""


def exports_of(module: str) -> list[str]:
    """The `__all__` of a module of ours; [] for one whose extra is not installed (the site
    is built from the sources, without importing them)."""
    try:
        imported = importlib.import_module(module)
    except ImportError:
        return []
    return list(getattr(imported, "__all__", []))


def object_anchors(html: str) -> list[str]:
    """The ids of the documented objects (and section headings) of a page's article, in
    page order."""
    article = html[html.index("<article") :]
    return re.findall(r'<h[1-6] id="([^"]+)"', article)


def test_every_public_name_is_on_its_reference_page(site: Path) -> None:
    """A page lists its members explicitly (to order them), so a name added to `__all__`
    and not to the page would go missing: this says which."""
    missing = []
    for page, modules in REFERENCE_PAGES.items():
        anchors = set(object_anchors((site / page).read_text()))
        for module in modules:
            missing += [
                f"{page}: {module}.{name}"
                for name in exports_of(module)
                if f"{module}.{name}" not in anchors
            ]
    assert missing == []


def test_the_classes_listed_member_by_member_show_every_member(site: Path) -> None:
    from mcp_tasks import RequestContext, ToolContext  # noqa: PLC0415
    from mcp_tasks.client import Client  # noqa: PLC0415
    from mcp_tasks.core import ServerCore  # noqa: PLC0415
    from mcp_tasks.server import Server  # noqa: PLC0415

    shown = [
        ("reference/server/index.html", "mcp_tasks.server.Server", Server),
        ("reference/server/index.html", "mcp_tasks.ToolContext", ToolContext),
        ("reference/server/index.html", "mcp_tasks.RequestContext", RequestContext),
        ("reference/client/index.html", "mcp_tasks.client.Client", Client),
        ("reference/core/index.html", "mcp_tasks.core.ServerCore", ServerCore),
    ]
    missing = []
    for page, path, cls in shown:
        anchors = set(object_anchors((site / page).read_text()))
        public = [name for name in dir(cls) if not name.startswith("_")]
        missing += [f"{path}.{name}" for name in public if f"{path}.{name}" not in anchors]
    assert missing == []


def test_each_reference_page_leads_with_what_a_user_calls(site: Path) -> None:
    """No page starts with a constant; the constants come under a "Constants" heading, after
    the calls."""
    server = object_anchors((site / "reference/server/index.html").read_text())
    assert [a for a in server if a.startswith("mcp_tasks.server.Server.")][:5] == [
        f"mcp_tasks.server.Server.{name}"
        for name in ("tool", "prompt", "resource", "resource_template", "completion")
    ]
    client = object_anchors((site / "reference/client/index.html").read_text())
    assert [a for a in client if a.startswith("mcp_tasks.")][:2] == [
        "mcp_tasks.client.Client",
        "mcp_tasks.client.Client.call_tool",
    ]
    misplaced = []
    for page, modules in REFERENCE_PAGES.items():
        anchors = object_anchors((site / page).read_text())
        objects = [a for a in anchors if a.startswith("mcp_tasks.") and a not in modules]
        first_constant_allowed = anchors.index("constants") if "constants" in anchors else None
        if objects and objects[0].rsplit(".", 1)[1].isupper():
            misplaced.append(f"{page} starts with the constant {objects[0]}")
        for index, anchor in enumerate(anchors):
            parent, _, name = anchor.rpartition(".")
            constant = parent in modules and name.isupper() and anchor not in CALLED_CONSTANTS
            if constant and (first_constant_allowed is None or index < first_constant_allowed):
                misplaced.append(f"{page}: {anchor} before the Constants heading")
    assert misplaced == []


def test_prompts_and_resources_sit_with_the_tools() -> None:
    require_mkdocs()
    from mkdocs.config import load_config  # noqa: PLC0415

    groups = {
        title: pages
        for item in load_config(str(ROOT / "mkdocs.yml"))["nav"]
        for title, pages in item.items()
        if isinstance(pages, list)
    }
    [group] = [pages for pages in groups.values() if {"Writing tools": "tools.md"} in pages]
    assert {"Prompts and resources": "prompts-and-resources.md"} in group
