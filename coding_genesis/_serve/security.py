"""The server's door: every request passes here before any route.

In order: the ``Host`` header must name this server (a DNS-rebinding page's
host never does); an ``Origin``, when sent, must be this server's own (no
other site's page, and no CORS: no ``Access-Control-*`` header is ever
sent); the caller must hold the token, as ``Authorization: Bearer`` or as
the cookie the token exchange sets (``POST /auth/session``: HttpOnly,
SameSite=Strict, for browsers, whose ``EventSource`` cannot send a header);
a write authenticated by that cookie must also carry the ``X-Genesis-CSRF``
header and an ``Origin`` (a page of another site can send neither without a
preflight, which is never answered yes); a body is at most ``max_body``
bytes (read here, then handed on).  One token is one identity: whoever
holds it may do everything the server does.

The token is given (``GENESIS_SERVE_TOKEN``, ``--token-file``) or generated
at start into the server's private state directory (0600 in 0700).
"""

from __future__ import annotations

import contextlib
import hmac
import os
import secrets
import stat
from collections.abc import Awaitable, Callable, Iterable, MutableMapping
from dataclasses import dataclass
from http.cookies import SimpleCookie
from pathlib import Path
from typing import Any

import orjson

from coding_genesis._util.files import FILE_FLAGS, private_dir

__all__ = [
    "CHANNELS",
    "CHANNEL_HEADER",
    "COOKIE",
    "CSRF_HEADER",
    "Guard",
    "Identity",
    "TokenError",
    "allowed_hosts",
    "check_token",
    "cookie_value",
    "write_token",
]

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

#: The cookie the token exchange sets.
COOKIE = "genesis_session"
#: The header a cookie-authenticated write must carry (any non-empty value).
CSRF_HEADER = "x-genesis-csrf"
#: The shortest token accepted when one is given.
MIN_TOKEN = 16
_WRITES = frozenset({"POST", "PUT", "PATCH", "DELETE"})
#: Added to every response.
_HEADERS = [
    (b"cache-control", b"no-store"),
    (b"x-content-type-options", b"nosniff"),
    (b"referrer-policy", b"no-referrer"),
    (b"x-frame-options", b"DENY"),
]


class TokenError(ValueError):
    """A given token that cannot be used."""


#: The header a client names its channel in (what an answer of the approval
#: inbox is recorded with): ``genesis approvals`` sends ``cli``, a dashboard
#: ``dashboard``; none is ``api``.  ``mcp`` is the server's own MCP route's.
CHANNEL_HEADER = "x-genesis-channel"
#: The channels a client may name.
CHANNELS = frozenset({"api", "cli", "dashboard"})


@dataclass(frozen=True, slots=True)
class Identity:
    """Who made a request: the token's holder (one token, one identity), and how
    it was shown (``bearer`` or ``cookie``); ``channel`` is the client it says
    it is (``api``, ``cli``, ``dashboard``: the ``X-Genesis-Channel`` header;
    ``mcp`` for the MCP route), recorded with each answer of the inbox."""

    name: str = "owner"
    via: str = "bearer"
    channel: str = "api"


def check_token(token: str) -> str:
    """A given token, stripped; :class:`TokenError` when it is too short or
    holds anything but printable ASCII."""
    token = token.strip()
    if len(token) < MIN_TOKEN:
        raise TokenError(f"the token must be at least {MIN_TOKEN} characters")
    if not all(33 <= ord(c) < 127 for c in token):
        raise TokenError("the token must be printable ASCII without spaces")
    return token


def write_token(directory: Path) -> tuple[str, Path]:
    """A new random token written to ``directory/token`` (0600, the directory
    0700): what a client on this machine reads."""
    private_dir(directory)
    token = secrets.token_urlsafe(32)
    path = directory / "token"
    tmp = directory / f".token-{secrets.token_hex(4)}"
    fd = os.open(tmp, FILE_FLAGS | os.O_EXCL, 0o600)
    try:
        os.write(fd, token.encode() + b"\n")
    finally:
        os.close(fd)
    os.replace(tmp, path)
    return token, path


def read_token_file(path: str) -> str:
    """A token from a file of ours that others cannot read."""
    fd = os.open(path, os.O_RDONLY | os.O_NOFOLLOW | os.O_CLOEXEC | os.O_NONBLOCK)
    try:
        st = os.fstat(fd)
        if not stat.S_ISREG(st.st_mode):
            raise TokenError(f"{path} is not a regular file")
        if st.st_mode & 0o077:
            raise TokenError(f"{path} can be read by others (mode {stat.S_IMODE(st.st_mode):o})")
        data = os.read(fd, 4096)
    finally:
        os.close(fd)
    return check_token(data.decode("ascii", "replace"))


def cookie_value(token: str) -> str:
    """The cookie the token exchange sets: derived from the token (never the
    token itself), so it is valid exactly while the token is."""
    return hmac.new(token.encode(), b"genesis-serve-cookie-v1", "sha256").hexdigest()


def allowed_hosts(host: str, port: int, extra: Iterable[str] = ()) -> frozenset[str]:
    """The ``Host`` headers that name this server: loopback names and the
    bound address, with the port (bare as well on port 80), and ``extra``."""
    bound = f"[{host}]" if ":" in host and not host.startswith("[") else host
    names = {"127.0.0.1", "localhost", "[::1]", bound, *extra}
    out = set()
    for name in names:
        name = name.lower()
        if name in ("0.0.0.0", "[::]"):  # a wildcard is never a Host
            continue
        has_port = "]:" in name if name.startswith("[") else ":" in name
        out.add(name if has_port else f"{name}:{port}")
        if port == 80 and not has_port:
            out.add(name)
    return frozenset(out)


