"""The routes of the approval inbox (``/approvals``): list, stream, read,
answer (see docs/serve.md).  The inbox itself is
:mod:`coding_genesis._serve.inbox`."""

from __future__ import annotations

from typing import TYPE_CHECKING, Annotated, Literal

from fastapi import FastAPI, Header, Path as PathParam, Query, Request
from fastapi.responses import Response, StreamingResponse

from coding_genesis._serve import models
from coding_genesis._serve.inbox import TOPIC as INBOX, Refusal
from coding_genesis._serve.replies import (
    SSE,
    error as _error,
    errors as _errors,
    json_response as _json,
)
from coding_genesis._serve.security import Identity

if TYPE_CHECKING:
    from coding_genesis._serve.service import Service

__all__ = ["add_inbox_routes"]

#: An approval named in a path: its id (to read it: a unique prefix of at least 4).
ApprovalId = Annotated[str, PathParam(min_length=1, max_length=100)]


def add_inbox_routes(app: FastAPI, service: Service) -> None:
    """The inbox's routes of one server's application."""

    @app.get(
        "/approvals",
        response_model=None,
        responses={200: {"model": models.ApprovalList}, **_errors()},
    )
    async def list_approvals(
        state: Annotated[models.ApprovalState | Literal["all"], Query()] = "pending",
        run: Annotated[str | None, Query(max_length=100)] = None,
        session: Annotated[str | None, Query(max_length=100)] = None,
        limit: Annotated[int, Query(ge=1, le=1000)] = 100,
    ) -> Response:
        """The approvals of the inbox, newest first: pending ones by default,
        and (``state``) the settled ones, this start's and earlier starts';
        ``run`` or ``session``: only those it asked."""
        views = service.inbox.listing(
            state=None if state == "all" else state, run=run, session=session, limit=limit
        )
        approvals = [models.Approval.model_validate(v) for v in views]
        return _json(models.ApprovalList(approvals=approvals), service)

    @app.get("/approvals/events", response_model=None, responses={200: SSE, **_errors()})
    async def approval_events(
        last_event_id: Annotated[str | None, Header(max_length=200)] = None,
    ) -> StreamingResponse:
        """The inbox as it changes: first an ``inbox`` event (what is pending
        now), then an ``approval_request`` event each time an approval is asked
        or settled (answered, expired, withdrawn); resumable with Last-Event-ID."""
        return StreamingResponse(
            service.hub.follow(INBOX, last_event_id, service.inbox.snapshot),
            media_type="text/event-stream",
            headers={"X-Accel-Buffering": "no"},
        )

    @app.get(
        "/approvals/{approval}",
        response_model=None,
        responses={200: {"model": models.Approval}, **_errors(404, 409)},
    )
    async def get_approval(approval: ApprovalId) -> Response:
        """One approval by its id, or a unique prefix of it (4 characters or more)."""
        try:
            view = service.inbox.find(approval)
        except Refusal as refusal:
            return _error(service, 409, refusal.error, refusal.message)
        if view is None:
            return _error(service, 404, "not_found", f"no approval {approval[:100]!r}")
        return _json(models.Approval.model_validate(view), service)

    @app.post(
        "/approvals/{approval}",
        response_model=None,
        responses={200: {"model": models.Approval}, **_errors(404, 409, 413)},
    )
    async def answer_approval(
        approval: ApprovalId, answer: models.Answer, request: Request
    ) -> Response:
        """Answer a pending approval by its full id: allow, allow_always or deny
        (with a message). The first answer wins; an answer to one already
        answered, expired (its deadline passed, or the server restarted) or
        withdrawn is refused (409) with what happened instead. Recorded with
        the caller's channel (the X-Genesis-Channel header: api, cli,
        dashboard) and name (``by``)."""
        identity: Identity = request.state.identity
        try:
            view = service.inbox.answer(
                approval,
                allow=answer.decision != "deny",
                always=answer.decision == "allow_always",
                message=answer.message,
                end_turn=answer.end_turn,
                by=answer.by,
                channel=identity.channel,
                via=identity.via,
            )
        except Refusal as refusal:
            status = 404 if refusal.error == "not_found" else 409
            return _error(service, status, refusal.error, refusal.message)
        return _json(models.Approval.model_validate(view), service)
