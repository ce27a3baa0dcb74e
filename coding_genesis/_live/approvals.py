"""One tool call a live CLI asked about, settled: by the session's "always"
answers (:class:`~coding_genesis.approval.Remembered`), else the approver
asked (or the permission level's refusal); its decision, and the record the
turn's result and its ``approval`` event carry.

What the approver answered is normalized by :func:`coding_genesis.approval.decide`
(a timeout, a raise, a wrong answer each deny); this module adds what a run
keeps of it.  The "always" answers live here, not in a backend's protocol, so
that their scope and their records are the same on every backend: a protocol
answers each call once (never "for the session"), and a repeat is settled
here with ``source: "always"``.
"""

from __future__ import annotations

import time
from dataclasses import dataclass

from coding_genesis.approval import (
    ApprovalRecord,
    ApprovalRequest,
    Approver,
    Decision,
    Remembered,
    decide,
)
from coding_genesis.options import Permissions
from coding_genesis.run_events import ApprovalEvent

__all__ = ["Settled", "approval_event", "settle", "withdrawn_record"]

#: The record's fields that the event carries as its core (the rest is its ``extra``).
_CORE = frozenset(("tool", "allowed", "decision", "source"))


@dataclass(frozen=True, slots=True)
class Settled:
    """A settled request: the decision, the result's record of it and, when
    the refusal ends the turn, why (else "")."""

    decision: Decision
    record: ApprovalRecord
    ends_turn: str

    def event(self, request: ApprovalRequest) -> ApprovalEvent:
        """The ``approval`` event (its input is redacted on the way to the bus)."""
        return approval_event(self.record, request)


def approval_event(record: ApprovalRecord, request: ApprovalRequest) -> ApprovalEvent:
    """The ``approval`` event of one record (its input is redacted on the way to the bus)."""
    extra = {k: v for k, v in record.to_dict().items() if k not in _CORE}
    extra["input"] = dict(request.input)
    return ApprovalEvent(request.tool, record.allowed, record.decision, record.source, extra)


async def settle(
    request: ApprovalRequest,
    approver: Approver | None,
    timeout: float,
    permissions: Permissions | None,
    remembered: Remembered | None = None,
) -> Settled:
    """Settle ``request``: a request the backend could not read whole
    (``unreadable``) is denied first, nobody asked (what it would touch is not
    known, so nothing may allow it, an "always" answer included); else by an
    "always" answer of the session (``remembered``); else ask ``approver``
    (within ``timeout``) and keep its answer if it is one for the session;
    without an approver, the permission level did not settle the request: it
    is denied with a reason."""
    started = time.monotonic()
    error: str | None = None
    covers: str | None = None
    known = None
    if request.unreadable is None and remembered is not None:
        known = remembered.recall(request)
    if request.unreadable is not None:
        decision = Decision.deny(
            f"denied: genesis could not read this tool call ({request.unreadable})",
            reason=f"unreadable: {request.unreadable}",
        )
        source = "unreadable"
    elif known is not None:
        decision, source = known, "always"
    elif approver is None:
        level = permissions or "the CLI's default"
        decision = Decision.deny(
            f"not allowed by permissions={level}; pass approver= to decide each tool call"
        )
        source = "permissions"
    else:
        decided = await decide(approver, request, timeout=timeout)
        decision, source, error = decided.decision, decided.source, decided.error
        if remembered is not None and source == "approver":
            covers = remembered.keep(request, decision)
    always = covers  # what this answer settles from now on
    if covers is None and source == "approver" and decision.always:
        always = f"this call only (a {request.kind} call is not remembered)"
    record = ApprovalRecord(
        tool=request.tool,
        kind=request.kind,
        tool_call_id=request.tool_call_id,
        turn=request.turn,
        allowed=decision.allowed,
        decision=decision.option.value,
        source=source,
        reason=decision.reason or None,
        message=decision.message or None,
        elapsed_s=round(time.monotonic() - started, 6),
        error=error,
        always=always,
    )
    ends = ""
    if not decision.allowed and decision.end_turn:
        ends = f"{request.tool} refused and the turn ended: {decision.message or 'denied'}"
    return Settled(decision, record, ends)


def withdrawn_record(request: ApprovalRequest, ended: str) -> ApprovalRecord:
    """The record of a question the turn's end withdrew before the approver
    answered (an interrupt, the CLI gone): denied, never run."""
    return ApprovalRecord(
        tool=request.tool,
        kind=request.kind,
        tool_call_id=request.tool_call_id,
        turn=request.turn,
        allowed=False,
        decision=Decision.deny().option.value,
        source="withdrawn",
        withdrawn=True,
        reason=f"the turn ended ({ended}) before the approver answered",
        message=None,
        elapsed_s=None,
    )
