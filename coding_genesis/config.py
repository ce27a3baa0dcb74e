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
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, fields, replace
from typing import TYPE_CHECKING, Any, Literal, TypeAlias

from coding_genesis._supervision.values import SupervisorConfig
from coding_genesis._util.checks import (
    check_cwd,
    count,
    flag,
    path_or_none,
    positive,
    required_seconds,
    seconds,
)
from coding_genesis.backend import as_backend
from coding_genesis.breaker import CircuitBreaker
from coding_genesis.budget import Budget
from coding_genesis.errors import ConfigError
from coding_genesis.options import PERMISSION_LEVELS, SETTING_SOURCES, Isolation, Keep
from coding_genesis.request import (
    DEFAULT_CLI_MAX_RETRIES,
    DEFAULT_TIMEOUT,
    RequestSettings,
    RetrySetting,
    SharedOptions,
    check_approver,
    check_fields,
    check_permissions,
    check_setting_sources,
    check_tools,
    setting,
)

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from coding_genesis._util.clock import Clock
    from coding_genesis.backend import Backend
    from coding_genesis.observer import Observer
    from coding_genesis.questions import Asker
    from coding_genesis.tools import McpServerSpec

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
    partial: bool
    on_stderr: Callable[[str], object] | None
    mcp_servers: Mapping[str, McpServerSpec | Mapping[str, Any]]
    asker: Asker | None
    question_timeout: float
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


def _backend(name: str, value: object) -> str | Backend:
    if isinstance(value, str):
        return value
    try:  # a plug-in object of 0.1.0's Protocol is wrapped once, here
        return as_backend(value)
    except ConfigError:
        raise ConfigError(
            f"backend must be a backend name or a Backend object, got {value!r}"
        ) from None


def _cwd(name: str, value: object) -> str | None:
    return None if value is None else check_cwd(value)  # type: ignore[arg-type]


def _name(name: str, value: object) -> str | None:
    if value is not None and (not isinstance(value, str) or not value):
        raise ConfigError(f"name must be a non-empty string, got {value!r}")
    return value


def _breaker(name: str, value: object) -> object:
    if value is not None and value != "default" and not isinstance(value, CircuitBreaker):
        raise ConfigError(
            f"circuit_breaker must be a CircuitBreaker, 'default' or None, got {value!r}"
        )
    return value


def _isolation(name: str, value: object) -> object:
    if value not in (None, "worktree"):
        raise ConfigError(f"isolation must be None or 'worktree', got {value!r}")
    return value


def _base(name: str, value: object) -> object:
    if value is not None and (
        not isinstance(value, str) or not value or value.startswith("-") or "\0" in value
    ):
        raise ConfigError(f"isolation_base must be a commit or branch name, got {value!r}")
    return value


def _keep(name: str, value: object) -> object:
    if value not in ("never", "on_failure", "always"):
        raise ConfigError(f"keep must be 'never', 'on_failure' or 'always', got {value!r}")
    return value


def _verify(name: str, value: object) -> tuple[str, ...] | None:
    if value is None:
        return None
    if isinstance(value, str | bytes) or not isinstance(value, Sequence):
        raise ConfigError(
            f"verify must be a command as a list of strings (no shell), got {value!r}"
        )
    verify = tuple(value)
    if not verify or any(not isinstance(a, str) or "\0" in a for a in verify):
        raise ConfigError("verify must be a non-empty list of strings without NUL bytes")
    if not verify[0]:
        raise ConfigError("verify's program must not be empty")
    return verify


def _prices(name: str, value: object) -> dict[str, Any] | None:
    # its prices are checked by the agent, which builds the table
    return None if value is None else dict(value)  # type: ignore[call-overload]


def _budget(name: str, value: object) -> object:
    if value is not None and not isinstance(value, Budget):
        raise ConfigError(f"budget must be a Budget, got {value!r}")
    return value


def _ledger(name: str, value: object) -> str | bool | None:
    if value is None or value is False:
        return value
    if value is True:
        return None
    return path_or_none(name, value)


