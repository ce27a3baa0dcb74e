"""The ACP codec (``backends/acp.py``) on its own: every message it writes validates
against the protocol's schema (``backends/schemas/acp/``, version 1) by its method; the
five real agents' recorded exchanges (``tests/fakes/recordings/acp/``) replayed through it
give the answer, the tool calls, the usage each reports and nothing broken; and the cases
no recording holds (errors, refusals, ids, versions) said as the codec must."""

from __future__ import annotations

import json
import re
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import pytest

from coding_genesis.approval import Decision
from coding_genesis.backend import CommandSpec
from coding_genesis.backends.acp import (
    AcpAgent,
    AcpControl,
    AcpTranslator,
    acp_request,
    error_status,
)
from coding_genesis.control import (
    FORWARD,
    Forward,
    Incoming,
    McpServer,
    PermissionAsk,
    ProtocolFault,
    Ready,
    Reply,
    TurnEnded,
    Unknown,
    UnparsedLine,
)
from coding_genesis.events import (
    Event,
    PlanEvent,
    ResultEvent,
    TextDeltaEvent,
    TextEvent,
    ThoughtDeltaEvent,
    ThoughtEvent,
    ToolCallEvent,
    ToolResultEvent,
    UsageEvent,
)
from coding_genesis.request import Request
from coding_genesis.run_events import event_from_dict
from coding_genesis.usage import RunningTotals
from tests.backends.schema_lite import load, problems
from tests.support import cli_request

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


def protocol(agent: AcpAgent = AGENT) -> AcpControl:
    return AcpControl(agent, lambda start: CommandSpec(args=("--acp",)))


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


def opened(p: AcpControl, start: Request | None = None, session: str = "s-1") -> list[Any]:
    """The opening, answered: what the codec wrote."""
    start = start or cli_request(cwd="/srv/work")
    out: list[Any] = list(p.begin(start).greeting)
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


def permission_request(call: dict[str, Any], *options: tuple[str, str]) -> dict[str, Any]:
    """The agent's ``session/request_permission`` (id 0) about ``call``, offering
    ``options`` (option id, kind)."""
    offered = [{"optionId": oid, "name": oid, "kind": kind} for oid, kind in options]
    return {
        "jsonrpc": "2.0",
        "id": 0,
        "method": "session/request_permission",
        "params": {"sessionId": "s-1", "toolCall": call, "options": offered},
    }


def add(a: int) -> int:
    """Add."""
    return a


def host_tools_request() -> Request:
    """A session's start with an approver and the caller's function ``add``."""
    from coding_genesis.tools import as_host_tools

    return cli_request(cwd="/srv", approvals=True, tools=tuple(as_host_tools([add])))


def test_the_sessions_mcp_servers_are_declared_in_session_new_and_load() -> None:
    """The MCP server the session serves the caller's functions through
    (``tools_over_mcp``) goes in ``mcpServers`` as a stdio server with no
    environment of its own, valid by the schema; none without one."""
    assert AcpControl.can_host_tools and AcpControl.tools_over_mcp
    server = McpServer("genesis", "/usr/bin/python3", ("-I", "-m", "x", "/run/s.sock"))
    for resume in (None, "s-0"):
        p = protocol()
        p.mcp_servers = (server,)
        written = opened(p, cli_request(cwd="/srv/work", resume=resume))
        (new,) = [o for o in written if o["method"] in ("session/new", "session/load")]
        assert new["params"]["mcpServers"] == [
            {
                "name": "genesis",
                "command": "/usr/bin/python3",
                "args": ["-I", "-m", "x", "/run/s.sock"],
                "env": [],
            }
        ]
        assert written_problems(new, {}) == [], new
    assert opened(protocol())[1]["params"]["mcpServers"] == []


