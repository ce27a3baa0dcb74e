"""What a run is doing, for people: a tracker fed by the agent's events, and a
live progress panel drawn from it on a terminal (with rich).

The tracker is plain state, updated from the event loop; the panel reads it
only when the caller refreshes it (no drawing thread), so nothing races.
"""

from __future__ import annotations

import sys
import time
from collections.abc import Callable, Iterator, Mapping
from contextlib import contextmanager
from typing import Any

from coding_genesis._util.display import printable
from coding_genesis._util.words import counted, money
from coding_genesis.events import (
    CliRetryEvent,
    ErrorEvent,
    Event,
    ResultEvent,
    SessionEvent,
    TextDeltaEvent,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)
from coding_genesis.run_events import (
    AttemptEvent,
    BudgetEvent,
    RunFinishedEvent,
    RunStartedEvent,
    StateEvent,
)
from coding_genesis.usage import normalize_usage

__all__ = ["ProgressView", "RunTracker", "tool_summary"]

_SUMMARY_KEYS = (
    "command",
    "file_path",
    "notebook_path",
    "path",
    "pattern",
    "url",
    "query",
    "description",
    "prompt",
)


def tool_summary(name: str, tool_input: Any, limit: int = 80) -> str:
    """A one-line description of a tool call: ``Bash: pytest -q``."""
    detail = ""
    if isinstance(tool_input, Mapping):
        for key in _SUMMARY_KEYS:
            value = tool_input.get(key)
            if isinstance(value, list):
                value = " ".join(str(v) for v in value)
            if isinstance(value, str) and value.strip():
                detail = value
                break
        else:
            changes = tool_input.get("changes")
            if isinstance(changes, list):
                paths = [str(c.get("path")) for c in changes if isinstance(c, Mapping)]
                detail = ", ".join(paths)
    text = f"{name}: {' '.join(detail.split())}" if detail else name
    return text if len(text) <= limit else text[: limit - 1] + "…"


def _last_line(text: str) -> str:
    for line in reversed(text.splitlines()):
        if line.strip():
            return line.strip()
    return ""