def _error(status: int, error: str, message: str) -> tuple[int, bytes]:
    return status, orjson.dumps({"error": error, "message": message})


class Guard:
    """ASGI middleware: hosts, origins, the token, CSRF, body size (see the module doc)."""

    def __init__(
        self,
        app: ASGIApp,
        *,
        token: str,
        hosts: frozenset[str],
        max_body: int,
    ) -> None:
        self.app = app
        self._token = token.encode()
        self._cookie = cookie_value(token).encode()
        self.hosts = hosts
        self.origins = frozenset(f"http://{h}" for h in hosts)
        self.max_body = max_body

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "lifespan":
            await self.app(scope, receive, send)
            return
        if scope["type"] != "http":  # no websocket is served
            if scope["type"] == "websocket":
                await send({"type": "websocket.close", "code": 1008})
            return
        headers: dict[bytes, bytes] = {}
        for name, value in scope.get("headers") or ():
            headers.setdefault(name.lower(), value)
        refusal, identity = self._check(scope, headers)
        if refusal is not None:
            status, body = refusal
            extra = [(b"www-authenticate", b"Bearer")] if status == 401 else []
            await _respond(send, status, body, extra)
            return
        if scope["method"] in _WRITES:
            read = await self._body(receive, headers)
            if isinstance(read, tuple):
                await _respond(send, *read)
                return
            receive = _replay(read, receive)
        scope.setdefault("state", {})["identity"] = identity

        async def guarded(message: Message) -> None:
            if message["type"] == "http.response.start":
                kept = [
                    (k, v)
                    for k, v in message.get("headers") or ()
                    if not k.lower().startswith(b"access-control-")
                ]
                message["headers"] = kept + _HEADERS
            await send(message)

        try:
            await self.app(scope, receive, guarded)
        except Exception:
            # The app's own handler answered it and logged it, redacted:
            # uvicorn's log gets no raw traceback of it.
            if not scope["state"].get("logged"):
                raise

    def _check(
        self, scope: Scope, headers: dict[bytes, bytes]
    ) -> tuple[tuple[int, bytes] | None, Identity | None]:
        host = headers.get(b"host", b"").decode("latin-1").lower()
        if host not in self.hosts:
            return _error(
                421,
                "wrong_host",
                "this server answers only requests addressed to it by its own name "
                "(the Host header; see genesis serve --allow-host)",
            ), None
        origin = headers.get(b"origin")
        if origin is not None and origin.decode("latin-1").lower() not in self.origins:
            return _error(
                403,
                "wrong_origin",
                "requests from another site's pages are refused (the Origin header); "
                "this server sends no CORS headers",
            ), None
        identity = self._identity(headers)
        if identity is None:
            return _error(
                401,
                "unauthorized",
                "send the server's token: Authorization: Bearer TOKEN (genesis serve "
                "prints where it is), or the cookie of POST /auth/session",
            ), None
        channel = headers.get(CHANNEL_HEADER.encode())
        if channel is not None:
            name = channel.decode("latin-1").strip().lower()
            if name not in CHANNELS:
                return _error(
                    400,
                    "invalid_channel",
                    f"the X-Genesis-Channel header names one of {', '.join(sorted(CHANNELS))}",
                ), None
            identity = Identity(via=identity.via, channel=name)
        if (
            identity.via == "cookie"
            and scope["method"] in _WRITES
            and (not headers.get(CSRF_HEADER.encode()) or origin is None)
        ):
            return _error(
                403,
                "csrf",
                "a write authenticated by the cookie needs the X-Genesis-CSRF header "
                "and this server's Origin",
            ), None
        return None, identity

    def _identity(self, headers: dict[bytes, bytes]) -> Identity | None:
        auth = headers.get(b"authorization", b"")
        scheme, _, given = auth.partition(b" ")
        if (
            scheme.lower() == b"bearer"
            and given
            and hmac.compare_digest(given.strip(), self._token)
        ):
            return Identity(via="bearer")
        raw = headers.get(b"cookie")
        if raw:
            jar: SimpleCookie = SimpleCookie()
            with contextlib.suppress(Exception):
                jar.load(raw.decode("latin-1"))
            morsel = jar.get(COOKIE)
            if morsel is not None and hmac.compare_digest(morsel.value.encode(), self._cookie):
                return Identity(via="cookie")
        return None

    async def _body(
        self, receive: Receive, headers: dict[bytes, bytes]
    ) -> bytes | tuple[int, bytes]:
        """The whole body, or the refusal: 400 for a Content-Length that is no
        number, 413 over the limit (by its Content-Length or as read)."""
        too_large = _error(413, "too_large", f"the request body is over {self.max_body} bytes")
        length = headers.get(b"content-length")
        if length is not None and not length.isdigit():
            return _error(400, "invalid_request", "the Content-Length header is not a number")
        if length is not None and int(length) > self.max_body:
            return too_large
        chunks: list[bytes] = []
        size = 0
        while True:
            message = await receive()
            if message["type"] == "http.disconnect":
                break
            chunk = message.get("body") or b""
            size += len(chunk)
            if size > self.max_body:
                return too_large
            chunks.append(chunk)
            if not message.get("more_body"):
                break
        return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """A receive that hands on the body read, then the client's own messages
    (its disconnect)."""
    sent = False

    async def replayed() -> Message:
        nonlocal sent
        if not sent:
            sent = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replayed


async def _respond(
    send: Send, status: int, body: bytes, extra: list[tuple[bytes, bytes]] | None = None
) -> None:
    await send(
        {
            "type": "http.response.start",
            "status": status,
            "headers": [
                (b"content-type", b"application/json"),
                (b"content-length", str(len(body)).encode()),
                *(extra or []),
                *_HEADERS,
            ],
        }
    )
    await send({"type": "http.response.body", "body": body})