def test_the_agent_asking_to_call_a_host_tool_is_allowed_without_the_approver() -> None:
    """gemini asks before every MCP tool call: one of the caller's functions on
    the server the session serves (by the agent's title of such a request) is
    allowed once at once; any other call, or one with no server of ours, goes
    to the approver."""
    gemini = AcpAgent("gemini", mcp_title="{tool} ({server} MCP Server)")
    server = McpServer("genesis", "/usr/bin/python3", ())

    def ask(p: AcpControl, title: str) -> Sequence[Incoming]:
        call = {"toolCallId": "t1", "title": title, "kind": "other"}
        return p.receive(
            permission_request(
                call,
                ("proceed_always_server", "allow_always"),
                ("proceed_once", "allow_once"),
                ("cancel", "reject_once"),
            )
        )

    request = host_tools_request()
    p = protocol(gemini)
    p.mcp_servers = (server,)
    opened(p, request)
    _, reply = ask(p, "add (genesis MCP Server)")
    assert isinstance(reply, Reply)
    (answer,) = reply.objects
    assert answer["id"] == 0
    assert answer["result"]["outcome"] == {"outcome": "selected", "optionId": "proceed_once"}
    assert written_problems(answer, {0: "session/request_permission"}) == []
    # not one of the caller's functions, another server, or no server of ours: asked
    for title in ("rm (genesis MCP Server)", "add (other MCP Server)", "add"):
        assert isinstance(ask(p, title)[-1], PermissionAsk), title
    q = protocol(gemini)
    opened(q, request)
    assert isinstance(ask(q, "add (genesis MCP Server)")[-1], PermissionAsk)


def test_qwen_asking_for_a_host_tool_by_its_meta_name_is_allowed_only_on_our_server() -> None:
    """qwen titles its request with the arguments and names the tool in
    ``_meta.toolName`` (``mcp__<server>__<tool>``): ours is allowed without the
    approver; the same tool of another server, or another tool, is asked."""
    from coding_genesis.tools import as_host_tools

    def add(a: int) -> int:
        """Add."""
        return a

    server = McpServer("genesis-0123456789ab", "/usr/bin/python3", ())
    request = cli_request(cwd="/srv", approvals=True, tools=tuple(as_host_tools([add])))
    p = protocol(AcpAgent("qwen"))
    p.mcp_servers = (server,)
    opened(p, request)

    def ask(name: str) -> Sequence[Incoming]:
        call = {
            "toolCallId": "t1",
            "title": '{"a":1}',
            "kind": "other",
            "_meta": {"toolName": name},
        }
        options = [
            {"optionId": "proceed_once", "name": "o", "kind": "allow_once"},
            {"optionId": "cancel", "name": "r", "kind": "reject_once"},
        ]
        params = {"sessionId": "s-1", "toolCall": call, "options": options}
        return p.receive(
            {"jsonrpc": "2.0", "id": 0, "method": "session/request_permission", "params": params}
        )

    _, reply = ask("mcp__genesis-0123456789ab__add")
    assert isinstance(reply, Reply)
    assert reply.objects[0]["result"]["outcome"] == {
        "outcome": "selected",
        "optionId": "proceed_once",
    }
    for name in ("mcp__genesis__add", "mcp__genesis-0123456789ab__rm", "add"):
        assert isinstance(ask(name)[-1], PermissionAsk), name


