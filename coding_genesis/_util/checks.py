"""The primitive checks of every setting and option: each normalizes a value
or raises :class:`~coding_genesis.errors.ConfigError` saying what is wrong.

One check per kind of value (a duration, a count, a directory, a path), so
that an agent's setting and the same option of one call are refused with the
same words.
"""

from __future__ import annotations

import hashlib
import math
import os
import signal as _signal
from collections.abc import Mapping, Sequence
from typing import Any

from coding_genesis.errors import ConfigError, InvalidCwdError, InvalidTimeoutError

__all__ = [
    "arguments",
    "check_cwd",
    "check_prompt",
    "count",
    "directories",
    "environment",
    "flag",
    "mapping",
    "names",
    "natural",
    "node",
    "path_or_none",
    "positive",
    "program",
    "request_key",
    "required_seconds",
    "seconds",
    "signals",
    "text",
    "word",
]


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


# -- the checks a declared setting names: (name, value) -> the value kept ---------------


def word(name: str, value: object) -> str | None:
    """A string without NUL bytes (a model name, say); ``""`` is no value."""
    if value is None or value == "":
        return None
    if not isinstance(value, str) or "\0" in value:
        raise ConfigError(f"{name} must be a string, got {value!r}")
    return value


def text(name: str, value: object) -> str | None:
    """Text a CLI is given whole (a system prompt): a string without NUL bytes,
    valid Unicode; None: not set."""
    if value is None:
        return None
    if not isinstance(value, str) or "\0" in value:
        raise ConfigError(f"{name} must be a string without NUL bytes, got {type(value).__name__}")
    try:
        value.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError(f"{name} is not valid Unicode (lone surrogate)") from None
    return value


def flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be True or False, got {value!r}")
    return value


def positive(name: str, value: object) -> int:
    """An integer >= 1."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ConfigError(f"{name} must be a positive integer, got {value!r}")
    return value


def mapping(name: str, value: object) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise ConfigError(f"{name} must be a mapping, got {value!r}")
    return dict(value)


def arguments(name: str, value: object) -> tuple[str, ...]:
    """A list of arguments (no shell): strings without NUL bytes."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(f"{name} must be a list of strings without NUL bytes")
    if any(not isinstance(a, str) or "\0" in a for a in value):
        raise ConfigError(f"{name} must be a list of strings without NUL bytes")
    return tuple(value)


def names(name: str, value: object) -> tuple[str, ...]:
    """A list of non-empty names (variables, say)."""
    if isinstance(value, str) or not isinstance(value, Sequence):
        raise ConfigError(f"{name} must be a list of variable names")
    if any(not isinstance(a, str) or not a for a in value):
        raise ConfigError(f"{name} must be a list of variable names")
    return tuple(value)


def environment(name: str, value: object) -> dict[str, str]:
    """Variable names mapped to string values (no ``=`` in a name, no NUL)."""
    if not isinstance(value, Mapping) or any(
        not isinstance(k, str) or not isinstance(v, str) or not k or "=" in k or "\0" in k + v
        for k, v in value.items()
    ):
        raise ConfigError(f"{name} must map variable names to string values")
    return dict(value)


def signals(name: str, value: object) -> tuple[int, ...]:
    """Signal numbers, each one this system knows."""
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigError(f"{name} must be a list of signal numbers, got {value!r}")
    found = tuple(int(s) for s in value)
    for signum in found:
        try:
            _signal.Signals(signum)
        except ValueError:
            raise ConfigError(f"unknown signal {signum!r} in {name}") from None
    return found


def program(name: str, value: object) -> tuple[str, ...] | None:
    """A program: a path, or a list of its path and leading arguments."""
    if value is None:
        return None
    if isinstance(value, str | os.PathLike):
        found: tuple[str, ...] = (os.fspath(value),)
    else:
        if isinstance(value, bytes) or not isinstance(value, Sequence):
            raise ConfigError(f"{name} must be a path or a list of strings, got {value!r}")
        found = tuple(os.fspath(p) for p in value)
        if not found:
            raise ConfigError(f"{name} must not be empty")
    if any(not part or "\0" in part for part in found):
        raise ConfigError(f"{name} parts must be non-empty strings without NUL bytes")
    return found


def node(name: str, value: object) -> str | None:
    """A program name (looked up on PATH), or a path (made absolute)."""
    if value is None:
        return None
    if not isinstance(value, str) or not value or "\0" in value:
        raise ConfigError(f"{name} must be a non-empty path, got {value!r}")
    return os.path.abspath(os.path.expanduser(value)) if os.sep in value else value


def natural(name: str, value: object) -> int:
    """An int >= 0."""
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
    return value


def directories(name: str, value: object) -> tuple[str, ...]:
    """Existing directories, made absolute (one path or a sequence of them; None: none)."""
    if value is None:
        return ()
    items = [value] if isinstance(value, str | os.PathLike) else value
    if not isinstance(items, Sequence):
        raise ConfigError(f"{name} must be a directory or a sequence of them, got {value!r}")
    kept: list[str] = []
    for item in items:
        if not isinstance(item, str | os.PathLike) or not item or "\0" in os.fspath(item):
            raise ConfigError(f"{name} must hold paths without NUL bytes, got {item!r}")
        path = os.path.abspath(os.path.expanduser(os.fspath(item)))
        if not os.path.isdir(path):
            raise ConfigError(f"{name}: {path!r} is not a directory")
        kept.append(path)
    return tuple(kept)


# -- a request's own -----------------------------------------------------------------------


def check_prompt(prompt: object) -> str:
    """A prompt a CLI can be given: a non-empty string, no NUL byte, valid Unicode."""
    if not isinstance(prompt, str):
        raise ConfigError(f"prompt must be a string, got {type(prompt).__name__}")
    if not prompt.strip():
        raise ConfigError("prompt is empty: say what the agent should do")
    if "\0" in prompt:
        raise ConfigError("prompt contains a NUL byte, which no CLI accepts")
    try:
        prompt.encode("utf-8")
    except UnicodeEncodeError:
        raise ConfigError("prompt is not valid Unicode (lone surrogate)") from None
    return prompt


def request_key(backend: str, cwd: str, prompt: str) -> str:
    """Stable across the attempts of one logical request (the failer keeps its
    /fail-then-succeed counter under it)."""
    return hashlib.sha256(
        f"{backend}\0{cwd}\0{prompt}".encode("utf-8", "surrogatepass")
    ).hexdigest()[:32]
