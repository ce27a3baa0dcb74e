"""claude's switches between the turns of a live session: the model
(control request ``set_model``) and the permission level (``set_permission_mode``
and the level's tool rules through ``apply_flag_settings``), each a call the
session awaits before it writes the turn's prompt (an error answer fails the
turn in claude's words; nothing was prompted).

Measured with claude 2.1.330 against the fake model server
(``tests/real_cli/test_turn_switch.py``): ``apply_flag_settings`` merges its
patch shallowly into the flag-settings layer (its schema says so), so a later
``{"permissions": {...}}`` replaces the earlier one: a level switched to by a
turn can be switched back.  The rules of ``--disallowedTools`` and
``--allowedTools`` in argv are another layer, kept for the process's life
(measured without the refusal: a session opened ``read-only`` switched to
``edit`` answers the model's Write "No such tool available: Write. Write is
disabled for this session"; one opened ``full`` switched to ``edit`` still
ran a Bash command unasked): the capability check refuses those switches
(:data:`FIXED_LEVELS`)."""

from __future__ import annotations

from collections.abc import Mapping
from typing import Any

from coding_genesis.control import ControlIntent
from coding_genesis.request import Request

__all__ = ["FIXED_LEVELS", "LEVELS", "SWITCHES", "Switches"]

#: permissions= → (--permission-mode, tools removed with --disallowedTools, tools
#: pre-approved with --allowedTools).  A deny rule wins over every allow rule
#: (the user's settings, ``allowed_tools``), so read-only holds whatever else is
#: configured; in ``-p`` mode a tool that would need approval is refused, so
#: "edit" runs no command the user's settings do not allow.  "full" pre-approves
#: every built-in tool rather than ``bypassPermissions``, which claude refuses to
#: run as root.
LEVELS: dict[str, tuple[str, tuple[str, ...], tuple[str, ...]]] = {
    "read-only": ("default", ("Bash", "Edit", "Write", "MultiEdit", "NotebookEdit"), ()),
    "edit": ("acceptEdits", (), ()),
    "full": (
        "acceptEdits",
        (),
        ("Bash", "Edit", "Write", "MultiEdit", "NotebookEdit", "WebFetch", "WebSearch"),
    ),
}

#: By the level a session opened at (its rules in argv), the levels a turn
#: cannot switch to.
FIXED_LEVELS: Mapping[str, frozenset[str]] = {
    "read-only": frozenset({"edit", "full"}),
    "full": frozenset({"edit"}),
}

#: The control subtypes of the switches: what their answers settle.
SWITCHES = frozenset({"set_model", "set_permission_mode", "apply_flag_settings"})


class Switches:
    """What the session's claude runs with now (its model and level, as the
    opening and the answered switches set them) and the calls a turn needs to
    change them."""

    __slots__ = ("_asked", "_now")

    def __init__(self) -> None:
        #: What an answered switch set: "model", "permissions".
        self._now: dict[str, Any] = {}
        #: The switch each pending call makes: request id → (what, value).
        self._asked: dict[str, tuple[str, Any]] = {}

    def calls(self, session: Request | None, turn: Request) -> list[ControlIntent]:
        """The switches ``turn`` needs, of its own options (``turn.turn_options``)."""
        opened = {
            "model": session.model if session else None,
            "permissions": session.permissions if session else None,
        }
        now = opened | self._now
        calls: list[ControlIntent] = []
        if "model" in turn.turn_options and turn.model != now["model"]:
            calls.append(ControlIntent("set_model", {"model": turn.model}))
        level = turn.permissions
        if "permissions" in turn.turn_options and level is not None and level != now["permissions"]:
            mode, denied, granted = LEVELS[level]
            rules = {"deny": list(denied), "allow": list(granted)}
            calls.append(
                ControlIntent(
                    "apply_flag_settings", {"settings": {"permissions": rules}, "level": level}
                )
            )
            calls.append(ControlIntent("set_permission_mode", {"mode": mode, "level": level}))
        return calls

    def fields(self, request_id: str, intent: ControlIntent) -> dict[str, Any]:
        """The control request's fields for ``intent``, remembered until answered."""
        fields = dict(intent.params)
        level = fields.pop("level", None)
        if intent.name == "set_model":
            self._asked[request_id] = ("model", fields.get("model"))
        elif intent.name == "set_permission_mode":
            self._asked[request_id] = ("permissions", level)
        return fields

    def answered(self, request_id: str, ok: bool) -> None:
        """claude answered the switch ``request_id``: in force when ``ok``."""
        switch = self._asked.pop(request_id, None)
        if switch is not None and ok:
            self._now[switch[0]] = switch[1]
