"""OpenTelemetry spans for every run, following the GenAI semantic conventions.

An observer (:class:`TelemetryObserver`, on by default: ``telemetry=False``
turns it off) that emits, whenever ``opentelemetry-api`` is importable:

- one span per run, ``invoke_agent {agent}`` (kind CLIENT: the agent runs
  outside this process), a child of the caller's current span, with
  ``gen_ai.operation.name``, ``gen_ai.provider.name``, ``gen_ai.agent.name``,
  ``gen_ai.conversation.id`` (the CLI's session id), ``gen_ai.request.model``,
  ``gen_ai.response.model``, ``gen_ai.usage.*`` and, on failure,
  ``error.type`` (our error code) and an ERROR status;
- one child span per attempt, ``attempt {n}`` (INTERNAL; retries make more);
  the CLI is started with ``TRACEPARENT`` (and ``TRACESTATE``) naming it,
  injected through the API's configured propagator, so that a CLI which
  traces (or its tools) continues the same trace;
- one span per tool call under its attempt, ``execute_tool {tool}``
  (INTERNAL), with ``gen_ai.tool.name``, ``gen_ai.tool.call.id``, the call's
  duration (from its call event to its result event) and, when the tool
  failed, ``error.type`` = ``tool_error``.

Text (the prompt, the answer, tool arguments and results) is recorded only
with ``telemetry_content=True``, and always through the run's redactor.
Nothing here configures an SDK or an exporter: until the application does
(and while no current span is there to continue), the API is a no-op and
this observer starts no span at all.

``opentelemetry`` is imported lazily, at a run's start, never by ``import
coding_genesis``.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any

import orjson

from coding_genesis._util.redact import Redactor
from coding_genesis.events import Event, EventKind, SessionEvent, ToolCallEvent, ToolResultEvent
from coding_genesis.observer import Observer, RunInfo, RunObserver
from coding_genesis.run_events import LIFECYCLE_KINDS, AttemptEvent

__all__ = ["PROVIDERS", "TelemetryObserver", "usage_attributes"]

log = logging.getLogger("coding_genesis._observers.telemetry")

#: ``gen_ai.provider.name`` by backend (the conventions' well-known values);
#: other backends report their own name.
PROVIDERS: dict[str, str] = {
    "claude": "anthropic",
    "codex": "openai",
    "gemini": "gcp.gemini",
}

#: Tool spans open at once in a run, at most (a CLI that never reports results
#: cannot grow this).
MAX_OPEN_TOOLS = 1000
#: Text attributes (opt-in content) are cut at this many characters.
MAX_TEXT = 16_384

_SCOPE = "coding_genesis"
_missing: list[bool] = []  # [True] once the import failed (tried once)
_api: Any = None


def _otel() -> Any:
    """The ``opentelemetry`` API modules (a namespace), or None if not importable."""
    global _api
    if _api is not None or _missing:
        return _api
    try:
        from opentelemetry import context, propagate, trace
    except ImportError:
        _missing.append(True)
        return None
    from types import SimpleNamespace

    _api = SimpleNamespace(context=context, propagate=propagate, trace=trace)
    return _api


def _ns(ts: float) -> int | None:
    return int(ts * 1e9) if ts > 0 else None


def _text(value: str, redactor: Redactor) -> str:
    text = redactor.text(value)
    return text if len(text) <= MAX_TEXT else text[:MAX_TEXT] + "…"


def _json(value: Any, redactor: Redactor) -> str:
    try:
        text = orjson.dumps(redactor.deep(value), default=str).decode()
    except (TypeError, orjson.JSONEncodeError):
        text = repr(value)
    return _text(text, redactor)


def usage_attributes(usage: Mapping[str, Any] | None) -> dict[str, int]:
    """``gen_ai.usage.*`` from a CLI's usage dict (counted as the run log
    counts them: ``input_tokens`` includes cached input, as the conventions ask)."""
    # lazy: loaded only when a run is traced
    from coding_genesis._observers.runlog import token_counts

    tokens = token_counts(usage)
    return {_USAGE_NAMES[key]: value for key, value in tokens.items()}


_USAGE_NAMES = {
    "input_tokens": "gen_ai.usage.input_tokens",
    "output_tokens": "gen_ai.usage.output_tokens",
    "cache_read_tokens": "gen_ai.usage.cache_read.input_tokens",
    "cache_write_tokens": "gen_ai.usage.cache_creation.input_tokens",
}


class TelemetryObserver(Observer):
    """Emits OpenTelemetry spans for every run of an agent (see the module).

    ``content=True`` records the prompt, the answer and tool arguments and
    results (redacted); ``tracer_provider`` overrides the global one.
    """

    def __init__(self, *, content: bool = False, tracer_provider: Any = None) -> None:
        self.content = content
        self.tracer_provider = tracer_provider
        #: The span of each open live session: its turns' spans are its children.
        self._sessions: dict[str, Any] = {}

    def _session_span(self, otel: Any, tracer: Any, run: RunInfo) -> Any:
        key = run.session
        assert key is not None
        span = self._sessions.get(key)
        if span is None:
            span = tracer.start_span(
                f"session {run.agent}",
                context=otel.context.get_current(),
                kind=otel.trace.SpanKind.CLIENT,
                attributes={
                    "gen_ai.operation.name": "invoke_agent",
                    "gen_ai.provider.name": PROVIDERS.get(run.backend, run.backend),
                    "gen_ai.agent.name": run.agent,
                    "coding_genesis.backend": run.backend,
                    "coding_genesis.session": key,
                },
                start_time=_ns(run.started),
            )
            self._sessions[key] = span
        return span

    def session_ended(self, session: str, summary: Mapping[str, Any]) -> None:
        span = self._sessions.pop(session, None)
        if span is None:
            return
        turns = summary.get("turns")
        if isinstance(turns, int):
            span.set_attribute("coding_genesis.turns", turns)
        cli_session = summary.get("session_id")
        if isinstance(cli_session, str):
            span.set_attribute("gen_ai.conversation.id", cli_session)
        span.end()

    def __repr__(self) -> str:
        return f"TelemetryObserver(content={self.content})"

    def _no_op(self, otel: Any) -> bool:
        """Whether every span would be the API's no-op: no tracer provider set
        (nor given) and no current span whose context a CLI could continue.
        Then a run skips its spans (0.1-0.2 ms of a live turn's path)."""
        if self.tracer_provider is not None:
            return False
        if not isinstance(otel.trace.get_tracer_provider(), otel.trace.ProxyTracerProvider):
            return False
        return not otel.trace.get_current_span().get_span_context().is_valid

    def start(self, run: RunInfo) -> RunObserver | None:
        otel = _otel()
        if otel is None or self._no_op(otel):
            return None
        # lazy: loaded only when a run is traced
        from coding_genesis._util.version import version

        tracer = otel.trace.get_tracer(_SCOPE, version(), tracer_provider=self.tracer_provider)
        parent = otel.context.get_current()
        if run.session is not None:  # a turn of a live session: a child of its span
            parent = otel.trace.set_span_in_context(self._session_span(otel, tracer, run), parent)
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "invoke_agent",
            "gen_ai.provider.name": PROVIDERS.get(run.backend, run.backend),
            "gen_ai.agent.name": run.agent,
            "coding_genesis.backend": run.backend,
            "coding_genesis.run_id": run.run_id,
        }
        if run.session is not None:
            attributes["coding_genesis.session"] = run.session
            attributes["coding_genesis.turn"] = run.turn
        if run.model:
            attributes["gen_ai.request.model"] = run.model
        if self.content:
            attributes["gen_ai.input.messages"] = _json(
                [{"role": "user", "parts": [{"type": "text", "content": run.prompt}]}],
                run.redactor,
            )
        span = tracer.start_span(
            f"invoke_agent {run.agent}",
            context=parent,
            kind=otel.trace.SpanKind.CLIENT,
            attributes=attributes,
            start_time=_ns(run.started),
        )
        if not span.is_recording() and not span.get_span_context().is_valid:
            # No SDK and no caller's trace: nothing to record or propagate.
            return None
        return _TelemetryRun(otel, tracer, span, run.redactor, self.content)


