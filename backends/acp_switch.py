"""An ACP session's switches between turns: the permission level by
``session/set_mode`` (the level's mode, as the opening sets it:
:meth:`AcpControl.mode <coding_genesis.backends.acp.AcpControl.mode>`), the
model by ``session/set_config_option`` of the option ``session/new`` declared
with ``category: "model"``.  Each is a call the session awaits before the
turn's prompt; an error answer (the agent refused, or it declared no model
option) fails the turn in words before anything is prompted.

Which agents take which (``AcpAgent.turn_options``): an agent with modes per
level takes ``permissions=``; ``model=`` where measured (qwen 0.24.4 answers a
model it does not offer with an error, in its words).  opencode sets its
level at start (``OPENCODE_PERMISSION``): a switch is refused by the
capability check."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coding_genesis.control import ControlIntent

__all__ = ["AcpSwitches", "model_option"]


def model_option(result: Mapping[str, Any]) -> str | None:
    """The id of the configuration option ``session/new`` (``session/load``)
    declared for the model (``category: "model"``), if any."""
    options = result.get("configOptions")
    for option in options if isinstance(options, list) else ():
        if isinstance(option, Mapping) and option.get("category") == "model":
            ident = option.get("id")
            if isinstance(ident, str) and ident:
                return ident
    return None


class AcpSwitches:
    """The mode and model the agent runs with now, and the calls a turn needs."""

    __slots__ = ("_asked", "mode", "model", "model_option")

    def __init__(self) -> None:
        #: The mode set (by the opening or a switch), the model a switch set.
        self.mode: str | None = None
        self.model: str | None = None
        #: The model option's id (``configOptions``); None: the agent has none.
        self.model_option: str | None = None
        #: Pending switches: request id → (what, value).
        self._asked: dict[int, tuple[str, str]] = {}

    def calls(self, mode: str | None, model: str | None) -> list[ControlIntent]:
        """The switches to ``mode`` and ``model`` (None: unchanged)."""
        calls = []
        if mode is not None and mode != self.mode:
            calls.append(ControlIntent("set_mode", {"modeId": mode}))
        if model is not None and model != self.model:
            calls.append(ControlIntent("set_model", {"value": model}))
        return calls

    def request(
        self, rid: int, intent: ControlIntent, session_id: str
    ) -> tuple[str, dict[str, Any]]:
        """The method and params of ``intent``, remembered as request ``rid``."""
        if intent.name == "set_mode":
            self._asked[rid] = ("mode", intent.params["modeId"])
            return "session/set_mode", {"sessionId": session_id, **intent.params}
        if self.model_option is None:
            raise ValueError(
                "the agent declared no model option (configOptions of category 'model') "
                "for this session: model= cannot be switched"
            )
        self._asked[rid] = ("model", intent.params["value"])
        params = {"sessionId": session_id, "configId": self.model_option, **intent.params}
        return "session/set_config_option", params

    def pending(self, rid: object) -> bool:
        return rid in self._asked

    def answered(self, rid: int, ok: bool) -> None:
        what, value = self._asked.pop(rid)
        if ok:
            setattr(self, what, value)
