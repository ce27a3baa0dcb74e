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

import math
import os
import re
import signal as _signal
import warnings
from collections.abc import Callable, Mapping, Sequence, Set as AbstractSet
from dataclasses import MISSING, dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias, TypedDict, TypeVar, overload

from coding_genesis._util.checks import (
    arguments,
    check_cwd,
    check_prompt,
    count,
    directories,
    environment,
    flag,
    mapping,
    names,
    natural,
    node,
    positive,
    program,
    request_key,
    required_seconds,
    seconds,
    signals,
    text,
    word,
)
from coding_genesis._util.parser import DEFAULT_MAX_LINE_BYTES
from coding_genesis._util.schema import OutputSchema, output_schema
from coding_genesis.errors import ConfigError
from coding_genesis.hooks import Hook, HookEvent, hook_table
from coding_genesis.options import (
    AGENT_DEFAULT,
    PERMISSION_LEVELS,
    SETTING_SOURCES,
    Permissions,
    SettingSource,
)
from coding_genesis.prompts import FileRef, Image, checked_prompt
from coding_genesis.subagents import Subagent, subagent_table

if TYPE_CHECKING:
    from pydantic import BaseModel

    from coding_genesis.approval import Approver
    from coding_genesis.hooks import Hooks
    from coding_genesis.questions import Asker
    from coding_genesis.retry import RetryPolicy
    from coding_genesis.tools import HostTool, McpServerSpec

