"""What importing the package costs: each check runs a fresh interpreter and reads its
`sys.modules`, so nothing this test process imported already can hide an import.

The core is pure (no trio, no sockets, no HTTP), and the package loads the server and the
durable stores only when a program asks for them.
"""

from __future__ import annotations

import json
import subprocess
import sys

import mcp_tasks
import mcp_tasks.store

NOT_FOR_THE_CORE = ["trio", "h11", "httpx2", "redis", "sqlite3", "asyncio", "socket"]


def imported_after(code: str) -> set[str]:
    """The top-level names of the modules loaded once `code` has run in a fresh interpreter."""
    report = "import json, sys; print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))"
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
        "import mcp_tasks, mcp_tasks.store\n"
        "for module in (mcp_tasks, mcp_tasks.store):\n"
        "    for name in module.__all__:\n"
        "        assert getattr(module, name) is not None, name\n"
        "    assert set(module.__all__) <= set(dir(module))\n"
        "from mcp_tasks import *\n"
        "from mcp_tasks.store import *\n"
    )
    imported_after(code)  # a fresh interpreter, where every name is loaded lazily
    for module in (mcp_tasks, mcp_tasks.store):
        for name in module.__all__:
            assert getattr(module, name) is not None, name


def test_an_unknown_name_is_an_attribute_error() -> None:
    for module in (mcp_tasks, mcp_tasks.store):
        assert not hasattr(module, "NoSuchName")
