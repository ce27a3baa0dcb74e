"""One agent's requests, one at a time: the runner below the agent.

``run()``, a session's turns (``Session.send``) and the turns a live CLI
starts by itself all go through :meth:`Runner.run`: admission (BUSY, an open
circuit), the request built and checked once (:meth:`Runner.build`), one
:class:`~coding_genesis._pipeline.run.Run` per request, and the state
machine's transitions published on the agent's bus.  The capability check
is handed down by the agent (``capabilities`` sits above the pipeline: it
reads the backend registry to word a refusal).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Mapping
from types import MappingProxyType
from typing import TYPE_CHECKING, Any

import anyio
from anyio.lowlevel import EventLoopToken, current_token

from coding_genesis.errors import AgentUsageError, ConfigError, RefusedError
from coding_genesis.request import (
    LIVE_OPTION_NAMES,
    RUN_OPTION_NAMES,
    Request,
    RequestSettings,
    Unsupported,
)
from coding_genesis.run_events import StateEvent
from coding_genesis.status import AgentState, ErrorCode, Status

if TYPE_CHECKING:
    from coding_genesis._pipeline.run import RunWiring
    from coding_genesis._pipeline.transport import Transport
    from coding_genesis._util.clock import Clock
    from coding_genesis.backend import Backend
    from coding_genesis.breaker import CircuitBreaker
    from coding_genesis.options import Mode, Trigger
    from coding_genesis.prompts import Prompt
    from coding_genesis.result import RunResult

__all__ = ["Check", "Runner"]

#: The capability check (``coding_genesis.capabilities.check``).
Check = Callable[["Backend", RequestSettings, "Mode"], "Unsupported | None"]

_EMPTY: Mapping[str, Any] = MappingProxyType({})
#: How often a wait for a run of another event loop looks again.
_LOOK_AGAIN = 0.05


class Runner:
    """One agent's requests, one at a time: ``run()``, a session's turns and
    the turns a CLI starts by itself.  Admission (BUSY, DEGRADED), the request
    built and checked once, one Run per request, the state machine's
    transitions published."""

    __slots__ = (
        "_breaker",
        "_check",
        "_idle",
        "_last",
        "_loop",
        "_reason",
        "_run_id",
        "_session",
        "_state",
        "wiring",
    )

    def __init__(self, wiring: RunWiring, breaker: CircuitBreaker | None, check: Check) -> None:
        self.wiring = wiring
        self._breaker = breaker
        self._check = check
        self._state = AgentState.READY
        self._reason = "created"
        self._run_id: str | None = None
        self._last: RunResult | None = None
        self._session: object | None = None
        #: Set when the run in flight ends (made by the run, in its event loop,
        #: ``_loop``: a run_sync() in another thread has a loop of its own).
        self._idle: anyio.Event | None = None
        self._loop: EventLoopToken | None = None

    # -- state ----------------------------------------------------------------

    @property
    def state(self) -> AgentState:
        """BUSY while a run is in flight; otherwise DEGRADED exactly while the
        circuit breaker is open (it may be shared), else READY."""
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
        return self._reason

    @property
    def last(self) -> RunResult | None:
        return self._last

    @property
    def run_id(self) -> str | None:
        """The run in flight (or the last one)."""
        return self._run_id

    def reset_circuit(self, reason: str) -> None:
        if self._breaker is not None:
            self._breaker.reset()
        if self._state is AgentState.DEGRADED:
            self._set_state(AgentState.READY, reason)

    def sibling(self) -> Runner:
        """A runner of the same agent (its wiring, checks and circuit breaker)
        with a state and a session of its own: what a fork runs on."""
        return Runner(self.wiring, self._breaker, self._check)

    def claim(self, session: object | None) -> None:
        """A session opens (``None``: it closed): at most one at a time."""
        if session is not None and self._session is not None and self._session is not session:
            raise AgentUsageError(
                f"agent {self.wiring.name!r} already has an open session; close it first "
                "(or use another agent)"
            )
        self._session = session

    async def wait_idle(self) -> None:
        """Return once no run is in flight: woken by the run's end, or, for a
        run in another event loop (a ``run_sync()`` in another thread), by
        looking again every 50 ms (an event is never waited on across loops)."""
        while self._state is AgentState.BUSY:
            idle = self._idle
            if idle is not None and self._loop == current_token():
                await idle.wait()
            else:
                await anyio.sleep(_LOOK_AGAIN)

    # -- a request --------------------------------------------------------------

    def build(self, prompt: object, options: Mapping[str, Any], *, mode: Mode) -> Request:
        """The request of a call (``mode="run"``) or of a live session
        (``"session"``, an empty prompt), checked: a TypeError for an unknown
        keyword, a ConfigError for a bad value, a RefusedError for what the
        backend cannot do (a session: any of these but the TypeError)."""
        wiring = self.wiring
        config, backend = wiring.config, wiring.backend
        session = mode == "session"
        if session:
            refused = self._check(backend, config, mode)  # a session needs what the agent has
            if refused is not None:
                raise RefusedError(refused.message)
        try:
            request = Request.build(
                config,
                prompt,
                options,
                cwd=config.cwd,
                backend=backend.name,
                names=LIVE_OPTION_NAMES if session else RUN_OPTION_NAMES,
                called="session()" if session else "run()",
                session=session,
            )
        except ConfigError as exc:
            if session and not isinstance(exc, RefusedError):
                raise RefusedError(str(exc)) from None
            raise
        refused = self._check(backend, request, mode)
        if refused is not None:
            raise RefusedError(refused.message)
        return request

    async def run(
        self,
        prompt: Prompt,
        options: Mapping[str, Any] = _EMPTY,
        *,
        session: Transport | None = None,
        trigger: Trigger = "user",
    ) -> RunResult:
        """One request through the pipeline: a one-shot run, or (``session``)
        a turn of a live session (``trigger="cli"``: one the CLI started,
        admitted past an open circuit).  Never raises for a runtime failure."""
        if self._state is AgentState.BUSY:
            return self._refused(
                Status.BUSY,
                ErrorCode.BUSY,
                f"agent {self.wiring.name!r} is busy with run {self._run_id}; nothing was "
                "started. Wait for it to finish or use another agent.",
            )
        wiring = self.wiring
        clock = wiring.clock()
        try:
            if session is not None:  # a turn of a live session: its prompt, timeout, own options
                request = session.request.for_turn(
                    prompt,
                    timeout=options.get("timeout"),
                    model=options.get("model"),
                    permissions=options.get("permissions"),
                    output_schema=options.get("output_schema"),
                )
                refused = self._check(wiring.backend, request, "turn")
                if refused is not None:
                    raise RefusedError(refused.message)
            else:
                request = self.build(prompt, options, mode="run")
        except ConfigError as exc:
            return self._refused(Status.USAGE, ErrorCode.INVALID_REQUEST, str(exc))
        probe = False
        breaker = self._breaker
        if breaker is not None and trigger == "user":
            probe, wait = breaker.admit(clock.monotonic())
            if wait > 0:
                return self._degraded(wait)
        await wiring.sweep_once()
        run_id = uuid.uuid4().hex
        self._run_id = run_id
        run = wiring.start(request, run_id, clock, session, trigger)
        self._idle = anyio.Event()
        self._loop = current_token()
        self._set_state(AgentState.BUSY, "probe after cooldown" if probe else "run started")
        result: RunResult | None = None
        try:
            result = await run.execute(request.retry)  # None for a turn: never retried
        finally:
            self._after(result, probe, clock)
            self._idle.set()
        result = run.response(result)
        self._last = result
        run.finish(result)
        return result

    # -- answers without a run -----------------------------------------------------

    def _refused(self, status: int, error: ErrorCode, message: str) -> RunResult:
        """An answer given without running anything (busy, invalid request)."""
        result = self.wiring.analyzed(self.wiring.bare(status, error, message))
        self._last = result
        return result

    def _degraded(self, remaining: float) -> RunResult:
        breaker = self._breaker
        assert breaker is not None
        if self._state is not AgentState.DEGRADED and self._state is not AgentState.BUSY:
            self._set_state(AgentState.DEGRADED, breaker.reason, breaker.snapshot(remaining))
        wiring = self.wiring
        result = wiring.analyzed(
            wiring.bare(
                Status.UNAVAILABLE,
                ErrorCode.DEGRADED,
                f"agent {wiring.name!r} is DEGRADED: {breaker.reason}. Nothing was started; "
                f"a probe request is accepted in {remaining:.1f}s "
                "(or call reset_circuit() once the cause is fixed).",
            ),
            retry_after_s=round(remaining, 3),
        )
        self._last = result
        return result

    # -- the state machine ---------------------------------------------------------

    def _set_state(
        self, state: AgentState, reason: str, extra: Mapping[str, Any] | None = None
    ) -> None:
        previous = self._state
        self._state = state
        self._reason = reason
        self.wiring.bus.publish(
            StateEvent(state.value, previous.value, reason, extra), self._run_id
        )

    def _after(self, result: RunResult | None, probe: bool, clock: Clock) -> None:
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
            self._set_state(AgentState.DEGRADED, reason, breaker.snapshot(remaining))
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