def test_a_permission_request_naming_only_its_call_takes_the_calls_announcement() -> None:
    """codex-acp asks about an MCP tool call with only its ``toolCallId``: the
    title, kind and input come from the call's own ``tool_call`` update (for
    the host-tool check and the approver); the request's own title wins; a new
    turn forgets the last one's calls."""
    codex = AcpAgent("codex-acp", mcp_title="mcp.{server}.{tool}")
    server = McpServer("genesis-abc", "/usr/bin/python3", ())

    def announce(p: AcpControl, call_id: str, title: str) -> None:
        update = {
            "sessionUpdate": "tool_call",
            "toolCallId": call_id,
            "kind": "execute",
            "title": title,
            "status": "in_progress",
            "rawInput": {"server": "x", "tool": "y", "arguments": {"a": 1}},
        }
        p.receive(
            {
                "jsonrpc": "2.0",
                "method": "session/update",
                "params": {"sessionId": "s-1", "update": update},
            }
        )

    def ask(p: AcpControl, call: dict[str, Any]) -> Sequence[Incoming]:
        return p.receive(
            permission_request(
                {"kind": "execute", "status": "pending", **call},
                ("allow_once", "allow_once"),
                ("allow_always", "allow_always"),
                ("cancel", "reject_once"),
            )
        )

    request = host_tools_request()
    p = protocol(codex)
    p.mcp_servers = (server,)
    opened(p, request)
    p.begin_turn("call add")
    announce(p, "c1", "mcp.genesis-abc.add")
    announce(p, "c2", "mcp.other.add")
    _, reply = ask(p, {"toolCallId": "c1"})
    assert isinstance(reply, Reply)
    assert reply.objects[0]["result"]["outcome"] == {
        "outcome": "selected",
        "optionId": "allow_once",
    }
    # another server's tool of the same name: asked, under its announced title
    *_, asked = ask(p, {"toolCallId": "c2"})
    assert isinstance(asked, PermissionAsk) and asked.request.command == "mcp.other.add", asked
    # the request's own title is what is checked, never the announcement's
    assert isinstance(ask(p, {"toolCallId": "c1", "title": "mcp.other.add"})[-1], PermissionAsk)
    p.begin_turn("again")
    assert isinstance(ask(p, {"toolCallId": "c1"})[-1], PermissionAsk)  # forgotten


def test_everything_the_codec_writes_validates_against_the_schema() -> None:
    p = protocol()
    written = opened(p, cli_request(cwd="/srv/work", approvals=True))
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
    written += opened(resumed, cli_request(cwd="/srv/work", resume="s-0"))
    method_of = {0: "session/request_permission", 1: "session/request_permission"}
    for obj in written:
        assert written_problems(obj, method_of) == [], obj
    answers = [o for o in written if "result" in o]
    assert [a["result"]["outcome"] for a in answers] == [
        {"outcome": "selected", "optionId": "yes"},
        {"outcome": "cancelled"},
    ]
    assert {"jsonrpc": "2.0", "method": "session/cancel", "params": {"sessionId": "s-1"}} in written
    assert written[-2]["method"] == "session/load"
    assert written[-2]["params"] == {"sessionId": "s-0", "cwd": "/srv/work", "mcpServers": []}
    # no level, no approver: still our asking mode, never the loaded session's own
    assert written[-1]["method"] == "session/set_mode"
    assert written[-1]["params"] == {"sessionId": "s-0", "modeId": "default"}


