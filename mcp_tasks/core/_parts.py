"""What the core's parts share: one object `ServerCore` makes, hands to each, and changes.

Theory of operation
-------------------
The core is split by concern (`Tasks`, `ToolCalls`, `CatalogCalls`, `Rounds`,
`Subscriptions`), and each reads some of the same few things: the encoder, the catalog,
the options of the server and of its tasks, and what is injected (task ids, seals, argument
and poll verdicts). `ServerCore` makes one `Parts` and hands that to every part instead of
four parameters each; `use_options`, `use_task_options` and `use_injected` change it here
once, so every part answers its next input under the new value and none is left holding the
one before.
"""

from __future__ import annotations

from dataclasses import dataclass

from ._catalog import Catalog
from ._encode import Encoder
from ._injected import Injected
from ._options import ServerOptions, TaskOptions


@dataclass(slots=True)
class Parts:
    """The collaborators every part of `ServerCore` reads, as the core holds them now."""

    encode: Encoder
    catalog: Catalog
    """The one registry: every spec with its handler."""
    options: ServerOptions
    """Cache hints, the `requestState` TTL, header leniency, listen limits."""
    task_options: TaskOptions
    """A new task's TTL, poll interval and limits."""
    injected: Injected
    """Task ids, seals, argument and poll verdicts (a journal wraps it)."""
