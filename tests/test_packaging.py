"""What a user installs: one version, the metadata a package index shows, a wheel that is
the package alone, and an editable install that a user's mypy can see."""

from __future__ import annotations

import importlib.machinery
import importlib.metadata
import importlib.util
import re
import subprocess
import sys
import tarfile
import tomllib
import zipfile
from pathlib import Path
from types import ModuleType

import pytest

import mcp_tasks

ROOT = Path(__file__).resolve().parent.parent
PYPROJECT = tomllib.loads((ROOT / "pyproject.toml").read_text())
PROJECT = PYPROJECT["project"]


def wheel_check() -> ModuleType:
    """.ci/wheel-check, loaded as a module (its file name has no .py)."""
    path = ROOT / ".ci" / "wheel-check"
    loader = importlib.machinery.SourceFileLoader("wheel_check", str(path))
    spec = importlib.util.spec_from_loader("wheel_check", loader)
    assert spec is not None
    module = importlib.util.module_from_spec(spec)
    loader.exec_module(module)
    return module


def test_the_version_is_written_once_and_installed_as_written() -> None:
    assert "version" not in PROJECT and "version" in PROJECT["dynamic"]
    assert PYPROJECT["tool"]["hatch"]["version"]["path"] == "mcp_tasks/__init__.py"
    assert mcp_tasks.__version__ == importlib.metadata.version("mcp-tasks")


def test_the_metadata_a_package_index_shows() -> None:
    classifiers = set(PROJECT["classifiers"])
    for version in ("3.11", "3.12", "3.13"):
        assert f"Programming Language :: Python :: {version}" in classifiers
    assert {"Typing :: Typed", "Framework :: Trio", "Framework :: AnyIO"} <= classifiers
    # PEP 639: the SPDX expression says the license; PyPI refuses it with a License classifier.
    assert PROJECT["license"] == "MIT" and PROJECT["license-files"] == ["LICENSE"]
    assert not [c for c in classifiers if c.startswith("License ::")]
    assert "Copyright (c) 2026 the mcp-tasks authors" in (ROOT / "LICENSE").read_text()
    assert PROJECT["keywords"]


PLACEHOLDER = re.compile(r"github\.com/mcp-tasks/mcp-tasks|mcp-tasks\.github\.io")
"""The address the project once had in its metadata and docs, a placeholder: it has none."""


def test_no_address_points_nowhere_and_one_place_says_where_it_goes() -> None:
    """Until the project has a public address, its metadata links nowhere (no
    [project.urls]), and one note in pyproject.toml says where the address goes."""
    assert "urls" not in PROJECT
    text = (ROOT / "pyproject.toml").read_text()
    assert text.count("# Where the project lives:") == 1
    assert "[project.urls]" in text.split("# Where the project lives:")[1].split("\n\n")[0]
    tracked = subprocess.run(
        ["git", "ls-files", "-z"], cwd=ROOT, capture_output=True, check=True
    ).stdout.decode()
    names = [name for name in tracked.split("\0") if name]
    assert "pyproject.toml" in names and "README.md" in names  # not vacuous: git listed them
    found = []
    for name in names:
        if name == "docs/status.md":
            continue  # the project's notes tell the history, the placeholder included
        path = ROOT / name
        try:
            text = path.read_text()
        except (UnicodeDecodeError, FileNotFoundError, IsADirectoryError):
            continue
        found += [f"{name}: {match}" for match in PLACEHOLDER.findall(text)]
    assert found == []


def test_the_docs_extra_is_part_of_dev() -> None:
    extras = PROJECT["optional-dependencies"]
    assert any(pin.startswith("mkdocs==") for pin in extras["docs"])
    assert "docs" in extras["dev"][0].split("[")[1]


def test_mypy_sees_the_installed_package_from_a_project_of_its_own(tmp_path: Path) -> None:
    """Outside the checkout, as a user's project: the editable install (a .pth file, which
    mypy follows) or the wheel gives mypy the package and its types."""
    assert not tmp_path.resolve().is_relative_to(ROOT)
    (tmp_path / "app.py").write_text(
        "from mcp_tasks import Server, __version__\n"
        "from mcp_tasks.core import TaskStatus\n\n"
        'server = Server("app", __version__)\n'
        "status: TaskStatus = TaskStatus.WORKING\n"
        "wrong: int = server\n"
    )
    done = subprocess.run(
        [sys.executable, "-m", "mypy", "--strict", "--no-incremental", "app.py"],
        cwd=tmp_path,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    lines = [line for line in done.stdout.splitlines() if ": error:" in line]
    # One error, the planted one: mypy knows what a Server is, so it sees the package.
    assert len(lines) == 1 and 'type "Server"' in lines[0], done.stdout + done.stderr
    assert "Cannot find implementation" not in done.stdout


def make_archives(tmp_path: Path, wheel_names: list[str], sdist_names: list[str]) -> list[Path]:
    wheel, sdist = tmp_path / "m-1-py3-none-any.whl", tmp_path / "m-1.tar.gz"
    with zipfile.ZipFile(wheel, "w") as archive:
        for name in wheel_names:
            archive.writestr(name, "")
    (tmp_path / "empty").write_text("")
    with tarfile.open(sdist, "w:gz") as archive:
        for name in sdist_names:
            archive.add(tmp_path / "empty", arcname=f"m-1/{name}")
    return [wheel, sdist]


GOOD_WHEEL = [
    "mcp_tasks/__init__.py",
    "mcp_tasks/py.typed",
    "mcp_tasks/core/_server.py",
    "m-1.dist-info/licenses/LICENSE",
]
GOOD_SDIST = ["LICENSE", "README.md", "pyproject.toml", "mcp_tasks/py.typed"]


@pytest.mark.parametrize(
    ("wheel_names", "sdist_names", "words"),
    [
        ([*GOOD_WHEEL, "tests/test_x.py"], GOOD_SDIST, "not the package"),
        ([*GOOD_WHEEL, "benchmarks/core.py"], GOOD_SDIST, "not the package"),
        (GOOD_WHEEL[:1] + GOOD_WHEEL[2:], GOOD_SDIST, "py.typed"),
        (GOOD_WHEEL[:3], GOOD_SDIST, "LICENSE"),
        (GOOD_WHEEL, GOOD_SDIST[1:], "the sdist lacks LICENSE"),
    ],
)
def test_the_wheel_check_refuses_archives_that_are_wrong(
    tmp_path: Path,
    capsys: pytest.CaptureFixture[str],
    wheel_names: list[str],
    sdist_names: list[str],
    words: str,
) -> None:
    check = wheel_check()
    check.check_contents(*make_archives(tmp_path, GOOD_WHEEL, GOOD_SDIST))  # passes
    with pytest.raises(SystemExit):
        check.check_contents(*make_archives(tmp_path, wheel_names, sdist_names))
    assert words in capsys.readouterr().err


@pytest.mark.slow
def test_the_wheel_builds_installs_elsewhere_and_serves() -> None:
    """.ci/wheel-check end to end: build, twine check, contents, a fresh venv with the wheel,
    import and `mcp-tasks serve` from a directory outside the checkout (about 25 s)."""
    done = subprocess.run(
        [sys.executable, str(ROOT / ".ci" / "wheel-check")],
        capture_output=True,
        text=True,
        timeout=600,
        check=False,
    )
    assert done.returncode == 0, done.stdout + done.stderr
    assert "wheel-check: all good" in done.stdout
