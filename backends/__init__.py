"""CLI adapters.  Each is pure: it builds a command and translates lines.

``get_backend(name)`` returns a registered backend; ``register_backend`` adds
one (a class or a zero-argument factory).  Third-party backends register
through the ``coding_genesis.backends`` entry-point group (see
:mod:`coding_genesis.backend`): they are loaded only when a name is not built
in or registered, or when every backend is listed.  A backend object that is
not a :class:`~coding_genesis.backend.Backend` (a plug-in written against
0.1.0's Protocol) is wrapped once, as it is registered or loaded
(:func:`~coding_genesis.backend.as_backend`).
"""

from __future__ import annotations

from collections.abc import Callable

from coding_genesis.backend import Backend, Translator, as_backend, load_plugin, plugin_names
from coding_genesis.errors import ConfigError, UnknownBackendError

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
    "registered_backends",
    "translator_for",
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
    if isinstance(factory, type) and issubclass(factory, Backend):
        _REGISTRY[name] = factory
        return

    def adapted() -> Backend:
        try:
            return as_backend(factory())
        except ConfigError as exc:
            raise ConfigError(f"backend {name!r} ({factory!r}) is not a backend: {exc}") from None

    _REGISTRY[name] = adapted


def registered_backends() -> list[str]:
    """The names built in or registered in code (not the installed plug-ins)."""
    return sorted(_REGISTRY)


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


def translator_for(name: str) -> Translator:
    """A fresh translator of backend ``name``: what a reader of recorded runs is
    handed to decode their stdout (``genesis show``, ``genesis replay``)."""
    return get_backend(name).translator()
