"""What a server offers: tools, prompts, resources, resource templates, completions.

`Catalog` is the server's one registry: each spec with the handler that serves it (any
object; the core hands it back untouched in the `Need` that runs it). It answers the list
methods (cached until the next registration), finds what a `resources/read` uri names, and
says which capabilities `server/discover` declares: a kind the server has nothing of is
not declared, and its methods answer -32601.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Literal, TypeVar

from . import _wire as w
from ._options import PromptSpec, ResourceSpec, ResourceTemplateSpec, ToolSpec

CompletionTarget = tuple[Literal["ref/prompt", "ref/resource"], str]
"""("ref/prompt", prompt name) or ("ref/resource", uri template)."""

ArgumentDecoder = Callable[[ToolSpec | PromptSpec, Any], Any]
_Spec = TypeVar("_Spec", ToolSpec, PromptSpec, ResourceSpec, ResourceTemplateSpec)


class ResourceMatch:
    """What a uri names: a fixed resource, or a template and its variables."""

    __slots__ = ("handler", "template", "ttl_ms", "variables")

    def __init__(
        self, ttl_ms: int, template: str | None, variables: dict[str, str], handler: Any = None
    ) -> None:
        self.ttl_ms = ttl_ms
        self.template = template
        self.variables = variables
        self.handler = handler


class Catalog:
    def __init__(self, *, ttl_ms: int, cache_scope: Literal["public", "private"]) -> None:
        self._ttl_ms = ttl_ms
        self._cache_scope: Literal["public", "private"] = cache_scope
        self.tools: dict[str, ToolSpec] = {}
        self.prompts: dict[str, PromptSpec] = {}
        self.resources: dict[str, ResourceSpec] = {}
        self.templates: dict[str, ResourceTemplateSpec] = {}
        self.completions: set[CompletionTarget] = set()
        self.header_params: dict[str, dict[str, str]] = {}
        """Tool name -> argument -> its `Mcp-Param-*` header name (annotated tools only)."""
        self._handlers: dict[tuple[str, Any], Any] = {}
        """(kind, name) -> the handler registered with the spec."""
        self._cached: dict[str, Any] = {}
        self.revision = 0
        """Counts registrations and removals: a journal notes the catalog again when it moved."""
        self.argument_decoder: ArgumentDecoder | None = None
        """Decodes a call's arguments in place of its spec (a journal records or plays back
        what decoding gave); None: the spec's own `decode_arguments`."""

    def use_cache_hints(self, *, ttl_ms: int, cache_scope: Literal["public", "private"]) -> None:
        """Advise `ttl_ms` and `cache_scope` on every list result from now on."""
        self._ttl_ms = ttl_ms
        self._cache_scope = cache_scope
        self._cached.clear()  # list results carry the hints

    def handler(self, kind: str, name: Any) -> Any:
        """What was registered to serve `name` of `kind` ("tool", "prompt", "resource",
        "template", "completion"), or None."""
        return self._handlers.get((kind, name))

    def decode_arguments(self, spec: ToolSpec | PromptSpec, arguments: Any) -> Any:
        """`arguments` as the spec's `arguments_type` (None without one), or -32602."""
        decoder = self.argument_decoder
        if decoder is not None:
            return decoder(spec, arguments)
        return spec.decode_arguments(arguments)

    # --- registration -----------------------------------------------------------------

    def add_tool(self, tool: ToolSpec, handler: Any = None) -> None:
        taken = f"a tool named {tool.name!r}"
        self._add("tool", self.tools, tool, handler, key=tool.name, taken=taken)
        header_params = tool.header_params()
        if header_params:
            self.header_params[tool.name] = header_params

    def remove_tool(self, name: str) -> None:
        self._remove("tool", self.tools, name)
        self.header_params.pop(name, None)

    def add_prompt(self, prompt: PromptSpec, handler: Any = None) -> None:
        taken = f"a prompt named {prompt.name!r}"
        self._add("prompt", self.prompts, prompt, handler, key=prompt.name, taken=taken)

    def remove_prompt(self, name: str) -> None:
        """Take the prompt away, and the completion of its arguments with it."""
        self._remove("prompt", self.prompts, name)
        self.completions.discard(("ref/prompt", name))
        self._handlers.pop(("completion", ("ref/prompt", name)), None)

    def add_resource(self, resource: ResourceSpec, handler: Any = None) -> None:
        uri = resource.uri
        taken = f"a resource with uri {uri!r}"
        self._add("resource", self.resources, resource, handler, key=uri, taken=taken)

    def remove_resource(self, uri: str) -> None:
        self._remove("resource", self.resources, uri)

    def add_template(self, template: ResourceTemplateSpec, handler: Any = None) -> None:
        key = template.uri_template
        taken = f"the uri template {key!r}"
        self._add("template", self.templates, template, handler, key=key, taken=taken)

    def _add(
        self, kind: str, specs: dict[str, _Spec], spec: _Spec, handler: Any, *, key: str, taken: str
    ) -> None:
        """Register `spec` of `kind` under `key` in `specs`, served by `handler`; `taken`
        names the key for the error when it is registered already."""
        if key in specs:
            raise ValueError(f"{taken} is already registered")
        specs[key] = spec
        self._handlers[kind, key] = handler
        self._changed(kind)

    def _remove(self, kind: str, specs: dict[str, Any], key: str) -> None:
        """Take `key` away from `specs` (KeyError if it is not there), and its handler."""
        del specs[key]
        self._handlers.pop((kind, key), None)
        self._changed(kind)

    def _changed(self, kind: str) -> None:
        """A registration or removal of `kind`: its list result (`tools` for "tool"...) is
        made anew, and a journal notes the catalog again."""
        self._cached.pop(kind + "s", None)
        self.revision += 1

    def add_completion(self, target: CompletionTarget, handler: Any = None) -> None:
        kind, name = target
        known = self.prompts if kind == "ref/prompt" else self.templates
        if name not in known:
            what = "prompt" if kind == "ref/prompt" else "uri template"
            raise ValueError(f"completion for an unknown {what} {name!r}: register it first")
        if target in self.completions:
            raise ValueError(f"completion for {name!r} is already registered")
        self.completions.add(target)
        self._handlers["completion", target] = handler
        self.revision += 1

    # --- lookups ----------------------------------------------------------------------

    def find_resource(self, uri: str) -> ResourceMatch | None:
        fixed = self.resources.get(uri)
        if fixed is not None:
            return ResourceMatch(fixed.ttl_ms, None, {}, self._handlers.get(("resource", uri)))
        for template in self.templates.values():
            variables = template.match(uri)
            if variables is not None:
                handler = self._handlers.get(("template", template.uri_template))
                return ResourceMatch(template.ttl_ms, template.uri_template, variables, handler)
        return None

    def capabilities(self) -> dict[str, Any]:
        """The discover capabilities of what is registered now (tools are the core's)."""
        declared: dict[str, Any] = {}
        if self.prompts:
            declared["prompts"] = {"listChanged": True}
        if self.resources or self.templates:
            declared["resources"] = {"listChanged": True, "subscribe": True}
        if self.completions:
            declared["completions"] = {}
        return declared

    # --- list results -----------------------------------------------------------------

    def list_tools(self, meta: w.ResultMeta) -> w.ListToolsResult:
        return self._listed("tools", meta)  # type: ignore[no-any-return]

    def list_prompts(self, meta: w.ResultMeta) -> w.ListPromptsResult:
        return self._listed("prompts", meta)  # type: ignore[no-any-return]

    def list_resources(self, meta: w.ResultMeta) -> w.ListResourcesResult:
        return self._listed("resources", meta)  # type: ignore[no-any-return]

    def list_templates(self, meta: w.ResultMeta) -> w.ListResourceTemplatesResult:
        return self._listed("templates", meta)  # type: ignore[no-any-return]

    def _listed(self, kind: str, meta: w.ResultMeta) -> Any:
        """The list result of `kind`, built once until the next registration of that kind."""
        result = self._cached.get(kind)
        if result is None:
            common: dict[str, Any] = {
                "ttl_ms": self._ttl_ms,
                "cache_scope": self._cache_scope,
                "meta": meta,
            }
            if kind == "tools":
                result = w.ListToolsResult(
                    tools=[t.to_wire() for t in self.tools.values()], **common
                )
            elif kind == "prompts":
                prompts = [prompt.to_wire() for prompt in self.prompts.values()]
                result = w.ListPromptsResult(prompts=prompts, **common)
            elif kind == "resources":
                resources = [resource.to_wire() for resource in self.resources.values()]
                result = w.ListResourcesResult(resources=resources, **common)
            else:
                templates = [template.to_wire() for template in self.templates.values()]
                result = w.ListResourceTemplatesResult(resource_templates=templates, **common)
            self._cached[kind] = result
        return result

    def read_result(
        self, contents: list[w.ResourceContents], ttl_ms: int, meta: w.ResultMeta
    ) -> w.ReadResourceResult:
        return w.ReadResourceResult(
            contents=contents, ttl_ms=ttl_ms, cache_scope=self._cache_scope, meta=meta
        )
