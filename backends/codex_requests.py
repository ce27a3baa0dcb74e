"""What codex's app-server asks of and tells about the caller's MCP servers
(``mcp_servers=``), beside :mod:`.codex_control`.

The servers reach codex in ``thread/start``'s ``config`` (over stdin: their
``env`` never in argv).  Measured on codex 0.169 against the fake model
server: with ``approvalPolicy: "never"`` (no approver) codex refuses the
model's call of an MCP tool its server did not mark read-only ("MCP tool call
requires approval, but approval policy is never"), which is why a configured
server's tool was never reached; each of the caller's servers is therefore
declared with ``default_tools_approval_mode = "approve"`` (the caller named
the server: its tools run).  With an approver (``untrusted``) codex asks
through the server request ``mcpServer/elicitation/request`` whose
``_meta.codex_approval_kind`` is ``"mcp_tool_call"``: that becomes a
:class:`~coding_genesis.control.PermissionAsk` (tool ``mcp__<server>__<tool>``,
kind ``other``) answered ``{"action": "accept" | "decline"}``.

``mcpServer/startupStatus/updated`` becomes an
:class:`~coding_genesis.events.McpServerEvent` (in the translator).

The CLI's questions to the user (``asker=``): the model's ``request_user_input``
tool (offered by 0.169 outside plan mode only with the feature
``default_mode_request_user_input``, set in the thread's config when there is
an asker: measured) reaches us as the server
request ``item/tool/requestUserInput``, each of its questions asked on its own
and answered together (``{answers: {id: {answers: [...]}}}``; nobody answering:
the words telling the model so, as the answer); an elicitation that is no
approval is asked as a question too (accepted with the answer in its form's one
field, else declined).
"""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coding_genesis.approval import ApprovalRequest
from coding_genesis.questions import UserQuestion
from coding_genesis.request import Request

from ._questions import Gathered, labelled_question

__all__ = [
    "ELICITATION",
    "USER_INPUT",
    "mcp_approval",
    "mcp_thread_config",
    "thread_config",
    "user_input_answer",
    "user_input_questions",
]

#: codex's server request of the model's question to the user.
USER_INPUT = "item/tool/requestUserInput"

#: codex's server request of an MCP elicitation (an approval of an MCP tool call among them).
ELICITATION = "mcpServer/elicitation/request"


def thread_config(start: Request) -> dict[str, Any]:
    """What ``thread/start``'s ``config`` carries for the caller's MCP servers
    and asker: the servers, and, with an asker, the feature that offers the
    model ``request_user_input`` outside plan mode (0.169 answers the call
    "request_user_input is unavailable in Default mode" otherwise: measured)."""
    config = mcp_thread_config(start)
    if start.asker is not None:
        config["features"] = {"default_mode_request_user_input": True}
    return config


def mcp_thread_config(start: Request) -> dict[str, Any]:
    """The caller's MCP servers as ``thread/start``'s ``config.mcp_servers``."""
    servers: dict[str, Any] = {}
    for name, spec in start.mcp_servers.items():
        entry: dict[str, Any] = (
            {"url": spec.url}
            if spec.url is not None
            else {"command": spec.command, "args": list(spec.args), "env": dict(spec.env)}
        )
        if start.approver is None:
            entry["default_tools_approval_mode"] = "approve"
        servers[name] = entry
    return {"mcp_servers": servers} if servers else {}


def mcp_approval(
    params: Mapping[str, Any], tool: tuple[str, str] | None, common: Mapping[str, Any]
) -> ApprovalRequest | None:
    """The approval an ``mcpServer/elicitation/request`` asks for (None: it
    is no approval of an MCP tool call, but a question of the server's):
    ``tool`` is the (server, tool) of the ``mcpToolCall`` item that started
    last, when codex announced one."""
    meta = params.get("_meta")
    if not isinstance(meta, Mapping) or meta.get("codex_approval_kind") != "mcp_tool_call":
        return None
    server = params.get("serverName")
    server = server if isinstance(server, str) else (tool[0] if tool else "?")
    name = tool[1] if tool is not None and tool[0] == server else "?"
    message = params.get("message")
    return ApprovalRequest(
        f"mcp__{server}__{name}",
        dict(params),
        kind="other",
        **{**common, "reason": message if isinstance(message, str) else common.get("reason")},
    )


def user_input_questions(params: Mapping[str, Any]) -> list[tuple[str, UserQuestion]]:
    """The questions of a ``requestUserInput`` by their ids (none: unreadable)."""
    found: list[tuple[str, UserQuestion]] = []
    raw = params.get("questions")
    for item in raw if isinstance(raw, list) else ():
        question = labelled_question(item)
        if question is None or not isinstance(item.get("id"), str):
            return []
        found.append((item["id"], question))
    return found


def user_input_answer(gathered: Gathered) -> dict[str, Any]:
    """``requestUserInput``'s answer: each question's answer by its id (what
    the model reads instead, where nobody answered)."""
    ids: list[str] = gathered.payload
    return {
        "answers": {
            ident: {"answers": [gathered.answers.get(i) or gathered.refusals.get(i, "")]}
            for i, ident in enumerate(ids)
        }
    }
