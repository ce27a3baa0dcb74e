"""The options of a request, declared once, and the one request value.

An option is declared here and nowhere else: its keyword (the ``TypedDict``\\ s
that type ``run()``, ``session()``, the agent and a batch line, and that
``inspect.signature`` shows) and its stored value (a field of
:class:`RequestSettings`, made by :func:`setting`: its default, its one check,
and how a call's value meets the agent's).  ``run()``, ``run_result()`` and
``run_sync()`` take :class:`RunOptions`; ``agent.session()`` takes
:class:`LiveOptions`; the agent takes :class:`~coding_genesis.config.AgentSettings`,
which shares :class:`SharedOptions` with them; :class:`~coding_genesis.config.AgentConfig`
inherits :class:`RequestSettings`.  So an option added here reaches every entry
point.  Each one left out of a call (or None, except ``retry``) is the agent's setting.
"""

from __future__ import annotations

import os
import signal as _signal
from collections.abc import Callable, Mapping, Sequence, Set as AbstractSet
from dataclasses import MISSING, dataclass, field, fields
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict, TypeVar, overload

from coding_genesis._util.checks import (
    arguments,
    count,
    environment,
    mapping,
    names,
    node,
    positive,
    program,
    required_seconds,
    seconds,
    signals,
    word,
)
from coding_genesis._util.parser import DEFAULT_MAX_LINE_BYTES
from coding_genesis._util.schema import OutputSchema, output_schema
from coding_genesis.errors import ConfigError
from coding_genesis.hooks import Hook, HookEvent, hook_table
from coding_genesis.options import PERMISSION_LEVELS, SETTING_SOURCES, Permissions, SettingSource

if TYPE_CHECKING:
    from pydantic import BaseModel

    from coding_genesis.approval import Approver
    from coding_genesis.hooks import Hooks
    from coding_genesis.retry import RetryPolicy
    from coding_genesis.tools import HostTool

__all__ = [
    "CALL_OPTION_NAMES",
    "DEFAULT_CLI_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "LIVE_OPTION_NAMES",
    "RUN_OPTION_NAMES",
    "CallOptions",
    "CommandSpec",
    "LiveOptions",
    "OutputSchemaSetting",
    "RequestOptions",
    "RequestSettings",
    "RetrySetting",
    "RunOptions",
    "SharedOptions",
    "check_approver",
    "check_fields",
    "check_permissions",
    "check_setting_sources",
    "check_tools",
    "setting",
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


# -- the stored values: each option with its one check --------------------------------

#: Wall-clock limit of one request when none is given, in seconds.
DEFAULT_TIMEOUT = 300.0
#: The cap on a CLI's own API retries when the agent has a retry policy and
#: ``cli_max_retries`` is not given: the CLI absorbs a short blip, and our
#: policy (which knows the category, the backoff and the deadline) decides
#: about anything longer.  Without a retry policy the CLI's own default stays.
DEFAULT_CLI_MAX_RETRIES = 2

T = TypeVar("T")
#: A setting's check: (its name, the value given) -> the value kept, or a ConfigError.
Check: TypeAlias = Callable[[str, Any], Any]
#: How a call's value meets the agent's: (the call's, the agent's) -> the request's.
Merge: TypeAlias = Callable[[Any, Any], Any]


@overload
def setting(default: T, *, check: Check | None = None, merge: Merge | None = None) -> T: ...
@overload
def setting(
    *, factory: Callable[[], T], check: Check | None = None, merge: Merge | None = None
) -> T: ...
def setting(
    default: Any = MISSING,
    *,
    factory: Any = MISSING,
    check: Check | None = None,
    merge: Merge | None = None,
) -> Any:
    """A declared setting (a field of :class:`RequestSettings` or of
    :class:`~coding_genesis.config.AgentConfig`): its default (``factory`` for a
    mapping), its one check, and how a call's value meets the agent's (None:
    the call's replaces it)."""
    return field(
        default=default, default_factory=factory, metadata={"check": check, "merge": merge}
    )


def check_fields(obj: Any) -> None:
    """Run every declared check of ``obj``'s fields, keeping what each returns
    (the one place settings are checked at construction)."""
    set_ = object.__setattr__
    for f in fields(obj):
        check = f.metadata.get("check")
        if check is not None:
            set_(obj, f.name, check(f.name, getattr(obj, f.name)))


def merged(given: Mapping[str, Any], agents: Mapping[str, Any]) -> dict[str, Any]:
    """``options=`` of a call: merged over the agent's."""
    return {**agents, **given}


def check_permissions(value: object) -> Permissions | None:
    if value is None:
        return None
    if not isinstance(value, str) or value not in PERMISSION_LEVELS:
        raise ConfigError(
            f"permissions must be one of {', '.join(map(repr, PERMISSION_LEVELS))} or None, "
            f"got {value!r}"
        )
    return value


def check_setting_sources(value: object) -> tuple[SettingSource, ...] | None:
    """``setting_sources=``: None, or a non-empty sequence of
    :data:`~coding_genesis.options.SETTING_SOURCES`, kept in their order."""
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence | AbstractSet):
        raise ConfigError(
            f"setting_sources must be a sequence of {', '.join(map(repr, SETTING_SOURCES))} "
            f"(e.g. ('user', 'project')) or None, got {value!r}"
        )
    unknown = [s for s in value if s not in SETTING_SOURCES]
    if unknown or not value:
        raise ConfigError(
            f"setting_sources must name one or more of {', '.join(map(repr, SETTING_SOURCES))}, "
            f"got {tuple(value)!r}"
        )
    return tuple(s for s in SETTING_SOURCES if s in value)