def replay(path: Path) -> tuple[list[Event], list[Incoming], list[dict[str, Any]]]:
    """A recording through a fresh codec: the turn's events, every meaning, the agent's messages."""
    p = protocol(AcpAgent(path.stem))
    p.begin(cli_request(cwd="/srv"))
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
    p.begin(cli_request(cwd="/srv"))
    (fault,) = p.receive({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 2}})
    assert isinstance(fault, ProtocolFault) and fault.fatal
    assert "version 2" in fault.message
    q = protocol()
    q.begin(cli_request(cwd="/srv", resume="abc"))
    (fault,) = q.receive({"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1}})
    assert isinstance(fault, ProtocolFault) and fault.fatal and "session/load" in fault.message


def test_add_dirs_go_in_additional_directories_where_the_agent_offers_them() -> None:
    """A generic agent's ``add_dirs=`` are ``additionalDirectories`` of session/new
    and session/load (valid by the schema) when its initialize offers them; an
    agent that does not is a fatal fault, never a session without them."""
    generic = AcpAgent("generic", directories=True)
    offers = {
        "protocolVersion": 1,
        "agentCapabilities": {
            "loadSession": True,
            "sessionCapabilities": {"additionalDirectories": {}},
        },
    }
    for resume in (None, "s-0"):
        p = protocol(generic)
        p.begin(cli_request(cwd="/srv", add_dirs=("/data", "/more"), resume=resume))
        (reply,) = p.receive({"jsonrpc": "2.0", "id": 1, "result": offers})
        assert isinstance(reply, Reply)
        (new,) = reply.objects
        assert new["method"] == ("session/load" if resume else "session/new")
        assert new["params"]["additionalDirectories"] == ["/data", "/more"]
        assert written_problems(new, {}) == [], new
    silent = protocol(generic)
    silent.begin(cli_request(cwd="/srv", add_dirs=("/data",)))
    (fault,) = silent.receive(
        {"jsonrpc": "2.0", "id": 1, "result": {"protocolVersion": 1, "agentCapabilities": {}}}
    )
    assert isinstance(fault, ProtocolFault) and fault.fatal
    assert "does not offer additionalDirectories" in fault.message
    # gemini and qwen take add_dirs on their command line: nothing over the protocol
    p = protocol()
    p.begin(cli_request(cwd="/srv", add_dirs=("/data",)))
    (reply,) = p.receive({"jsonrpc": "2.0", "id": 1, "result": offers})
    assert isinstance(reply, Reply) and "additionalDirectories" not in reply.objects[0]["params"]


def test_a_resume_the_agent_would_lose_is_never_sent() -> None:
    """The capability check refuses it first; the codec, handed one anyway,
    sends no session/load (gemini's wipes the session it was asked to load)."""
    p = protocol(AcpAgent("gemini", resume="its session/load wipes the session"))
    assert p.resume_refusal == "its session/load wipes the session"
    p.begin(cli_request(cwd="/srv", resume="abc"))
    (fault,) = p.receive(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"protocolVersion": 1, "agentCapabilities": {"loadSession": True}},
        }
    )
    assert isinstance(fault, ProtocolFault) and fault.fatal
    assert fault.message == "its session/load wipes the session"


def test_ids_the_client_never_used_and_agent_ids_that_overlap_ours() -> None:
    p = protocol()
    opened(p)
    p.begin_turn("x")  # our prompt is id 4 (after session/set_mode)
    (fault,) = p.receive({"jsonrpc": "2.0", "id": 42, "result": {}})
    assert isinstance(fault, ProtocolFault) and "never used" in fault.message
    # The agent's request with the very id of our prompt is a request, not its answer.
    items = p.receive(
        {"jsonrpc": "2.0", "id": 4, "method": "terminal/create", "params": {"sessionId": "s-1"}}
    )
    (reply,) = items
    assert isinstance(reply, Reply) and reply.objects[0]["id"] == 4
    assert reply.objects[0]["error"]["code"] == -32601
    (forward, ended) = p.receive({"jsonrpc": "2.0", "id": 4, "result": {"stopReason": "end_turn"}})
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


def _cost_update(cost: float, session: str = "s-1") -> dict[str, Any]:
    update = {"sessionUpdate": "usage_update", "used": 1, "size": 9, "cost": {"amount": cost}}
    return {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {"sessionId": session, "update": update},
    }


def _costs(events: Sequence[Any]) -> list[float | None]:
    return [e.cost_usd for e in events if isinstance(e, UsageEvent)]


def test_the_sessions_running_cost_is_shared_once_across_turns_and_processes() -> None:
    """``usage_update`` tells the session's cumulative cost: each turn carries its
    share of that running total (RunningTotals, as claude's and codex's), a
    resumed session seeded from the run log (``recorded_total``) counts only
    what it adds, and a turn that reports no cost carries none."""
    totals = RunningTotals()
    shares: list[float | None] = []
    for cost in (0.25, 0.75, None):
        translator = AcpTranslator()
        translator.totals = totals
        if cost is not None:
            translator.translate(_cost_update(cost))
        shares += _costs(translator.translate({"id": 3, "result": {"stopReason": "end_turn"}}))
    assert shares == [pytest.approx(0.25), pytest.approx(0.5)]
    # a new process resuming s-2, which the run log says cost 1.0 so far
    resumed = AcpTranslator()
    resumed.totals = totals
    totals.seed(resumed.running_cli or "", "s-2", resumed.recorded_total(1.0, {}))
    resumed.translate(_cost_update(1.5, "s-2"))
    answer = resumed.translate({"id": 4, "result": {"stopReason": "end_turn"}})
    assert _costs(answer) == [pytest.approx(0.5)]


