"""Where `TasksExtension`'s runtime lives and how it ends: inside the server's lifespan
(shutdown grants running tasks their grace, then cancels them), or started by the first
request without one (`aclose()` stops it); clear errors for a bad configuration, for a
tool name the server does not have (at startup), and for a missing SDK."""

from __future__ import annotations

import json
import subprocess
import sys
import textwrap
from pathlib import Path

import anyio
import pytest
from mcp.server.mcpserver import MCPServer
from on_asyncio import run_asyncio, wait_until

from mcp_tasks.client import connect_http
from mcp_tasks.core import TaskStatus, WorkingTask
from mcp_tasks.integrations.mcp_sdk import TasksExtension, start_task

from .sdk_app import Gates, build, serving

ROOT = Path(__file__).parent.parent.parent


def test_without_a_lifespan_the_first_request_starts_the_runtime_and_aclose_stops_it() -> None:
    async def main() -> None:
        gates = Gates()
        mcp, tasks = build(gates, lifespan=False, shutdown_grace_seconds=0.1)
        assert not tasks.server.is_running
        async with serving(mcp) as url, connect_http(url) as client:
            assert not tasks.server.is_running  # nothing asked yet
            first = await client.call_tool_or_task("gated")
            assert isinstance(first, WorkingTask) and tasks.server.is_running
            await gates.started.wait()
            await tasks.aclose()  # the grace runs out: the tool is cancelled
            assert gates.cancelled.is_set() and not tasks.server.is_running
            again = await client.call_tool_or_task("slow", {"seconds": 0})
            assert isinstance(again, WorkingTask) and tasks.server.is_running
            await client.await_task(again)
        await tasks.aclose()
        assert not tasks.server.is_running

    run_asyncio(main)


def test_the_lifespan_runs_the_runtime_and_shutdown_lets_a_running_task_finish() -> None:
    async def main() -> None:
        gates = Gates()
        mcp, tasks = build(gates, shutdown_grace_seconds=10)

        async def release_once_closing() -> None:
            await wait_until(lambda: tasks.server.closing)
            gates.release.set()

        async with (
            anyio.create_task_group() as group,
            serving(mcp) as url,
            connect_http(url) as client,
        ):
            assert tasks.server.is_running  # before any request
            task = await client.call_tool_or_task("gated")
            await gates.started.wait()
            group.start_soon(release_once_closing)
        # the server has stopped: its lifespan waited for the task
        assert gates.finished.is_set() and not gates.cancelled.is_set()
        record = await tasks.server.store.get(task.task_id)
        assert record is not None and record.status is TaskStatus.COMPLETED
        assert not tasks.server.is_running

    run_asyncio(main)


def test_shutdown_cancels_a_task_still_running_after_the_grace_period() -> None:
    async def main() -> None:
        gates = Gates()
        mcp, _ = build(gates, shutdown_grace_seconds=0.1)
        async with serving(mcp) as url, connect_http(url) as client:
            await client.call_tool_or_task("gated")
            await gates.started.wait()
        assert gates.cancelled.is_set() and not gates.finished.is_set()

    run_asyncio(main)


# --- errors a server author sees --------------------------------------------------------------


def test_check_tools_and_the_lifespan_name_tools_the_server_does_not_have() -> None:
    async def main() -> None:
        tasks = TasksExtension(task_support={"slow_compte": "optional"})
        mcp = MCPServer("typo", extensions=[tasks])

        @mcp.tool()
        def slow_compute() -> str:
            return "done"

        with pytest.raises(ValueError, match=r"does not have: \['slow_compte'\]") as error:
            await tasks.check_tools(mcp)
        assert "slow_compute" in str(error.value)  # what it does have
        with pytest.raises(ValueError, match="slow_compte"):
            async with tasks.lifespan(mcp):
                raise AssertionError("the lifespan must not start")
        assert not tasks.server.is_running

    run_asyncio(main)


