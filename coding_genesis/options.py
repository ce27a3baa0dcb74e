"""The options of an agent and of one request, named and typed once.

:class:`AgentSettings` is what :class:`~coding_genesis.config.AgentConfig`
(so an agent, and a :class:`~coding_genesis.batch.RunSpec`) accepts;
:class:`RunOptions` is what one ``run()`` call accepts: ``run()``,
``run_result()`` and ``run_sync()`` take them as keywords, the agent checks a
call against their names, and the pipeline's request validates them.  The
closed vocabularies are ``Literal`` types: a typo is a type error (and a
:class:`~coding_genesis.errors.ConfigError` at run time).  Types only: nothing
here is checked, and nothing but the standard library is imported at run time.
"""

from __future__ import annotations

import enum
import os
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict

if TYPE_CHECKING:
    from pydantic import BaseModel

    from coding_genesis._failures.breaker import CircuitBreaker
    from coding_genesis._observers.budget import Budget
    from coding_genesis._util.clock import Clock
    from coding_genesis.approval import Approver
    from coding_genesis.backend import Backend
    from coding_genesis.hooks import Hooks
    from coding_genesis.observer import Observer
    from coding_genesis.retry import RetryPolicy

__all__ = [
    "AGENT_DEFAULT",
    "KEEP_RESULTS",
    "LIVE_OPTION_NAMES",
    "RUN_OPTION_NAMES",
    "SESSION_OPTION_NAMES",
    "AgentDefault",
    "AgentSettings",
    "BreakerSetting",
    "Isolation",
    "Keep",
    "LiveOptions",
    "MessageUsage",
    "OutputSchemaSetting",
    "Permissions",
    "RetrySetting",
    "RunOptions",
    "SessionOptions",
    "SettingSource",
    "Settings",
    "TurnOptions",
]

#: One permission level across CLIs, from the most restrictive to the least
#: (each backend declares the levels it enforces: ``Backend.permission_levels``).
Permissions: TypeAlias = Literal["read-only", "edit", "full"]
#: Where a CLI's own settings come from: the user's (home directory), the
#: project's (files the working directory holds, shared through the
#: repository) and the local ones (the working directory's files kept out of
#: the repository).  ``setting_sources=`` chooses which a run reads; None: the
#: user's alone (see docs/security.md, "Repository files").
SettingSource: TypeAlias = Literal["user", "project", "local"]
#: What a translator makes of the usage a CLI reports mid-stream (see
#: :class:`~coding_genesis.backend.Translator`).
MessageUsage: TypeAlias = Literal["live", "folded", "off"]
#: How a run is isolated: in a fresh git worktree (None: in ``cwd`` itself).
Isolation: TypeAlias = Literal["worktree"]
#: When an isolated run's worktree is kept.
Keep: TypeAlias = Literal["never", "on_failure", "always"]
#: ``retry=``: a policy, "default" (the default table), "none" (one attempt),
#: N (the default table with N retries per retryable category) or None (one attempt).
RetrySetting: TypeAlias = "RetryPolicy | Literal['default', 'none'] | int | None"
#: ``circuit_breaker=``: a (shareable) breaker, "default" (one of the agent's own) or None.
BreakerSetting: TypeAlias = "CircuitBreaker | Literal['default'] | None"
#: ``output_schema=``: the shape of the answer, a JSON Schema (its root an
#: object) or a pydantic model class (see coding_genesis._util.schema).
OutputSchemaSetting: TypeAlias = "Mapping[str, Any] | type[BaseModel]"


class AgentDefault(enum.Enum):
    """The type of :data:`AGENT_DEFAULT`: an option not given to ``run()``."""

    AGENT_DEFAULT = "the agent's setting"

    def __repr__(self) -> str:
        return "<the agent's setting>"


#: A ``run()`` option left out: the agent's setting applies (for ``retry``,
#: the agent's policy; ``retry=None`` is one attempt).
AGENT_DEFAULT = AgentDefault.AGENT_DEFAULT


class SessionOptions(TypedDict, total=False):
    """The options of one request that are not agent settings."""

    #: Continue this CLI session.
    resume: str | None
    #: Stable across the attempts of one logical request (None: derived from
    #: the backend, the directory and the prompt).
    request_key: str | None


