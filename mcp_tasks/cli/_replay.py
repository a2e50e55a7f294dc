"""`mcp-tasks replay`: replay journals `serve --record` wrote, or tell one task's life."""

from __future__ import annotations

import sys

import click

from ..replay import DEFAULT_MAX_LINE_BYTES, ReplayFailed, format_timeline, replay, timeline


@click.command("replay")
@click.argument(
    "paths",
    metavar="PATH...",
    nargs=-1,
    required=True,
    type=click.Path(exists=True, dir_okay=False),
)
@click.option(
    "--task",
    "task_id",
    metavar="ID",
    help="Print the life of task ID as the journal(s) tell it, line by line, instead.",
)
@click.option(
    "--max-line-bytes",
    type=click.IntRange(min=1),
    default=DEFAULT_MAX_LINE_BYTES,
    show_default=True,
    help="Refuse a journal line longer than this, unread (raise it for a server that takes "
    "bodies past 4 MiB).",
)
def replay_command(paths: tuple[str, ...], task_id: str | None, max_line_bytes: int) -> None:
    """Replay the journal(s) at PATH through a fresh core and check that every answer is
    the same, byte for byte (exit 1 at the first difference, shown as a diff, or at the
    first line that is not a journal's, named).

    Rotated files (PATH.1, PATH.2...) replay on their own: name each you want.
    """
    try:
        if task_id is not None:
            events = timeline(paths, task_id, max_line_bytes=max_line_bytes)
            click.echo(format_timeline(task_id, events))
            if not events:
                sys.exit(1)
            return
        for path in paths:
            result = replay(path, max_line_bytes=max_line_bytes)
            click.echo(
                f"{path}: {result.calls} calls replayed, every answer the same "
                f"({len(result.tasks)} tasks)"
            )
    except ReplayFailed as failed:
        click.echo(failed.report, err=True)
        sys.exit(1)
    except OSError as unreadable:
        raise click.ClickException(f"cannot read a journal: {unreadable}") from None
