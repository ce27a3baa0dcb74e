"""A backend for ``tests/fakes/twoway_cli.py``: its ControlProtocol and translator.

The session machinery is tested through it (states, approvals, interrupt,
the protocol's failure modes); claude's and codex's own protocols are tested
in ``tests/backends`` and against the real CLIs in ``tests/real_cli``.
"""

from __future__ import annotations

import sys
from collections.abc import Mapping, Sequence
from pathlib import Path
from typing import Any, ClassVar

from coding_genesis.agent import CodingGenesisAgent
from coding_genesis.approval import ApprovalRequest, Decision, ToolKind
from coding_genesis.backend import Backend, CommandSpec, Translator
from coding_genesis.control import (
    FORWARD,
    ControlProtocol,
    HookCall,
    Incoming,
    Outgoing,
    PermissionAsk,
    ProtocolFault,
    Ready,
    ToolCall,
    TurnEnded,
    Unknown,
)
from coding_genesis.events import Event, ResultEvent, TextEvent, ToolCallEvent, UsageEvent
from coding_genesis.hooks import HookEffect, HookEvent, HookInput, HookResult
from coding_genesis.request import Request
from coding_genesis.tools import ToolResult

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
    can_host_tools: ClassVar[bool] = True
    changes_input: ClassVar[bool] = True
    #: A pre-tool hook can do everything; a turn's end is only observed.
    hook_effects: ClassVar[Mapping[HookEvent, frozenset[HookEffect]]] = {
        "pre_tool": frozenset({"block", "input", "context"}),
        "turn_end": frozenset(),
    }

    def __init__(self, steer: bool = False) -> None:
        self._asks: set[int] = set()
        self._hooked: dict[int, HookResult] = {}

    def command(self, start: Request) -> CommandSpec:
        return CommandSpec(args=(CLI,), env={"TWOWAY_SESSION": start.resume or "sess-1"})

    def translator(self) -> Translator:
        return TwoWayTranslator()

    def opening(self, start: Request) -> list[Outgoing]:
        return [{"op": "hello"}]

    def begin_turn(self, prompt: str) -> list[Outgoing]:
        return [{"op": "prompt", "text": prompt}]

    def interrupt(self) -> list[Outgoing]:
        return [{"op": "interrupt"}]

    def answer(self, ask: PermissionAsk, decision: Decision) -> list[Outgoing]:
        self._asks.discard(ask.key)
        hooked = self._hooked.pop(ask.key, HookResult())
        return [
            {
                "op": "answer",
                "id": ask.key,
                "allow": decision.allowed,
                "message": decision.message,
                "input": dict(decision.input) if decision.input is not None else ask.request.input,
                "end": decision.end_turn,
                "context": hooked.context,
            }
        ]

    def answer_hook(self, call: HookCall, result: HookResult) -> list[Outgoing]:
        if call.key is None:
            return []  # observed: the CLI waits for nothing
        if call.ask is not None and not result.block:
            self._hooked[call.key] = result
            return []
        return [
            {
                "op": "hook_answer",
                "id": call.key,
                "block": result.block,
                "message": result.message,
                "input": dict(result.input) if result.input is not None else None,
                "context": result.context,
            }
        ]

    def answer_tool(self, call: ToolCall, result: ToolResult) -> list[Outgoing]:
        return [{"op": "result", "id": call.key, "text": result.text, "error": result.is_error}]

    def receive(self, obj: dict[str, Any]) -> Sequence[Incoming]:
        kind = obj.get("type")
        if kind == "call":
            # This CLI does not report the call in its stream: the session does.
            arguments = obj.get("arguments")
            args: dict[str, Any] = arguments if isinstance(arguments, dict) else {}
            return [ToolCall(obj.get("id"), str(obj.get("name")), args, reported=False)]
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
        if kind == "hook":
            return [self._hook(obj)]
        if kind == "answered":
            return [ProtocolFault(f"an answer for an id we never used: {obj.get('id')!r}")]
        return [Unknown(str(kind))]

    def _hook(self, obj: dict[str, Any]) -> Incoming:
        if obj.get("event") == "turn_end":
            return HookCall(None, HookInput("turn_end", raw=obj))
        n = obj.get("id")
        if not isinstance(n, int):
            return ProtocolFault(f"a hook point without a numeric id: {obj!r}")
        tool = str(obj.get("tool"))
        raw = obj.get("input")
        data: dict[str, Any] = raw if isinstance(raw, dict) else {}
        kind_of: ToolKind = "command" if tool == "Bash" else "other"
        hook = HookInput("pre_tool", tool=tool, input=data, kind=kind_of, raw=obj)
        ask = None
        if obj.get("ask"):
            self._asks.add(n)
            ask = PermissionAsk(n, ApprovalRequest(tool=tool, input=data, kind=kind_of))
        return HookCall(n, hook, ask)

    def closing(self) -> list[Outgoing]:
        return [{"op": "bye"}]


class TwoWayBackend(Backend):
    name = "twoway"
    executable = sys.executable

    def build_command(self, request: Request) -> CommandSpec:
        return CommandSpec(args=(CLI, "--one-shot"))

    def translator(self) -> Translator:
        return TwoWayTranslator()

    def default_program(self) -> Sequence[str] | None:
        return (sys.executable,)

    def control(self) -> ControlProtocol | None:
        return TwoWayProtocol()


def one_way_backend() -> Backend:
    """A backend with no two-way protocol (every shipped CLI has one now: claude,
    codex and the failer their own, gemini, qwen and opencode over ACP): a
    generic backend of a stream-json CLI."""
    from coding_genesis.backends.generic import GenericBackend

    return GenericBackend("oneway", command=[sys.executable, CLI])


def agent(tmp_path: Path, **settings: Any) -> CodingGenesisAgent:
    """An agent of the two-way fake with the session tests' short clocks, its
    ledger in ``tmp_path`` unless ``ledger=`` says otherwise."""
    settings.setdefault("timeout", 20)
    settings.setdefault("grace", 1.0)
    settings.setdefault("ledger", str(tmp_path / "ledger"))
    return CodingGenesisAgent(TwoWayBackend(), cwd=str(tmp_path), **settings)
