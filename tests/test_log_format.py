"""The text lines of `configure_logging` are `logging.Formatter(TEXT_FORMAT)`'s, made for less."""

from __future__ import annotations

import logging
import sys

import pytest

from mcp_tasks._support.logs import TEXT_FORMAT, TextFormatter, configure_logging


def record_at(created: float, **more: object) -> logging.LogRecord:
    record = logging.LogRecord(
        "mcp_tasks.tasks", logging.INFO, __file__, 1, "task %s %r", ("t", "x"), None
    )
    record.created = created
    record.msecs = int((created - int(created)) * 1000) + 0.0
    record.__dict__.update(more)
    return record


def test_text_lines_are_logging_s_own_from_second_to_second() -> None:
    ours, theirs = TextFormatter(), logging.Formatter(TEXT_FORMAT)
    moments = [
        1_700_000_000.001,
        1_700_000_000.999,
        1_700_000_001.0,
        1_700_000_001.5,
        1_700_000_000.2,
    ]
    for created in moments:  # the same second again, the next, and back to an earlier one
        assert ours.format(record_at(created)) == theirs.format(record_at(created))
    assert ours.format(record_at(1_700_000_001.5)).endswith(",500 INFO mcp_tasks.tasks: task t 'x'")


def test_text_lines_with_a_traceback_or_a_stack_are_logging_s_own() -> None:
    ours, theirs = TextFormatter(), logging.Formatter(TEXT_FORMAT)
    try:
        raise ValueError("boom")
    except ValueError:
        exc_info = sys.exc_info()
    with_traceback = [record_at(5.25, exc_info=exc_info), record_at(5.25, exc_info=exc_info)]
    assert ours.format(with_traceback[0]) == theirs.format(with_traceback[1])
    assert "ValueError: boom" in ours.format(record_at(6.0, exc_info=exc_info))
    stacked = {"stack_info": "Stack (most recent call last):\n  here"}
    assert ours.format(record_at(7.0, **stacked)) == theirs.format(record_at(7.0, **stacked))
    dated = logging.Formatter(TEXT_FORMAT, datefmt="%H:%M")
    assert ours.formatTime(record_at(8.0), "%H:%M") == dated.formatTime(record_at(8.0), "%H:%M")


def test_serve_logs_text_through_the_text_formatter(monkeypatch: pytest.MonkeyPatch) -> None:
    root = logging.getLogger()
    monkeypatch.setattr(root, "handlers", list(root.handlers))
    monkeypatch.setattr(root, "level", root.level)
    configure_logging("info")
    (handler,) = root.handlers
    assert isinstance(handler.formatter, TextFormatter)
