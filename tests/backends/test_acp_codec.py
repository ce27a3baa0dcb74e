"""The ACP codec (``backends/acp.py``) on its own: every message it writes validates
against the protocol's schema (``backends/schemas/acp/``, version 1) by its method; the
five real agents' recorded exchanges (``tests/fakes/recordings/acp/``) replayed through it
give the answer, the tool calls, the usage each reports and nothing broken; and the cases
no recording holds (errors, refusals, ids, versions) said as the codec must."""

from __future__ import annotations

import json
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from coding_genesis.approval import Decision
from coding_genesis.backend import CommandSpec
from coding_genesis.backends.acp import AcpAgent, AcpProtocol, AcpTranslator, error_status
from coding_genesis.control import (
    FORWARD,
    Incoming,
    PermissionAsk,
    ProtocolFault,
    Ready,
    Reply,
    SessionStart,
    TurnEnded,
    Unknown,
)
from coding_genesis.events import (
    Event,
    ResultEvent,
    TextEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)
from tests.backends.schema_lite import load, problems

ROOT = Path(__file__).resolve().parents[2]
SCHEMA = load(ROOT / "backends" / "schemas" / "acp" / "schema.json")
RECORDINGS = ROOT / "tests" / "fakes" / "recordings" / "acp"

#: What each method's params (or a notification's) must match.
PARAMS = {
    "initialize": "InitializeRequest",
    "session/new": "NewSessionRequest",
    "session/load": "LoadSessionRequest",
    "session/set_mode": "SetSessionModeRequest",
    "session/prompt": "PromptRequest",
    "session/cancel": "CancelNotification",
    "session/update": "SessionNotification",
    "session/request_permission": "RequestPermissionRequest",
}
#: What an agent's answer to each of our requests must match.
ANSWERS = {
    "initialize": "InitializeResponse",
    "session/new": "NewSessionResponse",
    "session/prompt": "PromptResponse",
}

AGENT = AcpAgent("fake", modes={"read-only": "plan"}, ask_mode="default")


def protocol(agent: AcpAgent = AGENT) -> AcpProtocol:
    return AcpProtocol(agent, lambda start: CommandSpec(args=("--acp",)))


def schema_problems(definition: str, value: Any) -> list[str]:
    return problems({"$ref": f"#/$defs/{definition}"}, value, SCHEMA)


def written_problems(obj: dict[str, Any], method_of: dict[Any, str]) -> list[str]:
    """What is wrong with one object the codec wrote (``method_of``: the agent's
    request ids → their methods, for our answers)."""
    assert obj.get("jsonrpc") == "2.0", obj
    if "method" in obj:
        return schema_problems(PARAMS[obj["method"]], obj["params"])
    if "error" in obj:
        return schema_problems("Error", obj["error"])
    assert method_of[obj["id"]] == "session/request_permission", obj
    return schema_problems("RequestPermissionResponse", obj["result"])


def opened(p: AcpProtocol, start: SessionStart | None = None, session: str = "s-1") -> list[Any]:
    """The opening, answered: what the codec wrote."""
    start = start or SessionStart(cwd="/srv/work")
    out: list[Any] = list(p.opening(start))
    replies = p.receive(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}},
        }
    )
    (reply,) = replies
    assert isinstance(reply, Reply)
    out += reply.objects
    if start.resume:
        answer: dict[str, Any] = {}
    else:
        answer = {"sessionId": session}
    items = p.receive({"jsonrpc": "2.0", "id": 2, "result": answer})
    for item in items:
        if isinstance(item, Reply):
            out += item.objects
            items = p.receive({"jsonrpc": "2.0", "id": 3, "result": {}})
    assert any(isinstance(i, Ready) for i in items), items
    return out


