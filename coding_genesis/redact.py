"""Keep secrets from the environment out of everything we report or store."""

from __future__ import annotations

import os
import re
from collections.abc import Mapping
from typing import Any

__all__ = ["Redactor"]

_SECRET_NAME = re.compile(r"(KEY|TOKEN|SECRET|PASSWORD|PASSWD|CREDENTIAL|AUTH|COOKIE)", re.I)
_MIN_LEN = 8
MASK = "[REDACTED]"


class Redactor:
    """Replaces the values of secret-looking environment variables."""

    __slots__ = ("_longest", "_pattern", "_values")

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
        """Redact strings inside dicts, lists and tuples (returns new containers)."""
        if self._pattern is None:
            return value
        if isinstance(value, str):
            return self.text(value)
        if isinstance(value, dict):
            return {k: self.deep(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self.deep(v) for v in value]
        return value
