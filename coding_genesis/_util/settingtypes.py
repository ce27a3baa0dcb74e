"""The classes of configuration settings whose types live in higher layers.

:class:`~coding_genesis.config.AgentConfig` checks ``circuit_breaker=`` and
``budget=`` against the class their module registers when it is imported.  An
instance exists only once its class's module has run, so the check is exact
without the configuration importing upward (the breaker, the budget sit above it).
"""

from __future__ import annotations

__all__ = ["is_setting_type", "register_setting_type"]

_SETTING_TYPES: dict[str, type] = {}


def register_setting_type(setting: str, cls: type) -> None:
    """``AgentConfig(setting=...)`` must be an instance of ``cls``."""
    _SETTING_TYPES[setting] = cls


def is_setting_type(setting: str, value: object) -> bool:
    """True if ``value`` is an instance of the class registered for ``setting``."""
    cls = _SETTING_TYPES.get(setting)
    return cls is not None and isinstance(value, cls)
