"""The running tally of an attempt: the decoder folds each normalized event
into it (tool calls and their results, files, errors, usage, the CLI's answer)
and holds no event, so a hundred thousand events cost a few counters.  The
response (:class:`coding_genesis.result.RunResult`) is built from it once, at
the end (``coding_genesis._pipeline.outcome``)."""

from __future__ import annotations

import os
from collections.abc import Callable, Mapping
from typing import Any, TypeVar

import orjson

from coding_genesis._util.numbers import MAX_NAMED
from coding_genesis._util.redact import Redactor
from coding_genesis._util.steps import describe_step
from coding_genesis.events import (
    CliRetryEvent,
    ErrorEvent,
    Event,
    McpServerEvent,
    ResultEvent,
    SessionEvent,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)

__all__ = [
    "MAX_NAME_CHARS",
    "MAX_PENDING",
    "MAX_TOOL_NAMES",
    "MAX_TOOL_TIMINGS",
    "OTHER_TOOLS",
    "RunTally",
    "by_type",
]

_V = TypeVar("_V")


def by_type(mapping: Mapping[type, _V], cls: type) -> _V | None:
    """``mapping``'s entry for ``cls`` or for its nearest base class: a
    subclass of an event type is handled as that type."""
    for base in cls.__mro__:
        if base in mapping:
            return mapping[base]
    return None


_MAX_FILES = 1000
_MAX_ERRORS = 20
_MAX_STEPS = 200
_MAX_TOOL_ERROR = 500
#: Distinct tool names counted one by one; the rest count under OTHER_TOOLS.
MAX_TOOL_NAMES = 256
OTHER_TOOLS = "(other tools)"
#: A tool name (or call id) longer than this is cut (marked with "…").
MAX_NAME_CHARS = 200
#: Tool calls without a result kept for the report; past the first few, each
#: input is slimmed (see _slim).
MAX_PENDING = 1000
#: Tool call durations listed per attempt at most (the totals count them all).
MAX_TOOL_TIMINGS = 50
_RAW_PENDING = 8
_SLIM_TEXT = 1024
_SLIM_ITEMS = 16


def _slim_input(value: Any) -> Any:
    """A tool input as kept while its call is unfinished: itself when it is
    already small (a flat dict of short values: almost every call), else
    :func:`_slim`'s copy."""
    if type(value) is dict and len(value) <= _SLIM_ITEMS:
        for item in value.values():
            kind = type(item)
            if (kind is str and len(item) > _SLIM_TEXT) or kind is dict or kind is list:
                return _slim(value)
        return value
    return _slim(value)


def _slim(value: Any, depth: int = 0) -> Any:
    """A small copy of a tool input, enough to describe the call: strings cut
    at 1 KiB, at most 16 keys or items, three levels deep."""
    if isinstance(value, str):
        return value if len(value) <= _SLIM_TEXT else value[:_SLIM_TEXT] + "…"
    if depth >= 3:
        return None if isinstance(value, dict | list) else value
    if isinstance(value, dict):
        items = list(value.items())[:_SLIM_ITEMS] if len(value) > _SLIM_ITEMS else value.items()
        return {k: _slim(v, depth + 1) for k, v in items}
    if isinstance(value, list):
        return [_slim(v, depth + 1) for v in value[:_SLIM_ITEMS]]
    return value


def _short(name: str) -> str:
    return name if len(name) <= MAX_NAME_CHARS else name[:MAX_NAME_CHARS] + "…"


