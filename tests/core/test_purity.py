"""The core is pure: no I/O, no clock, no randomness. Two proofs: what its source imports,
and what importing it drags into a fresh interpreter."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import mcp_tasks.core

FORBIDDEN = {
    "trio",
    "socket",
    "time",
    "os",
    "uuid",
    "random",
    "secrets",
    "threading",
    "asyncio",
    "subprocess",
    "select",
    "selectors",
    "pathlib",
    "io",
    "shutil",
}
ALLOWED_THIRD_PARTY = {"msgspec", "transitions"}
CORE_DIR = Path(mcp_tasks.core.__file__).parent


def _imported_modules(path: Path) -> set[str]:
    names: set[str] = set()
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            names.update(alias.name.split(".")[0] for alias in node.names)
        elif isinstance(node, ast.ImportFrom) and node.level == 0 and node.module:
            names.add(node.module.split(".")[0])
    return names


def test_core_source_imports_only_the_stdlib_msgspec_and_transitions() -> None:
    files = sorted(CORE_DIR.glob("*.py"))
    assert len(files) >= 8
    for path in files:
        imported = _imported_modules(path)
        assert not imported & FORBIDDEN, f"{path.name} imports {imported & FORBIDDEN}"
        third_party = {n for n in imported if n not in sys.stdlib_module_names}
        assert third_party <= ALLOWED_THIRD_PARTY, f"{path.name} imports {third_party}"


def test_importing_the_core_loads_no_forbidden_module_of_its_own() -> None:
    # msgspec and transitions load what they load (msgspec imports uuid for its UUID type);
    # past them, the core itself must bring in nothing that does I/O, time or randomness.
    # The package's own __init__ brings in the trio runtime; stand in an empty package so
    # that only the core itself is imported.
    package_dir = str(CORE_DIR.parent)
    probe = (
        "import sys, types, json, msgspec, transitions\n"
        "package = types.ModuleType('mcp_tasks')\n"
        f"package.__path__ = [{package_dir!r}]\n"
        "sys.modules['mcp_tasks'] = package\n"
        "before = set(sys.modules)\n"
        "import mcp_tasks.core\n"
        "print(json.dumps(sorted(set(sys.modules) - before)))\n"
    )
    out = subprocess.run([sys.executable, "-c", probe], capture_output=True, text=True, check=True)
    loaded = {name.split(".")[0] for name in json.loads(out.stdout)}
    assert "mcp_tasks" in loaded
    assert not loaded & (FORBIDDEN | {"ssl", "logging"}), loaded & FORBIDDEN


PURE_JOURNAL_PARTS = ("_codec.py", "_recorder.py", "_playback.py", "_redaction.py")
"""The journals' codec, recorder and playback are pure too (the writer and replay do I/O)."""


def test_the_journals_pure_parts_import_only_the_stdlib_msgspec_and_the_core() -> None:
    journals = CORE_DIR.parent / "journals"
    for name in PURE_JOURNAL_PARTS:
        path = journals / name
        imported = _imported_modules(path)
        assert not imported & FORBIDDEN, f"{name} imports {imported & FORBIDDEN}"
        third_party = {n for n in imported if n not in sys.stdlib_module_names}
        assert third_party <= ALLOWED_THIRD_PARTY, f"{name} imports {third_party}"
        relative = {
            node.module
            for node in ast.walk(ast.parse(path.read_text(), str(path)))
            if isinstance(node, ast.ImportFrom) and node.level == 2
        }
        assert all(module.startswith("core") for module in relative), (name, relative)