__all__ = [
    "CALL_OPTION_NAMES",
    "DEFAULT_CLI_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "LIVE_OPTION_NAMES",
    "RUN_OPTION_NAMES",
    "SEND_OPTION_NAMES",
    "TURN_OPTIONS",
    "CallOptions",
    "CommandSpec",
    "LiveOptions",
    "OutputSchemaSetting",
    "Request",
    "RequestOptions",
    "RequestSettings",
    "RetrySetting",
    "RunOptions",
    "SendOptions",
    "SharedOptions",
    "Unsupported",
    "check_approver",
    "check_fields",
    "check_permissions",
    "check_prompt",
    "check_setting_sources",
    "check_tools",
    "request_key",
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
    #: The CLI's system prompt, in place of its own (where the CLI has one).
    system_prompt: str | None
    #: Text added to the CLI's own system prompt.
    append_system_prompt: str | None
    #: Directories the CLI may work in besides ``cwd`` (it may write there).
    add_dirs: Sequence[str | os.PathLike[str]] | None
    #: Subagents the model may hand a task to, by name (see coding_genesis.subagents).
    agents: Mapping[str, Subagent] | None


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
    #: Text and thinking as the CLI writes them: ``TextDeltaEvent`` and
    #: ``ThoughtDeltaEvent`` before each whole message (fixed when the CLI starts).
    partial: bool | None
    #: Called with each line the CLI writes on stderr, as it is written (redacted).
    on_stderr: Callable[[str], object] | None
    #: The caller's MCP servers the CLI may use: name -> server (see
    #: coding_genesis.tools.McpServerSpec; a mapping of its fields is one too).
    mcp_servers: Mapping[str, McpServerSpec | Mapping[str, Any]] | None
    #: Answers the CLI's questions to the user (see coding_genesis.questions).
    asker: Asker | None
    #: Seconds the asker has to answer before the model is told nobody can.
    question_timeout: float | None


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


class SendOptions(TypedDict, total=False):
    """The keywords of one turn of a live session (``send()``,
    ``send_result()``, ``stream()``); each left out (or None) is the session's.
    A backend whose protocol cannot set one for a single turn answers that
    turn 64 (the capability check's ``turn`` row); the session lives on."""

    #: Wall-clock limit of this turn, in seconds.
    timeout: float | None
    #: The model of this turn.
    model: str | None
    #: The permission level of this turn: "read-only", "edit" or "full".
    permissions: Permissions | None
    #: The shape of this turn's answer (as ``output_schema=`` of a run).
    output_schema: OutputSchemaSetting | None


class LiveOptions(RequestOptions, total=False):
    """The options of a live session (``agent.session()``): a run's, without
    ``retry`` (a turn is never retried) or ``request_key``."""

    #: Continue this CLI session (one that ended, or a one-shot run's).
    resume: str | None
    #: With ``resume=``: a new session from that one's history (a fork; the
    #: one resumed is left as it was).
    fork: bool | None
    #: With ``fork=True``: the fork's history ends at this turn of the one
    #: resumed (a ``RunResult.turn_id``).
    resume_at: str | None
    #: How many of its last results ``session.results`` keeps (default
    #: :data:`~coding_genesis.options.KEEP_RESULTS`); ``"all"``: every one, the
    #: memory growing with each turn.
    keep_results: int | Literal["all"]


#: The keywords ``run()`` accepts.
RUN_OPTION_NAMES: frozenset[str] = RunOptions.__optional_keys__
#: The keywords ``agent.session()`` accepts.
LIVE_OPTION_NAMES: frozenset[str] = LiveOptions.__optional_keys__
#: The keywords of one turn of a live session (``send()``).
SEND_OPTION_NAMES: frozenset[str] = SendOptions.__optional_keys__
#: The options one turn sets for itself (``send(..., model=...)``): each
#: backend's protocol says which it takes (``ControlProtocol.turn_options``).
TURN_OPTIONS: frozenset[str] = SEND_OPTION_NAMES - {"timeout"}
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


def _mcp_servers(name: str, value: object) -> Mapping[str, McpServerSpec]:
    from coding_genesis.tools import as_mcp_servers  # lazy: start-up, only for mcp_servers

    return as_mcp_servers(value)


def _asker(name: str, value: object) -> Asker | None:
    if value is not None and not callable(value):
        raise ConfigError(f"asker must be a callable (sync or async), got {value!r}")
    return value


def _approver(name: str, value: object) -> Approver | None:
    check_approver(value)
    return value  # type: ignore[return-value]  # a callable


def _on_stderr(name: str, value: object) -> Callable[[str], object] | None:
    if value is not None and not callable(value):
        raise ConfigError(f"{name} must be a callable of one line (a str), got {value!r}")
    return value


def _retry(name: str, value: object) -> RetryPolicy | None:
    from coding_genesis.retry import RetryPolicy  # lazy: no pydantic at import time

    return RetryPolicy.parse(value)


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
    #: The caller's MCP servers, by name (empty: none of the caller's).
    mcp_servers: Mapping[str, McpServerSpec] = setting(factory=dict, check=_mcp_servers)
    #: Answers the CLI's questions to the user (None: the model is told nobody can).
    asker: Asker | None = setting(None, check=_asker)
    #: Seconds the asker has to answer one question.
    question_timeout: float = setting(120.0, check=required_seconds)
    #: The CLI's system prompt, in place of its own (None: the CLI's).  claude
    #: keeps the first one of a session: a changed one is not sent on ``resume=``.
    system_prompt: str | None = setting(None, check=text)
    #: Text added to the CLI's own system prompt (None: nothing).
    append_system_prompt: str | None = setting(None, check=text)
    #: Directories the CLI may work in (and write in) besides ``cwd``: absolute,
    #: existing (untrusted input may not set them).
    add_dirs: tuple[str, ...] = setting((), check=directories)
    #: Subagents the model may hand a task to, by name (empty: none; claude
    #: alone defines them, untrusted input may not).
    agents: Mapping[str, Subagent] = setting(factory=dict, check=lambda n, v: subagent_table(v))
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
    inherit_env: bool = setting(True, check=flag)
    #: Names (``PREFIX_*`` for a prefix) passed on when ``inherit_env`` is False.
    env_allow: tuple[str, ...] = setting((), check=names)
    #: Signals sent in turn to stop the tree (then SIGKILL).
    stop_signals: tuple[int, ...] = setting((_signal.SIGTERM,), check=signals)
    #: Stop processes of the run still alive after the CLI exited by itself.
    kill_leftovers: bool = setting(True)
    #: The longest stdout line read (a longer one is skipped, counted).
    max_line_bytes: int = setting(DEFAULT_MAX_LINE_BYTES, check=positive)
    #: The stderr kept for the failure analysis.
    stderr_tail_bytes: int = setting(64 * 1024, check=natural)
    #: Retry policy (None: one attempt per request).
    retry: RetryPolicy | None = setting(None, check=_retry)
    #: Text and thinking deltas as the CLI writes them (``stream(partial=True)``).
    partial: bool = setting(False, check=flag)
    #: Each stderr line of the CLI, as it is written (redacted; see observer.StderrLines).
    on_stderr: Callable[[str], object] | None = setting(None, check=_on_stderr)


#: Each setting's (check, merge), by name: what Request.build asks of a given option.
_RULES: dict[str, tuple[Check | None, Merge | None]] = {
    f.name: (f.metadata.get("check"), f.metadata.get("merge")) for f in fields(RequestSettings)
}
#: The stored settings, in order (Request.build reads each from the agent's).
_SETTINGS = tuple(_RULES)

_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,255}$")


