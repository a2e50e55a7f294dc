"""The Python snippets of a docs page, and running one of them as written."""

from __future__ import annotations

import re
import sys
import types
from pathlib import Path
from typing import Any

DOCS = Path(__file__).parent.parent / "docs"


class Page:
    def __init__(self, name: str) -> None:
        self.path = DOCS / name
        self.snippets: list[str] = re.findall(
            r"```python\n(.*?)```", self.path.read_text(), re.DOTALL
        )

    def run(self, marker: str) -> dict[str, Any]:
        """Run the one snippet that contains `marker`; the names it made."""
        [code] = [text for text in self.snippets if marker in text]
        # A module of its own in sys.modules, as an imported file has (dataclasses and
        # typing look a class's module up there).
        module = types.ModuleType(f"snippet_of_{self.path.stem}")
        sys.modules[module.__name__] = module
        namespace: dict[str, Any] = module.__dict__
        exec(compile(code, str(self.path), "exec"), namespace)
        return namespace
