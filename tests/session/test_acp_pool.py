"""A warm session pool over the Agent Client Protocol, against the fake ACP agent
(``tests/fakes/fake_acp.py``) in each flavour and through the generic ACP backend of a
backends file: each pooled conversation is a process of its own (``initialize`` +
``session/new`` opened before the prompt arrives), so nothing one caller said reaches
the next, and nothing is left once the pool closes."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from coding_genesis import (
    RunSpec,
    SessionPool,
    SyncSessionPool,
    load_backends_file,
    run_many,
)
from coding_genesis.errors import AgentUsageError
from tests.session.test_acp_session import FAKES, backends_file, recorded, wait_gone
from tests.support import Ended

pytestmark = [pytest.mark.anyio, pytest.mark.timeout(60)]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def acp_pool(name: str, tmp_path: Path, ended: Ended, **settings: Any) -> SessionPool:
    settings.setdefault("timeout", 20)
    settings.setdefault("grace", 1.0)
    if name == "generic":
        (backend,) = load_backends_file(backends_file(tmp_path)).values()
        return SessionPool(
            backend,
            size=2,
            max_idle=60,
            cwd=str(tmp_path),
            ledger=False,
            observers=[ended],
            **settings,
        )
    env = {"FAKE_CLI_RECORD": str(tmp_path / "record.jsonl")}
    return SessionPool(
        name,
        size=2,
        max_idle=60,
        cli_path=str(FAKES / name),
        cwd=str(tmp_path),
        env=env,
        ledger=False,
        observers=[ended],
        **settings,
    )


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gemini", "qwen", "opencode", "generic"])
async def test_a_pool_of_two_serves_four_prompts_without_context(name: str, tmp_path: Path) -> None:
    ended = Ended()
    async with acp_pool(name, tmp_path, ended) as pool:
        assert await pool.wait_warm(timeout=20), pool.stats()
        backend = pool.backend.name
        requests = [RunSpec(prompt=f"HISTORY {n}", backend=backend) for n in range(4)]
        results = await run_many(requests, concurrency=2, pool=pool)
        # what the same check sees where context is carried: a conversation's own turns
        async with pool.session() as s:
            await s.send("remember tangerine")
            carried = await s.send_result("HISTORY")
        stats = pool.stats()
    assert [r["status"] for r in results] == [0] * 4, [r["message"] for r in results]
    assert [r["message"] for r in results] == ["history: "] * 4  # nothing reached it before
    assert carried.message == "history: remember tangerine"
    assert len({r["pid"] for r in results}) == 4  # a process each
    assert len({r["session_id"] for r in results}) == 4
    assert stats.served == 5 and stats.fresh == 0 and stats.failed == 0, stats
    # each process opened its one session before its prompt came
    sent = [e["received"] for e in recorded(tmp_path) if "received" in e]
    assert sent.count("session/new") == pool.stats().opened == sent.count("initialize")
    assert len(ended.keys) == pool.stats().opened >= 5
    for key in ended.keys:
        assert await wait_gone(key) == [], key


@pytest.mark.slow
def test_the_sync_pool_over_acp(tmp_path: Path) -> None:
    ended = Ended()
    with SyncSessionPool(
        "opencode",
        size=1,
        max_idle=60,
        cli_path=str(FAKES / "opencode"),
        cwd=str(tmp_path),
        timeout=20,
        grace=1.0,
        ledger=False,
        observers=[ended],
        approver=lambda request: True,
    ) as pool:
        assert pool.wait_warm(timeout=20)
        answer = pool.run('ASK execute {"command": "ls"}')
        assert answer["status"] == 0 and answer["message"] == "allowed allow_once", answer
        assert answer["approvals"][0]["allowed"] is True
    assert ended.keys and pool.stats().warm == 0


def test_what_a_pool_cannot_do_over_acp_is_refused_at_once(tmp_path: Path) -> None:
    """Refused through the one capability check, before any process starts."""
    common: dict[str, Any] = {"size": 2, "max_idle": 60, "cwd": str(tmp_path)}
    with pytest.raises(AgentUsageError, match="live session runs in its working directory"):
        SessionPool("gemini", cli_path=str(FAKES / "gemini"), isolation="worktree", **common)
    assert recorded(tmp_path) == []
