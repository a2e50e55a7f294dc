"""Names a package loads on first use (PEP 562), so importing it stays cheap."""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping
from typing import Any


def lazy_names(
    package: str, namespace: dict[str, Any], modules: Mapping[str, str], public: Iterable[str]
) -> tuple[Callable[[str], object], Callable[[], list[str]]]:
    """A package's `__getattr__` and `__dir__`: each name in `modules` is loaded from the
    module named there (relative to `package`) when first used, then kept in `namespace`."""
    listed = sorted(public)

    def load(name: str) -> object:
        module = modules.get(name)
        if module is None:
            raise AttributeError(f"module {package!r} has no attribute {name!r}")
        value = getattr(importlib.import_module(module, package), name)
        namespace[name] = value  # the next use is a plain lookup
        return value

    def listing() -> list[str]:
        return sorted({*(name for name in namespace if name.startswith("_")), *listed})

    return load, listing
