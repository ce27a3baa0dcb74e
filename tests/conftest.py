"""Fixtures for the whole suite.  Step modules are registered here."""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
from anyio.from_thread import BlockingPortal, start_blocking_portal

from tests.support import FakeCLI, leaked_processes

pytest_plugins = [
    "tests.steps.isolation_steps",
    "tests.steps.agent_steps",
    "tests.steps.retry_steps",
    "tests.steps.failure_steps",
    "tests.steps.telemetry_steps",
    "tests.steps.transcript_steps",
    "tests.steps.budget_steps",
    "tests.steps.session_steps",
    "tests.steps.streaming_steps",
    "tests.steps.hook_point_steps",
    "tests.steps.session_context_steps",
    "tests.steps.serve_steps",
    "tests.steps.mcp_steps",
    "tests.steps.acp_steps",
    "tests.steps.prompt_parts_steps",
    "tests.steps.mcp_servers_steps",
    "tests.steps.question_steps",
    "tests.steps.acp_pool_steps",
    "tests.fakes.plugin",
    "tests.browser",
]


# The fakes start with ``#!/usr/bin/env python3`` and import coding_genesis: the
# interpreter running the tests comes first on PATH, so they find it when pytest is
# run as ``.venv/bin/python -m pytest`` without the venv activated.
os.environ["PATH"] = os.pathsep.join([os.path.dirname(sys.executable), os.environ.get("PATH", "")])


#: Fixtures that start a real CLI (each skips its test when that CLI is absent).
REAL_CLI_FIXTURES = frozenset(
    {"real_claude", "real_codex", "real_gemini", "real_opencode", "real_qwen"}
)


def pytest_collection_modifyitems(items: list[pytest.Item]) -> None:
    """``real_cli``: a test of the real CLIs against the fake model server (everything
    under tests/real_cli/, and any test that asks for a real CLI); ``pytest -m "not
    real_cli"`` leaves them out."""
    here = Path(__file__).parent / "real_cli"
    for item in items:
        fixtures = set(getattr(item, "fixturenames", ()))
        if here in Path(str(item.fspath)).parents or fixtures & REAL_CLI_FIXTURES:
            item.add_marker(pytest.mark.real_cli)


@pytest.fixture(scope="session", autouse=True)
def private_run_log(tmp_path_factory: pytest.TempPathFactory) -> Iterator[Path]:
    """Runs made by the suite log to a temporary run log, never the real home;
    every other default state location (failer counters, transcripts) is
    moved off the real home too."""
    path = tmp_path_factory.mktemp("runlog") / "runs.jsonl"
    state = tmp_path_factory.mktemp("state")
    with pytest.MonkeyPatch.context() as mp:
        mp.setenv("GENESIS_RUN_LOG", str(path))
        mp.setenv("XDG_STATE_HOME", str(state))
        mp.setenv("GENESIS_FAILER_STATE_DIR", str(state / "failer"))
        yield path


#: Transcripts of every run in this session go here, never into the real home
#: (set before any agent is built; inherited by `genesis` subprocesses).
TRANSCRIPTS = tempfile.mkdtemp(prefix="genesis-test-transcripts-")
os.environ["GENESIS_TRANSCRIPTS"] = TRANSCRIPTS


@pytest.fixture(scope="session", autouse=True)
def _session_transcripts() -> Iterator[str]:
    yield TRANSCRIPTS
    shutil.rmtree(TRANSCRIPTS, ignore_errors=True)


@pytest.fixture
def portal() -> Iterator[BlockingPortal]:
    """Run async code from synchronous pytest-bdd steps."""
    with start_blocking_portal(backend="asyncio") as portal:
        yield portal


@pytest.fixture
def fake_claude(tmp_path: Path) -> FakeCLI:
    return FakeCLI(tmp_path, "claude")


@pytest.fixture
def fake_codex(tmp_path: Path) -> FakeCLI:
    return FakeCLI(tmp_path, "codex")


@pytest.fixture(autouse=True)
def no_leaked_processes() -> Iterator[None]:
    """Every test must leave no process of any run behind, alive or zombie."""
    yield
    leaks = leaked_processes()
    assert not leaks, f"processes left behind by the test: {leaks}"


@pytest.fixture(params=["asyncio", "trio"])
def anyio_backend(request: pytest.FixtureRequest) -> str:
    """Async tests marked ``@pytest.mark.anyio`` run on both anyio backends."""
    return str(request.param)
