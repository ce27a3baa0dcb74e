"""``mcp_servers=``: the caller's MCP servers declared to each CLI that takes
them (claude's ``--mcp-config`` in the private overlay, codex's thread config,
ACP's ``session/new``), refused in the check's words elsewhere, their status
as events and in the result, their env's secrets masked (issue 41, §9)."""

from __future__ import annotations

import json
from typing import Any

import pytest

from coding_genesis import CodingGenesisAgent
from coding_genesis._pipeline.run import run_redactor
from coding_genesis.approval import Decision
from coding_genesis.backend import CommandSpec
from coding_genesis.backends import ClaudeBackend
from coding_genesis.backends.acp import AcpAgent, AcpControl
from coding_genesis.backends.claude import ClaudeTranslator
from coding_genesis.backends.codex_control import CodexControl
from coding_genesis.backends.codex_events import AppServerTranslator
from coding_genesis.capabilities import check, untrusted_problem
from coding_genesis.config import AgentConfig
from coding_genesis.control import PermissionAsk, ProtocolFault, QuestionAsked, Reply
from coding_genesis.errors import ConfigError, RefusedError
from coding_genesis.events import McpServerEvent
from coding_genesis.questions import NO_ONE_ANSWERS
from coding_genesis.tools import McpServerSpec, as_mcp_servers
from tests.support import cli_request

SECRET = "sk-mcp-0123456789abcdef"
SERVERS = {
    "srv": McpServerSpec("python3", ("server.py", "srv"), {"SRV_API_TOKEN": SECRET}),
    "web": McpServerSpec(url="https://mcp.example/x"),
}


def request(**fields: Any) -> Any:
    return cli_request(cwd="/w", mcp_servers=as_mcp_servers(SERVERS), **fields)


@pytest.mark.parametrize(
    ("value", "words"),
    [
        ({"genesis": {"command": "x"}}, "the session's own"),
        ({"a b": {"command": "x"}}, "bad server name"),
        ({"s": {"command": "x", "url": "https://h"}}, "either a command or a url"),
        ({"s": {}}, "either a command or a url"),
        ({"s": {"url": "file:///etc/passwd"}}, "http(s) URL"),
        ({"s": {"command": "x", "env": {"A": 1}}}, "env must map"),
        ({"s": {"command": "x", "args": "one"}}, "args must be a list"),
        ({"s": {"command": "x", "cwd": "/"}}, "unknown key(s) cwd"),
        (["srv"], "must map names to servers"),
    ],
)
def test_a_bad_server_is_a_clear_error(value: Any, words: str) -> None:
    with pytest.raises(ConfigError) as caught:
        as_mcp_servers(value)
    assert words in str(caught.value)


def test_a_specs_repr_never_shows_its_env_values() -> None:
    assert SECRET not in repr(SERVERS["srv"]) and "SRV_API_TOKEN" in repr(SERVERS["srv"])


def test_claude_reads_them_from_a_private_overlay_file_never_argv() -> None:
    spec = ClaudeBackend().build_command(request())
    assert not any(SECRET in arg for arg in spec.args)
    assert "--mcp-config={overlay}/mcp-servers.json" in spec.args
    assert "--allowedTools=mcp__srv,mcp__web" in spec.args  # -p would refuse them
    config = json.loads(spec.overlay["mcp-servers.json"])
    assert config == {
        "mcpServers": {
            "srv": {
                "command": "python3",
                "args": ["server.py", "srv"],
                "env": {"SRV_API_TOKEN": SECRET},
            },
            "web": {"type": "http", "url": "https://mcp.example/x"},
        }
    }
    asked = ClaudeBackend().build_command(request(approvals=True))
    assert not any(arg.startswith("--allowedTools=mcp__srv") for arg in asked.args)  # it decides


def test_codex_gets_them_in_the_thread_config_approved_without_an_approver() -> None:
    for approvals, mode in ((False, {"default_tools_approval_mode": "approve"}), (True, {})):
        protocol = CodexControl()
        protocol.begin(request(approvals=approvals))
        params = protocol._thread_params(protocol.request)  # type: ignore[arg-type]
        assert params["config"]["mcp_servers"] == {
            "srv": {
                "command": "python3",
                "args": ["server.py", "srv"],
                "env": {"SRV_API_TOKEN": SECRET},
                **mode,
            },
            "web": {"url": "https://mcp.example/x", **mode},
        }


def elicitation(rid: int, **meta: Any) -> dict[str, Any]:
    params = {
        "serverName": "srv",
        "threadId": "",
        "message": "Allow echo?",
        "mode": "form",
        "requestedSchema": {"type": "object", "properties": {}},
    }
    if meta:
        params["_meta"] = meta
    return {
        "jsonrpc": "2.0",
        "id": rid,
        "method": "mcpServer/elicitation/request",
        "params": params,
    }


