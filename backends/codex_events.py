"""The events of one ``codex app-server`` turn: its notifications, translated
so that a session's turn reads like a one-shot ``codex exec --json`` run (the
same tool names, the turn's usage once at its end, a ``ResultEvent`` at
``turn/completed``)."""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from typing import Any

from coding_genesis.backend import Translator
from coding_genesis.events import (
    CliRetryEvent,
    CompactionEvent,
    ErrorEvent,
    Event,
    McpServerEvent,
    ResultEvent,
    SessionEvent,
    TextDeltaEvent,
    TextEvent,
    ThoughtDeltaEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)

from ._codex import http_status
from ._common import as_int, preview

__all__ = ["AppServerTranslator", "add_usage"]

#: codex's token counts (``TokenUsageBreakdown``) → the names of ``codex exec``'s
#: usage (``input_tokens`` includes the cached ones), which ``normalize_usage`` reads.
#: The pieces of a message (``partial=True``): method -> its event (named by its item).
_DELTAS: dict[str, type[TextDeltaEvent | ThoughtDeltaEvent]] = {
    "item/agentMessage/delta": TextDeltaEvent,
    "item/reasoning/summaryTextDelta": ThoughtDeltaEvent,
    "item/reasoning/textDelta": ThoughtDeltaEvent,
}
_USAGE_NAMES = {
    "inputTokens": "input_tokens",
    "cachedInputTokens": "cached_input_tokens",
    "cacheWriteInputTokens": "cache_write_input_tokens",
    "outputTokens": "output_tokens",
    "reasoningOutputTokens": "reasoning_output_tokens",
    "totalTokens": "total_tokens",
}

#: The error kinds that carry an HTTP status (``codexErrorInfo``).
_STATUS_KINDS = (
    "httpConnectionFailed",
    "responseStreamConnectionFailed",
    "responseStreamDisconnected",
    "responseTooManyFailedAttempts",
)


def add_usage(into: dict[str, int], counts: Mapping[str, Any], sign: int = 1) -> dict[str, int]:
    """``into`` plus (or minus) codex's token ``counts``, each at least 0."""
    for name in _USAGE_NAMES:
        value = as_int(counts.get(name))
        into[name] = max(0, into.get(name, 0) + sign * (value if value and value > 0 else 0))
    return into


def _mapping(value: Any) -> Mapping[str, Any]:
    return value if isinstance(value, Mapping) else {}


def _error_status(error: Mapping[str, Any]) -> int | None:
    """The HTTP status of a turn's error: codex's ``httpStatusCode``, else its words."""
    info = _mapping(error.get("codexErrorInfo"))
    for kind in _STATUS_KINDS:
        status = as_int(_mapping(info.get(kind)).get("httpStatusCode"))
        if status is not None:
            return status
    for text in (error.get("message"), error.get("additionalDetails")):
        status = http_status(text) if isinstance(text, str) else None
        if status is not None:
            return status
    return None


def _mcp_status(params: Mapping[str, Any]) -> Sequence[Event]:
    """An MCP server of the thread starting, ready or failed."""
    name, status, error = params.get("name"), params.get("status"), params.get("error")
    if not isinstance(name, str) or not isinstance(status, str):
        return ()
    return (McpServerEvent(name, status, error if isinstance(error, str) else None),)


