"""CLI adapters.  Each is pure: it builds a command and translates lines.

``get_backend(name)`` returns a registered backend; ``register_backend`` adds
one (a class or a zero-argument factory).  Third-party backends register
through the ``coding_genesis.backends`` entry-point group (see
:mod:`coding_genesis._util.plugins`): they are loaded only when a name is not built
in or registered, or when every backend is listed.
"""

from __future__ import annotations

from collections.abc import Callable

from coding_genesis._util.plugins import load_plugin, plugin_names
from coding_genesis.backend import Backend
from coding_genesis.errors import UnknownBackendError

from .claude import ClaudeBackend
from .codex import CodexBackend
from .failer import FailerBackend
from .gemini import GeminiBackend
from .opencode import OpencodeBackend
from .qwen import QwenBackend

__all__ = [
    "ClaudeBackend",
    "CodexBackend",
    "FailerBackend",
    "GeminiBackend",
    "OpencodeBackend",
    "QwenBackend",
    "available_backends",
    "get_backend",
    "register_backend",
]

_REGISTRY: dict[str, Callable[[], Backend]] = {
    "claude": ClaudeBackend,
    "codex": CodexBackend,
    "failer": FailerBackend,
    "gemini": GeminiBackend,
    "opencode": OpencodeBackend,
    "qwen": QwenBackend,
}


def register_backend(name: str, factory: Callable[[], Backend]) -> None:
    """Make ``CodingGenesisAgent(backend=name)`` use ``factory()``."""
    if not name or not isinstance(name, str):
        raise ValueError("backend name must be a non-empty string")
    _REGISTRY[name] = factory


def available_backends() -> list[str]:
    """Every backend name: built in, registered in code, or installed as a plug-in."""
    return sorted({*_REGISTRY, *plugin_names()})


def get_backend(name: str) -> Backend:
    """A fresh backend.  A broken plug-in is a :class:`BackendPluginError`
    naming it (never a traceback from inside it)."""
    factory = _REGISTRY.get(name) if isinstance(name, str) else None
    if factory is None:
        plugin = load_plugin(name) if isinstance(name, str) and name else None
        if plugin is None:
            raise UnknownBackendError(
                f"unknown backend {name!r}; available: {', '.join(available_backends())}"
            )
        return plugin
    return factory()
