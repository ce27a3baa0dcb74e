"""The default of an event field some producers leave out (``UNSET``): the
field reads ``None`` (or an empty list) and ``to_dict`` omits it, as the
producer's dict did."""

from __future__ import annotations

from typing import Any

__all__ = ["UNSET", "Unset"]


class Unset:
    """The type of :data:`UNSET` (one instance, which pickles as itself)."""

    __slots__ = ()

    def __repr__(self) -> str:
        return "UNSET"

    def __reduce__(self) -> str:
        return "UNSET"


#: Typed ``Any`` so it can be the default of a parameter of any type.
UNSET: Any = Unset()
