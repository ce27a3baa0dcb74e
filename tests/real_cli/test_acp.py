"""Live sessions over the Agent Client Protocol with the REAL gemini (``--acp``), qwen
(``cli.js --acp``) and opencode (``acp``) against the fake model server.

Per agent, one session holds: a text turn with its usage; a shell command refused, then
allowed in the next turn (the file it makes appears only then); an "always" answer (the
agent is answered with its allow-once option, never its allow-always one: the session keeps
"always"); an interrupt in the middle of ``python3 -c 'import time; time.sleep(600)'`` with no
process left and a next turn that works.  Then 401 and 429 classified in one session, each
bounded in time (retry caps: gemini ``general.maxAttempts: 1`` in its settings, qwen
``cli_max_retries=0``; opencode's retries cannot be capped), beside a one-shot 429 run of each
(the back-offs' waits overlap), and resume where it works (qwen, opencode; gemini's is
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
from tests.real_cli.test_claude_codex import Recorder, assert_nothing_left, explain, hermetic_env
from tests.real_cli.test_gemini_opencode_qwen import (
    GEMINI_MODEL,
    NEW,
    MoreRig,
    assert_session,
    more_rig,
)
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
    return more_rig(request.param, request, model_server, tmp_path)  # skips when not installed


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


@pytest.mark.timeout(300)
async def test_401_and_429_in_sessions_beside_429_one_shot_runs(
    request: pytest.FixtureRequest, model_server: FakeModelServer, tmp_path: Path
) -> None:
    """A 401 then a 429 in a session of each agent and, all at once, a one-shot run of
    each answered 429 on every request: their own retries take a while (qwen's back-off
    ~75 s, opencode's ~10 s in a session, ~80 s one-shot) and the waits overlap.

    Sessions: the 401 is auth, ended by the agent itself without a retry (measured 0.3-5 s;
    no deadline of ours is needed); the 429 is rate_limit within each agent's retry cap
    (gemini ``general.maxAttempts: 1`` in its settings, qwen ``cli_max_retries=0``,
    opencode's cannot be capped); the session answers after each.

    One-shot runs (moved from test_gemini_opencode_qwen; started once every session's 401
    answered, so their start-up does not weigh on the 401s' bound): gemini's attempts
    capped by its own settings (as a user would: it refuses a per-run settings overlay);
    qwen's rate-limit retries by the backend's private overlay (``max_retries=0``; its
    transport back-off still retries for ~70 s); opencode's cannot be capped (~80 s).
    """

    def new_rig(backend: str, name: str) -> MoreRig:
        (tmp_path / name).mkdir()
        rig = more_rig(backend, request, model_server, tmp_path / name)  # skips if absent
        if backend == "gemini":
            rig.gemini_settings = {"general": {"maxAttempts": 1}}
        return rig

    in_session = {b: new_rig(b, f"session-{b}") for b in AGENTS}
    turns: dict[str, dict[int, tuple[Any, float]]] = {b: {} for b in AGENTS}
    afters: dict[str, list[Any]] = {b: [] for b in AGENTS}
    unauthorized = anyio.Event()  # every session's 401 answered

    async def session(backend: str) -> None:
        settings: dict[str, Any] = {"timeout": 180.0}
        if backend == "qwen":
            settings["cli_max_retries"] = 0  # its transport back-off still takes ~75 s
        async with acp_agent(in_session[backend], **settings).session() as s:
            for code in (401, 429):
                started = time.monotonic()
                r = await s.send_result(f"SCENARIO:{code}")
                turns[backend][code] = (r, time.monotonic() - started)
                if all(401 in done for done in turns.values()):
                    unauthorized.set()
                afters[backend].append(await s.send_result("SCENARIO:text still answering"))

    one_shot = {b: new_rig(b, b) for b in NEW}
    agents = {b: r.agent(timeout=240.0) for b, r in one_shot.items()}
    agents["qwen"] = CodingGenesisAgent(
        config=agents["qwen"].config.replace(options={"max_retries": 0})
    )
    recorders = {b: Recorder(a) for b, a in agents.items()}
    results: dict[str, dict[str, Any]] = {}

    async def one(backend: str) -> None:
        await unauthorized.wait()
        results[backend] = dict(await agents[backend].run(f"SCENARIO:429 {backend}"))

    async with anyio.create_task_group() as tg:
        for backend in AGENTS:
            tg.start_soon(session, backend)
            tg.start_soon(one, backend)

    for backend in AGENTS:
        r, took = turns[backend][401]
        assert r.status == 1 and r.failure is not None, r.message
        assert r.failure.category == "auth", (r.failure, r.message)
        # All three end a 401 by themselves, without a retry (measured 0.3-5 s): the
        # agent's own error answer ends the turn, no deadline of ours is needed.
        assert took < 10, (backend, took)
        r, took = turns[backend][429]
        assert r.status == 1 and r.failure is not None, r.message
        assert r.failure.category == "rate_limit", (r.failure, r.message)
        bound = {"gemini": 30, "opencode": 60, "qwen": 150}[backend]
        assert took < bound, (backend, took)
        for after in afters[backend]:
            assert after.status == 0 and after.message == "still answering", after.message

    for backend, result in results.items():
        events = recorders[backend]
        assert result["status"] == 1 and result["is_error"] is True, explain(result, events)
        assert result["failure"]["category"] == "rate_limit", explain(result)
        assert result["signal"] is None, explain(result)
        assert result["tool_calls"] == 0
        assert_session(result, events)
        assert_nothing_left(events.run_id())
    gemini = results["gemini"]
    assert gemini["exit_code"] == 173, explain(gemini)  # 429 mod 256, not a signal
    assert gemini["cli_retries"] == 0, explain(gemini)  # maxAttempts 1: no "Attempt N failed"
    assert results["qwen"]["api_error_status"] == 429
    assert results["qwen"]["cli_retries"] == 0, explain(results["qwen"])  # no system/retry
    assert results["opencode"]["api_error_status"] == 429
    by_cli = {
        b: [r for r in model_server.model_requests() if f"SCENARIO:429 {b}" in json.dumps(r.body)]
        for b in NEW
    }
    assert len(by_cli["gemini"]) == 1, [r.path for r in by_cli["gemini"]]
    assert all(r.status == 429 for calls in by_cli.values() for r in calls)


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
    real_gemini: str,
    request: pytest.FixtureRequest,
    model_server: FakeModelServer,
    tmp_path: Path,
) -> None:
    rig = more_rig("gemini", request, model_server, tmp_path)
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
    rig = more_rig(name, request, model_server, tmp_path)  # skips when not installed
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
