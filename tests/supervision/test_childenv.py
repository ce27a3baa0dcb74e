"""The child's environment: what the backends strip, keep and add."""

from __future__ import annotations

from coding_genesis._supervision.childenv import RUN_MARKER_ENV, build_env
from coding_genesis.backends import ClaudeBackend
from tests.support import cli_request


def test_unset_patterns_prefix_and_keep() -> None:
    base = {"A": "1", "X_ONE": "2", "X_KEEP_ME": "3", "OTHER": "4"}
    env = build_env(base, unset=("A", "X_*", "!X_KEEP_*"), add={"NEW": "5"}, marker="run-1")
    assert env == {"X_KEEP_ME": "3", "OTHER": "4", "NEW": "5", RUN_MARKER_ENV: "run-1"}


def test_claude_strips_parent_session_but_keeps_user_credentials_and_config() -> None:
    spec = ClaudeBackend().build_command(cli_request(prompt="hi", cwd="/"))
    parent = {
        "CLAUDECODE": "1",
        "CLAUDE_CODE_ENTRYPOINT": "cli",
        "CLAUDE_CODE_SSE_PORT": "4242",
        "CLAUDE_CODE_OAUTH_TOKEN": "oauth-token-value",
        "CLAUDE_CODE_USE_BEDROCK": "1",
        "CLAUDE_CODE_MAX_RETRIES": "3",
        "PATH": "/usr/bin",
    }
    env = build_env(parent, unset=spec.unset_env)
    assert "CLAUDECODE" not in env
    assert "CLAUDE_CODE_ENTRYPOINT" not in env
    assert "CLAUDE_CODE_SSE_PORT" not in env
    assert env["CLAUDE_CODE_OAUTH_TOKEN"] == "oauth-token-value"
    assert env["CLAUDE_CODE_USE_BEDROCK"] == "1"
    assert env["CLAUDE_CODE_MAX_RETRIES"] == "3"
    assert env["PATH"] == "/usr/bin"
