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
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, Any, cast

import anyio

from coding_genesis._observers.prices import PriceTable
from coding_genesis._observers.runlog import RunLogObserver
from coding_genesis._observers.transcript import TranscriptObserver
from coding_genesis._pipeline.bus import EventBus, EventStream, Subscription
from coding_genesis._pipeline.fanout import adapt_observer
from coding_genesis._pipeline.hooking import unsupported_hooks
from coding_genesis._pipeline.run import RunWiring, WrappersFactory
from coding_genesis._supervision.ledger import Ledger
from coding_genesis._supervision.values import StopReason
from coding_genesis._util.clock import Clock
from coding_genesis._util.loops import running_event_loop
from coding_genesis._util.signatures import keyword_parameters, show_keywords
from coding_genesis._workspace.sweep import sweep
from coding_genesis.backend import Backend, check_options
from coding_genesis.breaker import CircuitBreaker
from coding_genesis.config import (
    DEFAULT_TIMEOUT,
    AgentConfig,
    AgentSettings,
    require_permissions,
    require_setting_sources,
)
from coding_genesis.errors import AgentUsageError, ConfigError
from coding_genesis.observer import Observer
from coding_genesis.options import AGENT_DEFAULT, Trigger
from coding_genesis.request import RUN_OPTION_NAMES, LiveOptions, Request, RunOptions
from coding_genesis.result import RunResponse, RunResult
from coding_genesis.retry import RetryPolicy
from coding_genesis.run_events import RunEvent, StateEvent
from coding_genesis.session import Session, SyncSession, backend_refusal
from coding_genesis.status import AgentState, ErrorCode, Status

if TYPE_CHECKING:
    from typing_extensions import Unpack

    from coding_genesis._pipeline.live import LiveLink
    from coding_genesis.events import Event

__all__ = ["DEFAULT_TIMEOUT", "CodingGenesisAgent"]

