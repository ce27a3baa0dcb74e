"""A text event is a message on every backend: gemini's one-shot ``delta``
chunks are one ``TextEvent`` per message (given at the next other line), and
claude's pieces (``stream_event``) are deltas beside the whole message."""

from __future__ import annotations

from coding_genesis.backends.claude import ClaudeTranslator
from coding_genesis.backends.gemini import GeminiTranslator
from coding_genesis.events import (
    Event,
    ResultEvent,
    TextDeltaEvent,
    TextEvent,
    ThoughtDeltaEvent,
    ThoughtEvent,
    ToolCallEvent,
)


def test_geminis_chunks_are_one_text_event_per_message() -> None:
    t = GeminiTranslator()
    events: list[Event] = []
    for line in (
        {"type": "message", "role": "user", "content": "hi"},
        {"type": "message", "role": "assistant", "content": "I will ", "delta": True},
        {"type": "message", "role": "assistant", "content": "look.", "delta": True},
        {"type": "tool_use", "tool_name": "ls", "tool_id": "1", "parameters": {}},
        {"type": "message", "role": "assistant", "content": "Done", "delta": True},
        {"type": "message", "role": "assistant", "content": " now.", "delta": True},
        {"type": "result", "status": "success"},
    ):
        events += t.translate(line)
    kinds = [type(e) for e in events]
    assert kinds == [TextEvent, ToolCallEvent, TextEvent, ResultEvent]
    assert [e.text for e in events if isinstance(e, TextEvent)] == ["I will look.", "Done now."]
    result = events[-1]
    assert isinstance(result, ResultEvent) and result.text == "Done now."


def test_a_message_the_stream_ends_in_is_given_at_flush() -> None:
    t = GeminiTranslator()
    assert not t.translate({"type": "message", "role": "assistant", "content": "cut"})
    assert list(t.flush()) == [TextEvent("cut")]
    assert not t.flush()


def test_claudes_pieces_are_deltas_of_their_message_and_thinking_a_thought() -> None:
    t = ClaudeTranslator()

    def stream(event: dict[str, object]) -> list[Event]:
        return list(t.translate({"type": "stream_event", "event": event}))

    assert not stream({"type": "message_start", "message": {"id": "msg_1"}})
    (thought,) = stream(
        {"type": "content_block_delta", "delta": {"type": "thinking_delta", "thinking": "hm"}}
    )
    (piece,) = stream(
        {"type": "content_block_delta", "delta": {"type": "text_delta", "text": "Hi"}}
    )
    assert not stream({"type": "content_block_delta", "delta": {"type": "input_json_delta"}})
    assert thought == ThoughtDeltaEvent("hm", "msg_1")  # the message id counts: not "msg_2"
    assert thought != ThoughtDeltaEvent("hm", "msg_2")
    assert piece == TextDeltaEvent("Hi", "msg_1")
    message = {"content": [{"type": "thinking", "thinking": "hm"}, {"type": "text", "text": "Hi"}]}
    whole = list(t.translate({"type": "assistant", "message": message}))
    assert whole == [ThoughtEvent("hm"), TextEvent("Hi")]