def _fork_options(given: dict[str, Any], resume: str | None) -> dict[str, Any]:
    """``fork=`` (a bool) and ``resume_at=`` (a turn id: a session id's shape,
    never read as a flag) of a call resuming ``resume``, checked."""
    fork, at = given.get("fork", False), given.get("resume_at")
    if not isinstance(fork, bool):
        raise ConfigError(f"fork must be True or False, got {fork!r}")
    if at is not None and (not isinstance(at, str) or not _SESSION_ID.match(at)):
        raise ConfigError(f"invalid turn id to resume at: {at!r}")
    if (fork or at is not None) and resume is None:
        raise ConfigError("fork= and resume_at= need resume= (the session to fork)")
    if at is not None and not fork:
        raise ConfigError("resume_at= needs fork=True (the session resumed keeps its turns)")
    return {"fork": fork, "resume_at": at}


#: Added to what the hooks of one hook point may take, so the CLI never gives up first.
_HOOK_MARGIN = 5.0


@dataclass(frozen=True, slots=True)
class Request(RequestSettings):
    """One request, validated once (:meth:`build`): the value every layer reads.

    A backend builds its command from it (``build_command(request)``), a
    control protocol starts and opens its session with it
    (``command(request)``, ``opening(request)``), the supervisor and the
    observers read their views of it.  Each attempt of a retried request reads
    the same request with its own prompt, session and timeout
    (:meth:`retried`); each turn of a live session, the session's with its
    prompt (:meth:`for_turn`).
    """

    #: What the CLI is asked (empty for a session's own request: its turns say).
    prompt: str
    #: The working directory, absolute.
    cwd: str
    #: The backend's name.
    backend: str = ""
    #: The CLI's session (thread) id to continue; None: a new conversation.
    resume: str | None = None
    #: A new session from :attr:`resume`'s history (a live session's ``fork=``).
    fork: bool = False
    #: With :attr:`fork`: the turn of :attr:`resume` the fork's history ends at.
    resume_at: str | None = None
    #: Stable across the attempts of one logical request.
    request_key: str = ""
    #: The options one turn of a live session set for itself (:meth:`for_turn`,
    #: some of :data:`TURN_OPTIONS`): what the capability check's ``turn`` row
    #: asks the session's protocol about (empty: the session's own settings).
    turn_options: frozenset[str] = frozenset()
    #: The permission level the live session opened at (:meth:`for_turn`): the
    #: one a CLI that fixes its rules at start cannot widen from.
    opened_permissions: Permissions | None = None
    #: The live session was opened with an output schema (:meth:`for_turn`).
    opened_schema: bool = False
    #: The prompt's parts beside its text (:mod:`coding_genesis.prompts`:
    #: images read and checked at the door, files made absolute), which the
    #: capability check's ``parts`` row holds to what the backend can send.
    parts: tuple[Image | FileRef, ...] = ()

    @property
    def approvals(self) -> bool:
        """An approver decides: the CLI must ask before each tool call it can ask about."""
        return self.approver is not None

    @property
    def two_way(self) -> bool:
        """An approver, hooks, host tools or an asker: the run speaks the CLI's
        two-way protocol."""
        return (
            self.approver is not None
            or bool(self.hooks)
            or bool(self.tools)
            or self.asker is not None
        )

    @property
    def hook_wait(self) -> float | None:
        """Seconds the CLI should wait for one hook point's answer: every hook of
        the busiest event at its timeout, then the approver (None: no hooks)."""
        if not self.hooks:
            return None
        most = max(len(hooks) for hooks in self.hooks.values())
        wait = most * self.hook_timeout + _HOOK_MARGIN
        if self.approver is not None:
            wait += self.approval_timeout
        return float(math.ceil(wait))

    @property
    def resume_session(self) -> str | None:
        """0.1's name of :attr:`resume` (deprecated)."""
        warnings.warn(
            "Request.resume_session is deprecated: use Request.resume",
            DeprecationWarning,
            stacklevel=2,
        )
        return self.resume

    def retried(self, prompt: str, resume: str | None, timeout: float | None) -> Request:
        """The request of a later attempt (its prompt, session and timeout)."""
        return replace(
            self, prompt=prompt, resume=resume, timeout=self.timeout if timeout is None else timeout
        )

    def moved(self, cwd: str) -> Request:
        """The same request run in ``cwd`` (an isolated run's worktree)."""
        return replace(self, cwd=cwd)

    def for_turn(
        self,
        prompt: object,
        *,
        timeout: object = None,
        model: object = None,
        permissions: object = None,
        output_schema: object = None,
    ) -> Request:
        """One turn of the live session this request opened: its prompt, its
        timeout and the options it sets for itself (:data:`TURN_OPTIONS`; None:
        the session's), each checked by its declaration; the session's other
        settings hold.  Whether the session's protocol can take them is the
        capability check's (its ``turn`` row, from :attr:`turn_options`)."""
        text, parts = checked_prompt(prompt, self.cwd)
        changed: dict[str, Any] = {}
        for name, value in (
            ("model", model),
            ("permissions", permissions),
            ("output_schema", output_schema),
        ):
            check = _RULES[name][0]
            kept = value if value is None or check is None else check(name, value)
            if kept is not None:
                changed[name] = kept
        return replace(
            self,
            prompt=text,
            timeout=self.timeout if timeout is None else required_seconds("timeout", timeout),
            resume=None,  # the session continues by itself
            fork=False,
            resume_at=None,
            request_key=request_key(self.backend, self.cwd, text),
            turn_options=frozenset(changed),
            opened_permissions=self.opened_permissions or self.permissions,
            opened_schema=self.opened_schema or self.output_schema is not None,
            parts=parts,
            **changed,
        )

    @classmethod
    def of(cls, settings: RequestSettings, *, prompt: str, cwd: str, backend: str = "") -> Request:
        """The request ``settings`` make as they are, nothing checked again (a
        replay's, whose run happened elsewhere)."""
        values = {name: getattr(settings, name) for name in _SETTINGS}
        return cls(prompt=prompt, cwd=cwd, backend=backend, **values)

    @classmethod
    def build(
        cls,
        settings: RequestSettings,
        prompt: object,
        call: Mapping[str, object],
        *,
        cwd: str | None,
        backend: str,
        names: frozenset[str] = RUN_OPTION_NAMES,
        called: str = "run()",
        session: bool = False,
    ) -> Request:
        """The one place a call is validated: ``call``'s options (each checked
        by its declaration; None or :data:`~coding_genesis.options.AGENT_DEFAULT`:
        the agent's) over ``settings`` (the agent's).  An unknown keyword is a
        TypeError, a bad value a ConfigError.  ``cwd``: the agent's (None: this
        process's working directory); ``session``: the request of a live
        session (an empty prompt, no retry policy)."""
        unknown = set(call) - names
        if unknown:
            raise TypeError(f"{called} got unexpected keyword argument(s) {sorted(unknown)}")
        values = {name: getattr(settings, name) for name in _SETTINGS}
        where = cwd
        resume: str | None = None
        key: str | None = None
        forked: dict[str, Any] = {}
        for name, value in call.items():
            if value is AGENT_DEFAULT or (value is None and name != "retry"):
                continue
            if name == "cwd":
                where = check_cwd(value)  # type: ignore[arg-type]
            elif name == "resume":
                if not isinstance(value, str) or not _SESSION_ID.match(value):
                    raise ConfigError(f"invalid session id to resume: {value!r}")
                resume = value
            elif name in ("fork", "resume_at"):
                forked[name] = value
            elif name == "request_key":
                if not isinstance(value, str) or not value:
                    raise ConfigError(f"request_key must be a non-empty string, got {value!r}")
                key = value
            elif name in _RULES:
                check, merge = _RULES[name]
                kept = check(name, value) if check is not None else value
                if kept is None and name != "retry":
                    continue  # e.g. model="": the agent's
                values[name] = merge(kept, values[name]) if merge is not None else kept
        forked = _fork_options(forked, resume)
        if where is None:
            where = check_cwd(os.getcwd())
        text, parts = ("", ()) if session and prompt == "" else checked_prompt(prompt, where)
        if session:
            values["retry"] = None  # a turn is never retried
        elif values["cli_max_retries"] is None and values["retry"] is not None:
            values["cli_max_retries"] = DEFAULT_CLI_MAX_RETRIES
        return cls(
            prompt=text,
            cwd=where,
            backend=backend,
            resume=resume,
            request_key=key or request_key(backend, where, text),
            parts=parts,
            **forked,
            **values,
        )


@dataclass(frozen=True, slots=True)
class Unsupported:
    """What a backend cannot do of a request: the keyword refused (``approver``,
    ``hooks``, ``session``, ...) and the one wording of the refusal (see
    :mod:`coding_genesis.capabilities`)."""

    option: str
    message: str


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
