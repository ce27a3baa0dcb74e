"""A request: what one ``run()`` call asks for, checked before anything starts.

A bad request is answered (status 64, ``error="invalid_request"``), never
raised: :func:`make_request` raises :class:`ConfigError` and the agent turns it
into that answer.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from coding_genesis.config import (
    DEFAULT_CLI_MAX_RETRIES,
    AgentConfig,
    check_cli_max_retries,
    check_cwd,
    check_max_turns,
    check_permissions,
    require_permissions,
    required_seconds,
)
from coding_genesis.errors import ConfigError

if TYPE_CHECKING:
    from coding_genesis.backend import Backend

__all__ = ["Request", "make_request", "request_key"]

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,255}$")


@dataclass(frozen=True, slots=True)
class Request:
    """One validated request."""

    prompt: str
    cwd: str
    timeout: float
    model: str | None = None
    #: Continue this CLI session.
    resume: str | None = None
    #: One permission level ("read-only", "edit", "full"; None: the CLI's default).
    permissions: str | None = None
    #: The CLI's own turn limit.
    max_turns: int | None = None
    #: Cap on the CLI's own API retries.
    cli_max_retries: int | None = None
    #: Backend options: the agent's, updated with the call's.
    options: Mapping[str, Any] = field(default_factory=dict)
    #: Stable across the attempts of one logical request.
    key: str = ""


def request_key(backend: str, cwd: str, prompt: str) -> str:
    """Stable across the attempts of one logical request (the failer keeps its
    /fail-then-succeed counter under it)."""
    return hashlib.sha256(
        f"{backend}\0{cwd}\0{prompt}".encode("utf-8", "surrogatepass")
    ).hexdigest()[:32]


def check_prompt(prompt: object) -> str:
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


def make_request(
    config: AgentConfig,
    backend_name: str,
    prompt: object,
    *,
    timeout: object = None,
    cwd: str | os.PathLike[str] | None = None,
    model: str | None = None,
    resume: str | None = None,
    options: Mapping[str, Any] | None = None,
    key: str | None = None,
    check_options: Callable[[Mapping[str, Any]], object] | None = None,
    permissions: object = None,
    max_turns: object = None,
    cli_max_retries: object = None,
    backend: Backend | None = None,
    retrying: bool = False,
) -> Request:
    """Validate one call's arguments against the agent's configuration."""
    run_timeout = required_seconds("timeout", timeout) if timeout is not None else config.timeout
    run_cwd = check_cwd(cwd) if cwd is not None else (config.cwd or check_cwd(os.getcwd()))
    text = check_prompt(prompt)
    if resume is not None and (not isinstance(resume, str) or not _SESSION_ID.match(resume)):
        raise ConfigError(f"invalid session id to resume: {resume!r}")
    if model is not None and (not isinstance(model, str) or not model or "\0" in model):
        raise ConfigError(f"model must be a non-empty string, got {model!r}")
    if options is not None and not isinstance(options, Mapping):
        raise ConfigError(f"options must be a mapping, got {options!r}")
    merged = {**config.options, **(options or {})}
    if options and check_options is not None:
        check_options(options)
    run_permissions = check_permissions(permissions) or config.permissions
    if backend is not None and permissions is not None:
        require_permissions(backend, run_permissions)
    run_max_turns = check_max_turns(max_turns) or config.max_turns
    run_retries = check_cli_max_retries(cli_max_retries)
    if run_retries is None:
        run_retries = config.cli_max_retries
    if run_retries is None and retrying:
        run_retries = DEFAULT_CLI_MAX_RETRIES
    if key is not None and (not isinstance(key, str) or not key):
        raise ConfigError(f"request_key must be a non-empty string, got {key!r}")
    return Request(
        prompt=text,
        cwd=run_cwd,
        timeout=run_timeout,
        model=model or config.model,
        resume=resume,
        permissions=run_permissions,
        max_turns=run_max_turns,
        cli_max_retries=run_retries,
        options=merged,
        key=key or request_key(backend_name, run_cwd, text),
    )
