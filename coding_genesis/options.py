"""The bottom vocabulary: the closed vocabularies as ``Literal`` types and a
few plain values, nothing else.

A typo in one of these is a type error (and a
:class:`~coding_genesis.errors.ConfigError` at run time).  The options of a
request and the settings of an agent are declared in
:mod:`coding_genesis.request` and :mod:`coding_genesis.config`; their old
names here still resolve, with a ``DeprecationWarning``.
"""

from __future__ import annotations

import enum
import importlib
from collections.abc import Callable
from typing import Any, Literal, TypeAlias

from coding_genesis._util.renamed import old_names

__all__ = [
    "AGENT_DEFAULT",
    "KEEP_RESULTS",
    "PERMISSION_LEVELS",
    "SETTING_SOURCES",
    "AgentDefault",
    "Isolation",
    "Keep",
    "MessageUsage",
    "Mode",
    "Permissions",
    "SettingSource",
    "Trigger",
    "TurnHow",
]

#: One permission level across CLIs, from the most restrictive to the least
#: (each backend declares the levels it enforces: ``Backend.permission_levels``).
Permissions: TypeAlias = Literal["read-only", "edit", "full"]
#: Where a CLI's own settings come from: the user's (home directory), the
#: project's (files the working directory holds, shared through the
#: repository) and the local ones (the working directory's files kept out of
#: the repository).  ``setting_sources=`` chooses which a run reads; None: the
#: user's alone (see docs/security.md, "Repository files").
SettingSource: TypeAlias = Literal["user", "project", "local"]
#: What a translator makes of the usage a CLI reports mid-stream (see
#: :class:`~coding_genesis.events.Translator`).
MessageUsage: TypeAlias = Literal["live", "folded", "off"]
#: How a run is isolated: in a fresh git worktree (None: in ``cwd`` itself).
Isolation: TypeAlias = Literal["worktree"]
#: When an isolated run's worktree is kept.
Keep: TypeAlias = Literal["never", "on_failure", "always"]
#: Who started a run: the caller (a prompt), or the CLI itself between a
#: session's turns.
Trigger: TypeAlias = Literal["user", "cli"]
#: What a request is: a one-shot ``run()``, a live session, or one turn of a
#: live session (what it sets for itself only: the session was checked at open).
Mode: TypeAlias = Literal["run", "session", "turn"]
#: How a turn of a live session ended: the CLI's own ending (``completed``,
#: ``failed``, ``interrupted``: :class:`~coding_genesis.control.TurnEnded`'s
#: subset), a refusal ended it (``denied``), the CLI broke its protocol
#: (``fault``), or it exited mid-turn (``died``).
TurnHow: TypeAlias = Literal["completed", "failed", "interrupted", "denied", "fault", "died"]


class AgentDefault(enum.Enum):
    """The type of :data:`AGENT_DEFAULT`: an option not given to ``run()``."""

    AGENT_DEFAULT = "the agent's setting"

    def __repr__(self) -> str:
        return "<the agent's setting>"


#: A ``run()`` option left out: the agent's setting applies (for ``retry``,
#: the agent's policy; ``retry=None`` is one attempt).
AGENT_DEFAULT = AgentDefault.AGENT_DEFAULT

#: The permission levels, from the most restrictive to the least.
PERMISSION_LEVELS: tuple[Permissions, ...] = ("read-only", "edit", "full")
#: Where a CLI's settings come from (``setting_sources=``), in this order.
SETTING_SOURCES: tuple[SettingSource, ...] = ("user", "project", "local")

#: The results a live session keeps by default (``keep_results=``): a long
#: session's memory stays bounded whatever its turns answer.
KEEP_RESULTS = 100

#: Names that moved: old name -> (module, new name).  Resolved on use, with a
#: warning (a string import: the bottom layer imports nothing above it).
_MOVED: dict[str, tuple[str, str]] = {
    "RunOptions": ("coding_genesis.request", "RunOptions"),
    "LiveOptions": ("coding_genesis.request", "LiveOptions"),
    "TurnOptions": ("coding_genesis.request", "RequestOptions"),
    "SessionOptions": ("coding_genesis.request", "CallOptions"),
    "RetrySetting": ("coding_genesis.request", "RetrySetting"),
    "OutputSchemaSetting": ("coding_genesis.request", "OutputSchemaSetting"),
    "RUN_OPTION_NAMES": ("coding_genesis.request", "RUN_OPTION_NAMES"),
    "LIVE_OPTION_NAMES": ("coding_genesis.request", "LIVE_OPTION_NAMES"),
    "SESSION_OPTION_NAMES": ("coding_genesis.request", "CALL_OPTION_NAMES"),
    "AgentSettings": ("coding_genesis.config", "AgentSettings"),
    "Settings": ("coding_genesis.config", "Settings"),
    "BreakerSetting": ("coding_genesis.config", "BreakerSetting"),
}


def _moved(module: str, new: str) -> tuple[str, Callable[[], Any]]:
    return f"use {module}.{new}", lambda: getattr(importlib.import_module(module), new)


__getattr__ = old_names(__name__, {name: _moved(*where) for name, where in _MOVED.items()})
