"""A request: what one ``run()`` call asks for, checked before anything starts.

A bad request is answered (status 64, ``error="invalid_request"``), never
raised: :func:`make_request` raises :class:`ConfigError` and the agent turns it
into that answer.
"""

from __future__ import annotations

import hashlib
import os
import re
from collections.abc import Mapping
from dataclasses import dataclass, field, replace
from typing import TYPE_CHECKING

from coding_genesis._util.schema import OutputSchema, output_schema
from coding_genesis.backend import AttemptRequest, Backend, check_options
from coding_genesis.config import (
    DEFAULT_CLI_MAX_RETRIES,
    AgentConfig,
    check_approver,
    check_cli_max_retries,
    check_cwd,
    check_max_turns,
    check_permissions,
    check_setting_sources,
    check_tools,
    require_permissions,
    require_setting_sources,
    required_seconds,
)
from coding_genesis.errors import ConfigError
from coding_genesis.hooks import Hook, HookEvent, hook_table
from coding_genesis.request import RunOptions

if TYPE_CHECKING:
    from coding_genesis.approval import Approver
    from coding_genesis.tools import HostTool

__all__ = ["Request", "make_request", "request_key"]

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,255}$")


@dataclass(frozen=True, slots=True)
class Request:
    """One validated request: what each attempt asks of the backend (the
    retry loop changes only its prompt and session), and its timeout."""

    attempt: AttemptRequest
    #: Wall-clock limit of one attempt, in seconds.
    timeout: float
    #: Decides each tool call (None: the permission level does).
    approver: Approver | None = None
    #: Seconds the approver has to answer.
    approval_timeout: float = 60.0
    #: The hooks of each event (empty: none).
    hooks: Mapping[HookEvent, tuple[Hook, ...]] = field(default_factory=dict)
    #: Seconds each hook has to answer.
    hook_timeout: float = 30.0

    @property
    def two_way(self) -> bool:
        """An approver, hooks or host tools: the run speaks the CLI's two-way protocol."""
        return self.approver is not None or bool(self.hooks) or bool(self.tools)

    #: The shape the answer must have (None: a free answer).
    output: OutputSchema | None = None
    #: The caller's functions the model may call.
    tools: tuple[HostTool, ...] = ()

    @property
    def prompt(self) -> str:
        return self.attempt.prompt

    @property
    def cwd(self) -> str:
        return self.attempt.cwd

    @property
    def model(self) -> str | None:
        return self.attempt.model

    @property
    def resume(self) -> str | None:
        return self.attempt.resume_session

    @property
    def key(self) -> str:
        """Stable across the attempts of one logical request."""
        return self.attempt.request_key

    def retried(self, prompt: str, resume: str | None, timeout: float | None) -> Request:
        """The request of a later attempt (its prompt, session and timeout)."""
        return replace(
            self,
            attempt=replace(self.attempt, prompt=prompt, resume_session=resume),
            timeout=self.timeout if timeout is None else timeout,
        )

    def moved(self, cwd: str) -> Request:
        """The same request run in ``cwd`` (an isolated run's worktree)."""
        return replace(self, attempt=replace(self.attempt, cwd=cwd))


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
    backend: Backend,
    prompt: object,
    call: RunOptions,
    *,
    retrying: bool = False,
) -> Request:
    """Validate one call's options (:class:`~coding_genesis.request.RunOptions`)
    against the agent's configuration and ``backend``'s options and permissions."""
    timeout = call.get("timeout")
    cwd = call.get("cwd")
    model = call.get("model")
    resume = call.get("resume")
    options = call.get("options")
    key = call.get("request_key")
    permissions = call.get("permissions")
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
    if options:
        check_options(backend, options)
    run_permissions = check_permissions(permissions) or config.permissions
    if permissions is not None:
        require_permissions(backend, run_permissions)
    run_max_turns = check_max_turns(call.get("max_turns")) or config.max_turns
    run_retries = check_cli_max_retries(call.get("cli_max_retries"))
    if run_retries is None:
        run_retries = config.cli_max_retries
    if run_retries is None and retrying:
        run_retries = DEFAULT_CLI_MAX_RETRIES
    if key is not None and (not isinstance(key, str) or not key):
        raise ConfigError(f"request_key must be a non-empty string, got {key!r}")
    shape = call.get("output_schema")
    output = output_schema(shape) if shape is not None else config.output_schema
    if output is not None and not backend.structured_output:
        raise ConfigError(
            f"backend {backend.name!r} takes no output schema: output_schema= cannot be used"
        )
    sources = check_setting_sources(call.get("setting_sources"))
    if sources is not None:
        require_setting_sources(backend, sources)
    else:
        sources = config.setting_sources
    attempt = AttemptRequest(
        prompt=text,
        cwd=run_cwd,
        model=model or config.model,
        resume_session=resume,
        permissions=run_permissions,
        max_turns=run_max_turns,
        cli_max_retries=run_retries,
        request_key=key or request_key(backend.name, run_cwd, text),
        options=merged,
        extra_args=config.extra_args,
        output_schema=output.schema if output is not None else None,
        setting_sources=sources,
    )
    approver = call.get("approver")
    if approver is not None:
        check_approver(approver)
    approval_timeout = call.get("approval_timeout")
    hooks = call.get("hooks")
    hook_timeout = call.get("hook_timeout")
    tools = call.get("tools")
    return Request(
        attempt,
        run_timeout,
        approver if approver is not None else config.approver,
        required_seconds("approval_timeout", approval_timeout)
        if approval_timeout is not None
        else config.approval_timeout,
        hook_table(hooks if hooks is not None else config.hooks),
        required_seconds("hook_timeout", hook_timeout)
        if hook_timeout is not None
        else config.hook_timeout,
        output,
        check_tools(tools) if tools is not None else config.tools,
    )
