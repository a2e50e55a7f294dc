"""What a server offers besides tools: prompts, resources, resource templates, completions.

`Catalog` is configuration only. It answers the list methods (cached until the next
registration), finds what a `resources/read` uri names, and says which capabilities
`server/discover` declares: a kind the server has nothing of is not declared, and its
methods answer -32601.
"""

from __future__ import annotations

from typing import Any, Literal

from . import _wire as w
from ._options import PromptSpec, ResourceSpec, ResourceTemplateSpec

CompletionTarget = tuple[Literal["ref/prompt", "ref/resource"], str]
"""("ref/prompt", prompt name) or ("ref/resource", uri template)."""


class ResourceMatch:
    """What a uri names: a fixed resource, or a template and its variables."""

    __slots__ = ("template", "ttl_ms", "variables")

    def __init__(self, ttl_ms: int, template: str | None, variables: dict[str, str]) -> None:
        self.ttl_ms = ttl_ms
        self.template = template
        self.variables = variables


class Catalog:
    def __init__(self, *, ttl_ms: int, cache_scope: Literal["public", "private"]) -> None:
        self._ttl_ms = ttl_ms
        self._cache_scope: Literal["public", "private"] = cache_scope
        self.prompts: dict[str, PromptSpec] = {}
        self.resources: dict[str, ResourceSpec] = {}
        self.templates: dict[str, ResourceTemplateSpec] = {}
        self.completions: set[CompletionTarget] = set()
        self._cached: dict[str, Any] = {}

    # --- registration -----------------------------------------------------------------

    def add_prompt(self, prompt: PromptSpec) -> None:
        if prompt.name in self.prompts:
            raise ValueError(f"a prompt named {prompt.name!r} is already registered")
        self.prompts[prompt.name] = prompt
        self._cached.pop("prompts", None)

    def remove_prompt(self, name: str) -> None:
        """Take the prompt away, and the completion of its arguments with it."""
        del self.prompts[name]
        self.completions.discard(("ref/prompt", name))
        self._cached.pop("prompts", None)

    def add_resource(self, resource: ResourceSpec) -> None:
        if resource.uri in self.resources:
            raise ValueError(f"a resource with uri {resource.uri!r} is already registered")
        self.resources[resource.uri] = resource
        self._cached.pop("resources", None)

    def remove_resource(self, uri: str) -> None:
        del self.resources[uri]
        self._cached.pop("resources", None)

    def add_template(self, template: ResourceTemplateSpec) -> None:
        if template.uri_template in self.templates:
            raise ValueError(f"the uri template {template.uri_template!r} is already registered")
        self.templates[template.uri_template] = template
        self._cached.pop("templates", None)

    def add_completion(self, target: CompletionTarget) -> None:
        kind, name = target
        known = self.prompts if kind == "ref/prompt" else self.templates
        if name not in known:
            what = "prompt" if kind == "ref/prompt" else "uri template"
            raise ValueError(f"completion for an unknown {what} {name!r}: register it first")
        if target in self.completions:
            raise ValueError(f"completion for {name!r} is already registered")
        self.completions.add(target)

    # --- lookups ----------------------------------------------------------------------

    def find_resource(self, uri: str) -> ResourceMatch | None:
        fixed = self.resources.get(uri)
        if fixed is not None:
            return ResourceMatch(fixed.ttl_ms, None, {})
        for template in self.templates.values():
            variables = template.match(uri)
            if variables is not None:
                return ResourceMatch(template.ttl_ms, template.uri_template, variables)
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

    def list_prompts(self, meta: w.ResultMeta) -> w.ListPromptsResult:
        result = self._cached.get("prompts")
        if result is None:
            result = self._cached["prompts"] = w.ListPromptsResult(
                prompts=[prompt.to_wire() for prompt in self.prompts.values()],
                ttl_ms=self._ttl_ms,
                cache_scope=self._cache_scope,
                meta=meta,
            )
        return result

    def list_resources(self, meta: w.ResultMeta) -> w.ListResourcesResult:
        result = self._cached.get("resources")
        if result is None:
            result = self._cached["resources"] = w.ListResourcesResult(
                resources=[resource.to_wire() for resource in self.resources.values()],
                ttl_ms=self._ttl_ms,
                cache_scope=self._cache_scope,
                meta=meta,
            )
        return result

    def list_templates(self, meta: w.ResultMeta) -> w.ListResourceTemplatesResult:
        result = self._cached.get("templates")
        if result is None:
            result = self._cached["templates"] = w.ListResourceTemplatesResult(
                resource_templates=[t.to_wire() for t in self.templates.values()],
                ttl_ms=self._ttl_ms,
                cache_scope=self._cache_scope,
                meta=meta,
            )
        return result

    def read_result(
        self, contents: list[w.ResourceContents], ttl_ms: int, meta: w.ResultMeta
    ) -> w.ReadResourceResult:
        return w.ReadResourceResult(
            contents=contents, ttl_ms=ttl_ms, cache_scope=self._cache_scope, meta=meta
        )
