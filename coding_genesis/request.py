"""The options of a request, declared once.

An option is declared here and nowhere else: its keyword (the ``TypedDict``\\ s
that type ``run()``, ``session()``, the agent and a batch line, and that
``inspect.signature`` shows) and, below, its stored value.  ``run()``,
``run_result()`` and ``run_sync()`` take :class:`RunOptions`;
``agent.session()`` takes :class:`LiveOptions`; the agent takes
:class:`~coding_genesis.config.AgentSettings`, which shares
:class:`SharedOptions` with them, so an option added there reaches every entry
point.  Each one left out (or None, except ``retry``) is the agent's setting.
"""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict

from coding_genesis.options import Permissions, SettingSource

if TYPE_CHECKING:
    from pydantic import BaseModel

    from coding_genesis.approval import Approver
    from coding_genesis.hooks import Hooks
    from coding_genesis.retry import RetryPolicy

__all__ = [
    "CALL_OPTION_NAMES",
    "LIVE_OPTION_NAMES",
    "RUN_OPTION_NAMES",
    "CallOptions",
    "CommandSpec",
    "LiveOptions",
    "OutputSchemaSetting",
    "RequestOptions",
    "RetrySetting",
    "RunOptions",
    "SharedOptions",
]

#: ``retry=``: a policy, "default" (the default table), "none" (one attempt),
#: N (the default table with N retries per retryable category) or None (one attempt).
RetrySetting: TypeAlias = "RetryPolicy | Literal['default', 'none'] | int | None"
#: ``output_schema=``: the shape of the answer, a JSON Schema (its root an
#: object) or a pydantic model class.
OutputSchemaSetting: TypeAlias = "Mapping[str, Any] | type[BaseModel]"


class SharedOptions(TypedDict, total=False):
    """The options an agent and one request take with the same accepted type
    (None: not set; for a request, the agent's setting)."""

    #: Working directory of the CLI.
    cwd: str | os.PathLike[str] | None
    model: str | None
    #: One permission level across CLIs: "read-only", "edit" or "full".
    permissions: Permissions | None
    #: The CLI's own turn limit.
    max_turns: int | None
    #: Cap on the CLI's own API retries where it allows one.
    cli_max_retries: int | None
    #: Decides each tool call the CLI asks to make (see coding_genesis.approval).
    approver: Approver | None
    #: Code run at hook points of the turn (see coding_genesis.hooks).
    hooks: Hooks | None
    #: The answer must be JSON of this shape; the result's ``output`` holds it
    #: validated (an answer that is not: ``invalid_output``, retried once).
    output_schema: OutputSchemaSetting | None
    #: The settings the CLI reads (None: the user's alone; the working
    #: directory's are read only when named here).
    setting_sources: Sequence[SettingSource] | None


class RequestOptions(SharedOptions, total=False):
    """The options of one request that are also agent settings: what a live
    session's turns share with a one-shot run (see :class:`RunOptions`,
    :class:`LiveOptions`)."""

    #: Wall-clock limit of this request (of each turn of a session), in seconds.
    timeout: float | None
    #: Backend options, merged over the agent's.
    options: Mapping[str, Any] | None
    #: Seconds an approver has to answer before the call is denied.
    approval_timeout: float | None
    #: Seconds each hook has to answer.
    hook_timeout: float | None
    #: The caller's functions the model may call (see coding_genesis.tools).
    tools: Sequence[Callable[..., Any]] | None


class CallOptions(TypedDict, total=False):
    """The options only a call takes (never an agent setting)."""

    #: Continue this CLI session.
    resume: str | None
    #: Stable across the attempts of one logical request (None: derived from
    #: the backend, the directory and the prompt).
    request_key: str | None


class RunOptions(RequestOptions, CallOptions, total=False):
    """The options of one ``run()`` call: ``run()``, ``run_result()`` and
    ``run_sync()`` take them as keywords, and the request is built from them.
    Each one left out (or None, except ``retry``) is the agent's setting."""

    #: This call's retry policy (None: one attempt).
    retry: RetrySetting


class LiveOptions(RequestOptions, total=False):
    """The options of a live session (``agent.session()``): a run's, without
    ``retry`` (a turn is never retried) or ``request_key``."""

    #: Continue this CLI session (one that ended, or a one-shot run's).
    resume: str | None
    #: How many of its last results ``session.results`` keeps (default
    #: :data:`~coding_genesis.options.KEEP_RESULTS`); ``"all"``: every one, the
    #: memory growing with each turn.
    keep_results: int | Literal["all"]


#: The keywords ``run()`` accepts.
RUN_OPTION_NAMES: frozenset[str] = RunOptions.__optional_keys__
#: The keywords ``agent.session()`` accepts.
LIVE_OPTION_NAMES: frozenset[str] = LiveOptions.__optional_keys__
#: The options only a call takes.
CALL_OPTION_NAMES: frozenset[str] = CallOptions.__optional_keys__


# -- what a backend makes of a request -----------------------------------------------


@dataclass(frozen=True, slots=True)
class CommandSpec:
    """How to start the CLI: arguments after the program, stdin, environment."""

    args: tuple[str, ...]
    #: Written to stdin, which is then closed.  None: stdin is /dev/null.
    stdin: bytes | None = None
    #: Variables added to the inherited environment.
    env: Mapping[str, str] = field(default_factory=dict)
    #: Inherited variables to remove; a trailing ``*`` matches a prefix.
    unset_env: tuple[str, ...] = ()
    #: Files of a private temporary settings overlay, by relative path: the core writes
    #: them (0600) in a fresh 0700 directory, replaces ``{overlay}`` in ``args`` and in
    #: ``env`` values with that directory's path, and removes it after the run.
    overlay: Mapping[str, bytes] = field(default_factory=dict)
    #: Options the CLI cannot honor, reported as warnings in the result.
    warnings: tuple[str, ...] = ()
