"""The decorators that register tools, prompts, resources and completions.

Each registers its spec and handler together in the core's catalog, the server's one
registry, and tells the `subscriptions/listen` streams that asked that the list changed.
"""

from __future__ import annotations

import functools
import inspect
import typing
from collections.abc import Callable, Iterable
from typing import Any, TypedDict, Unpack, overload

from msgspec import UNSET

from .._support.handing_on import handed_on
from ..core import PromptSpec, ResourceSpec, ResourceTemplateSpec, ServerCore, TaskSupport, ToolSpec
from ._handlers import (
    CompletionEntry,
    Handler,
    PromptEntry,
    ResourceEntry,
    ToolEntry,
    first_paragraph,
    listing,
    prompt_arguments,
    schema_for,
)
from ._listen_streams import ListenStreams
from ._signatures import read_prompt_signature, read_resource_context, read_tool_signature

ToolHandler = Callable[..., Any]
"""A tool's function: async, or plain (run in a worker thread)."""
_Tool = typing.TypeVar("_Tool", bound=ToolHandler)
ListKind = typing.Literal["tools", "prompts", "resources"]
_NONE: frozenset[str] = frozenset()


class ToolOptions(TypedDict, total=False):
    """The keyword options of `Server.tool` (its docstring says what each does)."""

    task_support: TaskSupport
    description: str | None
    title: str | None
    annotations: dict[str, Any] | None
    input_schema: dict[str, Any] | None
    resumable: bool
    single_use_request_state: bool
    input_before_task: bool
    output_schema: dict[str, Any] | None
    sensitive: Iterable[str]
    scopes: Iterable[str]


class PromptOptions(TypedDict, total=False):
    """The keyword options of `Server.prompt`."""

    title: str | None
    description: str | None
    scopes: Iterable[str]


def _scopes_of(scopes: Iterable[str]) -> frozenset[str]:
    """The `scopes=` of a registration, checked when the decorator is made."""
    if isinstance(scopes, str):
        raise TypeError(f"scopes={scopes!r}: give a list of scopes, not one string")
    needed = frozenset(scopes)
    for scope in needed:
        if not isinstance(scope, str) or not scope or not scope.isprintable():
            raise ValueError(f"{scope!r} is not a scope")
        if any(c in scope for c in ' "\\'):
            raise ValueError(f"{scope!r} is not a scope (no space, quote or backslash)")
    return needed


