"""The npm peers (tests/interop/npm): missing or stale ones skip the TS client and Inspector
tests with how to install them (a failure in CI), and tests/interop/npm/install leaves
up-to-date ones alone."""

from __future__ import annotations

import hashlib
import shutil
import subprocess
from pathlib import Path

import pytest

from . import processes

INSTALL = processes.NPM_PEERS / "install"


@pytest.fixture
def no_npm_peers(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    """An npm peers folder with today's lock and nothing installed."""
    shutil.copy(processes.NPM_PEERS / "package-lock.json", tmp_path / "package-lock.json")
    monkeypatch.setattr(processes, "NPM_PEERS", tmp_path)
    return tmp_path


@pytest.mark.parametrize(
    ("ci", "outcome"), [(None, pytest.skip.Exception), ("true", pytest.fail.Exception)]
)
def test_without_them_the_tests_skip_saying_how_to_install_them_and_fail_in_ci(
    no_npm_peers: Path, monkeypatch: pytest.MonkeyPatch, ci: str | None, outcome: type
) -> None:
    if ci is None:
        monkeypatch.delenv("CI", raising=False)
    else:
        monkeypatch.setenv("CI", ci)
    with pytest.raises(outcome, match="install them with tests/interop/npm/install"):
        processes.npm_node()


@pytest.mark.parametrize("stale", ["another lock", "node gone"])
def test_ones_from_another_lock_or_with_their_node_gone_are_out_of_date(
    no_npm_peers: Path, monkeypatch: pytest.MonkeyPatch, stale: str
) -> None:
    """The stamp holds the lock's hash; .node the node install recorded."""
    lock_hash = hashlib.sha256((no_npm_peers / "package-lock.json").read_bytes()).hexdigest()
    node = shutil.which("sh") or "/bin/sh"  # any executable will do
    if stale == "another lock":
        lock_hash = "0" * 64
    else:
        node = str(no_npm_peers / "gone" / "node")
    (no_npm_peers / "node_modules").mkdir()
    (no_npm_peers / "node_modules" / ".installed").write_text(lock_hash + "  -\n")
    (no_npm_peers / "node_modules" / ".node").write_text(node + "\n")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="missing or out of date"):
        processes.npm_node()


def test_the_install_script_leaves_up_to_date_ones_alone() -> None:
    node = processes.npm_node()
    modules = processes.NPM_PEERS / "node_modules"
    before = modules.stat().st_ino, (modules / ".installed").read_text()
    done = subprocess.run([str(INSTALL)], capture_output=True, text=True, timeout=60, check=False)
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (modules.stat().st_ino, (modules / ".installed").read_text()) == before
    assert processes.npm_node() == node
