"""``ControlProtocol.begin`` states the order a session starts in: the request
kept, then ``command``, then ``opening`` (what the live link calls, and only it)."""

from __future__ import annotations

from typing import Any

import pytest

from coding_genesis.backends.claude import ClaudeBackend
from coding_genesis.backends.codex import CodexBackend
from coding_genesis.backends.gemini import GeminiBackend
from coding_genesis.backends.opencode import OpencodeBackend
from coding_genesis.backends.qwen import QwenBackend
from coding_genesis.control import ControlProtocol, Opening
from tests.session.twoway import TwoWayProtocol
from tests.support import cli_request


class _Recording(TwoWayProtocol):
    """A third-party protocol that still records state in command() and opening()."""

    def __init__(self) -> None:
        super().__init__()
        self.calls: list[tuple[str, Any]] = []

    def command(self, start: Any) -> Any:
        self.calls.append(("command", self.request))
        return super().command(start)

    def opening(self, start: Any) -> Any:
        self.calls.append(("opening", self.request))
        return super().opening(start)


def test_begin_keeps_the_request_then_calls_command_then_opening() -> None:
    proto = _Recording()
    request = cli_request(cwd="/w", resume="r-1")
    assert proto.request is None
    begun = proto.begin(request)
    assert proto.calls == [("command", request), ("opening", request)]
    assert proto.request is request
    assert begun == Opening(command=proto.command(request), greeting=[{"op": "hello"}])
    assert begun.command.env == {"TWOWAY_SESSION": "r-1"}


@pytest.mark.parametrize(
    "backend",
    [ClaudeBackend(), CodexBackend(), GeminiBackend(), QwenBackend(), OpencodeBackend()],
    ids=["claude", "codex", "gemini", "qwen", "opencode"],
)
def test_the_built_in_protocols_read_the_session_from_the_kept_request(backend: Any) -> None:
    proto: ControlProtocol = backend.control()
    request = cli_request(cwd="/w", approvals=True, hooks=("turn_end",))
    begun = proto.begin(request)
    assert proto.request is request
    assert "turn_end" in proto.hooked
    assert begun.greeting  # each writes an initialize request
    assert begun.command.stdin is None
