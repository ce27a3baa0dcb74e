"""The one option vocabulary across backends, checked once.

``model``, ``permissions``, ``max_turns``, ``resume``, ``cwd`` and
``cli_max_retries`` mean the same for every backend; each backend maps them to
its CLI's flags, environment or a private settings overlay
(:attr:`~coding_genesis.backend.CommandSpec.overlay`), or reports one it cannot
honour as a warning.  A permission level a backend cannot *enforce* is refused
(:class:`~coding_genesis.errors.ConfigError`): never silently more permissive.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from coding_genesis.errors import ConfigError

if TYPE_CHECKING:
    from coding_genesis.backend import Backend

__all__ = [
    "DEFAULT_CLI_MAX_RETRIES",
    "PERMISSION_LEVELS",
    "check_cli_max_retries",
    "check_max_turns",
    "check_permissions",
    "permission_levels",
    "require_permissions",
]

#: From the most restrictive to the least.
PERMISSION_LEVELS = ("read-only", "edit", "full")

#: The cap on a CLI's own API retries when the agent has a retry policy and
#: ``cli_max_retries`` is not given: the CLI absorbs a short blip, and our
#: policy (which knows the category, the backoff and the deadline) decides
#: about anything longer.  Without a retry policy the CLI's own default stays.
DEFAULT_CLI_MAX_RETRIES = 2


def check_permissions(value: object) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in PERMISSION_LEVELS:
        raise ConfigError(
            f"permissions must be one of {', '.join(map(repr, PERMISSION_LEVELS))} or None, "
            f"got {value!r}"
        )
    return value


def _count(name: str, value: object, minimum: int) -> int | None:
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum} or None, got {value!r}")
    return value


def check_max_turns(value: object) -> int | None:
    return _count("max_turns", value, 1)


def check_cli_max_retries(value: object) -> int | None:
    return _count("cli_max_retries", value, 0)


def permission_levels(backend: Backend) -> frozenset[str]:
    """The levels ``backend`` can enforce (none unless it declares them)."""
    return backend.permission_levels


def require_permissions(backend: Backend, permissions: str | None) -> None:
    """Refuse a level ``backend`` cannot enforce."""
    if permissions is None:
        return
    levels = permission_levels(backend)
    if permissions not in levels:
        can = ", ".join(level for level in PERMISSION_LEVELS if level in levels) or "none"
        raise ConfigError(
            f"backend {backend.name!r} cannot enforce permissions={permissions!r} "
            f"(it can enforce: {can}); refusing rather than running with more permissions"
        )
