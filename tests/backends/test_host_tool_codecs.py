"""Host tools (``tools=``) in claude's and codex's codecs: how each declares the caller's
functions, reads the model's call and writes our answer.

The message shapes are those the real CLIs sent and accepted (claude 2.1.330, codex 0.169;
``tests/real_cli/test_host_tools.py`` drives them); what the codex codec writes is checked
against the committed schema.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

import pytest
from hypothesis import given, settings, strategies as st

from coding_genesis.approval import Decision
from coding_genesis.backend import CommandSpec, Translator
from coding_genesis.backends import CodexBackend
from coding_genesis.backends.claude import ClaudeBackend
from coding_genesis.backends.claude_control import MCP_SERVER, ClaudeControl
from coding_genesis.backends.codex_control import NOT_SERVED, CodexControl
from coding_genesis.control import (
    ControlProtocol,
    Incoming,
    Outgoing,
    PermissionAsk,
    Ready,
    Reply,
    ToolCall,
)
from coding_genesis.request import Request
from coding_genesis.tools import ToolResult, tool
from tests.backends.schema_lite import load, problems
from tests.backends.test_codex_control import SCHEMAS
from tests.support import cli_request


@tool
def add(a: int, b: int = 1) -> int:
    """Add two numbers."""
    return a + b


START = cli_request(cwd="/w", tools=(add,))


def only(meanings: Any, kind: type) -> Any:
    assert len(meanings) == 1 and isinstance(meanings[0], kind), meanings
    return meanings[0]


# -- claude: an SDK MCP server over the control protocol -------------------------------


def claude(start: Request = START, approvals: bool = False) -> ClaudeControl:
    proto = ClaudeBackend().control()
    start = cli_request(cwd=start.cwd, tools=start.tools, approvals=approvals)
    begun = proto.begin(start)
    (given,) = [a.split("=", 1)[1] for a in begun.command.args if a.startswith("--session-id=")]
    (init,) = begun.greeting
    ok = {"subtype": "success", "request_id": init["request_id"], "response": {}}
    assert proto.receive({"type": "control_response", "response": ok}) == (Ready(given),)
    proto.begin_turn("go")
    return proto


def mcp(rid: str, message: dict[str, Any], server: Any = MCP_SERVER) -> dict[str, Any]:
    request = {"subtype": "mcp_message", "server_name": server, "message": message}
    return {"type": "control_request", "request_id": rid, "request": request}


def mcp_answer(meanings: Any) -> dict[str, Any]:
    (obj,) = only(meanings, Reply).objects
    assert obj["type"] == "control_response" and obj["response"]["subtype"] == "success"
    answer: dict[str, Any] = obj["response"]["response"]["mcp_response"]
    return answer


def test_claude_is_started_with_the_sdk_server_and_each_tool_allowed() -> None:
    proto = ClaudeBackend().control()
    assert proto.can_host_tools
    spec = proto.command(START)
    i = spec.args.index("--mcp-config")
    assert json.loads(spec.args[i + 1]) == {
        "mcpServers": {"genesis": {"type": "sdk", "name": "genesis"}}
    }
    assert "--allowedTools=mcp__genesis__add" in spec.args
    with_args = proto.command(cli_request(cwd="/w", tools=(add,), extra_args=("--x",)))
    assert with_args.args[-1] == "--x"  # the caller's own arguments stay last
    plain = ClaudeBackend().control().command(cli_request(cwd="/w"))
    assert "--mcp-config" not in plain.args


def test_claude_handshake_and_listing_are_answered_by_the_codec() -> None:
    proto = claude()
    init = {"method": "initialize", "params": {"protocolVersion": "2025-11-25"}, "id": 0}
    answer = mcp_answer(proto.receive(mcp("a", {**init, "jsonrpc": "2.0"})))
    assert answer["id"] == 0 and answer["result"]["protocolVersion"] == "2025-11-25"
    assert answer["result"]["capabilities"] == {"tools": {}}
    ack = proto.receive(mcp("b", {"jsonrpc": "2.0", "method": "notifications/initialized"}))
    assert mcp_answer(ack) == {"jsonrpc": "2.0", "result": {}}
    listing = mcp_answer(proto.receive(mcp("c", {"method": "tools/list", "id": 1})))
    (listed,) = listing["result"]["tools"]
    assert listed == {
        "name": "add",
        "description": "Add two numbers.",
        "inputSchema": dict(add.parameters),
        "_meta": {"anthropic/alwaysLoad": True},  # not deferred behind claude's tool search
    }
    assert mcp_answer(proto.receive(mcp("d", {"method": "ping", "id": 2})))["result"] == {}


def test_claude_tools_call_becomes_a_tool_call_and_its_answer() -> None:
    proto = claude()
    params = {"name": "add", "arguments": {"a": 2}, "_meta": {"claudecode/toolUseId": "toolu_9"}}
    call = only(
        proto.receive(mcp("r1", {"method": "tools/call", "params": params, "id": 3})), ToolCall
    )
    assert (call.name, dict(call.arguments), call.call_id, call.reported) == (
        "add",
        {"a": 2},
        "toolu_9",
        True,  # claude's tool_use and tool_result lines report it
    )
    (obj,) = proto.answer_tool(call, ToolResult("3"))
    assert obj == {
        "type": "control_response",
        "response": {
            "subtype": "success",
            "request_id": "r1",
            "response": {
                "mcp_response": {
                    "jsonrpc": "2.0",
                    "id": 3,
                    "result": {"content": [{"type": "text", "text": "3"}], "isError": False},
                }
            },
        },
    }
    assert proto.answer_tool(call, ToolResult("again")) == []  # answered once
    failed = only(
        proto.receive(mcp("r2", {"method": "tools/call", "params": params, "id": 4})), ToolCall
    )
    (err,) = proto.answer_tool(failed, ToolResult("ValueError: no", is_error=True))
    assert err["response"]["response"]["mcp_response"]["result"]["isError"] is True


def test_claude_a_cancelled_call_is_not_answered() -> None:
    proto = claude()
    params = {"name": "add", "arguments": {"a": 2}}
    call = only(
        proto.receive(mcp("r1", {"method": "tools/call", "params": params, "id": 3})), ToolCall
    )
    assert proto.receive({"type": "control_cancel_request", "request_id": "r1"}) == ()
    assert proto.answer_tool(call, ToolResult("3")) == []


@pytest.mark.parametrize("approvals", [True, False])
def test_claude_never_asks_the_approver_about_a_host_tool(approvals: bool) -> None:
    proto = claude(approvals=approvals)
    data = {"hook_event_name": "PreToolUse", "tool_name": "mcp__genesis__add", "tool_input": {}}
    hook = {"subtype": "hook_callback", "callback_id": "genesis_pre_tool_use", "input": data}
    (obj,) = only(
        proto.receive({"type": "control_request", "request_id": "h", "request": hook}), Reply
    ).objects
    assert obj["response"]["response"]["hookSpecificOutput"]["permissionDecision"] == "allow"
    ask = {"subtype": "can_use_tool", "tool_name": "mcp__genesis__add", "input": {"a": 1}}
    (obj,) = only(
        proto.receive({"type": "control_request", "request_id": "c", "request": ask}), Reply
    ).objects
    assert obj["response"]["response"] == {"behavior": "allow", "updatedInput": {"a": 1}}


@pytest.mark.parametrize(
    ("message", "server", "code"),
    [
        ({"method": "tools/list", "id": 1}, "other", -32601),
        ({"method": "resources/list", "id": 1}, MCP_SERVER, -32601),
        ({"method": "tools/call", "id": 1, "params": {"arguments": {}}}, MCP_SERVER, -32602),
        (
            {"method": "tools/call", "id": 1, "params": {"name": "add", "arguments": []}},
            MCP_SERVER,
            -32602,
        ),
    ],
)
def test_claude_mcp_messages_it_cannot_serve(
    message: dict[str, Any], server: str, code: int
) -> None:
    answer = mcp_answer(claude().receive(mcp("x", message, server)))
    assert answer["id"] == 1 and answer["error"]["code"] == code


def test_claude_without_host_tools_refuses_mcp_messages() -> None:
    proto = claude(cli_request(cwd="/w"))
    (obj,) = only(proto.receive(mcp("x", {"method": "tools/list", "id": 1})), Reply).objects
    assert obj["response"]["subtype"] == "error"


@pytest.mark.slow
@settings(max_examples=200, deadline=None)
@given(
    message=st.dictionaries(
        st.sampled_from(["method", "id", "params", "jsonrpc"]),
        st.none()
        | st.integers()
        | st.text(max_size=5)
        | st.sampled_from(["tools/call", "initialize"])
        | st.dictionaries(
            st.sampled_from(["name", "arguments", "_meta", "protocolVersion"]),
            st.none() | st.text(max_size=3) | st.just({}) | st.just([]),
        ),
        max_size=4,
    ),
    server=st.none() | st.sampled_from([MCP_SERVER, "x"]),
)
def test_claude_mcp_never_raises(message: dict[str, Any], server: Any) -> None:
    proto = claude()
    for meaning in proto.receive(mcp("x", message, server)):
        if isinstance(meaning, ToolCall):
            proto.answer_tool(meaning, ToolResult("ok"))


# -- codex: dynamic tools ----------------------------------------------------------------


def codex(start: Request = START) -> tuple[CodexControl, list[dict[str, Any]]]:
    """A codec whose thread ``t`` is open and whose turn ``u`` runs; what it wrote."""
    proto = CodexBackend().control()
    written = list(proto.begin(start).greeting)
    (reply,) = proto.receive({"id": 1, "result": {}})
    assert isinstance(reply, Reply)
    written += reply.objects
    proto.receive({"id": 2, "result": {"thread": {"id": "t"}}})
    written += proto.begin_turn("go")
    proto.receive({"method": "turn/started", "params": {"threadId": "t", "turn": {"id": "u"}}})
    return proto, written


def tool_call(rid: Any, **params: Any) -> dict[str, Any]:
    base = {"threadId": "t", "turnId": "u", "callId": "call_1", "namespace": None, "tool": "add"}
    return {
        "id": rid,
        "method": "item/tool/call",
        "params": {**base, "arguments": {"a": 2}, **params},
    }


def test_codex_declares_dynamic_tools_and_opts_into_the_experimental_api() -> None:
    proto, written = codex()
    assert proto.can_host_tools
    init, _, thread, _ = written
    assert init["params"]["capabilities"]["experimentalApi"] is True
    assert thread["params"]["dynamicTools"] == [
        {
            "type": "function",
            "name": "add",
            "description": "Add two numbers.",
            "inputSchema": dict(add.parameters),
        }
    ]
    plain_init, _, plain_thread, _ = codex(cli_request(cwd="/w"))[1]
    assert "experimentalApi" not in plain_init["params"]["capabilities"]
    assert "dynamicTools" not in plain_thread["params"]
    schema = load(SCHEMAS / "experimental" / "v2" / "ThreadStartParams.json")
    assert problems(schema, thread["params"]) == []
    assert problems(load(SCHEMAS / "v1" / "InitializeParams.json"), init["params"]) == []


def test_codex_a_resumed_thread_keeps_its_own_tools() -> None:
    _, written = codex(cli_request(cwd="/w", resume="t0", tools=(add,)))
    assert written[2]["method"] == "thread/resume"
    assert "dynamicTools" not in written[2]["params"]


def test_codex_item_tool_call_becomes_a_tool_call_and_its_answer() -> None:
    proto, _ = codex()
    recorded = tool_call(0)
    assert problems(load(SCHEMAS / "DynamicToolCallParams.json"), recorded["params"]) == []
    call = only(proto.receive(recorded), ToolCall)
    assert (call.key, call.name, dict(call.arguments), call.call_id, call.reported) == (
        0,
        "add",
        {"a": 2},
        "call_1",
        True,  # codex's dynamicToolCall items report it
    )
    response = load(SCHEMAS / "DynamicToolCallResponse.json")
    for result, success in ((ToolResult("3"), True), (ToolResult("boom", True), False)):
        (obj,) = proto.answer_tool(call, result)
        assert obj == {
            "jsonrpc": "2.0",
            "id": 0,
            "result": {
                "contentItems": [{"type": "inputText", "text": result.text}],
                "success": success,
            },
        }
        assert problems(response, obj["result"]) == []
        assert problems(load(SCHEMAS / "JSONRPCResponse.json"), obj) == []


@pytest.mark.parametrize(
    "params",
    [{"tool": 5}, {"namespace": "ns"}, {"arguments": [1]}],
    ids=["name", "namespace", "args"],
)
def test_codex_a_call_it_cannot_read_is_refused(params: dict[str, Any]) -> None:
    proto, _ = codex()
    (error,) = only(proto.receive(tool_call(7, **params)), Reply).objects
    assert error["id"] == 7 and error["error"]["code"] == -32602


def test_codex_without_host_tools_does_not_serve_tool_calls() -> None:
    proto, _ = codex(cli_request(cwd="/w"))
    (error,) = only(proto.receive(tool_call(7)), Reply).objects
    assert error["error"]["code"] == NOT_SERVED


class Bare(ControlProtocol):
    """A protocol that knows nothing of host tools (the contract's defaults)."""

    def command(self, start: Request) -> CommandSpec:
        return CommandSpec(args=())

    def translator(self) -> Translator:
        return ClaudeBackend().translator()

    def begin_turn(self, prompt: str) -> list[Outgoing]:
        return []

    def interrupt(self) -> list[Outgoing]:
        return []

    def answer(self, ask: PermissionAsk, decision: Decision) -> list[Outgoing]:
        return []

    def receive(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        return ()


def test_by_default_a_protocol_hosts_no_tools() -> None:
    assert Bare.can_host_tools is False
    with pytest.raises(NotImplementedError, match="cannot call host tools"):
        Bare().answer_tool(ToolCall(1, "add", {}), ToolResult("x"))
