"""Live sessions over the Agent Client Protocol with the REAL gemini (``--acp``), qwen
(``cli.js --acp``) and opencode (``acp``) against the fake model server.

Per agent, one session holds: a text turn with its usage; a shell command refused, then
allowed in the next turn (the file it makes appears only then); an "always" answer (the
agent is answered with its allow-once option, never its allow-always one: the session keeps
"always"); an interrupt in the middle of ``python3 -c 'import time; time.sleep(600)'`` with no
process left and a next turn that works.  Then 401 and 429 classified, each bounded in time
(retry caps: gemini ``general.maxAttempts: 1`` in its settings, qwen ``cli_max_retries=0``;
opencode's retries cannot be capped), and resume where it works (qwen, opencode; gemini's is
refused, saying why).  Each test skips, with the reason, when its CLI is not installed.

Measured here (one run, loaded 2-core machine): a 401 answers in 0.3-5 s on all three (no
retry); a 429 in ~1 s on gemini (maxAttempts 1), ~10 s on opencode (its own back-off against
``retry-after: 0``), ~75 s on qwen (its transport back-off, after ``maxRetries: 0``).
"""

from __future__ import annotations

import json
import time
from pathlib import Path
from typing import Any

import anyio
import pytest

from coding_genesis import CodingGenesisAgent, Decision, load_backends_file
from coding_genesis.errors import AgentUsageError
from tests.fakes.model_server import FakeModelServer, sleep_command
from tests.real_cli.test_claude_codex import hermetic_env
from tests.real_cli.test_gemini_opencode_qwen import GEMINI_MODEL, MoreRig
from tests.real_cli.test_sessions import marked, sleepers
from tests.session.interrupting import interrupted_turn, polled
from tests.support import Scripted

__all__ = ["hermetic_env"]  # the autouse fixture of the real-CLI tests, active here too

pytestmark = [pytest.mark.timeout(180), pytest.mark.anyio]

AGENTS = ("gemini", "qwen", "opencode")
#: Each agent's allow-once and allow-always option ids (measured).
OPTION_IDS = {
    "gemini": ("proceed_once", "proceed_always"),
    "qwen": ("proceed_once", "proceed_always_project"),
    "opencode": ("once", "always"),
}


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(params=AGENTS)
def rig(request: pytest.FixtureRequest, model_server: FakeModelServer, tmp_path: Path) -> MoreRig:
    cli = request.getfixturevalue(f"real_{request.param}")  # skips when not installed
    return MoreRig(request.param, cli, model_server, tmp_path)


def acp_agent(rig: MoreRig, **settings: Any) -> CodingGenesisAgent:
    settings.setdefault("timeout", 90.0)
    settings.setdefault("grace", 2.0)
    if rig.backend == "gemini":
        settings.setdefault("model", GEMINI_MODEL)  # no model-router call
    return CodingGenesisAgent(
        rig.backend, cli_path=rig.cli, cwd=rig.work, env=rig.env(), ledger=False, **settings
    )


async def test_text_refused_then_allowed_always_and_interrupt(rig: MoreRig) -> None:
    approver = Scripted(
        Decision.deny("not now"),
        Decision.allow(),
        Decision.allow(always=True),
        Decision.allow(always=True),
    )
    asked = approver.asked

    runs = rig.tmp / "runs"
    agent = acp_agent(rig, approver=approver, transcripts=str(runs))
    async with agent.session() as s:
        text = await s.send_result("SCENARIO:text hello over acp")
        assert text.status == 0 and text.message == "hello over acp", text.message
        assert (text.usage or {}).get("inputTokens", 0) > 0, text.usage  # each reports usage
        assert text.session_id == s.session_id and s.session_id

        refused = await s.send_result("SCENARIO:bash touch made.txt")
        assert refused.status == 0, refused.message  # a refusal is no failure of the turn
        assert refused.approvals and refused.approvals[0]["allowed"] is False
        assert not (rig.work / "made.txt").exists()
        allowed = await s.send_result("SCENARIO:bash touch made.txt")
        assert allowed.status == 0, allowed.message
        assert allowed.approvals[0]["allowed"] is True
        assert (rig.work / "made.txt").exists()
        assert asked[0].kind == "command" and asked[0].command == "touch made.txt", asked[0]

        always = await s.send_result("SCENARIO:bash touch again.txt")
        assert always.status == 0 and (rig.work / "again.txt").exists(), always.message

        started = polled(
            lambda: sleepers(s.key), "the long command never started", tries=600, every=0.1
        )
        interrupted = await interrupted_turn(s, "SCENARIO:sleep 600", started)
        assert interrupted.status == 130 and interrupted.error == "interrupted", interrupted.message
        for _ in range(50):
            if not sleepers(s.key):
                break
            await anyio.sleep(0.1)
        assert sleepers(s.key) == []
        after = await s.send_result("SCENARIO:text after the interrupt")
        assert after.status == 0 and after.message == "after the interrupt", after.message
        key = s.key
    assert marked(key) == []
    assert sleep_command(600) in str([r.input for r in asked] + [r.command for r in asked])
    # Answered by kind, once per call: the allow-once option, never the allow-always one.
    stdin = "".join(p.read_text() for p in runs.rglob("stdin.jsonl"))
    once, always_id = OPTION_IDS[rig.backend]
    assert f'"optionId":"{once}"' in stdin.replace(" ", "")
    assert f'"optionId":"{always_id}"' not in stdin.replace(" ", "")


