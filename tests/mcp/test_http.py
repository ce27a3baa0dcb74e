"""``/mcp`` on ``genesis serve``: the same tools over streamable HTTP, on the
server's own runs, sessions and approval inbox, behind its door (the token,
the Host and Origin checks)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import anyio
import pytest
from mcp.shared.exceptions import MCPError

pytest.importorskip("fastapi", reason="genesis serve needs the serve extra (fastapi)")

from tests.mcp.support import TOOLS, Progress, over_http, structured, text
from tests.serve.support import Served, serving

INIT = {
    "jsonrpc": "2.0",
    "id": 1,
    "method": "initialize",
    "params": {
        "protocolVersion": "2025-06-18",
        "capabilities": {},
        "clientInfo": {"name": "t", "version": "1"},
    },
}
ACCEPT = {"Accept": "application/json, text/event-stream"}


@pytest.fixture(scope="module")
def served(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Served]:
    tmp: Path = tmp_path_factory.mktemp("serve-mcp")
    with serving(tmp, "--concurrency", "2") as server:
        yield server


def test_the_tools_over_http_run_the_failer_with_progress(served: Served) -> None:
    async def scenario() -> None:
        async with over_http(served) as session:
            assert [t.name for t in (await session.list_tools()).tools] == TOOLS
            progress = Progress()
            failed = structured(
                await session.call_tool("run", {"prompt": "/fail"}, progress_callback=progress)
            )
            assert failed["result"]["status"] == 1 and failed["source"] == "api"
            assert "run_started" in progress.messages and "result" in progress.messages
            refused = await session.call_tool("run", {"prompt": "hi", "cli_path": "/bin/sh"})
            assert refused.is_error and "refused field(s) cli_path" in text(refused)
            # one history: the run started through MCP is the server's, over HTTP too
            assert any(r["id"] == failed["id"] for r in served_runs(served))

    anyio.run(scenario)


def served_runs(served: Served) -> list[dict[str, object]]:
    with served.client() as client:
        runs: list[dict[str, object]] = client.get("/runs").json()["runs"]
        return runs


def test_approvals_of_a_run_over_mcp_are_in_the_servers_inbox(served: Served) -> None:
    async def scenario() -> None:
        async with over_http(served) as session:
            started = structured(
                await session.call_tool(
                    "run", {"prompt": "/bash echo via-mcp", "approvals": "inbox", "wait": False}
                )
            )
            with served.client() as client:
                for _ in range(600):
                    listed = client.get("/approvals", params={"run": started["id"]}).json()
                    if listed["approvals"]:
                        break
                    await anyio.sleep(0.05)
            asked = listed["approvals"][0]
            assert asked["call"]["command"] == "echo via-mcp"
            mine = structured(await session.call_tool("list_approvals", {"run": started["id"]}))
            assert [a["id"] for a in mine["approvals"]] == [asked["id"]]
            structured(
                await session.call_tool(
                    "answer_approval", {"approval": asked["id"], "decision": "allow"}
                )
            )
            done = structured(
                await session.call_tool("get_run", {"run": started["id"], "wait": 30})
            )
            assert done["result"]["status"] == 0

    anyio.run(scenario)


def test_a_session_over_http_mcp(served: Served) -> None:
    async def scenario() -> None:
        async with over_http(served) as session:
            opened = structured(
                await session.call_tool("open_session", {"backend": "failer", "approvals": "none"})
            )
            turn = structured(
                await session.call_tool("send_turn", {"session": opened["id"], "prompt": "hi"})
            )
            assert turn["status"] == 0
            with served.client() as client:
                assert client.get(f"/sessions/{opened['id']}").json()["turn_count"] == 1
            closed = structured(await session.call_tool("close_session", {"session": opened["id"]}))
            assert closed["state"] == "closed"

    anyio.run(scenario)


def test_the_mcp_route_is_behind_the_servers_door(served: Served) -> None:
    with served.anonymous() as anonymous:
        refused = anonymous.post("/mcp", json=INIT, headers=ACCEPT)
        assert refused.status_code == 401, refused.text
        wrong = anonymous.post(
            "/mcp", json=INIT, headers={**ACCEPT, "Authorization": "Bearer not-the-token"}
        )
        assert wrong.status_code == 401
    with served.client() as client:
        rebound = client.post("/mcp", json=INIT, headers={**ACCEPT, "Host": "evil.example:80"})
        assert rebound.status_code in (403, 421), rebound.text
        foreign = client.post(
            "/mcp", json=INIT, headers={**ACCEPT, "Origin": "http://evil.example"}
        )
        assert foreign.status_code == 403, foreign.text
        taken = client.post("/mcp", json=INIT, headers=ACCEPT)
        assert taken.status_code == 200, taken.text

    async def with_a_wrong_token() -> None:
        async with over_http(served, token="x" * 43):
            pass

    # The mcp client turns the server's refusal (the 401 above) into an MCPError
    # "Server returned an error response", inside its task groups' error group.
    with pytest.raises(BaseException) as raised:  # noqa: PT011  (its leaves are asserted below)
        anyio.run(with_a_wrong_token)
    leaves = _leaves(raised.value)
    assert leaves and all(
        isinstance(leaf, MCPError) and "error response" in str(leaf) for leaf in leaves
    ), repr(raised.value)


def _leaves(exc: BaseException) -> list[BaseException]:
    """The errors an exception group holds, at any depth (or ``exc`` itself)."""
    if isinstance(exc, BaseExceptionGroup):
        return [leaf for inner in exc.exceptions for leaf in _leaves(inner)]
    return [exc]
