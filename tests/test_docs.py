"""The docs say what the code does: the state diagram in docs/core.md is the table's own."""

from __future__ import annotations

from pathlib import Path

from mcp_tasks.core import TRANSITIONS, mermaid_diagram

DOCS = Path(__file__).parent.parent / "docs"


def test_core_docs_diagram_is_generated_from_the_table() -> None:
    text = (DOCS / "core.md").read_text()
    block = text.split("<!-- state-diagram:start -->")[1].split("<!-- state-diagram:end -->")[0]
    assert block.strip() == f"```mermaid\n{mermaid_diagram()}```"


def test_core_docs_table_lists_every_event() -> None:
    text = (DOCS / "core.md").read_text()
    for event, sources, dest in TRANSITIONS:
        froms = ", ".join(f"`{s.value}`" for s in sources)
        assert f"| `{event.value}` | {froms} | `{dest.value}` |" in text
