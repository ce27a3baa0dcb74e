"""The primitive checks of every setting and option: each normalizes a value
or raises :class:`~coding_genesis.errors.ConfigError` saying what is wrong.

One check per kind of value (a duration, a count, a directory, a path), so
that an agent's setting and the same option of one call are refused with the
same words.
"""

from __future__ import annotations

import math
import os

from coding_genesis.errors import ConfigError, InvalidCwdError, InvalidTimeoutError

__all__ = ["check_cwd", "count", "path_or_none", "required_seconds", "seconds"]


def seconds(
    name: str, value: object, *, allow_none: bool = False, allow_zero: bool = False
) -> float | None:
    """Validate a duration: a finite real number of seconds."""
    if value is None and allow_none:
        return None
    error = InvalidTimeoutError if name == "timeout" else ConfigError
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise error(f"{name} must be a number of seconds, got {value!r}")
    number = float(value)
    if math.isnan(number) or math.isinf(number) or number < 0 or (number == 0 and not allow_zero):
        bound = ">= 0" if allow_zero else "> 0"
        raise error(f"{name} must be a finite number of seconds {bound}, got {value!r}")
    return number


def required_seconds(name: str, value: object, *, allow_zero: bool = False) -> float:
    number = seconds(name, value, allow_zero=allow_zero)
    assert number is not None
    return number


def count(name: str, value: object, minimum: int) -> int | None:
    """An integer >= ``minimum``, or None."""
    if value is None:
        return None
    if isinstance(value, bool) or not isinstance(value, int) or value < minimum:
        raise ConfigError(f"{name} must be an integer >= {minimum} or None, got {value!r}")
    return value


def check_cwd(cwd: str | os.PathLike[str]) -> str:
    """An absolute path to an existing, accessible directory."""
    path = os.path.abspath(os.fspath(cwd))
    if not os.path.exists(path):
        raise InvalidCwdError(f"cwd {path!r} does not exist")
    if not os.path.isdir(path):
        raise InvalidCwdError(f"cwd {path!r} is not a directory")
    if not os.access(path, os.X_OK):
        raise InvalidCwdError(f"cwd {path!r} is not accessible")
    return path


def path_or_none(name: str, value: object) -> str | None:
    """An absolute path (``~`` expanded), or None for None and False."""
    if value is None or value is False:
        return None
    if isinstance(value, str | os.PathLike):
        text = os.fspath(value)
        if not text or "\0" in text:
            raise ConfigError(f"{name} must be a non-empty path without NUL bytes")
        return os.path.abspath(os.path.expanduser(text))
    raise ConfigError(f"{name} must be a path or None, got {value!r}")