class AppServerTranslator(Translator):
    """One turn's notifications → events.

    The turn's usage is the thread's running total at its end less the total
    before it: ``baseline`` (what the protocol last heard, for the second turn
    on), else the first report's total less its own last call.  It is given
    once, at ``turn/completed``, as ``codex exec`` gives it.
    """

    __slots__ = (
        "_base",
        "_baseline",
        "_model",
        "_session",
        "_started",
        "_thread",
        "_total",
        "_turn",
    )

    def __init__(
        self,
        baseline: Mapping[str, int] | None = None,
        *,
        thread: str | None = None,
        model: str | None = None,
        model_of: Callable[[], str | None] | None = None,
        asked: Callable[[], bool] | None = None,
    ) -> None:
        #: Whether a compaction now is one we asked for (the protocol knows).
        self._asked = asked
        self._baseline = dict(baseline) if baseline is not None else None
        #: The thread and its model, as the protocol heard them at its start.
        self._thread = thread
        self._model = model
        #: The model now, asked when the turn starts (a turn may switch it).
        self._model_of = model_of
        self._base: dict[str, int] | None = None
        self._total: dict[str, int] | None = None
        self._session = False
        self._started: set[str] = set()
        #: This turn's id (``turn/started``): usage reported for another turn is
        #: not this turn's (a resumed thread repeats its last report).
        self._turn: str | None = None

    def translate(self, obj: dict[str, Any]) -> Sequence[Event]:
        method = obj.get("method")
        params = _mapping(obj.get("params"))
        if method == "item/started" or method == "item/completed":
            item = params.get("item")
            if isinstance(item, Mapping):
                return self._item(item, completed=method == "item/completed")
            return ()
        if method in _DELTAS:
            delta, item = params.get("delta"), params.get("itemId")
            if not isinstance(delta, str) or not delta:
                return ()
            return (_DELTAS[method](delta, item if isinstance(item, str) else None),)
        if method == "thread/tokenUsage/updated":
            turn = params.get("turnId")
            if self._turn is not None and (turn is None or self._turn in ("", turn)):
                self._usage(_mapping(params.get("tokenUsage")))
            return ()
        if method == "turn/started":
            turn = _mapping(params.get("turn")).get("id")
            self._turn = turn if isinstance(turn, str) else ""
            return self._session_event(params.get("threadId"))
        if method == "thread/started":
            return self._session_event(_mapping(params.get("thread")).get("id"))
        if method == "turn/completed":
            return self._completed(_mapping(params.get("turn")))
        if method == "error":
            return self._error(_mapping(params.get("error")), params.get("willRetry") is True)
        if method == "mcpServer/startupStatus/updated":
            return _mcp_status(params)
        return ()

    def _session_event(self, thread_id: Any) -> Sequence[Event]:
        if self._session or not isinstance(thread_id, str):
            return ()
        self._session = True
        self._thread = self._thread or thread_id
        model = self._model_of() if self._model_of is not None else self._model
        if model is not None:
            return (SessionEvent(thread_id, model),)
        return (SessionEvent(thread_id),)

    def _usage(self, usage: Mapping[str, Any]) -> None:
        total = usage.get("total")
        if not isinstance(total, Mapping):
            return
        self._total = add_usage({}, total)
        if self._base is None:
            if self._baseline is not None:
                self._base = self._baseline
            else:
                self._base = add_usage(dict(self._total), _mapping(usage.get("last")), -1)

    def _completed(self, turn: Mapping[str, Any]) -> Sequence[Event]:
        events: list[Event] = []
        if self._total is not None:
            base = self._base
            totals, thread = self.totals, self._thread
            if totals is not None and thread:
                # A resumed thread this process saw before: its last total is
                # exact where the protocol knew none (the first turn).
                known = totals.last("codex", thread)
                if self._baseline is None and known is not None:
                    base = {k: int(v) for k, v in known.items()}
                totals.seed("codex", thread, self._total)
            counts = add_usage(dict(self._total), base or {}, -1)
            events.append(UsageEvent({_USAGE_NAMES[k]: v for k, v in counts.items()}))
        status = turn.get("status")
        tid = turn.get("id")
        turn_id: dict[str, Any] = {"turn_id": tid} if isinstance(tid, str) and tid else {}
        if status == "completed":
            events.append(
                ResultEvent(is_error=False, subtype="turn.completed", text=None, **turn_id)
            )
            return events
        error = _mapping(turn.get("error"))
        message = error.get("message")
        if status == "interrupted":
            events.append(
                ResultEvent(is_error=True, subtype="turn.interrupted", text=None, **turn_id)
            )
            return events
        text = str(message or f"turn {status or 'failed'}")
        events.append(
            ResultEvent(
                is_error=True,
                subtype="turn.failed",
                text=text,
                errors=[text],
                api_error_status=_error_status(error),
                **turn_id,
            )
        )
        return events

    def _error(self, error: Mapping[str, Any], will_retry: bool) -> Sequence[Event]:
        message = str(error.get("message") or "")
        details = error.get("additionalDetails")
        text = f"{message} ({details})" if isinstance(details, str) and details else message
        event = ErrorEvent(text, fatal=False)
        if not will_retry:
            return (event,)
        numbers = message.removeprefix("Reconnecting...").strip().split("/")
        attempt = as_int(numbers[0]) if len(numbers) == 2 else None
        limit = as_int(numbers[1]) if len(numbers) == 2 else None
        return (CliRetryEvent(attempt, limit, _error_status(error), text), event)

    def _item(self, item: Mapping[str, Any], *, completed: bool) -> Sequence[Event]:
        itype = item.get("type")
        item_id = str(item.get("id") or "")
        if itype == "agentMessage":
            return (TextEvent(str(item.get("text") or "")),) if completed else ()
        if itype == "contextCompaction":
            if not completed:
                return ()
            return (CompactionEvent("manual" if self._asked and self._asked() else "auto"),)
        described = _describe(item)
        if described is None:
            return ()  # the user's message, reasoning, plans and types we do not know
        name, tool_input, files, output = described
        events: list[Event] = []
        if item_id not in self._started:
            self._started.add(item_id)
            events.append(ToolCallEvent(item_id, name, tool_input, files))
        if completed:
            exit_code = as_int(item.get("exitCode"))
            is_error = (
                exit_code not in (None, 0)
                or item.get("status") in ("failed", "declined")
                or bool(item.get("error"))
                or item.get("success") is False
            )
            events.append(
                ToolResultEvent(item_id, name, is_error, preview(output), exit_code=exit_code)
            )
        return events


def _describe(item: Mapping[str, Any]) -> tuple[str, Any, list[str], Any] | None:
    """A tool item's name (as ``codex exec`` names it), input, files and output."""
    itype = item.get("type")
    if itype == "commandExecution":
        return (
            "command_execution",
            {"command": item.get("command")},
            [],
            item.get("aggregatedOutput"),
        )
    if itype == "fileChange":
        changes = item.get("changes")
        files = (
            [
                str(c["path"])
                for c in changes
                if isinstance(c, Mapping) and isinstance(c.get("path"), str)
            ]
            if isinstance(changes, list)
            else []
        )
        return "file_change", {"changes": changes}, files, None
    if itype == "mcpToolCall":
        result = _mapping(item.get("result")).get("content")
        output = result if result is not None else _mapping(item.get("error")).get("message")
        name = f"mcp:{item.get('server')}/{item.get('tool')}"
        return name, item.get("arguments"), [], output
    if itype == "dynamicToolCall":
        return f"dynamic:{item.get('tool')}", item.get("arguments"), [], item.get("contentItems")
    if itype == "webSearch":
        return "web_search", {"query": item.get("query")}, [], None
    return None
