"""Pytest fixtures for the fake model server and the real CLIs.

Active for ``tests/fakes`` through ``tests/fakes/conftest.py``; elsewhere load it with
``pytest_plugins = ["tests.fakes.plugin"]`` in the root ``conftest.py``.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest

from tests.fakes.model_server import FakeModelServer
from tests.fakes.real_cli import (
    QuickStart,
    find_claude,
    find_codex,
    find_gemini,
    find_opencode,
    find_qwen,
)


@pytest.fixture
def model_server() -> Iterator[FakeModelServer]:
    """A started :class:`FakeModelServer` on 127.0.0.1 (random port), stopped after the test."""
    server = FakeModelServer()
    server.start()
    try:
        yield server
    finally:
        server.stop()


@pytest.fixture(scope="session")
def quick_start(tmp_path_factory: pytest.TempPathFactory) -> QuickStart:
    """The start-up state the real node CLIs and opencode share for the whole test session
    (a compile cache, opencode's template ``HOME``), in a private directory."""
    root = tmp_path_factory.mktemp("quick-start")
    root.chmod(0o700)
    return QuickStart(root)


@pytest.fixture
def real_claude() -> str:
    """Path of the real claude CLI; skips the test when it is not installed."""
    path = find_claude()
    if path is None:
        pytest.skip(
            "real claude CLI not found (GENESIS_CLAUDE_PATH, .tools/node_modules/.bin, PATH)"
        )
    return path


@pytest.fixture
def real_codex() -> str:
    """Path of the real codex CLI; skips the test when it is not installed."""
    path = find_codex()
    if path is None:
        pytest.skip("real codex CLI not found (GENESIS_CODEX_PATH, .tools/node_modules/.bin, PATH)")
    return path


def _found(name: str, path: str | None) -> str:
    if path is None:
        pytest.skip(
            f"real {name} CLI not found (GENESIS_{name.upper()}_PATH, .tools/node_modules/.bin, PATH)"
        )
    return path


@pytest.fixture
def real_gemini() -> str:
    """Path of the real gemini CLI; skips the test when it is not installed."""
    return _found("gemini", find_gemini())


@pytest.fixture
def real_opencode() -> str:
    """Path of the real opencode CLI; skips the test when it is not installed."""
    return _found("opencode", find_opencode())


@pytest.fixture
def real_qwen() -> str:
    """Path of the real qwen CLI (its ``qwen`` wrapper); skips the test when it is not
    installed."""
    return _found("qwen", find_qwen())
