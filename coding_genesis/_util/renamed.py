"""Old names that still work, each with a DeprecationWarning naming what to use:
keywords renamed for one spelling of durations, and a module's names moved or
retired (its ``__getattr__``)."""

from __future__ import annotations

import warnings
from collections.abc import Callable, Mapping
from typing import Any

__all__ = ["old_names", "renamed", "warn_renamed"]


def warn_renamed(where: str, old: str, new: str, stacklevel: int = 3) -> None:
    warnings.warn(
        f"{where}: {old}= is deprecated: use {new}=", DeprecationWarning, stacklevel=stacklevel
    )


def renamed(given: dict[str, Any], names: Mapping[str, str], where: str) -> dict[str, Any]:
    """Take the old names out of ``given`` (keyword arguments), each with a
    warning: ``{new name: value}``."""
    found: dict[str, Any] = {}
    for old, new in names.items():
        if old in given:
            warn_renamed(where, old, new, stacklevel=4)
            found[new] = given.pop(old)
    return found


def old_names(
    module: str, names: Mapping[str, tuple[str, Callable[[], Any]]]
) -> Callable[[str], Any]:
    """A module's ``__getattr__`` answering each retired name, ``{name: (what
    to say instead, how to get its value)}``, with a DeprecationWarning (the
    value got lazily: a moved name may live in a module above this one)."""

    def __getattr__(name: str) -> Any:
        entry = names.get(name)
        if entry is None:
            raise AttributeError(f"module {module!r} has no attribute {name!r}")
        instead, get = entry
        warnings.warn(f"{module}.{name} is deprecated: {instead}", DeprecationWarning, stacklevel=2)
        return get()

    return __getattr__
