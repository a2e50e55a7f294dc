"""What importing the package costs: each check runs a fresh interpreter and reads its
`sys.modules`, so nothing this test process imported already can hide an import.

The core is pure (no trio, no sockets, no HTTP), and the package loads the server and the
durable stores only when a program asks for them. The transports and the ASGI app depend on
their port, not on the runtime (an AST scan), and the ASGI app loads neither h11 nor the
HTTP client.
"""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from pathlib import Path

import mcp_tasks
import mcp_tasks.store
import mcp_tasks.transports

NOT_FOR_THE_CORE = ["trio", "h11", "httptools", "httpx2", "redis", "sqlite3", "asyncio", "socket"]


PACKAGE = Path(mcp_tasks.__file__).parent
LAZY_PACKAGES = (mcp_tasks, mcp_tasks.store, mcp_tasks.transports)


def imported_after(code: str) -> set[str]:
    """The top-level names of the modules loaded once `code` has run in a fresh interpreter."""
    return {name.split(".")[0] for name in modules_after(code)}


def modules_after(code: str) -> set[str]:
    """The names of the modules loaded once `code` has run in a fresh interpreter."""
    report = "import json, sys; print(json.dumps(sorted(sys.modules)))"
    done = subprocess.run(
        [sys.executable, "-c", f"{code}\n{report}"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    )
    return set(json.loads(done.stdout.splitlines()[-1]))


def test_the_core_imports_no_runtime_transport_or_store() -> None:
    loaded = imported_after("import mcp_tasks.core")
    assert "mcp_tasks" in loaded
    assert sorted(loaded & set(NOT_FOR_THE_CORE)) == []


def test_the_package_imports_no_durable_store() -> None:
    loaded = imported_after("import mcp_tasks")
    assert sorted(loaded & {"redis", "sqlite3"}) == []


def test_a_durable_store_is_loaded_when_it_is_first_used() -> None:
    loaded = imported_after(
        "import sys\n"
        "from mcp_tasks import Server\n"
        "import mcp_tasks\n"
        "assert 'redis' not in sys.modules and 'sqlite3' not in sys.modules\n"
        "mcp_tasks.store.RedisTaskStore\n"
    )
    assert "redis" in loaded


def test_every_exported_name_resolves() -> None:
    code = (
        "import mcp_tasks, mcp_tasks.store, mcp_tasks.transports\n"
        "for module in (mcp_tasks, mcp_tasks.store, mcp_tasks.transports):\n"
        "    for name in module.__all__:\n"
        "        assert getattr(module, name) is not None, name\n"
        "    assert set(module.__all__) <= set(dir(module))\n"
        "from mcp_tasks import *\n"
        "from mcp_tasks.store import *\n"
        "from mcp_tasks.transports import *\n"
    )
    imported_after(code)  # a fresh interpreter, where every name is loaded lazily
    for module in LAZY_PACKAGES:
        for name in module.__all__:
            assert getattr(module, name) is not None, name


def test_an_unknown_name_is_an_attribute_error() -> None:
    for module in LAZY_PACKAGES:
        assert not hasattr(module, "NoSuchName")


# --- the transports and their port ----------------------------------------------------------


def imported_modules(path: Path) -> set[str]:
    """The absolute names of the modules a module of the package imports (relative ones
    resolved), including those imported only for type checking."""
    package = ".".join(path.relative_to(PACKAGE.parent).parent.parts)
    return imports_in(path.read_text(), package)


def imports_in(source: str, package: str) -> set[str]:
    """The modules `source`, a module of `package`, imports; `from a import b` names both
    `a` and `a.b` (b may be a module: `from .. import runtime`)."""
    names: set[str] = set()
    for node in ast.walk(ast.parse(source)):
        if isinstance(node, ast.Import):
            names.update(alias.name for alias in node.names)
        elif isinstance(node, ast.ImportFrom):
            base = package.rsplit(".", node.level - 1)[0] if node.level else ""
            source_module = ".".join(part for part in (base, node.module) if part)
            names.add(source_module)
            names.update(f"{source_module}.{alias.name}" for alias in node.names)
    return names


def test_no_transport_imports_the_runtime() -> None:
    """The transports and the ASGI app import the core and their port (`_port`), and no
    part of `mcp_tasks.runtime`, which implements it."""
    modules = [*sorted((PACKAGE / "transports").glob("*.py")), PACKAGE / "asgi.py"]
    assert len(modules) > 5
    offending = {
        str(path.relative_to(PACKAGE.parent)): sorted(
            name
            for name in imported_modules(path)
            if name == "mcp_tasks.runtime" or name.startswith("mcp_tasks.runtime.")
        )
        for path in modules
    }
    assert {path: names for path, names in offending.items() if names} == {}


def test_no_runtime_part_imports_the_server() -> None:
    """The runtime's parts are given their collaborators: none imports `Server` (not even
    for type checking), and only the server module and the package's face name it."""
    runtime = PACKAGE / "runtime"
    parts = [path for path in sorted(runtime.glob("*.py")) if path.name != "__init__.py"]
    assert len(parts) > 8
    offending = sorted(
        path.name for path in parts if "mcp_tasks.runtime._server" in imported_modules(path)
    )
    assert offending == []


def test_the_scan_resolves_relative_imports() -> None:
    """The scan above sees the runtime however it is imported."""
    transports = "mcp_tasks.transports"
    for line in (
        "from ..runtime import Server",
        "from .. import runtime",
        "import mcp_tasks.runtime._server",
        "if TYPE_CHECKING:\n    from ..runtime._server import Server",
    ):
        assert any(name.startswith("mcp_tasks.runtime") for name in imports_in(line, transports))
    assert "mcp_tasks.runtime" in imports_in("from .runtime import Server", "mcp_tasks")
    assert "mcp_tasks.transports.runtime" in imports_in("from .runtime import X", transports)
    assert "mcp_tasks.transports._port" in imported_modules(PACKAGE / "transports/__init__.py")


def test_the_asgi_app_loads_neither_the_http_parser_nor_the_http_client() -> None:
    loaded = modules_after("import mcp_tasks.asgi")
    unwanted = {"h11", "httptools", "httpx2", "httpcore", "httpx", "mcp_tasks.runtime"}
    clients = {"_http_client", "_http_server", "_http_connection", "_http_wire", "_stdio_client",
               "_client_base"}  # fmt: skip
    clients.add("_stdio")
    unwanted |= {f"mcp_tasks.transports.{name}" for name in clients}
    got_in = sorted(name for name in loaded if name in unwanted or name.split(".")[0] in unwanted)
    assert got_in == [], f"import mcp_tasks.asgi loaded {got_in}"


def test_the_transports_package_loads_its_names_on_first_use() -> None:
    loaded = modules_after("import mcp_tasks.transports")
    assert "mcp_tasks.transports" in loaded
    parsers = ("h11", "httptools", "httpx2")
    assert sorted(name for name in loaded if name.split(".")[0] in parsers) == []
    loaded = modules_after("from mcp_tasks.transports import HttpClientTransport")
    assert "httpx2" in loaded and "h11" not in loaded and "httptools" not in loaded
