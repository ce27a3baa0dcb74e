"""The public home of a name defined in a private module.

``from coding_genesis import SupervisorConfig`` is the public way to reach a
class whose code lives in ``coding_genesis._supervision.values``.  Its
``__module__`` is rewritten to ``coding_genesis`` (as anyio and httpx do), so
that ``help()``, ``repr`` of the class, tracebacks and pickle name the public
home: pickle finds it again through the package's lazy ``__getattr__``, and the
private module may move without breaking what was pickled (Ray ships results
and options by pickle).
"""

from __future__ import annotations

from typing import TypeVar

__all__ = ["public"]

T = TypeVar("T")


def public(obj: T, home: str = "coding_genesis") -> T:
    """``obj`` (a class or a function), its ``__module__`` set to ``home``."""
    obj.__module__ = home
    return obj
