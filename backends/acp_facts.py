"""What differs between ACP agents, as facts: :class:`AcpAgent` (each shipped
agent's values are in :mod:`.acp_agents`), and how its ``session/new``
``_meta`` is filled for the settings a request reads."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

__all__ = ["AcpAgent", "session_meta"]


@dataclass(frozen=True, slots=True)
class AcpAgent:
    """What differs between ACP agents, as facts (see :mod:`.acp_agents`).

    ``modes``: the mode id (``session/set_mode``) of each permission level the
    agent enforces by a mode; ``ask_mode``: the mode in which it asks before
    every tool call it can ask about (set when an approver decides, and when
    no level is given; None: the agent asks in its default mode, or the
    backend's command sees to it, as opencode's configuration).  ``resume``:
    None when ``resume=`` uses ``session/load`` where the agent offers it
    (``loadSession``); else why resuming is refused (the protocol's
    ``resume_refusal``, which the capability check reads).  ``refusal``: what a refused tool call does to the
    turn (for the docs and the capability check); ``permissions``: how the
    agent enforces the levels and asks, when its modes do not.
    """

    name: str
    modes: Mapping[str, str] = field(default_factory=dict)
    ask_mode: str | None = None
    resume: str | None = None
    refusal: str = ""
    #: How the agent enforces permission levels and asks, when not by modes.
    permissions: str = ""
    #: ``add_dirs=`` go in ``session/new``'s (``session/load``'s)
    #: ``additionalDirectories``, which the agent must offer
    #: (``sessionCapabilities.additionalDirectories``); False: the backend's
    #: command gives them (gemini's ``--include-directories``, qwen's
    #: ``--add-dir``), or the backend takes none.
    directories: bool = False
    #: How the agent titles its permission request for a tool of an MCP
    #: server (``{tool}``, ``{server}``): a request so titled for one of the
    #: caller's functions, on the server the session serves, is allowed once
    #: without asking (the approver is never asked about the caller's own
    #: code).  That server's name is the session's own and unguessable, so no
    #: server of the repository's or the user's matches it; any other title
    #: goes to the approver.  Empty: not known; the agent's requests go to the
    #: approver.
    mcp_title: str = ""
    #: ``session/new``'s (``session/load``'s) ``_meta``, where the agent is
    #: told which settings to read: the string ``"{setting_sources}"`` stands
    #: for the sources a request reads (``setting_sources=``, else
    #: :attr:`settings_default`), ``"{without_project}"`` for whether
    #: "project" is not among them (claude-agent-acp's ``strictMcpConfig``).
    #: Empty: no ``_meta``.
    session_meta: Mapping[str, Any] = field(default_factory=dict)
    #: The sources read when a request names none (the backend's
    #: ``default_setting_sources``): what ``session_meta`` says then.
    settings_default: tuple[str, ...] = ()
    #: A turn may switch the model (``session/set_config_option`` of the
    #: option of category "model"): measured for this agent (see :mod:`.acp_switch`).
    switches_model: bool = False
    #: The agent reports its context's use in ``usage_update`` (``used`` of
    #: ``size``; claude-agent-acp does): its protocol is a :class:`ReportingAcpControl`.
    usage: bool = False


def session_meta(template: object, sources: tuple[str, ...]) -> Any:
    """``template`` (:attr:`AcpAgent.session_meta`) with its placeholders
    filled for ``sources``."""
    if template == "{setting_sources}":
        return list(sources)
    if template == "{without_project}":
        return "project" not in sources
    if isinstance(template, Mapping):
        return {str(k): session_meta(v, sources) for k, v in template.items()}
    if isinstance(template, list | tuple):
        return [session_meta(v, sources) for v in template]
    return template
