"""examples/jobs.py, tool by tool, through the runtime (virtual time)."""

from __future__ import annotations

import importlib.util
from pathlib import Path
from types import ModuleType

from trio.testing import MockClock

from mcp_tasks import Server

from .helpers import ALL_CAPS, Client

EXAMPLE = Path(__file__).parent.parent.parent / "examples" / "jobs.py"


def load_jobs() -> Server:
    spec = importlib.util.spec_from_file_location("jobs_example", EXAMPLE)
    assert spec and spec.loader
    module: ModuleType = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    server: Server = module.server
    return server


async def test_every_example_tool_does_what_its_docstring_says(
    autojump_clock: MockClock,
) -> None:
    server = load_jobs()
    async with server.running():
        client = Client(server)
        listed = (await client.send("tools/list"))["result"]["tools"]
        assert {t["name"] for t in listed} == {
            "greet",
            "slow_compute",
            "failing_job",
            "protocol_error_job",
            "confirm_delete",
            "multi_input",
            "interview",
            "test_tool_with_task",
        }
        assert all(t.get("description") for t in listed)

        hello = await client.call("greet", {"name": "World"})
        assert hello["result"]["content"][0]["text"] == "Hello, World!"

        in_place = await client.call("slow_compute", {"seconds": 1, "label": "x"}, caps={})
        assert in_place["result"]["content"][0]["text"] == "x done after 1s"
        slow = await client.start("slow_compute", {"seconds": 2, "label": "y"})
        assert (await client.wait_status(slow, "completed"))["result"]["content"]

        failing = await client.wait_status(await client.start("failing_job"), "completed")
        assert failing["result"]["isError"] is True
        broken = await client.wait_status(await client.start("protocol_error_job"), "failed")
        assert broken["error"]["code"] == -32603 and "result" not in broken

        confirm = await client.start("confirm_delete", {"filename": "a.txt"})
        waiting = await client.wait_status(confirm, "input_required")
        assert list(waiting["inputRequests"]) == ["confirm"]
        await client.send(
            "tasks/update",
            {
                "taskId": confirm,
                "inputResponses": {"confirm": {"action": "accept", "content": {"confirm": True}}},
            },
        )
        done = await client.wait_status(confirm, "completed")
        assert done["result"]["content"][0]["text"] == "Deleted a.txt"

        multi = await client.start("multi_input")
        assert set((await client.wait_status(multi, "input_required"))["inputRequests"]) == {
            "first",
            "second",
        }
        await client.send(
            "tasks/update",
            {
                "taskId": multi,
                "inputResponses": {"first": {"action": "accept", "content": {"answer": "a"}}},
            },
        )
        partial = await client.get(multi)
        assert partial["status"] == "input_required" and list(partial["inputRequests"]) == [
            "second"
        ]
        await client.send(
            "tasks/update", {"taskId": multi, "inputResponses": {"second": {"action": "decline"}}}
        )
        assert (await client.wait_status(multi, "completed"))["result"]["content"]

        talk = await client.start("interview")
        for answer in ({"name": "Ada"}, {"colour": "green"}):
            (key,) = (await client.wait_status(talk, "input_required"))["inputRequests"]
            await client.send(
                "tasks/update",
                {"taskId": talk, "inputResponses": {key: {"action": "accept", "content": answer}}},
            )
        finished = await client.wait_status(talk, "completed")
        assert finished["result"]["content"][0]["text"] == "Ada likes green"

        first = (await client.call("test_tool_with_task"))["result"]
        assert first["resultType"] == "input_required"
        second = await client.call(
            "test_tool_with_task",
            extra={
                "inputResponses": {"user_name": {"action": "accept", "content": {"name": "Alice"}}},
                "requestState": first["requestState"],
            },
        )
        task = await client.wait_status(second["result"]["taskId"], "completed")
        assert "Alice" in task["result"]["content"][0]["text"]

        required = await client.call("failing_job", caps={"elicitation": {}})
        assert required["error"]["code"] == -32021
        assert (
            ALL_CAPS["extensions"]
            == required["error"]["data"]["requiredCapabilities"]["extensions"]
        )
