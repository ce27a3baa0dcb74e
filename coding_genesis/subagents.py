"""Subagents of your own (``agents=``): named helpers the model may hand a
task to, each with its own system prompt, tools and model.

claude runs them through its ``Agent`` tool (``subagent_type`` names one): a
live session sends them in its ``initialize`` request, a one-shot run as
``--agents <json>``.  Other CLIs have no such definitions: the capability
check refuses ``agents=`` there, in its one wording.  A definition is code's
choice (its prompt steers a model, its tools widen what that model may do):
untrusted input may not set it.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from coding_genesis.errors import ConfigError

__all__ = ["Subagent", "subagent_table"]

#: A subagent's name: what the model passes as ``subagent_type``.
_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9_.-]{0,63}")


@dataclass(frozen=True, slots=True)
class Subagent:
    """One subagent: ``description`` tells the model when to use it, ``prompt``
    is its system prompt, ``tools`` the tools it may use (None: the
    session's), ``model`` its model (None: the CLI's choice; claude takes an
    alias such as ``sonnet`` or ``inherit``)."""

    description: str
    prompt: str
    tools: tuple[str, ...] | None = None
    model: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The definition as claude reads it (unset fields left out)."""
        found: dict[str, Any] = {"description": self.description, "prompt": self.prompt}
        if self.tools is not None:
            found["tools"] = list(self.tools)
        if self.model is not None:
            found["model"] = self.model
        return found


def _text(name: str, field: str, value: object) -> str:
    if not isinstance(value, str) or not value.strip():
        raise ConfigError(f"agents[{name!r}].{field} must be a non-empty string, got {value!r}")
    return value


def _subagent(name: str, value: object) -> Subagent:
    """One definition checked: a :class:`Subagent` or a mapping of its fields."""
    if isinstance(value, Subagent):
        fields: Mapping[str, Any] = {
            "description": value.description,
            "prompt": value.prompt,
            "tools": value.tools,
            "model": value.model,
        }
    elif isinstance(value, Mapping):
        unknown = sorted(str(k) for k in value if k not in Subagent.__dataclass_fields__)
        if unknown:
            raise ConfigError(
                f"agents[{name!r}]: unknown field(s) {', '.join(unknown)}; "
                "a subagent has description, prompt, tools, model"
            )
        fields = value
    else:
        raise ConfigError(f"agents[{name!r}] must be a Subagent, got {value!r}")
    tools = fields.get("tools")
    if tools is not None:
        if isinstance(tools, str | bytes) or not isinstance(tools, Sequence):
            raise ConfigError(f"agents[{name!r}].tools must be a list of tool names or None")
        tools = tuple(_text(name, "tools[]", tool) for tool in tools)
    model = fields.get("model")
    return Subagent(
        _text(name, "description", fields.get("description")),
        _text(name, "prompt", fields.get("prompt")),
        tools,
        None if model is None else _text(name, "model", model),
    )


def subagent_table(value: object) -> dict[str, Subagent]:
    """``agents=`` checked: a mapping of name to :class:`Subagent` (a
    :class:`~coding_genesis.errors.ConfigError` otherwise); None is none."""
    if value is None:
        return {}
    if not isinstance(value, Mapping):
        raise ConfigError(f"agents must be a mapping of name to Subagent, got {value!r}")
    table: dict[str, Subagent] = {}
    for name, given in value.items():
        if not isinstance(name, str) or not _NAME.fullmatch(name):
            raise ConfigError(
                f"agents: {name!r} is no subagent name (letters, digits, '_', '.', '-'; "
                "at most 64, not starting with a sign)"
            )
        table[name] = _subagent(name, given)
    return table
