"""Members of a class that hand each use on to an object it holds (a face over a part it
composes), made from the part's own members, so their signatures and docstrings are
written once, where the work is done.

`handed_on("registry", Registry.tool)` is a method that calls `self.registry.tool` with
its arguments; `AttributeOf[bool]("coordination")`, named `shared`, reads
`self.coordination.shared` (with `writable=True` it sets it too). Each goes by name, so a
part that overrides the method, or one that only follows a Protocol, is reached all the
same.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any, Concatenate, Generic, ParamSpec, TypeVar, cast, overload

_P = ParamSpec("_P")
_R = TypeVar("_R")
_T = TypeVar("_T")


def handed_on(
    holder: str, method: Callable[Concatenate[Any, _P], _R]
) -> Callable[Concatenate[Any, _P], _R]:
    """`method` as a method of a class whose attribute `holder` has it: the same
    signature and docstring, for type checkers and `help()` alike."""
    name = method.__name__

    @functools.wraps(method)
    def hand_on(self: Any, /, *args: _P.args, **kwargs: _P.kwargs) -> _R:
        return cast(_R, getattr(getattr(self, holder), name)(*args, **kwargs))

    return hand_on


class AttributeOf(Generic[_T]):
    """An attribute that is the attribute of the same name of `self.<holder>`: read-only
    as a property without a setter is, or `writable`. `doc` is its docstring."""

    def __init__(self, holder: str, *, doc: str | None = None, writable: bool = False) -> None:
        self._holder = holder
        self._name = ""
        self._writable = writable
        self.__doc__ = doc

    def __set_name__(self, owner: type, name: str) -> None:
        self._name = name

    @overload
    def __get__(self, instance: None, owner: type) -> AttributeOf[_T]: ...
    @overload
    def __get__(self, instance: object, owner: type | None = None) -> _T: ...
    def __get__(self, instance: object, owner: type | None = None) -> AttributeOf[_T] | _T:
        if instance is None:
            return self
        return cast(_T, getattr(getattr(instance, self._holder), self._name))

    def __set__(self, instance: object, value: _T) -> None:
        if not self._writable:
            raise AttributeError(f"{self._name!r} is read-only")
        setattr(getattr(instance, self._holder), self._name, value)
