"""A tool's parameter descriptions from its docstring, in the three common styles:

    Args:                        :param city: The city.       Parameters
        city: The city.                                        ----------
        days (int): How many                                   city : str
            days ahead.                                            The city.

Each description is what follows the name, its continuation lines joined by a space.
"""

from __future__ import annotations

import re
from typing import Final

__all__ = ["parameter_descriptions"]

_GOOGLE_HEADINGS: Final = frozenset({"args:", "arguments:", "parameters:", "params:"})
_GOOGLE_ITEM: Final = re.compile(r"(\*{0,2}\w+)\s*(?:\([^)]*\))?\s*:\s*(.*)")
_SPHINX_ITEM: Final = re.compile(r":param\s+(?:[^:]*\s)?(\w+)\s*:\s*(.*)")
_NUMPY_ITEM: Final = re.compile(r"(\w+)\s*(?::\s*.*)?")


def parameter_descriptions(docstring: str | None) -> dict[str, str]:
    """Each documented parameter's description (`inspect.getdoc`'s text, dedented)."""
    if not docstring:
        return {}
    lines = docstring.splitlines()
    found = _sphinx(lines)
    found.update(_google(lines))
    found.update(_numpy(lines))
    return found


def _indent(line: str) -> int:
    return len(line) - len(line.lstrip())


def _google(lines: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for start, line in enumerate(lines):
        if line.strip().lower() not in _GOOGLE_HEADINGS or lines[start + 1 : start + 2] == [
            "-" * len(line.strip())
        ]:
            continue
        heading = _indent(line)
        item_indent = None
        name = None
        for entry in lines[start + 1 :]:
            if not entry.strip():
                continue
            depth = _indent(entry)
            if depth <= heading:
                break  # the next section
            if item_indent is None:
                item_indent = depth
            match = _GOOGLE_ITEM.fullmatch(entry.strip())
            if depth == item_indent and match:
                name = match.group(1).lstrip("*")
                found[name] = match.group(2).strip()
            elif name is not None:
                found[name] = f"{found[name]} {entry.strip()}".strip()
    return found


def _sphinx(lines: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    name = None
    for line in lines:
        match = _SPHINX_ITEM.fullmatch(line.strip())
        if match:
            name = match.group(1)
            found[name] = match.group(2).strip()
        elif line.strip().startswith(":") or not line.strip():
            name = None
        elif name is not None and line.startswith((" ", "\t")):
            found[name] = f"{found[name]} {line.strip()}".strip()
    return found


def _numpy(lines: list[str]) -> dict[str, str]:
    found: dict[str, str] = {}
    for start, line in enumerate(lines[:-1]):
        underline = lines[start + 1].strip()
        if line.strip().lower() != "parameters" or not underline or set(underline) != {"-"}:
            continue
        name = None
        for at in range(start + 2, len(lines)):
            entry = lines[at]
            if not entry.strip():
                continue
            if _indent(entry) == _indent(line):
                match = _NUMPY_ITEM.fullmatch(entry.strip())
                following = lines[at + 1].strip() if at + 1 < len(lines) else ""
                if match is None or (following and set(following) == {"-"}):
                    break  # the next section's heading
                name = match.group(1)
                found[name] = ""
            elif name is not None:
                found[name] = f"{found[name]} {entry.strip()}".strip()
    return {name: text for name, text in found.items() if text}