class Registry:
    """The decorators: each registers in `core`'s catalog and tells `listeners`. `Server`
    holds one (`server.registry`) and hands its decorators on."""

    def __init__(self, core: ServerCore, listeners: ListenStreams) -> None:
        self.core = core
        self.listeners = listeners
        self._scopes: dict[tuple[str, str], frozenset[str]] = {}
        """The scopes an operation needs: by ("tool", name), ("prompt", name), ("resource",
        uri) and ("template", uri template)."""

    # --- scopes --------------------------------------------------------------------------

    @property
    def scoped_operations(self) -> bool:
        """Whether any tool, prompt or resource needs scopes (`scopes=`)."""
        return bool(self._scopes)

    def scopes_needed(self, method: str, target: str) -> frozenset[str]:
        """The scopes a `tools/call`, `prompts/get` or `resources/read` of `target` (a
        name, a uri) was registered with (`scopes=`): what an HTTP endpoint protected by
        a `ResourceServer` requires of the request's token (403 without them)."""
        if method == "tools/call":
            return self._scopes.get(("tool", target), _NONE)
        if method == "prompts/get":
            return self._scopes.get(("prompt", target), _NONE)
        if method == "resources/read":
            match = self.core.catalog.find_resource(target)
            if match is None:
                return _NONE
            if match.template is None:
                return self._scopes.get(("resource", target), _NONE)
            return self._scopes.get(("template", match.template), _NONE)
        return _NONE

    def _require(self, kind: str, name: str, needed: frozenset[str]) -> None:
        if needed:
            self._scopes[kind, name] = needed
        else:
            self._scopes.pop((kind, name), None)

    # --- tools -------------------------------------------------------------------------

    @overload
    def tool(self, name: _Tool, /) -> _Tool: ...
    @overload
    def tool(
        self, name: str | None = None, **options: Unpack[ToolOptions]
    ) -> Callable[[_Tool], _Tool]: ...
    def tool(
        self,
        name: str | _Tool | None = None,
        *,
        task_support: TaskSupport = "none",
        description: str | None = None,
        title: str | None = None,
        annotations: dict[str, Any] | None = None,
        input_schema: dict[str, Any] | None = None,
        resumable: bool = False,
        single_use_request_state: bool = False,
        input_before_task: bool = False,
        output_schema: dict[str, Any] | None = None,
        sensitive: Iterable[str] = (),
        scopes: Iterable[str] = (),
    ) -> Callable[[_Tool], _Tool] | _Tool:
        """Register a tool handler: `(ctx, name: str, times: int = 1)`, `(ctx, args)` or
        `(ctx)`; async, or a plain function run in a worker thread. `@server.tool` and
        `@server.tool()` are the same; `@server.tool("name")` names the tool.

        Plain parameters, or one msgspec Struct, dataclass or TypedDict, give the tool's
        `inputSchema`; arguments that do not fit are refused with -32602 naming the
        argument. Pass `input_schema` to publish a schema of your own instead (the types
        still decode). A return annotation that is a Struct, dataclass or TypedDict gives
        the `outputSchema` (or pass `output_schema`), and a value of it is answered as
        `structuredContent`. `task_support="required"` starts the task at once and runs
        the handler inside it (`input_before_task=True`: the handler runs first outside the
        task, to ask with `InputRequired`, and returns `START_TASK` when it has its answers).
        `resumable=True` says the handler may safely run again from the start: a task whose
        server stopped mid-run (restart, crash) runs again instead of failing.
        `single_use_request_state=True` accepts each input round's `requestState` once
        (remembered in the store until it expires): answers cannot be replayed.
        `sensitive` names arguments a journal (`Server.record`) writes as "[redacted]".
        `scopes` are OAuth scopes a caller's token must hold to call it, over HTTP protected
        by a `ResourceServer` (403 `insufficient_scope` without them; see docs/auth.md).
        """
        if callable(name):  # `@server.tool`, without parentheses
            return self.tool()(name)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"a tool's name is a string, not {name!r}")
        published = input_schema
        hidden = frozenset(sensitive)  # the parameter hides nothing the body needs
        published_output = output_schema
        needed = _scopes_of(scopes)

        def register(handler: _Tool) -> _Tool:
            tool_name = name or handler.__name__
            signature = read_tool_signature(tool_name, handler)
            args_type = signature.arguments_type
            if published_output is not None:
                shown_output: Any = published_output
            elif signature.output is not None:
                shown_output = signature.output.schema
            else:
                shown_output = UNSET
            spec = ToolSpec(
                name=tool_name,
                input_schema=schema_for(args_type) if published is None else published,
                task_support=task_support,
                title=UNSET if title is None else title,
                description=description or first_paragraph(handler),
                output_schema=shown_output,
                annotations=UNSET if annotations is None else annotations,
                resumable=resumable,
                single_use_request_state=single_use_request_state,
                input_before_task=input_before_task,
                arguments_type=args_type,
                sensitive_arguments=hidden,
                arguments_decoder=signature.arguments_decoder,
            )
            entry = ToolEntry(
                spec,
                handler,
                takes_arguments=args_type is not None,
                keywords=signature.keywords,
                output=signature.output,
                is_async=signature.is_async,
                context=signature.context,
            )
            self._require("tool", tool_name, needed)
            self.core.catalog.add_tool(spec, entry)
            self.notify_list_changed("tools")
            return handler

        return register

    def remove_tool(self, name: str) -> None:
        """Take a tool away; `subscriptions/listen` streams that asked are told. Its tasks
        already running go on to their end."""
        self.core.catalog.remove_tool(name)
        self._scopes.pop(("tool", name), None)
        self.notify_list_changed("tools")

    # --- prompts -------------------------------------------------------------------------

    @overload
    def prompt(self, name: Handler, /) -> Handler: ...
    @overload
    def prompt(
        self, name: str | None = None, **options: Unpack[PromptOptions]
    ) -> Callable[[Handler], Handler]: ...
    def prompt(
        self,
        name: str | Handler | None = None,
        *,
        title: str | None = None,
        description: str | None = None,
        scopes: Iterable[str] = (),
    ) -> Callable[[Handler], Handler] | Handler:
        """Register an async prompt handler; `@server.prompt` and `@server.prompt()` are the
        same.

        Its `str` parameters are the prompt's arguments (`async def review(code: str,
        focus: str = "bugs")`), the ones without a default required; or one msgspec Struct
        of `str` fields takes them. The context is the parameter annotated
        `RequestContext`, or an unannotated first one, as for tools. The handler returns
        the messages (`str` for one user message, a list of `PromptMessage`, or a
        `GetPromptResult`), or `InputRequired`.
        `scopes`: the OAuth scopes a caller needs (as for `tool`).
        """
        if callable(name):  # `@server.prompt`, without parentheses
            return self.prompt()(name)
        if name is not None and not isinstance(name, str):
            raise TypeError(f"a prompt's name is a string, not {name!r}")
        needed = _scopes_of(scopes)

        def register(handler: Handler) -> Handler:
            prompt_name = name or handler.__name__
            signature = read_prompt_signature(prompt_name, handler)
            args_type = signature.arguments_type
            spec = PromptSpec(
                name=prompt_name,
                arguments=() if args_type is None else prompt_arguments(args_type),
                title=UNSET if title is None else title,
                description=description or first_paragraph(handler),
                arguments_type=args_type,
            )
            self._require("prompt", spec.name, needed)
            entry = PromptEntry(spec, handler, signature.keywords, signature.context)
            self.core.catalog.add_prompt(spec, entry)
            self.notify_list_changed("prompts")
            return handler

        return register

    def remove_prompt(self, name: str) -> None:
        """Take a prompt away; `subscriptions/listen` streams that asked are told."""
        self.core.catalog.remove_prompt(name)
        self._scopes.pop(("prompt", name), None)
        self.notify_list_changed("prompts")

    # --- resources -----------------------------------------------------------------------

    def resource(
        self,
        uri: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        ttl_ms: int = 0,
        scopes: Iterable[str] = (),
    ) -> Callable[[Handler], Handler]:
        """Register an async handler that reads the resource at `uri`: it takes the
        context (`(ctx)`, or annotated `RequestContext`) or nothing.

        It returns `str` (text contents), `bytes` (a base64 blob), `ResourceContents` or a
        list of them, or `InputRequired`. `ttl_ms` is the cache freshness its read result
        advises (`ttlMs`).
        `scopes`: the OAuth scopes a caller needs (as for `tool`).
        """
        if not isinstance(uri, str):  # `@server.resource` without its uri
            raise TypeError("@server.resource needs the uri: @server.resource('notes://today')")
        needed = _scopes_of(scopes)

        def register(handler: Handler) -> Handler:
            context = read_resource_context("resource", uri, handler, [])
            spec = ResourceSpec(
                uri=uri, ttl_ms=ttl_ms, **listing(handler, name, title, description, mime_type)
            )
            self._require("resource", uri, needed)
            self.core.catalog.add_resource(spec, ResourceEntry(handler, mime_type, context))
            self.notify_list_changed("resources")
            return handler

        return register

    def remove_resource(self, uri: str) -> None:
        """Take a resource away; `subscriptions/listen` streams that asked are told."""
        self.core.catalog.remove_resource(uri)
        self._scopes.pop(("resource", uri), None)
        self.notify_list_changed("resources")

    def resource_template(
        self,
        uri_template: str,
        *,
        name: str | None = None,
        title: str | None = None,
        description: str | None = None,
        mime_type: str | None = None,
        ttl_ms: int = 0,
        scopes: Iterable[str] = (),
    ) -> Callable[[Handler], Handler]:
        """Register an async handler `(ctx, **variables)` (the context optional, as for
        `resource`) for the uris `uri_template` fits,
        e.g. `"files://{name}"` and `async def file(ctx, name: str)`. Raise
        `ResourceNotFound` for a uri that fits but names nothing. `scopes`: the OAuth scopes
        a caller needs (as for `tool`)."""

        if not isinstance(uri_template, str):  # `@server.resource_template` without its uri
            raise TypeError(
                "@server.resource_template needs the uri template: "
                "@server.resource_template('notes://{name}')"
            )
        needed = _scopes_of(scopes)

        def register(handler: Handler) -> Handler:
            spec = ResourceTemplateSpec(
                uri_template=uri_template,
                ttl_ms=ttl_ms,
                **listing(handler, name, title, description, mime_type),
            )
            context = read_resource_context(
                "resource template", uri_template, handler, spec.variables
            )
            self._require("template", uri_template, needed)
            self.core.catalog.add_template(spec, ResourceEntry(handler, mime_type, context))
            self.notify_list_changed("resources")
            return handler

        return register

    # --- completions ---------------------------------------------------------------------

    def completion(
        self, *, prompt: str | None = None, uri_template: str | None = None
    ) -> Callable[[Handler], Handler]:
        """Register an async handler `(argument, resolved)` that completes an argument of
        `prompt` (or a variable of `uri_template`): `argument` is the `CompletionArgument`
        (name, value typed so far), `resolved` the other values the client already chose.
        It returns the candidate values (`list[str]`, at most 100 go out) or a `Completion`.
        """
        if (prompt is None) == (uri_template is None):
            raise TypeError("completion() takes exactly one of prompt= and uri_template=")
        target: tuple[typing.Literal["ref/prompt", "ref/resource"], str]
        if prompt is not None:
            target = ("ref/prompt", prompt)
        else:
            assert uri_template is not None
            target = ("ref/resource", uri_template)

        def register(handler: Handler) -> Handler:
            if not inspect.iscoroutinefunction(handler):
                raise TypeError(f"completion {handler.__name__!r} must be an async function")
            self.core.catalog.add_completion(target, CompletionEntry(target[1], handler))
            return handler

        return register

    # --- telling listen streams ----------------------------------------------------------

    def notify_list_changed(self, kind: ListKind) -> None:
        """Tell the `subscriptions/listen` streams that asked that a list changed. The
        server does this itself on each registration and removal; call it when what a list
        shows changed some other way."""
        self.listeners.list_changed(kind)

    def notify_resource_updated(self, uri: str) -> None:
        """Tell the `subscriptions/listen` streams subscribed to `uri` that it changed."""
        self.listeners.resource_updated(uri)


