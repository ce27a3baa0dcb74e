"""The event types issue 41's packages publish (declared once, here tested as
types): text and thinking pieces as they are written, an MCP server's state,
a compaction, a question answered.  Each round-trips through its dict and
pickle, is redacted as its kind is, and a piece of text never becomes a run's
answer (the whole message does)."""

from __future__ import annotations

import pickle

from coding_genesis._pipeline.tally import RunTally
from coding_genesis._util.redact import Redactor
from coding_genesis.events import (
    CompactionEvent,
    Event,
    EventKind,
    McpServerEvent,
    TextDeltaEvent,
    TextEvent,
    ThoughtDeltaEvent,
)
from coding_genesis.run_events import EVENT_TYPES, QuestionEvent, event_from_dict
from tests.pipeline.test_events import STAMPS, published

SECRET = "sk-ant-api03-" + "x" * 40


def test_each_new_kind_round_trips_with_its_fields_in_order() -> None:
    made: list[tuple[Event, list[str]]] = [
        (TextDeltaEvent("Hel", "msg-1"), ["text", "message_id"]),
        (ThoughtDeltaEvent("think"), ["text", "message_id"]),
        (McpServerEvent("docs", "failed", "exit 1"), ["name", "status", "error"]),
        (CompactionEvent("manual", 1200), ["trigger", "tokens_before"]),
        (
            QuestionEvent("Which file?", True, "asker", {"turn": 2, "answer": "a.py"}),
            ["question", "answered", "source", "turn", "answer"],
        ),
    ]
    for event, fields in made:
        assert EVENT_TYPES[event.kind.value] is type(event)
        published(event)
        again = event_from_dict(event.to_dict())
        assert type(again) is type(event) and again == event
        assert list(event.to_dict())[len(STAMPS) :] == fields
        assert pickle.loads(pickle.dumps(event)) == event
    kinds = {"text_delta", "thought_delta", "mcp_server", "compaction", "question"}
    assert kinds <= {k.value for k in EventKind}
    assert CompactionEvent("auto").to_dict()["tokens_before"] is None


def test_a_piece_is_redacted_and_keeps_its_message() -> None:
    redactor = Redactor({"ANTHROPIC_API_KEY": SECRET})
    piece = TextDeltaEvent(f"key {SECRET}", "msg-7")
    clean = piece.redacted(redactor)
    assert SECRET not in clean.text and clean.message_id == "msg-7"
    assert type(clean) is TextDeltaEvent
    plain = ThoughtDeltaEvent("nothing secret", "m")
    assert plain.redacted(redactor) is plain
    failed = McpServerEvent("docs", "failed", f"bad token {SECRET}").redacted(redactor)
    assert SECRET not in str(failed.error) and failed.name == "docs"


def test_a_piece_of_text_is_never_the_answer() -> None:
    tally = RunTally("/w", Redactor({}))
    tally.add(TextEvent("the whole answer"))
    tally.add(TextDeltaEvent("a piece"))
    tally.add(ThoughtDeltaEvent("a thought"))
    assert tally.last_text == "the whole answer"