class RunTracker:
    """Folds the events of one ``genesis run`` into what a person wants to see."""

    def __init__(
        self,
        backend: str,
        timeout: float,
        *,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.backend = backend
        self.timeout = timeout
        self._clock = clock
        self.started = clock()
        self.finished_at: float | None = None
        self.state = "READY"
        #: starting, running, stopping, finished
        self.phase = "starting"
        self.run_id: str | None = None
        self.pid: int | None = None
        self.session_id: str | None = None
        self.model: str | None = None
        self.tool_calls = 0
        self.tool_usage: dict[str, int] = {}
        self.failed_tools = 0
        self.running: dict[str, str] = {}
        self.last_tool: str | None = None
        self.last_text = ""
        #: The end of the message being written, from its deltas.
        self._writing = ""
        self.cli_retries = 0
        self.last_cli_retry: str | None = None
        self.attempt = 1
        self.last_attempt: str | None = None
        self.errors = 0
        self.last_error: str | None = None
        self.files: dict[str, None] = {}
        self.status: int | None = None
        self.stop_note: str | None = None
        #: Tokens so far (input + output) per claude message / per codex turn.
        self._message_tokens: dict[str, int] = {}
        self._turn_tokens = 0
        self._final_tokens: int | None = None
        self.cost_usd: float | None = None
        #: The last budget event, as a line ("warning: ...", "exceeded: ...").
        self.budget_note: str | None = None
        self.budget_exceeded = False

    @property
    def tokens(self) -> int:
        if self._final_tokens is not None:
            return self._final_tokens
        return sum(self._message_tokens.values()) + self._turn_tokens

    def _on_usage(self, event: UsageEvent) -> None:
        if event.cost_usd is not None:
            self.cost_usd = event.cost_usd
        if not isinstance(event.usage, Mapping):
            return
        tokens = normalize_usage(event.usage)
        total = tokens.input + tokens.output
        if event.message_id is not None:
            self._message_tokens[event.message_id] = total
        elif event.cost_usd is not None or event.by_model:
            self._final_tokens = total
        else:
            self._turn_tokens += total

    @property
    def elapsed(self) -> float:
        end = self.finished_at if self.finished_at is not None else self._clock()
        return max(end - self.started, 0.0)

    def on_event(self, event: Event) -> None:
        if event.run_id:
            self.run_id = event.run_id
        handle = _HANDLERS.get(type(event))
        if handle is None:  # a subclass of a kind: found by its MRO, as isinstance did
            handle = next((_HANDLERS[k] for k in type(event).__mro__ if k in _HANDLERS), None)
        if handle is not None:
            handle(self, event)

    def _on_text(self, event: TextEvent) -> None:
        self._writing = ""
        line = _last_line(event.text)
        if line:
            self.last_text = line

    def _on_text_delta(self, event: TextDeltaEvent) -> None:
        """A piece of the message being written (``partial=True``): the last
        line shown is that message's, as it grows (bounded: its last 4 KiB)."""
        self._writing = (self._writing + event.text)[-4096:]
        line = _last_line(self._writing)
        if line:
            self.last_text = line

    def _on_tool_call(self, event: ToolCallEvent) -> None:
        self.tool_calls += 1
        name = event.name or "unknown"
        self.tool_usage[name] = self.tool_usage.get(name, 0) + 1
        summary = tool_summary(name, event.input)
        self.running[event.id or str(self.tool_calls)] = summary
        self.last_tool = summary
        for path in event.files:
            if isinstance(path, str) and len(self.files) < 1000:
                self.files[path] = None

    def _on_tool_result(self, event: ToolResultEvent) -> None:
        self.running.pop(event.id, None)
        if event.is_error:
            self.failed_tools += 1

    def _on_session(self, event: SessionEvent) -> None:
        self.session_id = event.session_id or self.session_id
        self.model = event.model or self.model

    def _on_state(self, event: StateEvent) -> None:
        self.state = str(event.state or self.state)

    def _on_run_started(self, event: RunStartedEvent) -> None:
        self.phase = "running"
        self.pid = event.pid
        if isinstance(event.timeout, int | float):
            self.timeout = float(event.timeout)

    def _on_result(self, event: ResultEvent) -> None:
        if event.session_id:
            self.session_id = event.session_id

    def _on_cli_retry(self, event: CliRetryEvent) -> None:
        self.cli_retries += 1
        attempt, most = event.attempt, event.max_retries
        status = event.error_status
        note = f"API retry {attempt}/{most}" if attempt and most else "API retry"
        self.last_cli_retry = note + (f" (HTTP {status})" if status else "")

    def _on_attempt(self, event: AttemptEvent) -> None:
        # coding-genesis's own retry policy: "started" then "finished" per attempt.
        number = event.attempt
        if isinstance(number, int):
            self.attempt = number
        self.running.clear()  # one attempt's process is gone, or a new one starts
        extra = event.extra
        if event.phase == "started":
            if self.attempt > 1:
                how = "resuming the session" if extra.get("resume_session") else "fresh"
                self.last_attempt = f"attempt {self.attempt} ({how})"
        elif event.action == "retry":
            delay = extra.get("delay_s")
            wait = f" in {delay:g}s" if isinstance(delay, int | float) else ""
            self.last_attempt = (
                f"attempt {self.attempt} failed ({extra.get('category')}); retrying{wait}"
            )

    def _on_budget(self, event: BudgetEvent) -> None:
        # An exceeded budget's message says so itself ("budget exceeded: ...").
        self.budget_note = (
            event.message if event.level == "exceeded" else f"budget {event.level}: {event.message}"
        )
        if event.level == "exceeded":
            self.budget_exceeded = True
            cost = event.extra.get("used") if event.limit == "max_cost_usd" else None
            if isinstance(cost, int | float):
                self.cost_usd = float(cost)

    def _on_error(self, event: ErrorEvent) -> None:
        self.errors += 1
        self.last_error = _last_line(event.message) or None

    def _on_run_finished(self, event: RunFinishedEvent) -> None:
        self.phase = "finished"
        self.finished_at = self._clock()
        status = event.status
        self.status = status if isinstance(status, int) else None

    def stopping(self, note: str) -> None:
        """The user asked to stop (Ctrl-C, SIGTERM)."""
        self.phase = "stopping"
        self.stop_note = note

    def tools_text(self, limit: int = 6) -> str:
        usage = sorted(self.tool_usage.items(), key=lambda kv: (-kv[1], kv[0]))
        parts = [f"{name}×{count}" if count > 1 else name for name, count in usage[:limit]]
        if len(usage) > limit:
            parts.append(f"+{len(usage) - limit} more")
        return ", ".join(parts)

    def summary_lines(self) -> list[str]:
        """What the run did so far, as short lines (printed after Ctrl-C)."""
        tools = counted(self.tool_calls, "tool call")
        if self.tool_calls:
            tools += f" ({self.tools_text()})"
        if self.failed_tools:
            tools += f", {self.failed_tools} failed"
        lines = [tools]
        if self.session_id:
            lines.append(f"session {self.session_id}")
        if self.running:
            lines.append("was running: " + "; ".join(self.running.values()))
        elif self.last_tool:
            lines.append(f"last tool: {self.last_tool}")
        if self.files:
            shown = list(self.files)[:5]
            more = f" (+{len(self.files) - 5} more)" if len(self.files) > 5 else ""
            lines.append("files: " + ", ".join(shown) + more)
        if self.cli_retries:
            lines.append(f"CLI API retries: {self.cli_retries} (last: {self.last_cli_retry})")
        if self.last_attempt:
            lines.append(f"attempts: {self.attempt} (last: {self.last_attempt})")
        if self.tokens or self.cost_usd is not None:
            lines.append(self.usage_text())
        if self.budget_note:
            lines.append(self.budget_note)
        if self.last_text:
            lines.append(f"last text: {self.last_text[:200]}")
        return [printable(line) for line in lines]

    def usage_text(self) -> str:
        text = f"usage {counted(self.tokens, 'token', short=True)}"
        if self.cost_usd is not None:
            text += f" · {money(self.cost_usd)}"
        return text


_PHASE_STYLE = {"stopping": "bold yellow", "finished": "green", "running": "cyan"}


def _clock_text(seconds: float) -> str:
    seconds = max(int(seconds), 0)
    hours, rest = divmod(seconds, 3600)
    minutes, secs = divmod(rest, 60)
    return f"{hours}:{minutes:02d}:{secs:02d}" if hours else f"{minutes:02d}:{secs:02d}"


#: What each kind of event changes in a run's progress (by its type).
_HANDLERS: dict[type, Callable[[RunTracker, Any], None]] = {
    TextEvent: RunTracker._on_text,
    TextDeltaEvent: RunTracker._on_text_delta,
    ToolCallEvent: RunTracker._on_tool_call,
    ToolResultEvent: RunTracker._on_tool_result,
    SessionEvent: RunTracker._on_session,
    StateEvent: RunTracker._on_state,
    RunStartedEvent: RunTracker._on_run_started,
    ResultEvent: RunTracker._on_result,
    CliRetryEvent: RunTracker._on_cli_retry,
    AttemptEvent: RunTracker._on_attempt,
    UsageEvent: RunTracker._on_usage,
    BudgetEvent: RunTracker._on_budget,
    ErrorEvent: RunTracker._on_error,
    RunFinishedEvent: RunTracker._on_run_finished,
}


class ProgressView:
    """A live panel on stderr: elapsed against the timeout, state, session,
    tool calls, the tool running now, the last line of text, retries.

    ``refresh()`` redraws; the caller ticks it (a few times a second) from
    the same thread that feeds the tracker.
    """

    def __init__(self, tracker: RunTracker, console: Any = None) -> None:
        from rich.console import Console

        self.tracker = tracker
        # The real stderr, fixed now: while the panel is up, other writes to
        # sys.stderr (attempt lines, log warnings) are printed above it.
        self.console = console if console is not None else Console(file=sys.stderr)
        self._live = self._new_live()
        self._frame = 0
        self._shown = False
        self._paused = False

    def __enter__(self) -> ProgressView:
        self._shown = True
        self._live.start()
        self.refresh()
        return self

    def __exit__(self, *exc: object) -> None:
        self._shown = False
        self._live.stop()

    @contextmanager
    def paused(self) -> Iterator[None]:
        """The panel off the screen for the body: a question asked on the
        terminal (an approval) must not be drawn over."""
        if self._paused or not self._shown:
            yield
            return
        self._paused = True
        self._live.stop()
        try:
            yield
        finally:
            self._paused = False
            if self._shown:  # not if the panel's run ended meanwhile
                # A new one: the old one would first erase as many lines as it
                # last drew, which are the question's now.
                self._live = self._new_live()
                self._live.start()
                self.refresh()

    def _new_live(self) -> Any:
        from rich.live import Live

        return Live(
            console=self.console,
            auto_refresh=False,
            transient=True,
            redirect_stdout=False,
            redirect_stderr=True,
        )

    def refresh(self) -> None:
        if self._paused:
            return
        self._frame += 1
        self._live.update(self.render(), refresh=True)

    def render(self) -> Any:
        from rich.console import Group
        from rich.progress_bar import ProgressBar
        from rich.table import Table
        from rich.text import Text

        t = self.tracker
        width = max(self.console.width - 2, 20)
        spinner = "⠋⠙⠹⠸⠼⠴⠦⠧⠇⠏"[self._frame % 10]
        head = Table.grid(padding=(0, 1))
        head.add_column(no_wrap=True)
        head.add_column(ratio=1)
        head.add_column(justify="right")
        elapsed = t.elapsed
        head.add_row(
            Text.assemble((spinner, "bold cyan"), " ", ("genesis", "bold"), f" {t.backend}"),
            ProgressBar(
                total=max(t.timeout, 0.001),
                completed=min(elapsed, t.timeout),
                width=max(min(width - 40, 60), 10),
            ),
            Text(f"{_clock_text(elapsed)} / {_clock_text(t.timeout)}"),
        )
        lines: list[Any] = [head]
        info = Text(overflow="ellipsis", no_wrap=True)
        info.append("state ")
        info.append(t.state, style="bold")
        info.append(" · ")
        info.append(t.phase, style=_PHASE_STYLE.get(t.phase, ""))
        if t.pid:
            info.append(f" · pid {t.pid}")
        if t.session_id:
            info.append(printable(f" · session {t.session_id}"))
        lines.append(info)
        tools = Text(overflow="ellipsis", no_wrap=True)
        tools.append("tool calls ")
        tools.append(str(t.tool_calls), style="bold")
        if t.tool_calls:
            tools.append(printable(f" ({t.tools_text(4)})"))
        if t.failed_tools:
            tools.append(f" · {t.failed_tools} failed", style="red")
        lines.append(tools)
        if t.running:
            now = printable("running " + "; ".join(list(t.running.values())[-2:]))
            lines.append(Text(now, style="yellow", overflow="ellipsis", no_wrap=True))
        retry = []
        if t.last_attempt:
            retry.append(t.last_attempt)
        if t.cli_retries:
            retry.append(f"CLI retries {t.cli_retries} (last: {t.last_cli_retry})")
        if retry:
            lines.append(
                Text(
                    printable("retries: " + " · ".join(retry)),
                    style="magenta",
                    overflow="ellipsis",
                    no_wrap=True,
                )
            )
        if t.tokens or t.cost_usd is not None or t.budget_note:
            usage = Text(overflow="ellipsis", no_wrap=True)
            usage.append(t.usage_text())
            if t.budget_note:
                usage.append(
                    printable(f" · {t.budget_note}"),
                    style="bold red" if t.budget_exceeded else "yellow",
                )
            lines.append(usage)
        if t.last_error:
            lines.append(
                Text(
                    printable(f"error: {t.last_error}"),
                    style="red",
                    overflow="ellipsis",
                    no_wrap=True,
                )
            )
        if t.last_text:
            lines.append(
                Text(printable(f"› {t.last_text}"), style="dim", overflow="ellipsis", no_wrap=True)
            )
        if t.stop_note:
            lines.append(Text(t.stop_note, style="bold yellow", overflow="ellipsis", no_wrap=True))
        return Group(*lines)
