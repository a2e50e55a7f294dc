"""The peers' virtual environment: a missing or stale one skips the interop tests with how to
build it (a failure in CI), and benchmarks/peers/install leaves an up-to-date one alone."""

from __future__ import annotations

import subprocess
from pathlib import Path

import pytest

from . import processes


@pytest.fixture
def no_peers_venv(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Path:
    venv = tmp_path / ".peers-venv"
    monkeypatch.setattr(processes, "PEERS_VENV", venv)
    return venv


def test_without_it_the_tests_skip_saying_how_to_build_it(
    no_peers_venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="build it with benchmarks/peers/install"):
        processes.peers_python()


def test_in_ci_without_it_the_tests_fail(
    no_peers_venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setenv("CI", "true")
    with pytest.raises(pytest.fail.Exception, match="build it with benchmarks/peers/install"):
        processes.peers_python()


def test_one_built_from_other_pins_is_out_of_date(
    no_peers_venv: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    (no_peers_venv / "bin").mkdir(parents=True)
    (no_peers_venv / "bin" / "python").touch()
    (no_peers_venv / ".installed").write_text("0" * 64 + "  -\n")
    monkeypatch.delenv("CI", raising=False)
    with pytest.raises(pytest.skip.Exception, match="missing or out of date"):
        processes.peers_python()


def test_the_install_script_leaves_an_up_to_date_venv_alone() -> None:
    python = Path(processes.peers_python())
    before = python.parent.stat().st_ino, (processes.PEERS_VENV / ".installed").read_text()
    done = subprocess.run(
        [str(processes.ROOT / "benchmarks" / "peers" / "install")],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert done.returncode == 0 and done.stderr == "", done.stderr
    assert (
        python.parent.stat().st_ino,
        (processes.PEERS_VENV / ".installed").read_text(),
    ) == before
