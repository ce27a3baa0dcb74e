"""One run's wiring, apart from the agent's state machine.

The agent (READY, BUSY, DEGRADED) decides *whether* a request runs; this
module is *how* it runs::

    observers opened → wrappers around the run → the retry loop → attempts
    → results analyzed → the response assembled, masked, published

:class:`RunWiring` holds what every run of one agent shares (built once, with
the agent); :class:`Run` is one run in flight.  The wrappers around a run
(isolation, verify) are handed in by the agent as a factory
(:mod:`coding_genesis._workspace.wrappers`): the pipeline knows only their
protocol (:mod:`coding_genesis._pipeline.wrappers`).
"""

from __future__ import annotations

import functools
import logging
import os
import time
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

import anyio
from pydantic import BaseModel

from coding_genesis._pipeline.attempt import AttemptContext, AttemptOutcome, run_attempt
from coding_genesis._pipeline.bus import EventBus
from coding_genesis._pipeline.fanout import RunObservers
from coding_genesis._pipeline.outcome import (
    ResultContext,
    build_result,
    how_far,
    replayed_outcome,
    tally_facts,
    with_best_usage,
)
from coding_genesis._pipeline.output import OUTPUT_RETRY, checked_output
from coding_genesis._pipeline.retrying import AttemptPlan, retrying
from coding_genesis._pipeline.routes import RunRoutes
from coding_genesis._pipeline.tally import RunTally
from coding_genesis._pipeline.transport import OneTurn, Transport
from coding_genesis._pipeline.wrappers import RunWrappers
from coding_genesis._supervision.ledger import Ledger, LedgerError
from coding_genesis._supervision.stop import StopHandle
from coding_genesis._supervision.values import StopReason
from coding_genesis._util.clock import Clock, current_clock
from coding_genesis._util.redact import Redactor
from coding_genesis.backend import Backend
from coding_genesis.config import AgentConfig
from coding_genesis.events import EventKind
from coding_genesis.observer import Observer, RunInfo, RunObserver
from coding_genesis.options import Trigger
from coding_genesis.request import Request, RequestSettings
from coding_genesis.result import RunResponse, RunResult
from coding_genesis.retry import RetryPolicy
from coding_genesis.run_events import AttemptEvent, RunFinishedEvent, RunStartedEvent
from coding_genesis.status import ErrorCode, Status
from coding_genesis.usage import RunningTotals

__all__ = ["Run", "RunWiring", "Sweeper", "WrappersFactory", "run_redactor"]

#: The sweep over a ledger at an agent's first run: (ledger, worktree roots).
Sweeper = Callable[[Ledger, Sequence[str]], Awaitable[object]]

#: The agent's logger: what a run logs is logged under the agent, as before the split.
log = logging.getLogger("coding_genesis.agent")

#: Builds the wrappers around one run: (config, run id, run ledger) → wrappers.
WrappersFactory = Callable[[AgentConfig, str, Ledger | None], RunWrappers]


def run_redactor(config: AgentConfig, request: Request | None = None) -> Redactor:
    """The redactor of an agent's runs and sessions (their events, transcripts,
    run log, answers): the process's environment, the agent's ``env`` and its
    MCP servers' (``mcp_servers=``; ``request``: a call's own servers too);
    one shared instance while they are unchanged (the server's journals ask
    it too)."""
    servers = [*config.mcp_servers.values()]
    if request is not None and request.mcp_servers is not config.mcp_servers:
        servers += request.mcp_servers.values()
    extra = dict(config.env)
    for spec in servers:
        extra.update(spec.env)
    return Redactor.of_environment(extra)


