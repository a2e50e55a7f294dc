"""Journals as regression tests: `replay(path)`, and `replay_journals(folder)` for pytest.

```python
# tests/test_journals.py
from mcp_tasks.testing import replay_journals

test_journals = replay_journals("tests/journals")  # one test per journal in the folder
```

Each journal (`*.jsonl`, and rotated `*.jsonl.N`) becomes one test, named after its file,
that fails with the report of `ReplayFailed`: the line, the message, the diff of the
recorded and replayed answers and the task's life up to there.
"""

from __future__ import annotations

import os
from collections.abc import Callable
from pathlib import Path

from .replay import ReplayFailed, ReplayResult, replay

__all__ = ["ReplayFailed", "ReplayResult", "journals_in", "replay", "replay_journals"]

JOURNAL_PATTERNS = ("*.jsonl", "*.jsonl.*")


def journals_in(folder: str | os.PathLike[str]) -> list[Path]:
    """The journals in `folder` (and below), sorted."""
    root = Path(folder)
    found = {path for pattern in JOURNAL_PATTERNS for path in root.rglob(pattern)}
    return sorted(path for path in found if path.is_file())


def replay_journals(folder: str | os.PathLike[str]) -> Callable[..., None]:
    """A pytest test that replays each journal in `folder` as a test of its own. Assign it
    to a `test_*` name in a test module. A folder with no journal is a failure, not a
    silent pass (a misplaced folder would otherwise test nothing)."""
    import pytest  # noqa: PLC0415 - only where tests run, never a dependency

    root = Path(folder)
    journals = journals_in(root)
    names = [str(path.relative_to(root)) for path in journals]

    @pytest.mark.parametrize("journal", journals or [None], ids=names or ["no-journals"])
    def test_journal(journal: Path | None) -> None:
        if journal is None:
            pytest.fail(f"no journal (*.jsonl) in {root}")
        try:
            replay(journal)
        except ReplayFailed as failed:
            pytest.fail(failed.report, pytrace=False)

    return test_journal