#: What ``inspect.signature`` shows for ``**options``: each run option, typed,
#: defaulting to the agent's setting.
_RUN_KEYWORDS = keyword_parameters(RunOptions.__annotations__, AGENT_DEFAULT)
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
        check_options(self._backend, cfg.options)
        if cfg.approver is not None and self._backend.control() is None:
            raise ConfigError(_no_two_way(self._backend, "approver="))
        if (refused := _hooks_refused(self._backend, cfg.hooks)) is not None:
            raise ConfigError(refused)
        if cfg.output_schema is not None and not self._backend.structured_output:
            raise ConfigError(_no_structured_output(self._backend))
        if (refused := _tools_refused(self._backend, cfg.tools)) is not None:
            raise ConfigError(refused)
        require_permissions(self._backend, cfg.permissions)
        require_setting_sources(self._backend, cfg.setting_sources)
        self.config = cfg
        self.name = cfg.name or f"{self._backend.name}-agent"
        breaker = cfg.circuit_breaker  # checked by AgentConfig: a CircuitBreaker
        self._breaker = CircuitBreaker() if breaker == "default" else breaker
        if cfg.prices is not None:
            PriceTable(cfg.prices)  # a ConfigError when bad
        self._state = AgentState.READY
        self._state_reason = "created"
        self._session: Session | None = None
        self._run_id: str | None = None
        self._bus = EventBus(self.name)
        self._last: RunResult | None = None
        self._wiring = RunWiring(
            cfg, self._backend, self.name, self._bus, _observers_of(cfg), _wrappers_of(cfg), _sweep
        )

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
        if self._state is AgentState.BUSY:
            return AgentState.BUSY
        if self._breaker is not None and self._breaker.open:
            return AgentState.DEGRADED
        return AgentState.READY

    @property
    def state_reason(self) -> str:
        state = self.state
        if state is not self._state and state is AgentState.DEGRADED and self._breaker:
            return self._breaker.reason
        if state is not self._state:
            return "circuit closed"
        return self._state_reason

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
        if self._breaker is not None:
            self._breaker.reset()
        if self._state is AgentState.DEGRADED:
            self._set_state(AgentState.READY, reason)

    @property
    def transcript_dir(self) -> str | None:
        """Directory holding one sub-directory per run, or None when transcripts are off."""
        return self.config.transcripts

    @property
    def last_result(self) -> RunResult | None:
        """The typed model behind the dict of the last run."""
        return self._last

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

    def _set_state(
        self, state: AgentState, reason: str, extra: Mapping[str, Any] | None = None
    ) -> None:
        previous = self._state
        self._state = state
        self._state_reason = reason
        self._bus.publish(StateEvent(state.value, previous.value, reason, extra), self._run_id)

    def _clock(self) -> Clock:
        return self._wiring.clock()

    # -- running -------------------------------------------------------

    @show_keywords(_RUN_KEYWORDS)
    def run_sync(self, prompt: str, **options: Unpack[RunOptions]) -> RunResponse:
        """Blocking :meth:`run` for code without an event loop."""
        library = running_event_loop()
        if library is not None:
            raise AgentUsageError(
                f"run_sync() cannot be called from a running {library} event loop; "
                "use `await agent.run(...)`"
            )
        return anyio.run(functools.partial(self.run, prompt, **options))

    @show_keywords(_RUN_KEYWORDS)
    async def run(self, prompt: str, **options: Unpack[RunOptions]) -> RunResponse:
        """Run one request; return the response dict.  Never raises for a
        runtime failure; re-raises cancellation after the process tree is gone.

        The options (:class:`~coding_genesis.request.RunOptions`) override the
        agent's settings for this call; ``retry`` overrides its retry policy
        (None: one attempt).
        """
        result = await self.run_result(prompt, **options)
        return result.to_dict()

    @show_keywords(_RUN_KEYWORDS)
    async def run_result(self, prompt: str, **options: Unpack[RunOptions]) -> RunResult:
        """:meth:`run` (the same arguments), returning the typed
        :class:`RunResult` behind the dict."""
        unknown = set(options) - RUN_OPTION_NAMES
        if unknown:
            raise TypeError(f"run() got unexpected keyword argument(s) {sorted(unknown)}")
        if AGENT_DEFAULT in options.values():  # given as its signature shows it: left out
            options = cast(
                "RunOptions", {k: v for k, v in options.items() if v is not AGENT_DEFAULT}
            )
        return await self._request(prompt, options)

    def session(self, **options: Unpack[LiveOptions]) -> Session:
        """A live conversation with one CLI process (``async with``); see
        :class:`~coding_genesis.session.Session`.  Raises
        :class:`AgentUsageError` for a backend without a two-way protocol, or
        while another session of this agent is open."""
        return Session(self, self._wiring, options)

    def session_sync(self, **options: Unpack[LiveOptions]) -> SyncSession:
        """:meth:`session` for scripts without an event loop (``with``)."""
        return SyncSession(self.session(**options))

    async def _request(
        self,
        prompt: str,
        options: RunOptions,
        link: LiveLink | None = None,
        trigger: Trigger = "user",
    ) -> RunResult:
        """One request through the pipeline: a one-shot run, or (``link``) a turn of a live
        session (``trigger="cli"``: one the CLI started, admitted past an open circuit)."""
        if self._state is AgentState.BUSY:
            return self._answer(
                Status.BUSY,
                ErrorCode.BUSY,
                f"agent {self.name!r} is busy with run {self._run_id}; nothing was started. "
                "Wait for it to finish or use another agent.",
            )
        clock = self._clock()
        if options.get("approver") is not None and self._backend.control() is None:
            return self._answer(
                Status.USAGE, ErrorCode.INVALID_REQUEST, _no_two_way(self._backend, "approver=")
            )
        if (refused := _hooks_refused(self._backend, options.get("hooks"))) is not None:
            return self._answer(Status.USAGE, ErrorCode.INVALID_REQUEST, refused)
        if options.get("output_schema") is not None and not self._backend.structured_output:
            return self._answer(
                Status.USAGE, ErrorCode.INVALID_REQUEST, _no_structured_output(self._backend)
            )
        if (refused := _tools_refused(self._backend, options.get("tools"))) is not None:
            return self._answer(Status.USAGE, ErrorCode.INVALID_REQUEST, refused)
        try:
            if link is not None:  # a turn of a live session: its prompt and timeout
                request = link.request.for_turn(prompt, timeout=options.get("timeout"))
            else:
                request = Request.build(
                    self.config, prompt, options, cwd=self.config.cwd, backend=self._backend.name
                )
                refused = backend_refusal(self._backend, options, request)
                if refused is not None:
                    raise ConfigError(refused)
        except ConfigError as exc:
            return self._answer(Status.USAGE, ErrorCode.INVALID_REQUEST, str(exc))
        policy = request.retry  # None for a turn: a turn is never retried
        probe = False
        if self._breaker is not None and trigger == "user":
            probe, wait = self._breaker.admit(clock.monotonic())
            if wait > 0:
                return self._degraded(wait)
        wiring = self._wiring
        await wiring.sweep_once()
        run_id = uuid.uuid4().hex
        self._run_id = run_id
        run = wiring.start(request, run_id, clock, link, trigger)
        self._set_state(AgentState.BUSY, "probe after cooldown" if probe else "run started")
        result: RunResult | None = None
        try:
            result = await run.execute(policy)
        finally:
            wiring.tally = None
            self._after_run(result, probe, clock)
        result = run.response(result)
        self._last = result
        run.finish(result)
        return result

    def two_way_backends(self, *, steering: bool = False) -> list[str]:
        """The built-in and registered backends that can hold a live session
        (``steering``: and steer a running turn)."""
        return _two_way_backends(steering)

    def claim_session(self, session: Session | None) -> None:
        """A session opens (``None``: it closed): at most one at a time."""
        if session is not None and self._session is not None and self._session is not session:
            raise AgentUsageError(
                f"agent {self.name!r} already has an open session; close it first "
                "(or use another agent)"
            )
        self._session = session

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

    # -- answers without a run, and the failure analysis -------------------

    def _answer(self, status: int, error: ErrorCode, message: str) -> RunResult:
        """An answer given without running anything (busy, invalid request)."""
        result = self._wiring.analyzed(self._wiring.bare(status, error, message))
        self._last = result
        return result

    def _degraded(self, remaining: float) -> RunResult:
        breaker = self._breaker
        assert breaker is not None
        if self._state is not AgentState.DEGRADED and self._state is not AgentState.BUSY:
            self._set_state(
                AgentState.DEGRADED,
                breaker.reason,
                {
                    "category": breaker.last_category,
                    "consecutive_failures": breaker.consecutive,
                    "cooldown_s": breaker.cooldown_s,
                    "retry_after_s": round(remaining, 3),
                },
            )
        wiring = self._wiring
        result = wiring.analyzed(
            wiring.bare(
                Status.UNAVAILABLE,
                ErrorCode.DEGRADED,
                f"agent {self.name!r} is DEGRADED: {breaker.reason}. Nothing was started; "
                f"a probe request is accepted in {remaining:.1f}s "
                "(or call reset_circuit() once the cause is fixed).",
            ),
            retry_after_s=round(remaining, 3),
        )
        self._last = result
        return result

    # -- the state machine --------------------------------------------------

    def _after_run(self, result: RunResult | None, probe: bool, clock: Clock) -> None:
        """READY after any outcome, unless the circuit breaker opens (or stays open)."""
        breaker = self._breaker
        if result is None:  # cancelled
            if breaker is not None and probe:
                breaker.release_probe()
                self._set_state(
                    AgentState.DEGRADED, "probe cancelled; the next request probes again"
                )
            else:
                self._set_state(AgentState.READY, "run cancelled")
            return
        if breaker is None:
            self._set_state(AgentState.READY, "run finished")
            return
        category = result.failure.category.value if result.failure is not None else None
        outcome = breaker.record(
            str(result.error) if result.is_error and result.error is not None else None,
            category,
            result.message,
            clock.monotonic(),
            probe=probe,
        )
        if breaker.open and (outcome == "trip" or (probe and outcome == "neutral")):
            remaining = breaker.remaining(clock.monotonic())
            reason = (
                breaker.reason if outcome == "trip" else f"probe inconclusive; {breaker.reason}"
            )
            if probe and outcome == "trip":
                reason = f"probe failed; {reason}"
            self._set_state(
                AgentState.DEGRADED,
                reason,
                {
                    "category": breaker.last_category,
                    "consecutive_failures": breaker.consecutive,
                    "cooldown_s": breaker.cooldown_s,
                    "retry_after_s": round(remaining, 3),
                },
            )
            return
        if probe:
            self._set_state(
                AgentState.READY,
                "probe succeeded; circuit closed"
                if outcome == "success"
                else f"probe reached the backend ({result.error}); circuit closed",
            )
            return
        self._set_state(AgentState.READY, "run finished")


