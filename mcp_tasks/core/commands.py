"""The commands a `Step` carries, for the shell to carry out in order before it sends the
reply: save or delete a record, start, resume or cancel a task's handler, let a lease go,
send a notification, wake at a deadline.
"""

from ._effects import (
    AwaitAnswer,
    CancelRequest,
    CancelTask,
    DeleteTask,
    Effect,
    EndRun,
    Notify,
    ReleaseLease,
    ResumeTask,
    SaveTask,
    StartTask,
    TaskLimits,
    WakeAt,
)

__all__ = [
    "AwaitAnswer",
    "CancelRequest",
    "CancelTask",
    "DeleteTask",
    "Effect",
    "EndRun",
    "Notify",
    "ReleaseLease",
    "ResumeTask",
    "SaveTask",
    "StartTask",
    "TaskLimits",
    "WakeAt",
]
