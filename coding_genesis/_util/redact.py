"""Keep secrets from the environment out of everything we report or store.

Which variables hold secrets is decided by name (:func:`is_secret_name`,
tested in both directions); any variable whose value is a URL with a password
(``scheme://user:PASS@host``) contributes that password too.  A secret is
found verbatim and in the forms JSON escapes it to (``\\"``, ``\\\\``,
``\\n``, ``\\uXXXX``).  In raw output (a transcript's ``stdout.jsonl``) a
secret may be written with any legal JSON escape (``\\/``, Go's ``\\u0026``,
every character ``\\u``-escaped, mixed): there, bytes that hold a ``\\u`` or
``\\/`` escape are searched with a pattern of every JSON encoding of each
secret, and its raw bytes masked (:meth:`Redactor.escaped_spans`).  What is not caught: a
secret shorter than 8 characters, or re-encoded (base64, URL-encoding, hex,
split by the CLI itself, ...).
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Mapping
from typing import Any

import orjson

from coding_genesis._util.parser import MAX_DEPTH, TOO_DEEP

__all__ = ["MASK", "Pieces", "Redactor", "is_secret_name", "secret_values"]

#: Names holding a secret: any of these words ...
_SECRET_WORD = re.compile(
    r"KEY|TOKEN|SECRET|PASSWORD|PASSWD|PASSPHRASE|CREDENTIAL|COOKIE|AUTHORIZATION|DSN|WEBHOOK",
    re.I,
)
#: ... or AUTH as a word of its own (not GIT_AUTHOR_NAME), a *_SESSION, *_PASS,
#: *_PWD (MYSQL_PWD; the shell's PWD is a directory), or a connection string.
_SECRET_PART = re.compile(
    r"(^|_)AUTH(_|$)|_SESSION$|^SESSION$|_PASS$|_PWD$|^(DATABASE|REDIS|MONGO(DB)?|AMQP|BROKER)_URL$",
    re.I,
)
#: Names that look like secrets and are not (a socket path, a locale...).
_NOT_SECRET = frozenset({"SSH_AUTH_SOCK", "GPG_AGENT_INFO", "XAUTHORITY", "KEYMAP"})
#: ``scheme://user:PASSWORD@host``: the password part.
_URL_PASSWORD = re.compile(r"[A-Za-z][A-Za-z0-9+.-]*://[^/:@\s]*:([^/@\s]+)@")
_MIN_LEN = 8
#: A password inside a URL is recognizable by where it sits: shorter is fine.
_MIN_URL_LEN = 4
MASK = "[REDACTED]"
_UPPER_HEX = re.compile(r"\\u[0-9a-f]{4}")
#: How JSON may write a character inside a string besides ``\\uXXXX``.
_SHORT = {
    '"': rb'\\"',
    "\\": rb"\\\\",
    "/": rb"\\/",
    "\b": rb"\\b",
    "\f": rb"\\f",
    "\n": rb"\\n",
    "\r": rb"\\r",
    "\t": rb"\\t",
}


def _hex(code: int) -> bytes:
    """``\\uXXXX`` for a UTF-16 code unit, its hex digits in either case."""
    return rb"\\u" + b"".join(
        b"[" + d.encode() + d.upper().encode() + b"]" if d.isalpha() else d.encode()
        for d in f"{code:04x}"
    )


def _escaped_form(secret: str) -> bytes:
    """A regex of every way a JSON string may write ``secret``: each of its
    characters raw (UTF-8), as ``\\uXXXX`` (a surrogate pair beyond the BMP)
    or as its short escape."""
    parts = []
    for char in secret:
        code = ord(char)
        if code < 0x10000:
            escaped = _hex(code)
        else:
            code -= 0x10000
            escaped = _hex(0xD800 + (code >> 10)) + _hex(0xDC00 + (code & 0x3FF))
        alternatives = [re.escape(char.encode("utf-8", "replace")), escaped]
        if char in _SHORT:
            alternatives.append(_SHORT[char])
        parts.append(b"(?:" + b"|".join(alternatives) + b")")
    return b"".join(parts)


def is_secret_name(name: str) -> bool:
    """Whether an environment variable of this name holds a secret."""
    if name.upper() in _NOT_SECRET:
        return False
    return bool(_SECRET_WORD.search(name) or _SECRET_PART.search(name))


def secret_values(env: Mapping[str, str]) -> set[str]:
    """The secret values of an environment: those of secret names, and the
    password of every URL with one."""
    values: set[str] = set()
    for name, value in env.items():
        if not value or value.isspace():
            continue
        if len(value) >= _MIN_LEN and is_secret_name(name):
            values.add(value)
        if "://" in value:
            for match in _URL_PASSWORD.finditer(value):
                if len(match.group(1)) >= _MIN_URL_LEN:
                    values.add(match.group(1))
    return values


#: Redactors of the environment (see :meth:`Redactor.of_environment`), by
#: the environment's bytes and the extra variables.
_SHARED: dict[tuple[tuple[Any, ...], tuple[Any, ...]], Redactor] = {}
_SHARED_MAX = 8


class Redactor:
    """Replaces the values of secret-looking environment variables."""

    __slots__ = (
        "_escaped_pattern",
        "_json_values",
        "_longest",
        "_pattern",
        "_raw_forms",
        "_values",
    )

    def __init__(self, *envs: Mapping[str, str]) -> None:
        values: set[str] = set()
        for env in envs or (os.environ,):
            values |= secret_values(env)
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
        #: Every byte form a secret takes in raw stdout: verbatim, and as JSON
        #: escapes it (orjson's, and ``\\uXXXX`` for all non-ASCII, either case).
        forms: set[bytes] = set()
        for v in values:
            forms.add(v.encode("utf-8", "replace"))
            forms.add(orjson.dumps(v)[1:-1])
            ascii_form = json.dumps(v)[1:-1]
            forms.add(ascii_form.encode("ascii"))
            upper = _UPPER_HEX.sub(lambda m: "\\u" + m.group(0)[2:].upper(), ascii_form)
            forms.add(upper.encode("ascii"))
        self._raw_forms = tuple(sorted(forms, key=len, reverse=True))
        #: Length in bytes of the longest form of a secret (0: none).
        self._longest = max((len(f) for f in self._raw_forms), default=0)
        #: Every JSON string encoding of each secret (see :meth:`escaped_spans`).
        self._escaped_pattern = (
            re.compile(
                b"|".join(_escaped_form(v) for v in sorted(values, key=len, reverse=True)),
                re.S,
            )
            if values
            else None
        )

    @classmethod
    def of_environment(cls, extra: Mapping[str, str] | None = None) -> Redactor:
        """``Redactor(os.environ, extra)``, shared by every caller that asks
        while the environment and ``extra`` are unchanged (a Redactor never
        changes once built): agents created by the hundred pay one scan of the
        environment, not one each."""
        data = getattr(os.environ, "_data", None)  # CPython's bytes mapping (POSIX)
        if not isinstance(data, dict):
            return cls(os.environ, extra or {})
        key = (tuple(data.items()), tuple(extra.items()) if extra else ())
        found = _SHARED.get(key)
        if found is None:
            found = cls(os.environ, extra or {})
            if len(_SHARED) >= _SHARED_MAX:
                _SHARED.clear()
            _SHARED[key] = found
        return found

    @property
    def active(self) -> bool:
        return self._pattern is not None

    def text(self, value: str) -> str:
        if self._pattern is None or not value:
            return value
        if not any(v in value for v in self._values):
            return value
        return self._pattern.sub(MASK, value)

    def cut_start(self, value: str, shortest: int = 4) -> str:
        """``value``, a text whose start was cut off, with a leading piece of
        a secret (its last ``shortest`` or more characters) masked too."""
        if self._pattern is None or not value:
            return value
        for secret in sorted(self._values, key=len, reverse=True):
            for size in range(len(secret) - 1, shortest - 1, -1):
                if value.startswith(secret[-size:]):
                    return MASK + value[size:]
        return value

    def secret_start(self, value: str) -> int:
        """The length of the longest end of ``value`` that begins a secret
        (0: none does): what a text arriving in pieces holds back, since the
        next piece may complete it (:class:`Pieces`)."""
        if self._pattern is None or not value:
            return 0
        longest = 0
        for secret in self._values:
            for size in range(min(len(secret) - 1, len(value)), longest, -1):
                if value.endswith(secret[:size]):
                    longest = size
                    break
        return longest

    def raw_pattern(self) -> tuple[re.Pattern[bytes], int, tuple[bytes, ...]] | None:
        """For redacting raw output (transcripts): the secrets as a bytes
        pattern, the longest one's length, and the secrets themselves (for a
        fast "is any there?" test); None when there is nothing to hide."""
        if self._pattern is None:
            return None
        pattern = re.compile(b"|".join(re.escape(f) for f in self._raw_forms))
        return pattern, self._longest, self._raw_forms

    def escaped_spans(self, data: bytes) -> list[tuple[int, int]]:
        """The byte spans of ``data`` that hold a secret written as a JSON
        string may write it: each character raw or escaped in any legal way
        (``\\/``, ``\\u0026`` in either case, every character ``\\u``-escaped,
        a surrogate pair, mixed).  One regex pass at C speed, from the start of
        the first character to the end of the last, so a mask covers whole
        escapes and keeps the rest of the line byte for byte.  (The
        alternatives, decoding then mapping positions back, or re-serializing
        the line, cost a Python pass per escape, or change bytes that hold
        no secret.)  Callers ask only for bytes that hold ``\\u`` or ``\\/``."""
        pattern = self._escaped_pattern
        if pattern is None:
            return []
        return [match.span() for match in pattern.finditer(data)]

    def deep(self, value: Any) -> Any:
        """Redact strings inside dicts, lists and tuples: new containers where a
        secret was found, the value itself when it holds none."""
        if self._pattern is None:
            return value
        if isinstance(value, dict | list):
            # One C-speed serialization and a substring test per secret instead
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
            return {
                self.text(k) if isinstance(k, str) else k: self._walk(v, depth + 1)
                for k, v in value.items()
            }
        if isinstance(value, list | tuple):
            return [self._walk(v, depth + 1) for v in value]
        return value


class Pieces:
    """Redacts texts that arrive in pieces (a message's deltas), so that a
    secret split across two pieces is masked too: each piece is joined to what
    was held back of its stream, masked, and only the part that cannot begin a
    secret is given out; the held end comes out with the next piece, or by
    :meth:`release` (the stream's whole message came)."""

    __slots__ = ("_held", "_redactor")

    def __init__(self, redactor: Redactor) -> None:
        self._redactor = redactor
        #: Per stream (any hashable key): its masked text not given out yet.
        self._held: dict[Any, str] = {}

    def piece(self, key: Any, text: str) -> str:
        """What may be given out of ``text``, the next piece of stream ``key``."""
        redactor = self._redactor
        masked = redactor.text(self._held.pop(key, "") + text)
        keep = redactor.secret_start(masked)
        if not keep:
            return masked
        self._held[key] = masked[-keep:]
        return masked[:-keep]

    def release(self) -> list[tuple[Any, str]]:
        """Every stream's held end (no piece follows it that could complete a secret)."""
        held, self._held = list(self._held.items()), {}
        return held

    def __bool__(self) -> bool:
        return bool(self._held)
