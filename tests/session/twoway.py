"""A backend for ``tests/fakes/twoway_cli.py``: its ControlProtocol and translator.

The session machinery is tested through it (states, approvals, interrupt,
the protocol's failure modes); claude's and codex's own protocols are tested
in ``tests/backends`` and against the real CLIs in ``tests/real_cli``.
"""

from __future__ import annotations

import sys
from collections.abc import Sequence
from pathlib import Path
from typing import Any, ClassVar

from coding_genesis.approval import ApprovalRequest, Decision, ToolKind
from coding_genesis.backend import AttemptRequest, Backend, CommandSpec, Translator
from coding_genesis.control import (
    FORWARD,
    ControlProtocol,
    Incoming,
    Outgoing,
    PermissionAsk,
    ProtocolFault,
    Ready,
    SessionStart,
    TurnEnded,
    Unknown,
)
from coding_genesis.events import Event, ResultEvent, TextEvent, ToolCallEvent, UsageEvent

CLI = str(Path(__file__).resolve().parents[1] / "fakes" / "twoway_cli.py")


class TwoWayTranslator(Translator):
    def translate(self, obj: dict[str, Any]) -> Sequence[Event]:
        kind = obj.get("type")
        if kind == "text":
            return [TextEvent(str(obj.get("text", "")))]
        if kind == "tool":
            return [ToolCallEvent(str(obj.get("pid", "t")), str(obj.get("name")), obj.get("input"))]
        if kind == "usage":
            usage = obj.get("usage")
            return [UsageEvent(usage)] if isinstance(usage, dict) else ()
        if kind == "done":
            failed = bool(obj.get("interrupted") or obj.get("ended"))
            return [ResultEvent(is_error=failed, subtype="done", text="")]
        return ()


class TwoWayProtocol(ControlProtocol):
    name: ClassVar[str] = "twoway"

    def __init__(self, steer: bool = False) -> None:
        self._asks: set[int] = set()

    def command(self, start: SessionStart) -> CommandSpec:
        return CommandSpec(args=(CLI,), env={"TWOWAY_SESSION": start.resume or "sess-1"})

    def translator(self) -> Translator:
        return TwoWayTranslator()

    def opening(self, start: SessionStart) -> list[Outgoing]:
        return [{"op": "hello"}]

    def begin_turn(self, prompt: str) -> list[Outgoing]:
        return [{"op": "prompt", "text": prompt}]

    def interrupt(self) -> list[Outgoing]:
        return [{"op": "interrupt"}]

    def answer(self, ask: PermissionAsk, decision: Decision) -> list[Outgoing]:
        self._asks.discard(ask.key)
        return [
            {
                "op": "answer",
                "id": ask.key,
                "allow": decision.allowed,
                "message": decision.message,
                "input": dict(decision.input) if decision.input is not None else ask.request.input,
                "end": decision.end_turn,
            }
        ]

    def receive(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        kind = obj.get("type")
        if kind == "ready":
            return [Ready(str(obj.get("session")))]
        if kind in ("text", "tool", "usage"):
            return [FORWARD]
        if kind == "done":
            return [FORWARD, TurnEnded("interrupted" if obj.get("interrupted") else "completed")]
        if kind == "ask":
            n = obj.get("id")
            if not isinstance(n, int):
                return [ProtocolFault(f"an ask without a numeric id: {obj!r}")]
            self._asks.add(n)
            tool = str(obj.get("tool"))
            raw = obj.get("input")
            data: dict[str, Any] = raw if isinstance(raw, dict) else {}
            kind_of: ToolKind = (
                "write" if tool == "Write" else "command" if tool == "Bash" else "other"
            )
            return [
                PermissionAsk(
                    n,
                    ApprovalRequest(
                        tool=tool,
                        input=data,
                        kind=kind_of,
                        command=data.get("command") if kind_of == "command" else None,
                        paths=(str(data.get("file_path")),) if kind_of == "write" else (),
                    ),
                )
            ]
        if kind == "answered":
            return [ProtocolFault(f"an answer for an id we never used: {obj.get('id')!r}")]
        return [Unknown(str(kind))]

    def closing(self) -> list[Outgoing]:
        return [{"op": "bye"}]


class TwoWayBackend(Backend):
    name = "twoway"
    executable = sys.executable

    def build_command(self, request: AttemptRequest) -> CommandSpec:
        return CommandSpec(args=(CLI, "--one-shot"))

    def translator(self) -> Translator:
        return TwoWayTranslator()

    def default_program(self) -> Sequence[str] | None:
        return (sys.executable,)

    def control(self) -> ControlProtocol | None:
        return TwoWayProtocol()
