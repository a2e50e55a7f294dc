"""Fast random inputs for the core fuzzer (`run.py`), from `random.Random`: Hypothesis is
thorough but costs milliseconds an input, and this runs millions.

Kinds of input, by weight (`KINDS`):

* `near-valid`: a valid request for a random method the core knows (tools, tasks, prompts,
  resources, completion, listen, notifications), naming tasks, input keys and sealed
  `requestState`s the core itself handed out earlier in the session (`Pools`), then up to
  three structural edits (a key of the envelope, params, `_meta` or deeper dropped,
  replaced by a value of another type or an interesting one, or added);
* `mutated`: the bytes of a near-valid request with byte-level mutations (flips, cuts,
  insertions of JSON punctuation or invalid UTF-8, splices, duplicated runs, huge numbers);
* `json`: an arbitrary JSON value or JSON-RPC-looking envelope;
* `bytes`: arbitrary bytes;
* `edge`: deep nesting, long strings, big arrays, duplicate keys, BOMs, number edge cases.

Each input comes with HTTP headers (none, as on stdio; those a correct client sends; or
those with one changed, non-ASCII, base64-wrapped, spaced) and a principal (none, or one
of two), as an authenticator would name the caller.
"""

from __future__ import annotations

import base64
import json
import random
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any, Final

from mcp_tasks.core import PROTOCOL_VERSION, TASKS_EXTENSION, HttpHeaders

META_VERSION: Final = "io.modelcontextprotocol/protocolVersion"
META_CAPS: Final = "io.modelcontextprotocol/clientCapabilities"
META_INFO: Final = "io.modelcontextprotocol/clientInfo"
TASKS_CAPS: Final[dict[str, Any]] = {"extensions": {TASKS_EXTENSION: {}}}
ALL_CAPS: Final[dict[str, Any]] = {
    "elicitation": {"form": {}, "url": {}},
    "sampling": {},
    "roots": {},
    "extensions": {TASKS_EXTENSION: {}},
}
GOOD_CAPS: Final[list[dict[str, Any]]] = [
    {},
    TASKS_CAPS,
    ALL_CAPS,
    {**TASKS_CAPS, "elicitation": {}},
    {"elicitation": {}},
]
TOOL_METHODS: Final = (
    "server/discover",
    "tools/list",
    "tools/call",
    "tools/call",
    "tools/call",
    "tasks/get",
    "tasks/get",
    "tasks/update",
    "tasks/update",
    "tasks/cancel",
)
CATALOG_METHODS: Final = (
    "prompts/list",
    "prompts/get",
    "resources/list",
    "resources/templates/list",
    "resources/read",
    "completion/complete",
    "subscriptions/listen",
)
OTHER_METHODS: Final = (
    "tasks/list",
    "tasks/result",
    "initialize",
    "ping",
    "notifications/cancelled",
    "notifications/initialized",
    "",
    "TOOLS/LIST",
    "logging/setLevel",
    "sampling/createMessage",
)
TOOL_NAMES: Final = (
    "greet",
    "slow",
    "required_job",
    "ask_then_task",
    "greet_after_asking",
    "needs_sampling",
    "needs_roots",
    "fails",
    "none_but_starts",
    "nope",
)
PROMPT_NAMES: Final = ("review", "hello", "ask", "broken", "nope")
RESOURCE_URIS: Final = (
    "file:///readme.md",
    "file:///logs/2026-08-01.txt",
    "file:///logs/a%20b.txt",
    "file:///logs/.txt",
    "file:///secret",
    "file:///gone",
    "file:///nope",
    "file:///logs/x/y.txt",
)
COMPLETION_REFS: Final[list[dict[str, str]]] = [
    {"type": "ref/prompt", "name": "review"},
    {"type": "ref/resource", "uri": "file:///logs/{day}.txt"},
    {"type": "ref/prompt", "name": "nope"},
    {"type": "ref/resource", "uri": "file:///x/{y}"},
    {"type": "ref/other", "name": "x"},
]
GOOD_ANSWERS: Final[list[dict[str, Any]]] = [
    {"action": "accept", "content": {"name": "Ada"}},
    {"action": "decline"},
    {"action": "cancel"},
    {"role": "assistant", "content": {"type": "text", "text": "hi"}, "model": "m"},
    {"roots": [{"uri": "file:///tmp"}]},
]
INTERESTING_INTS: Final = (
    0,
    -1,
    1,
    7,
    2**31 - 1,
    2**31,
    2**53 + 1,
    2**63 - 1,
    2**63,
    -(2**63) - 1,
    2**64,
    10**30,
    -(10**40),
    10**300,
)
INTERESTING_FLOATS: Final = (0.0, -0.0, 1.5, 1e308, -1e-308, 5e-324, 1.0, 2.0, 1e16)
INTERESTING_TEXT: Final = (
    "",
    " ",
    "\x00",
    "é",
    "☃",
    "\ud800",
    "\udfff",
    "\U0001f600",
    "a" * 300,
    "=?base64?",
    "=?base64?dHNrLTAwMDE=?=",
    "tsk-0001",
    "tsk-0099",
    "../",
    "%00",
    "\n",
    '"',
    "\\",
    "null",
    "{}",
    PROTOCOL_VERSION,
    "2025-11-25",
    "text/event-stream",
    "\u202e",
    "\ufeff",
    "0",
)
INTERESTING_BYTES: Final = (
    b"\x00",
    b"\xff",
    b"\x80",
    b"\xc3",
    b"\xed\xa0\x80",
    b"\xef\xbb\xbf",
    b'"',
    b"\\",
    b"{",
    b"}",
    b"[",
    b"]",
    b",",
    b":",
    b"null",
    b"1e999",
    b"-0",
    b"18446744073709551616",
    b"\\u0000",
    b"\\ud800",
    b"NaN",
    b"Infinity",
    b"\n",
    b" ",
    b"\t",
)
KINDS: Final = ("near-valid",) * 10 + ("mutated",) * 5 + ("json",) * 2 + ("bytes",) * 2 + ("edge",)