class Registering:
    """The registry's decorators on the class that holds one (`Server`): each hands its
    arguments to `self.registry`, the `Registry` it composes. Made from `Registry`'s own
    methods, so their signatures and docstrings are written once, there."""

    registry: Registry

    # `tool` and `prompt` are written out: their overloads (with or without parentheses)
    # would not survive `handed_on`.
    @overload
    def tool(self, name: _Tool, /) -> _Tool: ...
    @overload
    def tool(
        self, name: str | None = None, **options: Unpack[ToolOptions]
    ) -> Callable[[_Tool], _Tool]: ...
    @functools.wraps(Registry.tool)
    def tool(self, name: Any = None, **options: Any) -> Any:
        """Register a tool handler, as `@server.tool`, `@server.tool()` or
        `@server.tool("name", task_support="optional", ...)` (`Registry.tool`)."""
        return self.registry.tool(name, **options)

    @overload
    def prompt(self, name: Handler, /) -> Handler: ...
    @overload
    def prompt(
        self, name: str | None = None, **options: Unpack[PromptOptions]
    ) -> Callable[[Handler], Handler]: ...
    @functools.wraps(Registry.prompt)
    def prompt(self, name: Any = None, **options: Any) -> Any:
        """Register a prompt handler, as `@server.prompt`, `@server.prompt()` or
        `@server.prompt("name", ...)` (`Registry.prompt`)."""
        return self.registry.prompt(name, **options)

    remove_tool = handed_on("registry", Registry.remove_tool)
    remove_prompt = handed_on("registry", Registry.remove_prompt)
    resource = handed_on("registry", Registry.resource)
    remove_resource = handed_on("registry", Registry.remove_resource)
    resource_template = handed_on("registry", Registry.resource_template)
    completion = handed_on("registry", Registry.completion)
    scopes_needed = handed_on("registry", Registry.scopes_needed)

    @property
    def scoped_operations(self) -> bool:
        """Whether any tool, prompt or resource needs scopes (`scopes=`)."""
        return self.registry.scoped_operations

    notify_list_changed = handed_on("registry", Registry.notify_list_changed)
    notify_resource_updated = handed_on("registry", Registry.notify_resource_updated)
