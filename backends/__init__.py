"""CLI adapters.  Each is pure: it builds a command and translates lines.

``get_backend(name)`` returns a registered backend; ``register_backend`` adds
one (a class or a zero-argument factory).
"""

from __future__ import annotations

from collections.abc import Callable

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
    return sorted(_REGISTRY)


def get_backend(name: str) -> Backend:
    try:
        factory = _REGISTRY[name]
    except (KeyError, TypeError):
        raise UnknownBackendError(
            f"unknown backend {name!r}; available: {', '.join(available_backends())}"
        ) from None
    return factory()
