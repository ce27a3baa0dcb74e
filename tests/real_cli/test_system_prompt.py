"""``system_prompt=`` and ``append_system_prompt=`` reach the model request of the REAL
``claude`` and ``codex`` CLIs (against the fake model server), one-shot and in a live session;
claude keeps a session's first system prompt: a changed one is not sent on ``resume=``."""

from __future__ import annotations

import json

import pytest

from tests.real_cli.test_claude_codex import Rig, claude_rig, codex_rig, hermetic_env, rig

__all__ = ["claude_rig", "codex_rig", "hermetic_env", "rig"]  # the real-CLI fixtures

pytestmark = [pytest.mark.timeout(120), pytest.mark.anyio]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def sent(rig: Rig) -> list[str]:
    """Each model request's body, as JSON text."""
    return [json.dumps(r.body) for r in rig.server.model_requests()]


async def test_system_prompt_reaches_the_model_one_shot(rig: Rig) -> None:
    result = await rig.agent_with().run(
        "SCENARIO:text hi", system_prompt="SYSMARK-1", append_system_prompt="APPMARK-1"
    )
    assert result["status"] == 0, result["message"]
    bodies = sent(rig)
    assert bodies and all("SYSMARK-1" in b and "APPMARK-1" in b for b in bodies[-1:])


async def test_system_prompt_reaches_the_model_in_a_session(rig: Rig) -> None:
    a = rig.agent_with(system_prompt="SYSMARK-2")
    async with a.session(append_system_prompt="APPMARK-2") as session:
        result = await session.send_result("SCENARIO:text hi")
    assert result.status == 0, result.message
    last = sent(rig)[-1]
    assert "SYSMARK-2" in last and "APPMARK-2" in last


async def test_the_old_option_still_reaches_claude(claude_rig: Rig) -> None:
    result = await claude_rig.agent_with().run(
        "SCENARIO:text hi", options={"append_system_prompt": "OLDMARK"}
    )
    assert result["status"] == 0, result["message"]
    assert "OLDMARK" in sent(claude_rig)[-1]


async def test_claude_does_not_resend_a_changed_system_prompt_on_resume(
    claude_rig: Rig,
) -> None:
    a = claude_rig.agent_with()
    first = await a.run("SCENARIO:text one", system_prompt="FIRSTMARK")
    assert first["status"] == 0, first["message"]
    assert "FIRSTMARK" in sent(claude_rig)[-1]
    claude_rig.server.clear()
    second = await a.run(
        "SCENARIO:text two", system_prompt="SECONDMARK", resume=first["session_id"]
    )
    assert second["status"] == 0, second["message"]
    last = sent(claude_rig)[-1]
    assert "FIRSTMARK" in last and "SECONDMARK" not in last


async def test_add_dirs_is_taken_one_shot_and_in_a_session(rig: Rig) -> None:
    other = rig.tmp / "other"
    other.mkdir()
    a = rig.agent_with(permissions="edit", add_dirs=[str(other)])
    one_shot = await a.run("SCENARIO:text hi")
    assert one_shot["status"] == 0, one_shot["message"]
    assert not [w for w in one_shot["warnings"] if "add_dirs" in w], one_shot["warnings"]
    async with a.session() as session:
        turn = await session.send_result("SCENARIO:text hi")
    assert turn.status == 0, turn.message
