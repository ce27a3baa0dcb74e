"""One root for every error coding-genesis raises.

Runtime failures of a run (timeouts, crashes, missing binaries, API errors) are
never raised: they come back as a structured response.  Exceptions are kept for
mistakes a caller can fix before running anything.

    GenesisError
    ├── ConfigError (also ValueError)      bad constructor / call arguments
    │   ├── InvalidTimeoutError            timeout <= 0, NaN, inf, not a number
    │   ├── InvalidCwdError                cwd missing, not a directory, not accessible
    │   └── UnknownBackendError            backend name not registered
    └── AgentUsageError (also RuntimeError) API misuse, e.g. run_sync inside an event loop
"""

from __future__ import annotations

__all__ = [
    "AgentUsageError",
    "ConfigError",
    "GenesisError",
    "InvalidCwdError",
    "InvalidTimeoutError",
    "RefusedError",
    "UnknownBackendError",
]


class GenesisError(Exception):
    """Root of every coding-genesis exception."""


class ConfigError(GenesisError, ValueError):
    """An argument is wrong; the message says what is allowed."""


class InvalidTimeoutError(ConfigError):
    """A timeout must be a finite number of seconds greater than zero."""


class InvalidCwdError(ConfigError):
    """The working directory must exist and be an accessible directory."""


class UnknownBackendError(ConfigError):
    """No backend is registered under that name."""


class AgentUsageError(GenesisError, RuntimeError):
    """The API was used in a way it cannot support."""


class RefusedError(ConfigError, AgentUsageError):
    """The request cannot run as asked on this backend: a constructor (or
    ``session()``) raises it, a call answers status 64 with the same words."""
