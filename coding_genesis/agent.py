"""``CodingGenesisAgent``: the state machine (READY, BUSY, DEGRADED) and the
wiring of one request's pipeline::

    request → attempt (spawn, supervise, decode) → outcome → result
            → failure analysis → decision (done, retry, degrade) → response

Each part is a unit of its own (see the architecture page); the retry policy is
:mod:`~coding_genesis.retry`'s and observers plug in through
:mod:`~coding_genesis.observer`.  The agent holds the state machine, resolves the
backend in the registry and builds what the pipeline is handed: the observers and
the wrappers around a run (isolation, verify).
"""

from __future__ import annotations

import functools
import inspect
import os
import uuid
import warnings
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, cast

import anyio

from coding_genesis._live.opening import one_turn
from coding_genesis._observers.prices import PriceTable
from coding_genesis._observers.runlog import RunLogObserver
from coding_genesis._observers.stderr_lines import StderrLines
from coding_genesis._observers.transcript import TranscriptObserver
from coding_genesis._pipeline.bus import EventStream, Subscription
from coding_genesis._pipeline.fanout import adapt_observer
from coding_genesis._pipeline.run import RunWiring, WrappersFactory
from coding_genesis._pipeline.runner import Runner
from coding_genesis._supervision.ledger import Ledger
from coding_genesis._supervision.values import StopReason
from coding_genesis._util.clock import Clock
from coding_genesis._util.loops import running_event_loop
from coding_genesis._util.signatures import keyword_parameters, show_keywords
from coding_genesis._workspace.sweep import sweep
from coding_genesis.backend import Backend
from coding_genesis.breaker import CircuitBreaker
from coding_genesis.capabilities import backends_that, check, require
from coding_genesis.config import (
    DEFAULT_TIMEOUT,
    AgentConfig,
    AgentSettings,
)
from coding_genesis.errors import AgentUsageError, ConfigError
from coding_genesis.observer import Observer
from coding_genesis.options import AGENT_DEFAULT, KEEP_RESULTS
from coding_genesis.request import RUN_OPTION_NAMES, LiveOptions, RunOptions
from coding_genesis.result import RunResponse, RunResult
from coding_genesis.retry import RetryPolicy
from coding_genesis.run_events import RunEvent
from coding_genesis.session import Session, SyncSession
from coding_genesis.status import AgentState

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from coding_genesis.events import Event
    from coding_genesis.prompts import Prompt

__all__ = ["DEFAULT_TIMEOUT", "CodingGenesisAgent"]

#: What ``inspect.signature`` shows for ``**options``: each run option, typed,
#: defaulting to the agent's setting.
_RUN_KEYWORDS = keyword_parameters(RunOptions.__annotations__, AGENT_DEFAULT)
#: ... and for a session's ``**options``.
_LIVE_KEYWORDS = keyword_parameters(LiveOptions.__annotations__, AGENT_DEFAULT)
#: ... and for the constructor's ``**settings``: each AgentConfig field, typed as
#: accepted, with its default.
_SETTING_KEYWORDS = keyword_parameters(
    AgentSettings.__annotations__,
    {
        name: parameter.default
        for name, parameter in inspect.signature(AgentConfig).parameters.items()
    },
)