def test_codex_asks_the_approver_about_an_mcp_tool_call_and_answers_with_an_action() -> None:
    protocol = CodexControl()
    protocol.begin(request(approvals=True))
    started = {"type": "mcpToolCall", "id": "m1", "server": "srv", "tool": "echo"}
    protocol.receive({"jsonrpc": "2.0", "method": "item/started", "params": {"item": started}})
    answers = {}
    for rid, allowed in ((7, True), (8, False)):
        (ask,) = protocol.receive(elicitation(rid, codex_approval_kind="mcp_tool_call"))
        assert isinstance(ask, PermissionAsk)
        assert ask.request.tool == "mcp__srv__echo" and ask.request.kind == "other"
        decision = Decision.allow() if allowed else Decision.deny("no")
        (answer,) = protocol.answer(ask, decision)
        answers[rid] = answer["result"]
        assert protocol.answer(ask, decision) == []  # once
    assert answers == {7: {"action": "accept"}, 8: {"action": "decline"}}
    # an elicitation that is no approval is the server's question to the user
    (asked,) = protocol.receive(elicitation(9))
    assert isinstance(asked, QuestionAsked) and asked.question.kind == "elicitation"
    assert asked.question.server == "srv" and asked.question.text == "Allow echo?"
    (answer,) = protocol.answer_question(asked, None, NO_ONE_ANSWERS)
    assert answer == {"jsonrpc": "2.0", "id": 9, "result": {"action": "decline"}}


def test_their_status_is_an_event_on_both_clis() -> None:
    codex = AppServerTranslator().translate(
        {
            "method": "mcpServer/startupStatus/updated",
            "params": {"name": "srv", "status": "failed", "error": "boom"},
        }
    )
    assert [(e.name, e.status, e.error) for e in codex if isinstance(e, McpServerEvent)] == [
        ("srv", "failed", "boom")
    ]
    init = {
        "type": "system",
        "subtype": "init",
        "session_id": "s",
        "mcp_servers": [{"name": "srv", "status": "connected"}, {"bad": 1}],
    }
    claude = ClaudeTranslator().translate(init)
    assert [(e.name, e.status) for e in claude if isinstance(e, McpServerEvent)] == [
        ("srv", "connected")
    ]


def acp_opened(start: Any, capabilities: dict[str, Any]) -> Any:
    protocol = AcpControl(AcpAgent("generic"), lambda start: CommandSpec(args=("--acp",)))
    protocol.begin(start)
    (reply,) = protocol.receive(
        {
            "jsonrpc": "2.0",
            "id": 1,
            "result": {"protocolVersion": 1, "agentCapabilities": capabilities},
        }
    )
    return reply


def test_an_acp_agent_gets_them_in_session_new_http_only_where_it_says_it_can() -> None:
    reply = acp_opened(request(), {"mcpCapabilities": {"http": True}})
    assert isinstance(reply, Reply)
    assert reply.objects[0]["params"]["mcpServers"] == [
        {
            "name": "srv",
            "command": "python3",
            "args": ["server.py", "srv"],
            "env": [{"name": "SRV_API_TOKEN", "value": SECRET}],
        },
        {"type": "http", "name": "web", "url": "https://mcp.example/x", "headers": []},
    ]
    fault = acp_opened(request(), {})
    assert isinstance(fault, ProtocolFault) and fault.fatal
    assert "takes no HTTP MCP server" in fault.message


def test_a_backend_that_cannot_take_them_is_refused_in_the_checks_words() -> None:
    with pytest.raises(RefusedError) as caught:
        CodingGenesisAgent("failer", mcp_servers={"srv": {"command": "x"}})
    assert "backend 'failer' cannot be given MCP servers, which mcp_servers= needs" in str(
        caught.value
    )
    assert "backends that can: claude, codex" in str(caught.value)
    for backend in ("claude", "codex", "gemini"):
        agent = CodingGenesisAgent(backend, mcp_servers=SERVERS)
        assert check(agent.backend, agent.config) is None


def test_a_codex_run_with_them_runs_live_a_claude_run_need_not() -> None:
    assert CodingGenesisAgent("codex").backend.runs_live(request())
    assert not CodingGenesisAgent("claude").backend.runs_live(request())


def test_untrusted_input_may_not_name_a_server() -> None:
    problem = untrusted_problem({"prompt": "p", "mcp_servers": {"s": {"command": "sh"}}})
    assert problem is not None and "mcp_servers" in problem
    assert untrusted_problem({"mcp_servers": {}}, trusted=True) is None


def test_their_env_secrets_join_the_runs_redactor() -> None:
    config = AgentConfig(backend="claude", mcp_servers=SERVERS)
    assert run_redactor(config).text(f"token {SECRET}") == "token [REDACTED]"
