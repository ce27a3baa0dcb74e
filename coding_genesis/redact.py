"""Keep secrets from the environment out of everything we report or store."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

import orjson

from .parser import MAX_DEPTH, TOO_DEEP

__all__ = ["Redactor"]

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE)", re.I)
_MIN_LEN = 8
MASK = "[REDACTED]"


class Redactor:
    """Replaces the values of secret-looking environment variables."""

    __slots__ = ("_json_values", "_longest", "_pattern", "_values")

    def __init__(self, *envs: Mapping[str, str]) -> None:
        values: set[str] = set()
        for env in envs or (os.environ,):
            for name, value in env.items():
                if _SECRET_NAME.search(name) and len(value) >= _MIN_LEN and not value.isspace():
                    values.add(value)
        self._pattern = (
            re.compile("|".join(re.escape(v) for v in sorted(values, key=len, reverse=True)))
            if values
            else None
        )
        # A substring test per secret is far faster than the alternation regex,
        # and almost every string holds no secret at all.
        self._values = tuple(values)
        #: Each secret as it appears inside a JSON string (escaped, UTF-8).
        self._json_values = tuple(orjson.dumps(v)[1:-1] for v in values)
        #: Length in UTF-8 bytes of the longest secret (0: none).
        self._longest = max((len(v.encode("utf-8", "replace")) for v in values), default=0)

    @property
    def active(self) -> bool:
        return self._pattern is not None

    def text(self, value: str) -> str:
        if self._pattern is None or not value:
            return value
        if not any(v in value for v in self._values):
            return value
        return self._pattern.sub(MASK, value)

    def raw_pattern(self) -> tuple[re.Pattern[bytes], int, tuple[bytes, ...]] | None:
        """For redacting raw output (transcripts): the secrets as a bytes
        pattern, the longest one's length, and the secrets themselves (for a
        fast "is any there?" test); None when there is nothing to hide."""
        if self._pattern is None:
            return None
        pattern = re.compile(self._pattern.pattern.encode("utf-8", "replace"))
        return pattern, self._longest, tuple(v.encode("utf-8", "replace") for v in self._values)

    def deep(self, value: Any) -> Any:
        """Redact strings inside dicts, lists and tuples: new containers where a
        secret was found, the value itself when it holds none."""
        if self._pattern is None:
            return value
        if isinstance(value, dict | list):
            # One C-speed serialisation and a substring test per secret instead
            # of a Python walk of every string: almost no event holds a secret.
            try:
                blob = orjson.dumps(value, option=orjson.OPT_NON_STR_KEYS)
            except TypeError:  # a value orjson cannot encode: walk it
                pass
            else:
                if not any(v in blob for v in self._json_values):
                    return value
        return self._walk(value)

    def _walk(self, value: Any, depth: int = 0) -> Any:
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict | list | tuple) and depth >= 2 * MAX_DEPTH:
            return TOO_DEEP  # bounded: never a RecursionError, whatever the nesting
        if isinstance(value, dict):
            return {k: self._walk(v, depth + 1) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self._walk(v, depth + 1) for v in value]
        return value
