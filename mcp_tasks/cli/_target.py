"""Loading the `Server` a `mcp-tasks serve` TARGET names: a file or a module, and an
attribute in it (default `server`). What is wrong is said as a `click.BadParameter`."""

from __future__ import annotations

import importlib
import importlib.util
import os
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import click

from ..runtime import Server


def load_server(target: str) -> Server:
    """The `Server` TARGET names; `click.BadParameter` saying what is wrong if there is none."""
    reference, attribute = _split_target(target)
    if reference.endswith(".py") or "/" in reference or os.sep in reference:
        module = _load_file(Path(reference))
    else:
        module = _import_module(reference)
    value: Any = module
    for part in attribute.split("."):
        if not hasattr(value, part):
            raise _bad_target(f"{reference} has no attribute {attribute!r}{_hint(module)}")
        value = getattr(value, part)
    if not isinstance(value, Server):
        kind = f"class {value.__name__}" if isinstance(value, type) else type(value).__name__
        raise _bad_target(f"{reference}:{attribute} is a {kind}, not a mcp_tasks.Server")
    return value


def _split_target(target: str) -> tuple[str, str]:
    reference, colon, attribute = target.rpartition(":")
    if colon and reference and all(part.isidentifier() for part in attribute.split(".")):
        return reference, attribute
    return target, "server"  # no attribute (or a Windows drive letter: C:\...)


def _load_file(path: Path) -> ModuleType:
    if not path.is_file():
        raise _bad_target(f"no such file: {path}")
    name = path.stem
    if not name.isidentifier() or name in sys.modules:
        name = "_mcp_tasks_target"
    spec = importlib.util.spec_from_file_location(name, path)
    if spec is None or spec.loader is None:
        raise _bad_target(f"cannot load {path} as Python")
    module = importlib.util.module_from_spec(spec)
    _put_on_path(str(path.resolve().parent))  # as `python path` does: siblings import
    sys.modules[name] = module  # msgspec resolves the module's annotations through it
    try:
        spec.loader.exec_module(module)
    except BaseException:
        del sys.modules[name]
        raise
    return module


def _import_module(name: str) -> ModuleType:
    if not all(part.isidentifier() for part in name.split(".")):
        raise _bad_target(f"{name!r} is neither a file path nor a module name")
    _put_on_path(os.getcwd())  # as `python -m` does
    try:
        return importlib.import_module(name)
    except ModuleNotFoundError as error:
        if error.name is None or not (name == error.name or name.startswith(error.name + ".")):
            raise  # the module exists but imports something missing: show the traceback
        raise _bad_target(f"no module named {name!r} (nor a file: add .py for a path)") from None


def _put_on_path(directory: str) -> None:
    if directory not in sys.path:
        sys.path.insert(0, directory)


def _hint(module: ModuleType) -> str:
    servers = sorted(name for name, value in vars(module).items() if isinstance(value, Server))
    return f"; its servers: {', '.join(servers)}" if servers else "; it defines no Server"


def _bad_target(message: str) -> click.BadParameter:
    return click.BadParameter(message, param_hint="TARGET")
