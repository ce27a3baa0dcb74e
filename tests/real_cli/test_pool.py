"""A warm session pool with the REAL claude and codex against the fake model server:
a pool of 2 serves 6 prompts (``run_many(pool=...)``), no context carried from
one prompt to another, and nothing left once it closes."""

from __future__ import annotations

import json
import re
from collections.abc import Mapping
from typing import Any

import pytest

from coding_genesis import Observer, RunSpec, SessionPool, run_many
from tests.real_cli.test_claude_codex import Rig, codex_rig, hermetic_env, rig
from tests.real_cli.test_sessions import marked

__all__ = ["codex_rig", "hermetic_env", "rig"]  # the real-CLI fixtures, active here too

pytestmark = [pytest.mark.timeout(180), pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


class Ended(Observer):
    def __init__(self) -> None:
        self.keys: list[str] = []

    def session_ended(self, session: str, summary: Mapping[str, Any]) -> None:
        self.keys.append(session)


async def test_a_warm_pool_of_two_serves_six_prompts_without_context(rig: Rig) -> None:
    ended = Ended()
    pool = SessionPool(
        rig.backend,
        size=2,
        max_idle=120,
        wait=30,
        cli_path=rig.cli,
        cwd=rig.work,
        env=rig.env(),
        timeout=60,
        grace=2.0,
        observers=[ended],
    )
    async with pool:
        assert await pool.wait_warm(timeout=60), pool.stats()
        requests = [
            RunSpec(prompt=f"pool-marker-{n}\nSCENARIO:text answer {n}", backend=rig.backend)
            for n in range(6)
        ]
        results = await run_many(requests, concurrency=2, pool=pool)
        stats = pool.stats()
    assert [r["status"] for r in results] == [0] * 6, [r["message"] for r in results]
    assert [r["message"] for r in results] == [f"answer {n}" for n in range(6)]
    assert len({r["pid"] for r in results}) == 6  # a CLI process each
    assert len({r["session_id"] for r in results}) == 6  # a conversation each
    assert stats.served == 6 and stats.fresh == 0, stats

    # No context carried: every model request names its own prompt only.
    asked = [r for r in rig.server.model_requests() if r.scenario is not None]
    assert len(asked) >= 6
    for request in asked:
        markers = set(re.findall(r"pool-marker-\d", json.dumps(request.body)))
        assert len(markers) == 1, markers

    # Nothing left: every session the pool opened ended, and its tree is gone.
    assert len(ended.keys) == pool.stats().opened >= 8
    for key in ended.keys:
        assert marked(key) == [], key
