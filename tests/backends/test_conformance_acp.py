"""The conformance kit's ACP section (``coding_genesis.testing.check_acp_backend``): it passes on
every ACP backend we ship and on one from a backends file, each against the kit's fake ACP
agent, and fails, saying what is wrong, on backends broken each in one way."""

from __future__ import annotations

import subprocess
import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any

import pytest

from coding_genesis import AcpBackend, load_backends_file
from coding_genesis.approval import Decision
from coding_genesis.backends import get_backend
from coding_genesis.backends.acp import AcpControl
from coding_genesis.control import ControlProtocol, Incoming, Outgoing, PermissionAsk, Unknown
from coding_genesis.testing import FAKE_ACP_AGENT, check_acp_backend
from coding_genesis.testing.acp import (
    check_acp_bad_input,
    check_acp_cancel,
    check_acp_opening,
    check_acp_permissions,
)

pytestmark = pytest.mark.timeout(180)


@pytest.mark.slow
@pytest.mark.parametrize("name", ["gemini", "qwen", "opencode"])
def test_every_shipped_acp_backend_conforms(name: str) -> None:
    assert check_acp_backend(get_backend(name)) == [
        "acp opening",
        "acp translation",
        "acp permissions",
        "acp cancel",
        "acp bad input",
        "acp death",
    ]


def backends_file(tmp_path: Path) -> Path:
    path = tmp_path / "backends.toml"
    path.write_text(
        "[backends.myagent]\n"
        'format = "acp"\n'
        'command = ["myagent", "--acp"]\n'
        'env = { MYAGENT_NO_UPDATE = "1" }\n'
        'modes = { "read-only" = "look", edit = "change", full = "anything" }\n'
        'ask_mode = "careful"\n'
    )
    return path


@pytest.mark.slow
def test_a_backends_file_entry_conforms(tmp_path: Path) -> None:
    backend = load_backends_file(backends_file(tmp_path))["myagent"]
    assert len(check_acp_backend(backend)) == 6


def test_the_kits_fake_agent_is_a_standard_library_script() -> None:
    """It ships in the package and runs with no package importable (a plug-in's CI may
    run it under any Python)."""
    code = (
        "import sys, runpy\n"
        "sys.argv = ['fake_acp.py']\n"
        f"runpy.run_path({str(FAKE_ACP_AGENT)!r}, run_name='not_main')\n"
        "bad = sorted(m for m in sys.modules if m.split('.')[0] in ('coding_genesis', 'anyio'))\n"
        "print(bad)\n"
    )
    proc = subprocess.run(
        [sys.executable, "-I", "-S", "-c", code],
        capture_output=True,
        text=True,
        timeout=60,
        check=False,
    )
    assert proc.stdout.strip() == "[]", proc.stderr


# -- backends broken each in one way -------------------------------------------------


class Broken(AcpBackend):
    """An ACP backend whose protocol is ``protocol`` (an AcpControl subclass)."""

    def __init__(self, protocol: type[AcpControl]) -> None:
        super().__init__(
            "broken", command=["myagent", "--acp"], modes={"full": "yolo"}, ask_mode="default"
        )
        self._protocol = protocol

    def control(self) -> ControlProtocol:
        return self._protocol(self.agent, self._command)


class AsksForVersion2(AcpControl):
    def opening(self, request: Any) -> list[Outgoing]:
        (init,) = super().opening(request)
        return [{**init, "params": {**init["params"], "protocolVersion": 2}}]


class TakesAnyVersion(AcpControl):
    def receive(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        result = obj.get("result")
        if isinstance(result, Mapping) and "protocolVersion" in result:
            obj = {**obj, "result": {**result, "protocolVersion": 1}}
        return super().receive(obj)


class ChoosesByPosition(AcpControl):
    """Answers with the first option offered that starts with the decision's word."""

    def receive(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        self._offered = (obj.get("params") or {}).get("options") or getattr(self, "_offered", [])
        return super().receive(obj)

    def answer(self, ask: PermissionAsk, decision: Decision) -> list[Outgoing]:
        (answer,) = super().answer(ask, decision)
        word = "allow" if decision.allowed else "reject"
        first = next(o for o in self._offered if o["kind"].startswith(word))
        return [
            {
                **answer,
                "result": {
                    "outcome": {**answer["result"]["outcome"], "optionId": first["optionId"]}
                },
            }
        ]


class NoCancel(AcpControl):
    def interrupt(self) -> list[Outgoing]:
        return []


class LeavesTheQuestionOpen(AcpControl):
    """Sends session/cancel but never answers the open permission request."""

    def interrupt(self) -> list[Outgoing]:
        return [m for m in super().interrupt() if "method" in m]


class CountsNothing(AcpControl):
    def receive(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        return [i for i in super().receive(obj) if not isinstance(i, Unknown)]


def test_asking_for_another_protocol_version_is_named() -> None:
    with pytest.raises(AssertionError, match=r"initialize asked for protocolVersion 2, not 1"):
        check_acp_opening(Broken(AsksForVersion2))


def test_an_agents_other_version_taken_is_named() -> None:
    with pytest.raises(
        AssertionError, match=r"an agent answering protocol version 2 was not refused"
    ):
        check_acp_opening(Broken(TakesAnyVersion))


def test_an_option_chosen_by_position_not_kind_is_named() -> None:
    with pytest.raises(AssertionError) as exc:
        check_acp_permissions(Broken(ChoosesByPosition))
    text = str(exc.value)
    assert "the approver allowed; the agent was answered 'opt-1' (allow_always)" in text
    assert "expected the option of kind allow_once" in text


def test_no_cancel_at_an_interrupt_is_named() -> None:
    with pytest.raises(AssertionError, match=r"interrupt\(\) sent no session/cancel"):
        check_acp_cancel(Broken(NoCancel))


def test_a_question_left_open_at_the_interrupt_is_named() -> None:
    with pytest.raises(AssertionError) as exc:
        check_acp_cancel(Broken(LeavesTheQuestionOpen), timeout=5)
    text = str(exc.value)
    assert "the permission request open at the interrupt was answered never" in text
    assert "not with the cancelled outcome" in text


def test_unknown_updates_not_counted_are_named() -> None:
    with pytest.raises(AssertionError, match=r"were not counted"):
        check_acp_bad_input(Broken(CountsNothing))


@pytest.mark.slow
def test_the_whole_kit_lists_only_what_is_broken() -> None:
    with pytest.raises(AssertionError) as exc:
        check_acp_backend(Broken(NoCancel))
    text = str(exc.value)
    assert text.startswith("backend 'broken' does not conform to ACP (1 problem(s)):")
    assert "ACP cancel: interrupt() sent no session/cancel" in text


class OneWay(AcpBackend):
    def control(self) -> None:  # type: ignore[override]
        return None


def test_a_backend_with_no_live_protocol_is_refused() -> None:
    with pytest.raises(AssertionError, match="has no live-session protocol"):
        check_acp_backend(OneWay("oneway", command=["myagent"]))


def test_a_backend_that_speaks_no_acp_fails_every_check_saying_so() -> None:
    """The failer speaks claude's protocol, not ACP: each check fails with what the session
    said, never a traceback of the kit's own."""
    with pytest.raises(AssertionError) as exc:
        check_acp_opening(get_backend("failer"), timeout=5)
    assert str(exc.value).startswith("ACP opening: ")