def test_an_update_while_no_prompt_runs_is_a_turn_of_the_agents_own() -> None:
    """After the prompt's answer, an update of the agent's work ends a turn of its
    own (marked for the translator, whose flush is that turn's usage and
    result); news of its state (commands, modes) ends nothing."""
    p = protocol()
    opened(p)
    p.begin_turn("hi")
    p.receive({"jsonrpc": "2.0", "id": 4, "result": {"stopReason": "end_turn"}})
    news = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s-1",
            "update": {"sessionUpdate": "available_commands_update", "availableCommands": []},
        },
    }
    assert p.receive(news) == (FORWARD,)
    chunk = {
        "jsonrpc": "2.0",
        "method": "session/update",
        "params": {
            "sessionId": "s-1",
            "update": {"sessionUpdate": "agent_message_chunk", "content": {"text": "more"}},
        },
    }
    forward, ended = p.receive(chunk)
    assert isinstance(forward, Forward) and forward.obj is not None and ended == TurnEnded()
    translator = AcpTranslator()
    translator.totals = RunningTotals()
    assert list(translator.translate(dict(forward.obj))) == []  # whole at the turn's end
    (late, _) = p.receive(_cost_update(0.5))
    assert isinstance(late, Forward) and late.obj is not None
    translator.translate(dict(late.obj))
    text, *usage, result = translator.flush()
    assert text == TextEvent("more")
    assert _costs(usage) == [pytest.approx(0.5)]
    assert isinstance(result, ResultEvent) and not result.is_error and result.text == "more"
    assert not translator.flush()  # once
    # during a prompt, the same update is the prompt's, and ends nothing
    p.begin_turn("again")
    assert p.receive(chunk) == (FORWARD,)


def test_requests_acp_cannot_read_whole_are_unreadable() -> None:
    """What a tool call touches must be read whole, else it is denied before any
    approver is asked (``unreadable``), as on every backend."""

    def ask(kind: object, **call: Any) -> Any:
        return acp_request({"toolCallId": "t", "kind": kind, **call}, "s-1")

    assert ask("edit", rawInput={"file_path": "a"}).unreadable is None
    assert ask("edit", rawInput={"file_path": "a"}).paths == ("a",)
    assert "not a path" in (ask("edit", rawInput={"file_path": 5}).unreadable or "")
    assert "not a path" in (ask("edit", locations=[{"path": ["a"]}]).unreadable or "")
    assert "names no path" in (ask("delete").unreadable or "")
    assert "kind ACP does not name" in (ask("teleport").unreadable or "")
    assert "kind ACP does not name" in (ask(7).unreadable or "")
    assert "names no command" in (ask("execute").unreadable or "")
    moved = ask("move", rawInput={"from": "a", "to": "b"})
    assert moved.unreadable is None and moved.moves == (("a", "b"),)
    assert moved.paths == ("a", "b")
    assert "cannot be told" in (ask("move", locations=[{"path": "a"}]).unreadable or "")
    # a read's odd location is no write: it is asked as a read
    assert ask("read", locations=[{"line": 3}]).unreadable is None
    assert ask("think").kind == "other" and ask("think").unreadable is None


