"""``CodingGenesisAgent``: the state machine (READY, BUSY, DEGRADED) and the
wiring of one request's pipeline::

    request → attempt (spawn, supervise, decode) → outcome → result
            → failure analysis → decision (done, retry, degrade) → response

Each step is a unit of its own (:mod:`~coding_genesis._pipeline.request`,
:mod:`~coding_genesis._pipeline.attempt`, :mod:`~coding_genesis._pipeline.outcome`,
:mod:`~coding_genesis._failures.analysis`, :mod:`~coding_genesis.retry`); transcripts,
the run log and any other observer plug in through
:mod:`~coding_genesis.observer`.  The agent only holds state and passes
values along.
"""

from __future__ import annotations

import dataclasses
import functools
import logging
import os
import time
import uuid
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any, cast

import anyio

from coding_genesis._failures.breaker import CircuitBreaker
from coding_genesis._observers.prices import PriceTable
from coding_genesis._pipeline.attempt import AttemptOutcome, run_attempt
from coding_genesis._pipeline.listeners import RunListeners
from coding_genesis._pipeline.outcome import (
    ResultContext,
    build_result,
    replayed_outcome,
    tally_facts,
)
from coding_genesis._pipeline.request import Request, make_request
from coding_genesis._pipeline.runsteps import RunSteps
from coding_genesis._supervision.ledger import Ledger, LedgerError, sweep
from coding_genesis._supervision.process import StopReason
from coding_genesis._supervision.stop import StopHandle
from coding_genesis._util.clock import Clock, current_clock
from coding_genesis._util.loops import running_event_loop
from coding_genesis._util.redact import Redactor
from coding_genesis.backend import Backend, check_options
from coding_genesis.config import DEFAULT_TIMEOUT, AgentConfig, require_permissions
from coding_genesis.errors import AgentUsageError, ConfigError
from coding_genesis.events import (
    AttemptEvent,
    EventBus,
    EventKind,
    EventStream,
    RunFinishedEvent,
    RunStartedEvent,
    StateEvent,
    Subscription,
)
from coding_genesis.observer import (
    Observer,
    RunInfo,
    RunLogObserver,
    RunObservers,
    TranscriptObserver,
)
from coding_genesis.result import RunResult, RunTally
from coding_genesis.retry import AttemptPlan, RetryPolicy, retrying
from coding_genesis.status import AgentState, ErrorCode, Status

if TYPE_CHECKING:
    from coding_genesis._observers.budget import Budget

__all__ = ["DEFAULT_TIMEOUT", "CodingGenesisAgent"]

log = logging.getLogger("coding_genesis.agent")