def test_everything_the_codec_writes_validates_against_the_schema() -> None:
    p = protocol()
    written = opened(p, SessionStart(cwd="/srv/work", approvals=True))
    assert [o["method"] for o in written] == ["initialize", "session/new", "session/set_mode"]
    assert written[2]["params"] == {"sessionId": "s-1", "modeId": "default"}
    written += p.begin_turn("hello")
    ask = {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "session/request_permission",
        "params": {
            "sessionId": "s-1",
            "toolCall": {"toolCallId": "t1", "title": "ls", "kind": "execute", "status": "pending"},
            "options": [
                {"optionId": "yes", "name": "Yes", "kind": "allow_once"},
                {"optionId": "no", "name": "No", "kind": "reject_once"},
            ],
        },
    }
    assert not schema_problems("RequestPermissionRequest", ask["params"])
    (_, question) = p.receive(ask)
    assert isinstance(question, PermissionAsk)
    written += p.answer(question, Decision.allow())
    (_, again) = p.receive({**ask, "id": 1})
    assert isinstance(again, PermissionAsk)
    written += p.interrupt()  # session/cancel, and the open question answered "cancelled"
    (reply,) = p.receive({"jsonrpc": "2.0", "id": 7, "method": "fs/read_text_file", "params": {}})
    assert isinstance(reply, Reply)
    written += reply.objects
    resumed = protocol()
    written += opened(resumed, SessionStart(cwd="/srv/work", resume="s-0"))
    method_of = {0: "session/request_permission", 1: "session/request_permission"}
    for obj in written:
        assert written_problems(obj, method_of) == [], obj
    answers = [o for o in written if "result" in o]
    assert [a["result"]["outcome"] for a in answers] == [
        {"outcome": "selected", "optionId": "yes"},
        {"outcome": "cancelled"},
    ]
    assert {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s-1"}} in written
    assert written[-1]["method"] == "session/load"
    assert written[-1]["params"] == {"sessionId": "s-0", "cwd": "/srv/work", "mcpServers": []}


def replay(path: Path) -> tuple[list[Event], list[Incoming], list[dict[str, Any]]]:
    """A recording through a fresh codec: the turn's events, every meaning, the agent's messages."""
    p = protocol(AcpAgent(path.stem))
    p.opening(SessionStart(cwd="/srv"))
    translator: AcpTranslator | None = None
    events: list[Event] = []
    meanings: list[Incoming] = []
    received: list[dict[str, Any]] = []
    for line in path.read_text().splitlines():
        entry = json.loads(line)
        msg = entry["msg"]
        if entry["dir"] == ">":
            if msg.get("method") == "session/prompt":
                translator = p.translator()  # type: ignore[assignment]
                p.begin_turn(msg["params"]["prompt"][0]["text"])
            continue
        received.append(msg)
        items: Sequence[Incoming] = p.receive(msg)
        meanings += items
        if translator is not None and any(i is FORWARD for i in items):
            events += translator.translate(msg)
    return events, meanings, received


RECORDED = sorted(RECORDINGS.glob("*_acp_tool.jsonl"))


@pytest.mark.parametrize("path", RECORDED, ids=[p.stem for p in RECORDED])
def test_each_agents_recording_through_the_codec(path: Path) -> None:
    events, meanings, received = replay(path)
    assert not [m for m in meanings if isinstance(m, ProtocolFault)], meanings
    assert [m for m in meanings if isinstance(m, TurnEnded)] == [TurnEnded("completed")]
    assert any(isinstance(m, Ready) for m in meanings)
    results = [e for e in events if isinstance(e, ResultEvent)]
    assert len(results) == 1 and not results[0].is_error
    assert "The command finished" in (results[0].text or "")
    assert "I will run" not in (results[0].text or "")  # the answer is the last message
    calls = [e for e in events if isinstance(e, ToolCallEvent)]
    done = [e for e in events if isinstance(e, ToolResultEvent)]
    assert len(calls) == 1 and len(done) == 1 and not done[0].is_error
    assert calls[0].id == done[0].id
    assert any(isinstance(e, TextEvent) for e in events)
    usage = [e for e in events if isinstance(e, UsageEvent)]
    if path.stem.startswith(("gemini", "opencode", "qwen")):
        assert len(usage) == 1 and usage[0].usage is not None
        assert usage[0].usage["inputTokens"] > 0 and usage[0].usage["outputTokens"] > 0
    # The messages of each kind the agents wrote are what the schema says.
    for msg in received:
        method = msg.get("method")
        if method in PARAMS:
            assert schema_problems(PARAMS[method], msg["params"]) == [], msg
    # qwen's craft/drainMidTurnQueue is answered "method not found".
    answered = [
        o
        for m in meanings
        if isinstance(m, Reply)
        for o in m.objects
        if "id" in o and "method" not in o
    ]
    assert all(o["error"]["code"] == -32601 for o in answered), answered
    assert len(answered) == (1 if path.stem.startswith("qwen") else 0)


def test_a_recorded_exchange_with_an_unknown_update_counts_it() -> None:
    p = protocol()
    opened(p)
    p.begin_turn("x")
    news = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": "s-1", "update": {"sessionUpdate": "hologram"}},
    }
    assert p.receive(news) == (Unknown("session/update hologram"),)
    other = {
        **news,
        "params": {"sessionId": "s-2", "update": {"sessionUpdate": "agent_message_chunk"}},
    }
    assert p.receive(other) == (Unknown("session/update of another session"),)
    assert (
        p.receive(
            {"jsonrpc": "2.0", "method": "qwen/notify/session/prompt-suggestion", "params": {}}
        )
        == ()
    )