class RunTally:
    """Folds normalized events into what the response needs; holds no event."""

    __slots__ = (
        "_paths_seen",
        "api_error_status",
        "bad_numbers",
        "cli_retries",
        "cost_usd",
        "cwd",
        "errors",
        "failed_tools",
        "files",
        "first_seen",
        "last_failed_step",
        "last_successful_tool",
        "last_text",
        "last_tool_error",
        "mcp_servers",
        "model",
        "now",
        "num_turns",
        "pending",
        "redactor",
        "result",
        "retry_delay_s",
        "session_id",
        "steps",
        "tool_calls",
        "tool_names",
        "tool_time",
        "tool_timed",
        "tool_timings",
        "tool_usage",
        "usage",
    )

    def __init__(self, cwd: str, redactor: Redactor | None = None) -> None:
        self.cwd = cwd
        #: Masks secrets in text before the tally cuts it short (None: no secret).
        self.redactor = redactor
        self.session_id: str | None = None
        self.model: str | None = None
        self.tool_calls = 0
        self.tool_usage: dict[str, int] = {}
        self.tool_names: dict[str, str] = {}
        self.failed_tools: list[str] = []
        self.last_successful_tool: str | None = None
        self.files: dict[str, None] = {}
        self._paths_seen: set[str] = set()
        self.last_text: str | None = None
        self.usage: dict[str, Any] | None = None
        self.cost_usd: float | None = None
        self.num_turns: int | None = None
        #: The CLI's terminal event, once seen.
        self.result: ResultEvent | None = None
        self.errors: list[str] = []
        self.cli_retries = 0
        self.api_error_status: int | None = None
        self.steps: list[str] = []
        #: Tool calls without a result yet: (name, input), described only if a
        #: report needs them (describing every call cost ~15% of the hot path).
        self.pending: dict[str, tuple[str, Any, float]] = {}
        #: The time of the stdout chunk being decoded (set by the decoder, once
        #: per chunk: events are known when their chunk is read).
        self.now = 0.0
        #: event type -> when the first event of that type was decoded.
        self.first_seen: dict[type, float] = {}
        #: Tool calls paired with their results: how many, their total time,
        #: and the first MAX_TOOL_TIMINGS as (id, name, seconds).
        self.tool_timed = 0
        self.tool_time = 0.0
        self.tool_timings: list[tuple[str, str, float]] = []
        self.last_tool_error: str | None = None
        #: The last tool call, if the last tool event was its failure.
        self.last_failed_step: str | None = None
        self.retry_delay_s: float | None = None
        #: Fields where the CLI wrote a number out of range, set to None at the
        #: door (the decoder; see ``coding_genesis._util.numbers``): the first few.
        self.bad_numbers: list[str] = []
        #: The MCP servers as the CLI last reported each: name -> its record.
        self.mcp_servers: dict[str, dict[str, Any]] = {}

    @property
    def events_seen(self) -> bool:
        return bool(
            self.session_id
            or self.tool_calls
            or self.last_text is not None
            or self.result is not None
        )

    def adders(self) -> dict[type[Event], Callable[[Any], object]]:
        """The fold's step per event type (the decoder's hot path calls these
        directly; an event type not here changes nothing in the tally)."""
        return {
            TextEvent: self.add_text,
            ToolCallEvent: self.add_tool_call,
            ToolResultEvent: self.add_tool_result,
            SessionEvent: self.add_session,
            UsageEvent: self.add_usage,
            ResultEvent: self.add_result,
            ErrorEvent: self.add_error,
            CliRetryEvent: self.add_cli_retry,
            McpServerEvent: self.add_mcp_server,
        }

    def add(self, event: Event) -> bool:
        """Fold one event in; True if it is the CLI's terminal event."""
        adder = by_type(self.adders(), type(event))
        if adder is not None:
            adder(event)
        return isinstance(event, ResultEvent)

    def add_text(self, event: TextEvent) -> None:
        self.last_text = event.text or ""

    def add_tool_call(self, event: ToolCallEvent) -> None:
        self.tool_calls += 1
        name = event.name or "unknown"
        if len(name) > MAX_NAME_CHARS:
            name = _short(name)
        usage = self.tool_usage
        if name in usage:
            usage[name] += 1
        elif len(usage) < MAX_TOOL_NAMES:
            usage[name] = 1
        else:  # bounded: a CLI inventing names cannot grow this
            usage[OTHER_TOOLS] = usage.get(OTHER_TOOLS, 0) + 1
        tool_id = event.id
        if len(tool_id) > MAX_NAME_CHARS:
            tool_id = _short(tool_id)
        if len(self.tool_names) < 10_000:
            self.tool_names[tool_id] = name
        for path in event.files:
            self._add_file(path)
        pending = self.pending
        held = len(pending)
        if held < _RAW_PENDING:  # the usual case: its result comes next
            pending[tool_id] = (name, event.input, self.now)
        else:  # calls pile up: keep small copies, the newest MAX_PENDING
            if held >= MAX_PENDING:
                del pending[next(iter(pending))]
            pending[tool_id] = (name, _slim_input(event.input), self.now)
        self.last_failed_step = None

    def add_tool_result(self, event: ToolResultEvent) -> None:
        tool_id = event.id if len(event.id) <= MAX_NAME_CHARS else _short(event.id)
        name = event.name or self.tool_names.get(tool_id, "unknown")
        if len(name) > MAX_NAME_CHARS:
            name = _short(name)
        call = self.pending.pop(tool_id, None)
        if call is not None:
            duration = self.now - call[2]
            if duration < 0.0:  # the wall clock stepped back
                duration = 0.0
            self.tool_timed += 1
            self.tool_time += duration
            if len(self.tool_timings) < MAX_TOOL_TIMINGS:
                self.tool_timings.append((tool_id, call[0], duration))
        if event.is_error:
            step = self._describe(call)
            if len(self.failed_tools) < _MAX_ERRORS:
                self.failed_tools.append(name)
            first = next((ln.strip() for ln in event.output.splitlines() if ln.strip()), "")
            if self.redactor is not None:
                name, first = self.redactor.text(name), self.redactor.text(first)
            self.last_tool_error = f"{name} failed" + (
                f": {first[:_MAX_TOOL_ERROR]}" if first else ""
            )
            self.last_failed_step = step
        else:
            self.last_failed_step = None
            self.last_successful_tool = name
            if call is not None and len(self.steps) < _MAX_STEPS:
                self.steps.append(self._describe_call(call[0], call[1]))
        for path in event.files:
            self._add_file(path)

    def add_session(self, event: SessionEvent) -> None:
        self.session_id = event.session_id or self.session_id
        self.model = event.model or self.model

    def add_usage(self, event: UsageEvent) -> None:
        # The run's usage is the CLI's total: a message's own (claude,
        # mid-stream), or the messages' folded sum, is metering's to count.
        if event.message_id is None and event.messages is None and event.usage is not None:
            self.usage = event.usage
        if event.cost_usd is not None:
            self.cost_usd = event.cost_usd

    def add_result(self, event: ResultEvent) -> None:
        self.result = event
        if event.session_id:
            self.session_id = event.session_id
        if event.num_turns is not None:
            self.num_turns = event.num_turns
        if event.api_error_status is not None:
            self.api_error_status = event.api_error_status

    def add_error(self, event: ErrorEvent) -> None:
        if len(self.errors) >= _MAX_ERRORS:
            del self.errors[0]
        self.errors.append(event.message)

    def add_mcp_server(self, event: McpServerEvent) -> None:
        self.mcp_servers[event.name] = {
            "name": event.name,
            "status": event.status,
            "error": event.error,
        }

    def add_cli_retry(self, event: CliRetryEvent) -> None:
        self.cli_retries += 1
        if event.error_status is not None:
            self.api_error_status = event.error_status
        delay = event.retry_delay_ms
        if isinstance(delay, int | float) and not isinstance(delay, bool) and delay >= 0:
            self.retry_delay_s = round(delay / 1000, 3)

    def bad_number(self, field: str) -> None:
        """The CLI wrote an out-of-range number in ``field`` (kept as None)."""
        if len(self.bad_numbers) < MAX_NAMED and field not in self.bad_numbers:
            self.bad_numbers.append(field)

    def number_warnings(self) -> tuple[str, ...]:
        if not self.bad_numbers:
            return ()
        return (
            "the CLI reported numbers out of range (negative, not finite, or beyond 2**53-1), "
            "kept as null: " + ", ".join(self.bad_numbers),
        )

    def unfinished_steps(self, stopped: bool) -> list[str]:
        """Tool calls without a result; when we stopped the run, also the last
        call if it failed last (the CLI reports its tool killed by our signal)."""
        steps = [
            self._describe_call(name, tool_input)
            for name, tool_input, _started in list(self.pending.values())[-10:]
        ]
        if stopped and not steps and self.last_failed_step:
            steps.append(self.last_failed_step)
        return steps

    def _describe(self, call: tuple[str, Any, float] | None) -> str | None:
        return self._describe_call(call[0], call[1]) if call is not None else None

    def _describe_call(self, name: str, tool_input: Any) -> str:
        """One line for a call; secrets are masked in its input first, so the
        line's cut never leaves part of one."""
        if self.redactor is not None:
            name, tool_input = self.redactor.text(name), self.redactor.deep(tool_input)
        return describe_step(name, tool_input, self.cwd)

    def _add_file(self, path: object) -> None:
        if not isinstance(path, str) or not path or len(self.files) >= _MAX_FILES:
            return
        if path in self._paths_seen:  # relpath() is slow; the same files come back
            return
        self._paths_seen.add(path)
        if os.path.isabs(path):
            try:
                rel = os.path.relpath(path, self.cwd)
            except ValueError:
                rel = path
            if not rel.startswith(".."):
                path = rel
        self.files[path] = None

    def final_text(self) -> str | None:
        """The answer: the terminal event's text, else the last assistant text."""
        if self.result is not None and self.result.text:
            return str(self.result.text)
        return self.last_text

    @staticmethod
    def parse_data(text: str | None) -> dict[str, Any] | None:
        if not text or text.lstrip()[:1] != "{":
            return None
        try:
            obj = orjson.loads(text)
        except orjson.JSONDecodeError:
            return None
        return obj if isinstance(obj, dict) else None