class CodingGenesisAgent:
    """Runs one coding-agent CLI request at a time and always answers with a dict.

    States: ``READY`` → ``BUSY`` while a run is in flight → ``READY`` after any
    outcome (success, failure, timeout, crash, cancellation).  A request made
    while ``BUSY`` is answered at once with status 75 and starts nothing.

    Settings are one frozen :class:`~coding_genesis.config.AgentConfig`: pass
    ``config=`` or its fields as keyword arguments.  ``retry=`` (a
    :class:`~coding_genesis.retry.RetryPolicy`, "default" or a number of
    retries) retries failures per category, resuming the CLI session; without
    it a request is one attempt.  ``circuit_breaker=`` (a
    :class:`~coding_genesis.breaker.CircuitBreaker`, shareable between agents)
    makes the agent ``DEGRADED`` (status 69 at once) after repeated failures
    no retry fixes (CLI missing, auth) until a cooldown passes and a probe
    succeeds.

    The library writes nothing to disk unless asked: ``transcripts=DIR`` and
    ``run_log=FILE`` turn those observers on (the ``genesis`` CLI does).
    Every state change and every normalized run event is published to
    :meth:`subscribe` callbacks and :meth:`events` streams.
    """

    @show_keywords(_SETTING_KEYWORDS)
    def __init__(
        self,
        backend: str | Backend | None = None,
        *,
        config: AgentConfig | None = None,
        **settings: Unpack[AgentSettings],
    ) -> None:
        if config is not None and not isinstance(config, AgentConfig):
            raise ConfigError(f"config must be an AgentConfig, got {config!r}")
        given: dict[str, Any] = dict(settings)
        if backend is not None:
            given["backend"] = backend
        unknown = sorted(set(given) - set(AgentConfig.field_names()))
        if unknown:
            raise ConfigError(
                f"unknown setting(s) {', '.join(map(repr, unknown))}; "
                f"valid: {', '.join(AgentConfig.field_names())}"
            )
        try:
            if config is None:
                cfg = AgentConfig(**given)
            else:
                cfg = config.replace(**given) if given else config
        except TypeError as exc:  # a field of the wrong shape (e.g. not iterable)
            raise ConfigError(str(exc)) from None
        if isinstance(cfg.backend, str):
            # lazy: the registry loads every backend: only when one is named
            from coding_genesis.backends import get_backend

            self._backend: Backend = get_backend(cfg.backend)
        else:
            self._backend = cfg.backend
        require(self._backend, cfg, "run")
        self.config = cfg
        breaker = cfg.circuit_breaker  # checked by AgentConfig: a CircuitBreaker
        self._breaker = CircuitBreaker() if breaker == "default" else breaker
        if cfg.prices is not None:
            PriceTable(cfg.prices)  # a ConfigError when bad
        self._wiring = RunWiring(
            cfg,
            self._backend,
            cfg.name or f"{self._backend.name}-agent",
            _observers_of(cfg),
            _wrappers_of(cfg),
            _sweep,
            one_turn=one_turn,
        )
        #: The agent's name, a secret in it masked (what its answers, events,
        #: transcripts, spans and logs carry: one value, masked once).
        self.name = self._wiring.name
        self._bus = self._wiring.bus
        self._runner = Runner(self._wiring, self._breaker, check)

    # -- introspection -------------------------------------------------

    @property
    def timeout(self) -> float:
        """Wall-clock limit of one run, in seconds (300.0 by default)."""
        return self.config.timeout

    @property
    def state(self) -> AgentState:
        """BUSY while a run is in flight; otherwise DEGRADED exactly while the
        circuit breaker is open (it may be shared: another agent may have
        opened or closed it), else READY."""
        return self._runner.state

    @property
    def state_reason(self) -> str:
        return self._runner.state_reason

    @property
    def backend(self) -> Backend:
        return self._backend

    @property
    def backend_name(self) -> str:
        return self._backend.name

    @property
    def retry_policy(self) -> RetryPolicy | None:
        """The agent's retry policy (None: one attempt per request)."""
        return self.config.retry

    @property
    def circuit_breaker(self) -> CircuitBreaker | None:
        return self._breaker

    @property
    def consecutive_failures(self) -> int:
        """Requests in a row that failed in a way that trips the circuit breaker."""
        return self._breaker.consecutive if self._breaker is not None else 0

    @property
    def cooldown_remaining(self) -> float:
        """Seconds before a DEGRADED agent accepts a probe request (0 otherwise)."""
        if self._breaker is None:
            return 0.0
        return self._breaker.remaining(self._clock().monotonic())

    def reset_circuit(self, reason: str = "circuit reset by hand") -> None:
        """Close the circuit breaker: a DEGRADED agent becomes READY at once."""
        self._runner.reset_circuit(reason)

    @property
    def transcript_dir(self) -> str | None:
        """Directory holding one sub-directory per run, or None when transcripts are off."""
        return self.config.transcripts

    @property
    def last_result(self) -> RunResult | None:
        """The typed model behind the dict of the last run."""
        return self._runner.last

    def __repr__(self) -> str:
        return (
            f"CodingGenesisAgent(backend={self.backend_name!r}, name={self.name!r}, "
            f"state={self.state.value})"
        )

    # -- events --------------------------------------------------------

    def subscribe(self, callback: Callable[[RunEvent], object]) -> Subscription:
        """Call ``callback(event)`` for every event; returns an unsubscribe handle."""
        # Everything published is one of the concrete events RunEvent names.
        return self._bus.subscribe(cast("Callable[[Event], object]", callback))

    def events(self, max_buffer: int = 10_000) -> EventStream:
        """An async iterator of events from now on (use ``async with``)."""
        return self._bus.stream(max_buffer)

    def _clock(self) -> Clock:
        return self._wiring.clock()

    # -- running -------------------------------------------------------

    @show_keywords(_RUN_KEYWORDS)
    def run_sync(self, prompt: Prompt, **options: Unpack[RunOptions]) -> RunResponse:
        """Blocking :meth:`run` for code without an event loop."""
        library = running_event_loop()
        if library is not None:
            raise AgentUsageError(
                f"run_sync() cannot be called from a running {library} event loop; "
                "use `await agent.run(...)`"
            )
        return anyio.run(functools.partial(self.run, prompt, **options))

    @show_keywords(_RUN_KEYWORDS)
    async def run(self, prompt: Prompt, **options: Unpack[RunOptions]) -> RunResponse:
        """Run one request; return the response dict.  Never raises for a
        runtime failure; re-raises cancellation after the process tree is gone.

        The options (:class:`~coding_genesis.request.RunOptions`) override the
        agent's settings for this call; ``retry`` overrides its retry policy
        (None: one attempt).
        """
        result = await self.run_result(prompt, **options)
        return result.to_dict()

    @show_keywords(_RUN_KEYWORDS)
    async def run_result(self, prompt: Prompt, **options: Unpack[RunOptions]) -> RunResult:
        """:meth:`run` (the same arguments), returning the typed
        :class:`RunResult` behind the dict."""
        unknown = set(options) - RUN_OPTION_NAMES
        if unknown:
            raise TypeError(f"run() got unexpected keyword argument(s) {sorted(unknown)}")
        if AGENT_DEFAULT in options.values():  # given as its signature shows it: left out
            options = cast(
                "RunOptions", {k: v for k, v in options.items() if v is not AGENT_DEFAULT}
            )
        return await self._runner.run(prompt, options)

    @show_keywords(_LIVE_KEYWORDS)
    def session(self, **options: Unpack[LiveOptions]) -> Session:
        """A live conversation with one CLI process (``async with``); see
        :class:`~coding_genesis.session.Session`.  The options
        (:class:`~coding_genesis.request.LiveOptions`) hold for every turn.
        Raises :class:`~coding_genesis.errors.RefusedError` for what the
        backend cannot do (a backend without a two-way protocol, say), and
        :class:`AgentUsageError` while another session of this agent is open."""
        given = {k: v for k, v in options.items() if v is not AGENT_DEFAULT}
        keep = given.pop("keep_results", KEEP_RESULTS)
        if keep != "all" and (type(keep) is not int or keep < 0):
            raise AgentUsageError(f"keep_results must be an int >= 0 or 'all', got {keep!r}")
        request = self._runner.build("", given, mode="session")
        return Session(self._runner, request, keep)

    @show_keywords(_LIVE_KEYWORDS)
    def session_sync(self, **options: Unpack[LiveOptions]) -> SyncSession:
        """:meth:`session` for scripts without an event loop (``with``)."""
        return SyncSession(self.session(**options))

    def two_way_backends(self, *, steering: bool = False) -> list[str]:
        """Deprecated: ``coding_genesis.capabilities.backends_that("two_way")``
        (``steering``: ``"steer"``)."""
        _deprecated("two_way_backends()", 'coding_genesis.capabilities.backends_that("two_way")')
        return backends_that("steer" if steering else "two_way")

    def claim_session(self, session: Session | None) -> None:
        """Deprecated: a session claims its agent by itself (at most one open)."""
        _deprecated("claim_session()", "nothing: a session claims its agent when it opens")
        self._runner.claim(session)

    def replay(
        self,
        stdout: bytes,
        *,
        returncode: int | None = 0,
        stderr: str = "",
        cwd: str | os.PathLike[str] | None = None,
        stop_reason: StopReason | str | None = None,
        duration_s: float = 0.0,
    ) -> RunResponse:
        """What :meth:`run` would have returned for a CLI that printed ``stdout``,
        wrote ``stderr`` and exited with ``returncode``: the same decoding
        pipeline, result building and failure analysis, offline.  Starts
        nothing, publishes nothing, writes nothing."""
        base = os.fspath(cwd) if cwd is not None else (self.config.cwd or os.getcwd())
        return self._wiring.replay(
            stdout,
            returncode=returncode,
            stderr=stderr,
            cwd=os.path.abspath(base),
            stop_reason=stop_reason,
            duration_s=duration_s,
            run_id=uuid.uuid4().hex,
        )