def _fresh(value: Any) -> Any:
    """A copy of the constant `value` (dicts and lists), which an edit may then change."""
    if isinstance(value, dict):
        return {key: _fresh(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_fresh(item) for item in value]
    return value


@dataclass
class Pools:
    """What the core handed out during the session, for later inputs to name."""

    task_ids: list[str] = field(default_factory=lambda: ["tsk-0001", "tsk-0002", "tsk-0099"])
    states: list[str] = field(default_factory=lambda: ["v1.e30.AAAA", "garbage"])
    input_keys: list[str] = field(default_factory=lambda: ["a", "b", "who"])
    corpus: list[bytes] = field(default_factory=list)
    """Bytes of near-valid requests, for the mutator."""

    def remember(self, pool: list[Any], value: Any, limit: int = 64) -> None:
        if value not in pool:
            if len(pool) >= limit:
                pool.pop(0)
            pool.append(value)

    def learn(self, reply: dict[str, Any]) -> None:
        """Task ids, input keys and sealed states from a reply the core sent."""
        result = reply.get("result")
        if not isinstance(result, dict):
            return
        task_id = result.get("taskId")
        if isinstance(task_id, str):
            self.remember(self.task_ids, task_id)
        state = result.get("requestState")
        if isinstance(state, str):
            self.remember(self.states, state)
        requests = result.get("inputRequests")
        if isinstance(requests, dict):
            for key in requests:
                self.remember(self.input_keys, key, 16)


@dataclass
class Input:
    kind: str
    data: bytes
    headers: HttpHeaders | None
    principal: str | None


class Generator:
    """Inputs for one session of the core fuzzer."""

    def __init__(self, rng: random.Random, pools: Pools) -> None:
        self.rng = rng
        self.pools = pools
        self._builders: dict[str, Callable[[dict[str, Any]], None]] = {
            "tools/call": self._tools_call,
            "tasks/get": self._task,
            "tasks/cancel": self._task,
            "tasks/update": self._task_update,
            "prompts/get": self._prompts_get,
            "resources/read": self._resources_read,
            "completion/complete": self._complete,
            "subscriptions/listen": self._listen,
        }

    # --- values ----------------------------------------------------------------------------

    def chance(self, p: float) -> bool:
        return self.rng.random() < p

    def text(self) -> str:
        rng = self.rng
        roll = rng.random()
        if roll < 0.2:
            return rng.choice(INTERESTING_TEXT)
        if roll < 0.9:
            return "".join(rng.choice("abcxyz_-/.: 0123") for _ in range(rng.randrange(9)))
        return "".join(chr(rng.randrange(0x20, 0x2FFF)) for _ in range(rng.randrange(6)))

    def scalar(self) -> Any:
        rng = self.rng
        roll = rng.randrange(8)
        if roll == 0:
            return None
        if roll == 1:
            return rng.random() < 0.5
        if roll == 2:
            return rng.choice(INTERESTING_INTS)
        if roll == 3:
            return rng.randrange(-1000, 1000)
        if roll == 4:
            return rng.choice(INTERESTING_FLOATS)
        return self.text()

    def value(self, depth: int = 3) -> Any:
        roll = self.rng.randrange(6)
        if depth <= 0 or roll < 3:
            return self.scalar()
        if roll == 3:
            return [self.value(depth - 1) for _ in range(self.rng.randrange(4))]
        return {self.text(): self.value(depth - 1) for _ in range(self.rng.randrange(4))}

    def caps(self, tasks: bool = False) -> Any:
        if tasks and self.chance(0.9):
            return _fresh(self.rng.choice((TASKS_CAPS, ALL_CAPS)))
        if self.chance(0.85):
            return _fresh(self.rng.choice(GOOD_CAPS))
        keys = ("elicitation", "sampling", "roots", "extensions", "experimental")
        return {self.rng.choice(keys): self.value(2) for _ in range(self.rng.randrange(3))}

    def meta(self, tasks: bool = False) -> dict[str, Any]:
        meta: dict[str, Any] = {
            META_VERSION: PROTOCOL_VERSION,
            META_CAPS: self.caps(tasks),
            META_INFO: {"name": "fuzz", "version": "1.0"},
        }
        if self.chance(0.1):
            meta["progressToken"] = self.rng.choice([1, "p", 2**40])
        if self.chance(0.05):
            meta["io.modelcontextprotocol/logLevel"] = self.rng.choice(["debug", "error", "x"])
        return meta

    # --- requests -----------------------------------------------------------------------------

    def request_id(self) -> Any:
        rng = self.rng
        roll = rng.randrange(10)
        if roll < 5:
            return rng.randrange(1, 10_000)
        if roll < 8:
            return "r" + str(rng.randrange(1000))
        return rng.choice([0, -1, 2**53 + 1, 2**63, "", "\ud800", "é"])

    def valid_request(self) -> dict[str, Any]:
        rng = self.rng
        roll = rng.random()
        if roll < 0.62:
            method = rng.choice(TOOL_METHODS)
        elif roll < 0.95:
            method = rng.choice(CATALOG_METHODS)
        else:
            method = rng.choice(OTHER_METHODS)
        params: dict[str, Any] = {"_meta": self.meta(tasks=method.startswith("tasks/"))}
        builder = self._builders.get(method)
        if builder is not None:
            builder(params)
        elif method.endswith("/list") and self.chance(0.2):
            params["cursor"] = self.text()
        if method.startswith("notifications/"):
            params = {"requestId": self.request_id()} if self.chance(0.7) else params
            return {"jsonrpc": "2.0", "method": method, "params": params}
        return {"jsonrpc": "2.0", "id": self.request_id(), "method": method, "params": params}

    def answers(self) -> dict[str, Any]:
        keys = self.pools.input_keys
        return {
            self.rng.choice(keys): _fresh(self.rng.choice(GOOD_ANSWERS))
            for _ in range(1 + self.rng.randrange(2))
        }

    def _tools_call(self, params: dict[str, Any]) -> None:
        name = self.rng.choice(TOOL_NAMES)
        params["name"] = name
        if self.chance(0.7):
            params["arguments"] = (
                {"name": self.text()} if name.startswith("greet") else {"label": self.text()}
            )
        if self.chance(0.3):
            params["inputResponses"] = self.answers()
            if self.chance(0.8):
                params["requestState"] = self.rng.choice(self.pools.states)
        if self.chance(0.05):
            params["task"] = {"ttl": self.rng.choice([1, 1000, -1])}

    def _task(self, params: dict[str, Any]) -> None:
        params["taskId"] = self.rng.choice(self.pools.task_ids)

    def _task_update(self, params: dict[str, Any]) -> None:
        params["taskId"] = self.rng.choice(self.pools.task_ids)
        params["inputResponses"] = self.answers()

    def _prompts_get(self, params: dict[str, Any]) -> None:
        params["name"] = self.rng.choice(PROMPT_NAMES)
        if self.chance(0.7):
            keys = ("code", "language", "style", "x")
            params["arguments"] = {
                self.rng.choice(keys): self.text() for _ in range(self.rng.randrange(4))
            }
        if self.chance(0.2):
            params["inputResponses"] = self.answers()
            if self.chance(0.8):
                params["requestState"] = self.rng.choice(self.pools.states)

    def _resources_read(self, params: dict[str, Any]) -> None:
        params["uri"] = self.rng.choice(RESOURCE_URIS)
        if self.chance(0.2):
            params["inputResponses"] = self.answers()
            if self.chance(0.8):
                params["requestState"] = self.rng.choice(self.pools.states)

    def _complete(self, params: dict[str, Any]) -> None:
        params["ref"] = _fresh(self.rng.choice(COMPLETION_REFS))
        name = self.rng.choice(["code", "language", "day", "x"])
        params["argument"] = {"name": name, "value": self.text()}
        if self.chance(0.3):
            params["context"] = {"arguments": {"code": self.text(), "day": self.text()}}

    def _listen(self, params: dict[str, Any]) -> None:
        notifications: dict[str, Any] = {}
        for key in ("toolsListChanged", "promptsListChanged", "resourcesListChanged"):
            if self.chance(0.4):
                notifications[key] = self.chance(0.7)
        if self.chance(0.3):
            notifications["resourceSubscriptions"] = self.rng.sample(RESOURCE_URIS, 2)
        if self.chance(0.3):
            notifications["taskIds"] = [self.rng.choice(self.pools.task_ids)]
        params["notifications"] = notifications

    # --- edits -------------------------------------------------------------------------------

    def other_type(self, value: Any) -> Any:
        """A value of another JSON type than `value`, or an interesting one of the same."""
        choices: list[Callable[[], Any]] = [
            lambda: None,
            lambda: True,
            lambda: self.rng.choice(INTERESTING_INTS),
            lambda: self.rng.choice(INTERESTING_FLOATS),
            self.text,
            lambda: [value],
            lambda: {"x": value},
            lambda: [],
            lambda: {},
            lambda: self.value(3),
        ]
        return self.rng.choice(choices)()

    def edit(self, message: dict[str, Any]) -> None:
        """Up to three edits anywhere in the message (it is built fresh: edited in place)."""
        for _ in range(self.rng.choice((0, 0, 0, 1, 1, 2, 3))):
            containers: list[dict[str, Any] | list[Any]] = []
            stack: list[Any] = [message]
            while stack:
                node = stack.pop()
                if isinstance(node, dict | list):
                    containers.append(node)
                    stack.extend(node.values() if isinstance(node, dict) else node)
            target = self.rng.choice(containers)
            action = self.rng.randrange(4)
            if isinstance(target, list):
                if target and action == 0:
                    del target[self.rng.randrange(len(target))]
                elif target and action < 3:
                    at = self.rng.randrange(len(target))
                    target[at] = self.other_type(target[at])
                else:
                    target.append(self.value(2))
            elif target and action == 0:
                del target[self.rng.choice(list(target))]
            elif target and action < 3:
                key = self.rng.choice(list(target))
                target[key] = self.other_type(target[key])
            else:
                keys = (
                    "jsonrpc",
                    "id",
                    "method",
                    "params",
                    "result",
                    "error",
                    "_meta",
                    "taskId",
                    "name",
                    "arguments",
                    "inputResponses",
                    "requestState",
                    "uri",
                    "cursor",
                    "task",
                    META_VERSION,
                    META_CAPS,
                    "progressToken",
                )
                target[self.rng.choice(keys) if self.chance(0.7) else self.text()] = self.value(2)

    def headers_for(self, message: Any) -> HttpHeaders | None:
        """None (stdio) or the headers of an HTTP POST: matching the body, or one off."""
        rng = self.rng
        roll = rng.random()
        if roll < 0.35:
            return None
        if roll < 0.45:
            pick = (None, PROTOCOL_VERSION, "tasks/get", "tools/call", "x", "é", "=?base64?")
            return HttpHeaders(
                protocol_version=rng.choice(pick), method=rng.choice(pick), name=rng.choice(pick)
            )
        message = message if isinstance(message, dict) else {}
        params = message.get("params")
        params = params if isinstance(params, dict) else {}
        meta = params.get("_meta")
        version = meta.get(META_VERSION) if isinstance(meta, dict) else None
        method = message.get("method")
        name = params.get("taskId", params.get("name", params.get("uri")))
        if isinstance(name, str) and (not name.isascii() or self.chance(0.2)):
            name = "=?base64?" + base64.b64encode(name.encode("utf-8", "surrogatepass")).decode()
            name += "?="
        fields: dict[str, Any] = {
            "protocol_version": version if isinstance(version, str) else None,
            "method": method if isinstance(method, str) else None,
            "name": name if isinstance(name, str) else None,
        }
        if self.chance(0.25):
            key = rng.choice(list(fields))
            fields[key] = rng.choice(
                [None, "", " x ", "é", "\udcff", f" {fields[key]} ", "=?base64?!!?=", self.text()]
            )
        if self.chance(0.05):
            fields["params"] = {self.text(): self.text() for _ in range(rng.randrange(3))}
        return HttpHeaders(**fields)

    # --- bytes ---------------------------------------------------------------------------------

    def dumps(self, value: Any) -> bytes:
        text = json.dumps(value, ensure_ascii=self.chance(0.5))
        return text.encode("utf-8", "surrogatepass")

    def mutate(self, data: bytes) -> bytes:
        rng = self.rng
        out = bytearray(data)
        for _ in range(1 + rng.randrange(4)):
            at = rng.randrange(len(out) + 1)
            roll = rng.randrange(8)
            if roll == 0 and out:
                del out[at : at + 1 + rng.randrange(8)]
            elif roll == 1:
                out[at:at] = rng.choice(INTERESTING_BYTES)
            elif roll == 2 and at < len(out):
                out[at] ^= 1 << rng.randrange(8)
            elif roll == 3:
                del out[at:]
            elif roll == 4 and self.pools.corpus:
                other = rng.choice(self.pools.corpus)
                cut = rng.randrange(len(other) + 1)
                out[at:] = other[cut:]
            elif roll == 5 and out:
                end = min(len(out), at + 1 + rng.randrange(16))
                out[at:at] = out[at:end]
            elif roll == 6:
                out[at:at] = bytes(rng.randrange(256) for _ in range(1 + rng.randrange(4)))
            elif at < len(out):
                out[at] = rng.choice(b'{}[]",:0 \\')
        return bytes(out)

    def edge(self) -> bytes:
        rng = self.rng
        roll = rng.randrange(9)
        depth = rng.choice((10, 100, 255, 256, 257, 500, 1000, 3000))
        if roll == 0:
            return b"[" * depth + b"]" * depth
        if roll == 1:
            inner = b'{"a":' * depth + b"1" + b"}" * depth
            return b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":' + inner + b"}"
        if roll == 2:
            size = rng.choice((1000, 65_536, 300_000))
            return b'{"jsonrpc":"2.0","id":1,"method":"' + b"x" * size + b'"}'
        if roll == 3:
            return (
                b'{"jsonrpc":"2.0","id":1,"method":"tools/list","params":['
                + b"0," * (rng.choice((10, 10_000)))
                + b"0]}"
            )
        if roll == 4:
            return b'{"jsonrpc":"2.0","id":1,"id":"two","method":"tools/list","method":"x"}'
        if roll == 5:
            return b"\xef\xbb\xbf" + self.dumps(self.valid_request())
        if roll == 6:
            number = rng.choice([b"1e400", b"-0", b"1.0", b"1e2", b"0x10", b"01", b"1" * 400])
            return b'{"jsonrpc":"2.0","id":' + number + b',"method":"tools/list"}'
        if roll == 7:
            return self.dumps([self.valid_request(), self.valid_request()])  # a batch
        return self.dumps(self.valid_request()) + rng.choice([b" ", b"\n", b"x", b"{}", b"\x00"])

    # --- the next input ------------------------------------------------------------------------

    def next(self) -> Input:
        rng = self.rng
        kind = rng.choice(KINDS)
        message: Any = None
        if kind == "near-valid":
            message = self.valid_request()
            self.edit(message)
            data = self.dumps(message)
            if len(self.pools.corpus) < 256:
                self.pools.corpus.append(data)
            else:
                self.pools.corpus[rng.randrange(256)] = data
        elif kind == "mutated":
            message = self.valid_request()
            data = self.mutate(self.dumps(message))
        elif kind == "json":
            if self.chance(0.5):
                message = self.value(4)
            else:
                keys = ("jsonrpc", "id", "method", "params", "result", "error")
                pick = ("2.0", "1.0", 2.0, "tools/list", "tasks/get", "notifications/x", 1)
                message = {
                    rng.choice(keys): rng.choice(pick) if self.chance(0.5) else self.value(2)
                    for _ in range(rng.randrange(6))
                }
            data = self.dumps(message)
        elif kind == "bytes":
            data = bytes(rng.randrange(256) for _ in range(rng.randrange(64)))
        else:
            data = self.edge()
        principal = rng.choice((None, None, "alice", "bob"))
        return Input(kind, data, self.headers_for(message), principal)
