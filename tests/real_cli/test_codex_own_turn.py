"""The real codex 0.169 runs a compaction (``thread/compact/start``) as a turn
of its own between ours (``turn/started`` of a new turn id, a
``contextCompaction`` item, ``turn/completed``): the session takes it as the
CLI's turn (``trigger="cli"``), which ends, and the next ``send()`` runs after
it.  Before the fix its ``turn/started`` was ignored and its end dropped.  The
compaction is asked through the codec's own request table (a test's shortcut:
``session.compact()`` is issue 41's next package)."""

from __future__ import annotations

from typing import Any

import anyio
import anyio.lowlevel
import pytest

from coding_genesis.backends.codex_control import CodexControl
from tests.real_cli.test_claude_codex import Rig, codex_rig
from tests.real_cli.test_sessions import session_agent

__all__ = ["codex_rig"]

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]


async def test_codexs_compaction_turn_is_the_clis_turn_and_ends(codex_rig: Rig) -> None:
    agent = session_agent(codex_rig)
    async with agent.session() as session:
        first = await session.send_result("hello")
        assert first.status == 0, first.message
        link: Any = session._link
        protocol = link.protocol
        assert isinstance(protocol, CodexControl) and protocol.thread_id
        results: list[Any] = []
        with anyio.fail_after(30):
            async with anyio.create_task_group() as tg:

                async def own() -> None:
                    results.append(await session.cli_turn())

                tg.start_soon(own)
                await anyio.lowlevel.checkpoint()
                link.send(protocol._call("thread/compact/start", {"threadId": protocol.thread_id}))
        (compacted,) = results
        assert compacted.trigger == "cli" and compacted.status == 0, compacted.message
        after = await session.send_result("hello again")
        assert after.status == 0, after.message
        assert [r.trigger for r in session.results] == ["user", "cli", "user"]
