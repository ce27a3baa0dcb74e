"""What differs between the ACP agents we ship, as facts (:class:`~.acp.AcpAgent`):
their mode ids per permission level, the mode that asks before each tool call,
whether ``resume=`` may use ``session/load``, and what a refused tool call does
to the turn.  Measured against the fake model server on gemini 0.61, qwen
0.24.4 and opencode 1.18.33 (``/work/shared/notes/more-clis.md``, "ACP
sessions"; ``tests/real_cli/test_acp.py`` keeps them true).
"""

from __future__ import annotations

from .acp import AcpAgent

__all__ = ["GEMINI", "OPENCODE", "QWEN"]

#: gemini ``--acp``: in its ``default`` mode it asks before a shell command
#: that changes anything or a write (it runs ``echo`` unasked); ``plan`` is
#: read-only, ``autoEdit`` approves edits, ``yolo`` everything.  Its
#: ``session/load`` answers "No previous sessions found" and wipes the
#: session it was asked to load: resume is refused.  A refusal is told to the
#: model, and the turn goes on.  It asks before every MCP tool call, titled
#: ``add (genesis-<hex> MCP Server)``.
GEMINI = AcpAgent(
    "gemini",
    modes={"read-only": "plan", "edit": "autoEdit", "full": "yolo"},
    ask_mode="default",
    resume=(
        "gemini 0.61's session/load fails ('No previous sessions found') and wipes the "
        "session's stored history; resume= is refused rather than lose it "
        "(a one-shot run(resume=...) without an approver still resumes, with --resume)"
    ),
    refusal="the model is told and the turn goes on",
    mcp_title="{tool} ({server} MCP Server)",
)

#: qwen ``--acp``: its sessions start in the mode of its settings; ``default``
#: asks before edits and shell commands (its ``auto`` lets an LLM classifier
#: decide, which against a fake model silently denies).  A refusal ends the
#: turn (``end_turn``, the tool call ``failed``).  Its model is a configuration
#: option (``configOptions``): a turn switches it; one its settings do not
#: offer is refused ("Model 'm-b' not found for authType 'openai'").
QWEN = AcpAgent(
    "qwen",
    modes={"read-only": "plan", "edit": "auto-edit", "full": "yolo"},
    ask_mode="default",
    refusal="the tool call fails and the turn ends (end_turn)",
    switches_model=True,
)

#: opencode ``acp``: its only modes are its agents (``build``, ``plan``);
#: whether it asks is its ``permission`` configuration, which the backend's
#: command sets (``OPENCODE_PERMISSION`` per level, ``{"permission": "ask"}``
#: for an approver).  A refusal fails the call and ends the turn.  Asking, it
#: titles an MCP tool call ``genesis-<hex>_add``.
OPENCODE = AcpAgent(
    "opencode",
    refusal="the tool call fails and the turn ends (end_turn)",
    mcp_title="{server}_{tool}",
    permissions=(
        "levels as OPENCODE_PERMISSION (a denied tool is not offered); an approver: "
        '{"permission": "ask"} in OPENCODE_CONFIG_CONTENT'
    ),
)
