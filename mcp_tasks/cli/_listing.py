"""What `mcp-tasks tools` prints: a server's tools, prompts and resources, one line each with
the arguments it takes, for a person to read (no I/O here)."""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Final

import msgspec

from ..core._wire import Prompt, Resource, ResourceTemplate, Tool

_MAX_SHOWN: Final = 80
"""Characters of a description or a default value shown; more is cut with `...`."""


class Catalog(msgspec.Struct, frozen=True, kw_only=True):
    """What a server offers. A list is None when the server does not serve it (-32601);
    `rejected` names the tools the client refuses to call, and why."""

    tools: list[Tool]
    rejected: dict[str, str]
    prompts: list[Prompt] | None
    resources: list[Resource] | None
    resource_templates: list[ResourceTemplate] | None


def catalog_json(catalog: Catalog) -> str:
    """The catalog as one JSON object, each list as the server sent it."""
    shown: dict[str, Any] = {"tools": msgspec.to_builtins(catalog.tools)}
    if catalog.rejected:
        shown["rejectedTools"] = catalog.rejected
    for key, items in (
        ("prompts", catalog.prompts),
        ("resources", catalog.resources),
        ("resourceTemplates", catalog.resource_templates),
    ):
        if items is not None:
            shown[key] = msgspec.to_builtins(items)
    return json.dumps(shown, indent=2, ensure_ascii=False)


def describe_catalog(catalog: Catalog) -> list[str]:
    """The catalog as lines of text: a heading a section, an entry a line. What the server
    wrote is shown with its control characters escaped (no terminal escape gets through)."""
    return [_printable(line) for line in _catalog_lines(catalog)]


def _catalog_lines(catalog: Catalog) -> list[str]:
    lines = _section("tools", [_tool_line(tool) for tool in catalog.tools])
    if catalog.rejected:
        refused = [f"{name}: {why}" for name, why in sorted(catalog.rejected.items())]
        lines += _section("tools this client will not call", refused)
    if catalog.prompts is not None:
        lines += _section("prompts", [_prompt_line(prompt) for prompt in catalog.prompts])
    if catalog.resources is not None:
        lines += _section("resources", [_resource_line(item) for item in catalog.resources])
    if catalog.resource_templates is not None:
        templates = [_template_line(item) for item in catalog.resource_templates]
        lines += _section("resource templates", templates)
    return lines


def _section(title: str, entries: Sequence[str]) -> list[str]:
    return [f"{title}:", *(f"  {entry}" for entry in entries or ["(none)"])]


def _tool_line(tool: Tool) -> str:
    arguments = ", ".join(_schema_arguments(tool.input_schema))
    return _with_description(f"{tool.name}({arguments})", tool.description)


def _schema_arguments(schema: Mapping[str, Any]) -> list[str]:
    """`name: type` for a required property, `name?: type` for an optional one, and
    ` = default` when the schema gives one."""
    properties = schema.get("properties")
    if not isinstance(properties, Mapping):
        return []
    required = schema.get("required")
    needed = set(required) if isinstance(required, list) else set()
    shown = []
    for name, property_schema in properties.items():
        mark = "" if name in needed else "?"
        text = f"{name}{mark}: {_type_of(property_schema)}"
        if isinstance(property_schema, Mapping) and "default" in property_schema:
            text += f" = {_cut(json.dumps(property_schema['default'], ensure_ascii=False))}"
        shown.append(text)
    return shown


def _type_of(schema: object) -> str:
    if not isinstance(schema, Mapping):
        return "any"
    if isinstance(schema.get("enum"), list):
        return " | ".join(json.dumps(choice, ensure_ascii=False) for choice in schema["enum"])
    kind = schema.get("type")
    reference = schema.get("$ref")
    if kind is None and isinstance(reference, str):
        return reference.rsplit("/", 1)[-1] or "any"  # "#/$defs/Address": Address
    if isinstance(kind, list):
        return " | ".join(str(each) for each in kind)
    if kind == "array":
        return f"array of {_type_of(schema.get('items'))}"
    return str(kind) if isinstance(kind, str) else "any"


def _prompt_line(prompt: Prompt) -> str:
    arguments = [] if prompt.arguments is None else prompt.arguments
    names = [f"{item.name}{'' if item.required is True else '?'}" for item in arguments]
    return _with_description(f"{prompt.name}({', '.join(names)})", prompt.description)


def _resource_line(resource: Resource) -> str:
    kind = "" if resource.mime_type is None else f", {resource.mime_type}"
    return _with_description(f"{resource.uri} ({resource.name}{kind})", resource.description)


def _template_line(template: ResourceTemplate) -> str:
    kind = "" if template.mime_type is None else f", {template.mime_type}"
    head = f"{template.uri_template} ({template.name}{kind})"
    return _with_description(head, template.description)


def _with_description(head: str, description: str | None) -> str:
    if description is None or not description.strip():
        return head
    return f"{head} - {_cut(description.strip().splitlines()[0])}"


def _printable(text: str) -> str:
    return "".join(char if char.isprintable() else repr(char)[1:-1] for char in text)


def _cut(text: str) -> str:
    return text if len(text) <= _MAX_SHOWN else text[:_MAX_SHOWN] + "..."