#: ``run(retry=...)`` not given: use the agent's policy.
_AGENT_POLICY: Any = object()
_REQUEST_ARGS = frozenset(
    {"timeout", "cwd", "model", "resume", "options", "request_key", "retry"}
    | {"permissions", "max_turns", "cli_max_retries"}
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
    :class:`~coding_genesis._failures.breaker.CircuitBreaker`, shareable between agents)
    makes the agent ``DEGRADED`` (status 69 at once) after repeated failures
    no retry fixes (CLI missing, auth) until a cooldown passes and a probe
    succeeds.

    The library writes nothing to disk unless asked: ``transcripts=DIR`` and
    ``run_log=FILE`` turn those observers on (the ``genesis`` CLI does).
    Every state change and every normalized run event is published to
    :meth:`subscribe` callbacks and :meth:`events` streams.
    """

    def __init__(
        self,
        backend: str | Backend | None = None,
        *,
        config: AgentConfig | None = None,
        **settings: Any,
    ) -> None:
        if config is not None and not isinstance(config, AgentConfig):
            raise ConfigError(f"config must be an AgentConfig, got {config!r}")
        if backend is not None:
            settings["backend"] = backend
        unknown = sorted(set(settings) - set(AgentConfig.field_names()))
        if unknown:
            raise ConfigError(
                f"unknown setting(s) {', '.join(map(repr, unknown))}; "
                f"valid: {', '.join(AgentConfig.field_names())}"
            )
        try:
            if config is None:
                cfg = AgentConfig(**settings)
            else:
                cfg = config.replace(**settings) if settings else config
        except TypeError as exc:  # a field of the wrong shape (e.g. not iterable)
            raise ConfigError(str(exc)) from None
        if isinstance(cfg.backend, str):
            from coding_genesis.backends import get_backend

            self._backend: Backend = get_backend(cfg.backend)
        else:
            self._backend = cfg.backend
        check_options(self._backend, cfg.options)
        require_permissions(self._backend, cfg.permissions)
        self.config = cfg
        self.name = cfg.name or f"{self._backend.name}-agent"
        breaker = cfg.circuit_breaker  # checked by AgentConfig: a CircuitBreaker
        self._breaker = (
            CircuitBreaker() if breaker == "default" else cast("CircuitBreaker | None", breaker)
        )
        if cfg.prices is not None:
            PriceTable(cfg.prices)  # a ConfigError when bad
        observers: list[Observer] = []
        if cfg.telemetry:
            from coding_genesis._observers.telemetry import (
                TelemetryObserver,  # (imports no OpenTelemetry)
            )

            observers.append(TelemetryObserver(content=cfg.telemetry_content))
        if cfg.transcripts is not None:
            observers.append(TranscriptObserver(cfg.transcripts, cfg.transcript_max_bytes))
        if cfg.run_log is not None:
            observers.append(RunLogObserver(cfg.run_log))
        if cfg.metering:
            from coding_genesis._observers.metering import MeteringObserver

            observers.append(MeteringObserver(cfg.prices, cast("Budget | None", cfg.budget)))
        observers.extend(cfg.observers)
        self._observers = tuple(observers)
        self._state = AgentState.READY
        self._state_reason = "created"
        self._run_id: str | None = None
        self._bus = EventBus(self.name)
        self._last: RunResult | None = None
        #: The tally of the attempt in flight (for the answer to a cancellation).
        self._tally: RunTally | None = None
        self._redactor = Redactor.of_environment(cfg.env)
        self._ledger: Ledger | None = (
            None
            if cfg.ledger is False
            else Ledger(cfg.ledger if isinstance(cfg.ledger, str) else None)
        )
        self._swept = False

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

    def subscribe(self, callback: Any) -> Subscription:
        """Call ``callback(event)`` for every event; returns an unsubscribe handle."""
        return self._bus.subscribe(callback)

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
        return self.config.clock if self.config.clock is not None else current_clock()

    # -- running -------------------------------------------------------

    def run_sync(self, prompt: str, **overrides: Any) -> dict[str, Any]:
        """Blocking :meth:`run` for code without an event loop."""
        library = running_event_loop()
        if library is not None:
            raise AgentUsageError(
                f"run_sync() cannot be called from a running {library} event loop; "
                "use `await agent.run(...)`"
            )
        return anyio.run(functools.partial(self.run, prompt, **overrides))

    async def run(
        self,
        prompt: str,
        *,
        timeout: float | None = None,
        cwd: str | os.PathLike[str] | None = None,
        model: str | None = None,
        resume: str | None = None,
        options: Mapping[str, Any] | None = None,
        request_key: str | None = None,
        retry: RetryPolicy | str | int | None = _AGENT_POLICY,
        permissions: str | None = None,
        max_turns: int | None = None,
        cli_max_retries: int | None = None,
    ) -> dict[str, Any]:
        """Run one request; return the response dict.  Never raises for a
        runtime failure; re-raises cancellation after the process tree is gone.

        ``retry`` overrides the agent's retry policy for this call (None: one attempt).
        """
        result = await self.run_result(
            prompt,
            timeout=timeout,
            cwd=cwd,
            model=model,
            resume=resume,
            options=options,
            request_key=request_key,
            retry=retry,
            permissions=permissions,
            max_turns=max_turns,
            cli_max_retries=cli_max_retries,
        )
        return result.to_dict()

    async def run_result(self, prompt: str, **arguments: Any) -> RunResult:
        """:meth:`run` (the same arguments), returning the typed
        :class:`RunResult` behind the dict."""
        unknown = set(arguments) - _REQUEST_ARGS
        if unknown:
            raise TypeError(f"run() got unexpected keyword argument(s) {sorted(unknown)}")
        retry = arguments.get("retry", _AGENT_POLICY)
        if self._state is AgentState.BUSY:
            return self._answer(
                Status.BUSY,
                ErrorCode.BUSY,
                f"agent {self.name!r} is busy with run {self._run_id}; nothing was started. "
                "Wait for it to finish or use another agent.",
            )
        clock = self._clock()
        try:
            policy = self.config.retry if retry is _AGENT_POLICY else RetryPolicy.parse(retry)
            request = make_request(
                self.config,
                self.backend_name,
                prompt,
                timeout=arguments.get("timeout"),
                cwd=arguments.get("cwd"),
                model=arguments.get("model"),
                resume=arguments.get("resume"),
                options=arguments.get("options"),
                key=arguments.get("request_key"),
                check_options=functools.partial(check_options, self._backend),
                permissions=arguments.get("permissions"),
                max_turns=arguments.get("max_turns"),
                cli_max_retries=arguments.get("cli_max_retries"),
                backend=self._backend,
                retrying=policy is not None,
            )
        except ConfigError as exc:
            return self._answer(Status.USAGE, ErrorCode.INVALID_REQUEST, str(exc))
        probe = False
        if self._breaker is not None:
            probe, wait = self._breaker.admit(clock.monotonic())
            if wait > 0:
                return self._degraded(wait)
        if not self._swept:
            self._swept = True
            await self._sweep()
        run_id = uuid.uuid4().hex
        self._run_id = run_id
        started = time.monotonic()
        stop = StopHandle()
        bus = self._bus
        observers = RunObservers(
            self._observers,
            RunInfo(
                run_id=run_id,
                agent=self.name,
                backend=self.backend_name,
                prompt=request.prompt,
                cwd=request.cwd,
                timeout=request.timeout,
                model=request.model,
                resume=request.resume,
                started=time.time(),
                redactor=self._redactor,
                stop=stop,
                publish=lambda event: bus.publish(event, run_id),
            ),
        )
        unsubscribe = (
            self._bus.subscribe(observers.event, kinds=observers.kinds) if observers else None
        )
        self._set_state(AgentState.BUSY, "probe after cooldown" if probe else "run started")
        result: RunResult | None = None
        steps = RunSteps.for_run(self.config, run_id, self._ledger)
        try:
            result = await steps.run(
                request,
                lambda req: self._pipeline(req, policy, clock, run_id, observers, stop, steps),
                lambda status, error, message: self._analysed(
                    self._bare(status, error, message, run_id=run_id)
                ),
            )
        except anyio.get_cancelled_exc_class():
            cancelled = self._cancelled(run_id, started, observers)
            if steps.fields:
                cancelled = cancelled.model_copy(
                    update={k: v for k, v in steps.fields.items() if k != "warnings"}
                )
            response = self._redacted(cancelled).to_dict()
            self._bus.publish(
                RunFinishedEvent(int(Status.CANCELLED), "cancelled", None, cancelled=True), run_id
            )
            if unsubscribe is not None:
                unsubscribe()
            observers.finish(response)
            raise
        except Exception as exc:  # a bug of ours: still answer
            log.exception("internal error in run %s", run_id)
            result = self._analysed(
                self._bare(
                    Status.INTERNAL,
                    ErrorCode.INTERNAL,
                    f"internal error in coding-genesis: {exc!r}",
                    run_id=run_id,
                )
            )
        finally:
            self._tally = None
            self._after_run(result, probe, clock)
        update: dict[str, Any] = {"duration_s": round(time.monotonic() - started, 6)}
        extra = observers.response_fields()
        warnings = extra.pop("warnings", None)
        if warnings:
            update["warnings"] = [*result.warnings, *warnings]
        update.update(extra)
        result = self._redacted(result.model_copy(update=update))
        self._last = result
        response = result.to_dict()
        category = result.failure.category.value if result.failure else None
        self._bus.publish(RunFinishedEvent(result.status, response["error"], category), run_id)
        if unsubscribe is not None:
            unsubscribe()
        observers.finish(response)
        return result

    async def _pipeline(
        self,
        request: Request,
        policy: RetryPolicy | None,
        clock: Clock,
        run_id: str,
        observers: RunObservers,
        stop: StopHandle | None = None,
        steps: RunSteps | None = None,
    ) -> RunResult:
        """The attempts of one request, each analysed; the policy decides retries."""

        async def attempt(plan: AttemptPlan) -> RunResult:
            outcome = await self._attempt(request, plan, run_id, observers, stop)
            result = build_result(outcome, self._result_context(run_id))
            if steps:
                result = await steps.after_attempt(result, request)
            return self._analysed(result)

        timeout = request.timeout
        first = AttemptPlan(1, request.prompt, request.resume, timeout)
        if policy is None:
            return await attempt(first)
        if policy.deadline_s is not None:
            first = AttemptPlan(1, request.prompt, request.resume, min(timeout, policy.deadline_s))
        bus = self._bus

        def on_attempt(entry: dict[str, Any]) -> None:
            fields = dict(entry)
            bus.publish(AttemptEvent(fields.pop("phase"), fields.pop("attempt"), fields), run_id)

        return await retrying(
            policy,
            clock,
            attempt,
            first,
            can_resume=policy.resume and bool(getattr(self._backend, "supports_resume", False)),
            on_attempt=on_attempt,
            escalation={"run_id": run_id, "agent": self.name, "backend": self.backend_name},
        )

    async def _attempt(
        self,
        request: Request,
        plan: AttemptPlan,
        run_id: str,
        observers: RunObservers,
        stop: StopHandle | None = None,
    ) -> AttemptOutcome:
        bus = self._bus
        redactor = self._redactor
        backend = self._backend.name

        ledger = self._ledger
        transcript = (
            os.path.join(self.config.transcripts, run_id) if self.config.transcripts else None
        )
        if ledger is not None:
            self._write_record(ledger, run_id, transcript, None)

        def spawned(pid: int, argv: list[str]) -> None:
            if ledger is not None:
                self._write_record(ledger, run_id, transcript, pid)
            timeout = plan.timeout if plan.timeout is not None else request.timeout
            bus.publish(RunStartedEvent(backend, argv[0], pid, request.cwd, timeout), run_id)

        tallies: list[RunTally] = []

        def held(tally: RunTally) -> None:
            self._hold_tally(tally)
            tallies.append(tally)

        attempt_request = dataclasses.replace(
            request,
            prompt=plan.prompt,
            timeout=plan.timeout if plan.timeout is not None else request.timeout,
            resume=plan.resume,
        )
        try:
            return await run_attempt(
                self.config,
                self._backend,
                attempt_request,
                marker=run_id,
                listeners=RunListeners(bus, run_id, redactor, observers or None),
                on_stdout=observers.stdout if observers else None,
                on_decoded=observers.flush if observers else None,
                on_spawn=spawned,
                on_tally=held,
                redactor=redactor if redactor.active else None,
                extra_env=observers.attempt_env() if observers else None,
                stop=stop,
                message_usage="live"
                if bus.wants(EventKind.USAGE)
                else (observers.message_usage if observers else "off"),
            )
        finally:
            if ledger is not None:
                ledger.remove(run_id)
            if tallies and observers:
                observers.attempt_decoded(tallies[0])

    def _write_record(
        self, ledger: Ledger, run_id: str, transcript: str | None, pid: int | None
    ) -> None:
        try:
            ledger.record(run_id, marker=run_id, transcript=transcript, cli_pid=pid)
        except OSError as exc:
            log.warning("run ledger %s off for agent %r: %s", ledger.path, self.name, exc)
            self._ledger = None

    async def _sweep(self) -> None:
        """At the agent's first run: stop what runs of dead runners left behind."""
        ledger = self._ledger
        if ledger is None:
            return
        try:
            await sweep(ledger)
        except LedgerError as exc:
            log.warning("run ledger off for agent %r: %s", self.name, exc)
            self._ledger = None
        except Exception:
            log.exception("sweep of the run ledger %s failed", ledger.path)

    def _hold_tally(self, tally: RunTally) -> None:
        self._tally = tally

    def _result_context(self, run_id: str) -> ResultContext:
        return ResultContext(
            run_id=run_id,
            agent=self.name,
            backend=self.backend_name,
            redactor=self._redactor,
            idle_timeout=self.config.idle_timeout,
            linger=self.config.linger,
            stderr_retries=getattr(self._backend, "stderr_retries", None),
        )

    def replay(
        self,
        stdout: bytes,
        *,
        returncode: int | None = 0,
        stderr: str = "",
        cwd: str | os.PathLike[str] | None = None,
        stop_reason: StopReason | str | None = None,
        duration_s: float = 0.0,
    ) -> dict[str, Any]:
        """What :meth:`run` would have returned for a CLI that printed ``stdout``,
        wrote ``stderr`` and exited with ``returncode``: the same decoding
        pipeline, result building and failure analysis, offline.  Starts
        nothing, publishes nothing, writes nothing."""
        base = os.fspath(cwd) if cwd is not None else (self.config.cwd or os.getcwd())
        run_id = uuid.uuid4().hex
        # Observers that write nothing and say so (``replays = True``: metering)
        # watch a replay too, so that it answers what the live run answered.
        watchers = RunObservers(
            [o for o in self._observers if getattr(o, "replays", False)],
            RunInfo(
                run_id=run_id,
                agent=self.name,
                backend=self.backend_name,
                prompt="(replay)",
                cwd=os.path.abspath(base),
                timeout=self.config.timeout,
                model=self.config.model,
                resume=None,
                started=time.time(),
                redactor=self._redactor,
            ),
        )
        outcome = replayed_outcome(
            self.config,
            self._backend,
            stdout,
            returncode=returncode,
            stderr=stderr,
            cwd=os.path.abspath(base),
            stop_reason=StopReason(stop_reason) if stop_reason is not None else None,
            duration_s=duration_s,
            on_event=watchers.replayed if watchers else None,
        )
        if watchers:
            watchers.attempt_decoded(outcome.tally)
        result = self._analysed(build_result(outcome, self._result_context(run_id)))
        extra = watchers.response_fields()
        warnings = extra.pop("warnings", None)
        if warnings:
            extra["warnings"] = [*result.warnings, *warnings]
        return result.model_copy(update=extra).to_dict() if extra else result.to_dict()

    # -- answers without a run, and the failure analysis -------------------

    def _bare(self, status: int, error: ErrorCode, message: str, **extra: Any) -> RunResult:
        return RunResult(
            status=int(status),
            message=self._redactor.text(message),
            backend=self.backend_name,
            agent=self.name,
            is_error=True,
            error=error,
            **extra,
        )

    def _answer(self, status: int, error: ErrorCode, message: str) -> RunResult:
        """An answer given without running anything (busy, invalid request)."""
        result = self._analysed(self._bare(status, error, message))
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
        result = self._analysed(
            self._bare(
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

    def _cancelled(self, run_id: str, started: float, observers: RunObservers) -> RunResult:
        """The answer to a cancelled run: what its attempt did so far."""
        facts = tally_facts(self._tally, self._redactor) if self._tally is not None else {}
        result = self._bare(
            Status.CANCELLED,
            ErrorCode.CANCELLED,
            f"{self.backend_name} run cancelled by the caller; process tree stopped",
            run_id=run_id,
            stop_reason=StopReason.CANCELLED.value,
            duration_s=round(time.monotonic() - started, 6),
            **facts,
        )
        result = self._analysed(result)
        extra = observers.response_fields()
        extra.pop("warnings", None)
        return result.model_copy(update=extra)

    def _redacted(self, result: RunResult) -> RunResult:
        """One last pass over the whole response, keys included: what ``run()``
        returns is masked exactly like ``result.json`` (the failure value and
        its views were masked when they were made)."""
        if not self._redactor.active:
            return result
        fields = result.model_dump(exclude={"failure", "error"})
        clean = self._redactor.deep(fields)
        if clean is fields:
            return result
        return result.model_copy(update=clean)

    def _analysed(self, result: RunResult, retry_after_s: float | None = None) -> RunResult:
        """Attach the one failure value and its views to a failed result."""
        if not result.is_error or result.failure is not None:
            return result
        from coding_genesis._failures.analysis import (
            analyse,  # only a failure needs the analysis and its tables
        )

        return analyse(
            result,
            self._backend,
            node=self.name,
            timeout=self.config.timeout,
            idle_timeout=self.config.idle_timeout,
            redactor=self._redactor,
            retry_after_s=retry_after_s,
            now=self._clock().time(),
        )

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
