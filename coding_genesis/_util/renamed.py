"""Keywords renamed for one spelling of durations: the old name still works,
with a DeprecationWarning naming the new one."""

from __future__ import annotations

import warnings
from collections.abc import Mapping
from typing import Any

__all__ = ["renamed", "warn_renamed"]


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