class RunWiring:
    """What every run of one agent shares: its configuration, backend, event
    bus, redactor, run ledger, observers, the factory of its run wrappers and
    the one-turn transport of a two-way run."""

    __slots__ = (
        "_sweep",
        "_swept",
        "backend",
        "bus",
        "config",
        "ledger",
        "make_wrappers",
        "name",
        "observers",
        "one_turn",
        "redactor",
        "totals",
    )

    def __init__(
        self,
        config: AgentConfig,
        backend: Backend,
        name: str,
        observers: Sequence[Observer],
        make_wrappers: WrappersFactory | None,
        sweep: Sweeper | None = None,
        *,
        one_turn: OneTurn,
    ) -> None:
        self.config = config
        self.backend = backend
        self.redactor = run_redactor(config)
        #: The agent's name as every record of its runs carries it (events, the
        #: bus's stamp, transcripts, spans, logs, answers): masked once, here,
        #: since the name is fixed, rather than on every event.
        self.name = self.redactor.text(name)
        self.bus = EventBus(self.name)
        self.observers = tuple(observers)
        #: None: no wrapper around any run (the factory is not even called).
        self.make_wrappers = make_wrappers
        #: What runs at the agent's first run over its ledger (handed in by the
        #: agent: the sweep acts on worktrees and transcripts, above this layer).
        self._sweep = sweep
        #: One turn of a live CLI, for a run with an approver, hooks or host
        #: tools (handed in by the agent: the live transport is above this layer).
        self.one_turn = one_turn
        self.ledger: Ledger | None = (
            None
            if config.ledger is False
            else Ledger(config.ledger if isinstance(config.ledger, str) else None)
        )
        #: The running totals this agent's CLI sessions reported (each run's
        #: usage is its share of them; see coding_genesis.usage.RunningTotals).
        self.totals = RunningTotals()
        self._swept = False

    def clock(self) -> Clock:
        return self.config.clock if self.config.clock is not None else current_clock()

    # -- a run -----------------------------------------------------------------

    async def sweep_once(self) -> None:
        """At the agent's first run: stop what runs of dead runners left behind."""
        if self._swept:
            return
        self._swept = True
        ledger = self.ledger
        if ledger is None or self._sweep is None:
            return
        try:
            roots = (self.config.worktrees_dir,) if self.config.worktrees_dir else ()
            await self._sweep(ledger, roots)
        except LedgerError as exc:
            log.warning("run ledger off for agent %r: %s", self.name, exc)
            self.ledger = None
        except Exception:
            log.exception("sweep of the run ledger %s failed", ledger.path)

    def session_observers(self, key: str, request: Request) -> list[RunObserver]:
        """The observers of a live session's own traffic (outside its turns:
        the opening, what comes between turns), one per agent observer that
        watches sessions (``Observer.session_started``)."""
        self.mask_servers(request)
        info = RunInfo.from_request(
            request,
            run_id=key,
            agent=self.name,
            redactor=self.redactor,
            prompt="(a live session: what its CLI said outside its turns)",
            translator=self.backend.translator,
            session=key,
        )
        watching: list[RunObserver] = []
        for observer in self.observers:
            try:
                watcher = observer.session_started(key, info)
            except Exception:
                log.exception("observer %r failed at the start of session %s", observer, key)
                continue
            if watcher is not None:
                watching.append(watcher)
        return watching

    def mask_servers(self, request: Request) -> None:
        """A call's own MCP servers (``mcp_servers=`` of ``run()`` or
        ``session()``): their env's secrets join the redactor of this run and
        the ones after it (one request runs at a time: masking more is safe)."""
        if request.mcp_servers and request.mcp_servers is not self.config.mcp_servers:
            self.redactor = run_redactor(self.config, request)

    def start(
        self,
        request: Request,
        run_id: str,
        clock: Clock,
        link: Transport | None = None,
        trigger: Trigger = "user",
    ) -> Run:
        """Open the run's observers (subscribed to the bus) and its wrappers.
        ``link``: the run is a turn of that live session (its stop handle is
        the session's: a budget stops the session's process); ``trigger``:
        who started it (``cli``: the CLI itself, between the session's turns)."""
        started = time.monotonic()
        self.mask_servers(request)
        stop = link.stop if link is not None else StopHandle()
        bus = self.bus
        observers = RunObservers(
            self.observers,
            RunInfo.from_request(
                request,
                run_id=run_id,
                agent=self.name,
                redactor=self.redactor,
                stop=stop,
                publish=lambda event: bus.publish(event, run_id),
                translator=self.backend.translator,
                session=link.key if link is not None else None,
                turn=link.turns + 1 if link is not None else 0,
                trigger=trigger,
                totals=self.totals,
            ),
        )
        unsubscribe = bus.subscribe(observers.event, kinds=observers.kinds) if observers else None
        make_wrappers = self.make_wrappers
        wrappers = (
            make_wrappers(self.config, run_id, self.ledger) if make_wrappers else RunWrappers()
        )
        run = Run(self, request, run_id, clock, started, stop, observers, unsubscribe, wrappers)
        run.link = link
        run.trigger = trigger
        return run

    async def attempts(self, run: Run, request: Request, policy: RetryPolicy | None) -> RunResult:
        """The attempts of one request, each analyzed; the policy decides
        retries (a request with an output schema retries an answer that does
        not match once, without a policy too: in a live session, as a second
        turn)."""
        run_id = run.run_id
        wrappers = run.wrappers

        async def attempt(plan: AttemptPlan) -> RunResult:
            outcome = await self.attempt(request, plan, run)
            result = build_result(outcome, self.result_context(run_id, request))
            result = checked_output(result, request.output_schema, self.backend)
            if wrappers:
                result = await wrappers.after_attempt(result, request)
            return self.analyzed(result, request=request)

        timeout = request.timeout
        first = AttemptPlan(1, request.prompt, request.resume, timeout)
        if policy is None and request.output_schema is not None:
            policy = OUTPUT_RETRY
        if policy is None:
            return await attempt(first)
        if policy.deadline is not None:
            first = AttemptPlan(1, request.prompt, request.resume, min(timeout, policy.deadline))
        bus = self.bus

        def on_attempt(entry: dict[str, Any]) -> None:
            fields = dict(entry)
            bus.publish(AttemptEvent(fields.pop("phase"), fields.pop("attempt"), fields), run_id)

        return await retrying(
            policy,
            run.clock,
            attempt,
            first,
            # a live session's next turn continues its conversation by itself
            can_resume=policy.resume and run.link is None and self.resumes(request),
            on_attempt=on_attempt,
            escalation={"run_id": run_id, "agent": self.name, "backend": self.backend.name},
        )

    def resumes(self, request: Request) -> bool:
        """Whether a retry of ``request`` may continue the failed attempt's
        session: the backend can resume, and over its two-way protocol when
        the run is a live turn (gemini's ACP ``session/load`` would wipe it)."""
        backend = self.backend
        if not backend.supports_resume or not backend.runs_live(request):
            return backend.supports_resume
        protocol = backend.control()
        return protocol is not None and protocol.resume_refusal is None

    async def attempt(self, request: Request, plan: AttemptPlan, run: Run) -> AttemptOutcome:
        bus = self.bus
        redactor = self.redactor
        backend = self.backend.name
        run_id = run.run_id
        observers = run.observers
        ledger = self.ledger if run.link is None else None  # a session keeps its own record
        transcript = (
            os.path.join(self.config.transcripts, run_id) if self.config.transcripts else None
        )
        if ledger is not None:
            self.record(ledger, run_id, transcript, None)
        overlay: list[str] = []

        def overlay_opened(path: str) -> None:
            overlay[:] = [path]
            if ledger is not None:
                self.record(ledger, run_id, transcript, None, path)

        def spawned(pid: int, argv: list[str]) -> None:
            if ledger is not None:
                self.record(ledger, run_id, transcript, pid, *overlay[:1])
            timeout = plan.timeout if plan.timeout is not None else request.timeout
            bus.publish(RunStartedEvent(backend, argv[0], pid, request.cwd, timeout), run_id)

        tallies: list[RunTally] = []

        def held(tally: RunTally) -> None:
            run.tally = tally
            tallies.append(tally)

        context = AttemptContext(
            routes=RunRoutes(bus, run_id, redactor, observers or None),
            on_stdout=observers.stdout if observers else None,
            on_decoded=observers.flush if observers else None,
            on_spawn=spawned,
            on_tally=held,
            redactor=redactor if redactor.active else None,
            extra_env=observers.attempt_env() if observers else None,
            stop=run.stop,
            message_usage="live"
            if bus.wants(EventKind.USAGE)
            else (observers.message_usage if observers else "off"),
            on_overlay=overlay_opened,
            on_stdin=observers.stdin if observers else None,
            on_stderr=observers.stderr if observers else None,
            totals=self.totals,
        )
        attempt = request.retried(plan.prompt, plan.resume, plan.timeout)
        try:
            if run.link is not None:  # a turn of a live session
                return await run.link.turn(attempt, context, run_id=run_id, trigger=run.trigger)
            # An approver, hooks or tools, or a CLI that speaks nothing else (an
            # ACP agent): one turn of a live process.
            if self.backend.runs_live(attempt):
                return await self.one_turn(self.backend, attempt, context, run_id)
            return await run_attempt(self.backend, attempt, marker=run_id, context=context)
        finally:
            if ledger is not None:
                ledger.remove(run_id)
            if tallies and observers:
                observers.attempt_decoded(tallies[0])

    def record(
        self,
        ledger: Ledger,
        run_id: str,
        transcript: str | None,
        pid: int | None,
        overlay: str | None = None,
    ) -> None:
        try:
            ledger.record(
                run_id, marker=run_id, transcript=transcript, cli_pid=pid, overlay=overlay
            )
        except OSError as exc:
            log.warning("run ledger %s off for agent %r: %s", ledger.path, self.name, exc)
            self.ledger = None

    # -- results ------------------------------------------------------------------

    def result_context(self, run_id: str, settings: RequestSettings) -> ResultContext:
        return ResultContext.from_request(
            settings, run_id=run_id, agent=self.name, backend=self.backend, redactor=self.redactor
        )

    def bare(self, status: int, error: ErrorCode, message: str, **extra: Any) -> RunResult:
        """A failed result with nothing run behind it (yet to be analyzed)."""
        return RunResult(
            status=int(status),
            message=self.redactor.text(message),
            backend=self.backend.name,
            agent=self.name,
            is_error=True,
            error=error,
            **extra,
        )

    def analyzed(
        self,
        result: RunResult,
        retry_after_s: float | None = None,
        request: RequestSettings | None = None,
    ) -> RunResult:
        """Attach the one failure value and its views to a failed result (its
        advice in the request's own limits; without one, the agent's)."""
        if not result.is_error or result.failure is not None:
            return result
        # lazy: only a failure needs the analysis and its tables
        from coding_genesis._failures.analysis import analyze

        return analyze(
            result,
            self.backend,
            node=self.name,
            timeout=(request or self.config).timeout,
            idle_timeout=(request or self.config).idle_timeout,
            redactor=self.redactor,
            retry_after_s=retry_after_s,
            now=self.clock().time(),
        )

    def redacted(self, result: RunResult) -> RunResult:
        """One last pass over the whole response, keys included: what ``run()``
        returns is masked exactly like ``result.json`` (the failure value and
        its views were masked when they were made)."""
        if not self.redactor.active:
            return result
        fields = result.model_dump(exclude={"failure", "error", "output"})
        clean = self.redactor.deep(fields)
        output = result.output
        if isinstance(output, BaseModel):  # a model instance stays one unless it holds a secret
            dumped = output.model_dump(mode="json")
            masked = self.redactor.deep(dumped)
            if masked is not dumped:
                clean = {**clean, "output": masked}
        elif output is not None:
            masked = self.redactor.deep(output)
            if masked is not output:
                clean = {**clean, "output": masked}
        if clean is fields:
            return result
        return result.model_copy(update=clean)

    def replay(
        self,
        stdout: bytes,
        *,
        returncode: int | None,
        stderr: str,
        cwd: str,
        stop_reason: StopReason | str | None,
        duration_s: float,
        run_id: str,
    ) -> RunResponse:
        """The response a run of a CLI that printed ``stdout`` would have
        given, offline (see ``CodingGenesisAgent.replay``)."""
        # Observers that write nothing and say so (``replays = True``: metering)
        # watch a replay too, so that it answers what the live run answered.
        watchers = RunObservers(
            [o for o in self.observers if o.replays],
            RunInfo.from_request(
                Request.of(self.config, prompt="(replay)", cwd=cwd, backend=self.backend.name),
                run_id=run_id,
                agent=self.name,
                redactor=self.redactor,
            ),
        )
        outcome = replayed_outcome(
            self.config,
            self.backend,
            stdout,
            returncode=returncode,
            stderr=stderr,
            cwd=cwd,
            stop_reason=StopReason(stop_reason) if stop_reason is not None else None,
            duration_s=duration_s,
            on_event=watchers.replayed if watchers else None,
        )
        if watchers:
            watchers.attempt_decoded(outcome.tally)
        result = self.analyzed(build_result(outcome, self.result_context(run_id, self.config)))
        extra = watchers.response_fields()
        warnings = extra.pop("warnings", None)
        if warnings:
            extra["warnings"] = [*result.warnings, *warnings]
        return with_best_usage(result.model_copy(update=extra)).to_dict()


