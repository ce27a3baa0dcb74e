"""``CodingGenesisAgent``: a small state machine around one supervised CLI run."""

from __future__ import annotations

import contextlib
import functools
import hashlib
import logging
import math
import os
import re
import shutil
import signal as _signal
import time
import uuid
from collections.abc import Mapping, Sequence
from typing import Any

import anyio

from .backend import Backend, RunRequest
from .errorcontext import describe_failure, fallback_failure
from .errors import AgentUsageError, ConfigError, InvalidCwdError, InvalidTimeoutError
from .events import (
    AttemptEvent,
    EventBus,
    EventStream,
    ResultEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateEvent,
    Subscription,
)
from .parser import DEFAULT_MAX_LINE_BYTES, JsonLinesParser
from .process import ProcessOutcome, StopReason, SupervisorConfig, build_env, run_process
from .redact import Redactor
from .result import RunResult, RunTally
from .retry import (
    Action,
    Circuit,
    CircuitBreaker,
    Clock,
    Decision,
    RetryPolicy,
    blocker,
    continuation_prompt,
    current_clock,
    escalation_record,
    iso,
    suggested_actions,
)
from .runlog import append_run, resolve_run_log, run_record
from .states import AgentState, Status
from .transcript import Transcript, now_meta, resolve_transcript_dir

__all__ = ["DEFAULT_TIMEOUT", "CodingGenesisAgent"]

log = logging.getLogger("coding_genesis.agent")

DEFAULT_TIMEOUT = 300.0
#: DEGRADED after 3 requests in a row fail with a missing CLI or bad auth; 60 s cooldown.
_DEFAULT_BREAKER = CircuitBreaker()
#: ``run(retry=...)`` not given: use the agent's policy.
_AGENT_POLICY: Any = object()
_SESSION_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+=-]{0,255}$")


def _seconds(
    name: str, value: object, *, allow_none: bool = False, allow_zero: bool = False
) -> float | None:
    """Validate a duration: a finite real number of seconds."""
    if value is None and allow_none:
        return None
    if isinstance(value, bool) or not isinstance(value, int | float):
        raise (InvalidTimeoutError if name == "timeout" else ConfigError)(
            f"{name} must be a number of seconds, got {value!r}"
        )
    seconds = float(value)
    if (
        math.isnan(seconds)
        or math.isinf(seconds)
        or seconds < 0
        or (seconds == 0 and not allow_zero)
    ):
        bound = ">= 0" if allow_zero else "> 0"
        raise (InvalidTimeoutError if name == "timeout" else ConfigError)(
            f"{name} must be a finite number of seconds {bound}, got {value!r}"
        )
    return seconds


def _required_seconds(name: str, value: object, *, allow_zero: bool = False) -> float:
    seconds = _seconds(name, value, allow_zero=allow_zero)
    assert seconds is not None
    return seconds


def _check_cwd(cwd: str | os.PathLike[str]) -> str:
    path = os.path.abspath(os.fspath(cwd))
    if not os.path.exists(path):
        raise InvalidCwdError(f"cwd {path!r} does not exist")
    if not os.path.isdir(path):
        raise InvalidCwdError(f"cwd {path!r} is not a directory")
    if not os.access(path, os.X_OK):
        raise InvalidCwdError(f"cwd {path!r} is not accessible")
    return path


