"""What a live session can do on a backend, in words: ``genesis doctor``'s
``sessions`` row, read from the facts the capability check reads (the
backend's protocol: its hook points, host tools, steering, resume)."""

from __future__ import annotations

from coding_genesis.backend import Backend
from coding_genesis.control import ControlProtocol

__all__ = ["sessions"]


def sessions(backend: Backend) -> str:
    """What a live session can do on ``backend`` (``approver=``, ``hooks=``,
    ``tools=``, steer, resume), as the agent's own checks answer it."""
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis.backends.acp import AcpControl
    from coding_genesis.hooks import hook_points

    protocol = backend.control()
    if protocol is None:
        return "none: one-shot runs only (approver=, hooks=, tools= and sessions need a two-way protocol)"
    hooks = ", ".join(hook_points(protocol.hook_effects)) or "none"
    said = [
        f"approver=: yes; hooks=: {hooks}; tools=: {_tools(protocol)}; "
        f"steer: {'yes' if protocol.can_steer else 'no'}"
    ]
    if isinstance(protocol, AcpControl):
        agent = protocol.agent
        modes = ", ".join(f"{level}={mode}" for level, mode in agent.modes.items()) or "none"
        asks = f"asks in mode {agent.ask_mode}" if agent.ask_mode else "asks in its default mode"
        broken = protocol.resume_refusal
        resume = f"refused ({broken})" if broken else "session/load, where offered"
        said.insert(0, "over the Agent Client Protocol")
        enforced = agent.permissions or f"modes: {modes}; {asks}"
        said.append(f"{enforced}; resume: {resume}")
    elif protocol.name:
        said.insert(0, f"over {protocol.name}")
    return "; ".join(said)


def _tools(protocol: ControlProtocol) -> str:
    """Whether ``tools=`` works, and how where it needs more than the protocol."""
    if not protocol.can_host_tools:
        return "no"
    if not protocol.tools_over_mcp:
        return "yes"
    # lazy: `genesis --help` imports only the parsers
    from coding_genesis._live.mcpbridge import MCP_MISSING, mcp_missing

    return f"no: {MCP_MISSING}" if mcp_missing() else "yes, over MCP"
