"""A warm session pool over the Agent Client Protocol with the REAL gemini, qwen and
opencode against the fake model server: a pool of 2 serves 4 prompts
(``run_many(pool=...)``), no prompt reaches the model beside another's, and nothing is
left once the pool closes.

Each pooled conversation is a process of its own (``initialize`` + ``session/new``, opened
in the background), as on claude and codex: a second ``session/new`` on a warm process
would keep the agent's process-wide state (gemini's and qwen's tool registry and memory
files, opencode's server) from one caller to the next, and the pool's point (a prompt's
first event does not wait for the start-up) holds either way, the start-up being paid
before the prompt arrives.
"""

from __future__ import annotations

import json
import re
from typing import Any

import pytest

from coding_genesis import RunSpec, SessionPool, run_many
from tests.real_cli.test_acp import hermetic_env, rig
from tests.real_cli.test_gemini_opencode_qwen import GEMINI_MODEL, MoreRig
from tests.real_cli.test_sessions import marked
from tests.support import Ended

__all__ = ["hermetic_env", "rig"]  # the real-CLI fixtures, active here too

pytestmark = [pytest.mark.timeout(240), pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_a_warm_pool_of_two_serves_four_prompts_without_context(rig: MoreRig) -> None:
    ended = Ended()
    extra: dict[str, Any] = {"model": GEMINI_MODEL} if rig.backend == "gemini" else {}
    pool = SessionPool(
        rig.backend,
        size=2,
        max_idle=180,
        wait=60,
        cli_path=rig.cli,
        cwd=rig.work,
        env=rig.env(),
        timeout=90,
        grace=2.0,
        ledger=False,
        observers=[ended],
        **extra,
    )
    async with pool:
        assert await pool.wait_warm(timeout=90), pool.stats()
        requests = [
            RunSpec(prompt=f"acp-pool-marker-{n}\nSCENARIO:text answer {n}", backend=rig.backend)
            for n in range(4)
        ]
        results = await run_many(requests, concurrency=2, pool=pool)
        stats = pool.stats()
    assert [r["status"] for r in results] == [0] * 4, [r["message"] for r in results]
    assert [r["message"] for r in results] == [f"answer {n}" for n in range(4)]
    assert len({r["pid"] for r in results}) == 4  # a process each
    assert len({r["session_id"] for r in results}) == 4  # a conversation each
    assert stats.served == 4 and stats.fresh == 0, stats

    # No context carried: every model request names one prompt only, and each prompt
    # reached the model.
    seen: set[str] = set()
    for request in rig.server.model_requests():
        markers = set(re.findall(r"acp-pool-marker-\d", json.dumps(request.body)))
        assert len(markers) <= 1, markers
        seen |= markers
    assert seen == {f"acp-pool-marker-{n}" for n in range(4)}, seen

    # Nothing left: every session the pool opened ended, and its tree is gone.
    assert len(ended.keys) == pool.stats().opened >= 6
    for key in ended.keys:
        assert marked(key) == [], key