def test_a_line_too_deep_to_parse_is_answered_from_its_envelope() -> None:
    p = protocol()
    opened(p)
    p.begin_turn("hi")
    head = UnparsedLine(
        {
            ("jsonrpc",): "2.0",
            ("id",): 0,
            ("method",): "session/request_permission",
            ("params", "sessionId"): "s-1",
            ("params", "toolCall", "toolCallId"): "t9",
            ("params", "toolCall", "title"): "deep",
        }
    )
    (ask,) = p.unparsed(head)
    assert isinstance(ask, PermissionAsk) and ask.request.unreadable
    assert ask.request.tool == "deep" and ask.request.tool_call_id == "t9"
    assert p.answer(ask, Decision.deny("unread")) == [
        {"jsonrpc": "2.0", "id": 0, "result": {"outcome": {"outcome": "cancelled"}}}
    ]
    other = UnparsedLine({("id",): 5, ("method",): "fs/read_text_file"})
    (reply,) = p.unparsed(other)
    assert isinstance(reply, Reply) and reply.objects[0]["error"]["code"] == -32602
    answer = UnparsedLine({("jsonrpc",): "2.0", ("id",): 4})
    assert p.unparsed(UnparsedLine(answer.fields, whole=False)) == ()  # garbled: ends nothing
    (ended,) = p.unparsed(answer)
    assert isinstance(ended, TurnEnded) and ended.how == "failed"


def test_thoughts_and_plans_are_typed_events() -> None:
    """A thought's ``agent_thought_chunk``s are one ThoughtEvent (no part of the answer), ``plan`` a
    PlanEvent of the whole plan (each entry's content, priority and status);
    both read back from their dicts (events.jsonl)."""
    translator = AcpTranslator()

    def update(**fields: Any) -> dict[str, Any]:
        return {"method": "session/update", "params": {"sessionId": "s", "update": fields}}

    for piece in ("hm", "m"):  # one thought in two chunks: one event, at the next update
        assert not translator.translate(
            update(sessionUpdate="agent_thought_chunk", content={"type": "text", "text": piece})
        )
    entries = [
        {"content": "read", "priority": "high", "status": "pending", "_meta": {"x": 1}},
        {"priority": "low"},  # no content: no entry
    ]
    (thought, plan) = translator.translate(update(sessionUpdate="plan", entries=entries))
    assert thought == ThoughtEvent("hmm")
    assert plan == PlanEvent([{"content": "read", "priority": "high", "status": "pending"}])
    assert not translator.translate(update(sessionUpdate="agent_thought_chunk", content={}))
    for event in (thought, plan):
        assert event_from_dict(event.to_dict()) == event
    *_, result = translator.translate({"id": 3, "result": {"stopReason": "end_turn"}})
    assert isinstance(result, ResultEvent) and result.text is None  # a thought is no answer
    assert not result.is_error  # something was said: no hidden error


def test_session_meta_tells_the_agent_which_settings_to_read() -> None:
    """An agent told by ``_meta`` (claude-agent-acp's ``claudeCode.options``) gets
    ``setting_sources=``, else the backend's default, in session/new and session/load
    (valid by the schema); an agent without ``session_meta`` gets no ``_meta``."""
    template = {
        "claudeCode": {
            "options": {
                "settingSources": "{setting_sources}",
                "strictMcpConfig": "{without_project}",
                "kept": ["as", 1],
            }
        }
    }
    told = AcpAgent("claude-acp", session_meta=template, settings_default=("user",))
    for sources, strict in ((None, True), (("user", "project", "local"), False)):
        for resume in (None, "s-0"):
            p = protocol(told)
            p.can_load = True
            written = opened(p, cli_request(cwd="/srv", resume=resume, setting_sources=sources))
            (new,) = [o for o in written if o["method"] in ("session/new", "session/load")]
            options = new["params"]["_meta"]["claudeCode"]["options"]
            assert options == {
                "settingSources": list(sources or ("user",)),
                "strictMcpConfig": strict,
                "kept": ["as", 1],
            }
            assert written_problems(new, {}) == [], new
    assert "_meta" not in opened(protocol())[1]["params"]


