"""Names `ServerCore` kept for shells written before the core was split by concern (issue
14): each does what it did, in terms of what replaced it."""

from __future__ import annotations

from typing import Any

import msgspec

from . import _wire as w
from ._catalog import Catalog
from ._effects import Reply
from ._encode import Encoder
from ._needs import ToolCall
from ._options import ToolSpec
from ._records import TaskRecord
from ._tasks import task_call


class CompatibleNames:
    catalog: Catalog
    _encode: Encoder

    def add_tool(self, tool: ToolSpec, handler: Any = None) -> None:
        """Use `catalog.add_tool`."""
        self.catalog.add_tool(tool, handler)

    def remove_tool(self, name: str) -> None:
        """Use `catalog.remove_tool`."""
        self.catalog.remove_tool(name)

    @property
    def tools(self) -> dict[str, ToolSpec]:
        """Use `catalog.tools`."""
        return dict(self.catalog.tools)

    def resume_call(self, record: TaskRecord) -> ToolCall | None:
        """The call that runs `record`'s handler again with every answer it has so far,
        or None if the task is not running (it ended). Use `task_resumed`."""
        if record.status.is_terminal or record.request_meta is None:
            return None
        return task_call(record)

    def error_reply(
        self, request_id: w.RequestId | None, code: int, message: str, http_status: int
    ) -> Reply:
        """An error response carried with `http_status`."""
        reply = self._encode.error_object(request_id, w.ErrorObject(code=code, message=message))
        return msgspec.structs.replace(reply, http_status=http_status)
