"""The typed events: one class per kind, the documented to_dict, the way back."""

from __future__ import annotations

import pickle
import typing

import pytest

from backends import ClaudeBackend, CodexBackend
from coding_genesis import (
    EVENT_TYPES,
    AttemptEvent,
    Event,
    EventKind,
    ResultEvent,
    RunEvent,
    RunFinishedEvent,
    SessionEvent,
    StateEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
    event_from_dict,
)
from coding_genesis._pipeline.bus import EventBus
from coding_genesis._util.redact import Redactor

STAMPS = ["type", "node", "run_id", "seq", "ts", "timestamp"]


def published(event: Event) -> Event:
    return EventBus("agent-1").publish(event, "run-1")


def test_one_class_per_kind_and_the_union_holds_them_all() -> None:
    assert set(EVENT_TYPES) == {k.value for k in EventKind}
    assert set(typing.get_args(RunEvent)) == set(EVENT_TYPES.values())
    for name, cls in EVENT_TYPES.items():
        assert cls.kind == name and issubclass(cls, Event)


def test_events_are_slotted_and_have_no_data_dict() -> None:
    event = ToolCallEvent("t1", "Bash", {"command": "ls"})
    with pytest.raises(AttributeError):
        event.data  # type: ignore[attr-defined]  # noqa: B018
    with pytest.raises(AttributeError):
        event.surprise = 1  # type: ignore[attr-defined]


def test_claude_events_keep_the_documented_dict_shape() -> None:
    translate = ClaudeBackend().translator().translate
    (init,) = translate({"type": "system", "subtype": "init", "session_id": "s", "model": "m"})
    assert list(published(init).to_dict()) == [*STAMPS, "session_id", "model", "cwd"]
    events = translate(
        {
            "type": "result",
            "subtype": "success",
            "result": "done",
            "session_id": "s",
            "num_turns": 2,
            "total_cost_usd": 0.5,
        }
    )
    usage, result = events
    assert isinstance(usage, UsageEvent) and usage.cost_usd == 0.5 and usage.usage is None
    assert isinstance(result, ResultEvent)
    assert result.text == "done" and not result.is_error and result.num_turns == 2
    assert list(result.to_dict())[len(STAMPS) :] == [
        "is_error",
        "subtype",
        "text",
        "session_id",
        "num_turns",
        "duration_ms",
        "api_error_status",
        "stop_reason",
        "terminal_reason",
        "permission_denials",
        "errors",
    ]


def test_codex_events_leave_out_what_codex_does_not_report() -> None:
    translate = CodexBackend().translator().translate
    (session,) = translate({"type": "thread.started", "thread_id": "th"})
    assert session.payload() == {"session_id": "th"}
    assert isinstance(session, SessionEvent) and session.model is None
    usage, result = translate({"type": "turn.completed", "usage": {"input_tokens": 3}})
    assert usage.payload() == {"usage": {"input_tokens": 3}}
    assert result.payload() == {"is_error": False, "subtype": "turn.completed", "text": None}
    assert isinstance(result, ResultEvent) and result.errors == [] and result.session_id is None
    call, finished = translate(
        {"type": "item.completed", "item": {"id": "j", "type": "mcp_tool_call", "server": "s"}}
    )
    assert isinstance(call, ToolCallEvent) and call.name == "mcp:s/None"
    assert isinstance(finished, ToolResultEvent) and finished.exit_code is None
    assert "exit_code" in finished.payload()  # codex says it: null
    assert "exit_code" not in ToolResultEvent("k", "Bash", False, "").payload()  # claude does not


def test_to_dict_and_event_from_dict_are_inverses() -> None:
    events: list[Event] = [
        *ClaudeBackend()
        .translator()
        .translate(
            {
                "type": "assistant",
                "message": {
                    "content": [
                        {"type": "text", "text": "hi"},
                        {
                            "type": "tool_use",
                            "id": "t",
                            "name": "Write",
                            "input": {"file_path": "a"},
                        },
                    ]
                },
            }
        ),
        StateEvent("DEGRADED", "READY", "circuit open", {"cooldown_s": 5.0}),
        AttemptEvent("finished", 2, {"attempt": 2, "action": "retry", "delay_s": 1.5}),
        RunFinishedEvent(130, cancelled=True),
        RunFinishedEvent(0, None, None),
    ]
    for event in events:
        published(event)
        again = event_from_dict(event.to_dict())
        assert type(again) is type(event)
        assert again == event
        assert list(again.to_dict().items()) == list(event.to_dict().items())
        assert pickle.loads(pickle.dumps(event)) == event
    attempt = events[-3]
    assert isinstance(attempt, AttemptEvent)
    assert attempt.action == "retry" and "attempt" not in attempt.extra
    assert list(attempt.to_dict())[len(STAMPS) :] == ["phase", "attempt", "action", "delay_s"]
    assert events[-2].payload() == {"status": 130, "cancelled": True}
    assert events[-1].payload() == {"status": 0, "error": None, "category": None}


def test_event_from_dict_rejects_an_unknown_type() -> None:
    with pytest.raises(ValueError, match="unknown event type"):
        event_from_dict({"type": "response", "status": 0})


def test_redacted_returns_a_masked_copy_and_leaves_the_original() -> None:
    redactor = Redactor({"API_KEY": "s3cr3t-value-xyz"})
    clean = ToolResultEvent("t", "Bash", False, "fine")
    assert clean.redacted(redactor) is clean
    dirty = published(ToolCallEvent("t", "Bash", {"command": "echo s3cr3t-value-xyz"}))
    masked = dirty.redacted(redactor)
    assert isinstance(masked, ToolCallEvent) and isinstance(dirty, ToolCallEvent)
    assert masked.input == {"command": "echo [REDACTED]"}
    assert dirty.input == {"command": "echo s3cr3t-value-xyz"}
    assert (masked.seq, masked.run_id, masked.agent) == (dirty.seq, dirty.run_id, dirty.agent)