async def _failing_turn(rig: MoreRig, code: int, **settings: Any) -> tuple[Any, float]:
    agent = acp_agent(rig, **settings)
    async with agent.session() as s:
        started = time.monotonic()
        r = await s.send_result(f"SCENARIO:{code}")
        took = time.monotonic() - started
        after = await s.send_result("SCENARIO:text still answering")
        assert after.status == 0 and after.message == "still answering", after.message
    return r, took


async def test_401_is_auth_within_seconds(rig: MoreRig) -> None:
    r, took = await _failing_turn(rig, 401)
    assert r.status == 1 and r.failure is not None, r.message
    assert r.failure.category == "auth", (r.failure, r.message)
    # All three end a 401 by themselves, without a retry (measured 0.3-5 s): the agent's own
    # error answer ends the turn, no deadline of ours is needed.
    assert took < 10, took


@pytest.mark.timeout(240)
async def test_429_is_rate_limit_with_each_agents_retry_cap(rig: MoreRig) -> None:
    settings: dict[str, Any] = {"timeout": 180.0}
    if rig.backend == "gemini":
        rig.gemini_settings = {"general": {"maxAttempts": 1}}
    if rig.backend == "qwen":
        settings["cli_max_retries"] = 0  # its transport back-off still takes ~75 s
    r, took = await _failing_turn(rig, 429, **settings)
    assert r.status == 1 and r.failure is not None, r.message
    assert r.failure.category == "rate_limit", (r.failure, r.message)
    bound = {"gemini": 30, "opencode": 60, "qwen": 150}[rig.backend]
    assert took < bound, took


async def test_resume_where_it_works(rig: MoreRig) -> None:
    agent = acp_agent(rig)
    if rig.backend == "gemini":
        with pytest.raises(AgentUsageError, match="wipes the session"):
            agent.session(resume="any")
        return
    async with agent.session() as first:
        assert (await first.send_result("SCENARIO:text remember the word tangerine")).status == 0
        session_id = first.session_id
    assert session_id
    rig.server.clear()
    async with agent.session(resume=session_id) as second:
        r = await second.send_result("SCENARIO:text and now?")
        assert r.status == 0 and r.message == "and now?", r.message
        assert second.session_id == session_id
    assert "tangerine" in str([req.body for req in rig.server.model_requests()])


async def test_the_generic_backend_drives_gemini_from_a_backends_file(
    real_gemini: str, model_server: FakeModelServer, tmp_path: Path
) -> None:
    rig = MoreRig("gemini", real_gemini, model_server, tmp_path)
    path = tmp_path / "backends.toml"
    path.write_text(
        "[backends.gemini-acp]\n"
        'format = "acp"\n'
        f'command = ["{real_gemini}", "--acp", "--skip-trust"]\n'
        'env = { GEMINI_CLI_NO_RELAUNCH = "true" }\n'
        'modes = { "read-only" = "plan", edit = "autoEdit", full = "yolo" }\n'
        'ask_mode = "default"\n'
        "resume = false\n"
        'model_args = ["-m", "{model}"]\n'
    )
    (backend,) = load_backends_file(path).values()
    agent = CodingGenesisAgent(
        backend, cwd=rig.work, env=rig.env(), model=GEMINI_MODEL, timeout=90.0, ledger=False
    )
    plain = await agent.run("SCENARIO:text generic hello")
    assert plain["status"] == 0 and plain["message"] == "generic hello", plain["message"]
    asked = await agent.run("SCENARIO:bash touch generic.txt", approver=lambda r: True)
    assert asked["status"] == 0, asked["message"]
    assert asked["approvals"][0]["allowed"] is True and (rig.work / "generic.txt").exists()
    requests = [r.path for r in rig.server.model_requests()]
    assert requests and all(GEMINI_MODEL in p for p in requests)  # model_args applied


@pytest.mark.parametrize("name", ["gemini", "qwen"])
async def test_add_dirs_and_qwens_system_prompt_reach_the_model_over_acp(
    name: str, request: pytest.FixtureRequest, model_server: FakeModelServer, tmp_path: Path
) -> None:
    """gemini's ``--include-directories`` and qwen's ``--add-dir`` hold in ``--acp``
    mode: the model is told of the extra directory; qwen's ``--system-prompt`` and
    ``--append-system-prompt`` reach its request as in a one-shot run."""
    cli = request.getfixturevalue(f"real_{name}")  # skips when not installed
    rig = MoreRig(name, cli, model_server, tmp_path)
    other = tmp_path / "other-dir-mark"
    other.mkdir()
    prompts = {"system_prompt": "SYSMARK-ACP", "append_system_prompt": "APPMARK-ACP"}
    agent = acp_agent(rig, add_dirs=[str(other)], **(prompts if name == "qwen" else {}))
    async with agent.session() as s:
        turn = await s.send_result("SCENARIO:text hi")
    assert turn.status == 0, turn.message
    assert not [w for w in turn.warnings if "add_dirs" in w], turn.warnings
    # the turn's own model request (qwen also asks for its memory in the background)
    (body, *_) = [
        b for b in (json.dumps(r.body) for r in model_server.model_requests()) if "text hi" in b
    ]
    assert str(other) in body
    if name == "qwen":
        assert "SYSMARK-ACP" in body and "APPMARK-ACP" in body