def _two_way_backends(steering: bool = False, tools: bool = False) -> list[str]:
    # lazy: the registry loads every backend: only an answer that names them needs it
    from coding_genesis.backends import get_backend, registered_backends

    names = []
    for name in registered_backends():
        protocol = get_backend(name).control()
        if (
            protocol is not None
            and (protocol.can_steer or not steering)
            and (protocol.can_host_tools or not tools)
        ):
            names.append(name)
    return names


def _hooks_refused(backend: Backend, hooks: object) -> str | None:
    """Why ``hooks=`` cannot run on ``backend`` (None: they can, or they are
    malformed, which the request's check says)."""
    if not isinstance(hooks, Mapping) or not hooks:
        return None
    protocol = backend.control()
    if protocol is None:
        return _no_two_way(backend, "hooks=")
    return unsupported_hooks(backend.name, protocol, hooks)


def _tools_refused(backend: Backend, tools: object) -> str | None:
    """Why ``tools=`` cannot run on ``backend`` (None: they can, or none are given)."""
    protocol = backend.control()
    if not tools or (protocol is not None and protocol.can_host_tools):
        return None
    return (
        f"backend {backend.name!r} cannot call the caller's functions (tools=); "
        f"backends that can: {', '.join(_two_way_backends(tools=True)) or '(none)'}"
    )


def _no_two_way(backend: Backend, what: str) -> str:
    return (
        f"backend {backend.name!r} has no two-way protocol, which {what} needs; "
        f"backends that have one: {', '.join(_two_way_backends()) or '(none)'}"
    )


def _no_structured_output(backend: Backend) -> str:
    # lazy: the registry loads every backend: only an answer that names them needs it
    from coding_genesis.backends import get_backend, registered_backends

    names = [name for name in registered_backends() if get_backend(name).structured_output]
    return (
        f"backend {backend.name!r} takes no output schema, which output_schema= needs; "
        f"backends that do: {', '.join(names) or '(none)'}"
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
    return observers


def _wrappers_of(config: AgentConfig) -> WrappersFactory | None:
    """The factory of the wrappers around each run (isolation, verify), or None."""
    if config.isolation is None and not config.verify:
        return None
    # lazy: only an isolated or verified run needs git and the workspace (start-up)
    from coding_genesis._workspace.wrappers import run_wrappers

    return run_wrappers
