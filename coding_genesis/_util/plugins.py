"""Backends installed by other packages: the ``coding_genesis.backends`` entry points.

A plug-in package declares, in its ``pyproject.toml``::

    [project.entry-points."coding_genesis.backends"]
    mycli = "mycli_genesis:MyCliBackend"

The entry point's name is the backend's name; its object is a Backend class,
a zero-argument factory, or a Backend object.  Nothing is imported until that
name is asked for (or ``genesis doctor`` checks every backend), and a plug-in
that fails to load is a :class:`BackendPluginError` that names it and says
why, without hiding the other backends.  Only the standard library is used
here.  (``genesis run --help`` lists the names without importing anything of
ours: ``commands/_backends.py``.)
"""

from __future__ import annotations

from importlib.metadata import EntryPoint, entry_points
from typing import TYPE_CHECKING, Any

from coding_genesis.errors import ConfigError

if TYPE_CHECKING:
    from coding_genesis.backend import Backend

__all__ = [
    "ENTRY_POINT_GROUP",
    "BackendPluginError",
    "load_plugin",
    "plugin_entry_points",
    "plugin_names",
]

ENTRY_POINT_GROUP = "coding_genesis.backends"

#: What a backend object must have for the core to drive it.
_REQUIRED = ("name", "executable", "build_command", "translator")


class BackendPluginError(ConfigError):
    """An installed backend plug-in could not be loaded or is not a backend."""


def plugin_entry_points() -> dict[str, EntryPoint]:
    """The installed plug-ins by backend name (the first one of a name wins)."""
    found: dict[str, EntryPoint] = {}
    for ep in entry_points(group=ENTRY_POINT_GROUP):
        found.setdefault(ep.name, ep)
    return found


def plugin_names() -> list[str]:
    return sorted(plugin_entry_points())


def _origin(ep: EntryPoint) -> str:
    dist = getattr(ep, "dist", None)
    where = f" from {dist.name} {dist.version}" if dist is not None else ""
    return f"entry point {ep.name} = {ep.value}{where}"


def load_plugin(name: str) -> Backend | None:
    """The plug-in backend ``name`` (None: no such plug-in is installed)."""
    ep = plugin_entry_points().get(name)
    if ep is None:
        return None
    try:
        target: Any = ep.load()
    except Exception as exc:
        raise BackendPluginError(
            f"backend plug-in {name!r} ({_origin(ep)}) failed to load: {type(exc).__name__}: {exc}"
        ) from None
    backend = target
    if isinstance(target, type) or (
        callable(target) and not callable(getattr(target, "translator", None))
    ):
        try:
            backend = target()
        except Exception as exc:
            raise BackendPluginError(
                f"backend plug-in {name!r} ({_origin(ep)}) failed to start: "
                f"{type(exc).__name__}: {exc}"
            ) from None
    missing = [attr for attr in _REQUIRED if not hasattr(backend, attr)]
    if missing:
        raise BackendPluginError(
            f"backend plug-in {name!r} ({_origin(ep)}) is not a backend: "
            f"it lacks {', '.join(missing)}"
        )
    loaded: Backend = backend
    return loaded