class _TelemetryRun(RunObserver):
    #: What the spans are made of; the hot path builds no other event for us.
    event_kinds = LIFECYCLE_KINDS | {EventKind.SESSION, EventKind.TOOL_CALL, EventKind.TOOL_RESULT}

    __slots__ = (
        "_attempt",
        "_attempt_n",
        "_content",
        "_otel",
        "_recording",
        "_redactor",
        "_run",
        "_tools",
        "_tracer",
    )

    def __init__(
        self, otel: Any, tracer: Any, span: Any, redactor: Redactor, content: bool
    ) -> None:
        self._otel = otel
        self._tracer = tracer
        self._run = span
        self._recording = bool(span.is_recording())
        self._redactor = redactor
        self._content = content
        self._attempt: Any = None
        self._attempt_n = 0
        #: Open tool spans by call id.
        self._tools: dict[str, Any] = {}

    # -- attempts ----------------------------------------------------------

    def attempt_env(self) -> Mapping[str, str]:
        """A new attempt: its span, and the variables naming it for the CLI."""
        otel = self._otel
        self._end_attempt()
        self._attempt_n += 1
        self._attempt = self._tracer.start_span(
            f"attempt {self._attempt_n}",
            context=otel.trace.set_span_in_context(self._run),
            kind=otel.trace.SpanKind.INTERNAL,
            attributes={"coding_genesis.attempt": self._attempt_n},
        )
        carrier: dict[str, str] = {}
        otel.propagate.inject(carrier, context=otel.trace.set_span_in_context(self._attempt))
        env: dict[str, str] = {}
        for key in ("traceparent", "tracestate"):
            value = carrier.get(key)
            if value:
                env[key.upper()] = value
        return env

    def _end_attempt(self, end_time: int | None = None) -> None:
        self._end_tools("attempt ended", end_time)
        attempt = self._attempt
        if attempt is not None:
            self._attempt = None
            attempt.end(end_time=end_time)

    def _fail(self, span: Any, error_type: str, description: str | None = None) -> None:
        span.set_attribute("error.type", error_type)
        span.set_status(self._otel.trace.Status(self._otel.trace.StatusCode.ERROR, description))

    # -- events ------------------------------------------------------------

    def event(self, event: Event) -> None:
        if not self._recording:
            return
        if isinstance(event, ToolCallEvent):
            self._tool_call(event)
        elif isinstance(event, ToolResultEvent):
            self._tool_result(event)
        elif isinstance(event, SessionEvent):
            if event.session_id:
                self._run.set_attribute("gen_ai.conversation.id", event.session_id)
            if event.model:
                self._run.set_attribute("gen_ai.response.model", event.model)
        elif isinstance(event, AttemptEvent) and event.phase == "finished":
            attempt = self._attempt
            if attempt is not None:
                extra = event.extra
                if event.action != "succeed":
                    category = extra.get("category")
                    self._fail(
                        attempt,
                        str(extra.get("error") or "_OTHER"),
                        str(category) if category else None,
                    )
                    if category:
                        attempt.set_attribute("coding_genesis.failure.category", str(category))
                if extra.get("action"):
                    attempt.set_attribute("coding_genesis.attempt.action", str(extra["action"]))
                self._end_attempt(_ns(event.ts))

    def _tool_call(self, event: ToolCallEvent) -> None:
        tools = self._tools
        if len(tools) >= MAX_OPEN_TOOLS:
            oldest = next(iter(tools))
            self._end_tool(tools.pop(oldest), "unfinished", "too many tool calls open", None)
        otel = self._otel
        parent = self._attempt if self._attempt is not None else self._run
        name = event.name or "unknown"
        attributes: dict[str, Any] = {
            "gen_ai.operation.name": "execute_tool",
            "gen_ai.tool.name": name,
            "gen_ai.tool.call.id": event.id,
        }
        if self._content and event.input is not None:
            attributes["gen_ai.tool.call.arguments"] = _json(event.input, self._redactor)
        span = self._tracer.start_span(
            f"execute_tool {name}",
            context=otel.trace.set_span_in_context(parent),
            kind=otel.trace.SpanKind.INTERNAL,
            attributes=attributes,
            start_time=_ns(event.ts),
        )
        previous = tools.pop(event.id, None)
        if previous is not None:  # the same id again: the first one never ended
            self._end_tool(previous, "unfinished", "superseded by a call with the same id", None)
        tools[event.id] = span

    def _tool_result(self, event: ToolResultEvent) -> None:
        span = self._tools.pop(event.id, None)
        if span is None:
            return
        if self._content and event.output:
            span.set_attribute("gen_ai.tool.call.result", _text(event.output, self._redactor))
        if event.exit_code is not None:
            span.set_attribute("coding_genesis.tool.exit_code", event.exit_code)
        if event.is_error:
            self._fail(span, "tool_error")
        span.end(end_time=_ns(event.ts))

    def _end_tool(self, span: Any, error_type: str, description: str, end_time: int | None) -> None:
        self._fail(span, error_type, description)
        span.end(end_time=end_time)

    def _end_tools(self, description: str, end_time: int | None) -> None:
        tools = self._tools
        while tools:
            _, span = tools.popitem()
            self._end_tool(span, "unfinished", f"no result: {description}", end_time)

    # -- the rest of the observer protocol --------------------------------------

    def stdout(self, chunk: bytes) -> None:
        pass

    def flush(self) -> None:
        pass

    def response_fields(self) -> Mapping[str, Any]:
        return {}

    def finish(self, response: Mapping[str, Any]) -> None:
        run = self._run
        failed = bool(response.get("is_error"))
        error = response.get("error")
        failure = response.get("failure") or {}
        category = failure.get("category") if isinstance(failure, Mapping) else None
        attempt = self._attempt
        if attempt is not None and failed:
            self._fail(attempt, str(error or "_OTHER"), str(category) if category else None)
        self._end_attempt()
        if not self._recording:
            run.end()
            return
        attributes: dict[str, Any] = {
            "coding_genesis.status": int(response.get("status") or 0),
            "coding_genesis.attempts": int(response.get("attempts") or 1),
            "coding_genesis.tool_calls": int(response.get("tool_calls") or 0),
        }
        session = response.get("session_id")
        if session:
            attributes["gen_ai.conversation.id"] = str(session)
        model = response.get("model")
        if model:
            attributes["gen_ai.response.model"] = str(model)
        usage = response.get("usage")
        attributes.update(usage_attributes(usage if isinstance(usage, Mapping) else None))
        cost = response.get("cost_usd")
        if isinstance(cost, int | float) and not isinstance(cost, bool):
            attributes["coding_genesis.cost_usd"] = float(cost)
            # Cost provenance (reported / computed / unknown): the one place it
            # goes on the span, once the result carries it.
            source = response.get("cost_source")
            if isinstance(source, str):
                attributes["coding_genesis.cost_source"] = source
        if self._content:
            message = response.get("message")
            if isinstance(message, str) and message and not failed:
                attributes["gen_ai.output.messages"] = _json(
                    [{"role": "assistant", "parts": [{"type": "text", "content": message}]}],
                    self._redactor,
                )
        if category:
            attributes["coding_genesis.failure.category"] = str(category)
        run.set_attributes(attributes)
        if failed:
            self._fail(run, str(error or "_OTHER"), str(category) if category else None)
        run.end()
