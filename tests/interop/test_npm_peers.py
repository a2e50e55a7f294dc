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


def test_without_them_the_tests_skip_saying_how_to_install_them(
    no_npm_peers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="install them with tests/interop/npm/install"):
        processes.npm_node()


def test_in_ci_without_them_the_tests_fail(
    no_npm_peers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="install them with tests/interop/npm/install"):
        processes.npm_node()


def installed(folder: Path, lock_hash: str, node: str) -> None:
    (folder / "node_modules").mkdir()
    (folder / "node_modules" / ".installed").write_text(lock_hash + "  -\n")
    (folder / "node_modules" / ".node").write_text(node + "\n")


def test_ones_installed_from_another_lock_are_out_of_date(
    no_npm_peers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    installed(no_npm_peers, "0" * 64, shutil.which("sh") or "/bin/sh")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="missing or out of date"):
        processes.npm_node()


def test_a_recorded_node_that_is_gone_is_out_of_date(
    no_npm_peers: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    lock_hash = hashlib.sha256((no_npm_peers / "package-lock.json").read_bytes()).hexdigest()
    installed(no_npm_peers, lock_hash, str(no_npm_peers / "gone" / "node"))
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
