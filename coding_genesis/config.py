"""One frozen configuration object for an agent, validated once.

``CodingGenesisAgent(backend, **settings)`` builds an :class:`AgentConfig`
from its keyword arguments; ``CodingGenesisAgent(config=...)`` takes one as
is; ``RunSpec`` (run_many) and the ``genesis`` CLI build one the same way.  The
supervisor's own settings are derived from it (:meth:`AgentConfig.supervisor`),
never copied by hand.  Nothing here reads the environment: the CLI does that.

Each backend maps the one option vocabulary (``model``, ``permissions``,
``max_turns``, ``cwd``, ...) to its CLI, or reports one it cannot honor as a
warning; a permission level it cannot *enforce* is refused
(:class:`~coding_genesis.errors.ConfigError`): never silently more permissive.
"""

from __future__ import annotations

import inspect
import os
import signal as _signal
from collections.abc import Callable, Mapping, Sequence, Set as AbstractSet
from dataclasses import dataclass, field, fields, replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from coding_genesis._supervision.values import SupervisorConfig
from coding_genesis._util.checks import check_cwd, count, path_or_none, required_seconds, seconds
from coding_genesis._util.parser import DEFAULT_MAX_LINE_BYTES
from coding_genesis._util.schema import OutputSchema, output_schema
from coding_genesis.backend import Permissions, as_backend
from coding_genesis.breaker import CircuitBreaker
from coding_genesis.budget import Budget
from coding_genesis.errors import ConfigError
from coding_genesis.hooks import hook_table
from coding_genesis.options import (
    PERMISSION_LEVELS,
    SETTING_SOURCES,
    Isolation,
    Keep,
    SettingSource,
)
from coding_genesis.request import RetrySetting, SharedOptions

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from coding_genesis._util.clock import Clock
    from coding_genesis.approval import Approver
    from coding_genesis.backend import Backend
    from coding_genesis.hooks import Hooks
    from coding_genesis.observer import Observer
    from coding_genesis.retry import RetryPolicy
    from coding_genesis.tools import HostTool

__all__ = [
    "DEFAULT_CLI_MAX_RETRIES",
    "DEFAULT_TIMEOUT",
    "PERMISSION_LEVELS",
    "SETTING_SOURCES",
    "AgentConfig",
    "AgentSettings",
    "BreakerSetting",
    "Settings",
    "check_approver",
    "check_cli_max_retries",
    "check_cwd",
    "check_max_turns",
    "check_permissions",
    "check_setting_sources",
    "check_tools",
    "permission_levels",
    "require_permissions",
    "require_setting_sources",
    "required_seconds",
    "seconds",
]

DEFAULT_TIMEOUT = 300.0

#: ``circuit_breaker=``: a (shareable) breaker, "default" (one of the agent's own) or None.
BreakerSetting: TypeAlias = "CircuitBreaker | Literal['default'] | None"


class AgentSettings(SharedOptions, total=False):
    """The keywords an :class:`AgentConfig` (and so an agent, and a
    :class:`~coding_genesis.batch.RunSpec`) accepts besides ``backend``, typed
    as accepted: the fields of :class:`AgentConfig`, where each is documented
    (a test checks both name the same settings).  The options a request shares
    with the agent come from :class:`~coding_genesis.request.SharedOptions`."""

    timeout: float
    name: str | None
    cli_path: str | os.PathLike[str] | Sequence[str] | None
    approval_timeout: float
    hook_timeout: float
    tools: Sequence[Callable[..., Any]]
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