def _deprecated(old: str, new: str) -> None:
    warnings.warn(
        f"CodingGenesisAgent.{old} is deprecated: use {new}", DeprecationWarning, stacklevel=3
    )


async def _sweep(ledger: Ledger, worktrees_dirs: Sequence[str]) -> None:
    """At an agent's first run: what runners that died left behind."""
    await sweep(ledger, worktrees_dirs=worktrees_dirs)


def _observers_of(config: AgentConfig) -> list[Observer]:
    """The observers ``config`` turns on, then the caller's own."""
    observers: list[Observer] = []
    if config.telemetry:
        # lazy: only an agent with telemetry on loads it (it imports no OpenTelemetry)
        from coding_genesis._observers.telemetry import TelemetryObserver

        observers.append(TelemetryObserver(content=config.telemetry_content))
    if config.transcripts is not None:
        observers.append(TranscriptObserver(config.transcripts, config.transcript_max_bytes))
    if config.run_log is not None:
        observers.append(RunLogObserver(config.run_log))
    if config.metering:
        # lazy: only an agent that meters loads metering
        from coding_genesis._observers.metering import MeteringObserver

        observers.append(MeteringObserver(config.prices, config.budget))
    observers.extend(adapt_observer(o) for o in config.observers)  # the 0.1.0 protocol too
    observers.append(StderrLines())  # on_stderr= of the agent or of one call
    return observers


def _wrappers_of(config: AgentConfig) -> WrappersFactory | None:
    """The factory of the wrappers around each run (isolation, verify), or None."""
    if config.isolation is None and not config.verify:
        return None
    # lazy: only an isolated or verified run needs git and the workspace (start-up)
    from coding_genesis._workspace.wrappers import run_wrappers

    return run_wrappers