class Run:
    """One run in flight: its id, stop handle, observers and wrappers."""

    __slots__ = (
        "clock",
        "link",
        "observers",
        "request",
        "run_id",
        "started",
        "stop",
        "tally",
        "trigger",
        "unsubscribe",
        "wiring",
        "wrappers",
    )

    def __init__(
        self,
        wiring: RunWiring,
        request: Request,
        run_id: str,
        clock: Clock,
        started: float,
        stop: StopHandle,
        observers: RunObservers,
        unsubscribe: Callable[[], None] | None,
        wrappers: RunWrappers,
    ) -> None:
        self.wiring = wiring
        self.request = request
        self.run_id = run_id
        #: Time source of the retry loop (and the agent's breaker).
        self.clock = clock
        #: ``time.monotonic()`` when the run started.
        self.started = started
        self.stop = stop
        self.observers = observers
        self.unsubscribe = unsubscribe
        self.wrappers = wrappers
        #: The live session this run is a turn of (None: a one-shot run).
        self.link: Transport | None = None
        #: Who started it (``cli``: the CLI, between a session's turns).
        self.trigger: Trigger = "user"
        #: The tally of the attempt in flight (for the answer to a cancellation).
        self.tally: RunTally | None = None

    async def execute(self, policy: RetryPolicy | None) -> RunResult:
        """The wrappers around the run and its attempts.  A bug of ours is still
        answered; a cancellation is answered to the observers, then re-raised."""
        wiring = self.wiring
        run_id = self.run_id
        try:
            return await self.wrappers.run(
                self.request,
                functools.partial(wiring.attempts, self, policy=policy),
                lambda status, error, message: wiring.analyzed(
                    wiring.bare(status, error, message, run_id=run_id)
                ),
            )
        except anyio.get_cancelled_exc_class():
            self._finish_cancelled()
            raise
        except Exception as exc:  # a bug of ours: still answer
            log.exception("internal error in run %s", run_id)
            return wiring.analyzed(
                wiring.bare(
                    Status.INTERNAL,
                    ErrorCode.INTERNAL,
                    f"internal error in coding-genesis: {exc!r}",
                    run_id=run_id,
                )
            )

    def response(self, result: RunResult) -> RunResult:
        """The run's final result: its duration, the observers' fields, masked."""
        update: dict[str, Any] = {"duration_s": round(time.monotonic() - self.started, 6)}
        if self.link is not None:
            update["turn"] = self.link.turns
            update["trigger"] = self.trigger
        extra = self.observers.response_fields()
        warnings = extra.pop("warnings", None)
        if warnings:
            update["warnings"] = [*result.warnings, *warnings]
        update.update(extra)
        return self.wiring.redacted(with_best_usage(result.model_copy(update=update)))

    def finish(self, result: RunResult) -> None:
        """Publish the end of the run; close its observers."""
        response = result.to_dict()
        category = result.failure.category.value if result.failure else None
        self.wiring.bus.publish(
            RunFinishedEvent(result.status, response["error"], category), self.run_id
        )
        if self.unsubscribe is not None:
            self.unsubscribe()
        self.observers.finish(response)

    def _finish_cancelled(self) -> None:
        """The answer to a cancelled run (what its attempt did so far), to the
        observers and the bus."""
        wiring = self.wiring
        tally = self.tally
        facts = tally_facts(tally, wiring.redactor) if tally is not None else {}
        result = wiring.bare(
            Status.CANCELLED,
            ErrorCode.CANCELLED,
            f"{wiring.backend.name} run cancelled by the caller; process tree stopped; "
            + how_far(facts, time.monotonic() - self.started),
            run_id=self.run_id,
            stop_reason=StopReason.CANCELLED.value,
            duration_s=round(time.monotonic() - self.started, 6),
            **facts,
        )
        result = wiring.analyzed(result)
        extra = self.observers.response_fields()
        extra.pop("warnings", None)
        cancelled = with_best_usage(result.model_copy(update=extra))
        if self.wrappers.fields:
            cancelled = cancelled.model_copy(
                update={k: v for k, v in self.wrappers.fields.items() if k != "warnings"}
            )
        response = wiring.redacted(cancelled).to_dict()
        wiring.bus.publish(
            RunFinishedEvent(int(Status.CANCELLED), "cancelled", None, cancelled=True),
            self.run_id,
        )
        if self.unsubscribe is not None:
            self.unsubscribe()
        self.observers.finish(response)