class CodingGenesisAgent:
    """Runs one coding-agent CLI request at a time and always answers with a dict.

    States: ``READY`` → ``BUSY`` while a run is in flight → ``READY`` after any
    outcome (success, failure, timeout, crash, cancellation).  A request made
    while ``BUSY`` is answered at once with status 75 and starts nothing.

    ``retry=`` (a :class:`~coding_genesis.retry.RetryPolicy`, "default" or a
    number of retries) retries failures per category, resuming the CLI session;
    without it a request is one attempt.  ``circuit_breaker=`` makes the agent
    ``DEGRADED`` (status 69 at once) after repeated failures no retry fixes
    (CLI missing, auth) until a cooldown passes and a probe succeeds.

    Every state change and every normalized run event is published to
    :meth:`subscribe` callbacks and :meth:`events` streams.
    """

    def __init__(
        self,
        backend: str | Backend = "claude",
        *,
        timeout: float = DEFAULT_TIMEOUT,
        cwd: str | os.PathLike[str] | None = None,
        name: str | None = None,
        cli_path: str | Sequence[str] | None = None,
        model: str | None = None,
        grace: float = 5.0,
        idle_timeout: float | None = None,
        linger: float | None = 2.0,
        eof_grace: float = 0.5,
        stop_signals: Sequence[int] = (_signal.SIGTERM,),
        kill_leftovers: bool = True,
        env: Mapping[str, str] | None = None,
        extra_args: Sequence[str] = (),
        options: Mapping[str, Any] | None = None,
        max_line_bytes: int = DEFAULT_MAX_LINE_BYTES,
        stderr_tail_bytes: int = 64 * 1024,
        run_log: str | os.PathLike[str] | bool | None = None,
        retry: RetryPolicy | str | int | None = None,
        circuit_breaker: CircuitBreaker | None = _DEFAULT_BREAKER,
        clock: Clock | None = None,
        transcripts: str | os.PathLike[str] | bool | None = None,
    ) -> None:
        if isinstance(backend, str):
            from backends import get_backend

            self._backend: Backend = get_backend(backend)
        elif isinstance(backend, Backend):
            self._backend = backend
        else:
            raise ConfigError(
                f"backend must be a backend name or a Backend object, got {backend!r}"
            )
        self._timeout = _required_seconds("timeout", timeout)
        self._grace = _required_seconds("grace", grace, allow_zero=True)
        self._idle_timeout = _seconds("idle_timeout", idle_timeout, allow_none=True)
        self._linger = _seconds("linger", linger, allow_none=True, allow_zero=True)
        self._eof_grace = _required_seconds("eof_grace", eof_grace, allow_zero=True)
        self._cwd = _check_cwd(cwd) if cwd is not None else None
        if not isinstance(max_line_bytes, int) or max_line_bytes < 1:
            raise ConfigError(f"max_line_bytes must be a positive integer, got {max_line_bytes!r}")
        if not isinstance(stderr_tail_bytes, int) or stderr_tail_bytes < 0:
            raise ConfigError(
                f"stderr_tail_bytes must be a non-negative integer, got {stderr_tail_bytes!r}"
            )
        signals = tuple(int(s) for s in stop_signals)
        for signum in signals:
            try:
                _signal.Signals(signum)
            except ValueError:
                raise ConfigError(f"unknown signal {signum!r} in stop_signals") from None
        if isinstance(cli_path, str | os.PathLike):
            self._cli_path: tuple[str, ...] | None = (os.fspath(cli_path),)
        elif cli_path is not None:
            self._cli_path = tuple(os.fspath(p) for p in cli_path)
            if not self._cli_path:
                raise ConfigError("cli_path must not be empty")
        else:
            self._cli_path = None
        if any(not isinstance(a, str) or "\0" in a for a in extra_args):
            raise ConfigError("extra_args must be strings without NUL bytes")
        if run_log is not None and not isinstance(run_log, bool | str | os.PathLike):
            raise ConfigError(f"run_log must be a path, True or False, got {run_log!r}")
        #: Where each run appends its record (None: $GENESIS_RUN_LOG / XDG default).
        self._run_log = run_log
        self._model = model
        self._env = dict(env or {})
        self._extra_args = tuple(extra_args)
        self._options = dict(options or {})
        self._supervisor = SupervisorConfig(
            timeout=self._timeout,
            grace=self._grace,
            idle_timeout=self._idle_timeout,
            linger=self._linger,
            eof_grace=self._eof_grace,
            stop_signals=signals,
            kill_leftovers=kill_leftovers,
            max_line_bytes=max_line_bytes,
            stderr_tail_bytes=stderr_tail_bytes,
        )
        self.name = name or f"{self._backend.name}-agent"
        self._state = AgentState.READY
        self._state_reason = "created"
        self._run_id: str | None = None
        self._bus = EventBus(self.name)
        self._last: RunResult | None = None
        # Retry and recovery (coding_genesis.retry): no retry policy unless one is
        # given, so one request is one attempt by default.
        self._retry = RetryPolicy.parse(retry)
        if circuit_breaker is not None and not isinstance(circuit_breaker, CircuitBreaker):
            raise ConfigError(
                f"circuit_breaker must be a CircuitBreaker or None, got {circuit_breaker!r}"
            )
        self._circuit = Circuit(circuit_breaker) if circuit_breaker is not None else None
        self._clock = clock
        # Where run directories go (None: off); see coding_genesis.transcript.
        self._transcript_dir = resolve_transcript_dir(transcripts)
        self._transcript: Transcript | None = None

    # -- introspection -------------------------------------------------

    @property
    def timeout(self) -> float:
        """Wall-clock limit of one run, in seconds (300.0 by default)."""
        return self._timeout

    @property
    def state(self) -> AgentState:
        return self._state

    @property
    def state_reason(self) -> str:
        return self._state_reason

    @property
    def backend(self) -> Backend:
        return self._backend

    @property
    def backend_name(self) -> str:
        return self._backend.name

    @property
    def supervisor_config(self) -> SupervisorConfig:
        return self._supervisor

    @property
    def retry_policy(self) -> RetryPolicy | None:
        """The agent's retry policy (None: one attempt per request)."""
        return self._retry

    @property
    def circuit_breaker(self) -> CircuitBreaker | None:
        return self._circuit.config if self._circuit is not None else None

    @property
    def consecutive_failures(self) -> int:
        """Requests in a row that failed in a way that trips the circuit breaker."""
        return self._circuit.consecutive if self._circuit is not None else 0

    @property
    def cooldown_remaining(self) -> float:
        """Seconds before a DEGRADED agent accepts a probe request (0 otherwise)."""
        if self._circuit is None or self._state is not AgentState.DEGRADED:
            return 0.0
        return self._circuit.remaining(self._now_clock().monotonic())

    def reset_circuit(self, reason: str = "circuit reset by hand") -> None:
        """Close the circuit breaker: a DEGRADED agent becomes READY at once."""
        if self._circuit is not None:
            self._circuit.reset()
        if self._state is AgentState.DEGRADED:
            self._set_state(AgentState.READY, reason)

    @property
    def transcript_dir(self) -> str | None:
        """Directory holding one sub-directory per run, or None when transcripts are off."""
        return str(self._transcript_dir) if self._transcript_dir is not None else None

    @property
    def last_result(self) -> RunResult | None:
        """The typed model behind the dict of the last run."""
        return self._last

    def __repr__(self) -> str:
        return f"CodingGenesisAgent(backend={self.backend_name!r}, name={self.name!r}, state={self._state.value})"

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

    # -- running -------------------------------------------------------

    def run_sync(self, prompt: str, **overrides: Any) -> dict[str, Any]:
        """Blocking :meth:`run` for code without an event loop."""
        library = _running_event_loop()
        if library is not None:
            raise AgentUsageError(
                f"run_sync() cannot be called from a running {library} event loop; use `await agent.run(...)`"
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
    ) -> dict[str, Any]:
        """Run one request; return the response dict.  Never raises for a
        runtime failure; re-raises cancellation after the process tree is gone.

        ``retry`` overrides the agent's retry policy for this call (None: one attempt).
        """
        if self._state is AgentState.BUSY:
            return self._classified(self._busy()).to_dict()
        try:
            policy = self._retry if retry is _AGENT_POLICY else RetryPolicy.parse(retry)
        except ConfigError as exc:
            return self._classified(
                self._failure("", Status.USAGE, str(exc), "invalid_request")
            ).to_dict()
        clock = self._now_clock()
        probe = False
        if self._state is AgentState.DEGRADED and self._circuit is not None:
            remaining = self._circuit.remaining(clock.monotonic())
            if remaining > 0:
                return self._degraded(remaining).to_dict()
            probe = True
        run_id = uuid.uuid4().hex
        self._run_id = run_id
        transcript = self._open_transcript(run_id, prompt, cwd, timeout, model, resume)
        self._set_state(AgentState.BUSY, "probe after cooldown" if probe else "run started")
        result: RunResult | None = None
        try:
            if policy is None:
                result = await self._attempt(
                    prompt,
                    run_id,
                    timeout=timeout,
                    cwd=cwd,
                    model=model,
                    resume=resume,
                    options=options,
                    request_key=request_key,
                )
            else:
                result = await self._retrying(
                    policy,
                    clock,
                    prompt,
                    run_id,
                    timeout=timeout,
                    cwd=cwd,
                    model=model,
                    resume=resume,
                    options=options,
                    request_key=request_key,
                )
            if result.is_error and result.failure is None:
                result = self._classified(result)
        except anyio.get_cancelled_exc_class():
            self._bus.publish(
                RunFinishedEvent(int(Status.CANCELLED), cancelled=True),
                run_id,
            )
            self._close_transcript(transcript, None)
            raise
        except Exception as exc:  # a bug of ours: still answer
            log.exception("internal error in run %s", run_id)
            result = self._classified(
                self._failure(
                    run_id,
                    Status.INTERNAL,
                    f"internal error in coding-genesis: {exc!r}",
                    "internal",
                )
            )
        finally:
            self._after_run(result, probe, clock)
        if transcript is not None:
            result = self._with_transcript(result, transcript)
        self._last = result
        out = result.to_dict()
        self._log_run(out)
        self._bus.publish(
            RunFinishedEvent(result.status, result.error, (result.failure or {}).get("category")),
            run_id,
        )
        self._close_transcript(transcript, out)
        return out

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
        wrote ``stderr`` and exited with ``returncode``: the same parser,
        translator, tally and result building, offline.  Starts nothing,
        publishes nothing, writes no transcript."""
        run_id = uuid.uuid4().hex
        base = os.path.abspath(os.fspath(cwd)) if cwd is not None else (self._cwd or os.getcwd())
        parser = JsonLinesParser(self._supervisor.max_line_bytes)
        translate = self._backend.translator().translate
        tally = RunTally(base)
        for obj in (*parser.feed(stdout), *parser.close()):
            for event in translate(obj):
                tally.add(event)
        tail = self._supervisor.stderr_tail_bytes
        err = stderr.encode("utf-8", "replace")
        outcome = ProcessOutcome(
            returncode=returncode,
            stop_reason=StopReason(stop_reason) if stop_reason is not None else None,
            stderr_tail=err[-tail:].decode("utf-8", "replace") if tail else "",
            stderr_bytes=len(err),
            stdout_bytes=len(stdout),
            lines=parser.lines,
            skipped_lines=parser.skipped,
            stdout_eof=True,
            duration_s=duration_s,
        )
        result = self._result(
            run_id, outcome, tally, self._timeout, Redactor(os.environ, self._env)
        )
        if result.is_error and result.failure is None:
            result = self._classified(result)
        return result.to_dict()

    # -- retry and recovery --------------------------------------------

    def _now_clock(self) -> Clock:
        return self._clock if self._clock is not None else current_clock()

    def _after_run(self, result: RunResult | None, probe: bool, clock: Clock) -> None:
        """READY after any outcome, unless the circuit breaker opens (or stays open)."""
        circuit = self._circuit
        if result is None:  # cancelled
            if probe:
                self._set_state(
                    AgentState.DEGRADED, "probe cancelled; the next request probes again"
                )
            else:
                self._set_state(AgentState.READY, "run cancelled")
            return
        if circuit is None:
            self._set_state(AgentState.READY, "run finished")
            return
        category = (result.failure or {}).get("category") if result.is_error else None
        outcome = circuit.record(
            result.error if result.is_error else None,
            category,
            result.message,
            clock.monotonic(),
        )
        if circuit.open and (outcome == "trip" or (probe and outcome == "neutral")):
            remaining = circuit.remaining(clock.monotonic())
            reason = (
                circuit.reason if outcome == "trip" else f"probe inconclusive; {circuit.reason}"
            )
            if probe and outcome == "trip":
                reason = f"probe failed; {reason}"
            self._set_state(
                AgentState.DEGRADED,
                reason,
                {
                    "category": circuit.last_category,
                    "consecutive_failures": circuit.consecutive,
                    "cooldown_s": circuit.config.cooldown_s,
                    "retry_after_s": round(remaining, 3),
                },
            )
            return
        if probe:
            circuit.reset()
            self._set_state(
                AgentState.READY,
                "probe succeeded; circuit closed"
                if outcome == "success"
                else f"probe reached the backend ({result.error}); circuit closed",
            )
            return
        self._set_state(AgentState.READY, "run finished")

    def _degraded(self, remaining: float) -> RunResult:
        assert self._circuit is not None
        result = self._classified(
            self._failure(
                "",
                Status.UNAVAILABLE,
                f"agent {self.name!r} is DEGRADED: {self._circuit.reason}. Nothing was started; "
                f"a probe request is accepted in {remaining:.1f}s "
                "(or call reset_circuit() once the cause is fixed).",
                "degraded",
            ),
            retry_after_s=round(remaining, 3),
        )
        return result

    async def _retrying(
        self,
        policy: RetryPolicy,
        clock: Clock,
        prompt: str,
        run_id: str,
        *,
        timeout: float | None,
        cwd: str | os.PathLike[str] | None,
        model: str | None,
        resume: str | None,
        options: Mapping[str, Any] | None,
        request_key: str | None,
    ) -> RunResult:
        """Attempts under a retry policy (spec 002's ``handleError``/``executeRetry``
        loop), each continuing the previous session where possible (spec 004)."""
        started = clock.monotonic()
        attempt_timeout: float | None
        try:
            attempt_timeout = (
                _required_seconds("timeout", timeout) if timeout is not None else self._timeout
            )
        except ConfigError:
            attempt_timeout = None  # the attempt answers with a usage error
        if attempt_timeout is not None and policy.deadline_s is not None:
            attempt_timeout = min(attempt_timeout, policy.deadline_s)
        if request_key is None and isinstance(prompt, str):
            request_key = self._request_key(prompt, cwd)
        can_resume = policy.resume and bool(getattr(self._backend, "supports_resume", False))
        history: list[dict[str, Any]] = []
        current_prompt, current_resume = prompt, resume
        retries = 0
        fresh_fallback = False
        bus = self._bus
        attempt = 0
        while True:
            attempt += 1
            bus.publish(
                AttemptEvent(
                    "started",
                    attempt,
                    {
                        "timeout": attempt_timeout if attempt_timeout is not None else timeout,
                        "resume_session": current_resume,
                        "continuation": current_prompt is not prompt,
                    },
                ),
                run_id,
            )
            result = await self._attempt(
                current_prompt,
                run_id,
                timeout=attempt_timeout if attempt_timeout is not None else timeout,
                cwd=cwd,
                model=model,
                resume=current_resume,
                options=options,
                request_key=request_key,
            )
            if not result.is_error:
                bus.publish(
                    AttemptEvent(
                        "finished",
                        attempt,
                        {
                            "status": result.status,
                            "action": "succeed",
                            "session_id": result.session_id,
                        },
                    ),
                    run_id,
                )
                return result.model_copy(
                    update={
                        "retry_count": retries,
                        "attempts": retries + 1,
                        "retry_history": history,
                    }
                )
            if result.failure is None:
                result = self._classified(result)
            failure = result.failure or {}
            category = str(failure.get("category") or "unknown")
            retry_after = failure.get("retry_after_s")
            now_mono = clock.monotonic()
            decision = policy.decide(
                category,
                retries_done=retries,
                tool_calls=result.tool_calls,
                timeout_s=attempt_timeout,
                retry_after_s=retry_after if isinstance(retry_after, int | float) else None,
                elapsed_s=now_mono - started,
            )
            resumed_by_us = attempt > 1 and current_resume is not None and current_resume != resume
            if (
                decision.action is not Action.RETRY
                and resumed_by_us
                and result.lines == 0
                and not fresh_fallback
                and result.error not in ("timeout", "idle_timeout", "invalid_request")
            ):
                # The CLI rejected the session (codex: unknown id, exit 1, no output):
                # start over in a fresh session once, at once.
                fresh_fallback = True
                can_resume = False
                decision = Decision(
                    Action.RETRY,
                    f"resuming session {current_resume} failed with no output; "
                    "retrying in a fresh session",
                    0.0,
                    attempt_timeout,
                )
            now = clock.time()
            retrying = decision.action is Action.RETRY
            next_resume = (result.session_id or current_resume) if can_resume else None
            entry: dict[str, Any] = {
                "attempt": attempt,
                "category": category,
                "error": result.error,
                "status": result.status,
                "message": blocker(result),
                "at": iso(now),
                "duration_s": result.duration_s,
                "tool_calls": result.tool_calls,
                "cli_retries": result.cli_retries,
                "session_id": result.session_id,
                "timeout_s": attempt_timeout,
                "action": decision.action.value,
                "reason": decision.reason,
                "delay_s": round(decision.delay_s, 3) if retrying else None,
                "scheduled_at": iso(now + decision.delay_s) if retrying else None,
                "next_timeout_s": decision.next_timeout_s if retrying else None,
                "resume_session": next_resume if retrying else None,
            }
            if not retrying:
                entry["suggested_actions"] = suggested_actions(
                    category, timeout_s=attempt_timeout, tool_calls=result.tool_calls
                )
            history.append(entry)
            bus.publish(AttemptEvent("finished", attempt, entry), run_id)
            if not retrying:
                update: dict[str, Any] = {
                    "retry_count": retries,
                    "attempts": retries + 1,
                    "retry_history": history,
                }
                if decision.action is Action.ESCALATE:
                    update["escalation"] = escalation_record(
                        run_id=run_id,
                        category=category,
                        message=entry["message"],
                        reason=decision.reason,
                        history=history,
                        now=now,
                        agent=self.name,
                        backend=self.backend_name,
                        session_id=result.session_id,
                        timeout_s=attempt_timeout,
                        tool_calls=result.tool_calls,
                    )
                return result.model_copy(update=update)
            retries += 1
            await clock.sleep(decision.delay_s)
            made_progress = result.tool_calls > 0 or bool(result.files_modified)
            current_resume = next_resume
            current_prompt = (
                continuation_prompt(prompt, result, category)
                if (current_resume is not None or made_progress) and isinstance(prompt, str)
                else prompt
            )
            if decision.next_timeout_s is not None:
                attempt_timeout = decision.next_timeout_s

    def _request_key(self, prompt: str, cwd: str | os.PathLike[str] | None) -> str:
        """Stable across the attempts of one logical request (the failer keeps
        its /fail-then-succeed counter under it)."""
        try:
            run_cwd = _check_cwd(cwd) if cwd is not None else (self._cwd or os.getcwd())
        except ConfigError:
            run_cwd = os.fspath(cwd or "")
        return hashlib.sha256(
            f"{self._backend.name}\0{run_cwd}\0{prompt}".encode("utf-8", "surrogatepass")
        ).hexdigest()[:32]

    # -- internals -----------------------------------------------------

    def _open_transcript(
        self,
        run_id: str,
        prompt: object,
        cwd: object,
        timeout: object,
        model: object,
        resume: object,
    ) -> Transcript | None:
        """Start this run's directory and record its events until it ends."""
        if self._transcript_dir is None:
            return None
        transcript = Transcript(self._transcript_dir, run_id, Redactor(os.environ, self._env))
        if not transcript.ok:
            return transcript
        from . import __version__

        transcript.write_meta(
            {
                **now_meta(),
                "agent": self.name,
                "backend": self.backend_name,
                "cwd": os.path.abspath(os.fspath(cwd))
                if isinstance(cwd, str | os.PathLike)
                else self._cwd or os.getcwd(),
                "timeout": timeout if timeout is not None else self._timeout,
                "model": model or self._model,
                "resume": resume,
                "prompt": prompt[:100_000] if isinstance(prompt, str) else repr(prompt)[:1000],
                "runner_pid": os.getpid(),
                "version": __version__,
            }
        )
        self._transcript = transcript
        transcript.unsubscribe = self._bus.subscribe(transcript.event)
        return transcript

    def _close_transcript(self, transcript: Transcript | None, out: dict[str, Any] | None) -> None:
        if transcript is None:
            return
        if transcript.unsubscribe is not None:
            transcript.unsubscribe()
        if self._transcript is transcript:
            self._transcript = None
        if out is None:
            # Cancelled: no outcome, but what the run did so far is in its tally.
            tally: RunTally | None = transcript.tally
            facts: dict[str, Any] = {}
            if tally is not None:
                facts = {
                    "tool_calls": tally.tool_calls,
                    "tool_usage": dict(tally.tool_usage),
                    "files_modified": list(tally.files),
                    "last_successful_tool": tally.last_successful_tool,
                    "failed_tools": list(tally.failed_tools),
                    "session_id": tally.session_id,
                    "model": tally.model,
                    "usage": tally.usage,
                    "cost_usd": tally.cost_usd,
                    "cli_retries": tally.cli_retries,
                }
            out = self._failure(
                transcript.run_id,
                Status.CANCELLED,
                f"{self.backend_name} run cancelled by the caller; process tree stopped",
                "cancelled",
                stop_reason=StopReason.CANCELLED.value,
                duration_s=round(time.monotonic() - transcript.started, 6),
                **facts,
            ).to_dict()
        transcript.finish(out)

    @staticmethod
    def _with_transcript(result: RunResult, transcript: Transcript) -> RunResult:
        if transcript.ok:
            return result.model_copy(update={"transcript": str(transcript.path)})
        warning = f"transcript not written: {transcript.error}"
        return result.model_copy(update={"warnings": [*result.warnings, warning]})

    def _failure(
        self, run_id: str, status: int, message: str, error: str, **extra: Any
    ) -> RunResult:
        return RunResult(
            status=int(status),
            message=message,
            backend=self.backend_name,
            agent=self.name,
            run_id=run_id,
            is_error=True,
            error=error,
            **extra,
        )

    def _classified(
        self, result: RunResult, timeout: object = None, retry_after_s: float | None = None
    ) -> RunResult:
        """Attach ``failure`` (spec 004 ChildFailure), ``error_context`` (spec 003)
        and ``failure_report`` to a failed result; never raises.

        ``timeout``: the attempt's timeout, when the result does not carry it;
        ``retry_after_s``: a wait we know better than the output (a circuit's cooldown).
        """
        try:
            hint_fn = getattr(self._backend, "failure_hint", None)
            try:
                hint = hint_fn(result) if callable(hint_fn) else None
            except Exception:
                log.exception("failure_hint of backend %s failed", self.backend_name)
                hint = None
            run_timeout = result.timeout_s
            if run_timeout is None:
                run_timeout = (
                    float(timeout)
                    if isinstance(timeout, int | float) and not isinstance(timeout, bool)
                    else self._timeout
                )
            update = describe_failure(
                result,
                node=self.name,
                backend_hint=hint if isinstance(hint, str) else None,
                timeout=run_timeout,
                idle_timeout=self._idle_timeout,
                install_hint=self._backend.install_hint(),
                redactor=Redactor(os.environ, self._env),
                retry_after_s=retry_after_s,
            )
        except Exception as exc:
            log.exception("failure analysis of run %s failed", result.run_id)
            update = fallback_failure(result, node=self.name, error=exc)
        return result.model_copy(update=update)

    def _log_run(self, response: dict[str, Any]) -> None:
        """Append the run's record to the run log (spec 004 monitoring); never raises."""
        try:
            path = resolve_run_log(self._run_log)
            if path is not None:
                append_run(path, run_record(response, redactor=Redactor(os.environ, self._env)))
        except Exception:
            log.exception("could not log run %s", response.get("run_id"))

    def _busy(self) -> RunResult:
        return self._failure(
            "",
            Status.BUSY,
            f"agent {self.name!r} is busy with run {self._run_id}; nothing was started. "
            "Wait for it to finish or use another agent.",
            "busy",
        )

    def _resolve_program(self, run_id: str) -> list[str] | RunResult:
        backend = self._backend
        explicit = self._cli_path
        if explicit is None and os.environ.get(backend.path_env_var):
            explicit = (os.environ[backend.path_env_var],)
        if explicit is None:
            default = backend.default_program()
            if default:
                return list(default)
            found = shutil.which(backend.executable)
            if found is None:
                return self._failure(
                    run_id,
                    Status.NOT_FOUND,
                    f"{backend.name} CLI not found: no {backend.executable!r} on PATH; {backend.install_hint()}",
                    "not_found",
                )
            return [found]
        program, *rest = explicit
        program = os.path.expanduser(program)
        if os.sep not in program:
            found = shutil.which(program)
            if found is None:
                return self._failure(
                    run_id,
                    Status.NOT_FOUND,
                    f"{backend.name} CLI not found: no {program!r} on PATH",
                    "not_found",
                )
            program = found
        if not os.path.exists(program):
            return self._failure(
                run_id,
                Status.NOT_FOUND,
                f"{backend.name} CLI not found at {program!r}",
                "not_found",
            )
        if os.path.isdir(program):
            return self._failure(
                run_id,
                Status.NOT_EXECUTABLE,
                f"{backend.name} CLI path {program!r} is a directory",
                "not_executable",
            )
        if not rest and not os.access(program, os.X_OK):
            return self._failure(
                run_id,
                Status.NOT_EXECUTABLE,
                f"{backend.name} CLI at {program!r} is not executable (chmod +x it)",
                "not_executable",
            )
        return [program, *rest]

    async def _attempt(
        self,
        prompt: str,
        run_id: str,
        *,
        timeout: float | None,
        cwd: str | os.PathLike[str] | None,
        model: str | None,
        resume: str | None,
        options: Mapping[str, Any] | None,
        request_key: str | None,
    ) -> RunResult:
        # Per-call problems are answered, not raised: an orchestrator gets a dict.
        try:
            run_timeout = (
                _required_seconds("timeout", timeout) if timeout is not None else self._timeout
            )
            run_cwd = _check_cwd(cwd) if cwd is not None else (self._cwd or _check_cwd(os.getcwd()))
        except ConfigError as exc:
            return self._failure(run_id, Status.USAGE, str(exc), "invalid_request")
        if not isinstance(prompt, str):
            return self._failure(
                run_id,
                Status.USAGE,
                f"prompt must be a string, got {type(prompt).__name__}",
                "invalid_request",
            )
        if not prompt.strip():
            return self._failure(
                run_id,
                Status.USAGE,
                "prompt is empty: say what the agent should do",
                "invalid_request",
            )
        if "\0" in prompt:
            return self._failure(
                run_id,
                Status.USAGE,
                "prompt contains a NUL byte, which no CLI accepts",
                "invalid_request",
            )
        if resume is not None and not _SESSION_ID.match(resume):
            return self._failure(
                run_id, Status.USAGE, f"invalid session id to resume: {resume!r}", "invalid_request"
            )
        try:
            prompt.encode("utf-8")
        except UnicodeEncodeError:
            return self._failure(
                run_id,
                Status.USAGE,
                "prompt is not valid Unicode (lone surrogate)",
                "invalid_request",
            )

        program = self._resolve_program(run_id)
        if isinstance(program, RunResult):
            return program

        backend = self._backend
        merged_options = {**self._options, **(options or {})}
        request = RunRequest(
            prompt=prompt,
            cwd=run_cwd,
            model=model or self._model,
            resume_session=resume,
            request_key=request_key or self._request_key(prompt, run_cwd),
            options=merged_options,
            extra_args=self._extra_args,
        )
        spec = backend.build_command(request)
        argv = [*program, *spec.args]
        env = build_env(
            os.environ, unset=spec.unset_env, add={**spec.env, **self._env}, marker=run_id
        )
        redactor = Redactor(os.environ, self._env)
        config = self._supervisor
        if run_timeout != config.timeout:
            config = SupervisorConfig(**{**_config_dict(config), "timeout": run_timeout})

        translator = backend.translator()
        tally = RunTally(run_cwd)
        bus = self._bus
        translate = translator.translate
        add = tally.add
        transcript = self._transcript
        flush = None
        if transcript is not None:
            flush = transcript.flush
            transcript.tally = tally

        def sink(obj: dict[str, Any]) -> bool:
            events = translate(obj)
            if not events:
                return False
            terminal = False
            publish = bus.has_listeners
            for event in events:
                if add(event):
                    terminal = True
                if publish:
                    if redactor.active:
                        event = event.redacted(redactor)
                    bus.publish(event, run_id)
            return terminal

        def spawned(pid: int) -> None:
            bus.publish(
                RunStartedEvent(backend.name, argv[0], pid, run_cwd, run_timeout),
                run_id,
            )

        outcome = await run_process(
            argv,
            cwd=run_cwd,
            env=env,
            stdin=spec.stdin,
            config=config,
            sink=sink,
            marker=run_id,
            on_spawn=spawned,
            stdout_tap=transcript.stdout_tap() if transcript is not None else None,
            on_chunk=flush,  # the transcript's events, written once per stdout chunk
        )
        return self._result(run_id, outcome, tally, run_timeout, redactor)

    def _result(
        self,
        run_id: str,
        outcome: ProcessOutcome,
        tally: RunTally,
        timeout: float,
        redactor: Redactor,
    ) -> RunResult:
        name = self.backend_name
        rc = outcome.returncode
        stderr_tail = redactor.text(outcome.stderr_tail)
        common: dict[str, Any] = {
            "backend": name,
            "agent": self.name,
            "run_id": run_id,
            "exit_code": rc,
            "signal": _signal_name(-rc) if rc is not None and rc < 0 else None,
            "duration_s": round(outcome.duration_s, 6),
            "skipped_lines": outcome.skipped_lines,
            "lines": outcome.lines,
            "tool_calls": tally.tool_calls,
            "tool_usage": dict(tally.tool_usage),
            "files_modified": redactor.deep(list(tally.files)),
            "last_successful_tool": tally.last_successful_tool,
            "session_id": tally.session_id,
            "model": tally.model,
            "num_turns": tally.num_turns,
            "usage": tally.usage,
            "cost_usd": tally.cost_usd,
            "cli_retries": tally.cli_retries,
            "stop_reason": outcome.stop_reason.value if outcome.stop_reason else None,
            "completed": tally.result is not None,
            "stderr_tail": stderr_tail,
            "leftovers_stopped": outcome.leftovers_stopped,
            "signals_sent": list(outcome.signals_sent),
            "pid": outcome.pid,
            "api_error_status": tally.api_error_status,
            "cli_errors": [redactor.text(e) for e in tally.errors[-5:]],
            "failed_tools": list(tally.failed_tools),
            "permission_denials": len(tally.result.permission_denials) if tally.result else 0,
            "denied_tools": _denied_tools(tally.result),
            "completed_steps": redactor.deep(tally.steps),
            "unfinished_steps": redactor.deep(
                tally.unfinished_steps(outcome.stop_reason in (StopReason.TIMEOUT, StopReason.IDLE))
            ),
            "last_tool_error": redactor.text(tally.last_tool_error or "") or None,
            "cli_retry_delay_s": tally.retry_delay_s,
            "timeout_s": timeout,
            "result_subtype": tally.result.subtype if tally.result else None,
        }
        warnings: list[str] = []
        text = tally.final_text()

        if outcome.spawn_error is not None:
            exc = outcome.spawn_error
            missing = isinstance(exc, FileNotFoundError)
            return self._failure(
                run_id,
                Status.NOT_FOUND if missing else Status.NOT_EXECUTABLE,
                f"could not start {name} CLI: {exc.strerror or exc}",
                "not_found" if missing else "not_executable",
                **{k: v for k, v in common.items() if k not in {"backend", "agent", "run_id"}},
            )

        if outcome.stop_reason in (StopReason.TIMEOUT, StopReason.IDLE):
            stopped = ", ".join(outcome.signals_sent) or "it had already exited"
            progress = f"{tally.tool_calls} tool call(s) made before the stop"
            if outcome.stop_reason is StopReason.TIMEOUT:
                message = f"{name} timed out after {timeout:g}s; process tree stopped ({stopped}); {progress}"
                error = "timeout"
            else:
                idle = self._idle_timeout or 0.0
                message = f"{name} was idle for {idle:g}s with no output; process tree stopped ({stopped}); {progress}"
                error = "idle_timeout"
            return RunResult(
                status=Status.TIMEOUT,
                message=redactor.text(message),
                is_error=True,
                error=error,
                **common,
            )

        result = tally.result
        if result is not None:
            if result.is_error:
                status = rc if rc is not None and 0 < rc < 126 else int(Status.FAILED)
                message = (
                    text or "; ".join(str(e) for e in result.errors) or f"{name} reported an error"
                )
                return RunResult(
                    status=status,
                    message=redactor.text(message),
                    is_error=True,
                    error="cli_error",
                    data=RunTally.parse_data(redactor.text(text or "")),
                    **common,
                )
            if rc not in (0, None) and outcome.stop_reason is not StopReason.LINGER:
                warnings.append(f"{name} exited with code {rc} after a successful result")
            if outcome.stop_reason is StopReason.LINGER:
                warnings.append(
                    f"{name} kept running after its result; stopped after {self._linger:g}s"
                )
            if common["denied_tools"]:
                denied = ", ".join(dict.fromkeys(common["denied_tools"]))
                warnings.append(f"permission denied for tool call(s): {denied}")
            message = redactor.text(text or "")
            return RunResult(
                status=Status.OK,
                message=message,
                data=RunTally.parse_data(message),
                warnings=warnings,
                **common,
            )

        last_err = _last_line(stderr_tail)
        if rc is not None and rc < 0:
            sig = -rc
            message = f"{name} was killed by signal {_signal_name(sig)}" + (
                f": {last_err}" if last_err else ""
            )
            return RunResult(
                status=Status.for_signal(sig),
                message=message,
                is_error=True,
                error="killed",
                **common,
            )
        if rc not in (0, None):
            assert rc is not None
            message = f"{name} exited with code {rc}" + (
                f": {last_err}" if last_err else " (no error output)"
            )
            status = rc if 0 < rc < 256 else int(Status.FAILED)
            return RunResult(
                status=status, message=message, is_error=True, error="cli_error", **common
            )
        if not tally.events_seen:
            detail = (
                f" ({outcome.skipped_lines} unparseable line(s))" if outcome.skipped_lines else ""
            )
            return RunResult(
                status=Status.OK,
                message=f"{name} exited 0 without producing any events{detail}",
                error="empty_output",
                warnings=["no_output"],
                **common,
            )
        message = f"{name} exited before finishing (no result event)"
        if text:
            message += f"; last output: {text[:2000]}"
        return RunResult(
            status=Status.FAILED,
            message=redactor.text(message),
            is_error=True,
            error="incomplete",
            **common,
        )


def _running_event_loop() -> str | None:
    """Name of the event loop running in this thread, if any."""
    import asyncio
    import sys

    try:
        asyncio.get_running_loop()
        return "asyncio"
    except RuntimeError:
        pass
    trio = sys.modules.get("trio")
    if trio is not None:
        try:
            trio.lowlevel.current_trio_token()
            return "trio"
        except RuntimeError:
            pass
    return None


def _config_dict(config: SupervisorConfig) -> dict[str, Any]:
    return {name: getattr(config, name) for name in config.__dataclass_fields__}


def _signal_name(signum: int) -> str:
    with contextlib.suppress(ValueError):
        return _signal.Signals(signum).name
    return f"signal {signum}"


def _denied_tools(result: ResultEvent | None) -> list[str]:
    """Tool names of claude's ``permission_denials`` in the terminal event."""
    denials = result.permission_denials if result is not None else ()
    return [str(d.get("tool_name") or "unknown") for d in denials if isinstance(d, Mapping)][:50]


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()[:500]
    return ""