@pytest.mark.parametrize(
    ("entry", "says"),
    [
        ({"setting_sources": [["user"], ["user", "project"]]}, 'no "{setting_sources}"'),
        ({"session_meta": {"m": "{setting_sources}"}}, "lists no setting_sources"),
        ({"setting_sources": [["user", "project"]], "default_setting_sources": ["user"]}, "one of"),
        ({"setting_sources": [["user", "nowhere"]]}, "setting_sources must name"),
        ({"session_meta": ["x"]}, "session_meta must be a table"),
    ],
)
def test_an_entrys_settings_fields_are_checked_together(entry: dict[str, Any], says: str) -> None:
    """A claim that the agent honors ``setting_sources=`` needs the ``_meta`` saying it."""
    from coding_genesis.backends.acp_generic import AcpBackend
    from coding_genesis.errors import ConfigError

    with pytest.raises(ConfigError, match=re.escape(says)):
        AcpBackend("x", command=["x"], **entry)


def test_an_approver_is_refused_where_the_project_is_always_read() -> None:
    """Security: a backend that cannot be told not to read the working directory's
    settings (codex-acp trusts it) takes an approver only with ``setting_sources=``
    naming the project: what a repository puts there would act behind it."""
    from coding_genesis.backends.acp_generic import AcpBackend
    from coding_genesis.capabilities import check
    from coding_genesis.request import RequestSettings

    always = AcpBackend(
        "codex-acp",
        command=["x"],
        setting_sources=[["user", "project"]],
        default_setting_sources=["user", "project"],
    )
    refused = check(always, RequestSettings(approver=lambda r: True))
    assert refused is not None and refused.option == "approver", refused
    assert "working directory's own settings" in refused.message
    assert "setting_sources=('user', 'project')" in refused.message
    knowingly = RequestSettings(approver=lambda r: True, setting_sources=("user", "project"))
    assert check(always, knowingly) is None
    assert check(always, RequestSettings()) is None  # no approver: nothing behind one
    told = AcpBackend(
        "told",
        command=["x"],
        setting_sources=[["user"], ["user", "project"]],
        default_setting_sources=["user"],
        session_meta={"s": "{setting_sources}"},
    )
    assert check(told, RequestSettings(approver=lambda r: True)) is None


def test_a_messages_chunks_are_one_text_event_and_deltas_only_with_partial() -> None:
    """One TextEvent per message (chunks joined, given when something else comes or
    the turn ends); with ``partial`` each chunk is a TextDeltaEvent as it comes, and
    a thought's chunks ThoughtDeltaEvents, apart."""

    def chunk(kind: str, text: str, message: str = "m1") -> dict[str, Any]:
        content = {"type": "text", "text": text}
        fields = {"sessionUpdate": kind, "content": content, "messageId": message}
        return {"method": "session/update", "params": {"sessionId": "s", "update": fields}}

    for partial in (False, True):
        translator = AcpTranslator(partial=partial)
        translator.totals = RunningTotals()
        events: list[Event] = []
        for obj in (
            chunk("agent_thought_chunk", "let me ", "t1"),
            chunk("agent_thought_chunk", "see", "t1"),
            chunk("agent_message_chunk", "Hel"),
            _cost_update(0.1, "s"),  # says nothing of the conversation: the message goes on
            chunk("agent_message_chunk", "lo "),
            chunk("agent_message_chunk", "there"),
            chunk("agent_message_chunk", "Second", "m2"),
        ):
            events += translator.translate(obj)
        events += translator.translate({"id": 3, "result": {"stopReason": "end_turn"}})
        whole = [e for e in events if type(e) in (TextEvent, ThoughtEvent)]
        assert whole == [ThoughtEvent("let me see"), TextEvent("Hello there"), TextEvent("Second")]
        deltas = [
            (type(e).__name__, e.text)
            for e in events
            if isinstance(e, TextDeltaEvent | ThoughtDeltaEvent)
        ]
        expected = [
            ("ThoughtDeltaEvent", "let me "),
            ("ThoughtDeltaEvent", "see"),
            ("TextDeltaEvent", "Hel"),
            ("TextDeltaEvent", "lo "),
            ("TextDeltaEvent", "there"),
            ("TextDeltaEvent", "Second"),
        ]
        assert deltas == (expected if partial else [])
        result = events[-1]
        assert isinstance(result, ResultEvent) and result.text == "Second"