@dataclass(frozen=True, slots=True)
class AgentConfig(RequestSettings):
    """Everything an agent needs, checked at construction: the options of
    every request it runs (:class:`~coding_genesis.request.RequestSettings`,
    inherited: its defaults) and its own settings below.

    Paths are made absolute; durations are finite seconds; ``retry`` accepts
    what :meth:`RetryPolicy.parse` accepts.  Derive variants with
    :meth:`replace`.
    """

    #: Backend name (see ``coding_genesis.backends``) or a Backend object.
    backend: str | Backend = setting("claude", check=_backend)
    #: Working directory of the CLI (None: the caller's at run time).
    cwd: str | None = setting(None, check=_cwd)
    #: The agent's name in events (None: "<backend>-agent"; a secret in it is masked).
    name: str | None = setting(None, check=_name)
    #: Shared circuit breaker (a :class:`~coding_genesis.breaker.CircuitBreaker`);
    #: "default": a breaker of the agent's own; None: none.
    circuit_breaker: CircuitBreaker | Literal["default"] | None = setting("default", check=_breaker)
    #: Time source of the retry loop and the breaker (None: the current clock).
    clock: Clock | None = None
    #: Directory of per-run transcripts (None: none are written).
    transcripts: str | None = setting(None, check=path_or_none)
    #: Raw stdout a transcript records per run at most (the run goes on past it;
    #: its warnings say where recording stopped).
    transcript_max_bytes: int = setting(1 << 30, check=positive)
    #: None: the run edits ``cwd`` itself; "worktree": each run happens in a fresh
    #: git worktree on a new branch (docs/isolation.md).
    isolation: Isolation | None = setting(None, check=_isolation)
    #: The commit the run's branch starts from (None: ``HEAD`` of the ``cwd`` repository).
    isolation_base: str | None = setting(None, check=_base)
    #: Carry the checkout's uncommitted changes (untracked files too) into the worktree.
    carry_uncommitted: bool = setting(False, check=flag)
    #: Keep the worktree after the run: "never", "on_failure" or "always"
    #: (the branch stays in every case unless ``keep_branch`` is False).
    keep: Keep = setting("never", check=_keep)
    keep_branch: bool = setting(True, check=flag)
    #: Put the full diff of an isolated run in ``changes["diff"]``.
    include_diff: bool = setting(False, check=flag)
    #: Where worktrees go (None: a private directory under the temp directory).
    worktrees_dir: str | None = setting(None, check=path_or_none)
    #: A command (argv list) run in the run's directory after the agent succeeded;
    #: failing, the run fails with category ``verify_failed``.
    verify: tuple[str, ...] | None = setting(None, check=_verify)
    #: The verify command's own wall-clock limit, in seconds.
    verify_timeout: float = setting(DEFAULT_TIMEOUT, check=required_seconds)
    #: File the run log is appended to (None: no run log).
    run_log: str | None = setting(None, check=path_or_none)
    #: Further observers of every run (see coding_genesis.observer).
    observers: tuple[Observer, ...] = setting((), check=lambda n, v: tuple(v))
    #: Meter usage, cost, context use and latency of every run (docs/metering.md).
    metering: bool = setting(True, check=flag)
    #: Price-table overrides: model-id prefix -> ModelPrice or a dict of its
    #: fields, USD per million tokens (the bundled table: docs/metering.md).
    prices: Mapping[str, Any] | None = setting(None, check=_prices)
    #: Limits on cost, tokens, turns, tool calls, enforced mid-run; one pot shared
    #: by everything it is given to unless ``per_run``.
    #: A :class:`~coding_genesis.budget.Budget`, or None.
    budget: Budget | None = setting(None, check=_budget)
    #: Run ledger directory (docs/supervision.md): None: the default
    #: location ($XDG_RUNTIME_DIR/coding-genesis, else a private directory in
    #: /dev/shm or under the temp directory); False: no ledger (the parent-death signal is then the
    #: only protection against a runner's death).
    ledger: str | bool | None = setting(None, check=_ledger)
    #: OpenTelemetry spans (docs/telemetry.md): emitted whenever
    #: ``opentelemetry-api`` is importable (a no-op until an SDK is configured);
    #: False: none, and no ``TRACEPARENT`` is given to the CLI.
    telemetry: bool = setting(True, check=flag)
    #: Record the prompt, the answer and tool arguments/results on the spans
    #: (opt-in; secrets are masked).  False: no text, only counts and names.
    telemetry_content: bool = setting(False, check=flag)

    def __post_init__(self) -> None:
        check_fields(self)
        if self.budget is not None and not self.metering:
            raise ConfigError("a budget needs metering (metering=True)")

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
        return SupervisorConfig.from_request(self, pdeath_signal=pdeath_signal, timeout=timeout)

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