class TurnOptions(TypedDict, total=False):
    """The options of one request that a live session's turns share with a
    one-shot run (see :class:`RunOptions`, :class:`LiveOptions`)."""

    #: Wall-clock limit of this request (of each turn of a session), in seconds.
    timeout: float | None
    #: Working directory of the CLI.
    cwd: str | os.PathLike[str] | None
    model: str | None
    #: Backend options, merged over the agent's.
    options: Mapping[str, Any] | None
    permissions: Permissions | None
    max_turns: int | None
    cli_max_retries: int | None
    #: Decides each tool call the CLI asks to make (see coding_genesis.approval).
    approver: Approver | None
    #: Seconds an approver has to answer before the call is denied.
    approval_timeout: float | None
    #: Code run at hook points of the turn (see coding_genesis.hooks).
    hooks: Hooks | None
    #: Seconds each hook has to answer.
    hook_timeout: float | None
    #: The answer must be JSON of this shape; the result's ``output`` holds it
    #: validated (an answer that is not: ``invalid_output``, retried once).
    output_schema: OutputSchemaSetting | None
    #: The caller's functions the model may call (see coding_genesis.tools).
    tools: Sequence[Callable[..., Any]] | None
    #: The settings the CLI reads (None: the user's alone; the working
    #: directory's are read only when named here).
    setting_sources: Sequence[SettingSource] | None


class RunOptions(SessionOptions, TurnOptions, total=False):
    """The options of one ``run()`` call, defined once: ``run()``,
    ``run_result()`` and ``run_sync()`` take them as keywords, the agent checks
    a call against these names, and :func:`~coding_genesis._pipeline.request.make_request`
    validates them.  Each one left out (or None, except ``retry``) is the
    agent's setting."""

    #: This call's retry policy (None: one attempt).
    retry: RetrySetting


class LiveOptions(TurnOptions, total=False):
    """The options of a live session (``agent.session()``): a run's, without
    ``retry`` (a turn is never retried) or ``request_key``."""

    #: Continue this CLI session (one that ended, or a one-shot run's).
    resume: str | None
    #: How many of its last results ``session.results`` keeps (default
    #: :data:`KEEP_RESULTS`); ``"all"``: every one, the memory growing with
    #: each turn.
    keep_results: int | Literal["all"]


#: The results a live session keeps by default (``keep_results=``): a long
#: session's memory stays bounded whatever its turns answer.
KEEP_RESULTS = 100


#: The keywords ``run()`` accepts.
RUN_OPTION_NAMES: frozenset[str] = RunOptions.__optional_keys__
#: The keywords ``agent.session()`` accepts.
LIVE_OPTION_NAMES: frozenset[str] = LiveOptions.__optional_keys__
#: The run options that are not agent settings.
SESSION_OPTION_NAMES: frozenset[str] = SessionOptions.__optional_keys__


class AgentSettings(TypedDict, total=False):
    """The keywords an :class:`AgentConfig` (and so an agent, and a
    :class:`~coding_genesis.batch.RunSpec`) accepts besides ``backend``, typed
    as accepted: the fields of :class:`AgentConfig`, where each is documented
    (a test checks both name the same settings)."""

    timeout: float
    cwd: str | os.PathLike[str] | None
    name: str | None
    cli_path: str | os.PathLike[str] | Sequence[str] | None
    model: str | None
    permissions: Permissions | None
    max_turns: int | None
    cli_max_retries: int | None
    approver: Approver | None
    approval_timeout: float
    hooks: Hooks | None
    hook_timeout: float
    output_schema: OutputSchemaSetting | None
    tools: Sequence[Callable[..., Any]]
    setting_sources: Sequence[SettingSource] | None
    grace: float
    idle_timeout: float | None
    stall_timeout: float | None
    linger: float | None
    eof_grace: float
    stop_signals: Sequence[int]
    kill_leftovers: bool
    env: Mapping[str, str]
    inherit_env: bool
    env_allow: Sequence[str]
    extra_args: Sequence[str]
    node_path: str | None
    options: Mapping[str, Any]
    max_line_bytes: int
    stderr_tail_bytes: int
    retry: RetrySetting
    circuit_breaker: BreakerSetting
    clock: Clock | None
    transcripts: str | os.PathLike[str] | Literal[False] | None
    transcript_max_bytes: int
    isolation: Isolation | None
    isolation_base: str | None
    carry_uncommitted: bool
    keep: Keep
    keep_branch: bool
    include_diff: bool
    worktrees_dir: str | os.PathLike[str] | Literal[False] | None
    verify: Sequence[str] | None
    verify_timeout: float
    run_log: str | os.PathLike[str] | Literal[False] | None
    observers: Sequence[Observer]
    metering: bool
    prices: Mapping[str, Any] | None
    budget: Budget | None
    ledger: str | os.PathLike[str] | bool | None
    telemetry: bool
    telemetry_content: bool


class Settings(AgentSettings, total=False):
    """Every setting, ``backend`` included (:meth:`AgentConfig.replace`)."""

    backend: str | Backend