def test_a_served_app_with_an_unknown_tool_name_fails_at_startup(tmp_path: Path) -> None:
    script = tmp_path / "typo_server.py"
    script.write_text(
        textwrap.dedent(
            """
            import uvicorn
            from mcp.server.mcpserver import MCPServer
            from mcp_tasks.integrations.mcp_sdk import TasksExtension

            tasks = TasksExtension(task_support={"slow_compte": "optional"})
            mcp = MCPServer("typo", extensions=[tasks], lifespan=tasks.lifespan)

            @mcp.tool()
            def slow_compute() -> str:
                return "done"

            uvicorn.run(mcp.streamable_http_app(), host="127.0.0.1", port=0, lifespan="on")
            """
        )
    )
    done = subprocess.run(
        [sys.executable, str(script)], capture_output=True, text=True, timeout=60, check=False
    )
    assert done.returncode != 0
    assert "task_support names tools the server does not have: ['slow_compte']" in done.stderr


@pytest.mark.parametrize(
    ("task_support", "input_first", "message"),
    [
        ({"slow": "forbidden"}, (), r"task_support\['slow'\] is 'forbidden'"),
        ({"slow": "none"}, (), "leave out the tools that never run as tasks"),
        (
            {"slow": "optional"},
            ("book",),
            r"input_first names tools not in task_support: \['book'\]",
        ),
    ],
)
def test_a_bad_configuration_is_refused_at_construction(
    task_support: dict[str, str], input_first: tuple[str, ...], message: str
) -> None:
    with pytest.raises(ValueError, match=message):
        TasksExtension(task_support=task_support, input_first=input_first)  # type: ignore[arg-type]


def test_a_task_support_or_input_first_of_the_wrong_type_says_what_it_takes() -> None:
    with pytest.raises(
        TypeError, match=r"task_support maps tool names to 'optional' or 'required'"
    ):
        TasksExtension(task_support=["slow"])  # type: ignore[arg-type]
    with pytest.raises(
        TypeError, match=r"input_first is a collection of tool names, e.g. \{'book'\}"
    ):
        TasksExtension(task_support={"book": "required"}, input_first="book")


def test_start_task_outside_an_input_first_tool_says_where_it_works() -> None:
    with pytest.raises(RuntimeError, match=r"TasksExtension\(input_first=...\)"):
        start_task()


def test_the_extension_is_advertised_with_empty_settings_in_server_discover() -> None:
    async def main() -> None:
        mcp, tasks = build(Gates())
        assert tasks.identifier == "io.modelcontextprotocol/tasks" and tasks.settings() == {}
        from .sdk_app import post  # noqa: PLC0415

        async with serving(mcp) as url:
            discovered = await post(url, "server/discover")
        capabilities = discovered.result["capabilities"]
        assert capabilities["extensions"] == {"io.modelcontextprotocol/tasks": {}}
        assert "tasks" not in capabilities

    run_asyncio(main)


# --- importing ----------------------------------------------------------------------------------


def _python(code: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", code], capture_output=True, text=True, timeout=60, check=False
    )


def test_importing_mcp_tasks_and_its_integrations_package_loads_no_sdk() -> None:
    done = _python(
        "import json, sys\n"
        "import mcp_tasks, mcp_tasks.integrations\n"
        "from mcp_tasks import Server\n"
        "print(json.dumps(sorted({m.split('.')[0] for m in sys.modules})))\n"
    )
    loaded = set(json.loads(done.stdout.splitlines()[-1]))
    assert "mcp_tasks" in loaded
    assert not loaded & {"mcp", "mcp_types", "pydantic", "starlette"}


def test_without_the_sdk_the_module_says_how_to_install_it() -> None:
    done = _python(
        "import sys\n"
        "sys.modules['mcp'] = None\n"
        "try:\n"
        "    import mcp_tasks.integrations.mcp_sdk\n"
        "except ImportError as error:\n"
        "    print('ImportError:', error)\n"
    )
    assert done.returncode == 0, done.stderr
    assert "pip install 'mcp-tasks[sdk]'" in done.stdout
