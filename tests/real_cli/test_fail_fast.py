"""Issue 28: a failure no retry can fix is answered at once, by all five REAL CLIs.

Against a fake model server answering 401, with each CLI's own default retries (claude retries
a 401 up to ten times over minutes, codex five times) and ``timeout=300``: the answer is
category ``auth``, status 1, within 10 s of the first 401, and nothing is left running.  Before
issue 28 claude waited out the timeout and was called a ``timeout``.

The 10 s are counted from the model server's first 401, not from the spawn: a CLI's own start-up
is not ours to shorten (opencode takes 12-16 s to reach its first request on a loaded 2-core
machine); the whole run is still held well below the CLI's retry schedule and the timeout.
"""

from __future__ import annotations

import time
from pathlib import Path

import pytest

from coding_genesis import CodingGenesisAgent
from tests.fakes.model_server import FakeModelServer
from tests.fakes.real_cli import claude_env, codex_env, write_codex_home
from tests.real_cli.test_claude_codex import Recorder, assert_nothing_left, explain, hermetic_env
from tests.real_cli.test_gemini_opencode_qwen import ALL, MoreRig, make_rig
from tests.support import present

__all__ = ["hermetic_env"]  # the autouse fixture of the real-CLI tests, active here too

pytestmark = pytest.mark.timeout(120)


def default_retries_env(backend: str, server: FakeModelServer, tmp: Path) -> dict[str, str] | None:
    """claude and codex with their own default retries (the rigs cap them); None: the rig's."""
    if backend == "claude":
        return claude_env(server.url, tmp / "home", max_retries=None, base_env={})
    if backend == "codex":
        home = write_codex_home(
            tmp / "codex_home", server.url, request_max_retries=None, stream_max_retries=None
        )
        return codex_env(home, base_env={})
    return None


@pytest.mark.parametrize("backend", ALL)
def test_401_is_auth_at_once_with_default_retries(
    backend: str, request: pytest.FixtureRequest, model_server: FakeModelServer, tmp_path: Path
) -> None:
    rig = make_rig(backend, request, model_server, tmp_path)
    agent = rig.agent(timeout=300.0, env=default_retries_env(backend, model_server, tmp_path))
    if isinstance(rig, MoreRig):  # gemini's model name (see MoreRig.agent)
        agent = CodingGenesisAgent(config=agent.config)
    events = Recorder(agent)
    started = time.monotonic()
    result = agent.run_sync("SCENARIO:401")
    answered = time.time()
    took = time.monotonic() - started
    assert result["status"] == 1 and result["is_error"] is True, explain(result, events)
    assert present(result["failure"])["category"] == "auth", explain(result, events)
    assert present(result["failure"])["retryable"] is False
    first = min(r.time for r in model_server.model_requests())
    assert answered - first < 10.0, (answered - first, explain(result, events))
    assert took < 60.0, (took, explain(result, events))
    # The CLI's words are in the answer.
    assert (
        "401" in result["message"]
        or "Incorrect API key" in result["message"]
        or ("authentication" in result["message"].lower())
    ), explain(result)
    statuses = {r.status for r in model_server.model_requests()}
    assert statuses == {401}, statuses
    if backend in ("claude", "codex"):
        # Stopped on the CLI's first retry, not after its last.
        assert result["stopped_on"] == "auth", explain(result, events)
        assert result["cli_retries"] == 1, explain(result, events)
        assert present(result["failure"])["reason"].startswith("stopped on the CLI's own evidence")
    assert_nothing_left(events.run_id())
