"""docs/testing.md as a user runs it: its `conftest.py` and `test_files.py` written to a
folder of their own and run by pytest in a subprocess, with anyio's pytest plugin (pytest-trio
off), each test on asyncio and on trio."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from doc_snippets import Page

RUN_SECONDS = 120


def test_the_testing_page_runs_its_tests_on_both_loops(tmp_path: Path) -> None:
    page = Page("testing.md")
    [conftest] = [code for code in page.snippets if code.startswith("# conftest.py")]
    [tests] = [code for code in page.snippets if code.startswith("# test_files.py")]
    assert len(page.snippets) == 2
    (tmp_path / "conftest.py").write_text(conftest)
    (tmp_path / "test_files.py").write_text(tests)
    (tmp_path / "pytest.ini").write_text("[pytest]\n")
    command = [sys.executable, "-m", "pytest", "-p", "no:trio", "-p", "no:cacheprovider"]
    done = subprocess.run(
        [*command, "-q", "-c", str(tmp_path / "pytest.ini"), "--rootdir", str(tmp_path)],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=RUN_SECONDS,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "4 passed" in done.stdout, done.stdout
