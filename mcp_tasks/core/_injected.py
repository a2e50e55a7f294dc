"""What the core draws from outside itself, behind one object.

The core reads no clock and draws no randomness, but four of its answers depend on
something the server gives it: the id of a new task, the digests and MACs that seal an
input round's `requestState` (and the verdict on one that comes back), the verdict of a
tool's or prompt's argument type on the arguments a client sent, and the poll policy's
verdict on a `tasks/get` that may come too soon. `Injected` is all of them; the core asks
nothing else. `ServerInjected` is the server's own; a journal wraps it to write down what
each input drew, and plays back what was written in its place (`mcp_tasks.journals`).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, Protocol

from ._options import PromptSpec, ToolSpec
from ._policy import PollPolicy
from ._records import TaskRecord
from ._sealing import Sealer


class Injected(Protocol):
    """Everything the core draws from outside itself. It is a `Sealer` too."""

    @property
    def polls(self) -> bool:
        """Whether a poll policy judges `tasks/get` (False: `poll_wait_ms` is never asked)."""
        ...

    def new_task_id(self) -> str:
        """The id of a task being created."""
        ...

    def digest(self, method: str, name: str, arguments: bytes | None, principal: str | None) -> str:
        """What names a call an input round belongs to (its arguments and caller)."""
        ...

    def mac(self, signed: str) -> bytes:
        """The MAC that seals a round's state."""
        ...

    def verify(self, signed: str, mac: bytes) -> bool:
        """Whether `mac` seals `signed`."""
        ...

    def decode_arguments(self, spec: ToolSpec | PromptSpec, arguments: Any) -> Any:
        """`arguments` as `spec`'s argument type, or the -32602 `ProtocolError` it raises."""
        ...

    def poll_wait_ms(self, principal: str | None, record: TaskRecord, now: float) -> int | None:
        """How long `principal` must wait before polling `record` again (None: answer now)."""
        ...


class ServerInjected:
    """The server's own: ids from `new_task_id`, sealing by `sealer`, arguments decoded by
    their specs, polls judged by `poll_policy` (None: none)."""

    __slots__ = ("_new_task_id", "poll_policy", "sealer")

    def __init__(
        self, new_task_id: Callable[[], str], sealer: Sealer, poll_policy: PollPolicy | None
    ) -> None:
        self._new_task_id = new_task_id
        self.sealer = sealer
        self.poll_policy = poll_policy

    @property
    def polls(self) -> bool:
        return self.poll_policy is not None

    def new_task_id(self) -> str:
        return self._new_task_id()

    def digest(self, method: str, name: str, arguments: bytes | None, principal: str | None) -> str:
        return self.sealer.digest(method, name, arguments, principal)

    def mac(self, signed: str) -> bytes:
        return self.sealer.mac(signed)

    def verify(self, signed: str, mac: bytes) -> bool:
        return self.sealer.verify(signed, mac)

    def decode_arguments(self, spec: ToolSpec | PromptSpec, arguments: Any) -> Any:
        return spec.decode_arguments(arguments)

    def poll_wait_ms(self, principal: str | None, record: TaskRecord, now: float) -> int | None:
        policy = self.poll_policy
        return None if policy is None else policy.wait_ms(principal, record, now)