@pytest.mark.parametrize(
    ("error", "status"),
    [
        ({"code": 401, "message": '{"error":{"code":401}}'}, 401),  # gemini
        (
            {
                "code": -32603,
                "message": "Internal error",
                "data": {"details": "401 Incorrect API key"},
            },
            401,
        ),  # qwen
        (
            {"code": -32603, "message": "Internal error: Incorrect API key provided"},
            None,
        ),  # opencode
        ({"code": 429, "message": "Rate limit exceeded. Try again later."}, 429),  # qwen 429
        ({"code": -32000, "message": "failed with status 503"}, 503),
    ],
)
def test_the_http_status_of_an_error_answer(error: dict[str, Any], status: int | None) -> None:
    assert error_status(error) == status


def test_the_protocol_version_and_a_missing_load_are_fatal() -> None:
    p = protocol()
    p.opening(SessionStart(cwd="/srv"))
    (fault,) = p.receive({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 2}})
    assert isinstance(fault, ProtocolFault) and fault.fatal
    assert "version 2" in fault.message
    q = protocol()
    q.opening(SessionStart(cwd="/srv", resume="abc"))
    (fault,) = q.receive({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1}})
    assert isinstance(fault, ProtocolFault) and fault.fatal and "session/load" in fault.message


def test_ids_the_client_never_used_and_agent_ids_that_overlap_ours() -> None:
    p = protocol()
    opened(p)
    p.begin_turn("x")  # our prompt is id 3 (no mode was set)
    (fault,) = p.receive({"jsonrpc": "2.0", "id": 42, "result": {}})
    assert isinstance(fault, ProtocolFault) and "never used" in fault.message
    # The agent's request with the very id of our prompt is a request, not its answer.
    items = p.receive(
        {"jsonrpc": "2.0", "id": 3, "method": "terminal/create", "params": {"sessionId": "s-1"}}
    )
    (reply,) = items
    assert isinstance(reply, Reply) and reply.objects[0]["id"] == 3
    assert reply.objects[0]["error"]["code"] == -32601
    (forward, ended) = p.receive({"jsonrpc": "2.0", "id": 3, "result": {"stopReason": "end_turn"}})
    assert forward is FORWARD and ended == TurnEnded("completed")


@pytest.mark.parametrize(
    ("reason", "asked", "how"),
    [
        ("cancelled", True, "interrupted"),
        ("cancelled", False, "failed"),  # the agent cancelled by itself (codex-acp, a refusal)
        ("max_tokens", False, "failed"),
        ("refusal", False, "failed"),
        ("end_turn", False, "completed"),
    ],
)
def test_stop_reasons_end_the_turn(reason: str, asked: bool, how: str) -> None:
    p = protocol()
    opened(p)
    (prompt,) = p.begin_turn("x")
    if asked:
        p.interrupt()
    items = p.receive({"jsonrpc": "2.0", "id": prompt["id"], "result": {"stopReason": reason}})
    ended = [i for i in items if isinstance(i, TurnEnded)]
    assert [e.how for e in ended] == [how]
