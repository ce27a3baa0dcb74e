"""One tool call a live CLI asked about, settled: the approver asked (or the
permission level's refusal), its decision, and the record the turn's result
and its ``approval`` event carry.

What the approver answered is normalized by :func:`coding_genesis.approval.decide`
(a timeout, a raise, a wrong answer each deny); this module adds what a run
keeps of it.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Any

from coding_genesis.approval import ApprovalRequest, Approver, Decision, decide
from coding_genesis.options import Permissions
from coding_genesis.run_events import ApprovalEvent

__all__ = ["Settled", "settle"]

#: The record's fields that the event carries as its core (the rest is its ``extra``).
_CORE = ("tool", "allowed", "decision", "source")


@dataclass(frozen=True, slots=True)
class Settled:
    """A settled request: the decision, the result's record of it and, when
    the refusal ends the turn, why (else "")."""

    decision: Decision
    record: dict[str, Any]
    ends_turn: str

    def event(self, request: ApprovalRequest) -> ApprovalEvent:
        """The ``approval`` event (its input is redacted on the way to the bus)."""
        extra = {k: v for k, v in self.record.items() if k not in _CORE}
        extra["input"] = dict(request.input)
        decision = self.decision
        return ApprovalEvent(
            request.tool, decision.allowed, decision.option.value, self.record["source"], extra
        )


async def settle(
    request: ApprovalRequest,
    approver: Approver | None,
    timeout: float,
    permissions: Permissions | None,
) -> Settled:
    """Ask ``approver`` (within ``timeout``); without one, the permission
    level did not settle the request: it is denied with a reason.  A request
    the backend could not read whole (``unreadable``) is denied first, nobody
    asked: what it would touch is not known, so nothing may allow it."""
    started = time.monotonic()
    error: str | None = None
    if request.unreadable is not None:
        decision = Decision.deny(
            f"denied: genesis could not read this tool call ({request.unreadable})",
            reason=f"unreadable: {request.unreadable}",
        )
        source = "unreadable"
    elif approver is None:
        level = permissions or "the CLI's default"
        decision = Decision.deny(
            f"not allowed by permissions={level}; pass approver= to decide each tool call"
        )
        source = "permissions"
    else:
        decided = await decide(approver, request, timeout=timeout)
        decision, source, error = decided.decision, decided.source, decided.error
    record: dict[str, Any] = {
        "tool": request.tool,
        "kind": request.kind,
        "tool_call_id": request.tool_call_id,
        "turn": request.turn,
        "allowed": decision.allowed,
        "decision": decision.option.value,
        "source": source,
        "reason": decision.reason or None,
        "message": decision.message or None,
        "elapsed_s": round(time.monotonic() - started, 6),
    }
    if error is not None:
        record["error"] = error
    ends = ""
    if not decision.allowed and decision.end_turn:
        ends = f"{request.tool} refused and the turn ended: {decision.message or 'denied'}"
    return Settled(decision, record, ends)
