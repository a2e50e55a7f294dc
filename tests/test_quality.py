"""The package type-checks under mypy --strict and is ruff-clean: part of the test suite, so
CI enforces it on every change."""

from __future__ import annotations

import ast
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).parent.parent


def _tool(name: str) -> str:
    found = shutil.which(name, path=str(Path(sys.executable).parent))
    assert found, f"{name} is not installed next to {sys.executable}: pip install -e '.[dev]'"
    return found


def test_mypy_strict_passes() -> None:
    result = subprocess.run([_tool("mypy")], cwd=ROOT, capture_output=True, text=True, check=False)
    assert result.returncode == 0, result.stdout + result.stderr


def test_ruff_check_passes() -> None:
    result = subprocess.run(
        [_tool("ruff"), "check", "."], cwd=ROOT, capture_output=True, text=True, check=False
    )
    assert result.returncode == 0, result.stdout + result.stderr


MAX_MODULE_LINES = 600
MAX_CLASS_LINES = 400


def test_no_module_or_class_grows_past_its_size() -> None:
    """Modules of at most 600 lines and classes of at most 400 (h11, h2 and trio sit in
    that range): past it, a module has more than one concern and should be split."""
    too_big = []
    for path in sorted((ROOT / "mcp_tasks").rglob("*.py")):
        source = path.read_text()
        lines = len(source.splitlines())
        if lines > MAX_MODULE_LINES:
            too_big.append(f"{path.relative_to(ROOT)}: {lines} lines")
        for node in ast.walk(ast.parse(source)):
            if isinstance(node, ast.ClassDef) and node.end_lineno is not None:
                size = node.end_lineno - node.lineno + 1
                if size > MAX_CLASS_LINES:
                    too_big.append(f"{path.relative_to(ROOT)}: class {node.name}, {size} lines")
    assert not too_big, too_big