#: The cap on a CLI's own API retries when the agent has a retry policy and
#: ``cli_max_retries`` is not given: the CLI absorbs a short blip, and our
#: policy (which knows the category, the backoff and the deadline) decides
#: about anything longer.  Without a retry policy the CLI's own default stays.
DEFAULT_CLI_MAX_RETRIES = 2


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
    :data:`SETTING_SOURCES`, kept in their order."""
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


def require_setting_sources(backend: Backend, sources: tuple[str, ...] | None) -> None:
    """Refuse settings sources ``backend`` cannot be told to read exactly (the
    one wording of this refusal: the agent, a run and a session say it)."""
    if sources is None or sources in backend.setting_sources:
        return
    if not backend.setting_sources:
        raise ConfigError(
            f"backend {backend.name!r} cannot be told which settings to read: "
            f"setting_sources={sources!r} cannot be used"
        )
    can = "; ".join(" + ".join(c) for c in backend.setting_sources)
    raise ConfigError(
        f"backend {backend.name!r} cannot be told to read exactly "
        f"setting_sources={sources!r}; it can read: {can}"
    )


def check_max_turns(value: object) -> int | None:
    return count("max_turns", value, 1)


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


def check_cli_max_retries(value: object) -> int | None:
    return count("cli_max_retries", value, 0)


def permission_levels(backend: Backend) -> frozenset[str]:
    """The levels ``backend`` can enforce (none unless it declares them)."""
    return backend.permission_levels


def require_permissions(backend: Backend, permissions: str | None) -> None:
    """Refuse a level ``backend`` cannot enforce."""
    if permissions is None:
        return
    levels = permission_levels(backend)
    if permissions not in levels:
        can = ", ".join(level for level in PERMISSION_LEVELS if level in levels) or "none"
        raise ConfigError(
            f"backend {backend.name!r} cannot enforce permissions={permissions!r} "
            f"(it can enforce: {can}); refusing rather than running with more permissions"
        )


@dataclass(frozen=True, slots=True)
class AgentConfig:
    """Everything an agent needs, checked at construction.

    Paths are made absolute; durations are finite seconds; ``retry`` accepts
    what :meth:`RetryPolicy.parse` accepts.  Derive variants with
    :meth:`replace`.
    """

    #: Backend name (see ``coding_genesis.backends``) or a Backend object.
    backend: str | Backend = "claude"
    #: Wall-clock limit of one attempt, in seconds.
    timeout: float = DEFAULT_TIMEOUT
    #: Working directory of the CLI (None: the caller's at run time).
    cwd: str | None = None
    #: The agent's name in events (None: "<backend>-agent").
    name: str | None = None
    #: The CLI program, with optional leading arguments (None: found on PATH).
    cli_path: tuple[str, ...] | None = None
    model: str | None = None
    #: One permission level across CLIs: "read-only", "edit" or "full" (None:
    #: the CLI's default); a level the backend cannot enforce is a ConfigError.
    permissions: Permissions | None = None
    #: The CLI's own turn limit (None: the CLI's default).
    max_turns: int | None = None
    #: Cap on the CLI's own API retries where it allows one (None: the CLI's
    #: default, or :data:`DEFAULT_CLI_MAX_RETRIES` under a retry policy).
    cli_max_retries: int | None = None
    #: Decides each tool call the CLI asks to make (coding_genesis.approval): a run
    #: with an approver speaks the CLI's two-way protocol.  None: ``permissions``.
    approver: Approver | None = None
    #: Seconds an approver has to answer before the tool call is denied.
    approval_timeout: float = 60.0
    #: Code run at hook points of each turn (coding_genesis.hooks): event ->
    #: hook or hooks.  A run with hooks speaks the CLI's two-way protocol.
    hooks: Hooks | None = None
    #: Seconds each hook has to answer (a ``pre_tool`` hook that does not blocks).
    hook_timeout: float = 30.0
    #: The shape of every answer: a JSON Schema (its root an object) or a
    #: pydantic model class, given to the CLI; the result's ``output`` holds
    #: the validated answer (None: a free answer).  Checked once: held as the
    #: checked schema (its JSON Schema, and the pydantic model if one was given).
    output_schema: OutputSchema | None = None
    #: The caller's functions the model may call (coding_genesis.tools): plain
    #: functions or ``@tool`` ones; a run with tools speaks the CLI's two-way protocol.
    tools: tuple[HostTool, ...] = ()
    #: The settings the CLI reads: "user" (the home directory's), "project"
    #: (the working directory's, shared through the repository), "local" (the
    #: working directory's own).  None: the user's alone, so that no program
    #: the working directory names (hooks, MCP servers, helpers, plugins) runs;
    #: each backend's safe start and what it cannot disable: docs/security.md.
    #: A source a backend cannot be told to read exactly is a ConfigError.
    setting_sources: tuple[SettingSource, ...] | None = None
    #: Seconds between each stop signal and the next (then SIGKILL).
    grace: float = 5.0
    #: Stop when stdout is silent this long (None: never).
    idle_timeout: float | None = None
    #: Stop a run whose whole process tree wrote nothing on stdout or stderr and
    #: used under 1% of one core for this long (None: never).  Generous by
    #: default: a tool waiting silently on something outside the tree (the
    #: network, a daemon, a ``sleep``) looks stalled.
    stall_timeout: float | None = 600.0
    #: Stop a CLI still running this long after its result (None: never).
    linger: float | None = 2.0
    #: After the CLI exits, how long its pipes may stay open.
    eof_grace: float = 0.5
    stop_signals: tuple[int, ...] = (_signal.SIGTERM,)
    #: Stop processes of the run still alive after the CLI exited by itself.
    kill_leftovers: bool = True
    #: Variables added to the CLI's environment (after the backend's own).
    env: Mapping[str, str] = field(default_factory=dict)
    #: True (the default): the CLI inherits this process's whole environment,
    #: every credential in it included.  False: only a minimal environment, the
    #: backend's declared needs, ``env_allow`` and ``env`` (docs/security.md).
    inherit_env: bool = True
    #: Names (``PREFIX_*`` for a prefix) passed on when ``inherit_env`` is False.
    env_allow: tuple[str, ...] = ()
    #: Extra CLI arguments.
    extra_args: tuple[str, ...] = ()
    #: The node interpreter for a backend whose CLI is a node script run without
    #: its wrapper (qwen; see coding_genesis.backend.NodeScript).  None: a recent enough
    #: ``node`` on PATH, else the one installed beside the CLI's package.
    node_path: str | None = None
    #: Backend options (validated against the backend's list by the agent).
    options: Mapping[str, Any] = field(default_factory=dict)
    max_line_bytes: int = DEFAULT_MAX_LINE_BYTES
    stderr_tail_bytes: int = 64 * 1024
    #: Retry policy (None: one attempt per request).
    retry: RetryPolicy | None = None
    #: Shared circuit breaker (a :class:`~coding_genesis.breaker.CircuitBreaker`);
    #: "default": a breaker of the agent's own; None: none.
    circuit_breaker: CircuitBreaker | Literal["default"] | None = "default"
    #: Time source of the retry loop and the breaker (None: the current clock).
    clock: Clock | None = None
    #: Directory of per-run transcripts (None: none are written).
    transcripts: str | None = None
    #: Raw stdout a transcript records per run at most (the run goes on past it;
    #: its warnings say where recording stopped).
    transcript_max_bytes: int = 1 << 30
    #: None: the run edits ``cwd`` itself; "worktree": each run happens in a fresh
    #: git worktree on a new branch (docs/isolation.md).
    isolation: Isolation | None = None
    #: The commit the run's branch starts from (None: ``HEAD`` of the ``cwd`` repository).
    isolation_base: str | None = None
    #: Carry the checkout's uncommitted changes (untracked files too) into the worktree.
    carry_uncommitted: bool = False
    #: Keep the worktree after the run: "never", "on_failure" or "always"
    #: (the branch stays in every case unless ``keep_branch`` is False).
    keep: Keep = "never"
    keep_branch: bool = True
    #: Put the full diff of an isolated run in ``changes["diff"]``.
    include_diff: bool = False
    #: Where worktrees go (None: a private directory under the temp directory).
    worktrees_dir: str | None = None
    #: A command (argv list) run in the run's directory after the agent succeeded;
    #: failing, the run fails with category ``verify_failed``.
    verify: tuple[str, ...] | None = None
    #: The verify command's own wall-clock limit, in seconds.
    verify_timeout: float = DEFAULT_TIMEOUT
    #: File the run log is appended to (None: no run log).
    run_log: str | None = None
    #: Further observers of every run (see coding_genesis.observer).
    observers: tuple[Observer, ...] = ()
    #: Meter usage, cost, context use and latency of every run (docs/metering.md).
    metering: bool = True
    #: Price-table overrides: model-id prefix -> ModelPrice or a dict of its
    #: fields, USD per million tokens (the bundled table: docs/metering.md).
    prices: Mapping[str, Any] | None = None
    #: Limits on cost, tokens, turns, tool calls, enforced mid-run (coding_genesis.budget);
    #: one pot shared by everything it is given to unless ``per_run``.
    #: A :class:`~coding_genesis.budget.Budget`, or None.
    budget: Budget | None = None
    #: Run ledger directory (docs/supervision.md): None: the default
    #: location ($XDG_RUNTIME_DIR/coding-genesis, else a private directory in
    #: /dev/shm or under the temp directory); False: no ledger (the parent-death signal is then the
    #: only protection against a runner's death).
    ledger: str | bool | None = None
    #: OpenTelemetry spans (docs/telemetry.md): emitted whenever
    #: ``opentelemetry-api`` is importable (a no-op until an SDK is configured);
    #: False: none, and no ``TRACEPARENT`` is given to the CLI.
    telemetry: bool = True
    #: Record the prompt, the answer and tool arguments/results on the spans
    #: (opt-in; secrets are masked).  False: no text, only counts and names.
    telemetry_content: bool = False

    def __post_init__(self) -> None:
        set_ = object.__setattr__
        backend = self.backend
        if not isinstance(backend, str):
            try:  # a plug-in object of 0.1.0's Protocol is wrapped once, here
                set_(self, "backend", as_backend(backend))
            except ConfigError:
                raise ConfigError(
                    f"backend must be a backend name or a Backend object, got {backend!r}"
                ) from None
        set_(self, "timeout", required_seconds("timeout", self.timeout))
        set_(self, "grace", required_seconds("grace", self.grace, allow_zero=True))
        set_(self, "idle_timeout", seconds("idle_timeout", self.idle_timeout, allow_none=True))
        set_(self, "stall_timeout", seconds("stall_timeout", self.stall_timeout, allow_none=True))
        set_(
            self,
            "linger",
            seconds("linger", self.linger, allow_none=True, allow_zero=True),
        )
        set_(self, "eof_grace", required_seconds("eof_grace", self.eof_grace, allow_zero=True))
        self._check_isolation()
        if self.cwd is not None:
            set_(self, "cwd", check_cwd(self.cwd))
        if self.name is not None and (not isinstance(self.name, str) or not self.name):
            raise ConfigError(f"name must be a non-empty string, got {self.name!r}")
        cli = self.cli_path
        if isinstance(cli, str | os.PathLike):
            cli = (os.fspath(cli),)
        elif cli is not None:
            if isinstance(cli, bytes) or not isinstance(cli, Sequence):
                raise ConfigError(f"cli_path must be a path or a list of strings, got {cli!r}")
            cli = tuple(os.fspath(p) for p in cli)
            if not cli:
                raise ConfigError("cli_path must not be empty")
        if cli is not None and any(not part or "\0" in part for part in cli):
            raise ConfigError("cli_path parts must be non-empty strings without NUL bytes")
        set_(self, "cli_path", cli)
        if self.model is not None and (not isinstance(self.model, str) or "\0" in self.model):
            raise ConfigError(f"model must be a string, got {self.model!r}")
        set_(self, "permissions", check_permissions(self.permissions))
        set_(self, "max_turns", check_max_turns(self.max_turns))
        set_(self, "cli_max_retries", check_cli_max_retries(self.cli_max_retries))
        check_approver(self.approver)
        set_(self, "approval_timeout", required_seconds("approval_timeout", self.approval_timeout))
        set_(self, "hooks", hook_table(self.hooks) or None)
        set_(self, "hook_timeout", required_seconds("hook_timeout", self.hook_timeout))
        if self.output_schema is not None:
            set_(self, "output_schema", output_schema(self.output_schema))
        set_(self, "tools", check_tools(self.tools))
        set_(self, "setting_sources", check_setting_sources(self.setting_sources))
        if isinstance(self.max_line_bytes, bool) or not isinstance(self.max_line_bytes, int):
            raise ConfigError(
                f"max_line_bytes must be a positive integer, got {self.max_line_bytes!r}"
            )
        if self.max_line_bytes < 1:
            raise ConfigError(
                f"max_line_bytes must be a positive integer, got {self.max_line_bytes!r}"
            )
        tail = self.stderr_tail_bytes
        if isinstance(tail, bool) or not isinstance(tail, int) or tail < 0:
            raise ConfigError(f"stderr_tail_bytes must be a non-negative integer, got {tail!r}")
        node = self.node_path
        if node is not None and (not isinstance(node, str) or not node or "\0" in node):
            raise ConfigError(f"node_path must be a non-empty path, got {node!r}")
        if node is not None and os.sep in node:
            set_(self, "node_path", os.path.abspath(os.path.expanduser(node)))
        signals = tuple(int(s) for s in self.stop_signals)
        for signum in signals:
            try:
                _signal.Signals(signum)
            except ValueError:
                raise ConfigError(f"unknown signal {signum!r} in stop_signals") from None
        set_(self, "stop_signals", signals)
        if isinstance(self.extra_args, str) or any(
            not isinstance(a, str) or "\0" in a for a in self.extra_args
        ):
            raise ConfigError("extra_args must be a list of strings without NUL bytes")
        set_(self, "extra_args", tuple(self.extra_args))
        if not isinstance(self.env, Mapping) or any(
            not isinstance(k, str) or not isinstance(v, str) or not k or "=" in k or "\0" in k + v
            for k, v in self.env.items()
        ):
            raise ConfigError("env must map variable names to string values")
        set_(self, "env", dict(self.env))
        if not isinstance(self.inherit_env, bool):
            raise ConfigError(f"inherit_env must be True or False, got {self.inherit_env!r}")
        if isinstance(self.env_allow, str) or any(
            not isinstance(a, str) or not a for a in self.env_allow
        ):
            raise ConfigError("env_allow must be a list of variable names")
        set_(self, "env_allow", tuple(self.env_allow))
        if not isinstance(self.options, Mapping):
            raise ConfigError(f"options must be a mapping, got {self.options!r}")
        set_(self, "options", dict(self.options))
        from coding_genesis.retry import RetryPolicy  # lazy: no pydantic at import time

        set_(self, "retry", RetryPolicy.parse(self.retry))
        breaker = self.circuit_breaker
        if breaker is not None and breaker != "default" and not isinstance(breaker, CircuitBreaker):
            raise ConfigError(
                f"circuit_breaker must be a CircuitBreaker, 'default' or None, got {breaker!r}"
            )
        set_(self, "transcripts", path_or_none("transcripts", self.transcripts))
        if (
            not isinstance(self.transcript_max_bytes, int)
            or isinstance(self.transcript_max_bytes, bool)
            or self.transcript_max_bytes < 1
        ):
            raise ConfigError(
                f"transcript_max_bytes must be a positive integer, got {self.transcript_max_bytes!r}"
            )
        set_(self, "run_log", path_or_none("run_log", self.run_log))
        set_(self, "observers", tuple(self.observers))
        for flag in ("telemetry", "telemetry_content"):
            if not isinstance(getattr(self, flag), bool):
                raise ConfigError(f"{flag} must be True or False, got {getattr(self, flag)!r}")
        if not isinstance(self.metering, bool):
            raise ConfigError(f"metering must be True or False, got {self.metering!r}")
        if self.prices is not None:  # its prices are checked by the agent, which builds the table
            set_(self, "prices", dict(self.prices))
        if self.budget is not None:
            if not isinstance(self.budget, Budget):
                raise ConfigError(f"budget must be a Budget, got {self.budget!r}")
            if not self.metering:
                raise ConfigError("a budget needs metering (metering=True)")
        if self.ledger is not None and self.ledger is not False:
            if self.ledger is True:
                set_(self, "ledger", None)
            else:
                set_(self, "ledger", path_or_none("ledger", self.ledger))

    def _check_isolation(self) -> None:
        set_ = object.__setattr__
        if self.isolation not in (None, "worktree"):
            raise ConfigError(f"isolation must be None or 'worktree', got {self.isolation!r}")
        base = self.isolation_base
        if base is not None and (
            not isinstance(base, str) or not base or base.startswith("-") or "\0" in base
        ):
            raise ConfigError(f"isolation_base must be a commit or branch name, got {base!r}")
        for name in ("carry_uncommitted", "keep_branch", "include_diff"):
            if not isinstance(getattr(self, name), bool):
                raise ConfigError(f"{name} must be True or False, got {getattr(self, name)!r}")
        if self.keep not in ("never", "on_failure", "always"):
            raise ConfigError(f"keep must be 'never', 'on_failure' or 'always', got {self.keep!r}")
        set_(self, "worktrees_dir", path_or_none("worktrees_dir", self.worktrees_dir))
        verify = self.verify
        if verify is not None:
            if isinstance(verify, str | bytes) or not isinstance(verify, Sequence):
                raise ConfigError(
                    f"verify must be a command as a list of strings (no shell), got {verify!r}"
                )
            verify = tuple(verify)
            if not verify or any(not isinstance(a, str) or "\0" in a for a in verify):
                raise ConfigError("verify must be a non-empty list of strings without NUL bytes")
            if not verify[0]:
                raise ConfigError("verify's program must not be empty")
            set_(self, "verify", verify)
        set_(self, "verify_timeout", required_seconds("verify_timeout", self.verify_timeout))

    if TYPE_CHECKING:
        # What the constructor accepts (a path or a list where a tuple is
        # stored, "default" or a number for a retry policy, ...).
        def __init__(
            self, backend: str | Backend = "claude", **settings: Unpack[AgentSettings]
        ) -> None: ...

    def replace(self, **changes: Unpack[Settings]) -> AgentConfig:
        """A copy with ``changes`` applied (validated again)."""
        accepted: dict[str, Any] = dict(changes)  # checked again by __post_init__
        return replace(self, **accepted)

    def supervisor(
        self, timeout: float | None = None, *, pdeath_signal: int | None = _signal.SIGTERM
    ) -> SupervisorConfig:
        """The supervisor's settings for one attempt (``pdeath_signal``: the backend's)."""
        return SupervisorConfig(
            pdeath_signal=pdeath_signal,
            timeout=self.timeout if timeout is None else timeout,
            grace=self.grace,
            idle_timeout=self.idle_timeout,
            stall_timeout=self.stall_timeout,
            linger=self.linger,
            eof_grace=self.eof_grace,
            stop_signals=self.stop_signals,
            kill_leftovers=self.kill_leftovers,
            stderr_tail_bytes=self.stderr_tail_bytes,
        )

    @classmethod
    def field_names(cls) -> tuple[str, ...]:
        return tuple(f.name for f in fields(cls))


def _show_accepted_types() -> None:
    """``inspect.signature(AgentConfig)`` shows each setting typed as accepted
    (:class:`Settings`), as type checkers see it."""
    init: Any = AgentConfig.__init__
    shown = inspect.signature(init)
    accepted = {
        name: getattr(hint, "__forward_arg__", hint)
        for name, hint in Settings.__annotations__.items()
    }
    init.__signature__ = shown.replace(
        parameters=[
            p.replace(annotation=accepted.get(p.name, p.annotation))
            for p in shown.parameters.values()
        ]
    )


_show_accepted_types()