def check_approver(value: object) -> None:
    """An approver is a callable of one request (or None)."""
    if value is not None and not callable(value):
        raise ConfigError(f"approver must be a callable (sync or async), got {value!r}")


def check_tools(value: object) -> tuple[HostTool, ...]:
    """``tools=``: each a host tool (a plain function wrapped), names unique."""
    if value is None or (isinstance(value, Sequence) and not value):
        return ()
    from coding_genesis.tools import as_host_tools  # lazy: pydantic, only for tools

    return as_host_tools(value)  # type: ignore[arg-type]  # checked there


def _approver(name: str, value: object) -> Approver | None:
    check_approver(value)
    return value  # type: ignore[return-value]  # a callable


def _retry(name: str, value: object) -> RetryPolicy | None:
    from coding_genesis.retry import RetryPolicy  # lazy: no pydantic at import time

    return RetryPolicy.parse(value)


def _natural(name: str, value: object) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 0:
        raise ConfigError(f"{name} must be a non-negative integer, got {value!r}")
    return value


@dataclass(frozen=True, slots=True, kw_only=True)
class RequestSettings:
    """Every knob a request carries, each with its one check: an agent's
    settings are its defaults (:class:`~coding_genesis.config.AgentConfig`
    inherits them), a call's options override them, and the request
    (:class:`Request`) reads them.  What each means is said where an agent
    documents it (:class:`~coding_genesis.config.AgentConfig`)."""

    #: Wall-clock limit of one attempt (of each turn of a session), in seconds.
    timeout: float = setting(DEFAULT_TIMEOUT, check=required_seconds)
    #: The model (None: the CLI's default).
    model: str | None = setting(None, check=word)
    #: One permission level across CLIs: "read-only", "edit" or "full" (None:
    #: the CLI's default); a level the backend cannot enforce is refused.
    permissions: Permissions | None = setting(None, check=lambda n, v: check_permissions(v))
    #: The CLI's own turn limit (None: the CLI's default).
    max_turns: int | None = setting(None, check=lambda n, v: count(n, v, 1))
    #: Cap on the CLI's own API retries where it allows one (None: the CLI's
    #: default, or :data:`DEFAULT_CLI_MAX_RETRIES` under a retry policy).
    cli_max_retries: int | None = setting(None, check=lambda n, v: count(n, v, 0))
    #: Backend options (each checked against the backend's list); a call's are
    #: merged over the agent's.
    options: Mapping[str, Any] = setting(factory=dict, check=mapping, merge=merged)
    #: Extra CLI arguments.
    extra_args: tuple[str, ...] = setting((), check=arguments)
    #: The shape of every answer: a JSON Schema (its root an object) or a
    #: pydantic model class, given to the CLI; the result's ``output`` holds the
    #: validated answer (None: a free answer).  Held checked.
    output_schema: OutputSchema | None = setting(
        None, check=lambda n, v: None if v is None else output_schema(v)
    )
    #: The settings the CLI reads (None: the user's alone; see docs/security.md).
    setting_sources: tuple[SettingSource, ...] | None = setting(
        None, check=lambda n, v: check_setting_sources(v)
    )
    #: Decides each tool call the CLI asks to make: a run with an approver
    #: speaks the CLI's two-way protocol.  None: ``permissions`` decides.
    approver: Approver | None = setting(None, check=_approver)
    #: Code run at hook points of each turn: event -> its hooks (empty: none).
    hooks: Mapping[HookEvent, tuple[Hook, ...]] = setting(
        factory=dict, check=lambda n, v: hook_table(v)
    )
    #: The caller's functions the model may call (plain or ``@tool`` functions).
    tools: tuple[HostTool, ...] = setting((), check=lambda n, v: check_tools(v))
    #: Seconds an approver has to answer before the tool call is denied.
    approval_timeout: float = setting(60.0, check=required_seconds)
    #: Seconds each hook has to answer.
    hook_timeout: float = setting(30.0, check=required_seconds)
    #: Stop when stdout is silent this long (None: never).
    idle_timeout: float | None = setting(None, check=lambda n, v: seconds(n, v, allow_none=True))
    #: Stop a tree silent on stdout and stderr and (nearly) idle this long (None: never).
    stall_timeout: float | None = setting(600.0, check=lambda n, v: seconds(n, v, allow_none=True))
    #: Stop a CLI still running this long after its result (None: never).
    linger: float | None = setting(
        2.0, check=lambda n, v: seconds(n, v, allow_none=True, allow_zero=True)
    )
    #: Seconds between each stop signal and the next (then SIGKILL).
    grace: float = setting(5.0, check=lambda n, v: required_seconds(n, v, allow_zero=True))
    #: After the CLI exits, how long its pipes may stay open.
    eof_grace: float = setting(0.5, check=lambda n, v: required_seconds(n, v, allow_zero=True))
    #: The CLI program, with optional leading arguments (None: found on PATH).
    cli_path: tuple[str, ...] | None = setting(None, check=program)
    #: The node interpreter for a CLI that is a node script run without its wrapper.
    node_path: str | None = setting(None, check=node)
    #: Variables added to the CLI's environment (after the backend's own).
    env: Mapping[str, str] = setting(factory=dict, check=environment)
    #: True: the CLI inherits this process's whole environment.  False: only a
    #: minimal one, the backend's declared needs, ``env_allow`` and ``env``.
    inherit_env: bool = setting(True, check=lambda n, v: _flag(n, v))
    #: Names (``PREFIX_*`` for a prefix) passed on when ``inherit_env`` is False.
    env_allow: tuple[str, ...] = setting((), check=names)
    #: Signals sent in turn to stop the tree (then SIGKILL).
    stop_signals: tuple[int, ...] = setting((_signal.SIGTERM,), check=signals)
    #: Stop processes of the run still alive after the CLI exited by itself.
    kill_leftovers: bool = setting(True)
    #: The longest stdout line read (a longer one is skipped, counted).
    max_line_bytes: int = setting(DEFAULT_MAX_LINE_BYTES, check=positive)
    #: The stderr kept for the failure analysis.
    stderr_tail_bytes: int = setting(64 * 1024, check=_natural)
    #: Retry policy (None: one attempt per request).
    retry: RetryPolicy | None = setting(None, check=_retry)


def _flag(name: str, value: object) -> bool:
    if not isinstance(value, bool):
        raise ConfigError(f"{name} must be True or False, got {value!r}")
    return value


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
