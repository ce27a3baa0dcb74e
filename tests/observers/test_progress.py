"""The tracker behind the live panel, and what the panel draws from it."""

from __future__ import annotations

import io

from rich.console import Console

from coding_genesis._observers.progress import ProgressView, RunTracker, tool_summary
from coding_genesis.events import (
    CliRetryEvent,
    Event,
    SessionEvent,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
)
from coding_genesis.run_events import AttemptEvent, RunFinishedEvent, RunStartedEvent, StateEvent


class FakeClock:
    def __init__(self) -> None:
        self.now = 100.0

    def __call__(self) -> float:
        return self.now


def feed(tracker: RunTracker, *events: Event) -> None:
    for event in events:
        event.run_id = "run-1"
        tracker.on_event(event)


def draw(tracker: RunTracker, width: int = 100) -> str:
    buffer = io.StringIO()
    console = Console(file=buffer, width=width, color_system=None)
    console.print(ProgressView(tracker, console).render())
    out = buffer.getvalue()
    assert isinstance(out, str)
    return out


def test_the_tracker_follows_a_run_with_retries_and_tools() -> None:
    clock = FakeClock()
    tracker = RunTracker("claude", 300, clock=clock)
    feed(
        tracker,
        StateEvent("BUSY", "READY", "run started"),
        RunStartedEvent("claude", "claude", 4242, "/tmp", 120.0),
        SessionEvent("sess-1", "m"),
        AttemptEvent("started", 1),
        ToolCallEvent("a", "Bash", {"command": "pytest   -q\n -x"}),
        ToolCallEvent("b", "Write", {"file_path": "src/x.py"}, ["src/x.py"]),
        ToolResultEvent("a", "Bash", True, ""),
        CliRetryEvent(attempt=2, max_retries=10, error_status=529, error=None),
        TextEvent("first line\n\nthe last line  \n"),
        AttemptEvent("finished", 1, {"action": "retry", "category": "network", "delay_s": 2.0}),
    )
    clock.now += 65
    assert tracker.run_id == "run-1" and tracker.pid == 4242 and tracker.timeout == 120.0
    assert tracker.elapsed == 65
    assert tracker.tool_calls == 2 and tracker.failed_tools == 1
    assert list(tracker.running.values()) == []  # a new attempt is coming: nothing runs
    assert tracker.last_text == "the last line"
    assert tracker.last_cli_retry == "API retry 2/10 (HTTP 529)"
    assert tracker.last_attempt == "attempt 1 failed (network); retrying in 2s"

    screen = draw(tracker)
    assert "01:05 / 02:00" in screen
    assert "state BUSY · running · pid 4242 · session sess-1" in screen
    assert "tool calls 2 (Bash, Write) · 1 failed" in screen
    assert "retries: attempt 1 failed (network); retrying in 2s · CLI retries 1" in screen
    assert "› the last line" in screen

    feed(tracker, AttemptEvent("started", 2, {"resume_session": "sess-1"}))
    assert tracker.last_attempt == "attempt 2 (resuming the session)"
    lines = tracker.summary_lines()
    assert lines[0] == "2 tool calls (Bash, Write), 1 failed"  # issue 28: plural said once
    assert "files: src/x.py" in lines
    assert "attempts: 2 (last: attempt 2 (resuming the session))" in lines

    feed(tracker, RunFinishedEvent(0))
    clock.now += 100
    assert tracker.phase == "finished" and tracker.status == 0 and tracker.elapsed == 65


def test_the_panel_shows_the_running_tool_and_the_stop() -> None:
    tracker = RunTracker("codex", 30, clock=FakeClock())
    feed(
        tracker,
        ToolCallEvent("i1", "command_execution", {"command": ["bash", "-lc", "make"]}),
    )
    screen = draw(tracker)
    assert "running command_execution: bash -lc make" in screen
    tracker.stopping("Ctrl-C: stopping the process tree")
    screen = draw(tracker)
    assert "stopping" in screen and "Ctrl-C: stopping the process tree" in screen
    # Markup in the data is shown as text, never interpreted.
    feed(tracker, TextEvent("[bold red]not markup[/]"))
    assert "[bold red]not markup[/]" in draw(tracker)


def test_tool_summary_is_one_bounded_line() -> None:
    assert tool_summary("Bash", {"command": "ls  -la\n/tmp"}) == "Bash: ls -la /tmp"
    assert tool_summary("Read", {"file_path": "a.py"}) == "Read: a.py"
    assert tool_summary("file_change", {"changes": [{"path": "a"}, {"path": "b"}]}) == (
        "file_change: a, b"
    )
    assert tool_summary("Odd", None) == "Odd"
    long = tool_summary("Bash", {"command": "x" * 500}, limit=40)
    assert len(long) == 40 and long.endswith("…")


def test_the_panel_shows_usage_cost_and_the_budget() -> None:
    from coding_genesis.events import UsageEvent
    from coding_genesis.run_events import BudgetEvent

    tracker = RunTracker("claude", 60, clock=FakeClock())
    usage = {"input_tokens": 1000, "output_tokens": 500}
    feed(
        tracker,
        UsageEvent(usage, model="m", message_id="msg_1"),
        UsageEvent(usage, model="m", message_id="msg_1"),  # the same message again
        UsageEvent(usage, model="m", message_id="msg_2"),
        BudgetEvent("warning", "max_cost_usd", "max_cost_usd: 80% used (0.024 of 0.03)"),
    )
    assert tracker.tokens == 3000
    screen = draw(tracker, width=140)
    assert "usage 3000 tokens · budget warning: max_cost_usd: 80% used" in screen
    feed(
        tracker,
        BudgetEvent(
            "exceeded", "max_cost_usd", "budget exceeded: max_cost_usd=0.03", {"used": 0.036}
        ),
    )
    assert tracker.budget_exceeded and tracker.cost_usd == 0.036
    # Issue 28: the cost with its currency; "budget exceeded" said once.
    assert "usage 3000 tokens · 0.0360 USD · budget exceeded: max_cost_usd=0.03" in draw(
        tracker, 140
    )
    assert "budget exceeded: max_cost_usd=0.03" in tracker.summary_lines()
    assert not any("budget exceeded: budget" in line for line in tracker.summary_lines())
    # claude's result: its own total and cost replace the running sum.
    feed(tracker, UsageEvent({"input_tokens": 2000, "output_tokens": 2000}, 0.5))
    assert tracker.tokens == 4000 and tracker.cost_usd == 0.5


def test_the_panels_last_line_follows_the_text_as_it_is_written() -> None:
    """With ``partial=True`` (``genesis chat``) the last line of text grows with each
    delta, then the whole message replaces it; the next message starts afresh."""
    from coding_genesis.events import TextDeltaEvent

    tracker = RunTracker("claude", 60.0)
    feed(tracker, TextDeltaEvent("Hello, wor", "m1"))
    assert tracker.last_text == "Hello, wor"
    feed(tracker, TextDeltaEvent("ld.\nSecond li", "m1"))
    assert tracker.last_text == "Second li"
    assert "Second li" in draw(tracker)
    feed(tracker, TextEvent("Hello, world.\nSecond line."))
    assert tracker.last_text == "Second line."
    feed(tracker, TextDeltaEvent("Next", "m2"))
    assert tracker.last_text == "Next"
