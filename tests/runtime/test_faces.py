"""The faces made from the parts they hold (`mcp_tasks._support.handing_on`): `Server`'s
decorators are its `Registry`'s own, its shared attributes those of the part every runtime
part holds, and the old coordination methods on a store those of `store.coordination`."""

from __future__ import annotations

import inspect

import pytest

from mcp_tasks import Server
from mcp_tasks.runtime._registry import Registry
from mcp_tasks.store import MemoryTaskStore

DECORATORS = (
    "tool",
    "remove_tool",
    "prompt",
    "remove_prompt",
    "resource",
    "remove_resource",
    "resource_template",
    "completion",
    "notify_list_changed",
    "notify_resource_updated",
)


@pytest.mark.parametrize("name", DECORATORS)
def test_each_server_decorator_is_the_registrys_with_its_signature_and_docstring(
    name: str,
) -> None:
    face, part = getattr(Server, name), getattr(Registry, name)
    assert face.__doc__ and face.__doc__ == part.__doc__  # written once, on the registry
    assert inspect.signature(face) == inspect.signature(part)


def test_a_registration_through_the_face_lands_in_the_servers_registry() -> None:
    server = Server("faces", "1")

    @server.tool()
    async def shout(ctx: object, text: str) -> str:
        """Say it louder."""
        return text.upper()

    assert server.registry.core.catalog.tools["shout"].description == "Say it louder."
    server.remove_tool("shout")
    assert "shout" not in server.registry.core.catalog.tools


def test_the_servers_shared_attributes_read_through_and_only_closing_is_set() -> None:
    server = Server("faces", "1")
    assert server.closing is False
    server.closing = True
    assert server.closing is True
    assert server.lease_until() >= server.now()
    assert server.poll_seconds > 0
    with pytest.raises(AttributeError):
        server.store = MemoryTaskStore()  # read-only: `use_store` is the way
    assert Server.store.__doc__ and "use_store" in Server.store.__doc__


async def test_the_old_coordination_methods_on_a_store_reach_its_coordination() -> None:
    store = MemoryTaskStore()
    await store.claim("t1", 50.0)
    assert await store.coordination.lease_holder("t1", 10.0) == store.origin
    assert await store.lease_holder("t1", 10.0) == store.coordination.origin
    assert (store.shared, store.signals) == (False, None)
    assert await store.use_once("k", 99.0, 1.0) and not await store.coordination.use_once(
        "k", 99.0, 1.0
    )
