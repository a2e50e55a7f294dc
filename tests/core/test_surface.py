"""`mcp_tasks.core` offers a shell about fifty names; the wire types, inputs, commands and
the status table are rooms of their own, and the names it exported before still import."""

from __future__ import annotations

from mcp_tasks import core
from mcp_tasks.core import commands, inputs, states, wire


def test_the_core_offers_about_fifty_names_each_of_them_defined() -> None:
    assert len(core.__all__) <= 55
    assert len(set(core.__all__)) == len(core.__all__)
    for name in core.__all__:
        assert getattr(core, name) is not None, name


def test_each_name_the_core_exported_before_is_the_same_object_in_its_new_room() -> None:
    rooms = (wire, commands, states)
    for name in core.KEPT_FOR_ONE_RELEASE:
        old = getattr(core, name)
        homes = [room for room in rooms if name in room.__all__]
        assert len(homes) <= 1, name
        if homes:
            assert getattr(homes[0], name) is old, name
    assert not core.KEPT_FOR_ONE_RELEASE & set(core.__all__)


def test_no_name_means_two_things_across_the_cores_rooms() -> None:
    rooms = {"core": core.__all__, "wire": wire.__all__, "commands": commands.__all__}
    rooms["inputs"] = [kind.__name__ for kind in inputs.INPUTS]
    seen: dict[str, str] = {}
    for room, names in rooms.items():
        for name in names:
            assert name not in seen, f"{name} is in {seen[name]} and {room}"
            seen[name] = room
